"""Pipeline components are read from tokenizer.json by their ``type`` tag, one registry per stage."""

from typing import Any


def from_json(spec: dict[str, Any] | None, registry: dict[str, Any], stage: str):
    """The component ``spec`` describes, or None; an unknown ``type`` names the known ones."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind not in registry:
        raise ValueError(f"unknown {stage} type {kind!r}; known types: {sorted(registry)}")
    return registry[kind].from_json(spec)
