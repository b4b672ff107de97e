"""BPE merges of ragged rows on the CPU, one merge at a time per row: a numba kernel.

Contract: for each row (word) of token ids, exactly ``gputok.models.bpe.bpe_merge_heap`` (the
Python reference): repeatedly merge the adjacent pair of lowest rank, the leftmost among equal
ranks, until no adjacent pair has a rank. The pair map is a :class:`gputok.hashing.HashMap`'s slot
arrays, ``left * vocab_size + right`` -> ``rank << 32 | merged id`` (as for
:func:`gputok.models.bpe.bpe_merge_torch`, which gives the same rows by merge rounds).

How: a row of up to ``TINY_ROW`` symbols (``_merge_tiny``, nearly every word) is a scan: its live
symbols packed at the front of an array, each merge finds the lowest rank among their pairs and
closes the gap its right part leaves. A longer row is a doubly linked list over its positions (a
merged token keeps its left part's position, so positions stay in text order), and ``value[i]``
holds the pair map's value of the pair that starts at ``i`` (``NO_RANK`` if none, or if ``i`` is
merged away). A priority queue holds ``(rank, position)`` for every pair ever ranked; a popped
entry whose rank is not ``value[i]``'s any more is stale and skipped; one whose rank is, is the
leftmost pair of lowest rank (every live pair has its own entry in the queue).

The queue of a row up to ``SHORT_ROW`` symbols (``_merge_short``): one binary heap of
``rank << 32 | position``, as sentencepiece's ``bpe_model.cc`` keeps its agenda; a word of
a few symbols costs a few heap operations and no state per rank.

The queue of a longer row (``_merge_long``): a list of positions per rank, a bitmap tree over
the ranks (64 ranks a word, one level per factor of 64) that finds the lowest non-empty list in a few word reads, and a binary
heap of ``rank << 32 | position``. Pairs join their rank's list in any order until that list
first comes up as the lowest (the ``frontier`` passes it); it is sorted then, once, and from
then on a pair joins it at the head if it is not behind the head (a merge's new pairs are at or
left of the merge), else goes to the heap. The lowest entry is the lower of the lowest list's
head and the heap's top. A first pass over a row fills the lists in order, and merges mostly
make pairs of higher ranks than the one merged, so nearly every entry costs O(1) and the heap
stays small: a heap of a million random entries costs ~0.5 us per pop on the project's CPU, a
list's head a few ns. A row of n symbols takes O(n log n) time at worst, ~8 int64 words of
scratch per symbol of the longest row plus 3 per rank, whatever the text: a megabyte without
spaces, or one letter repeated. Positions are packed in 32 bits: rows are shorter than 2**32
symbols, and ranks (the map's values are non-negative) below 2**31.

``nogil=True``: callers may run it on several Python threads at once; ``cache=True``: compiled
once per machine, then loaded from gputok's cache dir (``_numba.py``). Scratch is allocated per
call: ``lists`` (3 int64 per rank, only in a call with a long row) unfilled, each rank's column read only while its bit in the
bitmap says the list is non-empty, so a call touches only the ranks its rows reach.
"""

import numpy as np
import torch

from ._numba import inlined, kernel

# The pair map's probe and the merge loop's steps (and sp_bpe_texts_numba's word store), inlined
# into their callers by numba at typing: a word's merges in ~35% less time, the probe alone another
# ~15% of a cold SentencePiece BPE encode (Mistral, 1 MB of English). Still worth it with callees
# linked into their caller's one module (_numba._LinkOnlyLibrary), where LLVM may inline them too:
# as plain kernels Mistral's 65,536-line batches took 0.346 s against 0.298 s
# (benchmarks/sp_bpe_interleaved.py), for ~1-2 s more of cold compile.

NO_RANK = np.int64((1 << 63) - 1)
FIBONACCI = np.int64(0x9E3779B97F4A7C15 - (1 << 64))  # gputok.hashing.FIBONACCI
LOW32 = np.int64(0xFFFFFFFF)  # a position in a heap entry, a merged id in a value


@inlined
def probe(key, slot_keys, slot_values, mask, shift, max_probes, default):
    """The value stored under ``key`` in a ``gputok.hashing.HashMap``'s slot arrays, ``default``
    if absent: linear probing from the Fibonacci home slot (``gputok.hashing.home_slot``: int64
    products wrap, ``& mask`` makes the shift logical). Shared by the BPE and WordPiece kernels."""
    slot = ((key * FIBONACCI) >> shift) & mask
    for _ in range(max_probes):
        found = slot_keys[slot]
        if found == key:
            return slot_values[slot]
        if found == -1:
            return default
        slot = (slot + 1) & mask
    return default


@inlined
def _pair_value(left, right, vocab_size, slot_keys, slot_values, mask, shift, max_probes):
    """The map's value of the pair, NO_RANK if absent."""
    return probe(left * vocab_size + right, slot_keys, slot_values, mask, shift, max_probes, NO_RANK)


# A lowest set bit -> its index, by de Bruijn multiplication (numba has no count-trailing-zeros).
DE_BRUIJN = np.int64(0x03F79D71B4CB0A89)
_DE_BRUIJN_INDEX = np.zeros(64, np.int64)
for _bit in range(64):
    _DE_BRUIJN_INDEX[((((1 << _bit) * 0x03F79D71B4CB0A89) & ((1 << 64) - 1)) >> 58)] = _bit


@kernel
def _lowest_bit(word, index):
    return index[((word & -word) * DE_BRUIJN >> 58) & 63]


@kernel
def _mark(bits, level_start, rank):
    """Rank ``rank``'s list became non-empty: set its bit, and its word's bit a level up, ..."""
    for level in range(level_start.size - 1):
        at = level_start[level] + (rank >> 6)
        was = bits[at]
        bits[at] = was | (np.int64(1) << (rank & 63))
        if was != 0:
            return  # the levels above know already
        rank >>= 6


@kernel
def _marked(bits, rank):
    """Whether ``rank``'s list is non-empty (its bit in level 0, which starts the array)."""
    return (bits[rank >> 6] >> (rank & 63)) & 1 != 0


@kernel
def _unmark(bits, level_start, rank):
    for level in range(level_start.size - 1):
        at = level_start[level] + (rank >> 6)
        bits[at] &= ~(np.int64(1) << (rank & 63))
        if bits[at] != 0:
            return
        rank >>= 6


@kernel
def _lowest_marked(bits, level_start, index):
    """The lowest rank with a non-empty list, -1 if none: from the top word down."""
    top = level_start.size - 2
    if bits[level_start[top]] == 0:
        return -1
    rank = 0
    for level in range(top, -1, -1):
        rank = (rank << 6) | _lowest_bit(bits[level_start[level] + rank], index)
    return rank


@kernel
def _sift_down(heap, size, at):
    item = heap[at]
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= item:
            break
        heap[at] = heap[child]
        at = child
    heap[at] = item


@kernel
def _sift_up(heap, at):
    item = heap[at]
    while at > 0:
        parent = (at - 1) >> 1
        if heap[parent] <= item:
            break
        heap[at] = heap[parent]
        at = parent
    heap[at] = item


@kernel
def _append(lists, entry_position, entry_next, bits, level_start, rank, position, entries):
    """Entry ``entries`` (at ``position``) goes to the tail of ``rank``'s list; returns how many
    entries are in use. ``lists[0/1/2]``: each rank's head, tail, and whether it is unsorted;
    read only while the rank's bit is set (an empty list's columns are stale or never written)."""
    entry_position[entries] = position
    entry_next[entries] = -1
    if not _marked(bits, rank):
        lists[0, rank] = entries
        lists[2, rank] = 0
        _mark(bits, level_start, rank)
    else:
        tail = lists[1, rank]
        entry_next[tail] = entries
        if entry_position[tail] > position:
            lists[2, rank] = 1
    lists[1, rank] = entries
    return entries + 1


@kernel
def _sort_ascending(values, count):
    """Sort ``values[:count]`` in place, ascending: insertion sort for a few values, else heapsort
    on the queue's min-heap (``_sift_down``; it leaves them descending, then reversed). Written
    out, not ``np.sort``: numba compiles its quicksort (five functions) into every process that
    compiles this kernel, ~1 s of a cold compile. Equal values are interchangeable, so the result
    is ``np.sort``'s."""
    if count <= 16:
        for k in range(1, count):
            item = values[k]
            j = k - 1
            while j >= 0 and values[j] > item:
                values[j + 1] = values[j]
                j -= 1
            values[j + 1] = item
        return
    for root in range(count // 2 - 1, -1, -1):
        _sift_down(values, count, root)
    for end in range(count - 1, 0, -1):
        lowest = values[0]
        values[0] = values[end]
        values[end] = lowest
        _sift_down(values, end, 0)
    for k in range(count // 2):
        high = values[k]
        values[k] = values[count - 1 - k]
        values[count - 1 - k] = high


@kernel
def _sort_list(lists, entry_position, entry_next, rank, scratch):
    """Put ``rank``'s list in position order (its entries keep their slots, take new positions)."""
    count = 0
    entry = lists[0, rank]
    while entry != -1:
        scratch[count] = entry_position[entry]
        count += 1
        entry = entry_next[entry]
    _sort_ascending(scratch, count)
    entry = lists[0, rank]
    for k in range(count):
        entry_position[entry] = scratch[k]
        entry = entry_next[entry]
    lists[2, rank] = 0


# Rows up to this many symbols merge with a plain binary heap (``_merge_short``): sentencepiece's
# own algorithm, no per-rank state, so a call of short words touches no page it did not touch
# before. Longer rows take the per-rank lists (``_merge_long``), whose ``lists`` array (3 int64
# per rank, 0.8 MB for Mistral, 2.4 MB for cl100k) is allocated only in calls that have one: its
# first touch of each rank's page was most of a small call's time.
SHORT_ROW = 512
# Rows up to this many symbols scan for their lowest pair instead (``_merge_tiny``): most words.
# Mistral's merges of the words a cold encode of English misses: 107 ms at 32, 113 at 16, 112 at
# 64 (within the noise of the shared machine; the scan's steps are a few contiguous reads each).
TINY_ROW = 32


@kernel
def _pop(heap, size):
    """The heap's lowest entry, removed (``size`` the heap's size before)."""
    top = heap[0]
    size -= 1
    if size > 0:
        heap[0] = heap[size]
        _sift_down(heap, size, 0)
    return top


@inlined
def _merge_at(i, tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size):
    """Merge the live pair at ``i`` (its value ``value[i]``) and rank the two pairs beside it;
    returns the position of the pair before (-1 if none). Shared by both queues."""
    right = nxt[i]
    tok[i] = value[i] & LOW32
    value[right] = NO_RANK
    after = nxt[right]
    nxt[i] = after
    value[i] = NO_RANK
    if after < n:
        prv[after] = i
        value[i] = _pair_value(tok[i], tok[after], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
    before = prv[i]
    if before >= 0:
        value[before] = _pair_value(tok[before], tok[i], vocab_size, slot_keys, slot_values, mask, shift,
                                    max_probes)
    return before


@inlined
def _close_gap(tok, end, value, at, m, merged):
    """A scan's merge of the pair at ``at`` of its ``m`` packed tokens into ``merged``: the gap its
    right part leaves closed, ``value[at]`` unranked (the caller ranks the pairs beside it)."""
    tok[at] = merged
    end[at] = end[at + 1]
    for i in range(at + 1, m - 1):
        tok[i] = tok[i + 1]
        end[i] = end[i + 1]
        value[i] = value[i + 1]
    value[at] = NO_RANK


@kernel
def merge_scan(symbols, a, n, tok, end, value, slot_keys, slot_values, mask, shift, max_probes, vocab_size):
    """BPE of the row ``symbols[a:a + n]`` into ``tok`` (and each token's ``end``: 1 + the index in
    ``symbols`` of its last symbol), for a row of a few symbols: the live tokens stay packed at the
    front of ``tok``, the values of their pairs in ``value``; each merge scans those values for the
    lowest rank (the leftmost among equal ones, as the heap's order) and closes the gap its right
    part leaves. O(n) per merge with no queue and no links to follow: up to ``TINY_ROW`` symbols
    that costs less than a heap's pushes and pops. Returns the tokens' count. (Also the short
    words' merge of ``bpe_texts_numba``.)"""
    for i in range(n):
        tok[i] = symbols[a + i]
        end[i] = a + i + 1
    for i in range(n - 1):
        value[i] = _pair_value(tok[i], tok[i + 1], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
    m = n
    while m > 1:
        best = NO_RANK >> 32
        at = -1
        for i in range(m - 1):
            if value[i] != NO_RANK and (value[i] >> 32) < best:
                best = value[i] >> 32
                at = i
        if at < 0:
            break
        _close_gap(tok, end, value, at, m, value[at] & LOW32)
        m -= 1
        if at + 1 < m:
            value[at] = _pair_value(tok[at], tok[at + 1], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
        if at > 0:
            value[at - 1] = _pair_value(tok[at - 1], tok[at], vocab_size, slot_keys, slot_values, mask, shift,
                                        max_probes)
    return m


@inlined
def _merge_tiny(tok, nxt, packed, end, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size):
    """Merge the row ``tok[:n]`` in place with :func:`merge_scan` (``packed``, ``end``, ``value``:
    its scratch), the result as ``merge_row`` gives it: ``tok`` and ``nxt`` from 0. The scan over
    packed tokens took ~28% less time than the same scan over a linked list (Mistral's merges of
    English words)."""
    m = merge_scan(tok, 0, n, packed, end, value, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
    start = 0
    for k in range(m):
        tok[start] = packed[k]
        nxt[start] = end[k]
        start = end[k]


# The packed pair map of a vocabulary of fewer than 2**16 tokens (SentencePiece BPE: Mistral's and
# Llama's 32,000): one int64 per slot, the pair's key (``left * vocab_size + right``) in the high 32
# bits and ``rank << 16 | merged id`` in the low 32, -1 for empty, at most half full. Mistral's 58,980
# pairs take 1 MB (2**17 slots) where the map's two slot arrays take 4 MB: the probe reads one cache
# line, not two, and the table stays in the core's L2. The tiny rows' scan of the distinct words of
# 20 MB of English over it (``merge_tiny_packed``): 0.19-0.20 s against 0.32 s for ``_merge_tiny``,
# symbols included (385k words, one thread, the machine shared).
PACKED_EMPTY = np.int64(-1)
PACKED_RANK_SHIFT = 16


def packed_pairs(slot_keys: np.ndarray, slot_values: np.ndarray, vocab_size: int) -> tuple | None:
    """The packed pair map (see ``PACKED_EMPTY``) of a ``gputok.hashing.HashMap``'s slot arrays
    (values ``rank << 32 | merged id``) as ``(table, mask, shift)``, or None if its ranks, ids or
    keys do not fit (a vocabulary of 2**16 tokens or more)."""
    live = slot_keys != -1
    ranks, ids = slot_values[live] >> 32, slot_values[live] & LOW32
    if vocab_size >= 1 << PACKED_RANK_SHIFT or (ranks.size and (ranks.max() >= 1 << PACKED_RANK_SHIFT
                                                                 or ids.max() >= 1 << PACKED_RANK_SHIFT)):
        return None
    size = 1 << max(4, (2 * int(live.sum()) - 1).bit_length())  # at most half full
    table = np.full(size, PACKED_EMPTY, np.int64)
    shift = 64 - (size - 1).bit_length()
    _fill_packed(slot_keys[live], (ranks << PACKED_RANK_SHIFT) | ids, table, size - 1, shift)
    return table, size - 1, shift


@kernel
def _fill_packed(keys, values, table, mask, shift):
    for k in range(keys.size):
        slot = ((keys[k] * FIBONACCI) >> shift) & mask
        while table[slot] != PACKED_EMPTY:
            slot = (slot + 1) & mask
        table[slot] = (keys[k] << 32) | values[k]


@inlined
def _packed_value(left, right, vocab_size, table, mask, shift):
    """The packed map's ``rank << 16 | merged id`` of the pair, NO_RANK if absent (an empty slot's
    high half, 2**32 - 1, is no key: keys are below vocab_size**2)."""
    key = left * vocab_size + right
    slot = ((key * FIBONACCI) >> shift) & mask
    while True:
        found = table[slot]
        if (found >> 32) & LOW32 == key:
            return found & LOW32
        if found == PACKED_EMPTY:
            return NO_RANK
        slot = (slot + 1) & mask


@inlined
def merge_tiny_packed(tok, nxt, packed, end, value, n, table, mask, shift, vocab_size):
    """:func:`_merge_tiny` over the packed pair map (``packed_pairs``): the row ``tok[:n]`` merged
    in place, ``tok`` and ``nxt`` from 0 as ``merge_row`` gives them; the scan of
    :func:`merge_scan`, ranks compared as ``value >> 16`` (NO_RANK's is above every rank)."""
    for i in range(n):
        packed[i] = tok[i]
        end[i] = i + 1
    for i in range(n - 1):
        value[i] = _packed_value(packed[i], packed[i + 1], vocab_size, table, mask, shift)
    m = n
    while m > 1:
        best = NO_RANK >> PACKED_RANK_SHIFT
        at = -1
        for i in range(m - 1):
            if (value[i] >> PACKED_RANK_SHIFT) < best:
                best = value[i] >> PACKED_RANK_SHIFT
                at = i
        if at < 0:
            break
        _close_gap(packed, end, value, at, m, value[at] & 0xFFFF)
        m -= 1
        if at + 1 < m:
            value[at] = _packed_value(packed[at], packed[at + 1], vocab_size, table, mask, shift)
        if at > 0:
            value[at - 1] = _packed_value(packed[at - 1], packed[at], vocab_size, table, mask, shift)
    start = 0
    for k in range(m):
        tok[start] = packed[k]
        nxt[start] = end[k]
        start = end[k]


@kernel
def _merge_short(tok, nxt, prv, value, heap, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size):
    """Merge the row ``tok[:n]`` in place (its order: ``nxt`` from 0) with one binary heap of
    ``rank << 32 | position``: the lowest entry is the leftmost pair of lowest rank; an entry whose
    rank is not its position's ``value`` any more is stale and skipped. ``heap``: room for 3n."""
    size = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        value[i] = NO_RANK
    for i in range(n - 1):
        v = _pair_value(tok[i], tok[i + 1], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
        value[i] = v
        if v != NO_RANK:
            heap[size] = ((v >> 32) << 32) | i
            size += 1
    for k in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, k)
    while size > 0:
        top = _pop(heap, size)
        size -= 1
        i = top & LOW32
        if value[i] == NO_RANK or (value[i] >> 32) != (top >> 32):
            continue  # stale: the pair at i changed since this entry was queued
        before = _merge_at(i, tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
        for p in (before, i):
            if p >= 0 and value[p] != NO_RANK:
                heap[size] = ((value[p] >> 32) << 32) | p
                size += 1
                _sift_up(heap, size - 1)


@kernel
def _merge_long(tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size, level_start,
                lists, bits, entry_position, entry_next, heap, scratch):
    """Merge the row ``tok[:n]`` in place with the per-rank lists and a heap (the module notes)."""
    index = _DE_BRUIJN_INDEX
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        value[i] = NO_RANK
    entries = 0
    for i in range(n - 1):
        value[i] = _pair_value(tok[i], tok[i + 1], vocab_size, slot_keys, slot_values, mask, shift, max_probes)
        if value[i] != NO_RANK:
            entries = _append(lists, entry_position, entry_next, bits, level_start, value[i] >> 32, i, entries)
    size = 0  # of the heap
    frontier = -1  # the highest rank whose list was ever the lowest: the lists above it are not sorted yet
    while True:
        # The lowest (rank, position): a list's head or the heap's top.
        rank = _lowest_marked(bits, level_start, index)
        if rank < 0 and size == 0:
            break
        from_list = NO_RANK
        if rank >= 0:
            if rank > frontier:
                frontier = rank
                if lists[2, rank]:
                    _sort_list(lists, entry_position, entry_next, rank, scratch)
            from_list = (rank << 32) | entry_position[lists[0, rank]]
        if size > 0 and heap[0] < from_list:
            top = _pop(heap, size)
            size -= 1
        else:
            top = from_list
            head = lists[0, rank]
            lists[0, rank] = entry_next[head]
            if entry_next[head] == -1:
                lists[1, rank] = -1
                _unmark(bits, level_start, rank)
        i = top & LOW32
        if value[i] == NO_RANK or (value[i] >> 32) != (top >> 32):
            continue  # stale: the pair at i changed since this entry was queued
        before = _merge_at(i, tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
        # Queue the new pairs. Above the frontier, a list takes any position (it is sorted
        # once, when it first comes up); at or below it, a list stays sorted: a pair goes to
        # its head if it is not behind it, else into the heap.
        for p in (before, i):
            if p < 0 or value[p] == NO_RANK:
                continue
            rank = value[p] >> 32
            if rank > frontier or not _marked(bits, rank):
                entries = _append(lists, entry_position, entry_next, bits, level_start, rank, p, entries)
            elif p <= entry_position[lists[0, rank]]:
                entry_position[entries] = p
                entry_next[entries] = lists[0, rank]
                lists[0, rank] = entries
                entries += 1
            else:
                heap[size] = (rank << 32) | p
                size += 1
                _sift_up(heap, size - 1)


@kernel
def merge_row(tok, n, nxt, prv, value, heap, slot_keys, slot_values, mask, shift, max_probes, vocab_size,
              level_start):
    """Merge one row ``tok[:n]`` in place with the queue that suits its length; its tokens are then
    ``tok[i]`` for ``i = 0, nxt[0], ...`` while ``i < n``, each covering symbols ``i .. nxt[i] - 1``.
    Scratch: ``nxt``, ``prv``, ``value`` of n, ``heap`` of 3n; a long row allocates its lists here."""
    if n <= TINY_ROW:
        _merge_tiny(tok, nxt, heap, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
    elif n <= SHORT_ROW:
        _merge_short(tok, nxt, prv, value, heap, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
    else:
        ranks = (level_start[1] - level_start[0]) * 64
        _merge_long(tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size,
                    level_start, np.empty((3, ranks), np.int64), np.zeros(level_start[-1], np.int64),
                    np.empty(3 * n, np.int64), np.empty(3 * n, np.int64), heap, np.empty(3 * n, np.int64))


@kernel
def write_row(tok, nxt, n, start, out, ends, written):
    """A merged row's tokens (the linked list ``tok[i]`` for ``i = 0, nxt[0], ...`` while ``i < n``)
    into ``out`` from ``written``, and, unless ``ends`` is empty, beside each the index just past
    its last symbol (``start``: the row's first symbol's index); returns the count."""
    count = 0
    i = 0
    while i < n:
        out[written + count] = tok[i]
        if ends.size:
            ends[written + count] = start + nxt[i]
        count += 1
        i = nxt[i]
    return count


@kernel
def _merge_rows(tokens, offsets, out, lengths, ends, slot_keys, slot_values, mask, shift, max_probes, vocab_size,
                level_start):
    """Merge each row of ``tokens`` (rows by ``offsets``) into ``out``, rows back to back, and
    each row's length into ``lengths``. ``out`` may be ``tokens``: a row is copied out before its
    result is written, and results never run ahead of their rows. ``ends`` (unless empty): beside
    each output token, the index in ``tokens`` just past the last symbol it covers (a merged token
    covers its symbols from its left part's position to the next live position). ``level_start``:
    where each level of the rank bitmap starts in one array (level 0: a bit per rank), and its end."""
    longest = 0
    for r in range(offsets.size - 1):
        longest = max(longest, offsets[r + 1] - offsets[r])
    tok = np.empty(longest, np.int64)
    nxt = np.empty(longest, np.int64)
    prv = np.empty(longest, np.int64)
    value = np.empty(longest, np.int64)
    # Queue entries: n - 1 first pairs + at most 2 per merge, in the lists or the heap.
    heap = np.empty(3 * longest, np.int64)
    long_rows = longest > SHORT_ROW
    scratch_size = 3 * longest if long_rows else 0
    entry_position = np.empty(scratch_size, np.int64)
    entry_next = np.empty(scratch_size, np.int64)
    scratch = np.empty(scratch_size, np.int64)
    # A list's columns are valid only while its rank is marked in ``bits``, so ``lists`` needs no
    # filling: a call touches only the pages of the ranks its rows use. Every list is empty again
    # when a row is done.
    ranks = (level_start[1] - level_start[0]) * 64 if long_rows else 0
    lists = np.empty((3, ranks), np.int64)
    bits = np.zeros(level_start[-1] if long_rows else 0, np.int64)
    written = 0
    for r in range(offsets.size - 1):
        start = offsets[r]
        n = offsets[r + 1] - start
        for i in range(n):
            tok[i] = tokens[start + i]
        if n <= TINY_ROW:
            _merge_tiny(tok, nxt, heap, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
        elif n <= SHORT_ROW:
            _merge_short(tok, nxt, prv, value, heap, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size)
        else:
            _merge_long(tok, nxt, prv, value, n, slot_keys, slot_values, mask, shift, max_probes, vocab_size,
                        level_start, lists, bits, entry_position, entry_next, heap, scratch)
        count = write_row(tok, nxt, n, start, out, ends, written)
        lengths[r] = count
        written += count


def rank_levels(slot_values: np.ndarray) -> np.ndarray:
    """The rank bitmap's layout for a pair map's values (``rank << 32 | id``): starts of its
    levels in one array, and its end. Level 0 has a bit per rank, each level above a bit per word
    of the one below, up to a single word. Computed once per model (a pass over the map)."""
    ranks = (int(slot_values.max()) >> 32 if slot_values.size else 0) + 1
    sizes = [max(1, -(-ranks // 64))]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // 64))
    return np.cumsum([0] + sizes).astype(np.int64)


def merge_rows(tokens: np.ndarray, offsets: np.ndarray, ends: np.ndarray, *, slot_keys: np.ndarray,
               slot_values: np.ndarray, hash_mask: int, max_probes: int, vocab_size: int,
               level_start: np.ndarray) -> np.ndarray:
    """Merge the rows of int64 ``tokens`` in place (rows back to back from the start) and return
    the merged rows' offsets; ``ends`` as in ``_merge_rows`` (an empty array: not wanted). numpy
    in, numpy out: the CPU path of ``gputok.models.bpe.BPE.encode_words`` (no torch op)."""
    lengths = np.empty(offsets.size - 1, np.int64)
    _merge_rows(tokens, offsets, tokens, lengths, ends, slot_keys, slot_values, hash_mask,
                64 - hash_mask.bit_length(), max_probes, vocab_size, level_start)
    out_offsets = np.empty(offsets.size, np.int64)
    out_offsets[0] = 0
    np.cumsum(lengths, out=out_offsets[1:])
    return out_offsets


def bpe_merge_numba(tokens: torch.Tensor, offsets: torch.Tensor, *, slot_keys: torch.Tensor,
                    slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                    vocab_size: int, level_start: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Merged (tokens, offsets) of ragged rows of CPU token ids; the inputs stay intact.
    ``level_start``: ``rank_levels(slot_values)``, if the caller keeps it."""
    work = tokens.to(torch.int64, copy=True).contiguous()
    offsets = offsets.to(torch.int64).contiguous()
    if offsets.numel() > 1 and int((offsets[1:] - offsets[:-1]).max()) >= 1 << 32:
        raise ValueError("bpe_merge_numba: a row of 2**32 symbols or more; positions are packed in 32 bits")
    values = work.numpy()
    out_offsets = merge_rows(values, offsets.numpy(), np.empty(0, np.int64), slot_keys=slot_keys.numpy(),
                             slot_values=slot_values.numpy(), hash_mask=hash_mask, max_probes=max_probes,
                             vocab_size=vocab_size,
                             level_start=rank_levels(slot_values.numpy()) if level_start is None else level_start)
    return work[: int(out_offsets[-1])].clone(), torch.from_numpy(out_offsets)
