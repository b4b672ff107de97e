"""BPE merges with dropout (BPE-dropout, Provilkov et al. 2020) as huggingface does them: a numba kernel.

Contract: for each row (word) of symbol ids, huggingface tokenizers' ``Word::merge_all`` with
``dropout = p`` (``models/bpe/word.rs``): a priority queue of ``(rank, position)`` of every ranked
pair; each popped entry is *skipped* with probability ``p`` (set aside); an entry that is not
skipped first puts every skipped one back, then merges if it is still current (the pair at its
position still has its rank), queueing the new pairs with its neighbours. When the queue runs
dry, the skipped entries are dropped: a word may end with mergeable pairs left, and ``p = 1``
merges nothing. Each popped entry draws one uniform number, current or stale, as huggingface's does.

The draws: each row has its own 64-bit seed (``seeds``, drawn by the caller from a
``torch.Generator``), expanded by splitmix64, so a row's merges depend on its seed only, whatever
chunk or thread it runs in. The pair map is a :class:`gputok.hashing.HashMap`'s slot arrays as for
``bpe_heap`` (``left * vocab_size + right`` -> ``rank << 32 | merged id``).

Memory: ~8 int64 words of scratch per symbol of the longest row. O(n log n) per row of n symbols
without dropout; each skip costs a pop and a push more.
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import LOW32, NO_RANK, _merge_at, _pair_value, _sift_down, _sift_up, write_row

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_UNIT = 1.0 / 9007199254740992.0  # 2 ** -53


@kernel
def _uniform(state):
    """splitmix64: the next state, and a uniform float64 in [0, 1) from it."""
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return state, np.float64(z >> np.uint64(11)) * _UNIT


@kernel
def _push(heap, size, entry):
    heap[size] = entry
    _sift_up(heap, size)
    return size + 1


@kernel
def _pop(heap, size):
    top = heap[0]
    size -= 1
    if size > 0:
        heap[0] = heap[size]
        _sift_down(heap, size, 0)
    return top, size


@kernel
def merge_rows_dropout(tokens, offsets, ends, seeds, dropout, slot_keys, slot_values, mask, shift, max_probes,
                       vocab_size):
    """Merge each row of int64 ``tokens`` (rows by ``offsets``) in place, rows back to back from
    the start; returns the merged rows' offsets. ``ends`` (unless empty): beside each output
    token, the index in ``tokens`` just past the last symbol it covers."""
    rows = offsets.size - 1
    longest = 0
    for r in range(rows):
        longest = max(longest, offsets[r + 1] - offsets[r])
    tok = np.empty(longest, np.int64)
    nxt = np.empty(longest, np.int64)
    prv = np.empty(longest, np.int64)
    value = np.empty(longest, np.int64)
    heap = np.empty(3 * longest + 1, np.int64)  # n - 1 first pairs + at most 2 per merge
    skipped = np.empty(3 * longest + 1, np.int64)
    out_offsets = np.zeros(rows + 1, np.int64)
    written = 0
    for r in range(rows):
        start = offsets[r]
        n = offsets[r + 1] - start
        state = np.uint64(seeds[r])
        size = 0
        for i in range(n):
            tok[i] = tokens[start + i]
            nxt[i] = i + 1
            prv[i] = i - 1
            value[i] = NO_RANK
        for i in range(n - 1):
            value[i] = _pair_value(tok[i], tok[i + 1], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
            if value[i] != NO_RANK:
                size = _push(heap, size, ((value[i] >> 32) << 32) | i)
        set_aside = 0
        while size > 0:
            top, size = _pop(heap, size)
            state, u = _uniform(state)
            if u < dropout:
                skipped[set_aside] = top
                set_aside += 1
                continue
            for k in range(set_aside):
                size = _push(heap, size, skipped[k])
            set_aside = 0
            i = top & LOW32
            if value[i] == NO_RANK or (value[i] >> 32) != (top >> 32):
                continue  # stale: the pair at i changed since this entry was queued
            before = _merge_at(i, tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes,
                               vocab_size)
            if before >= 0 and value[before] != NO_RANK:
                size = _push(heap, size, ((value[before] >> 32) << 32) | before)
            if value[i] != NO_RANK:
                size = _push(heap, size, ((value[i] >> 32) << 32) | i)
        written += write_row(tok, nxt, n, start, tokens, ends, written)
        out_offsets[r + 1] = written
    return out_offsets
