"""Subword regularization on the CPU: one sampled segmentation per word occurrence,
``P(segmentation) ~ exp(alpha * score)`` over the word's whole lattice (SentencePiece's
``SampleEncode`` with ``nbest_size=-1``).

Reference: ``gputok.models.unigram.Unigram.sample`` (the torch path): the same distribution, not
the same draws. The torch path draws Gumbel noise per edge and step; here the caller's torch
generator draws one uniform per character up front (``torch.rand``), and each occurrence samples
backwards by inverse CDF with the uniforms of its own characters (``uniforms[k]`` for its k-th
character from the batch start), so one generator state gives one result, and occurrences are
independent. Per word: the trie walk (``unigram_trie_numba.pieces_from``) lists every candidate
(piece or unk) by start; forward filtering sums ``alpha * score`` paths into each node in log space
(start positions in order); the backward pass, from the word's end, picks an edge into the
current node with probability ``exp(logz[start] + alpha * score - logz[node])``.
Memory: the candidates of the longest word (24 bytes each, ~2 per character) and 8 bytes per
character, plus the outputs.
"""

import math

import numpy as np

from ._numba import kernel
from .unigram_trie_numba import pieces_from


@kernel
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@kernel
def unigram_sample_numba(values, starts, lengths, code_of, trie, dense, rare_offsets, rare_codes, rare_rows,
                         piece_score, unk_score, unk_id, alpha, uniforms):
    """A sampled segmentation of every word ``values[starts[w]:starts[w] + lengths[w]]``.

    Trie arrays, ``piece_score`` (float64), ``unk_score`` and ``unk_id`` as in
    ``unigram_words_numba``; ``uniforms``: float64 in [0, 1), one per character of the words, in
    order. Returns ``(ids, ends, offsets, missing)`` as ``unigram_words_numba`` does (no margin).
    """
    words = starts.size
    longest = 0
    total = 0
    for w in range(words):
        longest = max(longest, lengths[w])
        total += lengths[w]
    room = 2 * longest + 16
    edge_start = np.empty(room, np.int64)
    edge_end = np.empty(room, np.int64)
    edge_piece = np.empty(room, np.int64)
    edge_weight = np.empty(room, np.float64)  # alpha * score
    logz = np.empty(longest + 1, np.float64)
    in_offsets = np.empty(longest + 2, np.int64)
    in_edges = np.empty(room, np.int64)
    path = np.empty(longest + 1, np.int64)
    piece_ends = np.empty(longest + 1, np.int64)  # the pieces from one start (pieces_from)
    piece_tokens = np.empty(longest + 1, np.int64)
    ids = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    offsets = np.zeros(words + 1, np.int64)
    missing = False
    written = 0
    drawn = 0  # uniforms used by the earlier words: one per character
    for w in range(words):
        lo = starts[w]
        n = lengths[w]
        count = 0
        logz[:n + 1] = -np.inf
        logz[0] = 0.0
        for s in range(n):
            base = logz[s]
            found = pieces_from(values, lo, n, s, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_ends,
                                piece_tokens)
            unk = found == 0 or piece_ends[0] != s + 1  # the unk candidate where no single piece starts
            missing |= unk and unk_id < 0
            for i in range(found + unk):
                if i < found:
                    end, piece = piece_ends[i], piece_tokens[i]
                    score = piece_score[piece]
                else:
                    end, piece, score = s + 1, unk_id, unk_score
                if count == room:  # grow the candidate lists
                    room *= 2
                    edge_start = np.concatenate((edge_start, np.empty(room - count, np.int64)))
                    edge_end = np.concatenate((edge_end, np.empty(room - count, np.int64)))
                    edge_piece = np.concatenate((edge_piece, np.empty(room - count, np.int64)))
                    edge_weight = np.concatenate((edge_weight, np.empty(room - count, np.float64)))
                    in_edges = np.empty(room, np.int64)
                edge_start[count] = s
                edge_end[count] = end
                edge_piece[count] = piece
                edge_weight[count] = alpha * score
                count += 1
                logz[end] = _logaddexp(logz[end], base + alpha * score)
        # The candidates into each node, by a counting sort of their ends.
        in_offsets[:n + 2] = 0
        for k in range(count):
            in_offsets[edge_end[k] + 1] += 1
        for e in range(n + 1):
            in_offsets[e + 1] += in_offsets[e]
        for k in range(count):
            e = edge_end[k]
            in_edges[in_offsets[e]] = k
            in_offsets[e] += 1
        for e in range(n, 0, -1):  # back to the starts of each node's run
            in_offsets[e] = in_offsets[e - 1]
        in_offsets[0] = 0
        tokens = 0
        at = n
        while at > 0:
            lo_e = in_offsets[at]
            hi_e = in_offsets[at + 1]
            mass = 0.0
            for i in range(lo_e, hi_e):
                k = in_edges[i]
                mass += math.exp(logz[edge_start[k]] + edge_weight[k] - logz[at])
            target = uniforms[drawn + tokens] * mass
            chosen = in_edges[hi_e - 1]
            acc = 0.0
            for i in range(lo_e, hi_e):
                k = in_edges[i]
                acc += math.exp(logz[edge_start[k]] + edge_weight[k] - logz[at])
                if target < acc:
                    chosen = k
                    break
            path[tokens] = chosen
            tokens += 1
            at = edge_start[chosen]
        for t in range(tokens):
            k = path[tokens - 1 - t]
            ids[written + t] = edge_piece[k]
            ends[written + t] = edge_end[k]
        written += tokens
        offsets[w + 1] = written
        drawn += n
    return ids[:written], ends[:written], offsets, missing
