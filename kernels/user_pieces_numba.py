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
- :func:`longest_piece`: the longest piece starting at a position (the matcher of both, and of
  the normalizer's walk below).
- the normalizer's copy of user pieces written in the raw text is ``charsmap_numba.rewrite_walk``
  (the charsmap's walk, which looks a user piece up first at each position it stands on, as
  SentencePiece's ``Normalizer::NormalizePrefix`` does, and copies the longest as one unit).

Pieces come as a table sorted by first codepoint, longer first (``firsts``, ``piece_offsets``
into ``piece_values``, ``piece_ids``: :func:`gputok.models.user_pieces.UserPieces`). Cost: per
position, a binary search on the first codepoint and a comparison with each piece that starts
with it (a few, usually none). Memory: 8 bytes per codepoint of scratch; the result as the input.
"""

import numpy as np

from ._numba import kernel
from .unigram_trie_numba import first_at_least


@kernel
def longest_piece(values, p, end, firsts, piece_offsets, piece_values):
    """Index (into the table sorted by first codepoint, longer first) of the longest piece that
    starts at ``values[p]`` and ends by ``end``, else -1."""
    c = values[p]
    k = first_at_least(firsts, 0, firsts.size, c)
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
            k = longest_piece(values, p, e, firsts, piece_offsets, piece_values)
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
            k = longest_piece(values, starts[w], ends[w], firsts, piece_offsets, piece_values)
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
