"""The n best segmentations of each row (SentencePiece's ``NBestEncode``), on the CPU.

Lists of more than one: ``unigram_nbest_astar``, SentencePiece's own A* search (see its notes
below): its paths, their float32 scores and its order of equal-score paths. A list of one:
``unigram_nbest_numba``, whose reference is ``gputok.models.unigram.Unigram.nbest`` (the torch
path): the same paths and float64 scores, in the same order (for longer lists the torch path gives
the same paths as the A* search, equal-score ones in another order). Per row, every node keeps its ``k`` best partial paths (score, and the
start, piece and rank of the path it extends), sorted best first. Start positions are taken in
order; each candidate of a start (a piece from the trie walk, or the unk candidate where no
single-character piece starts) offers its start's ``k`` paths to its end node, merged into the
node's list with the kept paths first on equal scores (the torch path's stable sort). The ``k``
paths of the row's end node are then read back. Memory: 32 bytes per node and path kept
(``k * (length + 1)`` per row), plus the outputs.
"""

import numpy as np

from ._numba import kernel
from .unigram_trie_numba import pieces_from


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
def unigram_nbest_numba(values, offsets, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score,
                        unk_score, unk_id, k):
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
    piece_ends = np.empty(longest + 1, np.int64)
    piece_tokens = np.empty(longest + 1, np.int64)
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
                found = pieces_from(values, lo, n, s, code_of, trie, dense, rare_offsets, rare_codes, rare_rows,
                                    piece_ends, piece_tokens)
                for i in range(found):
                    token = piece_tokens[i]
                    _offer(best, back_start, back_piece, back_rank, s, piece_ends[i], token, piece_score[token], k,
                           merged, m_start, m_piece, m_rank)
                if found == 0 or piece_ends[0] != s + 1:  # no single-character piece starts at s
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


# ---- SentencePiece's own search, for lists of more than one -------------------------------------
# ``Lattice::NBest`` (``unigram_model.cc``): a Viterbi pass in float32 gives every lattice node the
# best score of a path from the start to its end (``h``), then an A* search from the end node pops
# hypotheses (partial paths back from the end) from a binary max-heap on ``f = g + h`` (``g``: the
# float32 score of the part kept), each pop pushing the hypotheses that extend it by every node
# ending where its leftmost node starts, until ``k`` reach the start. Equal ``f`` leave the order
# to the heap: ``std::priority_queue`` over a vector, whose sift-up and sift-down (libstdc++'s
# ``push_heap`` and ``pop_heap``, which sinks the hole to a leaf then sifts the last element up)
# are reproduced here step for step. Past 10,000 queued hypotheses SentencePiece keeps only the
# best ``min(512, 10 k)``, popped in order and pushed into a new heap: so does this search.
# Memory: per row, 4 arrays over its lattice nodes and 4 over its hypotheses (~24 bytes each; a few
# per node on a path popped), plus the outputs.
AGENDA_LIMIT, AGENDA_KEPT = 10000, 512


@kernel
def _grow(a, need):
    """``a`` itself if it holds ``need`` items, else a copy twice as large (or ``need``)."""
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size), a.dtype)
    out[:a.size] = a
    return out


@kernel
def _sift_up(heap, hole, top, hyp, f):
    parent = (hole - 1) // 2
    while hole > top and f[heap[parent]] < f[hyp]:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = hyp


@kernel
def _heap_pop(heap, size, f):
    """The best hypothesis; the heap's first ``size - 1`` entries are then the rest."""
    best = heap[0]
    size -= 1
    if size > 0:
        last = heap[size]
        hole = 0
        child = 0
        while child < (size - 1) // 2:
            child = 2 * (child + 1)
            if f[heap[child]] < f[heap[child - 1]]:
                child -= 1
            heap[hole] = heap[child]
            hole = child
        if size % 2 == 0 and child == (size - 2) // 2:
            child = 2 * (child + 1)
            heap[hole] = heap[child - 1]
            hole = child - 1
        _sift_up(heap, hole, 0, last, f)
    return best


@kernel
def unigram_nbest_astar(values, offsets, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score,
                        unk_score, unk_id, k):
    """:func:`unigram_nbest_numba`'s outputs (the same arguments) by SentencePiece's own search:
    its paths in its order, ties included, and its float32 path scores (as float64)."""
    rows = offsets.size - 1
    row_paths = np.zeros(rows + 1, np.int64)
    path_offsets = np.zeros(1, np.int64)
    scores = np.empty(0, np.float64)
    tokens = np.empty(0, np.int64)
    start = np.empty(16, np.int64)  # lattice nodes: 0 the start (BOS), 1 the end (EOS), then in order
    end = np.empty(16, np.int64)
    token = np.empty(16, np.int64)
    score = np.empty(16, np.float32)
    h = np.empty(16, np.float32)
    h_node = np.empty(64, np.int64)  # hypotheses
    h_next = np.empty(64, np.int64)
    h_f = np.empty(64, np.float32)
    h_g = np.empty(64, np.float32)
    heap = np.empty(64, np.int64)
    kept = np.empty(AGENDA_KEPT, np.int64)
    piece_ends = np.empty(16, np.int64)  # the pieces from one start (pieces_from)
    piece_tokens = np.empty(16, np.int64)
    paths = 0
    written = 0
    missing = False
    for r in range(rows):
        lo = offsets[r]
        n = offsets[r + 1] - lo
        start[0], end[0], token[0], score[0] = 0, 0, -1, 0.0
        start[1], end[1], token[1], score[1] = n, n, -1, 0.0
        nodes = 2
        piece_ends, piece_tokens = _grow(piece_ends, n + 1), _grow(piece_tokens, n + 1)
        for s in range(n):  # PopulateNodes: a start's pieces shortest first, then its unk candidate
            room = nodes + n - s + 1  # (at most a piece per end, and the unk candidate)
            start, end, token, score, h = _grow(start, room), _grow(end, room), _grow(token, room), \
                _grow(score, room), _grow(h, room)
            found = pieces_from(values, lo, n, s, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_ends,
                                piece_tokens)
            for i in range(found):
                t = piece_tokens[i]
                start[nodes], end[nodes], token[nodes], score[nodes] = s, piece_ends[i], t, np.float32(piece_score[t])
                nodes += 1
            if found == 0 or piece_ends[0] != s + 1:  # no single-character piece starts at s
                missing |= unk_id < 0
                start[nodes], end[nodes], token[nodes], score[nodes] = s, s + 1, unk_id, np.float32(unk_score)
                nodes += 1
        # the nodes ending at each position, in insertion order (the start node first at 0)
        ending = np.zeros(n + 2, np.int64)
        for i in range(nodes):
            if i != 1:
                ending[end[i] + 1] += 1
        for p in range(n + 1):
            ending[p + 1] += ending[p]
        ended = np.empty(ending[n + 1], np.int64)
        fill = ending[:n + 1].copy()
        for i in range(nodes):
            if i != 1:
                ended[fill[end[i]]] = i
                fill[end[i]] += 1
        # Viterbi (float32): a node's h is its best path's score up to its end; ties keep the first
        h[0] = 0.0
        for i in range(1, nodes):
            if i == 1:
                continue
            _viterbi_node(i, start, score, h, ended, ending)
        _viterbi_node(1, start, score, h, ended, ending)
        # A*
        hyps = 1
        h_node[0], h_next[0], h_g[0], h_f[0] = 1, -1, 0.0, h[1]
        heap[0] = 0
        size = 1
        found = 0
        while size > 0:
            top = _heap_pop(heap, size, h_f)
            size -= 1
            node = h_node[top]
            if node == 0:  # a whole path
                count = 0
                x = h_next[top]
                while h_next[x] != -1:
                    count += 1
                    x = h_next[x]
                tokens = _grow(tokens, written + count)
                x = h_next[top]
                while h_next[x] != -1:
                    tokens[written] = token[h_node[x]]
                    written += 1
                    x = h_next[x]
                path_offsets = _grow(path_offsets, paths + 2)
                scores = _grow(scores, paths + 1)
                path_offsets[paths + 1] = written
                scores[paths] = np.float64(h_f[top])
                paths += 1
                found += 1
                if found == k:
                    break
                continue
            p = start[node]
            g = h_g[top]
            width = ending[p + 1] - ending[p]
            h_node, h_next = _grow(h_node, hyps + width), _grow(h_next, hyps + width)
            h_f, h_g, heap = _grow(h_f, hyps + width), _grow(h_g, hyps + width), _grow(heap, size + width)
            for j in range(ending[p], ending[p + 1]):
                left = ended[j]
                h_node[hyps], h_next[hyps] = left, top
                h_g[hyps] = score[left] + g
                h_f[hyps] = h[left] + g
                heap[size] = hyps
                _sift_up(heap, size, 0, hyps, h_f)
                size += 1
                hyps += 1
            if size >= AGENDA_LIMIT:  # keep the best few, pushed in order into a new heap
                keep = min(AGENDA_KEPT, 10 * k)
                for i in range(keep):
                    kept[i] = _heap_pop(heap, size, h_f)
                    size -= 1
                for i in range(keep):
                    heap[i] = kept[i]
                    _sift_up(heap, i, 0, kept[i], h_f)
                size = keep
        row_paths[r + 1] = paths
    return tokens[:written].copy(), path_offsets[:paths + 1].copy(), scores[:paths].copy(), row_paths, missing


@kernel
def _viterbi_node(i, start, score, h, ended, ending):
    p = start[i]
    best = np.float32(0.0)
    first = True
    for j in range(ending[p], ending[p + 1]):
        candidate = h[ended[j]] + score[i]
        if first or candidate > best:
            best = candidate
            first = False
    h[i] = best


@kernel
def sample_nbest_at_words(tokens, path_offsets, scores, row_paths, uniforms, alpha, token_chars, word_starts,
                          word_ends, sentence_words):
    """SentencePiece's sampling from an n-best list (``SampleEncode`` with ``nbest_size > 1``): for
    each sentence ``k`` (row ``k`` of ``unigram_nbest_astar``'s lists), the path drawn with
    probability ``exp(alpha * score)`` over the list's sum, by the inverse of the distribution at
    ``uniforms[k]`` (float64 in [0, 1)); its tokens cut at the sentence's words (words
    ``sentence_words[k] .. sentence_words[k + 1]``, as in ``unigram_sentence.unigram_sentences_encode``;
    a token covers ``token_chars`` of its id). Returns ``(ids, ends, offsets)``: int64 token ids and
    ends (characters into their word), one row per word, and the rows' int64 offsets."""
    sentences = sentence_words.size - 1
    chosen = np.full(sentences, -1, np.int64)
    total = 0
    for k in range(sentences):
        lo, hi = row_paths[k], row_paths[k + 1]
        if sentence_words[k + 1] == sentence_words[k] or hi == lo:
            continue
        top = scores[lo]
        for p in range(lo, hi):
            top = max(top, scores[p])
        weight = 0.0
        for p in range(lo, hi):
            weight += np.exp(alpha * (scores[p] - top))
        target = uniforms[k] * weight
        pick = hi - 1  # (rounding can leave the target past the last sum)
        weight = 0.0
        for p in range(lo, hi):
            weight += np.exp(alpha * (scores[p] - top))
            if target < weight:
                pick = p
                break
        chosen[k] = pick
        total += path_offsets[pick + 1] - path_offsets[pick]
    ids = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    counts = np.zeros(word_starts.size, np.int64)
    at = 0
    for k in range(sentences):
        if chosen[k] < 0:
            continue
        w = sentence_words[k]
        position = word_starts[w]
        for t in range(path_offsets[chosen[k]], path_offsets[chosen[k] + 1]):
            position += token_chars[tokens[t]]
            while word_ends[w] < position:
                w += 1
            ids[at] = tokens[t]
            ends[at] = position - word_starts[w]
            counts[w] += 1
            at += 1
    offsets = np.zeros(word_starts.size + 1, np.int64)
    for w in range(word_starts.size):
        offsets[w + 1] = offsets[w] + counts[w]
    return ids, ends, offsets
