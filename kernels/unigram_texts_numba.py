"""A whole SentencePiece Unigram encode on the CPU in one kernel call: texts in, token ids (and spans) out.

Contract: ``encode_texts`` returns what ``gputok.tokenizer.Tokenizer._encode_codepoints`` returns for
a SentencePiece Unigram pipeline (``SentencePieceNormalizer``, optionally inside ``DummySuffix``;
``MetaspaceSplit``; a ``Unigram`` in SentencePiece mode, not sampling): int64 token ids, their int64
offsets per text and, with ``with_spans``, int64 [tokens, 2] character spans, plus whether a
character needed an unk piece the model lacks (the caller raises). The reference is that method run
stage by stage (``tests/test_unigram_texts_numba.py`` compares the two on real text and random
Unicode).

How: the stage kernels called in order inside one compiled function, so a batch pays one kernel
call instead of a call and its Python glue per stage: ``ingest_numba.codepoints_numba`` ->
``sp_normalize_numba.normalize_split`` (the charsmap, the whitespace rules, a dummy suffix and the
Metaspace split; one pass per text for most text) -> ``unigram_cache_numba.segment_cached`` (SentencePiece's
float32 Viterbi over each whole text, its tokens cut at the words, or cached word tokens where
they are provably the same: exact, see that module) -> ``unigram_finish_numba`` -> ``scatter_numba.scatter_tokens`` (for spans only: without them the words'
tokens, one row per word in text order, are already the texts' tokens, and only their offsets change).
Re-entrant; the caller runs chunks of a large batch on its threads.

``encode_padded_cells``: ``encode_texts`` then ``cells_numba``'s post-processing in the same call,
so a small padded batch (one chunk) pays one kernel call from text to output arrays
(``encode_ragged_cells``: the same as two calls, ``cells_numba.ragged_after``); for a model with an
unk piece (the caller checks: no character is then missing).
"""

import numpy as np

from ._numba import kernel
from .cells_numba import padded_cells, ragged_after
from .ingest_numba import codepoints_numba
from .scatter_numba import scatter_tokens
from .sp_normalize_numba import normalize_split
from .unigram_cache_numba import segment_cached
from .unigram_finish_numba import unigram_finish_numba

_NO_INDEX = np.zeros(0, np.int64)


@kernel
def encode_texts(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
                 rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces,
                 suffix_code, mark, split, sentences_are_texts, code_of, trie, dense, rare_offsets, rare_codes,
                 rare_rows, piece_score, unk_score, unk_id, reset_threshold, byte_ids, byte_fallback, score64, max_abs,
                 whole_chars, max_cached, full_misses, slot_ints, store, used, with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths. ``charsmap``:
    whether there is a charsmap (its rules: ``charsmap_rewrite_numba``'s arrays); ``suffix_code``:
    the dummy suffix's codepoint (-1: none); ``mark``/``split``: the Metaspace split;
    ``sentences_are_texts``: SentencePiece's Viterbi runs over whole texts (else over each word).
    The trie, scores and unk arguments are ``unigram_sentences_encode``'s, ``byte_ids`` and
    ``byte_fallback`` ``unigram_finish_numba``'s, the rest ``unigram_cache_numba.segment_cached``'s
    (``whole_chars`` -1: no word cache, every text through SentencePiece's Viterbi). Returns
    ``(ids, token_offsets, spans, missing)``."""
    values, offsets = codepoints_numba(units, lengths)
    text, text_offsets, source, starts, ends, word_offsets = normalize_split(
        values, offsets, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
        rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces,
        suffix_code, mark, split, False, with_spans)
    sentences = word_offsets if sentences_are_texts else np.arange(starts.size + 1)
    ids, piece_ends, token_offsets = segment_cached(text, starts, ends, sentences, code_of, trie, dense, rare_offsets,
                                                    rare_codes, rare_rows, piece_score, score64, unk_score, unk_id,
                                                    reset_threshold, max_abs, whole_chars, max_cached, full_misses,
                                                    slot_ints, store, used)
    missing = False
    if unk_id < 0:
        for t in range(ids.size):
            missing |= ids[t] < 0
    ids, piece_ends, token_offsets = unigram_finish_numba(ids, piece_ends, token_offsets, text, starts, unk_id,
                                                          byte_ids, byte_fallback)
    if not with_spans:  # the words' tokens are already in text order: only the offsets change
        out_offsets = np.empty(word_offsets.size, np.int64)
        for t in range(word_offsets.size):
            out_offsets[t] = token_offsets[word_offsets[t]]
        return ids.copy(), out_offsets, np.empty((0, 2), np.int64), missing  # a copy: ``ids`` views room for a token per character
    out_ids, out_offsets, spans = scatter_tokens(ids, piece_ends, token_offsets, _NO_INDEX, starts, word_offsets,
                                                 source, offsets, with_spans, True)
    return out_ids, out_offsets, spans, missing


@kernel
def encode_padded_cells(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                        key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces,
                        escape_whitespaces, suffix_code, mark, split, sentences_are_texts, code_of, trie, dense,
                        rare_offsets, rare_codes, rare_rows, piece_score, unk_score, unk_id, reset_threshold, byte_ids,
                        byte_fallback, score64, max_abs, whole_chars, max_cached, full_misses, slot_ints, store, used,
                        max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple, left, pad_id,
                        with_types):
    """``encode_texts`` then ``cells_numba.padded_cells``: (cells, error)."""
    ids, offsets, _, _ = encode_texts(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order,
                                      key_values, key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix,
                                      remove_extra_whitespaces, escape_whitespaces, suffix_code, mark, split,
                                      sentences_are_texts, code_of, trie, dense, rare_offsets, rare_codes, rare_rows,
                                      piece_score, unk_score, unk_id, reset_threshold, byte_ids, byte_fallback, score64,
                                      max_abs, whole_chars, max_cached, full_misses, slot_ints, store, used, False)
    return padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple,
                        left, pad_id, with_types)


encode_ragged_cells = ragged_after(encode_texts)
