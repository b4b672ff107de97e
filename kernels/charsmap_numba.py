"""SentencePiece's precompiled-charsmap rewrite on the CPU: longest match, left to right, per text.

Contract: ``charsmap_rewrite_numba`` takes ragged codepoints (``values``, int64 ``offsets``) and
the rules of a ``gputok.charsmap.Charsmap`` as arrays, and returns the rewritten int32
codepoints, their int64 row offsets and, for each output codepoint, the int64 input index its
unit (the match it came from) starts at. Reference: ``Charsmap.rewrite`` under the torch backend
(it settles overlapping long matches by fixpoint rounds; here the walk itself is SentencePiece's:
at each position the longest rule, else the character's own one-codepoint rule).

The rules: ``direct`` (int32 per codepoint: the one-codepoint rewrite in bits 0-20, bit 21 set
where a longer rule can start, bit 22 where one can continue, bit 23 where the codepoint's own
rule writes zero or several codepoints, read then from the CSR map ``table_values`` /
``table_offsets``); the longer rules as CSR keys and values, found through ``hashes``, the sorted
hashes of their keys (``key_hashes_numba``; a key's hash also mixes in its length), with
``order`` the rule of each. A position looks longer rules up only where its codepoint can start
one and the next can continue one (combining sequences, Hangul jamo: rare), then tries the
longest length first, checking the codepoints (a hash can collide).
Two walks: one counts each text's output and records each unit's rule, one writes. The walk is
``rewrite_walk``, which can also take SentencePiece's user pieces first (none here).
Memory: the outputs, plus 4 bytes per input codepoint.
"""

import numpy as np

from ._numba import kernel
from .unigram_trie_numba import first_at_least
from .user_pieces_numba import longest_piece

START, CONTINUE, SEVERAL = 1 << 21, 1 << 22, 1 << 23
CODEPOINT = (1 << 21) - 1


@kernel
def _mix(h):
    """splitmix64's finalizer on uint64."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@kernel
def key_hashes_numba(key_values, key_offsets):
    """The hash of every key (a run of codepoints), as the rewrite computes it at a position."""
    rows = key_offsets.size - 1
    out = np.empty(rows, np.uint64)
    for r in range(rows):
        h = np.uint64(0)
        for j in range(key_offsets[r], key_offsets[r + 1]):
            h = _mix(h ^ (np.uint64(key_values[j]) + (np.uint64(j - key_offsets[r]) << np.uint64(32))))
        out[r] = h
    return out


@kernel
def _longest(values, i, end, hashes, order, key_values, key_offsets, max_long, scratch):
    """The longest rule whose key starts ``values[i:end]`` (-1 if none)."""
    most = min(max_long, end - i)
    h = np.uint64(0)
    for j in range(most):
        h = _mix(h ^ (np.uint64(values[i + j]) + (np.uint64(j) << np.uint64(32))))
        scratch[j] = h
    for size in range(most, 1, -1):
        h = scratch[size - 1]
        at = first_at_least(hashes, 0, hashes.size, h)
        while at < hashes.size and hashes[at] == h:
            rule = order[at]
            lo = key_offsets[rule]
            if key_offsets[rule + 1] - lo == size:
                same = True
                for j in range(size):
                    if key_values[lo + j] != values[i + j]:
                        same = False
                        break
                if same:
                    return rule
            at += 1
    return -1


@kernel
def charsmap_rewrite_numba(values, offsets, direct, table_values, table_offsets, hashes, order,
                           key_values, key_offsets, rule_values, rule_offsets, max_long):
    no_pieces = np.zeros(0, np.int64)
    return rewrite_walk(values, offsets, True, direct, table_values, table_offsets, hashes, order, key_values,
                        key_offsets, rule_values, rule_offsets, max_long, no_pieces, no_pieces, no_pieces)


@kernel
def rewrite_walk(values, offsets, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                 key_offsets, rule_values, rule_offsets, max_long, firsts, piece_offsets, piece_values):
    """The walk of :func:`charsmap_rewrite_numba` (``charsmap``: whether its arrays are real, else
    each character is its own unit, copied), where user pieces (a table as in
    ``user_pieces_numba``: ``firsts`` empty for none) are looked up first at each position the
    walk stands on, as SentencePiece's ``NormalizePrefix`` does: the longest that starts there is
    one unit, copied as it is (``gputok.models.user_pieces.UserPieceNormalizer``)."""
    n = values.size
    rows = offsets.size - 1
    limit = direct.size
    pieces = firsts.size > 0
    # per unit start: -1 its own rule, >= 0 a longer rule, <= -3 a user piece (-3 - its index)
    rule_at = np.full(n, -2, np.int32)
    scratch = np.empty(max(max_long, 1), np.uint64)
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        i, end = offsets[t], offsets[t + 1]
        count = 0
        while i < end:
            if pieces:
                k = longest_piece(values, i, end, firsts, piece_offsets, piece_values)
                if k >= 0:
                    rule_at[i] = -3 - k
                    count += piece_offsets[k + 1] - piece_offsets[k]
                    i += piece_offsets[k + 1] - piece_offsets[k]
                    continue
            c = values[i]
            if not charsmap:
                rule_at[i] = -1
                count += 1
                i += 1
                continue
            if c < 0 or c >= limit:
                raise ValueError("a codepoint outside the charsmap's table (0..0x10FFFF)")
            d = direct[c]
            rule = -1
            if d & START and i + 1 < end:
                c2 = values[i + 1]
                if 0 <= c2 < limit and direct[c2] & CONTINUE:
                    rule = _longest(values, i, end, hashes, order, key_values, key_offsets, max_long, scratch)
            rule_at[i] = rule
            if rule >= 0:
                count += rule_offsets[rule + 1] - rule_offsets[rule]
                i += key_offsets[rule + 1] - key_offsets[rule]
            else:
                count += 1 if not d & SEVERAL else table_offsets[c + 1] - table_offsets[c]
                i += 1
        out_offsets[t + 1] = out_offsets[t] + count
    total = out_offsets[rows]
    out = np.empty(total, np.int32)
    unit = np.empty(total, np.int64)
    at = 0
    for i in range(n):
        rule = rule_at[i]
        if rule == -2:  # inside a longer match or a user piece
            continue
        if rule <= -3 or not charsmap:  # a user piece, or a character with no charsmap: as it is
            for j in range(piece_offsets[-2 - rule] - piece_offsets[-3 - rule] if rule <= -3 else 1):
                out[at] = values[i + j]
                unit[at] = i
                at += 1
            continue
        if rule >= 0:
            for k in range(rule_offsets[rule], rule_offsets[rule + 1]):
                out[at] = rule_values[k]
                unit[at] = i
                at += 1
            continue
        c = values[i]
        d = direct[c]
        if not d & SEVERAL:
            out[at] = d & CODEPOINT
            unit[at] = i
            at += 1
        else:
            for k in range(table_offsets[c], table_offsets[c + 1]):
                out[at] = table_values[k]
                unit[at] = i
                at += 1
    return out, out_offsets, unit

