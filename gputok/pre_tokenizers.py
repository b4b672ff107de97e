"""Pre-tokenizers: split normalized codepoints into words, as index ranges into the flat batch.

A word is the half-open range ``[starts[i], ends[i])`` of the normalized ``values``; words stay in
text order, and ``text_offsets`` (len texts + 1) tells which words belong to which text. Nothing
is copied: the model later gathers the characters of the *unique* words only.

``BertPreTokenizer`` follows huggingface ``tokenizers``' BertPreTokenizer: whitespace (Rust's
``char::is_whitespace``) separates words and is dropped; each punctuation character (ASCII
punctuation or a Unicode P* category, with the reference's table quirks) is a word of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import regex
import torch

from . import _components, unicode
from .ragged import Ragged


@dataclass(frozen=True)
class Words:
    starts: torch.Tensor  # int64 [words], index into the normalized values
    ends: torch.Tensor  # int64 [words]
    text_offsets: torch.Tensor  # int64 [texts + 1]

    def lengths(self) -> torch.Tensor:
        return self.ends - self.starts


WORD, SPACE, PUNCTUATION = 0, 1, 2


@functools.lru_cache(maxsize=8)
def _bert_classes(device: torch.device) -> torch.Tensor:
    classes = torch.full((unicode.MAX_CODEPOINT,), WORD, dtype=torch.uint8)
    classes[unicode.bert_punctuation_mask()] = PUNCTUATION
    classes[unicode.white_space_mask()] = SPACE
    return classes.to(device)


def split_by_class(text: Ragged, classes: torch.Tensor) -> Words:
    """Words from per-codepoint classes: WORD runs are words, each PUNCTUATION char is one, SPACE splits.

    >>> classes = torch.tensor([WORD] * 32 + [SPACE] + [PUNCTUATION] * 15 + [WORD] * 80, dtype=torch.uint8)
    >>> w = split_by_class(Ragged.from_lengths(torch.tensor([97, 32, 98, 99, 33, 100]), torch.tensor([4, 2])), classes)
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 4, 5], [1, 4, 5, 6], [0, 2, 4])
    """
    cls = classes[text.values.long()]
    n = cls.numel()
    first_of_text = torch.zeros(n + 1, dtype=torch.bool, device=cls.device)
    first_of_text[text.offsets[:-1]] = True
    first_of_text = first_of_text[:n]
    in_word = cls != SPACE
    prev_joins = torch.zeros(n, dtype=torch.bool, device=cls.device)
    prev_joins[1:] = cls[:-1] == WORD
    starts_word = in_word & ((cls == PUNCTUATION) | ~prev_joins | first_of_text)
    next_starts = torch.ones(n, dtype=torch.bool, device=cls.device)
    next_starts[:-1] = starts_word[1:] | ~in_word[1:] | first_of_text[1:]
    ends_word = in_word & next_starts
    starts = torch.nonzero(starts_word).flatten()
    ends = torch.nonzero(ends_word).flatten() + 1
    counts = torch.zeros(n + 1, dtype=torch.int64, device=cls.device)
    torch.cumsum(starts_word, 0, out=counts[1:])
    return Words(starts, ends, counts[text.offsets])


class BertPreTokenizer:
    type = "BertPreTokenizer"

    def __call__(self, text: Ragged) -> Words:
        return split_by_class(text, _bert_classes(text.device))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> BertPreTokenizer:
        return cls()


class Split:
    """Words are the matches of a regex, as tiktoken splits text before BPE.

    ``pattern`` is a name from :data:`gputok.regex_split.PATTERNS` ("gpt2", "cl100k", "o200k"),
    computed exactly with tensor ops, or any other regex, which runs through the ``regex`` module
    on the CPU (correct, and slower: a Python object per match).
    """

    type = "Split"

    def __init__(self, pattern: str, *, byte_level: bool = False) -> None:
        """``byte_level``: the words feed a byte-level BPE; saved as huggingface writes that,
        ``Sequence[Split(regex), ByteLevel(use_regex=false)]``."""
        from . import regex_split

        self.byte_level = byte_level
        self.rule = pattern if pattern in regex_split.PATTERNS else None
        self.pattern = regex_split.PATTERNS.get(pattern, pattern)
        if self.rule is None:
            try:
                regex.compile(self.pattern)
            except regex.error as e:
                raise ValueError(f"pattern {pattern!r} is neither a known name {sorted(regex_split.PATTERNS)} "
                                 f"nor a valid regex: {e}") from e

    def __call__(self, text: Ragged) -> Words:
        from . import regex_split

        if self.rule is not None:
            return regex_split.split(text, self.rule)
        words = regex_split.split_with_regex(_strings(text), self.pattern)
        return Words(words.starts.to(text.device), words.ends.to(text.device), words.text_offsets.to(text.device))

    def to_json(self) -> dict[str, Any]:
        split = {"type": "Split", "pattern": {"Regex": self.pattern}, "behavior": "Isolated", "invert": False}
        if not self.byte_level:
            return split
        return {"type": "Sequence", "pretokenizers": [
            split, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Split:
        pattern = spec.get("pattern") or {}
        if "Regex" not in pattern or spec.get("behavior", "Isolated") != "Isolated" or spec.get("invert"):
            raise ValueError(f"Split pre-tokenizer {spec} is not supported; gputok reads "
                             "Split(pattern=Regex, behavior=Isolated, invert=false)")
        from . import regex_split

        named = {p: name for name, p in reversed(regex_split.PATTERNS.items())}  # first name wins: gpt2
        return cls(named.get(pattern["Regex"], pattern["Regex"]))


class ByteLevel(Split):
    """huggingface's ByteLevel pre-tokenizer: the GPT-2 split (``use_regex``), bytes as BPE input.

    The byte-to-character mapping of its vocabulary lives in the BPE model; ``add_prefix_space``
    is not supported yet (GPT-2's own files have it off).
    """

    type = "ByteLevel"

    def __init__(self, *, use_regex: bool = True, add_prefix_space: bool = False, trim_offsets: bool = True):
        if add_prefix_space:
            raise ValueError("ByteLevel(add_prefix_space=True) is not supported yet")
        super().__init__("gpt2")
        self.use_regex, self.trim_offsets = use_regex, trim_offsets

    def __call__(self, text: Ragged) -> Words:
        if self.use_regex:
            return super().__call__(text)
        starts = text.offsets[:-1][text.lengths() > 0]
        counts = (text.lengths() > 0).long()
        return Words(starts, starts + text.lengths()[text.lengths() > 0], torch.cat([counts.new_zeros(1), counts.cumsum(0)]))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "add_prefix_space": False, "trim_offsets": self.trim_offsets,
                "use_regex": self.use_regex}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ByteLevel:
        return cls(use_regex=spec.get("use_regex", True), add_prefix_space=spec.get("add_prefix_space", False),
                   trim_offsets=spec.get("trim_offsets", True))


class Sequence:
    """Only the form byte-level tokenizers use: ``[Split(regex), ByteLevel(use_regex=False)]``."""

    type = "Sequence"

    @classmethod
    def from_json(cls, spec: dict[str, Any]):
        steps = [from_json(s) for s in spec.get("pretokenizers", [])]
        if len(steps) == 2 and type(steps[0]) is Split and isinstance(steps[1], ByteLevel) and not steps[1].use_regex:
            steps[0].byte_level = True
            return steps[0]
        raise ValueError("a Sequence pre-tokenizer is supported only as [Split(regex), ByteLevel(use_regex=false)]")


def _strings(text: Ragged) -> list[str]:
    """Python strings of ragged codepoints (one decode of the batch; a slice per text)."""
    joined = text.values.cpu().to(torch.int32).numpy().tobytes().decode("utf-32-le", errors="replace")
    bounds = text.offsets.tolist()
    return [joined[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


PRE_TOKENIZERS = {cls.type: cls for cls in (BertPreTokenizer, Split, ByteLevel, Sequence)}


def from_json(spec: dict[str, Any] | None):
    return _components.from_json(spec, PRE_TOKENIZERS, "pre_tokenizer")
