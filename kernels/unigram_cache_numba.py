"""SentencePiece's Unigram segmentation of whole texts, with a word cache kept across calls: the
words' float64 segmentations where they are provably SentencePiece's float32 ones in context.

Contract: ``segment_cached`` returns what ``unigram_sentence.unigram_sentences_encode`` returns
(SentencePiece's ids of each sentence, cut at its words: exact), reading and filling ``cache``.

Why this is exact (``gputok.models.unigram``, ``Unigram.encode_in_context``, has the argument):
SentencePiece runs its float32 Viterbi over the whole sentence, so the rounding of the running
score decides near ties within a word; no piece holds '▁' after its first character, so in exact
arithmetic the words are independent. A word's float64 Viterbi (``unigram_words_numba.word_viterbi``)
records its *margin*, the smallest gap between best and runner-up at any node; where that margin
is above the worst-case float32 rounding of the sentence's running score at the word,
``(2 * size + 4) * (magnitude + size * max_abs) * 2**-23`` (``magnitude``: the sum of the sentence's
words' absolute float64 scores; ``max_abs``: the largest absolute piece or unk score), every
decision in the word is the same in both, so the word's float64 tokens are SentencePiece's. A
sentence with one word at or below its bound, or longer than ``whole_chars`` characters, is
segmented whole by SentencePiece's float32 Viterbi (``unigram_sentence._sentence_row``) instead.

The cache: an open-addressing table of ``slots`` (linear probing from a slot the key's bits pick,
at most half full), one 32-byte row per word, read through two views of the same memory:
``slot_ints[s, 0]`` the word's key (0: empty), ``slot_ints[s, 1]`` where its tokens are,
``slot_floats[s, 2]`` and ``[s, 3]`` its margin and float64 score. Two kinds of key:
- a short word (up to ``PACKED_CHARS`` characters) whose alphabet codes (``code_of``, what the
  Viterbi reads: the word's tokens are a function of them) all fit is its own key: the codes
  packed under its length, an even number. Equal keys are the same codes, so a hit reads no more.
  With one or two tokens (ids below ``INLINE_ID_LIMIT``), they are in the slot too (``INLINE``:
  the ids, the first token's end, ``TWO_TOKENS``), and a hit reads one cache line;
- any other word: an odd 63-bit hash of its codepoints, and a hit only where its codepoints equal
  the stored ones (a hash collision costs a miss).
Other tokens are in ``store``: a record of the word's codepoints (unread for a packed key, kept so
that every record has one layout), its token ids, then its token ends (int32), ``slot_ints[s, 1]``
holding where it starts (``<< 16``), its tokens (``<< 8``) and its length; only a hashed word's
record is prefetched. Packed keys and inline tokens: ``segment_cached`` 13.6-13.9 -> 12.2-12.6 ns per
character with every word a hit, 21.3-21.4 -> 20.1-20.4 from a cold cache (``--lines 200000``
of the bench's English in batches of 512, one thread, a scratch script timing this kernel alone,
two alternated runs of each). Words over ``max_cached`` (< 256) characters are not stored. When
the table is half full or the store full, no more words are stored until the misses since then
outnumber the hits (then both empty and refill: a generational reset). ``used``: words and store
entries used, hits and misses since the cache filled. A cache is one thread's (the caller keeps one per thread): no locks.
Memory: ``gputok._whole_unigram`` sizes it (16 MB).
"""

import numpy as np

from ._numba import kernel, prefetch, uncounted
from .unigram_sentence import _sentence_row, cut_best_path, sentence_sizes
from .unigram_trie_numba import write_best_path
from .unigram_words_numba import word_viterbi

_ROUNDING = 2.0 ** -23
# A word of up to PACKED_CHARS characters whose alphabet codes fit, its first's in FIRST_CODE_BITS
# (a word's first character is most often '▁', whose code is large: codes count following
# characters) and the others' in PACKED_CODE_BITS, none 0, is its own key: the codes packed under
# its length (3 + 12 + 6 * 7 = 57 bits, shifted to leave the lowest bit 0). With at most two tokens,
# of ids below INLINE_ID_LIMIT, its tokens are kept in its slot (INLINE set), not in the store.
PACKED_CHARS, FIRST_CODE_BITS, PACKED_CODE_BITS = 7, 12, 7
INLINE, TWO_TOKENS, INLINE_ID_LIMIT = 1 << 62, 1 << 56, 1 << 24


# The cache's steps allocate nothing and are compiled without numba's reference counts
# (_numba.uncounted; see unigram_trie_numba.first_at_least): the counts left around their calls were ~4%
# of this kernel's perf samples, ~2% after, and segment_cached went from 19.8-20.9 to 18.3-20.4 ns
# per character (benchmarks/unigram_profile.py --batch-size 512, alternated).
@uncounted
def _word_key(values, lo, n, code_of):
    """The word's key in the table: non-zero, even for a short word (its alphabet codes packed, see
    the module notes: exact), odd for another (a 63-bit hash of its codepoints)."""
    if 1 <= n <= PACKED_CHARS:
        code = code_of[values[lo]]
        packed = (n << FIRST_CODE_BITS) | code
        fits = 1 <= code < 1 << FIRST_CODE_BITS
        for i in range(1, n):
            code = code_of[values[lo + i]]
            fits &= 1 <= code < 1 << PACKED_CODE_BITS
            packed = (packed << PACKED_CODE_BITS) | code
        if fits:
            return packed << 1
    h = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(n)
    for i in range(n):
        h = (h ^ np.uint64(values[lo + i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xD6E8FEB86659FD93)
    h ^= h >> np.uint64(32)
    return np.int64(h >> np.uint64(1)) | 1


@uncounted
def _home(key, mask):
    """The key's first slot: its bits mixed (a packed key's low bits are its last codes)."""
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask


@uncounted
def _lookup(values, lo, n, key, slot_ints, store):
    """The word's slot, or ``-1 - slot`` with the empty slot where the probe stopped."""
    mask = slot_ints.shape[0] - 1
    slot = _home(key, mask)
    while True:
        stored = slot_ints[slot, 0]
        if stored == 0:
            return -1 - slot
        if stored == key:
            if key & 1 == 0:  # a packed key is the word itself
                return slot
            entry = slot_ints[slot, 1]
            if entry & 0xFF == n:
                at = entry >> 16
                same = True
                for i in range(n):
                    if store[at + i] != values[lo + i]:
                        same = False
                        break
                if same:
                    return slot
        slot = (slot + 1) & mask


@uncounted
def _insert(values, lo, n, key, slot, ids, ends, first_token, tokens, margin, score, slot_ints, slot_floats, store,
            used, full_misses):
    """Store the word (its ``tokens`` tokens at ``first_token`` of ``ids`` / ``ends``) at the empty
    ``slot`` (from :func:`_lookup`). A full cache stores nothing more until at least ``full_misses``
    misses since it filled outnumber its hits since then (then it empties: a generational reset),
    so real text keeps the words that came first, its common ones."""
    inline = key & 1 == 0 and tokens <= 2
    for t in range(tokens):
        inline &= 0 <= ids[first_token + t] < INLINE_ID_LIMIT
    size = 0 if inline else n + 2 * tokens
    if 2 * (used[0] + 1) > slot_ints.shape[0] or used[1] + size > store.size:
        used[3] += 1
        if used[3] < full_misses or used[3] <= used[2]:
            return
        slot_ints[:, 0] = 0
        used[:] = 0
        slot = _home(key, slot_ints.shape[0] - 1)
        if size > store.size:  # (a store smaller than one record)
            return
    if inline:
        entry = INLINE | ids[first_token]
        if tokens == 2:
            entry |= TWO_TOKENS | (ids[first_token + 1] << 24) | (ends[first_token] << 48)
    else:
        at = used[1]
        for i in range(n):
            store[at + i] = values[lo + i]
        for t in range(tokens):
            store[at + n + t] = ids[first_token + t]
            store[at + n + tokens + t] = ends[first_token + t]
        used[1] += size
        entry = (at << 16) | (tokens << 8) | n
    used[0] += 1
    slot_ints[slot, 1] = entry
    slot_floats[slot, 2] = margin
    slot_floats[slot, 3] = score
    slot_ints[slot, 0] = key


# Words keyed and prefetched at a time: their slots and records (one to three cache lines a word)
# stay in the core's L2 cache until the lookups read them.
PREFETCH_WORDS = 512


@uncounted
def _prefetch_words(values, word_starts, word_ends, first, last, code_of, keys, slot_ints, store):
    """Key words ``first .. last`` (capped at the last word) into ``keys``, and prefetch their
    home slots, then the records of the words found there: each pass's reads are prefetches that
    do not wait for each other, where the lookups would wait for each word's slot, then its
    record, in turn (a miss to memory for most words). With word_viterbi inlined too,
    segment_cached went from 30.5 to 23.6 ns per character (one thread,
    ``benchmarks/unigram_profile.py --batch-size 512``). Returns the new count of words prefetched."""
    last = min(last, word_starts.size)
    mask = slot_ints.shape[0] - 1
    for w in range(first, last):
        at = word_starts[w]
        key = _word_key(values, at, word_ends[w] - at, code_of)
        keys[w] = key
        prefetch(slot_ints, _home(key, mask) * slot_ints.shape[1])
    for w in range(first, last):
        key = keys[w]
        home = _home(key, mask)
        if key & 1 and slot_ints[home, 0] == key:
            prefetch(store, slot_ints[home, 1] >> 16)
    return last


@kernel
def segment_cached(values, word_starts, word_ends, sentence_words, code_of, trie, dense, rare_offsets, rare_codes,
                   rare_rows, score32, score64, unk_score, unk_id, reset_threshold, max_abs, whole_chars, max_cached,
                   full_misses, slot_ints, store, used):
    """``unigram_sentences_encode``'s ``(ids, ends, offsets)`` with the word cache (see the module
    notes): ``score32`` / ``score64`` the pieces' float32 / float64 scores."""
    sentences = sentence_words.size - 1
    num_words = word_starts.size
    longest, total = sentence_sizes(word_starts, word_ends, sentence_words)
    best32 = np.empty(longest + 1, np.float32)
    best64 = np.empty(longest + 1, np.float64)
    second = np.empty(longest + 1, np.float64)
    start = np.empty(longest + 1, np.int32)
    piece = np.empty(longest + 1, np.int32)
    codes = np.empty(longest + 1, np.int32)
    path = np.empty(longest + 1, np.int32)
    margins = np.empty(num_words, np.float64)
    ids = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    offsets = np.zeros(num_words + 1, np.int64)
    counts = offsets[1:]
    unk32 = np.float32(unk_score)
    threshold = np.float32(reset_threshold)
    slot_floats = slot_ints.view(np.float64)
    keys = np.empty(num_words, np.int64)
    ready = 0  # the words hashed and prefetched so far (_prefetch_words)
    written = 0
    for k in range(sentences):
        first = sentence_words[k]
        last = sentence_words[k + 1]
        if last == first:
            continue
        lo = word_starts[first]
        n = word_ends[last - 1] - lo
        if n <= whole_chars:
            if last > ready:
                ready = _prefetch_words(values, word_starts, word_ends, ready, max(last, ready + PREFETCH_WORDS),
                                        code_of, keys, slot_ints, store)
            sentence_at = written
            magnitude = 0.0
            for w in range(first, last):
                at = word_starts[w]
                size = word_ends[w] - at
                key = keys[w]
                slot = _lookup(values, at, size, key, slot_ints, store)
                if slot >= 0:
                    used[2] += used[3] > 0  # a hit since the cache filled
                    entry = slot_ints[slot, 1]
                    if entry & INLINE:
                        ids[written] = entry & (INLINE_ID_LIMIT - 1)
                        if entry & TWO_TOKENS:
                            tokens = 2
                            ends[written] = (entry >> 48) & 0xFF
                            ids[written + 1] = (entry >> 24) & (INLINE_ID_LIMIT - 1)
                            ends[written + 1] = size
                        else:
                            tokens = 1
                            ends[written] = size
                    else:
                        stored = entry >> 16
                        tokens = (entry >> 8) & 0xFF
                        for t in range(tokens):
                            ids[written + t] = store[stored + size + t]
                            ends[written + t] = store[stored + size + tokens + t]
                    margin = slot_floats[slot, 2]
                    score = slot_floats[slot, 3]
                else:
                    margin, _ = word_viterbi(values, at, size, code_of, trie, dense, rare_offsets, rare_codes,
                                             rare_rows, score64, unk_score, unk_id, best64, second, start, piece, codes)
                    tokens = write_best_path(start, piece, size, ids, ends, written)
                    score = best64[size]
                    if size <= max_cached:
                        _insert(values, at, size, key, -1 - slot, ids, ends, written, tokens, margin, score, slot_ints,
                                slot_floats, store, used, full_misses)
                counts[w] = tokens
                written += tokens
                margins[w] = margin
                magnitude += abs(score)
            fragile = False
            for w in range(first, last):
                size = word_ends[w] - word_starts[w]
                if margins[w] <= (2 * size + 4) * (magnitude + size * max_abs) * _ROUNDING:
                    fragile = True
                    break
            if not fragile:
                continue
            written = sentence_at
            counts[first:last] = 0
        _sentence_row(values, lo, n, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, score32, unk32, unk_id,
                      threshold, best32, start, piece, codes)
        written = cut_best_path(start, piece, n, lo, first, word_starts, word_ends, path, ids, ends, counts, written)
    for w in range(num_words):
        offsets[w + 1] += offsets[w]
    return ids[:written], ends[:written], offsets
