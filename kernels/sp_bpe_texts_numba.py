"""A whole SentencePiece BPE encode on the CPU in one kernel call: texts in, token ids (and spans) out.

Contract: ``encode_texts`` (and ``encode_texts_charsmap``, for a model with a precompiled
charsmap) returns what ``gputok.tokenizer.Tokenizer._encode_codepoints`` returns, stage by stage,
for a SentencePiece BPE pipeline (``gputok.models.bpe_sentencepiece.sentencepiece_tokenizer``:
``SentencePieceNormalizer``, the ``MergeSafeSplit`` word split, a character-level ``BPE``):
int64 token ids, their int64 offsets per text and, with ``with_spans``, int64 [tokens, 2]
character spans. The reference is that stage path (``tests/test_sp_bpe_texts.py`` compares the
two on real text and random Unicode, spans and batch 1 included).

How: the stage kernels called in order inside one compiled function, so a batch pays one kernel
call instead of a call and its Python glue per stage:
``ingest_numba.codepoints_numba`` -> (``charsmap_numba.charsmap_rewrite_numba``) ->
``sentencepiece_whitespace.whitespace_rules_numba`` (dummy prefix, spaces as ``▁``) ->
``word_split_numba.split_before_runs`` (or each text one word) -> the distinct words of the call
(``word_cache_numba.lookup_dedup`` over an empty table: hash, then an exact compare) ->
``bpe_symbols_numba._symbols`` (characters to ids, byte fallback, unk) ->
``bpe_heap._merge_rows`` (sentencepiece's heap of adjacent pairs, one merge at a time, leftmost
first among equal scores) -> ``scatter_numba.scatter_tokens``. Words repeat within a batch (a
1,024-line batch of English holds ~3x fewer distinct words than words), so each distinct word is
merged once. There is no cache across calls. Re-entrant and nogil: the caller runs chunks of a
large batch on its threads at once.
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import _merge_rows
from .bpe_symbols_numba import _symbols
from .charsmap_numba import charsmap_rewrite_numba
from .ingest_numba import codepoints_numba
from .scatter_numba import scatter_tokens
from .sentencepiece_whitespace import whitespace_rules_numba
from .word_cache_numba import lookup_dedup
from .word_split_numba import split_before_runs, whole_texts

# lookup_dedup's empty word table (no cache across calls): keys, entries, and their characters.
_NO_SLOTS = np.full(16, -1, np.int64)
_NO_ENTRIES = np.zeros((1, 4), np.int64)
_NO_KEYS = np.zeros(0, np.int64)


@kernel
def _encode_normalized(values, offsets, rewritten, rewritten_offsets, unit, add_dummy_prefix,
                       remove_extra_whitespaces, escape_whitespaces, mark, byte_to_id, char_keys, char_values,
                       char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk,
                       unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys, slot_values, hash_mask,
                       hash_shift, max_probes, vocab_size, level_start, with_spans):
    """The stages after the charsmap: ``rewritten`` (int32 codepoints, rows by ``rewritten_offsets``)
    and each one's ``unit`` (its source in ``values``, the texts' codepoints). Returns ``(ids,
    offsets, spans)``; ``offsets`` is empty when an unknown character needs an unk token the
    vocabulary lacks."""
    norm, norm_offsets, source = whitespace_rules_numba(rewritten, rewritten_offsets, unit, add_dummy_prefix,
                                                        remove_extra_whitespaces, escape_whitespaces)
    if mark >= 0:
        starts, ends, word_offsets = split_before_runs(norm, norm_offsets, mark)
    else:
        starts, ends, word_offsets = whole_texts(norm_offsets)
    lengths = ends - starts
    chars = np.empty(norm.size, norm.dtype)
    _, inverse, _, _, char_offsets = lookup_dedup(norm, starts, lengths, _NO_KEYS, _NO_SLOTS, _NO_SLOTS, 60, 15, 0,
                                                  _NO_ENTRIES, norm[:0], chars)
    words = char_offsets.size - 1
    per_char = 4 * (prefix.size + 1 + suffix.size) if byte_fallback else 1
    bound = char_offsets[words] * per_char
    symbols = np.empty(bound, np.int64)
    symbol_source = np.empty(bound, np.int64)
    symbol_offsets = np.zeros(words + 1, np.int64)
    total = _symbols(chars, char_offsets, False, byte_to_id, char_keys, char_values, char_mask, char_shift,
                     char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk, whole_slots,
                     token_keys, token_offsets, symbols, symbol_source, symbol_offsets[1:])
    if total < 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
    for w in range(words):
        symbol_offsets[w + 1] += symbol_offsets[w]
    last = np.empty(total if with_spans else 0, np.int64)  # per merged token: 1 + its last symbol's index
    merged_lengths = np.empty(words, np.int64)
    _merge_rows(symbols, symbol_offsets, symbols, merged_lengths, last, slot_keys, slot_values, hash_mask, hash_shift,
                max_probes, vocab_size, level_start)
    piece_offsets = np.zeros(words + 1, np.int64)
    for w in range(words):
        piece_offsets[w + 1] = piece_offsets[w] + merged_lengths[w]
    tokens = piece_offsets[words]
    piece_ends = np.empty(tokens if with_spans else 0, np.int64)
    for k in range(piece_ends.size):
        piece_ends[k] = symbol_source[last[k] - 1] + 1  # the character holding its last symbol, + 1
    return scatter_tokens(symbols[:tokens], piece_ends, piece_offsets, inverse, starts, word_offsets, source,
                          offsets, with_spans)


@kernel
def encode_texts(units, lengths, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, mark, byte_to_id,
                 char_keys, char_values, char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix,
                 suffix, has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys, slot_values,
                 hash_mask, hash_shift, max_probes, vocab_size, level_start, with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths; the model
    has no charsmap (the identity rule). ``mark``: the word split's character, -1 for none."""
    values, offsets = codepoints_numba(units, lengths)
    unit = np.arange(values.size)
    return _encode_normalized(values, offsets, values, offsets, unit, add_dummy_prefix, remove_extra_whitespaces,
                              escape_whitespaces, mark, byte_to_id, char_keys, char_values, char_mask, char_shift,
                              char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk,
                              whole_slots, token_keys, token_offsets, slot_keys, slot_values, hash_mask, hash_shift,
                              max_probes, vocab_size, level_start, with_spans)


@kernel
def encode_texts_charsmap(units, lengths, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
                          rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces,
                          escape_whitespaces, mark, byte_to_id, char_keys, char_values, char_mask, char_shift,
                          char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk,
                          whole_slots, token_keys, token_offsets, slot_keys, slot_values, hash_mask, hash_shift,
                          max_probes, vocab_size, level_start, with_spans):
    """:func:`encode_texts` with the precompiled charsmap's arrays
    (``gputok.charsmap.Precompiled._numpy_rules_build``) first."""
    values, offsets = codepoints_numba(units, lengths)
    rewritten, rewritten_offsets, unit = charsmap_rewrite_numba(values, offsets, direct, table_values, table_offsets,
                                                                hashes, order, key_values, key_offsets, rule_values,
                                                                rule_offsets, max_long)
    return _encode_normalized(values, offsets, rewritten, rewritten_offsets, unit, add_dummy_prefix,
                              remove_extra_whitespaces, escape_whitespaces, mark, byte_to_id, char_keys, char_values,
                              char_mask, char_shift, char_probes, byte_fallback, fallback_ids, prefix, suffix,
                              has_unk, unk_id, fuse_unk, whole_slots, token_keys, token_offsets, slot_keys,
                              slot_values, hash_mask, hash_shift, max_probes, vocab_size, level_start, with_spans)
