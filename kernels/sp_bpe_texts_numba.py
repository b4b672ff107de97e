"""A whole SentencePiece BPE encode on the CPU in one kernel call: texts in, token ids (and spans) out.

Contract: ``encode_texts`` returns what ``gputok.tokenizer.Tokenizer._encode_codepoints`` returns, stage by stage,
for a SentencePiece BPE pipeline (``gputok.models.bpe_sentencepiece.sentencepiece_tokenizer``:
``SentencePieceNormalizer``, the ``MergeSafeSplit`` word split, a character-level ``BPE``):
int64 token ids, their int64 offsets per text and, with ``with_spans``, int64 [tokens, 2]
character spans. The reference is that stage path (``tests/test_sp_bpe_texts.py`` compares the
two on real text and random Unicode, spans and batch 1 included).

How: the stage kernels called in order inside one compiled function, so a batch pays one kernel
call instead of a call and its Python glue per stage:
``ingest_numba.codepoints_numba`` -> ``sp_normalize_numba.normalize_split`` (the charsmap if any,
the whitespace rules: dummy prefix, spaces as ``▁``; the split before each run of ``▁``, or each
text one word; one pass per text for most text) -> per word: the word store, else
``bpe_symbols_numba._symbols`` (characters to ids, byte fallback, unk) and ``bpe_heap``'s merges
(sentencepiece's BPE: one merge at a time, the pair of the best score, the leftmost among equal
scores; a word of up to ``TINY_ROW`` symbols by a scan over the packed pair map,
``merge_tiny_packed``, where the vocabulary has one; else ``merge_row``: the same scan over the
map's slot arrays, a heap of adjacent pairs beyond) -> the word's tokens
and their ends -> ``scatter_numba.scatter_tokens``.

The word store (``_cached`` / ``_store``): an open-addressing table of the words merged before,
one 32-byte slot each, with their characters (a hit is verified character by character) and
tokens. English repeats its words: after a few thousand lines most words hit, and a hit costs a
hash, a probe and a copy where a merge costs a dozen pair probes. A full store adds no more words
until at least ``cache_full_misses`` misses since it filled outnumber its hits since then; then it
empties and refills (a generational reset, as ``unigram_cache_numba``'s): it keeps the words that
came first, English's common ones. (Emptying it whenever 7/8 full, as before, threw them away
every ~3 MB of English: a second pass over 4 MB took 70 ms/MB, 21 with the store kept.) The caller
gives each thread its own store (``gputok._whole_sp_bpe``), so the kernel reads and writes it
without a lock; with no store (``cache_longest`` -1) every word is merged. Re-entrant and nogil
otherwise: the caller runs chunks of a large batch on its threads at once.

``encode_padded_cells``: ``encode_texts`` then ``cells_numba``'s post-processing in the same call,
so a small padded batch (one chunk) pays one kernel call from text to output arrays
(``encode_ragged_cells``: the same as two calls, ``cells_numba.ragged_after``); for a model whose
every character has tokens (an unk token, or byte fallback: the caller checks, the encode cannot
fail then).
"""

import numpy as np

from ._numba import inlined, kernel, prefetch
from .bpe_heap import TINY_ROW, merge_row, merge_tiny_packed
from .bpe_symbols_numba import _symbols
from .cells_numba import padded_cells, ragged_after
from .ingest_numba import codepoints_numba
from .scatter_numba import scatter_tokens
from .sp_normalize_numba import normalize_split
from .word_cache_numba import _same

_NO_INVERSE = np.zeros(0, np.int64)  # scatter_tokens: word i has row i
_FNV_OFFSET = np.int64(0xCBF29CE484222325 - (1 << 64))
_FNV_PRIME = np.int64(0x100000001B3)
_FIBONACCI = np.int64(0x9E3779B97F4A7C15 - (1 << 64))
_LOW63 = np.int64((1 << 63) - 1)
# The store's steps (_word_hash, _cached, _store) are inlined into the kernel by numba, as
# bpe_heap's merge steps are (see there).
# The store's counters (``used``): slots, characters and tokens taken, and its hits and misses since
# it filled (the reset's vote; ``_store``).
SLOTS, CHARS, TOKENS, HITS, MISSES = 0, 1, 2, 3, 4


@inlined
def _word_hash(values, start, length):
    """FNV-1a over the word's codepoints and its length, top bit cleared (never a slot's -1)."""
    h = _FNV_OFFSET
    for i in range(start, start + length):
        h = (h ^ np.int64(values[i])) * _FNV_PRIME
    h = (h ^ length) * _FNV_PRIME
    return (h ^ (h >> 29)) & _LOW63


@inlined
def _cached(values, start, length, key, slots, shift, chars):
    """The store's slot holding the word, -1 if absent (a key is verified character by character).
    A slot (``slots[i]``, 32 bytes, one cache line): the word's key (-1: empty), the start of its
    characters in ``chars``, the start of its tokens in the store's ``tokens``, and its length in
    characters << 32 | its count of tokens."""
    mask = slots.shape[0] - 1
    slot = ((key * _FIBONACCI) >> shift) & mask
    while True:
        k = slots[slot, 0]
        if k == -1:
            return -1
        if k == key and (slots[slot, 3] >> 32) == length and _same(chars, slots[slot, 1], values, start, length):
            return slot
        slot = (slot + 1) & mask


@inlined
def _store(values, start, length, key, ids, ends, first, count, slots, shift, chars, tokens, used, full_misses):
    """Add the word and its tokens ``ids/ends[first:first + count]`` to the store, if it has room
    (``used``: see ``SLOTS``; the table is kept at most half full). A full store counts the miss
    and empties once at least ``full_misses`` misses since it filled outnumber its hits since then
    (see the module notes)."""
    if 2 * (used[SLOTS] + 1) > slots.shape[0] or used[CHARS] + length > chars.size or \
            used[TOKENS] + count > tokens.shape[0]:
        used[MISSES] += 1
        if used[MISSES] < full_misses or used[MISSES] <= used[HITS]:
            return
        slots[:, 0] = -1
        used[:] = 0
        if length > chars.size or count > tokens.shape[0]:  # a word no store of this size holds
            return
    c = used[CHARS]
    for i in range(length):
        chars[c + i] = values[start + i]
    t = used[TOKENS]
    for k in range(count):
        tokens[t + k, 0] = ids[first + k]
        tokens[t + k, 1] = ends[first + k]
    used[SLOTS] += 1
    used[CHARS] = c + length
    used[TOKENS] = t + count
    mask = slots.shape[0] - 1
    slot = ((key * _FIBONACCI) >> shift) & mask
    while slots[slot, 0] != -1:
        slot = (slot + 1) & mask
    slots[slot, 1] = c
    slots[slot, 2] = t
    slots[slot, 3] = (length << 32) | count
    slots[slot, 0] = key


@inlined
def _direct_symbols(values, start, length, char_direct, tok, source):
    """The word's symbols from ``char_direct`` (a codepoint below its size -> its token, the same
    whichever its place in the word; -1: look it up), as ``_symbols`` gives them; -1 if a
    character is not there (``_symbols`` then)."""
    for i in range(length):
        c = values[start + i]
        if c >= char_direct.size:
            return -1
        token = char_direct[c]
        if token < 0:
            return -1
        tok[i] = token
        source[i] = i
    return length


@kernel
def _encode_normalized(offsets, norm, norm_offsets, source, starts, ends, word_offsets, byte_to_id, char_keys,
                       char_values, char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix, suffix,
                       has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys, slot_values,
                       hash_mask, hash_shift, max_probes, vocab_size, level_start, pair_table, pair_mask, pair_shift,
                       char_direct, cache_slots, cache_shift, cache_chars, cache_tokens, cache_used, cache_longest,
                       cache_full_misses, with_spans):
    """The stages after the normalizer and the word split (``sp_normalize_numba.normalize_split``'s
    outputs; ``offsets``: the texts' codepoint offsets). Returns ``(ids, offsets, spans)``;
    ``offsets`` is empty when an unknown character needs an unk token the vocabulary lacks.
    ``cache_*``: the calling thread's word store (``gputok._whole_sp_bpe.WordStore``;
    ``cache_longest`` -1 for none): each word is looked up there first, and a word merged here is
    added while there is room (see the module notes for a full store)."""
    words = starts.size
    per_char = 4 * (prefix.size + 1 + suffix.size) if byte_fallback else 1
    longest = 0
    for w in range(words):
        longest = max(longest, ends[w] - starts[w])
    most = longest * per_char  # symbols of the longest word
    tok = np.empty(most, np.int64)
    tok_source = np.empty(most, np.int64)
    nxt = np.empty(most, np.int64)
    prv = np.empty(most, np.int64)
    value = np.empty(most, np.int64)
    heap = np.empty(3 * most, np.int64)
    bounds = np.empty(2, np.int64)
    count = np.empty(1, np.int64)
    piece_ids = np.empty(norm.size * per_char, np.int64)
    piece_ends = np.empty(norm.size * per_char, np.int64)
    piece_offsets = np.empty(words + 1, np.int64)
    piece_offsets[0] = 0
    at = 0
    # The words' keys and home slots first, then the records of the words found there: each pass's
    # reads are prefetches that do not wait for each other (the lookups below would wait for each
    # word's slot, then its characters and tokens, in turn: a miss to memory for most words).
    keys = np.empty(words, np.int64)
    mask = cache_slots.shape[0] - 1
    for w in range(words):
        length = ends[w] - starts[w]
        if length <= cache_longest:
            key = _word_hash(norm, starts[w], length)
            keys[w] = key
            prefetch(cache_slots, (((key * _FIBONACCI) >> cache_shift) & mask) * cache_slots.shape[1])
    for w in range(words):
        if ends[w] - starts[w] <= cache_longest:
            home = ((keys[w] * _FIBONACCI) >> cache_shift) & mask
            if cache_slots[home, 0] == keys[w]:
                prefetch(cache_chars, cache_slots[home, 1])
                prefetch(cache_tokens, cache_tokens.shape[1] * cache_slots[home, 2])
    for w in range(words):
        start = starts[w]
        length = ends[w] - start
        cacheable = length <= cache_longest
        key = keys[w] if cacheable else 0
        slot = _cached(norm, start, length, key, cache_slots, cache_shift, cache_chars) if cacheable else -1
        if slot >= 0:
            first = cache_slots[slot, 2]
            stored = cache_slots[slot, 3] & 0xFFFFFFFF
            for k in range(stored):
                piece_ids[at + k] = cache_tokens[first + k, 0]
                piece_ends[at + k] = cache_tokens[first + k, 1]
            at += stored
            piece_offsets[w + 1] = at
            cache_used[HITS] += cache_used[MISSES] > 0  # a hit since the store filled
            continue
        n = _direct_symbols(norm, start, length, char_direct, tok, tok_source)
        if n < 0:
            bounds[0] = start
            bounds[1] = start + length
            n = _symbols(norm, bounds, False, byte_to_id, char_keys, char_values, char_mask, char_shift,
                         char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk,
                         whole_slots, token_keys, token_offsets, tok, tok_source, count)
        if n < 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
        if n <= TINY_ROW and pair_table.size:
            merge_tiny_packed(tok, nxt, heap, prv, value, n, pair_table, pair_mask, pair_shift, vocab_size)
        else:
            merge_row(tok, n, nxt, prv, value, heap, slot_keys, slot_values, hash_mask, hash_shift, max_probes,
                      vocab_size, level_start)
        first = at
        i = 0
        while i < n:
            piece_ids[at] = tok[i]
            piece_ends[at] = tok_source[nxt[i] - 1] + 1  # the character holding its last symbol, + 1
            at += 1
            i = nxt[i]
        piece_offsets[w + 1] = at
        if cacheable:
            _store(norm, start, length, key, piece_ids, piece_ends, first, at - first, cache_slots, cache_shift,
                   cache_chars, cache_tokens, cache_used, cache_full_misses)
    return scatter_tokens(piece_ids[:at], piece_ends[:at], piece_offsets, _NO_INVERSE, starts, word_offsets, source,
                          offsets, with_spans, False)


@kernel
def encode_texts(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
                 rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces,
                 mark, byte_to_id, char_keys, char_values, char_mask, char_shift, char_probes, byte_fallback,
                 fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets,
                 slot_keys, slot_values, hash_mask, hash_shift, max_probes, vocab_size, level_start, pair_table,
                 pair_mask, pair_shift, char_direct, cache_slots, cache_shift, cache_chars, cache_tokens, cache_used,
                 cache_longest, cache_full_misses, with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths;
    ``charsmap``: whether the precompiled charsmap's arrays (``direct`` .. ``max_long``,
    ``gputok.charsmap.Charsmap.numpy_rules``) are real, else the identity rule;
    ``mark``: the word split's character, -1 for none. ``sp_normalize_numba.normalize_split``
    (the split before each run of ``mark``), then :func:`_encode_normalized`."""
    values, offsets = codepoints_numba(units, lengths)
    norm, norm_offsets, source, starts, ends, word_offsets = normalize_split(
        values, offsets, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
        rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, -1, mark,
        mark >= 0, True, with_spans)
    return _encode_normalized(offsets, norm, norm_offsets, source, starts, ends, word_offsets, byte_to_id, char_keys,
                              char_values, char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix,
                              suffix, has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys,
                              slot_values, hash_mask, hash_shift, max_probes, vocab_size, level_start, pair_table,
                              pair_mask, pair_shift, char_direct, cache_slots, cache_shift, cache_chars, cache_tokens,
                              cache_used, cache_longest, cache_full_misses, with_spans)


@kernel
def encode_padded_cells(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                        key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces,
                        escape_whitespaces, mark, byte_to_id, char_keys, char_values, char_mask, char_shift,
                        char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk,
                        whole_slots, token_keys, token_offsets, slot_keys, slot_values, hash_mask, hash_shift,
                        max_probes, vocab_size, level_start, pair_table, pair_mask, pair_shift, char_direct,
                        cache_slots, cache_shift, cache_chars, cache_tokens, cache_used, cache_longest,
                        cache_full_misses, max_length, strategy, stride, item_seq, item_id, item_type, min_width,
                        multiple, left, pad_id, with_types):
    """The encode then ``cells_numba.padded_cells``: (cells, error)."""
    ids, offsets, _ = encode_texts(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order,
                                   key_values, key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix,
                                   remove_extra_whitespaces, escape_whitespaces, mark, byte_to_id, char_keys,
                                   char_values, char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix,
                                   suffix, has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys,
                                   slot_values, hash_mask, hash_shift, max_probes, vocab_size, level_start, pair_table,
                                   pair_mask, pair_shift, char_direct, cache_slots, cache_shift, cache_chars,
                                   cache_tokens, cache_used, cache_longest, cache_full_misses, False)
    return padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple,
                        left, pad_id, with_types)


encode_ragged_cells = ragged_after(encode_texts)
