"""Regex pre-tokenization of byte-level BPE tokenizers (GPT-2, cl100k, o200k) as tensor ops.

tiktoken-style tokenizers first cut each text with a regex (:data:`PATTERNS`) and run BPE on the
pieces. :func:`split` produces exactly the spans of ``regex.finditer(PATTERNS[rule], text)`` for
every text of a batch, without a regex engine: every codepoint gets a small class code from a
table, and each alternative of the pattern becomes a run computation over the whole batch.
:func:`split_with_regex` is the slow fallback for any other pattern (``regex.finditer`` per text).
CPU batches under :data:`REGEX_BELOW_CHARS` codepoints go through it too (the same spans, as the
tests check): there a Python scan per text costs less than the tensor ops' fixed overhead.

Algorithm
---------
1. Classes. Per-codepoint tables are built ONCE by asking the ``regex`` module itself about every
   codepoint (``regex.sub(r'\\p{L}', ...)`` over a string of all 0x110000 codepoints, C speed), so
   they agree with the Unicode version of the ``regex`` module that defines the reference
   semantics, and cached on disk (:func:`gputok.unicode.disk_cached`, keyed by the ``regex``
   version). Classes: ``\\p{L}``, ``\\p{N}``, ``\\s``, ``\\p{Lu}|\\p{Lt}``, ``\\p{Ll}``,
   ``\\p{Lm}|\\p{Lo}``, ``\\p{M}``, plus which of ``s d m t l v r e`` a codepoint matches under
   ``(?i)`` (``ſ`` U+017F matches ``s``). Space, apostrophe, ``\\r``, ``\\n`` and ``/`` are
   compared by codepoint. A per-rule table maps every codepoint to one small *kind* (one gather).
2. Segments. The batch is cut into *segments*, maximal runs of one kind inside one text (about
   a third as many as codepoints on real text). Run ends of any set of kinds ("end of the U run",
   "end of the whitespace run") and "last segment of a kind before here" are per-segment arrays
   (one cumsum + one nonzero + one gather each); text ends are segment boundaries.
3. ``NX(i)``: the end of the match the pattern makes if a match starts at ``i``, a direct
   transcription of the alternatives in order (leftmost-first, possessive or backtracking as
   written), computed for a whole tensor of positions at once from those lookups, the "next
   char" kind and contraction lengths (read at apostrophes only). Every character is matched by
   some alternative of these three patterns (checked by the tests), so matches tile each text
   and ``NX(i) > i``.
4. Match starts are the chain ``text start, NX(text start), ...``. Most starts are *forced*: a
   local rule shows the position starts a match whatever came before (a digit after a
   non-digit, every 3rd digit of a run for cl100k/o200k, the first whitespace after a letter, an
   uppercase letter after a lowercase one unless both end a contraction like ``'rE``, ...); the
   rules only need to be sound. A match never covers a start, and a match from a non-whitespace
   segment start never ends inside its segment, so NX is only evaluated where that bound does
   not already land on a forced start (mostly spaces before words and multi-char whitespace
   runs; on the 20 MB corpus 141k (gpt2) to 521k (o200k) of ~3.9M starts, of 18.9M
   codepoints). From there the chain is followed with whole-frontier gathers
   (``frontier = NX(frontier)``, new starts only) until every chain meets a known start: 3 (gpt2)
   to 7 (o200k) passes on that corpus. Texts where a chain stays alive for long (o200k on
   ``'s's's...``, where the contraction suffix pairs the apostrophes up from wherever the chain
   entered) switch to pointer doubling over those texts only (``R |= J[R]; J = J[J]``, stopping
   once R is closed under NX): O(log chain) passes.
5. Words are ``nonzero(starts)``; a word ends where the next one starts, or at its text's end.

Semantics per pattern (derived from the regex; the implementation follows them literally)
------------------------------------------------------------------------------------------
Notation: a *run* is maximal and never crosses the end of a text; "ws" is ``\\s``; O is
``[^\\s\\p{L}\\p{N}]``.

gpt2 / r50k / p50k ``'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s``
    At a match start: an apostrophe followed by ``s d m t`` / ``ll ve re`` (lowercase only) is a
    2- or 3-char contraction; a letter, number or O char takes its whole run (possessive); a space
    (U+0020 only) followed by a letter/number/O char takes that char's run too. A ws run that
    reaches the end of the text is one match (``\\s++$``). Otherwise ``\\s+(?!\\S)`` backtracks
    one char: a ws run of length >= 2 followed by a non-ws char gives all but its last char, and
    the last char is then either glued to the next run (if it is U+0020) or alone (``\\s``).
    Example: ``"a   b"`` -> ``a``, ``"  "``, ``" b"``; ``"a\\t\\tb"`` -> ``a``, ``"\\t"``,
    ``"\\t"``, ``b``. An apostrophe inside a run of O chars is never a contraction
    (``"!'s"`` -> ``"!'"``, ``s``), nor one right after a space (``" 's"`` -> ``" '"``, ``s``).

cl100k ``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s``
    Contractions are case-insensitive (``'S``, ``'LL``, ``'Re``). A letter run may take ONE
    preceding char that is not ``\\r``/``\\n``/letter/number (space, tab, NBSP, punctuation,
    apostrophe...), but only if that char is where a match starts: ``"!a"`` -> ``"!a"``,
    ``"!!a"`` -> ``"!!"``, ``a``. Digit runs are cut into groups of 3 from the left
    (``12345`` -> ``123``, ``45``); no space is glued to digits. A space may be glued to an O run,
    which then also takes all ``\\r``/``\\n`` right after it (``"!\\n\\nx"`` -> ``"!\\n\\n"``, x).
    A ws run reaching the end of the text is one match. Otherwise a ws run that contains
    ``\\r``/``\\n`` first gives everything up to its last ``\\r``/``\\n`` (``\\s*[\\r\\n]``
    backtracks to it); the rest (no newline) follows the gpt2 rule: all but the last char, and
    the last char is glued to a following letter run (any non-newline ws char) or O run (space
    only), or stands alone.

o200k (seven alternatives, no possessive quantifiers, see :data:`PATTERNS`)
    Let U = ``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``, W = ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]``,
    P = ``[^\\r\\n\\p{L}\\p{N}]`` (marks are in U, W, P and O at once). A letter match at ``i``
    takes an optional P char (only if a U/W char follows), then: let ``k`` be the end of the U run
    from there; if char ``k`` is lowercase (Ll), the match runs to the end of the W run from
    ``k``; otherwise it ends after the LAST Lm/Lo/mark of the U run (greedy ``U*`` backtracking to
    leave one W char), or at ``k`` if there is none (second alternative). Then an optional
    case-insensitive contraction suffix ``'s 't 're 've 'm 'll 'd``. Hence camelCase splits
    before an uppercase letter that follows a lowercase one (``camelCase`` -> ``camel``,
    ``Case``), ``HTTPServer`` stays whole, ``"ABC中DEF"`` -> ``"ABC中"``, ``DEF``, and
    ``"don't"`` is one piece while ``"'s's's"`` pairs up from wherever the chain entered.
    Digits: groups of 1-3 from the left. ``" ?O+[\\r\\n/]*"``: O run (marks included) with an
    optional space before and a run of ``\\r``, ``\\n`` and ``/`` after. Whitespace: a ws run with
    a newline first gives everything up to its last newline (``\\s*[\\r\\n]+``, even at the end of
    the text: ``"\\n  "`` at the end -> ``"\\n"``, ``"  "``); then ``\\s+(?!\\S)`` (all but the
    last char, or all at the end of the text), then ``\\s+`` for the single last char, unless
    that char was taken as the P prefix of a letter match or (a space) of an O match.

What it leaves out
------------------
Only the named patterns are compiled to tensor ops; any other regex goes through
:func:`split_with_regex` (one ``regex.finditer`` per text). The tables follow the ``regex``
module's Unicode data, NOT :mod:`unicodedata` (Python 3.11 has Unicode 14.0: ~14k codepoints get
a different L/N/M class). tiktoken uses Rust ``fancy-regex``; the two agreed on every line of the
parity corpus and on every codepoint whose class changed since Unicode 14, but a future Unicode
release could make them differ. Matching is done on codepoints; lone surrogates were already
replaced by U+FFFD at ingestion.

Memory
------
The class tables: 2 x 1.1 MB (uint8), built in ~0.3 s and cached on disk, plus one 1.1 MB kind
table per pattern family. Per call, for ``n`` codepoints in ``m`` segments: 8 bytes per
codepoint (kinds, segment ids, masks) and ~60 bytes per segment (run-end and kind arrays, int32;
int64 above 2**31 codepoints); measured peak growth on the 20 MB corpus: 25 (gpt2) to 35 (o200k)
bytes per codepoint, the 16 bytes per word of the result included.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import unicode
from .ingest import strings
from .pre_tokenizers import Words
from .ragged import Ragged, nonzero, offsets_from_lengths, positions_in_rows, search_sorted, select

_R50K = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: The pre-tokenization regexes of tiktoken's encodings (``tiktoken_ext/openai_public.py``).
PATTERNS: dict[str, str] = {
    "gpt2": _R50K,
    "r50k": _R50K,
    "p50k": _R50K,
    "cl100k": _CL100K,
    "o200k": _O200K,
}


def hf_spelling(pattern: str) -> str:
    r"""``pattern`` as a tokenizer.json writes it for huggingface ``tokenizers``, whose Oniguruma
    reads ``\p{N}{1,3}+`` as "one or more of ``\p{N}{1,3}``" (any digit run), not as the
    possessive ``{1,3}`` of the ``regex`` module and tiktoken. cl100k's digit rule is written
    ``\p{N}{1,3}``: the same matches, as nothing follows it in its alternative."""
    return pattern.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


_RULE = {"gpt2": "gpt2", "r50k": "gpt2", "p50k": "gpt2", "cl100k": "cl100k", "o200k": "o200k"}

# Class bits of the per-codepoint table.
_L, _N, _WS, _UP, _LO, _BL, _M = 1, 2, 4, 8, 16, 32, 64  # UP: Lu|Lt, LO: Ll, BL: Lm|Lo, M: \p{M}
_CLASS_PATTERNS = {
    _L: r"\p{L}", _N: r"\p{N}", _WS: r"\s", _UP: r"[\p{Lu}\p{Lt}]", _LO: r"\p{Ll}",
    _BL: r"[\p{Lm}\p{Lo}]", _M: r"\p{M}",
}
_LETTERS = "sdmtlvre"  # contraction letters; code = index + 1
_SPACE, _APOS, _SLASH, _CR, _LF = 0x20, 0x27, 0x2F, 0x0D, 0x0A


def _regex_mask(pattern: str, everything: str) -> np.ndarray:
    """Which codepoints ``pattern`` (one character) matches, asking the regex module (C speed)."""
    import regex

    marked = regex.sub(pattern, "\x00", everything)
    assert len(marked) == len(everything), pattern
    mask = np.frombuffer(marked.encode("utf-32-le", "surrogatepass"), dtype=np.uint32) == 0
    mask[0] = regex.fullmatch(pattern, "\x00") is not None
    return mask


def _build_tables() -> dict[str, np.ndarray]:
    everything = "".join(map(chr, range(unicode.MAX_CODEPOINT)))
    classes = np.zeros(unicode.MAX_CODEPOINT, dtype=np.uint8)
    for bit, pattern in _CLASS_PATTERNS.items():
        classes[_regex_mask(pattern, everything)] |= bit
    letters = np.zeros(unicode.MAX_CODEPOINT, dtype=np.uint8)
    for code, ch in enumerate(_LETTERS, 1):
        letters[_regex_mask("(?i)" + ch, everything)] = code
    return {"classes": classes, "letters": letters}


@functools.lru_cache(maxsize=1)
def class_tables() -> tuple[torch.Tensor, torch.Tensor]:
    """(class bits, case-insensitive contraction letter code) for every codepoint, from ``regex``."""
    import regex  # the reference engine (a dependency of tiktoken); only its tables are used here

    t = unicode.disk_cached(f"regex-split-{regex.__version__}", _build_tables)
    return torch.from_numpy(t["classes"]), torch.from_numpy(t["letters"])


# Kinds for gpt2 / cl100k.
K_L, K_N, K_O, K_APOS, K_SP, K_OWS, K_NL, K_NONE = range(8)
# Kinds for o200k.
O_UP, O_LO, O_BL, O_M, O_N, O_O, O_APOS, O_SLASH, O_SP, O_OWS, O_NL, O_NONE = range(12)


@functools.lru_cache(maxsize=4)
def _kind_table(family: str) -> torch.Tensor:
    classes, _ = class_tables()
    c = classes.long()
    if family == "o200k":
        kind = torch.full((unicode.MAX_CODEPOINT,), O_O, dtype=torch.uint8)
        kind[(c & _M) != 0] = O_M
        kind[(c & _BL) != 0] = O_BL
        kind[(c & _LO) != 0] = O_LO
        kind[(c & _UP) != 0] = O_UP
        kind[(c & _N) != 0] = O_N
        kind[(c & _WS) != 0] = O_OWS
        kind[[_CR, _LF]] = O_NL
        kind[_SPACE], kind[_APOS], kind[_SLASH] = O_SP, O_APOS, O_SLASH
    else:
        kind = torch.full((unicode.MAX_CODEPOINT,), K_O, dtype=torch.uint8)
        kind[(c & _L) != 0] = K_L
        kind[(c & _N) != 0] = K_N
        kind[(c & _WS) != 0] = K_OWS
        kind[[_CR, _LF]] = K_NL
        kind[_SPACE], kind[_APOS] = K_SP, K_APOS
    return kind


@functools.lru_cache(maxsize=2)
def _letter_table(case_sensitive: bool) -> torch.Tensor:
    _, letters = class_tables()
    if not case_sensitive:
        return letters
    exact = torch.zeros_like(letters)
    for code, ch in enumerate(_LETTERS, 1):
        exact[ord(ch)] = code
    return exact


_KINDS = 16  # kind codes are below this (the per-rule kinds above and their NONE)


@functools.lru_cache(maxsize=64)
def _lut(kinds: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Boolean table over the kind codes: is the kind one of ``kinds``."""
    table = torch.zeros(_KINDS, dtype=torch.bool)
    table[list(kinds)] = True
    return table.to(device)


@functools.lru_cache(maxsize=16)
def _pair_table(rule, device: torch.device) -> torch.Tensor:
    """``rule(kind, other)`` for all ``other * _KINDS + kind``: a per-segment rule on two kinds
    becomes one gather instead of a dozen passes."""
    code = torch.arange(_KINDS * _KINDS)
    return rule(code % _KINDS, code // _KINDS).to(device)


def _next_true(brk: torch.Tensor, it: torch.dtype) -> torch.Tensor:
    """For each j < len(brk) - 1: the smallest j' > j with ``brk[j']`` (``brk[-1]`` must be True)."""
    counts = torch.cumsum(brk[:-1], 0, dtype=it)
    return nonzero(brk).to(it).index_select(0, counts)


def _last_true(mask: torch.Tensor, it: torch.dtype) -> torch.Tensor:
    """For each j: the largest j' <= j with ``mask[j']``, or -1."""
    counts = torch.cumsum(mask, 0, dtype=it)
    where = nonzero(mask).to(it)
    return torch.cat([where.new_full((1,), -1), where]).index_select(0, counts)


_INT32_LIMIT = 2**31 - 8  # positions up to n + 1 and sentinels must fit


class _Batch:
    """One call's text cut into *segments*: maximal runs of one kind inside one text.

    Everything the alternatives need is a lookup into per-segment arrays (``m`` entries, about a
    third of the codepoints on real text): run ends of a set of kinds are segment indices, the
    last segment of a kind is a cumsum lookup. Per-codepoint work is only the kind gather, the
    segment ids and the start mask.
    """

    def __init__(self, text: Ragged, kind_table: torch.Tensor, none: int):
        values = text.values
        device = values.device
        self.n = n = values.numel()
        self.it = it = torch.int32 if n < _INT32_LIMIT else torch.int64
        self.none = none
        self.values = values if values.dtype == it else values.to(it)
        self.offsets = offsets = text.offsets.to(device)
        kind = kind_table.to(device).index_select(0, self.values)
        first = torch.zeros(n + 1, dtype=torch.bool, device=device)
        first[offsets] = True
        brk = first.clone()
        brk[1:n] |= kind[1:] != kind[:-1]
        self.seg_start = nonzero(brk).to(it)  # m + 1 entries, the last is n
        self.m = m = self.seg_start.numel() - 1
        self.segid = torch.cumsum(brk, 0, dtype=it) - 1  # n + 1 entries, segid[n] = m
        seg_kind = kind.index_select(0, self.seg_start[:m]).to(it)
        self.seg_kind = torch.cat([seg_kind, seg_kind.new_full((1,), none)])  # m + 1
        self.seg_first = first.index_select(0, self.seg_start)  # m + 1: does the segment start a text
        self.seg_nk = select(self.seg_first[1:], self.seg_kind.new_full((1,), none), self.seg_kind[1:])
        prev = torch.cat([seg_kind.new_full((1,), none), seg_kind[:-1]])
        self.seg_pk = select(self.seg_first[:m], prev.new_full((1,), none), prev)
        self.seg_row_end = self.seg_start.index_select(0, _next_true(self.seg_first, it))
        self.arange_m = torch.arange(m + 1, dtype=it, device=device)

    def by_pair(self, rule, other: torch.Tensor) -> torch.Tensor:
        """[m]: ``rule(seg_kind, other)`` for every segment, with ``other`` a per-segment kind array
        (``seg_pk``, ``seg_nk``): one gather from the rule's table over all pairs of kinds."""
        return _pair_table(rule, self.seg_kind.device).index_select(0, torch.add(self.seg_kind[: self.m], other, alpha=_KINDS))

    def kinds_in(self, kinds, of: torch.Tensor) -> torch.Tensor:
        return _lut(tuple(kinds), of.device).index_select(0, of)

    def run(self, kinds) -> torch.Tensor:
        """[m + 1]: the segment where the run of ``kinds`` from segment j ends (j if not of kinds)."""
        inside = self.kinds_in(kinds, self.seg_kind[: self.m])
        brk = self.seg_first.clone()
        brk[: self.m] |= ~inside
        ends = select(inside, _next_true(brk, self.it), self.arange_m[: self.m])
        return torch.cat([ends, ends.new_full((1,), self.m)])

    def class_run(self, classes: torch.Tensor) -> torch.Tensor:
        """[m + 1]: the segment where the run of segments of the same class as j ends."""
        cls = classes.to(self.seg_kind.device).index_select(0, self.seg_kind[: self.m])
        brk = self.seg_first.clone()
        brk[1 : self.m] |= cls[1:] != cls[:-1]
        ends = _next_true(brk, self.it)
        return torch.cat([ends, ends.new_full((1,), self.m)])

    def last(self, kinds) -> torch.Tensor:
        """[m]: the last segment <= j of ``kinds`` (-1 if none), ignoring text boundaries."""
        return _last_true(self.kinds_in(kinds, self.seg_kind[: self.m]), self.it)

    def last_char_of(self, seg: torch.Tensor) -> torch.Tensor:
        """Position of the last char of segment ``seg`` (-1 for segment -1)."""
        return self.seg_start.index_select(0, seg + 1) - 1

    def after_run(self, seg: torch.Tensor, run: torch.Tensor) -> torch.Tensor:
        """End of the ``run`` starting at segment ``seg`` (a segment start), not crossing a text end."""
        return self.seg_start.index_select(0, torch.where(self.seg_first.index_select(0, seg), seg, run.index_select(0, seg)))

    def digit_starts(self, digit: int) -> torch.Tensor:
        """Every 3rd digit of each digit run from its start: ``\\p{N}{1,3}`` starts, always forced."""
        seg = nonzero(self.seg_kind[: self.m] == digit)
        starts = self.seg_start.index_select(0, seg)
        counts = (self.seg_start.index_select(0, seg + 1) - starts + 2) // 3
        total = int(counts.sum())
        base = torch.repeat_interleave(starts, counts, output_size=total)
        return base + 3 * positions_in_rows(offsets_from_lengths(counts.long()), total).to(self.it)

    def forced(self, mask: torch.Tensor, ws: torch.Tensor, glue: torch.Tensor, digit: int | None = None):
        """(forced starts, the forced starts whose NX must be computed) from per-segment masks.

        ``mask``: segments whose start is a forced start. Forced starts are their starts, plus the
        digit group starts (``\\p{N}{1,3}``) if ``digit`` is given. NX is skipped where a lower
        bound already reaches a forced start (a match never covers a start, so it ends there):
        a match from a non-whitespace segment start never ends inside that segment, and one from
        a ``glue`` segment (one char that, as a match start, takes the whole next segment: a
        space before a word) ends at or after the end of the next segment. Digit groups end at
        the next group or at the end of the run, both forced.
        """
        m = self.m
        starts = self.seg_start.index_select(0, nonzero(mask))
        ahead = torch.cat([mask, mask.new_ones(2)])
        known = (glue & ahead[2:]) | (~glue & ~ws & ahead[1 : m + 1])  # (torch.where on bools is ~20x slower)
        look = mask & ~known
        if digit is None:
            return starts, self.seg_start.index_select(0, nonzero(look))
        look &= self.seg_kind[:m] != digit
        return torch.cat([starts, self.digit_starts(digit)]), self.seg_start.index_select(0, nonzero(look))

    def single(self) -> torch.Tensor:
        """[m]: segments of one char."""
        return self.seg_start[1:] - self.seg_start[:-1] == 1

    def contraction(self, p: torch.Tensor, row_end: torch.Tensor, apos: torch.Tensor, case_sensitive: bool) -> torch.Tensor:
        """Length of ``'(?i:[sdmt]|ll|ve|re)`` at ``p`` where ``apos`` (p holds an apostrophe), else 0."""
        out = torch.zeros_like(p)
        sel = nonzero(apos)
        if sel.numel() == 0:
            return out
        p, row_end = p.index_select(0, sel), row_end.index_select(0, sel)
        letters = _letter_table(case_sensitive).to(p.device)
        last = self.n - 1

        def code(offset):
            at = p + offset
            c = letters.index_select(0, self.values.index_select(0, at.clamp(max=last)))
            return torch.where(at < row_end, c, torch.zeros_like(c))

        c1, c2 = code(1), code(2)
        s, d, m, t, l, v, r, e = range(1, 9)
        two = (c1 == s) | (c1 == d) | (c1 == m) | (c1 == t)
        three = ((c1 == l) & (c2 == l)) | ((c1 == v) & (c2 == e)) | ((c1 == r) & (c2 == e))
        out[sel] = torch.where(two, 2, torch.where(three, 3, 0)).to(out.dtype)
        return out


class _At:
    """Query positions ``q`` (match start candidates) with their segment, kind and neighbours."""

    def __init__(self, b: _Batch, q: torch.Tensor):
        self.q = q
        self.s = s = b.segid.index_select(0, q)
        self.k = b.seg_kind.index_select(0, s)
        self.se = b.seg_start.index_select(0, s + 1)  # end of q's segment
        self.re = b.seg_row_end.index_select(0, s)  # end of q's text
        self.nk = torch.where(q + 1 < self.se, self.k, b.seg_nk.index_select(0, s))  # kind of q + 1


def _whitespace(b: _Batch, a: _At, run_end: torch.Tensor, last_nl: torch.Tensor | None, *, end_first: bool) -> torch.Tensor:
    """End of the whitespace match at ``a.q``; ``run_end``: the segment where q's ws run ends.

    ``end_first``: ``\\s++$`` comes before the newline rule (gpt2, cl100k; gpt2 has no newline
    rule: ``last_nl`` None); otherwise ``\\s*[\\r\\n]+`` comes first and ``\\s+(?!\\S)``
    takes the rest of a run that reaches the end of the text (o200k).
    """
    q, end = a.q, b.seg_start.index_select(0, run_end)
    nx = torch.where(end - 1 > q, end - 1, q + 1)  # \s+(?!\S) gives back one char, else \s
    if last_nl is None:
        return torch.where(end == a.re, end, nx)
    nl = b.last_char_of(last_nl.index_select(0, (run_end - 1).clamp(min=0)))  # last \r or \n
    if end_first:
        nx = torch.where(nl >= q, nl + 1, nx)
        return torch.where(end == a.re, end, nx)
    nx = torch.where(end == a.re, end, nx)
    return torch.where(nl >= q, nl + 1, nx)


_CLASS4 = torch.tensor([0, 1, 2, 2, 3, 3, 3, 4])  # L, N, O (apostrophe included), ws, none


def _gpt2(b: _Batch):
    cls_run = b.class_run(_CLASS4)

    def nx_at(q: torch.Tensor) -> torch.Tensor:
        a = _At(b, q)
        k, nk = a.k, a.nk
        ws = k >= K_SP
        run = cls_run.index_select(0, a.s)
        end = b.seg_start.index_select(0, run)
        nx = torch.where(ws, _whitespace(b, a, run, None, end_first=True), end)
        glue = (k == K_SP) & (nk < K_SP)  # ' ?X++': a space takes the run of the next char
        nx = torch.where(glue, b.seg_start.index_select(0, cls_run.index_select(0, a.s + 1)), nx)
        clen = b.contraction(q, a.re, k == K_APOS, True)
        return torch.where(clen > 0, q + clen, nx)

    sk = b.seg_kind[: b.m]
    forced = b.seg_first[: b.m] | b.by_pair(_gpt2_forced, b.seg_pk)
    glue = b.single() & b.by_pair(_gpt2_glue, b.seg_nk)
    return nx_at, b.forced(forced, sk >= K_SP, glue)


def _gpt2_forced(sk: torch.Tensor, pk: torch.Tensor) -> torch.Tensor:
    """Whether a segment of kind ``sk`` after one of kind ``pk`` (in the same text) starts a match."""
    ws, pws = sk >= K_SP, (pk >= K_SP) & (pk != K_NONE)
    cls, pcls = _CLASS4[sk.clamp(max=K_NONE)], _CLASS4[pk.clamp(max=K_NONE)]  # (table codes above NONE are unused)
    forced = ~ws & (pk < K_SP) & (cls != pcls) & (pk != K_APOS)
    forced |= ~ws & ((pk == K_OWS) | (pk == K_NL))
    forced |= ws & ~pws & (pk != K_NONE)
    return forced


def _gpt2_glue(sk: torch.Tensor, nk: torch.Tensor) -> torch.Tensor:
    """Whether one char of kind ``sk`` before a segment of kind ``nk`` takes that segment too."""
    return (sk == K_SP) & (nk < K_SP)


def _cl100k(b: _Batch):
    cls_run = b.class_run(_CLASS4)
    nl_run = b.run((K_NL,))
    last_nl = b.last((K_NL,))

    def nx_at(q: torch.Tensor) -> torch.Tensor:
        a = _At(b, q)
        k, nk = a.k, a.nk
        ws = k >= K_SP
        other = (k == K_O) | (k == K_APOS)
        run = cls_run.index_select(0, a.s)
        nx = torch.where(ws, _whitespace(b, a, run, last_nl, end_first=True), b.seg_start.index_select(0, run))
        nx = torch.where(other, b.after_run(run, nl_run), nx)  # O run + [\r\n]*+
        next_run = cls_run.index_select(0, a.s + 1)
        nx = torch.where((k == K_SP) & ((nk == K_O) | (nk == K_APOS)), b.after_run(next_run, nl_run), nx)
        nx = torch.where(k == K_N, q + torch.clamp(a.se - q, max=3), nx)
        prefix = (other | (k == K_SP) | (k == K_OWS)) & (nk == K_L)
        nx = torch.where(prefix, b.seg_start.index_select(0, next_run), nx)  # [^\r\n\p{L}\p{N}]?+\p{L}++
        clen = b.contraction(q, a.re, k == K_APOS, False)
        return torch.where(clen > 0, q + clen, nx)

    sk = b.seg_kind[: b.m]
    forced = b.seg_first[: b.m] | b.by_pair(_cl100k_forced, b.seg_pk)
    glue = b.single() & b.by_pair(_cl100k_glue, b.seg_nk)
    return nx_at, b.forced(forced, sk >= K_SP, glue, K_N)


def _cl100k_forced(sk: torch.Tensor, pk: torch.Tensor) -> torch.Tensor:
    """Whether a segment of kind ``sk`` after one of kind ``pk`` (in the same text) starts a match."""
    ws = sk >= K_SP
    other = (sk == K_O) | (sk == K_APOS)
    forced = (sk == K_N) & (pk != K_N)
    forced |= (sk != K_N) & (pk == K_N)
    forced |= other & (pk == K_L)
    forced |= ws & ((pk == K_L) | (pk == K_N))
    forced |= ((sk == K_SP) | (sk == K_OWS)) & ((pk == K_O) | (pk == K_APOS))
    forced |= ~ws & (pk == K_NL)
    forced |= other & (pk == K_OWS)
    return forced


def _cl100k_glue(sk: torch.Tensor, nk: torch.Tensor) -> torch.Tensor:
    """Whether one char of kind ``sk`` before a segment of kind ``nk`` takes that segment too
    (an apostrophe does not: "'s" may be a contraction)."""
    return (((sk == K_O) | (sk == K_SP) | (sk == K_OWS)) & (nk == K_L)) | ((sk == K_SP) & ((nk == K_O) | (nk == K_APOS)))


_O_LETTERISH = (O_UP, O_LO, O_BL, O_M)
_O_UPPER = (O_UP, O_BL, O_M)
_O_LOWER = (O_LO, O_BL, O_M)
_O_BOTH = (O_BL, O_M)
_O_PRIME = (O_O, O_APOS, O_SLASH)
_O_OTHER = (O_M, O_O, O_APOS, O_SLASH)
_O_WS = (O_SP, O_OWS, O_NL)
_O_PREFIX = (O_M, O_O, O_APOS, O_SLASH, O_SP, O_OWS)


def _o200k(b: _Batch):
    up_run, low_run = b.run(_O_UPPER), b.run(_O_LOWER)
    other_run, trail_run, ws_run = b.run(_O_OTHER), b.run((O_NL, O_SLASH)), b.run(_O_WS)
    last_both, last_nl = b.last(_O_BOTH), b.last((O_NL,))

    def nx_at(q: torch.Tensor) -> torch.Tensor:
        a = _At(b, q)
        s, k, nk = a.s, a.k, a.nk
        letterish = b.kinds_in(_O_LETTERISH, k)
        # [^\r\n\p{L}\p{N}]? U* W+ (contraction)? | ... U+ W* ...: from i' (after the prefix char)
        prefixed = ~letterish
        ip = q + prefixed.to(q.dtype)
        sip = torch.where(prefixed & (ip >= a.se), s + 1, s)
        in_up = b.kinds_in(_O_UPPER, b.seg_kind.index_select(0, sip))
        up_end = up_run.index_select(0, sip)
        kpos = torch.where(in_up, b.seg_start.index_select(0, up_end), ip)  # end of the U run
        kseg = torch.where(in_up, up_end, sip)
        k_lower = (kpos < a.re) & (b.seg_kind.index_select(0, kseg) == O_LO)
        lb = b.last_char_of(last_both.index_select(0, (kseg - 1).clamp(min=0)))  # last Lm/Lo/M before k
        e = torch.where(k_lower, b.seg_start.index_select(0, low_run.index_select(0, kseg)),
                        torch.where(lb >= ip, lb + 1, kpos))
        e_apos = (e < a.re) & (b.values.index_select(0, e.clamp(max=b.n - 1)) == _APOS)
        e = e + b.contraction(e, a.re, e_apos, False)
        # whitespace, then ' ?O+[\r\n/]*', digits, letters, in reverse order of precedence
        nx = _whitespace(b, a, ws_run.index_select(0, s), last_nl, end_first=False)
        nx = torch.where(b.kinds_in(_O_PRIME, k), b.after_run(other_run.index_select(0, s), trail_run), nx)
        space_other = (k == O_SP) & b.kinds_in(_O_PRIME, nk)
        nx = torch.where(space_other, b.after_run(other_run.index_select(0, s + 1), trail_run), nx)
        nx = torch.where(k == O_N, q + torch.clamp(a.se - q, max=3), nx)
        letter = letterish | (b.kinds_in(_O_PREFIX, k) & b.kinds_in(_O_LETTERISH, nk))
        return torch.where(letter, e, nx)

    sk, pk = b.seg_kind[: b.m], b.seg_pk
    letterish = b.kinds_in(_O_LETTERISH, sk)
    forced = b.seg_first[: b.m].clone()
    forced |= (sk == O_N) & (pk != O_N)
    forced |= (sk != O_N) & (pk == O_N)
    # An uppercase letter after a lowercase one, unless both end a contraction ("'rE", "'lL").
    single = b.single()
    after_apos = torch.cat([single.new_zeros(1), single[:-1] & (b.seg_pk[:-1] == O_APOS)])
    forced |= (sk == O_UP) & (pk == O_LO) & ~after_apos
    forced |= b.kinds_in((O_UP, O_LO, O_BL), pk) & ~letterish & (sk != O_APOS)
    forced |= (pk == O_NL) & ~b.kinds_in(_O_WS, sk) & (sk != O_SLASH)
    forced |= ((sk == O_SP) | (sk == O_OWS)) & b.kinds_in(_O_OTHER, pk)
    nk = b.seg_nk
    glue = (b.kinds_in(_O_PREFIX, sk) & ~letterish & b.kinds_in(_O_LETTERISH, nk)) | ((sk == O_SP) & b.kinds_in(_O_PRIME, nk))
    return nx_at, b.forced(forced, b.kinds_in(_O_WS, sk), single & glue, O_N)


_HOPS = 12


def _chain(b: _Batch, nx_at, forced: torch.Tensor, frontier: torch.Tensor) -> torch.Tensor:
    """Match starts (bool, n + 1 entries): everything reachable from the forced starts via NX.

    ``forced`` must be true match starts (text starts included); ``nx_at(q)`` gives the end of
    the match that would start at each ``q``; ``frontier``: the forced starts whose NX is not
    known to be forced already.
    """
    n = b.n
    marked = torch.zeros(n + 1, dtype=torch.bool, device=forced.device)
    marked.index_fill_(0, forced.long(), True)
    marked[n] = True
    for _ in range(_HOPS):
        step = nx_at(frontier)
        frontier = step.index_select(0, nonzero(~marked.index_select(0, step)))
        if frontier.numel() == 0:
            return marked
        marked.index_fill_(0, frontier.long(), True)
    # Long chains: pointer doubling over the texts that still have one. R_{k+1} = R_k | J_k(R_k)
    # with J_k = NX^(2^k) reaches every NX^m(r), m < 2^k; stop once R is closed under NX.
    bounds = b.offsets.to(b.it)
    rows = torch.unique(torch.searchsorted(bounds, frontier, right=True) - 1)
    starts, lengths = b.offsets[rows], b.offsets[rows + 1] - b.offsets[rows]
    lengths_offsets = offsets_from_lengths(lengths)
    total = int(lengths_offsets[-1])
    where = (torch.repeat_interleave(starts, lengths, output_size=total)
             + positions_in_rows(lengths_offsets, total)).to(b.it)
    target = nx_at(where)
    index = torch.searchsorted(where, target).to(b.it)
    found = (index < total) & (where.index_select(0, index.clamp(max=total - 1)) == target)
    step = torch.cat([torch.where(found, index, total), index.new_full((1,), total)])
    local = torch.cat([marked.index_select(0, where), marked.new_ones(1)])
    jump = step
    while True:
        at = nonzero(local).to(b.it)
        if bool(local.index_select(0, step.index_select(0, at)).all()):
            break
        local[jump.index_select(0, at)] = True
        jump = jump.index_select(0, jump)
    marked[where] = local[:total]
    return marked


_SPLITTERS = {"gpt2": (_gpt2, "gpt2", K_NONE), "cl100k": (_cl100k, "cl100k", K_NONE), "o200k": (_o200k, "o200k", O_NONE)}

# Below this many codepoints a CPU batch goes through the ``regex`` module instead (same words, as
# the tests check): the tensor split costs ~0.8 ms of per-op overhead whatever the batch, the
# regex ~0.2 us per character, so on the project's CPU the two cross at ~4,000 characters.
REGEX_BELOW_CHARS = 4096


def split(text: Ragged, rule: str) -> Words:
    """The words of ``regex.finditer(PATTERNS[rule], t)`` for every text row ``t`` of ``text``.

    ``text`` holds codepoints (:func:`gputok.ingest.codepoints`); ``rule`` is one of
    ``gpt2``/``r50k``/``p50k``, ``cl100k``, ``o200k``. Word starts/ends index ``text.values``.

    >>> from gputok.ingest import codepoints
    >>> w = split(codepoints(["Hello world's  end", "x123456"]), "cl100k")
    >>> list(zip(w.starts.tolist(), w.ends.tolist()))
    [(0, 5), (5, 11), (11, 13), (13, 14), (14, 18), (18, 19), (19, 22), (22, 25)]
    >>> w.text_offsets.tolist()
    [0, 5, 8]
    """
    if rule not in _RULE:
        raise ValueError(f"unknown split rule {rule!r}; known: {sorted(_RULE)} (or use split_with_regex)")
    build, family, none = _SPLITTERS[_RULE[rule]]
    device = text.values.device
    if device.type == "cpu" and text.values.numel() < REGEX_BELOW_CHARS:
        return split_with_regex(strings(text), PATTERNS[rule])
    offsets = text.offsets.to(device)
    n = text.values.numel()
    if n == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        return Words(empty, empty.clone(), torch.zeros_like(offsets))
    b = _Batch(Ragged(text.values, offsets), _kind_table(family), none)
    nx_at, (forced, frontier) = build(b)
    marked = _chain(b, nx_at, forced, frontier)
    starts = nonzero(marked[:n])
    # Matches tile each text and the texts tile the batch: a word ends where the next one starts.
    return Words(starts, torch.cat([starts[1:], starts.new_full((1,), n)]), search_sorted(starts, offsets))


def split_with_regex(texts: list[str], pattern: str) -> Words:
    """The slow, general fallback: ``regex.finditer(pattern, t)`` for each text, as :class:`Words`.

    Any pattern works (matches need not tile the text; unmatched chars belong to no word). Word
    indices are codepoint positions in the concatenation of ``texts``, as for :func:`split` on
    ``gputok.ingest.codepoints(texts)``. Cost: one Python-level regex scan per text, plus two
    ints per match.

    >>> w = split_with_regex(["ab  cd", "e"], r"\\w+")
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 4, 6], [2, 6, 7], [0, 2, 3])
    """
    import regex

    compiled = regex.compile(pattern)
    spans: list[int] = []
    counts = np.zeros(len(texts) + 1, dtype=np.int64)
    base = 0
    for row, t in enumerate(texts):
        before = len(spans)
        for m in compiled.finditer(t):
            s, e = m.span()
            spans.append(base + s)
            spans.append(base + e)
        counts[row + 1] = (len(spans) - before) // 2
        base += len(t)
    flat = torch.tensor(spans, dtype=torch.int64).view(-1, 2) if spans else torch.zeros((0, 2), dtype=torch.int64)
    return Words(flat[:, 0].contiguous(), flat[:, 1].contiguous(), torch.from_numpy(np.cumsum(counts)))
