"""Best-fit-decreasing bin packing of document lengths (numba; the CPU half of ``gputok.packing``).

"Fewer Truncations Improve Language Modeling" (Ding et al., 2024) packs documents into
``capacity``-token sequences without cutting them: take the documents longest first and put each
into the open sequence with the least room that still fits it, else open a new one. Here the open
sequences are kept by remaining room in a segment tree over 0..capacity (a count per room value,
and a stack of sequence ids per room value), so finding "the least room >= length" is O(log
capacity): O(n log capacity) for n documents after the sort. Only lengths come here: the tokens are
moved by torch ops on their device afterwards. Memory: O(n + capacity).
"""

import numpy as np

from ._numba import kernel


@kernel
def best_fit_decreasing(lengths, order, capacity):
    """The bin of every item (``lengths[i] <= capacity``, visited in ``order``, longest first) and
    the number of bins.

    >>> import numpy as np
    >>> lengths = np.array([3, 5, 2, 4, 1]); order = np.argsort(-lengths, kind="stable")
    >>> bins, count = best_fit_decreasing(lengths, order, 6)
    >>> bins.tolist(), count
    ([2, 0, 1, 1, 0], 3)
    """
    n = lengths.size
    leaves = 1
    while leaves < capacity + 1:
        leaves *= 2
    tree = np.zeros(2 * leaves, dtype=np.int64)  # open bins per room value, summed up the tree
    head = np.full(capacity + 1, -1, dtype=np.int64)  # a stack of bins per room value
    below = np.full(n + 1, -1, dtype=np.int64)  # the next bin down each stack
    bins = np.empty(n, dtype=np.int64)
    count = 0
    for k in range(n):
        item = order[k]
        length = lengths[item]
        room = -1
        node = leaves + length  # the leftmost leaf with room >= length and a bin in it
        if tree[node] > 0:
            room = length
        else:
            while node > 1:
                if node % 2 == 0 and tree[node + 1] > 0:
                    node += 1
                    while node < leaves:
                        node = 2 * node if tree[2 * node] > 0 else 2 * node + 1
                    room = node - leaves
                    break
                node //= 2
        if room < 0:
            chosen = count
            count += 1
            room = capacity
        else:
            chosen = head[room]
            head[room] = below[chosen]
            node = leaves + room
            while node >= 1:
                tree[node] -= 1
                node //= 2
        bins[item] = chosen
        room -= length
        below[chosen] = head[room]
        head[room] = chosen
        node = leaves + room
        while node >= 1:
            tree[node] += 1
            node //= 2
    return bins, count
