"""Leftmost-longest matches of a set of literal strings in a text, on the CPU: what a Python regex of
the literals joined by ``|``, longest first, finds, at a cost that does not grow with their number.

Contract: ``literal_matches(units, bounds, dense_root, child_offsets, child_codes, child_rows,
literal_of, first_only)`` returns int64 ``(starts, ends, literals, match_offsets)``: in each text
``units[bounds[t]:bounds[t + 1]]``, the matches left to right, each the longest literal that starts
at the leftmost position where any starts, the scan going on at its end (``re.finditer``'s matches,
none overlapping, none across texts), their starts and ends counted from the text's start, text
``t``'s being ``match_offsets[t]`` to ``match_offsets[t + 1]``; with ``first_only`` at most the
first of all (``re.search`` of one text). ``units``: the texts' UTF-32 code units back to back
(int32, as ``str.encode("utf-32-le", "surrogatepass")`` writes them: one per ``str`` index). The
literals are a trie (``gputok.literals.LiteralPattern`` builds it): node 0 is the root; a node's
children along sorted codes are ``child_codes`` / ``child_rows`` from ``child_offsets[node]`` to
``child_offsets[node + 1]``; ``dense_root[c]``, for a code below its size, is the root's child along
``c`` (-1: none), one load where most positions of a text start no literal; ``literal_of[node]``:
the literal that ends at the node (-1: none). Reference: the regex (``tests/test_literals.py``
compares the two on random literal sets and texts).

Why: Python's regex tries the alternatives one after another at each position whose character can
start one, so 5,000 word-like added tokens ran at ~0.4 M characters per second, where a walk down
the trie reads each position's children once.
Memory: the matches, in arrays that double as they fill.
"""

import numpy as np

from ._numba import kernel, uncounted
from .unigram_trie_numba import first_at_least


@uncounted
def _child(node, code, child_offsets, child_codes, child_rows):
    """The child of ``node`` along ``code``, or -1."""
    hi = child_offsets[node + 1]
    at = first_at_least(child_codes, child_offsets[node], hi, code)
    if at < hi and child_codes[at] == code:
        return child_rows[at]
    return -1


@kernel
def literal_matches(units, bounds, dense_root, child_offsets, child_codes, child_rows, literal_of, first_only):
    dense = dense_root.size
    capacity = 16
    starts = np.empty(capacity, np.int64)
    ends = np.empty(capacity, np.int64)
    literals = np.empty(capacity, np.int64)
    texts = bounds.size - 1
    match_offsets = np.zeros(texts + 1, np.int64)
    found = 0
    for t in range(texts):
        lo, hi = bounds[t], bounds[t + 1]
        i = lo
        while i < hi and not (first_only and found):
            code = units[i]
            node = dense_root[code] if code < dense else _child(0, code, child_offsets, child_codes, child_rows)
            end = -1
            literal = -1
            at = i + 1
            while node >= 0:  # down the trie as far as the text follows it; the last literal passed is the longest
                if literal_of[node] >= 0:
                    end = at
                    literal = literal_of[node]
                if at == hi:
                    break
                node = _child(node, units[at], child_offsets, child_codes, child_rows)
                at += 1
            if end < 0:
                i += 1
                continue
            if found == capacity:
                capacity *= 2
                starts = _grown(starts, capacity)
                ends = _grown(ends, capacity)
                literals = _grown(literals, capacity)
            starts[found] = i - lo
            ends[found] = end - lo
            literals[found] = literal
            found += 1
            i = end
        match_offsets[t + 1] = found
    return starts[:found], ends[:found], literals[:found], match_offsets


@kernel
def _grown(array, capacity):
    out = np.empty(capacity, array.dtype)
    out[:array.size] = array
    return out
