"""Normalizers: codepoints in, codepoints out, with the source index of every output codepoint.

Every normalizer here is a per-codepoint rewrite, so it is compiled once into a single ragged map
over all 0x110000 codepoints (``table``) and applied to a whole batch with one gather
(:func:`gputok.ragged.expand_rows`). The source index lets the tokenizer report character
offsets into the original strings, as huggingface ``tokenizers`` does.

``BertNormalizer`` follows huggingface ``tokenizers``' BertNormalizer: clean_text (drop NUL,
U+FFFD and other-category characters, map whitespace to a space), handle_chinese_chars (pad CJK
ideographs with spaces), strip_accents (NFD, then drop nonspacing marks; defaults to
``lowercase``), lowercase. It leaves out NFD's canonical reordering of combining marks, which only
changes the result when marks of different classes that are not nonspacing marks meet.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import torch

from . import _components, _reference_unicode, unicode
from .ragged import Ragged, expand_rows


@functools.lru_cache(maxsize=16)
def _bert_table(clean_text: bool, handle_chinese_chars: bool, strip_accents: bool, lowercase: bool) -> Ragged:
    flags = "".join(str(int(f)) for f in (clean_text, handle_chinese_chars, strip_accents, lowercase))

    def build() -> dict:
        table = _compose_bert(clean_text, handle_chinese_chars, strip_accents, lowercase)
        return {"values": table.values.numpy(), "offsets": table.offsets.numpy()}

    # Composing takes ~1 s, so the result is cached on disk, keyed by everything it depends on:
    # the flags, the generated overrides, and the code that builds it.
    code = hashlib.sha256(Path(__file__).read_bytes() + Path(unicode.__file__).read_bytes()).hexdigest()[:12]
    arrays = unicode.disk_cached(f"bert-normalizer-{flags}-{_reference_unicode.VERSION}-{code}", build)
    return Ragged(torch.from_numpy(arrays["values"]), torch.from_numpy(arrays["offsets"]))


def _compose_bert(clean_text: bool, handle_chinese_chars: bool, strip_accents: bool, lowercase: bool) -> Ragged:
    table = unicode.identity_map()
    if clean_text:
        table = unicode.compose(table, unicode.step_map("clean_text"))
    if handle_chinese_chars:
        table = unicode.compose(table, unicode.pad_map(unicode.cjk_mask(), ord(" ")))
    if strip_accents:
        table = unicode.compose(table, unicode.step_map("strip_accents"))
    if lowercase:
        table = unicode.compose(table, unicode.step_map("lowercase"))
    return table


class Normalizer:
    """A per-codepoint rewrite; subclasses provide ``table`` and JSON (de)serialization."""

    type: str
    table: Ragged

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        """Normalize ragged codepoints; returns the result and each output's index into ``text.values``.

        >>> out, src = BertNormalizer()(Ragged.from_lengths(torch.tensor([72, 201, 0x4E00]), torch.tensor([3])))
        >>> out.values.tolist(), src.tolist()
        ([104, 101, 32, 19968, 32], [0, 1, 2, 2, 2])
        """
        table = self.table if self.table.device == text.device else self._table_on(text.device)
        out, src = expand_rows(table, text.values.long())
        return Ragged(out.values, out.offsets[text.offsets]), src

    def _table_on(self, device: torch.device) -> Ragged:
        cached = getattr(self, "_device_tables", {})
        if device not in cached:
            cached[device] = self.table.to(device)
            self._device_tables = cached
        return cached[device]

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


class BertNormalizer(Normalizer):
    type = "BertNormalizer"

    def __init__(self, *, clean_text: bool = True, handle_chinese_chars: bool = True,
                 strip_accents: bool | None = None, lowercase: bool = True) -> None:
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.strip_accents = strip_accents
        self.lowercase = lowercase
        strip = lowercase if strip_accents is None else strip_accents
        self.table = _bert_table(clean_text, handle_chinese_chars, strip, lowercase)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "clean_text": self.clean_text,
                "handle_chinese_chars": self.handle_chinese_chars,
                "strip_accents": self.strip_accents, "lowercase": self.lowercase}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> BertNormalizer:
        return cls(clean_text=spec.get("clean_text", True),
                   handle_chinese_chars=spec.get("handle_chinese_chars", True),
                   strip_accents=spec.get("strip_accents"), lowercase=spec.get("lowercase", True))


NORMALIZERS = {cls.type: cls for cls in (BertNormalizer,)}


def from_json(spec: dict[str, Any] | None) -> Normalizer | None:
    return _components.from_json(spec, NORMALIZERS, "normalizer")
