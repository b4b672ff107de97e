"""SentencePiece's user-defined pieces, matched whole before the model: numba kernels.

SentencePiece matches its ``USER_DEFINED`` pieces with a prefix matcher before the model runs:
from the start of the normalized text, at each position the longest user piece that starts there
is taken whole (the model never splits nor extends it) and the scan goes on after it; elsewhere
it moves on one character. The model then encodes the text between the matches (Unigram's
Viterbi and BPE's merges never cross a match).

Contract:

- :func:`cut_at_user_pieces`: the words of a pre-tokenizer (``starts``, ``ends``,
  ``text_offsets`` over ``values``, texts cut by ``offsets``) with every match a word of its own
  and every word cut where a match begins or ends; the characters of no word stay in none.
- :func:`user_piece_ids`: for words ``[starts, ends)``, the id of the user piece the word is
  (its longest user match from the start covers it exactly), else -1.
- :func:`rewrite_keeping_user_pieces`: ``charsmap_numba.charsmap_rewrite_numba``'s outputs for a
  normalizer that copies user pieces written in the raw text as they are: SentencePiece's
  normalizer (``Normalizer::NormalizePrefix``) looks for a user piece first at each position its
  walk stands on, and a match (the longest) is one unit, copied unchanged; elsewhere the
  charsmap's longest rule (or, without a charsmap, the character) as before. The whitespace
  rules then treat the copy as one unit (``sentencepiece_whitespace``: spaces inside it are kept,
  those it starts with go after a space, each is written as '▁').

Pieces come as a table sorted by first codepoint, longer first (``firsts``, ``piece_offsets``
into ``piece_values``, ``piece_ids``: :func:`gputok.models.user_pieces.UserPieces`). Cost: per
position, a binary search on the first codepoint and a comparison with each piece that starts
with it (a few, usually none). Memory: 8 bytes per codepoint of scratch; the result as the input.
"""

import numpy as np

from ._numba import kernel
from .charsmap_numba import CODEPOINT, CONTINUE, SEVERAL, START, _longest


@kernel
def _longest_match(values, p, end, firsts, piece_offsets, piece_values):
    """Index (into the sorted table) of the longest piece starting at ``values[p]`` and ending
    by ``end``, else -1."""
    c = values[p]
    k = np.searchsorted(firsts, c)
    while k < firsts.size and firsts[k] == c:
        a = piece_offsets[k]
        length = piece_offsets[k + 1] - a
        if p + length <= end:
            same = True
            for j in range(1, length):
                if values[p + j] != piece_values[a + j]:
                    same = False
                    break
            if same:
                return k  # longer pieces come first
        k += 1
    return -1


@kernel
def cut_at_user_pieces(values, offsets, starts, ends, text_offsets, firsts, piece_offsets, piece_values):
    """(starts, ends, text_offsets), int64: the words with the user-piece matches cut out as words."""
    n = values.size
    texts = offsets.size - 1
    label = np.full(n, -1, np.int64)  # the word (>= 0) or match (<= -2) each character belongs to
    for w in range(starts.size):
        for p in range(starts[w], ends[w]):
            label[p] = w
    matches = 0
    for t in range(texts):
        p = offsets[t]
        e = offsets[t + 1]
        while p < e:
            k = _longest_match(values, p, e, firsts, piece_offsets, piece_values)
            if k < 0:
                p += 1
                continue
            length = piece_offsets[k + 1] - piece_offsets[k]
            for j in range(p, p + length):
                label[j] = -2 - matches
            matches += 1
            p += length
    # A match cuts a word in up to two and is one itself: at most 3 more words per match.
    out_starts = np.empty(starts.size + 3 * matches, np.int64)
    out_ends = np.empty_like(out_starts)
    out_offsets = np.empty(texts + 1, np.int64)
    out_offsets[0] = 0
    w = 0
    for t in range(texts):
        p = offsets[t]
        e = offsets[t + 1]
        while p < e:
            if label[p] == -1:
                p += 1
                continue
            q = p + 1
            while q < e and label[q] == label[p]:
                q += 1
            out_starts[w] = p
            out_ends[w] = q
            w += 1
            p = q
        out_offsets[t + 1] = w
    return out_starts[:w].copy(), out_ends[:w].copy(), out_offsets


@kernel
def user_piece_ids(values, starts, ends, firsts, piece_offsets, piece_values, piece_ids):
    """int64 per word: the id of the user piece the word is, else -1."""
    out = np.full(starts.size, -1, np.int64)
    for w in range(starts.size):
        if ends[w] > starts[w]:
            k = _longest_match(values, starts[w], ends[w], firsts, piece_offsets, piece_values)
            if k >= 0 and piece_offsets[k + 1] - piece_offsets[k] == ends[w] - starts[w]:
                out[w] = piece_ids[k]
    return out


@kernel
def force_rows(ids, ends, offsets, forced, lengths):
    """Rows of tokens (``ids``/``ends`` cut by ``offsets``) with every row whose ``forced`` id is
    >= 0 replaced by that one token, ending at the row's ``lengths``."""
    rows = offsets.size - 1
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for r in range(rows):
        out_offsets[r + 1] = out_offsets[r] + (1 if forced[r] >= 0 else offsets[r + 1] - offsets[r])
    out_ids = np.empty(out_offsets[rows], ids.dtype)
    out_ends = np.empty(out_offsets[rows], ends.dtype)
    for r in range(rows):
        o = out_offsets[r]
        if forced[r] >= 0:
            out_ids[o] = forced[r]
            out_ends[o] = lengths[r]
        else:
            for j in range(offsets[r], offsets[r + 1]):
                out_ids[o] = ids[j]
                out_ends[o] = ends[j]
                o += 1
    return out_ids, out_ends, out_offsets


@kernel
def rewrite_keeping_user_pieces(values, offsets, charsmap, direct, table_values, table_offsets, hashes, order,
                                key_values, key_offsets, rule_values, rule_offsets, max_long, firsts, piece_offsets,
                                piece_values):
    """``(out, out_offsets, unit)`` as ``charsmap_rewrite_numba`` returns them (``charsmap``: whether
    its arrays are real, else each character is copied), with every user-piece match met by the
    walk copied as one unit. Two walks: one sizes each text and records each unit, one writes."""
    n = values.size
    rows = offsets.size - 1
    limit = direct.size
    # per unit start: -1 its own rule, >= 0 a longer rule, <= -3 a user piece (-3 - table index)
    rule_at = np.full(n, -2, np.int64)
    scratch = np.empty(max(max_long, 1), np.uint64)
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        i, end = offsets[t], offsets[t + 1]
        count = 0
        while i < end:
            k = _longest_match(values, i, end, firsts, piece_offsets, piece_values)
            if k >= 0:
                rule_at[i] = -3 - k
                length = piece_offsets[k + 1] - piece_offsets[k]
                count += length
                i += length
                continue
            if not charsmap:
                rule_at[i] = -1
                count += 1
                i += 1
                continue
            c = values[i]
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
    out = np.empty(out_offsets[rows], np.int32)
    unit = np.empty(out_offsets[rows], np.int64)
    at = 0
    for i in range(n):
        rule = rule_at[i]
        if rule == -2:  # inside a longer match
            continue
        if rule <= -3:
            k = -3 - rule
            for j in range(piece_offsets[k + 1] - piece_offsets[k]):
                out[at] = values[i + j]
                unit[at] = i
                at += 1
            continue
        if rule >= 0:
            for j in range(rule_offsets[rule], rule_offsets[rule + 1]):
                out[at] = rule_values[j]
                unit[at] = i
                at += 1
            continue
        c = values[i]
        if not charsmap:
            out[at] = c
            unit[at] = i
            at += 1
            continue
        d = direct[c]
        if not d & SEVERAL:
            out[at] = d & CODEPOINT
            unit[at] = i
            at += 1
        else:
            for j in range(table_offsets[c], table_offsets[c + 1]):
                out[at] = table_values[j]
                unit[at] = i
                at += 1
    return out, out_offsets, unit
