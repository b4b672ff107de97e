"""Unigram Viterbi per word in float64, walking the piece trie directly: the CPU path of
``Unigram.segment`` (huggingface's arithmetic) without building the lattice.

Reference: ``gputok.models.unigram.Unigram.segment`` (the lattice of ``Unigram.lattice`` and
``unigram_viterbi_torch``): same ids, ends, counts and margins. Per word, start positions in
order; from each, the trie walk (``PieceTrie.walk_arrays``, the double array of ``unigram_trie_numba``)
offers every piece that starts there to the node after it, which takes it if it has none yet or the
candidate (``best[start] + score``, float64) is strictly greater; a start no single-character
piece covers offers the unk candidate (``unk_score``). Each node also keeps its runner-up, for the
word's margin (the smallest gap between best and runner-up at any node; inf if none had two).
Memory: 24 bytes per character of the longest word of scratch, plus the outputs (16 bytes per
token, 8 per word).
"""

import numpy as np

from ._numba import inlined, kernel
from .unigram_trie_numba import TOKEN, trie_step, write_best_path


@inlined
def word_viterbi(values, lo, n, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score, unk_score,
                 unk_id, best, second, start, piece, codes):
    """The float64 Viterbi of the word ``values[lo:lo + n]`` into the scratch arrays (``start[e]``,
    ``piece[e]``: the best piece into node ``e``, ``best[e]`` its path's score). Returns the word's
    margin and whether it needed an unk candidate while ``unk_id`` is -1."""
    for i in range(n):
        codes[i] = code_of[values[lo + i]]
    for i in range(n + 1):
        start[i] = -1
        second[i] = -np.inf
    best[0] = 0.0
    missing = False
    for s in range(n):
        base = best[s]
        single = False
        node = 0  # the root
        end = s
        while end < n:
            node = trie_step(node, codes[end], trie, dense, rare_offsets, rare_codes, rare_rows)
            if node < 0:
                break
            end += 1  # the piece of ``node`` covers s .. end
            token = trie[node, TOKEN]
            if token >= 0:
                cand = base + piece_score[token]
                if start[end] < 0:
                    best[end] = cand
                    start[end] = s
                    piece[end] = token
                elif cand > best[end]:
                    second[end] = max(second[end], best[end])
                    best[end] = cand
                    start[end] = s
                    piece[end] = token
                else:
                    second[end] = max(second[end], cand)
                if end == s + 1:
                    single = True
        if not single:
            missing |= unk_id < 0
            cand = base + unk_score
            if start[s + 1] < 0:
                best[s + 1] = cand
                start[s + 1] = s
                piece[s + 1] = unk_id
            elif cand > best[s + 1]:
                second[s + 1] = max(second[s + 1], best[s + 1])
                best[s + 1] = cand
                start[s + 1] = s
                piece[s + 1] = unk_id
            else:
                second[s + 1] = max(second[s + 1], cand)
    gap = np.inf
    for e in range(1, n + 1):
        gap = min(gap, best[e] - second[e])
    return gap, missing


@kernel
def unigram_words_numba(values, starts, lengths, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score,
                        unk_score, unk_id):
    """Best segmentation of every word ``values[starts[w]:starts[w] + lengths[w]]``.

    The trie arrays are :class:`gputok.models.unigram.PieceTrie`'s (see
    ``unigram_sentence.unigram_sentence_viterbi``); ``piece_score``: float64 per piece id,
    ``unk_score`` the unk candidate's, ``unk_id`` its id (-1: the model has none).
    Returns ``(ids, ends, offsets, margin, missing)``: int64 token ids and ends (characters into
    their word), the words' int64 token offsets, each word's float64 margin, and whether some
    character needed an unk candidate while ``unk_id`` is -1 (its token id is then -1).
    """
    words = starts.size
    longest = 0
    total = 0
    for w in range(words):
        longest = max(longest, lengths[w])
        total += lengths[w]
    best = np.empty(longest + 1, np.float64)
    second = np.empty(longest + 1, np.float64)
    start = np.empty(longest + 1, np.int32)
    piece = np.empty(longest + 1, np.int64)
    codes = np.empty(longest + 1, np.int32)  # the word's alphabet codes, looked up once
    ids = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    offsets = np.zeros(words + 1, np.int64)
    margin = np.empty(words, np.float64)
    missing = False
    written = 0
    for w in range(words):
        n = lengths[w]
        margin[w], unk_missing = word_viterbi(values, starts[w], n, code_of, trie, dense, rare_offsets, rare_codes,
                                              rare_rows, piece_score, unk_score, unk_id, best, second, start, piece,
                                              codes)
        missing |= unk_missing
        written += write_best_path(start, piece, n, ids, ends, written)
        offsets[w + 1] = written
    return ids[:written], ends[:written], offsets, margin, missing
