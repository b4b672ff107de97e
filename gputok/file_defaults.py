"""A tokenizer.json file's own ``truncation`` and ``padding`` sections, honoured as huggingface does.

huggingface ``Tokenizer.from_file(path).encode_batch(...)`` truncates and pads every batch as
those two sections say; :meth:`gputok.Tokenizer.encode_batch` does the same through
:func:`encode_batch` here. The rules followed (tokenizers 0.23, ``utils/truncation.rs`` and
``utils/padding.rs``):

- truncation happens before the post-processor, to ``max_length`` less the template's special
  tokens; ``LongestFirst`` / ``OnlyFirst`` / ``OnlySecond`` share tokens between a pair as
  :func:`gputok.processors.truncate` does; ``direction: "Left"`` keeps the *last* tokens of each
  sequence (:func:`cut_left`). ``stride`` only shapes overflowing rows, which ``encode_batch``
  does not return; but a sequence cut to ``n > 0`` tokens with ``stride >= n`` is an error there
  (huggingface panics: ``Encoding::truncate``), a ValueError here (:func:`check_stride`).
- padding: ``BatchLongest`` pads to the batch's longest row, ``{"Fixed": n}`` to ``n`` (a longer
  row stays as it is: huggingface never truncates when padding); either length is rounded up to
  ``pad_to_multiple_of``; ``pad_id`` fills, on the ``direction`` side, and ``pad_type_id`` is
  the type id of those cells (:func:`encode_fields`: huggingface's ``Encoding.type_ids``).

transformers' ``__call__`` reads only the two directions from these sections (as
``padding_side`` and ``truncation_side`` defaults): :func:`padding_side` and
:func:`truncation_side`; its explicit arguments decide everything else.

Memory: the padded ids once more than the ragged ones (one int64 per cell).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Any

import torch

from . import _cpu_threads
from .ingest import TextInput
from .processors import truncate
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, rows_as_lists

if TYPE_CHECKING:
    from .tokenizer import Encoded, Tokenizer

_STRATEGIES = {"LongestFirst": "longest_first", "OnlyFirst": "only_first", "OnlySecond": "only_second"}


def truncation_section(*, max_length: int, stride: int, strategy: str, direction: str,
                       special_tokens: int = 0) -> dict[str, Any]:
    """A ``truncation`` section from huggingface's ``enable_truncation`` arguments, checked as it
    does: ``stride`` at most ``max_length`` less the ``special_tokens`` a single text gets."""
    names = {v: k for k, v in _STRATEGIES.items()}
    if strategy not in names or direction not in ("left", "right"):
        raise ValueError(f"enable_truncation(strategy={strategy!r}, direction={direction!r}): choose a strategy of "
                         f"{sorted(names)} and a direction of ['left', 'right']")
    if not (isinstance(max_length, int) and isinstance(stride, int) and 0 <= stride < max_length):
        raise ValueError(f"enable_truncation(max_length={max_length!r}, stride={stride!r}): expected integers "
                         "with 0 <= stride < max_length")
    if stride > max_length - special_tokens:
        raise ValueError(f"enable_truncation(max_length={max_length}, stride={stride}): the stride is longer than the "
                         f"{max_length - special_tokens} tokens left per text after {special_tokens} special tokens")
    return {"direction": direction.capitalize(), "max_length": max_length, "strategy": names[strategy],
            "stride": stride}


def padding_section(*, direction: str, pad_id: int, pad_type_id: int, pad_token: str, length: int | None,
                    pad_to_multiple_of: int | None) -> dict[str, Any]:
    """A ``padding`` section from huggingface's ``enable_padding`` arguments, checked."""
    if direction not in ("left", "right"):
        raise ValueError(f"enable_padding(direction={direction!r}): choose 'left' or 'right'")
    for name, value in (("length", length), ("pad_to_multiple_of", pad_to_multiple_of)):
        if value is not None and not (isinstance(value, int) and value >= 0):
            raise ValueError(f"enable_padding({name}={value!r}): expected an integer >= 0 or None")
    return {"strategy": "BatchLongest" if length is None else {"Fixed": length}, "direction": direction.capitalize(),
            "pad_to_multiple_of": pad_to_multiple_of, "pad_id": pad_id, "pad_type_id": pad_type_id,
            "pad_token": pad_token}


def truncation_side(extra: dict[str, Any]) -> str:
    """``"left"`` or ``"right"``: the file's truncation direction (right when the file has none)."""
    return ((extra.get("truncation") or {}).get("direction") or "Right").lower()


def padding_side(extra: dict[str, Any]) -> str:
    """``"left"`` or ``"right"``: the file's padding direction (right when the file has none)."""
    return ((extra.get("padding") or {}).get("direction") or "Right").lower()


def encode_batch(tokenizer: Tokenizer, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None, *,
                 add_special_tokens: bool, allowed_special: str | Set[str],
                 disallowed_special: str | Set[str]) -> list[list[int]]:
    """The ids huggingface's ``encode_batch`` gives for a file with these sections."""
    return encode_fields(tokenizer, texts, pair_texts, add_special_tokens=add_special_tokens,
                         allowed_special=allowed_special, disallowed_special=disallowed_special,
                         with_types=False)["ids"]


def encode_fields(tokenizer: Tokenizer, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None, *,
                  add_special_tokens: bool, allowed_special: str | Set[str], disallowed_special: str | Set[str],
                  with_types: bool = True, sections: bool = True) -> dict[str, list[list[int]]]:
    """``ids`` (and with ``with_types``, ``type_ids`` and ``attention_mask``) of each row as
    huggingface's ``encode_batch`` gives them (``Encoding.ids``, ``.type_ids``,
    ``.attention_mask``), the file's sections applied where ``sections``: padding cells hold
    ``pad_id``, type ``pad_type_id`` and mask 0."""
    truncation = tokenizer._extra.get("truncation") if sections else None
    padding = tokenizer._extra.get("padding") if sections else None
    options: dict[str, Any] = {}
    special = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
    if truncation is not None:
        options = dict(truncation=_STRATEGIES[truncation["strategy"]], max_length=truncation["max_length"],
                       truncation_side=truncation_side(tokenizer._extra))
        if truncation.get("stride"):
            check_stride(tokenizer, texts, pair_texts, truncation, add_special_tokens=add_special_tokens, **special)
    with _cpu_threads.gputok_threads():
        out = tokenizer._encode_tensors(texts, pair_texts, add_special_tokens=add_special_tokens, padding=False,
                                        return_token_type_ids=with_types, **special, **options)
    row_offsets = out["row_offsets"]
    fields = {"ids": out["input_ids"]}
    if with_types:
        fields["type_ids"] = out["token_type_ids"]
        fields["attention_mask"] = torch.ones_like(out["input_ids"])
    if padding is not None:  # the file's values, as huggingface
        fill = {"ids": int(padding["pad_id"]), "type_ids": int(padding.get("pad_type_id") or 0), "attention_mask": 0}
        padded = {name: pad_rows(values, row_offsets, padding, pad_id=fill[name]) for name, values in fields.items()}
        fields = {name: values for name, (values, _) in padded.items()}
        row_offsets = padded["ids"][1]
    return {name: rows_as_lists(values, row_offsets) for name, values in fields.items()}


def check_stride(tokenizer: Tokenizer, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None,
                 truncation: dict[str, Any], *, add_special_tokens: bool, allowed_special: str | Set[str],
                 disallowed_special: str | Set[str]) -> None:
    """Raise where huggingface's truncation panics: a sequence cut to ``n`` tokens, ``0 < n``,
    with ``stride >= n`` (``n`` after the special tokens; for a pair, each sequence's share).
    Costs one encode of the batch without truncation (files with a ``stride`` only)."""
    stride, max_length = int(truncation["stride"]), int(truncation["max_length"])
    template = []
    if add_special_tokens and tokenizer.post_processor is not None:
        template = tokenizer.post_processor.pair if pair_texts is not None else tokenizer.post_processor.single
    added = sum(item.sequence is None for item in template)

    def lengths(batch: Sequence[TextInput]) -> torch.Tensor:
        out = tokenizer._encode_tensors(batch, None, add_special_tokens=False, padding=False,
                                        return_token_type_ids=False, allowed_special=allowed_special,
                                        disallowed_special=disallowed_special)
        return out["row_offsets"].diff()

    first = lengths(texts)
    second = None if pair_texts is None else lengths(pair_texts)
    if max_length - added < 0:
        return  # the encode raises its own error for this
    rows = truncate(first, second, max_length=max_length - added, strategy=_STRATEGIES[truncation["strategy"]])
    for full, kept in ((first, rows.a_len), (second, rows.b_len)):
        if full is None:
            continue
        bad = (kept < full) & (kept > 0) & (kept <= stride)
        if bool(bad.any()):
            n = int(kept[bad][0])
            raise ValueError(f"the truncation section's stride={stride} must be smaller than the {n} tokens a "
                             f"sequence keeps after truncation to max_length={max_length} less {added} special tokens "
                             "(huggingface panics here); lower the stride or raise max_length")


def pad_rows(ids: torch.Tensor, row_offsets: torch.Tensor, padding: dict[str, Any], *,
             pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged rows padded as a ``padding`` section says: every row to the target length (the
    longest row, or ``Fixed``, rounded up to ``pad_to_multiple_of``), a longer row left whole.

    >>> pad_rows(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 3, 4]), {"strategy": "BatchLongest",
    ...          "direction": "Left", "pad_to_multiple_of": 2}, pad_id=0)
    (tensor([0, 1, 2, 3, 0, 0, 0, 4]), tensor([0, 4, 8]))
    """
    lengths = row_offsets.diff()
    strategy = padding["strategy"]
    target = (int(lengths.max()) if lengths.numel() else 0) if strategy == "BatchLongest" else int(strategy["Fixed"])
    multiple = padding.get("pad_to_multiple_of") or 0
    if multiple and target % multiple:
        target += multiple - target % multiple
    widths = torch.clamp(lengths, min=target)
    offsets = offsets_from_lengths(widths)
    total = int(offsets[-1])
    row = row_ids(offsets, total)
    position = positions_in_rows(offsets, total)
    if (padding.get("direction") or "Right") == "Left":
        position = position - (widths - lengths)[row]
    is_token = (position >= 0) & (position < lengths[row])
    source = (row_offsets[:-1][row] + position).clamp(0, max(ids.numel() - 1, 0))
    padded = torch.where(is_token, ids[source] if ids.numel() else 0, pad_id)
    return padded, offsets


def cut_left(first: Encoded, second: Encoded | None, *, max_length: int,
             strategy: str) -> tuple[Encoded, Encoded | None]:
    """The sequences truncated as ``strategy`` says to ``max_length`` tokens a row (special tokens
    already subtracted), keeping the last tokens of each (huggingface's ``direction: "Left"``)."""
    rows = truncate(first.ids.lengths(), None if second is None else second.ids.lengths(), max_length=max_length,
                    strategy=strategy)
    kept = _keep_last(first, rows.a_len)
    return kept, (None if second is None else _keep_last(second, rows.b_len))


def _keep_last(encoded: Encoded, keep: torch.Tensor) -> Encoded:
    """The last ``keep[r]`` tokens (and spans) of each row ``r``."""
    from .tokenizer import Encoded

    offsets = encoded.ids.offsets
    total = encoded.ids.values.numel()
    lengths = offsets.diff()
    row = row_ids(offsets, total)
    chosen = positions_in_rows(offsets, total) >= (lengths - keep)[row]
    spans = None if encoded.spans is None else encoded.spans[chosen]
    return Encoded(Ragged(encoded.ids.values[chosen], offsets_from_lengths(keep)), spans)
