"""Regex pre-tokenization of byte-level BPE tokenizers (GPT-2, cl100k, o200k) as tensor ops.

tiktoken-style tokenizers first cut each text with a regex (:data:`PATTERNS`) and run BPE on the
pieces. :func:`split` produces exactly the spans of ``regex.finditer(PATTERNS[rule], text)`` for
every text of a batch, without a regex engine: every codepoint gets a small class code from a
table, and each alternative of the pattern becomes a run computation over the whole batch.
:func:`split_with_regex` is the slow fallback for any other pattern (``regex.finditer`` per text).

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
2. ``NX[i]``: the end of the match the pattern would make if a match started at ``i``. It is a
   direct transcription of the alternatives in order (leftmost-first): each is a lookup into
   *run ends* (end of the maximal run of a class from ``i``, cut at text ends: one cumsum + one
   nonzero + one gather), *last occurrence* arrays (``cummax``), contraction lengths (looked up at
   apostrophes only) and "next char" shifts. Every character is matched by some alternative of
   these three patterns (checked by the tests), so matches tile each text and ``NX[i] > i``.
3. Match starts are the chain ``row start, NX[row start], ...``. Most starts are *forced*: a local
   rule shows the position starts a match whatever came before (e.g. a digit after a non-digit,
   an uppercase letter after a lowercase one, the first whitespace after a letter); the rules are
   only required to be sound. From the forced starts the chain is followed with whole-frontier
   gathers (``frontier = NX[frontier]``) until every chain reaches an already known start; on real
   text this takes a handful of passes. Inputs that keep a chain alive for long (o200k's
   ``'s's's...``, where the contraction suffix re-pairs the apostrophes depending on where the
   chain entered) switch to pointer doubling (``R |= J[R]; J = J[J]``), O(log chain) passes.
   Words are ``nonzero(starts)``; a word ends where the next one starts (or at its text's end).

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
module's Unicode data, which may differ from tiktoken's Rust ``fancy-regex`` for characters
assigned in newer Unicode versions. Matching is done on codepoints; lone surrogates were already
replaced by U+FFFD at ingestion.

Memory
------
The class tables: 2 x 1.1 MB (uint8), built in ~1 s and cached on disk. Per call, for ``n``
codepoints: about a dozen int32 arrays of ``n + 1`` entries live at the peak (run ends,
last-occurrence arrays, ``NX``, row ends), i.e. ~50 bytes per codepoint (int64 above 2**31
codepoints), plus 8 bytes per word for the result.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import unicode
from .pre_tokenizers import Words
from .ragged import Ragged

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


class _Batch:
    """Per-position context of one call: kinds, row ends, neighbour kinds, run ends."""

    def __init__(self, text: Ragged, kind_table: torch.Tensor, none: int):
        values = text.values
        self.n = n = values.numel()
        self.it = it = torch.int32 if n < 2**31 - 8 else torch.int64
        self.values = values
        self.none = none
        offsets = text.offsets.to(values.device)
        lengths = offsets[1:] - offsets[:-1]
        self.pos = torch.arange(n + 1, dtype=it, device=values.device)
        self.row_end = torch.repeat_interleave(offsets[1:].to(it), lengths, output_size=n)
        self.first = torch.zeros(n + 1, dtype=torch.bool, device=values.device)
        self.first[offsets[:-1]] = True
        self.first[n] = True
        last = offsets[1:][lengths > 0] - 1
        kind = kind_table.to(values.device).index_select(0, values.to(it) if values.dtype != it else values)
        self.kind = torch.cat([kind, kind.new_full((1,), none)])  # [n + 1], NONE at n
        nk = self.kind[1:].clone()
        nk[last] = none
        self.nk = torch.cat([nk, nk.new_full((1,), none)])  # kind of the next char in the same text
        pk = torch.cat([kind.new_full((1,), none), kind[:-1]]) if n else kind.clone()
        pk[self.first[:n]] = none
        self.pk = pk  # [n], kind of the previous char in the same text

    def is_(self, kinds, which=None) -> torch.Tensor:
        k = self.kind[: self.n] if which is None else which
        out = k == kinds[0]
        for kd in kinds[1:]:
            out |= k == kd
        return out

    def next_break(self, brk: torch.Tensor) -> torch.Tensor:
        """For each i < n: the smallest j > i with ``brk[j]`` (``brk`` has n + 1 entries, True at n)."""
        counts = torch.cumsum(brk[: self.n], 0, dtype=self.it)
        where = torch.nonzero(brk).flatten().to(self.it)
        return where.index_select(0, counts)

    def run_end(self, mask: torch.Tensor) -> torch.Tensor:
        """[n + 1]: end of the run of ``mask`` starting at i (i itself where ``mask[i]`` is False)."""
        brk = self.first.clone()
        brk[: self.n] |= ~mask
        out = torch.where(mask, self.next_break(brk), self.pos[: self.n])
        return torch.cat([out, out.new_full((1,), self.n)])

    def class_run_end(self, cls: torch.Tensor) -> torch.Tensor:
        """[n + 1]: end of the run of chars with the same ``cls`` value as char i."""
        brk = self.first.clone()
        brk[1 : self.n] |= cls[1:] != cls[:-1]
        out = self.next_break(brk)
        return torch.cat([out, out.new_full((1,), self.n)])

    def last_of(self, mask: torch.Tensor) -> torch.Tensor:
        """[n]: the last j <= i with ``mask[j]`` (-1 if none), ignoring text boundaries."""
        minus = torch.full_like(self.pos[: self.n], -1)
        return torch.cummax(torch.where(mask, self.pos[: self.n], minus), 0).values

    def gather(self, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return table.index_select(0, index)

    def digit_groups(self, digit_kind: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(length of ``\\p{N}{1,3}`` at i, forced starts: every 3rd digit of a run from its start)."""
        kind = self.kind[: self.n]
        is_n = kind == digit_kind
        n1 = self.nk[: self.n] == digit_kind
        n2 = torch.zeros_like(n1)
        n2[:-1] = n1[1:] & n1[:-1]
        length = 1 + n1.to(self.it) + n2.to(self.it)
        run_start = is_n & (self.pk != digit_kind)
        zero = torch.zeros_like(self.pos[: self.n])
        start_pos = torch.cummax(torch.where(run_start, self.pos[: self.n], zero), 0).values
        forced = is_n & ((self.pos[: self.n] - start_pos) % 3 == 0)
        return length, forced

    def contraction_len(self, case_sensitive: bool, apos_kind: int) -> torch.Tensor:
        """[n + 1]: length of ``'(?i:[sdmt]|ll|ve|re)`` at i (0 where there is none)."""
        out = torch.zeros_like(self.pos)
        at = torch.nonzero(self.kind[: self.n] == apos_kind).flatten()
        if at.numel() == 0:
            return out
        letters = _letter_table(case_sensitive).to(self.values.device)
        end = self.row_end.index_select(0, at).long()
        last = self.n - 1

        def code(offset):
            where = at + offset
            c = letters.index_select(0, self.values.index_select(0, where.clamp(max=last)).long())
            return torch.where(where < end, c, torch.zeros_like(c)).long()

        c1, c2 = code(1), code(2)
        s, d, m, t, l, v, r, e = range(1, 9)
        two = (c1 == s) | (c1 == d) | (c1 == m) | (c1 == t)
        three = ((c1 == l) & (c2 == l)) | ((c1 == v) & (c2 == e)) | ((c1 == r) & (c2 == e))
        length = torch.where(two, 2, torch.where(three, 3, 0)).to(self.it)
        out[at] = length
        return out


def _ws_end(b: _Batch, ws_end: torch.Tensor, last_nl: torch.Tensor | None, *, end_first: bool) -> torch.Tensor:
    """NX for a whitespace char: ``\\s++$`` / ``\\s*[\\r\\n]`` / ``\\s+(?!\\S)`` / ``\\s`` in order."""
    i = b.pos[: b.n]
    end = ws_end[: b.n]
    nx = torch.where(end - 1 > i, end - 1, i + 1)  # \s+(?!\S) backtracks one char, else \s
    at_end = end == b.row_end
    if end_first:  # \s++$ before the newline rule (cl100k)
        if last_nl is not None:
            nl = last_nl.index_select(0, end - 1)
            nx = torch.where(nl >= i, nl + 1, nx)
        return torch.where(at_end, end, nx)
    nx = torch.where(at_end, end, nx)  # \s+(?!\S) takes the whole run at the end (o200k)
    nl = last_nl.index_select(0, (end - 1).clamp(min=0))
    return torch.where(nl >= i, nl + 1, nx)  # \s*[\r\n]+ comes first


def _gpt2(b: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
    kind, nk, pk, i = b.kind[: b.n], b.nk[: b.n], b.pk, b.pos[: b.n]
    ws = kind >= K_SP
    cls = torch.where(ws, K_SP, torch.where(kind == K_APOS, K_O, kind))
    run = b.class_run_end(cls)
    nx = torch.where(ws, _ws_end(b, run, None, end_first=True), run[: b.n])
    glue = (kind == K_SP) & (nk < K_SP)  # ' ?X++': space + the run of the next char
    nx = torch.where(glue, run[1:], nx)
    clen = b.contraction_len(True, K_APOS)[: b.n]
    nx = torch.where(clen > 0, i + clen, nx)
    pcls = torch.where(pk >= K_SP, K_SP, torch.where(pk == K_APOS, K_O, pk))
    pws = (pk >= K_SP) & (pk != K_NONE)
    forced = b.first[: b.n].clone()
    forced |= ~ws & (pk < K_SP) & (cls != pcls) & (pk != K_APOS)
    forced |= ~ws & ((pk == K_OWS) | (pk == K_NL))
    forced |= ws & ~pws & (pk != K_NONE)
    return nx, forced


def _cl100k(b: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
    kind, nk, pk, i = b.kind[: b.n], b.nk[: b.n], b.pk, b.pos[: b.n]
    ws = kind >= K_SP
    other = (kind == K_O) | (kind == K_APOS)
    cls = torch.where(ws, K_SP, torch.where(kind == K_APOS, K_O, kind))
    run = b.class_run_end(cls)
    nl_run = b.run_end(kind == K_NL)
    last_nl = b.last_of(kind == K_NL)

    def trail(e):  # [\r\n]*+ after an O run
        return torch.where(e < b.row_end, nl_run.index_select(0, e), e)

    nx = torch.where(ws, _ws_end(b, run, last_nl, end_first=True), run[: b.n])
    next_other = (nk == K_O) | (nk == K_APOS)
    nx = torch.where(other, trail(run[: b.n]), nx)
    nx = torch.where((kind == K_SP) & next_other, trail(run[1:]), nx)
    digits, forced_digits = b.digit_groups(K_N)
    nx = torch.where(kind == K_N, i + digits, nx)
    prefix = (other | (kind == K_SP) | (kind == K_OWS)) & (nk == K_L)
    nx = torch.where(prefix, run[1:], nx)
    clen = b.contraction_len(False, K_APOS)[: b.n]
    nx = torch.where(clen > 0, i + clen, nx)

    p_other = (pk == K_O) | (pk == K_APOS)
    forced = b.first[: b.n] | forced_digits
    forced |= (kind == K_N) & (pk != K_N)
    forced |= (kind != K_N) & (pk == K_N)
    forced |= other & (pk == K_L)
    forced |= ws & ((pk == K_L) | (pk == K_N))
    forced |= ((kind == K_SP) | (kind == K_OWS)) & p_other
    forced |= ~ws & (pk == K_NL)
    forced |= other & (pk == K_OWS)
    return nx, forced


def _o200k(b: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
    kind, nk, pk, i, n = b.kind[: b.n], b.nk[: b.n], b.pk, b.pos[: b.n], b.n
    letterish = kind <= O_M  # U or W
    next_letterish = nk <= O_M
    upper = b.is_((O_UP, O_BL, O_M))
    lower = b.is_((O_LO, O_BL, O_M))
    both = b.is_((O_BL, O_M))
    o_prime = b.is_((O_O, O_APOS, O_SLASH))
    ws = b.is_((O_SP, O_OWS, O_NL))
    nl = kind == O_NL

    # Letter alternatives from i' (i, or i + 1 after a P prefix char).
    up_run = b.run_end(upper)
    low_run = b.run_end(lower)
    last_both = b.last_of(both)
    clen = b.contraction_len(False, O_APOS)
    ip = torch.where(letterish, i, i + 1).clamp(max=n)
    k = up_run.index_select(0, ip)
    k_lower = (k < b.row_end) & (b.kind.index_select(0, k) == O_LO)
    lb = last_both.index_select(0, (k - 1).clamp(min=0))
    e = torch.where(k_lower, low_run.index_select(0, k), torch.where(lb >= ip, lb + 1, k))
    e = e + torch.where(e < b.row_end, clen.index_select(0, e), torch.zeros_like(e))

    # ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
    o_run = b.run_end(o_prime | (kind == O_M))
    trail_run = b.run_end(nl | (kind == O_SLASH))

    def trail(end):
        return torch.where(end < b.row_end, trail_run.index_select(0, end), end)

    ws_run = b.run_end(ws)
    nx = torch.where(ws, _ws_end(b, ws_run, b.last_of(nl), end_first=False), i + 1)
    nx = torch.where(o_prime, trail(o_run[:n]), nx)
    next_o_prime = b.is_((O_O, O_APOS, O_SLASH), nk)
    nx = torch.where((kind == O_SP) & next_o_prime, trail(o_run[1:]), nx)
    digits, forced_digits = b.digit_groups(O_N)
    nx = torch.where(kind == O_N, i + digits, nx)
    p_char = b.is_((O_M, O_O, O_APOS, O_SLASH, O_SP, O_OWS))
    nx = torch.where(letterish | (p_char & next_letterish), e, nx)

    p_letter = b.is_((O_UP, O_LO, O_BL), pk)
    forced = b.first[:n] | forced_digits
    forced |= (kind == O_N) & (pk != O_N)
    forced |= (kind != O_N) & (pk == O_N)
    forced |= (kind == O_UP) & (pk == O_LO)
    forced |= p_letter & ~letterish & (kind != O_APOS)
    forced |= (pk == O_NL) & ~ws & (kind != O_SLASH)
    forced |= ((kind == O_SP) | (kind == O_OWS)) & b.is_((O_M, O_O, O_APOS, O_SLASH), pk)
    return nx, forced


_HOPS = 12


def _chain(nx: torch.Tensor, forced: torch.Tensor) -> torch.Tensor:
    """Match starts: everything reachable from the forced starts by following ``nx``.

    ``nx`` (values in (i, n]) and ``forced`` (a subset of the true starts, row starts included)
    have n entries. Returns a bool mask of n + 1 entries (the last one True).
    """
    n = nx.numel()
    nx = torch.cat([nx, nx.new_full((1,), n)])
    marked = torch.cat([forced, forced.new_ones(1)])
    frontier = torch.nonzero(forced).flatten().to(nx.dtype)
    for _ in range(_HOPS):
        step = nx.index_select(0, frontier)
        frontier = step[~marked.index_select(0, step)]
        if frontier.numel() == 0:
            return marked
        marked[frontier.long()] = True
    # Long chains: pointer doubling. R_{k+1} = R_k | J_k(R_k) with J_k = nx^(2^k) reaches every
    # nx^m(r), m < 2^k, and stops once R is closed under nx.
    jump = nx
    while True:
        at = torch.nonzero(marked).flatten().to(nx.dtype)
        if bool(marked.index_select(0, nx.index_select(0, at)).all()):
            return marked
        marked[jump.index_select(0, at).long()] = True
        jump = jump.index_select(0, jump)


_SPLITTERS = {"gpt2": (_gpt2, "gpt2", K_NONE), "cl100k": (_cl100k, "cl100k", K_NONE), "o200k": (_o200k, "o200k", O_NONE)}


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
    fn, family, none = _SPLITTERS[_RULE[rule]]
    device = text.values.device
    offsets = text.offsets.to(device)
    n = text.values.numel()
    if n == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        return Words(empty, empty.clone(), torch.zeros_like(offsets))
    b = _Batch(Ragged(text.values, offsets), _kind_table(family), none)
    nx, forced = fn(b)
    marked = _chain(nx, forced)[:n]
    starts = torch.nonzero(marked).flatten()
    row_end = b.row_end.index_select(0, starts).long()
    following = torch.cat([starts[1:], starts.new_full((1,), n)])
    ends = torch.minimum(following, row_end)
    counts = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(marked, 0, out=counts[1:])
    return Words(starts, ends, counts[offsets])


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
