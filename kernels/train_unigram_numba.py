"""Unigram training on the CPU: the E-step's forward-backward and the pruning's Viterbi, numba kernels.

Both walk the step-major lattice of one batch of words that ``gputok.trainers.unigram._Lattice``
stores (rows ``(word w, end e)`` at ``step_base[e] + w``, each row's edges ``row_ptr[row] ..
row_ptr[row + 1]``, longest first; ``edge_src`` the forward-table index of an edge's start).

``unigram_expect_numba``: contract of ``gputok.trainers.unigram.unigram_expect_torch`` (the
reference, forced with ``_dispatch.use_backend("torch")``): every piece's expected count over all
words' lattices weighted by ``counts``, and each word's log-likelihood, float64. The same loops
in the same order as the twin (forward sums relative to ``alpha[w, e - 1]``, the backward pass in
the linear domain: an edge's share is ``x / total[end]``), one edge at a time; equal to the twin to
rounding (``exp`` / ``log`` of libm against torch's vectorized ones: ~1e-15 relative). The
training's CPU E-step (``unigram_expect``), one batch per thread at once: on 20 MB of English,
vocab 8000, 2 threads (``benchmarks/train_unigram.py``), the E-steps took 2.5-2.7 s against
5.8-5.9 s with the twin on torch's threads, the same 8,000 pieces and scores. Its time goes to the
gathers and scatters of a step-major lattice, not ``exp``: the loops without it ran as fast, and
splitting out the ``exp`` loop or summing each row's edges in order (no scatter) gained nothing.

``unigram_viterbi_numba``: contract of ``gputok.trainers.unigram._viterbi`` (reference: its torch
path): each word's best segmentation as the indices of its edges, last piece first, and the word of
each edge; ties go to the first best edge of a row (the longest piece), as in the reference. The
sums and comparisons are the twin's, so the result is identical.
"""

import numpy as np

from ._numba import kernel


@kernel
def unigram_expect_numba(lengths, counts, step_base, row_ptr, edge_src, edge_word, edge_piece, scores):
    num_words = lengths.size
    expected = np.zeros(scores.size, dtype=np.float64)
    if num_words == 0:
        return expected, np.zeros(0, dtype=np.float64)
    max_len = lengths[0]
    table = num_words + row_ptr.size - 1
    alpha = np.zeros(table, dtype=np.float64)
    total = np.zeros(table, dtype=np.float64)
    x = np.empty(edge_piece.size, dtype=np.float64)
    for e in range(1, max_len + 1):
        lo, hi = row_ptr[step_base[e]], row_ptr[step_base[e + 1]]
        n = step_base[e + 1] - step_base[e]
        prev = 0 if e == 1 else num_words + step_base[e - 1]
        here = num_words + step_base[e]
        for j in range(n):
            total[here + j] = 0.0
        for i in range(lo, hi):
            d = edge_word[i]
            xi = np.exp(scores[edge_piece[i]] + alpha[edge_src[i]] - alpha[prev + d])
            x[i] = xi
            total[here + d] += xi
        for j in range(n):
            alpha[here + j] = np.log(total[here + j]) + alpha[prev + j]
    log_z = np.empty(num_words, dtype=np.float64)
    post = np.zeros(table, dtype=np.float64)
    for w in range(num_words):
        last = num_words + step_base[lengths[w]] + w
        log_z[w] = alpha[last]
        post[last] = counts[w]
    for e in range(max_len, 0, -1):
        lo, hi = row_ptr[step_base[e]], row_ptr[step_base[e + 1]]
        here = num_words + step_base[e]
        for i in range(lo, hi):
            d = edge_word[i]
            m = x[i] * (post[here + d] / total[here + d])
            x[i] = m
            post[edge_src[i]] += m
    for i in range(edge_piece.size):
        expected[edge_piece[i]] += x[i]
    return expected, log_z


@kernel
def unigram_viterbi_numba(lengths, step_base, row_ptr, edge_src, edge_word, edge_len, edge_score):
    num_words = lengths.size
    rows = row_ptr.size - 1
    best = np.zeros(num_words + rows, dtype=np.float64)
    back = np.empty(rows, dtype=np.int64)
    max_len = lengths[0] if num_words else 0
    for e in range(1, max_len + 1):
        b0, b1 = step_base[e], step_base[e + 1]
        for row in range(b0, b1):
            top = -np.inf
            arg = -1
            for i in range(row_ptr[row], row_ptr[row + 1]):
                v = best[edge_src[i]] + edge_score[i]
                if arg < 0 or v > top:
                    top = v
                    arg = i
            best[num_words + row] = top
            back[row] = arg
    total = 0
    for w in range(num_words):
        end = lengths[w]
        while end > 0:
            total += 1
            end -= edge_len[back[step_base[end] + w]]
    edges = np.empty(total, dtype=np.int64)
    owner = np.empty(total, dtype=np.int64)
    k = 0
    for w in range(num_words):
        end = lengths[w]
        while end > 0:
            edge = back[step_base[end] + w]
            edges[k] = edge
            owner[k] = w
            k += 1
            end -= edge_len[edge]
    return edges, owner


@kernel
def unigram_alternatives_numba(step_base, row_ptr, edge_len, edge_piece, queries, word, start, length, score,
                               num_seeds, alt_score, chain_piece, chain_len):
    """The pruning's alternatives (contract of ``_Trainer._alternatives``' DP, its torch path the
    reference) for the queries of one lattice batch: query ``queries[j]`` is a piece of ``length[j]``
    characters at character ``start[j]`` of the batch's word ``word[j]``. Its best segmentation
    without itself (edges of the lattice inside the piece, the piece's own edge excluded; ties to
    the longest last piece) goes to ``alt_score[q]`` and, last piece first, to ``chain_piece[q, :]``
    (-1: the unknown character or no edge), ``chain_len[q]`` entries. The sums and the first-maximum
    rule are the twin's, so the result is identical."""
    m = chain_piece.shape[1]
    best = np.empty(m + 1, dtype=np.float64)
    back_len = np.empty(m + 1, dtype=np.int64)
    back_piece = np.empty(m + 1, dtype=np.int64)
    col = np.empty(m + 1, dtype=np.int64)
    for j in range(queries.size):
        q, w, s, size = queries[j], word[j], start[j], length[j]
        best[0] = 0.0
        for k in range(1, size + 1):
            for c in range(k):
                col[c] = -1
            row = step_base[s + k] + w
            for edge in range(row_ptr[row], row_ptr[row + 1]):
                ln = np.int64(edge_len[edge])
                if ln <= k:
                    col[k - ln] = edge_piece[edge]
            top = -np.inf
            arg = 0
            for c in range(k):
                v = (-np.inf if col[c] < 0 else score[col[c]]) + best[c]
                if c == 0 and size == k:
                    v = -np.inf  # the piece itself is not its own alternative
                if c == 0 or v > top:
                    top = v
                    arg = c
            best[k] = top
            back_len[k] = k - arg
            back_piece[k] = -1 if col[arg] == num_seeds else col[arg]
        alt_score[q] = best[size]
        pos = size
        n = 0
        while pos > 0:
            chain_piece[q, n] = back_piece[pos]
            n += 1
            pos -= back_len[pos]
        chain_len[q] = n
