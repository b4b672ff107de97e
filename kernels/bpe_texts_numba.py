"""A whole BPE encode on the CPU in one kernel call: texts in, token ids (and spans) out, with the word cache.

Contract: ``encode_texts`` returns what ``gputok.tokenizer.Tokenizer._encode_units`` returns for a
byte-level BPE pipeline (cl100k, o200k, gpt2, llama3, qwen2 as tiktoken files or tokenizer.json;
character-level BPE too): int64 token ids, their int64 offsets per text and, with ``with_spans``,
int64 [tokens, 2] character spans; and the words the cache did not hold, for the caller to insert
(:meth:`gputok.word_cache.WordCache.insert_misses`). The stages it covers: a table normalizer or
none; a space before each text (ByteLevel's ``add_prefix_space``) or not; one of the named regex
splits (``regex_split_numba``) or none (each text one word: ByteLevel without its regex); BPE
(ignore_merges or not). The reference is that method run stage by stage
(``tests/test_whole_bpe.py`` compares the two on real text and random Unicode, with spans).

How: the stage kernels called in order inside one compiled function, so a call pays one kernel
dispatch instead of a call and its Python glue per stage (at batch 1 the glue was most of the time):
``codepoints_numba`` -> ``rewrite_table_numba`` -> ``prepend_unless_first`` -> ``regex_split_numba``
-> ``word_cache_numba.lookup_dedup`` (each word looked up in the cache's table, a snapshot taken
by the caller; the misses deduplicated) -> ``bpe_symbols_numba._symbols`` and ``bpe_heap._merge_rows``
on the distinct misses only -> ``word_cache_numba.assemble`` -> ``scatter_numba.scatter_tokens``.
The model's tables and the pre-tokenizer's options travel as one int64 array (:func:`pack_pipeline`;
``model[i]`` and ``model[i + 1]`` bound part ``i``), the misses come back as one
(``word_cache_numba.pack_misses``): a kernel call unboxes each array argument (~0.1 us apiece)
and boxes each returned array (~0.5 us), and a batch of one text has ~12 us in all to match
huggingface.

``encode_padded_cells``: ``encode_texts`` then the post-processing (``cells_numba``) in the same
call, so a small padded batch (one chunk) pays one kernel call from text to output arrays.
``encode_ragged_cells`` (``encode_texts`` then ``cells_numba.ragged_cells``, two calls from
Python: see ``cells_numba.ragged_after``) reads the word cache through a snapshot and hands back
its misses, as ``encode_texts``; ``encode_padded_cells`` (a batch-1 call of ~9 us in all, where a
separate insert was ~2.5 us) inserts its misses itself, under the cache's lock the caller holds
(``gputok.word_cache.WordCache.encode_inserting``).

Re-entrant and ``nogil``: chunks of a batch run ``encode_texts`` on several Python threads at once;
it only reads the cache (inserts happen under the cache's lock, after the call).
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import _merge_rows
from .bpe_heap import merge_scan as _merge_short
from .bpe_symbols_numba import _symbols, symbol_buffers
from .cells_numba import padded_cells_packed, ragged_cells
from .ingest_numba import codepoints_numba, utf8_units_numba
from .normalize_numba import rewrite_table_numba
from .regex_split_numba import regex_split_numba
from .scatter_numba import scatter_tokens
from .word_cache_numba import (DECLINED_FULL, DECLINED_GROW, STATE_CAPACITY, STATE_COUNT, _bit_length, assemble, insert,
                               lookup_dedup, pack_misses)
from .word_split_numba import prepend_unless_first, whole_texts

NO_SPLIT = -1  # ``rule``: each non-empty text is one word
# scatter_tokens' inverse: word i has row i. A global, so read-only in numba: the argument types the
# other families' kernels pass, one compile of scatter_tokens for all of them.
_NO_INVERSE = np.zeros(0, np.int64)
# Words of up to this many symbols merge by a scan per merge (``_merge_short``), longer ones in
# the heap kernel (O(n log n)); 32 keeps a scan under ~1k pair reads.
SHORT = 32
# The parts of the packed pipeline, in order (``pack_pipeline``).
(BYTE_TO_ID, CHAR_KEYS, CHAR_VALUES, FALLBACK_IDS, PREFIX, SUFFIX, WHOLE_SLOTS, TOKEN_KEYS, TOKEN_OFFSETS, PAIR_KEYS,
 PAIR_VALUES, LEVEL_START, TABLE_VALUES, TABLE_OFFSETS, CLASSES, SCALARS) = range(16)
PARTS = 16
# The scalars, in order, in the last part.
(BYTE_LEVEL, CHAR_MASK, CHAR_PROBES, BYTE_FALLBACK, HAS_UNK, UNK_ID, FUSE_UNK, PAIR_MASK, PAIR_PROBES, VOCAB_SIZE,
 PREFIX_SPACE, RULE, TABLE_SIZE, CLASSES_SIZE) = range(14)


def pack_pipeline(symbols: dict, merges: dict, *, prefix_space: bool, rule: int, table_values: np.ndarray,
                  table_offsets: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``BPE._numba_tables`` (its ``symbols`` and ``merges``), the normalizer's table (int32
    values, int64 offsets), the split rule's ``classes`` (uint8) and the pre-tokenizer's options as
    one int64 array: ``PARTS + 1`` bounds, then the parts back to back (the int32 and uint8 parts
    as their bytes, padded to 8; the scalars last). ``encode_texts`` takes the table and classes
    as arguments of their own; ``encode_padded_cells`` reads them from here (one argument less each)."""
    scalars = [symbols["byte_level"], symbols["char_mask"], symbols["char_probes"], symbols["byte_fallback"],
               symbols["has_unk"], symbols["unk_id"], symbols["fuse_unk"], merges["hash_mask"], merges["max_probes"],
               merges["vocab_size"], prefix_space, rule, table_values.size, classes.size]
    parts = [np.asarray(symbols[name], np.int64) for name in ("byte_to_id", "char_keys", "char_values",
                                                               "fallback_ids", "prefix", "suffix", "whole_slots",
                                                               "token_keys", "token_offsets")]
    parts += [np.asarray(merges[name], np.int64) for name in ("slot_keys", "slot_values", "level_start")]
    parts += [_as_words(np.ascontiguousarray(table_values, np.int32)), np.asarray(table_offsets, np.int64),
              _as_words(np.ascontiguousarray(classes, np.uint8)), np.array(scalars, np.int64)]
    sizes = np.array([0] + [p.size for p in parts], np.int64)
    bounds = np.cumsum(sizes) + PARTS + 1
    return np.concatenate([bounds] + parts)


def _as_words(array: np.ndarray) -> np.ndarray:
    """The bytes of ``array`` as int64 words (zero-padded to a multiple of 8 bytes)."""
    data = array.tobytes()
    return np.frombuffer(data + bytes(-len(data) % 8), np.int64)


@kernel
def _part(model, i):
    return model[model[i]:model[i + 1]]


@kernel
def _encode_misses(chars, char_offsets, model):
    """The BPE tokens of the distinct words missing from the cache (codepoints ``chars``, a row per
    word by ``char_offsets``): (ids, ends within the word in codepoints, offsets), or an empty
    offsets array where an unknown character needs an unk token the vocabulary lacks."""
    words = char_offsets.size - 1
    if words == 0:  # all hits: no scratch for the merge kernel (its rank lists are MBs)
        return np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(1, np.int64)
    scalars = _part(model, SCALARS)
    prefix, suffix = _part(model, PREFIX), _part(model, SUFFIX)
    byte_level = scalars[BYTE_LEVEL] != 0
    fallback = scalars[BYTE_FALLBACK] != 0
    symbols, source, offsets = symbol_buffers(chars.size, words, byte_level, fallback, prefix, suffix)
    char_mask = scalars[CHAR_MASK]
    total = _symbols(chars, char_offsets, byte_level, _part(model, BYTE_TO_ID), _part(model, CHAR_KEYS),
                     _part(model, CHAR_VALUES), char_mask, 64 - _bit_length(char_mask), scalars[CHAR_PROBES], fallback,
                     _part(model, FALLBACK_IDS), prefix, suffix, scalars[HAS_UNK] != 0, scalars[UNK_ID],
                     scalars[FUSE_UNK] != 0, _part(model, WHOLE_SLOTS), _part(model, TOKEN_KEYS),
                     _part(model, TOKEN_OFFSETS), symbols, source, offsets[1:])
    if total < 0:
        return symbols[:0], source[:0], offsets[:0]
    for w in range(words):
        offsets[w + 1] += offsets[w]
    pair_keys, pair_values, pair_mask = _part(model, PAIR_KEYS), _part(model, PAIR_VALUES), scalars[PAIR_MASK]
    pair_shift, probes, vocab_size = 64 - _bit_length(pair_mask), scalars[PAIR_PROBES], scalars[VOCAB_SIZE]
    # Words longer than SHORT symbols merge in the heap kernel, on a copy of them.
    long_rows = 0
    long_size = 0
    for w in range(words):
        n = offsets[w + 1] - offsets[w]
        if n > SHORT:
            long_rows += 1
            long_size += n
    long_tokens = np.empty(long_size, np.int64)
    long_offsets = np.empty(long_rows + 1, np.int64)
    long_offsets[0] = 0
    long_lengths = np.empty(long_rows, np.int64)
    long_last = np.empty(long_size, np.int64)
    if long_rows:
        r = 0
        for w in range(words):
            n = offsets[w + 1] - offsets[w]
            if n > SHORT:
                for k in range(n):  # a loop, not a slice copy: numba's shape check of that compiles its error message
                    long_tokens[long_offsets[r] + k] = symbols[offsets[w] + k]
                long_offsets[r + 1] = long_offsets[r] + n
                r += 1
        _merge_rows(long_tokens, long_offsets, long_tokens, long_lengths, long_last, pair_keys, pair_values,
                    pair_mask, pair_shift, probes, vocab_size, _part(model, LEVEL_START))
    ids = np.empty(total, np.int64)
    last = np.empty(total, np.int64)  # per merged token: 1 + its last symbol's index
    done = np.empty(words, np.int64)  # tokens written after each word
    tok = np.empty(SHORT, np.int64)
    end = np.empty(SHORT, np.int64)
    value = np.empty(SHORT, np.int64)
    written = 0
    r = 0
    long_at = 0
    for w in range(words):
        a = offsets[w]
        n = offsets[w + 1] - a
        if n > SHORT:
            for k in range(long_lengths[r]):
                ids[written + k] = long_tokens[long_at + k]
                last[written + k] = a + long_last[long_at + k] - long_offsets[r]
            written += long_lengths[r]
            long_at += long_lengths[r]
            r += 1
        else:
            m = _merge_short(symbols, a, n, tok, end, value, pair_keys, pair_values, pair_mask, pair_shift, probes,
                             vocab_size)
            for k in range(m):
                ids[written + k] = tok[k]
                last[written + k] = end[k]
            written += m
        done[w] = written
    for w in range(words):  # a loop, not offsets[1:] = done: numba's shape check of that compiles its error message
        offsets[w + 1] = done[w]
    merged = offsets[words]
    ends = np.empty(merged, np.int64)
    for k in range(merged):
        ends[k] = source[last[k] - 1] + 1  # the character holding the token's last symbol, + 1
    return ids[:merged], ends, offsets


@kernel
def _encode(units, lengths, table_values, table_offsets, classes, model, slot_keys, slot_entry, count, entries, chars,
            stored_ids, stored_ends, with_spans):
    """``encode_texts`` up to its misses, which come back as their parts: (whether it encoded
    (False: an unknown character needs an unk token the vocabulary lacks), ids, offsets, spans,
    the misses' keys, char offsets, codepoints, and their tokens' offsets, ids and ends)."""
    scalars = _part(model, SCALARS)
    values, offsets = codepoints_numba(units, lengths)
    none = np.empty(0, np.int64)
    text, text_offsets, source = values, offsets, none
    if table_offsets.size:
        text, text_offsets, source = rewrite_table_numba(values, offsets, table_values, table_offsets)
    if scalars[PREFIX_SPACE]:
        text, text_offsets, moved = prepend_unless_first(text, text_offsets, -1, -1, 32, True)
        if source.size:
            moved = source[moved]
        source = moved
    rule = scalars[RULE]
    if rule == NO_SPLIT:
        starts, ends, word_offsets = whole_texts(text_offsets)
    else:
        half = classes.size // 2
        starts, ends, word_offsets = regex_split_numba(text, text_offsets, classes[:half], classes[half:], rule)
    word_lengths = ends - starts
    out_chars = np.empty(text.size, text.dtype)
    mask = slot_keys.size - 1
    entry, uniq, _, miss_keys, miss_offsets = lookup_dedup(text, starts, word_lengths, none, slot_keys, slot_entry,
                                                           64 - _bit_length(mask), mask, count, entries, chars,
                                                           out_chars)
    miss_chars = out_chars[:miss_offsets[-1]]
    new_ids, new_ends, new_offsets = _encode_misses(miss_chars, miss_offsets, model)
    if new_offsets.size == 0:  # the unk error: nothing encoded
        return (False, none, none, np.zeros((0, 2), np.int64), miss_keys, miss_offsets, miss_chars, new_offsets,
                new_ids, new_ends)
    piece_ids, piece_ends, piece_offsets = assemble(entry, uniq, entries, stored_ids, stored_ends, new_ids, new_ends,
                                                    new_offsets, with_spans)
    ids, token_offsets, spans = scatter_tokens(piece_ids, piece_ends, piece_offsets, _NO_INVERSE, starts,
                                               word_offsets, source, offsets, with_spans, False)
    return True, ids, token_offsets, spans, miss_keys, miss_offsets, miss_chars, new_offsets, new_ids, new_ends


@kernel
def encode_texts(units, lengths, table_values, table_offsets, classes, model, slot_keys, slot_entry, count, entries,
                 chars, stored_ids, stored_ends, with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths; an empty
    ``table_offsets``: no normalizer; ``classes``: the split rule's kind table, then its
    contraction-letter table (``regex_split_numba``); ``model``: :func:`pack_pipeline`; the
    cache's table (a power-of-2 size), ``count`` and arrays (``word_cache_numba.lookup_dedup``).
    Returns ids, offsets, spans and the packed misses (``word_cache_numba.pack_misses``); no ids
    and empty offsets where an unknown character needs an unk token the vocabulary lacks."""
    encoded, ids, offsets, spans, keys, char_offsets, miss_chars, new_offsets, new_ids, new_ends = _encode(
        units, lengths, table_values, table_offsets, classes, model, slot_keys, slot_entry, count, entries, chars,
        stored_ids, stored_ends, with_spans)
    if not encoded:
        return ids, offsets, spans, np.empty(0, np.int64)
    return ids, offsets, spans, pack_misses(keys, char_offsets, miss_chars, new_offsets, new_ids, new_ends)


# ``encode_padded_cells``' answers where it gives no cells, an array of shape (0, status, error), beside
# ``word_cache_numba.DECLINED_FULL`` and ``DECLINED_GROW``.
DECLINED_UNK, TRUNCATION_ERROR = 1, 4


@kernel
def encode_padded_cells(data, lengths, model, options, slot_keys, slot_entry, entries, chars, stored_ids, stored_ends,
                        state):
    """The texts (``data``, a ``bytes``: their UTF-32-LE code units back to back, ``lengths`` as
    ``encode_texts``'; or, with ``lengths`` [-1], one text's UTF-8, valid: a str's
    ``encode("utf-8")``, ~0.5 us quicker at batch 1 than its UTF-32 as an array) to
    ``cells_numba.padded_cells``' cells ([2 or 3, rows, width]; ``options``:
    ``cells_numba.pack_padded``) in one call, the normalizer's table and the split's classes read
    from ``model`` (:func:`pack_pipeline`), the misses inserted into the word cache's store
    (``word_cache_numba.insert`` on its arrays and ``state``: the caller holds the cache's lock;
    a store of capacity 0 is no cache: nothing inserted). Instead of cells, an array of shape (0,
    status, error): ``DECLINED_UNK`` (an unknown character needs an unk token the vocabulary
    lacks), ``DECLINED_FULL`` (no room in the store: the caller starts a new one; an empty store
    takes the first misses that fit), ``DECLINED_GROW`` (buffers too small: the caller grows them
    by ``error`` codepoints and tokens), all three having changed nothing, to call again after; ``TRUNCATION_ERROR`` with ``error`` the
    post-processing's error (the misses inserted)."""
    scalars = _part(model, SCALARS)
    table_values = _part(model, TABLE_VALUES).view(np.int32)[:scalars[TABLE_SIZE]]
    classes = _part(model, CLASSES).view(np.uint8)[:scalars[CLASSES_SIZE]]
    if lengths.size == 1 and lengths[0] == -1:
        ends = np.empty(1, np.int64)
        ends[0] = len(data)
        units, lengths, _ = utf8_units_numba(data, np.zeros(1, np.int64), ends)
    else:
        units = np.frombuffer(data, np.int32).copy()
    encoded, ids, offsets, _, keys, char_offsets, miss_chars, new_offsets, new_ids, new_ends = _encode(
        units, lengths, table_values, _part(model, TABLE_OFFSETS), classes, model, slot_keys, slot_entry,
        state[STATE_COUNT], entries, chars, stored_ids, stored_ends, False)
    if not encoded:
        return np.empty((0, DECLINED_UNK, 0), np.int64)
    cells, error = padded_cells_packed(ids, offsets, options)
    if keys.size and state[STATE_CAPACITY] > 0:
        added = insert(keys, miss_chars, char_offsets, new_ids, new_ends, new_offsets, state[STATE_COUNT] == 0,
                       slot_keys, slot_entry, entries, chars, stored_ids, stored_ends, state)
        if added == -1:
            return np.empty((0, DECLINED_FULL, 0), np.int64)
        if added == -2:  # the room the buffers need
            return np.empty((0, DECLINED_GROW, max(miss_chars.size, new_ids.size)), np.int64)
    if error:
        return np.empty((0, TRUNCATION_ERROR, error), np.int64)
    return cells


def encode_ragged_cells(units, lengths, table_values, table_offsets, classes, model, slot_keys, slot_entry, count,
                        entries, chars, stored_ids, stored_ends, max_length, strategy, stride, item_seq, item_id,
                        item_type, with_types):
    """``encode_texts`` then ``cells_numba.ragged_cells``: (cells, row offsets, packed misses,
    error), the misses empty as ``encode_padded_cells``'. Two kernel calls from Python, not one
    kernel (``cells_numba.ragged_after``)."""
    ids, offsets, _, misses = encode_texts(units, lengths, table_values, table_offsets, classes, model, slot_keys,
                                           slot_entry, count, entries, chars, stored_ids, stored_ends, False)
    if offsets.size == 0:
        return np.empty((0, 0), np.int64), offsets, misses, 0
    cells, row_offsets, error = ragged_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id,
                                             item_type, with_types)
    return cells, row_offsets, misses, error
