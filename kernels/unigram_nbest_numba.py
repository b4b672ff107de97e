"""The n best segmentations of each row (SentencePiece's ``NBestEncode``), on the CPU.

Reference: ``gputok.models.unigram.Unigram.nbest`` (the torch path): the same paths and float64
scores, in the same order. Per row, every node keeps its ``k`` best partial paths (score, and the
start, piece and rank of the path it extends), sorted best first. Start positions are taken in
order; each candidate of a start (a piece from the trie walk, or the unk candidate where no
single-character piece starts) offers its start's ``k`` paths to its end node, merged into the
node's list with the kept paths first on equal scores (the torch path's stable sort). The ``k``
paths of the row's end node are then read back. Memory: 32 bytes per node and path kept
(``k * (length + 1)`` per row), plus the outputs.
"""

import numpy as np

from ._numba import kernel
from .unigram_trie_numba import trie_child


@kernel
def _offer(best, back_start, back_piece, back_rank, s, t, piece, score, k, merged, m_start, m_piece, m_rank):
    """Merge the ``k`` paths of node ``s`` extended by ``piece`` (``score``) into node ``t``'s list."""
    i = 0
    j = 0
    for out in range(k):
        cand = best[s, j] + score if j < k else -np.inf
        if i < k and (j >= k or best[t, i] >= cand):
            merged[out] = best[t, i]
            m_start[out] = back_start[t, i]
            m_piece[out] = back_piece[t, i]
            m_rank[out] = back_rank[t, i]
            i += 1
        else:
            merged[out] = cand
            m_start[out] = s
            m_piece[out] = piece
            m_rank[out] = j
            j += 1
    best[t, :] = merged
    back_start[t, :] = m_start
    back_piece[t, :] = m_piece
    back_rank[t, :] = m_rank


@kernel
def unigram_nbest_numba(values, offsets, code_of, root_child, narrow_row, narrow_table, narrow, child_offsets,
                        child_codes, child_nodes, token_of_node, piece_score, unk_score, unk_id, k):
    """The ``k`` best segmentations of every row ``values[offsets[r]:offsets[r + 1]]``.

    Trie arrays, ``piece_score`` (float64), ``unk_score`` and ``unk_id`` as in
    ``unigram_words_numba``. Returns ``(tokens, path_offsets, scores, row_paths, missing)``: the
    token ids of every path, path after path (``path_offsets``), each path's float64 score, the
    paths of each row (``row_paths``: offsets into the paths), and whether a character needed an
    unk candidate while ``unk_id`` is -1.
    """
    rows = offsets.size - 1
    longest = 0
    for r in range(rows):
        longest = max(longest, offsets[r + 1] - offsets[r])
    best = np.empty((longest + 1, k), np.float64)
    back_start = np.empty((longest + 1, k), np.int64)
    back_piece = np.empty((longest + 1, k), np.int64)
    back_rank = np.empty((longest + 1, k), np.int64)
    merged = np.empty(k, np.float64)
    m_start = np.empty(k, np.int64)
    m_piece = np.empty(k, np.int64)
    m_rank = np.empty(k, np.int64)
    row_paths = np.zeros(rows + 1, np.int64)
    path_length = np.empty(rows * k, np.int64)
    scores = np.empty(rows * k, np.float64)
    tokens = np.empty(0, np.int64)
    written = 0
    paths = 0
    missing = False
    for phase in range(2):  # count the paths' tokens, then write them
        if phase == 1:
            tokens = np.empty(written, np.int64)
            written = 0
            paths = 0
        for r in range(rows):
            lo = offsets[r]
            n = offsets[r + 1] - lo
            best[:n + 1, :] = -np.inf
            back_start[:n + 1, :] = -1
            back_piece[:n + 1, :] = -1
            back_rank[:n + 1, :] = -1
            best[0, 0] = 0.0
            for s in range(n):
                single = False
                node = root_child[code_of[values[lo + s]]]
                end = s
                while node >= 0:
                    end += 1
                    token = token_of_node[node]
                    if token >= 0:
                        _offer(best, back_start, back_piece, back_rank, s, end, token, piece_score[token], k, merged,
                               m_start, m_piece, m_rank)
                        if end == s + 1:
                            single = True
                    if end >= n:
                        break
                    code = code_of[values[lo + end]]
                    if code < narrow:
                        node = narrow_table[narrow_row[node] * narrow + code]
                    else:
                        node = trie_child(node, code, child_offsets, child_codes, child_nodes)
                if not single:
                    missing |= unk_id < 0
                    _offer(best, back_start, back_piece, back_rank, s, s + 1, unk_id, unk_score, k, merged,
                           m_start, m_piece, m_rank)
            for j in range(k):
                if best[n, j] == -np.inf or (n == 0 and j > 0):
                    break
                count = 0
                at = n
                rank = j
                while at != 0:
                    count += 1
                    at, rank = back_start[at, rank], back_rank[at, rank]
                if phase == 1:
                    at = n
                    rank = j
                    for t in range(written + count - 1, written - 1, -1):
                        tokens[t] = back_piece[at, rank]
                        at, rank = back_start[at, rank], back_rank[at, rank]
                    scores[paths] = best[n, j]
                    path_length[paths] = count
                written += count
                paths += 1
            row_paths[r + 1] = paths
    path_offsets = np.zeros(paths + 1, np.int64)
    for p in range(paths):
        path_offsets[p + 1] = path_offsets[p] + path_length[p]
    return tokens, path_offsets, scores[:paths].copy(), row_paths, missing
