"""What the Unigram kernels share (``unigram_sentence``, ``unigram_words_numba``,
``unigram_nbest_numba``, ``unigram_sample_numba``, and the Triton twin ``unigram_texts``): the
piece trie as a double array with rare edges (built by :func:`double_array`), its rare step
(:func:`rare_child`), the pieces that start at a position (:func:`pieces_from`: the n-best and
sampling kernels' walk), the read-back of a Viterbi's best path, and a binary search
(:func:`first_at_least`, also for ``charsmap_numba``'s and ``user_pieces_numba``'s sorted keys).

The trie (``PieceTrie.walk_arrays``): ``code_of`` maps a codepoint to its alphabet code (0: in no
piece; the commonest following characters have the smallest codes), and ``trie``, int32 ``[rows,
4]``, holds a node per row, the root in row 0. The child of the node in row ``node`` along
``code``, from the root or along a code below ``dense``, is row ``child = trie[node, BASE] +
code`` if ``trie[child, CHECK] == node``, else there is none; along a rarer code it is found by
binary search in the node's sorted rare edges (``rare_offsets[node]`` .. ``rare_offsets[node +
1]`` of ``rare_codes`` and ``rare_rows``). ``trie[node, TOKEN]`` is the piece that ends at the node
(-1: none); the fourth column pads a row to 16 bytes, so that no row crosses a cache line. A row
whose ``CHECK`` is -1 is free, the root's, or holds a node reached by a rare edge (no step finds it
by its ``CHECK``), and the table runs ``codes`` rows past the last node, so every step reads inside
it.
Code 0 has no child anywhere: codes start at 1.

Why: a step is two loads from one small table (the 8k test model: 21,209 rows for 20,239 nodes,
339 kB, with 539 rare edges, all Chinese), where the table it replaced kept a dense row of the 32
commonest following characters per node (1.6 MB) and searched the node's child list for the
others (a third of English's steps). Word Viterbi on the 220k distinct words of 300k English
lines: 32.3 -> 28.3 and 25.8 -> 23.0 ns per character, two runs alternated (one thread,
``unigram_words_numba`` timed on the same words by a scratch script). Holding every code in the
array instead made the build slow on large alphabets (a Zipfian 250k-piece trie over 20k
characters: 4.3 s), where ``dense`` codes keep each node's block of rows narrow (0.8 s).

(Numba's cache checks only the file of the function it compiled; ``kernels/_numba.py`` names the
cache folder by a hash of every kernel file, so editing this one recompiles its callers.)
"""

import numpy as np

from ._numba import kernel, uncounted

CHECK, BASE, TOKEN = 0, 1, 2  # the columns of the trie's rows


@kernel
def _free_at_or_after(skip, i):
    """The first free row at or after ``i`` (``skip[i] == i`` marks a free row; a used one points
    further on), halving the paths it follows."""
    while skip[i] != i:
        skip[i] = skip[skip[i]]
        i = skip[i]
    return i


@kernel
def _grown(array, size, fill, counting):
    """``array`` copied into a new int64 array of ``size`` items, the new ones ``fill`` (with
    ``counting``: each its own index)."""
    grown = np.empty(size, np.int64)
    for i in range(array.size):
        grown[i] = array[i]
    for i in range(array.size, size):
        grown[i] = i if counting else fill
    return grown


@kernel
def double_array(edge_offsets, edge_codes, edge_nodes, token_of_node, codes, dense, order):
    """The trie's rows and rare edges (see the module notes) from its edges: node ``v``'s children
    are ``edge_nodes[edge_offsets[v]:edge_offsets[v + 1]]`` along ``edge_codes`` (ascending, each
    at least 1), node 0 the root, ``token_of_node`` each node's piece (-1: none), ``codes`` the
    alphabet's size, ``dense`` the codes the rows hold below the root, ``order`` the nodes with
    children, most children first. Returns the rows' ``CHECK``, ``BASE`` and ``TOKEN`` columns
    (int64; ``codes`` free rows past the last node) and the rare edges by row (CSR: offsets, codes,
    child rows).

    Each node's children along the dense codes take the rows ``base + code`` at the first base
    where all of them are free; the candidates are the free rows in order (``_free_at_or_after``,
    whose ``skip`` marks the rows taken), so the scan skips the used ones. A block of children needs
    no row for its parent (the parent's row goes into the children's ``CHECK`` at the end), so the
    blocks go in ``order``: the largest first, while the table is empty, and the small ones fill
    the holes; the children along rare codes then take the free rows left, one each."""
    nodes = edge_offsets.size - 1
    capacity = nodes + codes + 1
    nothing = np.empty(0, np.int64)
    skip = _grown(nothing, capacity + 1, 0, True)
    skip[0] = 1  # the root's row
    row_of = _grown(nothing, nodes, -1, False)
    row_of[0] = 0
    node_base = np.zeros(nodes, np.int64)
    used = 1
    for k in range(order.size):
        node = order[k]
        lo, hi = edge_offsets[node], edge_offsets[node + 1]
        if node != 0:  # the root's children all take rows; another node's only along dense codes
            while hi > lo and edge_codes[hi - 1] >= dense:
                hi -= 1
        if hi == lo:
            continue
        first, last = edge_codes[lo], edge_codes[hi - 1]
        slot = _free_at_or_after(skip, first)
        while True:
            base = slot - first
            if base + last + 1 >= capacity:  # room for more rows
                capacity = 2 * (base + last + 1)
                skip = _grown(skip, capacity + 1, 0, True)
            fits = True
            for e in range(lo + 1, hi):
                row = base + edge_codes[e]
                if skip[row] != row:  # taken
                    fits = False
                    break
            if fits:
                break
            slot = _free_at_or_after(skip, slot + 1)
        node_base[node] = base
        for e in range(lo, hi):
            child = base + edge_codes[e]
            skip[child] = child + 1
            row_of[edge_nodes[e]] = child
            used = max(used, child + 1)
    for node in range(nodes):  # the children along rare codes: a free row each
        if row_of[node] < 0:
            slot = _free_at_or_after(skip, 1)
            if slot + 1 >= capacity:
                capacity = 2 * (slot + 1)
                skip = _grown(skip, capacity + 1, 0, True)
            skip[slot] = slot + 1
            row_of[node] = slot
            used = max(used, slot + 1)
    size = used + codes
    check = _grown(nothing, size, -1, False)
    base_of = _grown(nothing, size, 0, False)
    token = _grown(nothing, size, -1, False)
    rare_offsets = np.zeros(size + 1, np.int64)
    for node in range(nodes):
        here = row_of[node]
        base_of[here] = node_base[node]
        token[here] = token_of_node[node]
        for e in range(edge_offsets[node], edge_offsets[node + 1]):
            if node != 0 and edge_codes[e] >= dense:
                rare_offsets[here + 1] += 1
            else:
                check[row_of[edge_nodes[e]]] = here
    for row in range(size):
        rare_offsets[row + 1] += rare_offsets[row]
    rare_codes = np.empty(rare_offsets[size], np.int64)
    rare_rows = np.empty(rare_offsets[size], np.int64)
    for node in range(1, nodes):  # in code order within a row, as the edges come
        at = rare_offsets[row_of[node]]
        for e in range(edge_offsets[node], edge_offsets[node + 1]):
            if edge_codes[e] >= dense:
                rare_codes[at] = edge_codes[e]
                rare_rows[at] = row_of[edge_nodes[e]]
                at += 1
    return check, base_of, token, rare_offsets, rare_codes, rare_rows


@uncounted
def trie_step(node, code, trie, dense, rare_offsets, rare_codes, rare_rows):
    """The row of the child of the node in row ``node`` along ``code``, or -1 (see the module
    notes). Compiled without reference counts, as :func:`first_at_least`."""
    if code < dense or node == 0:
        child = trie[node, BASE] + code
        if trie[child, CHECK] == node:
            return child
        return -1
    return rare_child(node, code, rare_offsets, rare_codes, rare_rows)


@uncounted
def rare_child(row, code, rare_offsets, rare_codes, rare_rows):
    """The child of the node in ``row`` along a rare ``code`` (binary search in its sorted rare
    edges), or -1."""
    at = first_at_least(rare_codes, rare_offsets[row], rare_offsets[row + 1], code)
    if at < rare_offsets[row + 1] and rare_codes[at] == code:
        return rare_rows[at]
    return -1


@uncounted
def first_at_least(sorted_values, lo, hi, value):
    """The first index in ``lo:hi`` of ``sorted_values`` whose value is not below ``value`` (``hi`` if
    none): ``np.searchsorted`` written out, which a kernel loaded from the cache runs without
    importing ``numba.np.arraymath`` (and scipy with it). Compiled without numba's reference counts
    (``_numba.uncounted``): counted, the atomic counts of its array arguments stayed around each
    call, inlined or not; when the Unigram trie walk searched a third of English's steps with it,
    those counts were ~17% of the word cache kernel's perf samples, ~4-5% uncounted."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_values[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def write_best_path(start, piece, n, ids, ends, written):
    """Write the best path into node ``n`` (``start[e]``: where the best piece into node ``e``
    starts, ``piece[e]`` its id) as tokens ``written ..`` of ``ids`` and ``ends`` (each token's
    end node), in order; returns the number of tokens."""
    count = 0
    at = n
    while at > 0:
        count += 1
        at = start[at]
    at = n
    for t in range(written + count - 1, written - 1, -1):
        ids[t] = piece[at]
        ends[t] = at
        at = start[at]
    return count


@kernel
def pieces_from(values, lo, n, s, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_ends,
                piece_tokens):
    """The pieces that start at ``s`` in the row ``values[lo:lo + n]`` (the trie walk), shortest
    first: their ends into ``piece_ends`` and their ids into ``piece_tokens`` (scratch of ``n - s``
    items or more). Returns how many."""
    found = 0
    node = 0
    end = s
    while end < n:
        node = trie_step(node, code_of[values[lo + end]], trie, dense, rare_offsets, rare_codes, rare_rows)
        if node < 0:
            break
        end += 1  # the piece of ``node`` covers s .. end
        token = trie[node, TOKEN]
        if token >= 0:
            piece_ends[found] = end
            piece_tokens[found] = token
            found += 1
    return found
