"""Finding literal strings (added tokens) in text: a Python regex for a few, a trie kernel for many.

:func:`literal_pattern` gives what ``Tokenizer`` searches a text for its added tokens with: the
literals joined by ``|``, longest first, so that a match is the longest literal at the leftmost
position where any starts (huggingface's leftmost-longest rule). Up to ``REGEX_MAX_LITERALS`` it
is that regex: Python's regex engine skips ahead to a position whose character starts a literal,
fast when the literals share a rare first character (``[CLS]``, ``<|endoftext|>``), and a call
costs no more than the regex's own. For more it is a :class:`LiteralPattern`, which answers the
regex's ``search`` and ``finditer`` by walking the literals' trie (``kernels/literal_match_numba.py``):
the regex tries every alternative in turn at each position whose character starts one, so its
time grows with their number (5,000 word-like tokens: ~0.4 M characters per second, against tens
of millions for the walk).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import numpy as np

from .ingest import utf32_units
from .kernels.literal_match_numba import literal_matches

# Up to this many literals, a regex (see the module notes); the walk's call costs ~1-2 us more.
REGEX_MAX_LITERALS = 16
# The root's children along codes below this are one table lookup (256 KB of int32).
DENSE_ROOT_CODES = 1 << 16
# LiteralPattern.search reads a text this many characters at a time.
SEARCH_CHARS = 1 << 16


def literal_pattern(literals: Iterable[str],
                    values: dict[str, int] | None = None) -> re.Pattern | LiteralPattern | None:
    """What finds ``literals`` in a text: a regex of them, longest first, or for more than
    ``REGEX_MAX_LITERALS`` a :class:`LiteralPattern` that finds the same (``values``: a number per
    literal, its ``values``); None for no literals."""
    chosen = sorted(dict.fromkeys(literals), key=lambda literal: -len(literal))
    if not chosen:
        return None
    source = "|".join(map(re.escape, chosen))
    if len(chosen) <= REGEX_MAX_LITERALS or not chosen[-1]:  # (an empty literal matches everywhere: the regex's rule)
        return re.compile(source)
    return LiteralPattern(chosen, source, None if values is None else np.array([values[c] for c in chosen], np.int64))


class LiteralMatch:
    """A match of a :class:`LiteralPattern`: ``span()``, ``start()``, ``end()`` and ``group()`` as a
    regex match's."""

    __slots__ = ("string", "_start", "_end")

    def __init__(self, string: str, start: int, end: int) -> None:
        self.string, self._start, self._end = string, start, end

    def span(self) -> tuple[int, int]:
        return self._start, self._end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def group(self) -> str:
        return self.string[self._start:self._end]

    def __repr__(self) -> str:
        return f"<LiteralMatch span={self.span()} match={self.group()!r}>"


class LiteralPattern:
    """``re.compile("|".join(map(re.escape, literals)))`` for non-empty ``literals`` listed longest
    first, as far as gputok uses it: :meth:`search`, :meth:`finditer`, ``pattern`` (that regex's
    source), and :meth:`utf8_spans` for that regex on UTF-8 bytes. The literals' trie is built once
    (~10 ms for 5,000 words). ``values``: a number per literal (in
    ``literals``' order; an added token's id), or None."""

    def __init__(self, literals: list[str], source: str, values: np.ndarray | None = None) -> None:
        self.pattern = source
        self.values = values
        self._literals = literals
        self._longest = max(map(len, literals))
        self._utf8: LiteralPattern | None = None
        edges: dict[tuple[int, int], int] = {}  # (node, code) -> child
        literal_of = [-1]
        for index, literal in enumerate(literals):
            node = 0
            for char in literal:
                child = edges.get((node, ord(char)))
                if child is None:
                    child = edges[node, ord(char)] = len(literal_of)
                    literal_of.append(-1)
                node = child
            if literal_of[node] < 0:  # (a repeated literal: its first index)
                literal_of[node] = index
        nodes = len(literal_of)
        keys = np.array(sorted(edges), np.int64).reshape(-1, 2)  # by node, then code
        self._child_offsets = np.searchsorted(keys[:, 0], np.arange(nodes + 1)).astype(np.int64)
        self._child_codes = keys[:, 1].astype(np.int32)
        self._child_rows = np.array([edges[node, code] for node, code in keys.tolist()], np.int32)
        self._literal_of = np.array(literal_of, np.int32)
        root_codes = [code for node, code in edges if node == 0]
        self._dense_root = np.full(min(max(root_codes) + 1, DENSE_ROOT_CODES), -1, np.int32)
        for code in root_codes:
            if code < self._dense_root.size:
                self._dense_root[code] = edges[0, code]

    def matches(self, texts: list[str], first_only: bool = False) -> tuple[np.ndarray, ...]:
        """The matches in each of ``texts``, in one kernel call: int64 (starts, ends, literals,
        match_offsets), text ``t``'s from ``match_offsets[t]`` to ``match_offsets[t + 1]``, its
        starts and ends counted from its start, ``literals`` indices into the literals (longest
        first); ``first_only``: the first match of all, only."""
        units, lengths = utf32_units(texts)
        bounds = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return self._scan(units, bounds, first_only)

    def _scan(self, units: np.ndarray, bounds: np.ndarray, first_only: bool) -> tuple[np.ndarray, ...]:
        """``kernels/literal_match_numba.literal_matches`` of this trie over ``units``."""
        return literal_matches(units, bounds, self._dense_root, self._child_offsets, self._child_codes,
                               self._child_rows, self._literal_of, first_only)

    def utf8_spans(self, data: np.ndarray) -> np.ndarray:
        """[matches, 2] int64 spans of the literals' UTF-8 bytes in ``data`` (uint8), as the regex
        of them on bytes finds them (``re.compile(pattern.encode())``: the same leftmost-longest
        rule, one byte a step)."""
        if self._utf8 is None:  # the literals' bytes as latin-1 text, a code below 256 per byte (internal:
            # the trie is all it is for; a trie's match does not depend on the literals' order)
            self._utf8 = LiteralPattern([literal.encode("utf-8", "surrogatepass").decode("latin-1")
                                         for literal in self._literals], "")
        # the bytes as they are (a uint8 compile of the kernel): no int32 copy of a large input
        starts, ends, _, _ = self._utf8._scan(data, np.array([0, data.size], np.int64), False)
        return np.stack([starts, ends], 1)

    def search(self, text: str) -> LiteralMatch | None:
        """The first match in ``text``, or None: read ``SEARCH_CHARS`` characters at a time (with
        the longest literal's length less one more, for a match that crosses into the next), so
        that a match early in a long text costs no UTF-32 copy of all of it."""
        for at in range(0, max(len(text), 1), SEARCH_CHARS):
            starts, ends, _, _ = self.matches([text[at:at + SEARCH_CHARS + self._longest - 1]], True)
            if starts.size and starts[0] < SEARCH_CHARS:  # (one starting later is the next read's)
                return LiteralMatch(text, at + int(starts[0]), at + int(ends[0]))
        return None

    def finditer(self, text: str) -> Iterator[LiteralMatch]:
        """The matches in ``text``, left to right, none overlapping."""
        return iter([LiteralMatch(text, start, end) for start, end in match_spans(self, [text])[0]])


def match_spans(pattern: re.Pattern | LiteralPattern, texts: list[str]) -> list[list[tuple[int, int]]]:
    """Each text's matches of ``pattern`` (:func:`literal_pattern`'s), as (start, end) left to right:
    one kernel call for the batch where it is a :class:`LiteralPattern`."""
    if isinstance(pattern, re.Pattern):
        return [[m.span() for m in pattern.finditer(text)] for text in texts]
    starts, ends, _, match_offsets = pattern.matches(texts)
    spans = list(zip(starts.tolist(), ends.tolist()))
    cuts = match_offsets.tolist()
    return [spans[cuts[t]:cuts[t + 1]] for t in range(len(texts))]
