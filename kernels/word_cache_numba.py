"""The word cache and the dedup of a batch's words, as numba kernels over the cache's arrays.

Contract (the reference is the torch path of :meth:`gputok.word_cache.WordCache.encode`, with
:func:`gputok.dedup.span_hashes` keys, :func:`gputok.hashing.lookup` / ``insert`` and
:func:`gputok.dedup.unique_spans`; the CPU path must give the same ids, ends and stored entries):

- ``word_keys``: :func:`gputok.dedup.span_hashes` of each word, per word in one loop
  (``sum v[i] * B**-i + length * W`` modulo 2**64, top bit cleared), so the keys and the table
  are shared with the torch path.
- ``lookup_dedup``: each word is looked up in the store's open-addressing table (the same
  Fibonacci home slot and linear probing as :class:`gputok.hashing.HashMap`); a hit must have
  an entry below the snapshot's ``count`` and the word's exact codepoints, else it misses. The
  misses are deduplicated on the fly in a scratch table of the call (hash, then an exact
  compare: colliding words stay apart) and the first occurrence of each is gathered into
  ``out_chars``, in order of first occurrence.
- ``assemble``: each word's tokens (an entry's, or its unique miss's from the model) laid out
  per word: ids, ends and the word offsets.
- ``insert``: the unique misses that fit (``length <= max_len``) and whose key is absent are
  appended to the store (entries, codepoints, ids, ends; then the slot's entry, then its key),
  in order. The store's sizes live in its ``state`` array (``STATE_*`` below: entries held,
  buffer sizes, the longest probe sequence, the capacity and ``max_len``), which the kernel
  updates, so a whole-pipeline kernel can insert its own misses (``bpe_texts_numba``). A batch
  that brings more of them than the room left inserts nothing and says so (-1): the caller
  starts a new store and inserts again with ``truncate`` (the first ones that fit); buffers
  too small for them (-2): the caller grows them and inserts again.
- ``pack_misses`` / ``insert_packed``: a whole-pipeline kernel's unique misses travel to the
  insert as one int64 array (``misses_layout`` names its parts): a numba call pays ~0.5 us per
  array it returns and takes, and a batch of one text has ~12 us in all.

Readers run without a lock while one inserter (holding the cache's lock) writes: a reader
only trusts entries below its snapshot's count, and a slot being filled reads as empty, as a
key without entry, or as an entry past that count: a miss in every case, never a wrong token.
"""

import numpy as np

from ._numba import kernel, prefetch

_EMPTY = -1
_FIB = np.uint64(0x9E3779B97F4A7C15)
_BASE = 0x5851F42D4C957F2D  # gputok.dedup._BASE
_BASE_INV = np.uint64(pow(_BASE, -1, 1 << 64))
_LENGTH_WEIGHT = np.uint64(_BASE >> 1)
_LOW63 = np.uint64((1 << 63) - 1)


@kernel
def _home(key, shift, mask):
    return np.int64((np.uint64(key) * _FIB) >> np.uint64(shift)) & mask


@kernel
def _same(a, a_start, b, b_start, length):
    for i in range(length):
        if a[a_start + i] != b[b_start + i]:
            return False
    return True


@kernel
def _key(values, start, length):
    """:func:`gputok.dedup.span_hashes` of one span."""
    h = np.uint64(0)
    p = np.uint64(1)
    for i in range(length):
        h += np.uint64(np.int64(values[start + i])) * p
        p *= _BASE_INV
    h += np.uint64(length) * _LENGTH_WEIGHT
    return np.int64(h & _LOW63)


@kernel
def word_keys(values, starts, lengths):
    """:func:`gputok.dedup.span_hashes` of the spans, one loop per word."""
    n = starts.size
    keys = np.empty(n, np.int64)
    for w in range(n):
        keys[w] = _key(values, starts[w], lengths[w])
    return keys


# Words looked up at a time after their prefetch (_prefetch_entries): their slots, entries and
# codepoints (~4 cache lines a word) stay in the core's L2 cache until the lookups read them.
PREFETCH_WORDS = 512


@kernel
def _prefetch_entries(values, starts, lengths, make_keys, word_key, first, last, slot_keys, slot_entry, shift, mask,
                      count, entries, chars):
    """Before :func:`lookup_dedup` looks words ``first .. last`` up: their keys (into ``word_key``
    if ``make_keys``), then prefetches of their home slots, of the entries found there and of
    those entries' codepoints, a pass each. A prefetch does not wait for its read, so a pass's
    reads overlap, where the lookup would wait for each word's slot, entry and codepoints in turn
    (a miss to memory each, for most words)."""
    for w in range(first, last):
        if make_keys:
            word_key[w] = _key(values, starts[w], lengths[w])
        home = _home(word_key[w], shift, mask)
        prefetch(slot_keys, home)
        prefetch(slot_entry, home)
    # Each value read once into a local: an inserter may be writing these arrays (see the notes).
    for w in range(first, last):
        home = _home(word_key[w], shift, mask)
        e = slot_entry[home]
        if slot_keys[home] == word_key[w] and 0 <= e < count:
            prefetch(entries, e * entries.shape[1])
    for w in range(first, last):
        home = _home(word_key[w], shift, mask)
        e = slot_entry[home]
        if slot_keys[home] == word_key[w] and 0 <= e < count:
            prefetch(chars, entries[e, 0])


@kernel
def lookup_dedup(values, starts, lengths, keys, slot_keys, slot_entry, shift, mask, count, entries, chars,
                 out_chars):
    """Per word: its entry (-1: miss) and, for a miss, its unique miss (-1: hit); the first word
    of each unique miss (``reps``), their keys, and their codepoints gathered into ``out_chars``
    (offsets). ``keys`` empty: each word's key is its :func:`gputok.dedup.span_hashes`."""
    n = starts.size
    entry = np.full(n, -1, np.int64)
    uniq = np.full(n, -1, np.int64)
    reps = np.empty(n, np.int64)
    rep_keys = np.empty(n, np.int64)
    rep_offsets = np.zeros(n + 1, np.int64)
    # The scratch table of distinct misses starts small and doubles at half full: sized by the
    # distinct misses, not the words (a batch of 500k words has ~40k distinct; a table for all
    # of them, 32 MB, cost a cache miss per word and was slower than the cache's own lookup).
    bits = 4
    local_keys = np.empty(1 << bits, np.int64)
    local_uniq = np.full(1 << bits, -1, np.int64)
    nu = 0
    word_key = keys if keys.size else np.empty(n, np.int64)
    for block in range(0, n, PREFETCH_WORDS):
        block_end = min(n, block + PREFETCH_WORDS)
        _prefetch_entries(values, starts, lengths, keys.size == 0, word_key, block, block_end, slot_keys,
                          slot_entry, shift, mask, count, entries, chars)
        for w in range(block, block_end):
            s = starts[w]
            length = lengths[w]
            k = word_key[w]
            slot = _home(k, shift, mask)
            while True:
                stored = slot_keys[slot]
                if stored == _EMPTY:
                    break
                if stored == k:  # keys in the table are distinct: this is the only candidate
                    e = slot_entry[slot]
                    if 0 <= e < count and entries[e, 1] == length and _same(values, s, chars, entries[e, 0], length):
                        entry[w] = e
                    break
                slot = (slot + 1) & mask
            if entry[w] >= 0:
                continue
            if 2 * (nu + 1) > local_uniq.size:
                bits += 1
                local_keys, local_uniq = _grown(local_keys, local_uniq, rep_keys, nu, bits)
            local_mask = (1 << bits) - 1
            slot = _home(k, 64 - bits, local_mask)
            while True:
                u = local_uniq[slot]
                if u < 0:
                    local_keys[slot] = k
                    local_uniq[slot] = nu
                    reps[nu] = w
                    rep_keys[nu] = k
                    at = rep_offsets[nu]
                    for i in range(length):
                        out_chars[at + i] = values[s + i]
                    rep_offsets[nu + 1] = at + length
                    uniq[w] = nu
                    nu += 1
                    break
                r = reps[u]
                if local_keys[slot] == k and lengths[r] == length and _same(values, s, values, starts[r], length):
                    uniq[w] = u
                    break
                slot = (slot + 1) & local_mask
    return entry, uniq, reps[:nu], rep_keys[:nu], rep_offsets[:nu + 1]


@kernel
def _grown(local_keys, local_uniq, rep_keys, count, bits):
    """The scratch table of ``lookup_dedup`` at ``2**bits`` slots, its ``count`` entries put back."""
    keys = np.empty(1 << bits, np.int64)
    uniq = np.full(1 << bits, -1, np.int64)
    mask = (1 << bits) - 1
    for u in range(count):
        slot = _home(rep_keys[u], 64 - bits, mask)
        while uniq[slot] >= 0:
            slot = (slot + 1) & mask
        keys[slot] = rep_keys[u]
        uniq[slot] = u
    return keys, uniq


@kernel
def assemble(entry, uniq, entries, stored_ids, stored_ends, new_ids, new_ends, new_offsets, with_ends):
    """Each word's ids and ends (from its entry or its unique miss) in word order, and offsets."""
    n = entry.size
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for w in range(n):
        e = entry[w]
        if e >= 0:
            size = entries[e, 3]
            prefetch(stored_ids, entries[e, 2])  # read by the copy below, not waited for here
        else:
            size = new_offsets[uniq[w] + 1] - new_offsets[uniq[w]]
        offsets[w + 1] = offsets[w] + size
    total = offsets[n]
    ids = np.empty(total, np.int64)
    ends = np.empty(total if with_ends else 0, np.int64)
    for w in range(n):
        e = entry[w]
        at = offsets[w]
        size = offsets[w + 1] - at
        if e >= 0:
            src = entries[e, 2]
            for i in range(size):
                ids[at + i] = stored_ids[src + i]
            if with_ends:
                for i in range(size):
                    ends[at + i] = stored_ends[src + i]
        else:
            src = new_offsets[uniq[w]]
            for i in range(size):
                ids[at + i] = new_ids[src + i]
            if with_ends:
                for i in range(size):
                    ends[at + i] = new_ends[src + i]
    return ids, ends, offsets


# The ``state`` array of a store (``gputok.word_cache._Store``): what ``insert`` reads and updates.
(STATE_COUNT, STATE_CHARS, STATE_IDS, STATE_ENDS, STATE_PROBES, STATE_CAPACITY, STATE_MAX_LEN) = range(7)
STATE_SIZE = 7
# What a kernel that inserts its own misses (``bpe_texts_numba.encode_padded_cells``) answers instead
# of its output where ``insert`` said -1 or -2: an array of shape (0, status, room the buffers need),
# having changed nothing (``gputok.word_cache.WordCache.encode_inserting`` makes a new store or grows
# the buffers, then calls it again).
DECLINED_FULL, DECLINED_GROW = 2, 3


@kernel
def insert(keys, chars, char_offsets, new_ids, new_ends, new_offsets, truncate, slot_keys, slot_entry, entries,
           store_chars, store_ids, store_ends, state):
    """Append the unique misses (``keys``, their codepoints ``chars`` by ``char_offsets``, their
    tokens) that fit and are absent, at the store's sizes in ``state``, and update it. Returns the
    entries added, -1 for no room in the store (nothing added unless ``truncate``), -2 for
    buffers too small to hold them all (nothing added)."""
    n = keys.size
    count, chars_size, ids_size = state[STATE_COUNT], state[STATE_CHARS], state[STATE_IDS]
    if (chars_size + char_offsets[n] - char_offsets[0] > store_chars.size
            or ids_size + new_offsets[n] - new_offsets[0] > min(store_ids.size, store_ends.size)):
        return -2
    room = state[STATE_CAPACITY] - count
    max_len = state[STATE_MAX_LEN]
    mask = slot_keys.size - 1
    shift = 64 - _bit_length(mask)
    wanted = 0
    for u in range(n):
        if char_offsets[u + 1] - char_offsets[u] > max_len:
            continue
        slot = _home(keys[u], shift, mask)
        while slot_keys[slot] != _EMPTY and slot_keys[slot] != keys[u]:
            slot = (slot + 1) & mask
        if slot_keys[slot] == _EMPTY:
            wanted += 1
    if wanted > room and not truncate:
        return -1
    added = 0
    longest = 0
    for u in range(n):
        if added >= room:
            break
        length = char_offsets[u + 1] - char_offsets[u]
        if length > max_len:
            continue
        k = keys[u]
        slot = _home(k, shift, mask)
        probe = 0
        while slot_keys[slot] != _EMPTY and slot_keys[slot] != k:
            slot = (slot + 1) & mask
            probe += 1
        if slot_keys[slot] != _EMPTY:  # stored already (another thread), or a colliding word
            continue
        e = count + added
        c0 = char_offsets[u]
        for i in range(length):
            store_chars[chars_size + i] = chars[c0 + i]
        t0 = new_offsets[u]
        size = new_offsets[u + 1] - t0
        for i in range(size):
            store_ids[ids_size + i] = new_ids[t0 + i]
            store_ends[ids_size + i] = new_ends[t0 + i]
        entries[e, 0] = chars_size
        entries[e, 1] = length
        entries[e, 2] = ids_size
        entries[e, 3] = size
        chars_size += length
        ids_size += size
        slot_entry[slot] = e
        slot_keys[slot] = k
        longest = max(longest, probe)
        added += 1
    # the sizes first, the count last: a reader that sees the new count sees its entries' data
    state[STATE_CHARS] = chars_size
    state[STATE_IDS] = ids_size
    state[STATE_ENDS] = ids_size
    state[STATE_PROBES] = max(state[STATE_PROBES], longest + 1)
    state[STATE_COUNT] = count + added
    return added


@kernel
def _bit_length(x):
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


@kernel
def pack_misses(keys, char_offsets, chars, offsets, ids, ends):
    """The unique misses (``lookup_dedup``'s keys, codepoints ``chars`` by ``char_offsets``, and
    the model's ``ids`` and ``ends`` by ``offsets``) as one int64 array: their counts (words,
    codepoints, tokens), then the parts in the order of the arguments."""
    words = keys.size
    out = np.empty(3 + 3 * words + 2 + chars.size + 2 * ids.size, np.int64)
    out[0], out[1], out[2] = words, chars.size, ids.size
    at = _put(out, 3, keys)
    at = _put(out, at, char_offsets)
    at = _put(out, at, chars)
    at = _put(out, at, offsets)
    _put(out, _put(out, at, ids), ends)
    return out


@kernel
def _put(out, at, part):
    for i in range(part.size):
        out[at + i] = part[i]
    return at + part.size


@kernel
def misses_layout(misses):
    """The parts of ``pack_misses``' array, as views: keys, char offsets, codepoints, token
    offsets, ids, ends."""
    words, size, tokens = misses[0], misses[1], misses[2]
    keys = misses[3:3 + words]
    at = 3 + words
    char_offsets = misses[at:at + words + 1]
    at += words + 1
    chars = misses[at:at + size]
    at += size
    offsets = misses[at:at + words + 1]
    at += words + 1
    return keys, char_offsets, chars, offsets, misses[at:at + tokens], misses[at + tokens:at + 2 * tokens]


@kernel
def insert_packed(misses, truncate, slot_keys, slot_entry, entries, store_chars, store_ids, store_ends, state):
    """``insert`` of ``pack_misses``' array."""
    keys, char_offsets, chars, offsets, ids, ends = misses_layout(misses)
    return insert(keys, chars, char_offsets, ids, ends, offsets, truncate, slot_keys, slot_entry, entries,
                  store_chars, store_ids, store_ends, state)
