"""Pipeline components are read from tokenizer.json by their ``type`` tag, one registry per stage."""

from typing import Any


# huggingface component types gputok does not read yet, by stage, with the reason (the error and the
# README's components table say it).
NOT_SUPPORTED: dict[str, dict[str, str]] = {
}
# Options of supported types that gputok refuses at load (a clear error naming them), by stage and type.
NOT_SUPPORTED_OPTIONS: dict[str, dict[str, str]] = {
    "pre_tokenizer": {"Sequence": "a ByteLevel step before another step, or a text-rewriting step (Metaspace, "
                                  "ByteLevel with add_prefix_space) after the first: refused at load"},
    "post_processor": {"Sequence": "two processors that add special tokens, or two that trim offsets: refused at load",
                       "ByteLevel": "`trim_offsets` with a Unigram model: refused at load",
                       "RobertaProcessing": "`trim_offsets` with a Unigram model: refused at load"},
}


def from_json(spec: dict[str, Any] | None, registry: dict[str, Any], stage: str):
    """The component ``spec`` describes, or None; an unknown ``type`` names the known ones."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind in NOT_SUPPORTED.get(stage, {}):
        raise ValueError(f"huggingface's {stage} {kind!r} is not supported by gputok yet: {NOT_SUPPORTED[stage][kind]}; "
                         f"supported types: {sorted(registry)}")
    if kind not in registry:
        raise ValueError(f"unknown {stage} type {kind!r}; known types: {sorted(registry)}")
    return registry[kind].from_json(spec)
