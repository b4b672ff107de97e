"""Normalizers: codepoints in, codepoints out, with the source index of every output codepoint.

Every normalizer here is a per-codepoint rewrite, so it is compiled once into a single ragged map
over all 0x110000 codepoints (``table``) and applied to a whole batch with one gather
(:func:`gputok.ragged.expand_rows`). On CPU tensors each kind runs one numba kernel instead
(``gputok.kernels.normalize_numba``, ``charsmap_numba``: the same outputs, dtypes included);
the torch ops stay as their reference and the CUDA path. The source index lets the tokenizer report character
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

from . import _components, _dispatch, _reference_unicode, unicode
from .ingest import strings
from .kernels.normalize_numba import (prepend_numba, replace_char_numba, replace_spans_numba, rewrite_table_numba,
                                      run_matches_numba, string_matches_numba, strip_numba)
from .ragged import Ragged, expand_rows, offsets_from_lengths, positions_in_rows, row_ids


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
        if _dispatch.on_cpu_kernels(text.device):
            arrays = self.__dict__.get("_numpy_table")
            if arrays is None:
                arrays = self._numpy_table = (self.table.values.numpy(), self.table.offsets.numpy())
            return _wrap(rewrite_table_numba(text.values.numpy(), text.offsets.numpy(), *arrays))
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
    """huggingface's BertNormalizer: clean_text, handle_chinese_chars, strip_accents, lowercase (a codepoint map)."""

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


class Precompiled(Normalizer):
    """The rules of a SentencePiece ``precompiled_charsmap`` as huggingface applies them: per
    grapheme cluster (:mod:`gputok.huggingface_precompiled`). The charsmap kernel rewrites the batch
    by SentencePiece's longest match (:mod:`gputok.charsmap`), which is the same on nearly all
    text; the texts where a cluster may read otherwise are rewritten again as huggingface does.
    (A SentencePiece ``.model``'s normalizer keeps SentencePiece's reading.)
    """

    type = "Precompiled"

    def __init__(self, precompiled_charsmap: bytes) -> None:
        from .charsmap import Charsmap

        self.charsmap = Charsmap(precompiled_charsmap)

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        out, source = self.charsmap.rewrite(text)
        reading = self.charsmap.huggingface
        if text.values.numel() == 0 or int(text.values.max()) < 0x80 and not reading.ascii_may_differ:
            return out, source
        import numpy as np

        in_values, in_offsets = text.values.cpu().numpy(), text.offsets.cpu().numpy()
        differing = reading.differing(in_values, in_offsets)
        if not differing.size:
            return out, source
        # those texts' rows as huggingface rewrites them, spliced between runs of the kernel's rows
        values, offsets, source = out.values.cpu().numpy(), out.offsets.cpu().numpy(), source.cpu().numpy()
        lengths = np.diff(offsets)
        pieces, sources, done = [], [], 0
        for t in differing.tolist():
            pieces.append(values[offsets[done]:offsets[t]])
            sources.append(source[offsets[done]:offsets[t]])
            start = int(in_offsets[t])
            row = "".join(map(chr, in_values[start:in_offsets[t + 1]].tolist()))  # (lone surrogates kept)
            new, new_source = reading.rewrite(row)
            pieces.append(np.fromiter(map(ord, new), dtype=values.dtype, count=len(new)))
            sources.append(np.asarray(new_source, dtype=np.int64) + start)
            lengths[t] = len(new)
            done = t + 1
        pieces.append(values[offsets[done]:])
        sources.append(source[offsets[done]:])
        merged = Ragged.from_lengths(torch.from_numpy(np.concatenate(pieces)), torch.from_numpy(lengths))
        return merged.to(text.device), torch.from_numpy(np.concatenate(sources)).to(text.device)

    def to_json(self) -> dict[str, Any]:
        import base64

        return {"type": self.type, "precompiled_charsmap": base64.b64encode(self.charsmap.blob).decode()}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Precompiled:
        import base64
        import binascii

        try:
            return cls(base64.b64decode(spec.get("precompiled_charsmap") or "", validate=True))
        except binascii.Error as e:
            raise ValueError(f"Precompiled normalizer: precompiled_charsmap is not base64: {e}") from e


class SentencePieceNormalizer(Normalizer):
    """SentencePiece's normalizer: the charsmap rewrite (none for the identity rule), then its
    whitespace rules: leading, trailing and repeated spaces dropped (``remove_extra_whitespaces``),
    a ``▁`` prefix (``add_dummy_prefix``), spaces as ``▁`` (``escape_whitespaces``).

    Saved to tokenizer.json as the huggingface Sequence that does the same on ordinary text:
    Precompiled, Replace("\\A +| +\\z" -> ""), Replace(" {2,}" -> " "), Prepend("▁"), Replace(" " -> "▁").

    >>> n = SentencePieceNormalizer(b"")
    >>> out, src = n(Ragged.from_lengths(torch.tensor([32, 104, 32, 32, 105, 32]), torch.tensor([6])))
    >>> "".join(map(chr, out.values.tolist())), src.tolist()
    ('▁h▁i', [1, 1, 2, 4])
    """

    type = "SentencePiece"

    def __init__(self, precompiled_charsmap: bytes, *, add_dummy_prefix: bool = True,
                 remove_extra_whitespaces: bool = True, escape_whitespaces: bool = True) -> None:
        self.precompiled = Precompiled(precompiled_charsmap) if precompiled_charsmap else None
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.escape_whitespaces = escape_whitespaces

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        from .charsmap import whitespace_rules

        if self.precompiled is not None:  # SentencePiece's longest-match reading, not huggingface's
            out, unit = self.precompiled.charsmap.rewrite(text)
        else:
            out, unit = text, torch.arange(text.values.numel(), device=text.device)
        kept = whitespace_rules(out, unit, add_dummy_prefix=self.add_dummy_prefix,
                                remove_extra_whitespaces=self.remove_extra_whitespaces,
                                escape_whitespaces=self.escape_whitespaces)
        return self.with_emptied_prefix(text, *kept)

    def with_emptied_prefix(self, text: Ragged, out: Ragged, source: torch.Tensor,
                            pieces=None) -> tuple[Ragged, torch.Tensor]:
        """``out`` (what the whitespace rules kept of ``text``) with the dummy prefix as the whole of
        each text they emptied whose dummy SentencePiece still writes: without
        ``remove_extra_whitespaces``, a text of characters the charsmap deletes (user ``pieces``:
        a ``UserPieces``, none by default)."""
        if not self.add_dummy_prefix or self.remove_extra_whitespaces:
            return out, source
        from .models.sentencepiece_options import with_dummy
        from .models.user_pieces import UserPieces

        return with_dummy(self, pieces or UserPieces({}), text, out, source, "\u2581" if self.escape_whitespaces else " ",
                          after_nonempty=False)

    def to_json(self) -> dict[str, Any]:
        steps = [self.precompiled.to_json()] if self.precompiled is not None else []
        if self.remove_extra_whitespaces:
            # \A and \z: the text's ends (huggingface reads ^ and $ at every line, SentencePiece strips the text)
            steps += [{"type": "Replace", "pattern": {"Regex": r"\A +| +\z"}, "content": ""},
                      {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
        if self.add_dummy_prefix:
            steps.append({"type": "Prepend", "prepend": "\u2581" if self.escape_whitespaces else " "})
        if self.escape_whitespaces:
            steps.append({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})
        return {"type": "Sequence", "normalizers": steps}


class Lowercase(Normalizer):
    """huggingface's Lowercase: Unicode lowercase per character (one may become several)."""

    type = "Lowercase"

    def __init__(self) -> None:
        self.table = _lowercase_table()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Lowercase:
        return cls()


@functools.lru_cache(maxsize=1)
def _lowercase_table() -> Ragged:
    return unicode.compose(unicode.identity_map(), unicode.step_map("lowercase"))


class StripAccents(Normalizer):
    """huggingface's StripAccents: combining marks (categories Mn, Mc, Me of the reference's older
    Unicode table, listed in :mod:`gputok._reference_marks`) dropped. It only strips accents from decomposed
    text: huggingface pairs it with NFD / NFKD before it."""

    type = "StripAccents"

    def __init__(self) -> None:
        self.table = _strip_accents_table()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> StripAccents:
        return cls()


@functools.lru_cache(maxsize=1)
def _strip_accents_table() -> Ragged:
    from ._reference_marks import DROPPED_MARKS

    drop = torch.zeros(unicode.MAX_CODEPOINT, dtype=torch.bool)
    for first, last in DROPPED_MARKS:
        drop[first:last + 1] = True
    return unicode.filter_map(drop)


# huggingface's Nmt normalizer: these control characters are dropped, these spaces become " ".
_NMT_DROPPED = (*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F)
_NMT_SPACES = (0x09, 0x0A, 0x0C, 0x0D, 0x1680, *range(0x200B, 0x2010), 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD)


class Nmt(Normalizer):
    """huggingface's Nmt: some control characters dropped, some spaces as " " (a codepoint map)."""

    type = "Nmt"

    def __init__(self) -> None:
        self.table = _nmt_table()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Nmt:
        return cls()


@functools.lru_cache(maxsize=1)
def _nmt_table() -> Ragged:
    drop = torch.zeros(unicode.MAX_CODEPOINT, dtype=torch.bool)
    drop[list(_NMT_DROPPED)] = True
    spaces = torch.zeros(unicode.MAX_CODEPOINT, dtype=torch.bool)
    spaces[list(_NMT_SPACES)] = True
    return unicode.compose(unicode.filter_map(drop), unicode.replace_map(spaces, ord(" ")))


class ByteLevelNormalizer(Normalizer):
    """huggingface's ByteLevel normalizer: each character as the byte-level characters of its
    UTF-8 bytes (GPT-2's byte-to-character table), each pointing at the character."""

    type = "ByteLevel"

    def __init__(self) -> None:
        self.table = _byte_level_table()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ByteLevelNormalizer:
        return cls()


@functools.lru_cache(maxsize=1)
def _byte_level_table() -> Ragged:
    import numpy as np

    from .models.bpe import byte_decoder

    byte_char = np.zeros(256, dtype=np.int32)
    for char, byte in byte_decoder().items():
        byte_char[byte] = ord(char)
    codes = np.arange(unicode.MAX_CODEPOINT, dtype=np.int64)
    lengths = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)
    surrogate = (codes >= 0xD800) & (codes <= 0xDFFF)
    lengths[surrogate] = 3  # encoded as U+FFFD, as text with a lone surrogate is read
    text = "".join(chr(c) for c in range(unicode.MAX_CODEPOINT) if not 0xD800 <= c <= 0xDFFF)
    utf8 = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    replacement = np.frombuffer("\ufffd".encode("utf-8"), dtype=np.uint8)
    offsets = np.zeros(unicode.MAX_CODEPOINT + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(offsets[-1], dtype=np.int32)
    keep = np.repeat(~surrogate, lengths)
    values[keep] = byte_char[utf8]
    values[~keep] = np.tile(byte_char[replacement], int(surrogate.sum()))
    return Ragged(torch.from_numpy(values), torch.from_numpy(offsets))


class Prepend(Normalizer):
    """huggingface's Prepend: ``prepend`` before every non-empty text (its characters point at the
    text's first character).

    >>> out, src = Prepend("▁")(Ragged.from_lengths(torch.tensor([104, 105]), torch.tensor([0, 2])))
    >>> out.tolist(), src.tolist()
    ([[], [9601, 104, 105]], [0, 0, 1])
    """

    type = "Prepend"

    def __init__(self, prepend: str) -> None:
        self.prepend = prepend

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        if _dispatch.on_cpu_kernels(text.device):
            values = text.values.numpy()
            return _wrap(prepend_numba(values, text.offsets.numpy(), _codes(self.prepend, values.dtype)))
        device = text.device
        add = torch.tensor([ord(c) for c in self.prepend], dtype=text.values.dtype, device=device)
        n, k = text.values.numel(), add.numel()
        lengths = text.lengths()
        extra = torch.where(lengths > 0, k, 0)
        offsets = offsets_from_lengths(lengths + extra)
        total = int(offsets[-1])
        row = row_ids(offsets, total)
        pos = positions_in_rows(offsets, total) - extra[row]  # < 0: a prepended character
        src = text.offsets[:-1][row] + pos.clamp(min=0)
        values = text.values[src.clamp(max=max(n - 1, 0))] if n else text.values.new_zeros(total)
        if k:
            values = torch.where(pos < 0, add[(pos + k).clamp(0, k - 1)], values)
        return Ragged(values, offsets), src

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "prepend": self.prepend}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Prepend:
        return cls(spec["prepend"])


class Replace(Normalizer):
    """huggingface's Replace: every match of ``pattern`` ({"String": s} or {"Regex": r}) becomes
    ``content`` (a numba kernel on the CPU for a String and for a Regex that is a run of one character
    class, anywhere or at a text's ends, as ``" {2,}"`` or ``"\\A +| +\\z"``; any other regex: the
    ``regex`` module per text, slower).

    The replacement's characters point at the match's last character, as huggingface aligns them.
    The runs a kernel takes are :func:`replace_runs`'; on CUDA tensors the kernels run on a CPU copy.

    >>> out, src = Replace({"String": " "}, "▁")(Ragged.from_lengths(torch.tensor([97, 32, 98]), torch.tensor([3])))
    >>> "".join(map(chr, out.values.tolist())), src.tolist()
    ('a▁b', [0, 1, 2])
    """

    type = "Replace"

    def __init__(self, pattern: dict[str, str], content: str) -> None:
        import regex

        from . import regex_split

        if not isinstance(pattern, dict) or len(pattern) != 1 or not set(pattern) <= {"String", "Regex"}:
            raise ValueError(f"Replace pattern {pattern!r}: expected {{'String': ...}} or {{'Regex': ...}}")
        self.pattern, self.content = pattern, content
        literal = pattern.get("String")
        self.char = literal if literal is not None and len(literal) == 1 else None
        try:
            self.regex = (regex.compile(regex.escape(literal)) if literal is not None
                          else regex_split.compile_pattern(pattern["Regex"]))
        except regex.error as e:
            raise ValueError(f"Replace normalizer: pattern {pattern['Regex']!r} is not a valid regex ({e})") from None
        # where a CPU kernel finds the matches: the literal (string_matches_numba) or the runs (run_matches_numba)
        self._literal = literal if literal is not None and len(literal) > 1 else None
        self._runs = None if literal is not None else replace_runs(pattern["Regex"])

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        if (self._literal is not None or self._runs is not None) and (
                _dispatch.on_cpu_kernels(text.device) or _dispatch.backend(text.device) == "triton"):  # CUDA: a CPU copy
            values, offsets = text.values.cpu().numpy(), text.offsets.cpu().numpy()
            matches = (run_matches_numba(values, offsets, *self._runs) if self._runs is not None
                       else string_matches_numba(values, offsets, _codes(self._literal, values.dtype)))
            out, source = _wrap(replace_spans_numba(values, offsets, *matches, _codes(self.content, values.dtype)))
            return (out, source) if text.device.type == "cpu" else (out.to(text.device), source.to(text.device))
        if self.char is None:
            from . import regex_split

            spans = functools.partial(regex_split._matches, self.regex)  # Oniguruma's find_iter
            return _replace_matches(text, spans, self.content,
                                    lambda s: not s)  # huggingface leaves an empty text as it is ('^')
        if _dispatch.on_cpu_kernels(text.device):
            values = text.values.numpy()
            return _wrap(replace_char_numba(values, text.offsets.numpy(), ord(self.char),
                                            _codes(self.content, values.dtype)))
        device = text.device
        hit = text.values == ord(self.char)
        k = len(self.content)
        lengths = torch.where(hit, k, 1)
        offsets = offsets_from_lengths(lengths)
        total = int(offsets[-1])
        src = row_ids(offsets, total)
        values = text.values[src] if total else text.values[:0]
        if k:
            add = torch.tensor([ord(c) for c in self.content], dtype=text.values.dtype, device=device)
            values = torch.where(hit[src], add[positions_in_rows(offsets, total).clamp(max=k - 1)], values)
        return Ragged(values, offsets[text.offsets]), src

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "pattern": self.pattern, "content": self.content}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Replace:
        return cls(spec["pattern"], spec["content"])


class Strip(Normalizer):
    """huggingface's Strip: whitespace (Rust's ``char::is_whitespace``) off the left and/or right."""

    type = "Strip"

    def __init__(self, *, strip_left: bool = True, strip_right: bool = True) -> None:
        self.strip_left, self.strip_right = strip_left, strip_right

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        if _dispatch.on_cpu_kernels(text.device):
            return _wrap(strip_numba(text.values.numpy(), text.offsets.numpy(), _white_space_numpy(),
                                     self.strip_left, self.strip_right))
        device = text.device
        n = text.values.numel()
        row = row_ids(text.offsets, n)
        index = torch.arange(n, device=device)
        solid = ~_white_space(device)[text.values.long()]
        big = torch.full((len(text),), n, dtype=torch.int64, device=device)
        first = big.scatter_reduce(0, row[solid], index[solid], reduce="amin") if self.strip_left else text.offsets[:-1]
        last = (torch.full_like(big, -1).scatter_reduce(0, row[solid], index[solid], reduce="amax")
                if self.strip_right else text.offsets[1:] - 1)
        keep = torch.nonzero((index >= first[row]) & (index <= last[row])).flatten()
        lengths = torch.bincount(row[keep], minlength=len(text)) if keep.numel() else torch.zeros_like(big)
        return Ragged(text.values[keep], offsets_from_lengths(lengths)), keep

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "strip_left": self.strip_left, "strip_right": self.strip_right}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Strip:
        return cls(strip_left=spec.get("strip_left", True), strip_right=spec.get("strip_right", True))


@functools.lru_cache(maxsize=8)
def _white_space(device: torch.device) -> torch.Tensor:
    return unicode.white_space_mask().to(device)


@functools.lru_cache(maxsize=1)
def _white_space_numpy():
    return _white_space(torch.device("cpu")).numpy()


# A Replace regex the CPU kernel takes (replace_runs): one character, escaped or not, a class
# escape or a set, alone or repeated (+, {m,}, {m}, {m,n}; m > 0), or as \AX+|X+\z.
_RUN_ATOM = "(?:" + "|".join([r"[^\\.^$|?*+()\[\]{}]", r"\\[^A-Za-z0-9]", r"\\[sdwSDW]", r"\\[pP]\{[A-Za-z0-9_= ]+\}",
                                r"\\[pP][A-Za-z]", r"\[(?:[^\[\]\\]|\\.)+\]"]) + ")"
_RUN_REPEAT = r"(?:\+|\{[1-9][0-9]*(?:,[0-9]*)?\})?"


def replace_runs(pattern: str) -> tuple | None:
    r"""``run_matches_numba``'s arguments after the text for a Replace ``Regex`` that is one
    character class ``X`` alone or repeated (``X``, ``X+``, ``X{m,}``, ``X{m}``, ``X{m,n}``,
    ``m`` > 0) or unbounded runs of it only at a text's ends (``\AX+|X+\z``, the same ``X`` and
    repeat twice): (which codepoints ``X`` matches, the shortest and longest match, 0 for no bound,
    at the ends only); None for any other regex. ``X``'s codepoints are found by running the regex
    that the per-text path compiles on every codepoint, so both read it alike.

    >>> members, shortest, longest, at_ends = replace_runs(" {2,}")
    >>> members.nonzero()[0].tolist(), shortest, longest, at_ends
    ([32], 2, 0, False)
    >>> replace_runs(r"\A\s+|\s+\z")[1:], replace_runs(r"\d")[1:], replace_runs("a{2,3}")[1:]
    ((1, 0, True), (1, 1, False), (2, 3, False))
    >>> [replace_runs(p) for p in ("a*", "ab+", "a{3,2}", "a{2,0}", r"\A\d|\d\z")]
    [None, None, None, None, None]
    """
    import regex

    found = regex.fullmatch(f"({_RUN_ATOM})({_RUN_REPEAT})", pattern)
    at_ends = False
    if found is None:
        found = regex.fullmatch(rf"\\A({_RUN_ATOM})({_RUN_REPEAT})\|({_RUN_ATOM})({_RUN_REPEAT})\\z", pattern)
        if found is None or found.group(1, 2) != found.group(3, 4):
            return None
        at_ends = True
    repeat = found.group(2)
    if repeat == "+":
        shortest, longest = 1, 0
    elif not repeat:
        shortest = longest = 1
    else:
        bounds = repeat[1:-1].split(",")
        shortest = int(bounds[0])
        longest = shortest if len(bounds) == 1 else int(bounds[1]) if bounds[1] else 0
        if len(bounds) == 2 and bounds[1] and longest < shortest:
            return None
    if at_ends and longest:
        return None
    members = _class_members(found.group(1))
    return None if members is None else (members, shortest, longest, at_ends)


@functools.lru_cache(maxsize=32)
def _class_members(atom: str):
    """uint8 per codepoint (0 past the table): whether the regex ``atom`` matches that codepoint
    alone, probed on every codepoint with the regex the per-text path compiles; None where it
    matches anything but one character."""
    import numpy as np

    from . import regex_split

    if len(atom) == 1 or (len(atom) == 2 and atom[0] == "\\" and not atom[1].isalnum()):
        members = np.zeros(ord(atom[-1]) + 1, np.uint8)
        members[-1] = 1
        return members
    every = "".join(map(chr, range(unicode.MAX_CODEPOINT)))
    spans = np.array([m.span() for m in regex_split.compile_pattern(atom).finditer(every)], np.int64).reshape(-1, 2)
    if (spans[:, 1] - spans[:, 0] != 1).any():
        return None
    members = np.zeros(unicode.MAX_CODEPOINT, np.uint8)
    members[spans[:, 0]] = 1
    return members


@functools.lru_cache(maxsize=64)
def _codes(chars: str, dtype):
    """The codepoints of ``chars`` as a numpy array of ``dtype`` (a kernel's constant argument)."""
    import numpy as np

    codes = np.array([ord(c) for c in chars], dtype=dtype)
    return codes


def transform_sources(tags: list[int], n: int) -> list[int]:
    """Each output character's source index among the ``n`` input characters, as huggingface's
    ``NormalizedString.transform`` reads a normalizer's tags in order: +1 a new character, aligned
    with the input character before it (at a text's start, the first); 0 or -k the next input
    character, the k after it removed."""
    sources, read = [], 0
    for tag in tags:
        if tag > 0:
            sources.append(max(read - 1, 0))
        else:
            sources.append(min(read, n - 1))
            read += 1 - tag
    return sources


def _wrap(result) -> tuple[Ragged, torch.Tensor]:
    """A kernel's ``(values, offsets, source)`` numpy arrays as ``(Ragged, source)`` tensors (no copy)."""
    values, offsets, source = result
    return Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), torch.from_numpy(source)


class UnicodeForm(Normalizer):
    """huggingface's NFC, NFD, NFKC, NFKD: ``unicodedata.normalize``'s on the codepoints huggingface's
    older Unicode knows (``gputok.unicode_forms``; the others stay as they are).

    Composition depends on the neighbours, so this is no per-codepoint map. On the CPU one numba
    kernel normalizes the batch (``gputok.kernels.nf_forms_numba``, tables in
    ``gputok.unicode_forms``); elsewhere texts already in the form (checked by
    ``unicodedata.is_normalized``, C speed: the reference only ever does less) pass through and
    each other text is normalized by Python (``unicode_forms.aligned``). Either way each
    character's source index is the one huggingface aligns it with (that kernel's notes).
    """

    def __init__(self, form: str) -> None:
        self.form = form
        self.type = form

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        import unicodedata

        from . import unicode_forms

        if _dispatch.on_cpu_kernels(text.device):
            from .kernels.nf_forms_numba import normalize_form_numba

            return _wrap(normalize_form_numba(text.values.numpy(), text.offsets.numpy(),
                                              *unicode_forms.kernel_tables(self.form)))
        import numpy as np

        from .ingest import codepoints

        out, sources = [], []
        for s, start in zip(strings(text), text.offsets[:-1].tolist()):
            new, source = ((s, range(len(s))) if unicodedata.is_normalized(self.form, s)
                           else unicode_forms.aligned(self.form, s))
            out.append(new)
            sources.append(np.asarray(source, dtype=np.int64) + start)
        source = np.concatenate(sources) if sources else np.zeros(0, np.int64)
        return codepoints(out, text.device), torch.from_numpy(source).to(text.device)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}


def _unicode_form(form: str) -> type:
    return type(form, (UnicodeForm,), {"type": form, "__init__": lambda self: UnicodeForm.__init__(self, form),
                                       "from_json": classmethod(lambda cls, spec: cls()),
                                       "__doc__": f"huggingface's {form}: ``unicodedata``'s on the codepoints its older "
                                                  "Unicode knows, aligned as huggingface aligns it (a numba kernel "
                                                  "on the CPU)."})


NFC, NFD, NFKC, NFKD = (_unicode_form(f) for f in ("NFC", "NFD", "NFKC", "NFKD"))


class Sequence(Normalizer):
    """huggingface's Sequence: each normalizer in turn; source indices compose.

    >>> seq = Sequence([Prepend("▁"), Replace({"String": " "}, "▁")])
    >>> out, src = seq(Ragged.from_lengths(torch.tensor([97, 32, 98]), torch.tensor([3])))
    >>> "".join(map(chr, out.values.tolist())), src.tolist()
    ('▁a▁b', [0, 0, 1, 2])
    """

    type = "Sequence"

    def __init__(self, normalizers: list[Normalizer]) -> None:
        self.normalizers = normalizers

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        source = None  # the first step's source is its own
        for step in self.normalizers:
            text, src = step(text)
            source = src if source is None else source.index_select(0, src)
        return text, torch.arange(text.values.numel(), device=text.device) if source is None else source

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "normalizers": [n.to_json() for n in self.normalizers]}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Sequence:
        return cls([from_json(s) for s in spec.get("normalizers") or []])


def _replace_matches(text: Ragged, matcher, content: str, skip) -> tuple[Ragged, torch.Tensor]:
    """Each text's matches (``matcher(s)``: its match spans) replaced by ``content`` in Python (the
    fallback for a regex, which is no codepoint map): unchanged characters keep their index and
    the replacement's point at the match's last character, as huggingface aligns them (an empty
    match's at the character before it, the text's first at its start). ``skip(s)``: the text is
    left as it is."""
    import numpy as np

    texts = strings(text)
    if _dispatch.on_cpu_kernels(text.device):
        return _replace_matches_numba(text, texts, matcher, content, skip)
    starts = text.offsets[:-1].tolist()
    out, sources = [], []
    for s, start in zip(texts, starts):
        spans = None if skip(s) else matcher(s)
        if not spans:
            out.append(s)
            sources.append(np.arange(start, start + len(s)))
            continue
        parts, pos, pieces = [], 0, []
        for a, b in spans:
            parts += [np.arange(pos, a), np.repeat(b - 1 if b > a else max(a - 1, 0), len(content))]
            pieces += [s[pos:a], content]
            pos = b
        parts.append(np.arange(pos, len(s)))
        out.append("".join(pieces) + s[pos:])
        sources.append(np.concatenate(parts) + start)
    from .ingest import codepoints

    result = codepoints(out, text.device)
    source = (torch.from_numpy(np.concatenate(sources).astype(np.int64)) if sources
              else torch.zeros(0, dtype=torch.int64))
    return result, source.to(text.device)


def _replace_matches_numba(text: Ragged, texts: list[str], matcher, content: str, skip
                           ) -> tuple[Ragged, torch.Tensor]:
    """:func:`_replace_matches` on the CPU: the matches found in Python per text, the texts
    rewritten by one kernel call (``replace_spans_numba``)."""
    import numpy as np

    bounds: list[int] = []
    counts = np.zeros(len(texts) + 1, dtype=np.int64)
    for t, (s, start) in enumerate(zip(texts, text.offsets[:-1].tolist())):
        if not skip(s):
            found = [start + b for span in matcher(s) for b in span]
            counts[t + 1] = len(found) // 2
            bounds += found
    spans = np.array(bounds, dtype=np.int64).reshape(-1, 2)
    values = text.values.numpy()
    return _wrap(replace_spans_numba(values, text.offsets.numpy(), np.cumsum(counts), np.ascontiguousarray(spans[:, 0]),
                                     np.ascontiguousarray(spans[:, 1]), _codes(content, values.dtype)))


NORMALIZERS = {cls.type: cls for cls in (BertNormalizer, Precompiled, Lowercase, Prepend, Replace, Strip,
                                      NFC, NFD, NFKC, NFKD, Sequence, StripAccents, Nmt, ByteLevelNormalizer)}


def may_remove_leading(normalizer: Normalizer | None) -> bool:
    """Whether ``normalizer`` can make a text's first output character come from past its first
    raw one (Strip, BertNormalizer's cleaning, StripAccents, Nmt, and Replace: by nothing, or a
    match of several characters, which huggingface aligns to the match's last): huggingface's
    Metaspace with ``prepend_scheme`` "first" then prepends nothing, as it prepends only to a split
    whose raw offset is 0 (``Tokenizer._first_reads_source``). Not Precompiled: huggingface gives a
    character a charsmap removes to the one before it, and the text's first removed characters to
    none, so its first output keeps offset 0."""
    if normalizer is None:
        return False
    if isinstance(normalizer, Sequence):
        return any(may_remove_leading(step) for step in normalizer.normalizers)
    if isinstance(normalizer, Strip):
        return normalizer.strip_left
    if isinstance(normalizer, Replace):
        return normalizer.content == "" or len(normalizer.pattern.get("String", "..")) != 1
    # The others rewrite each character into one or more.
    return not isinstance(normalizer, (Lowercase, UnicodeForm, Prepend, ByteLevelNormalizer, Precompiled))


def from_json(spec: dict[str, Any] | None) -> Normalizer | None:
    return _components.from_json(spec, NORMALIZERS, "normalizer")
