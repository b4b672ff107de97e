"""A whole huggingface Unigram tokenizer.json encode on the CPU in one kernel call: texts in, token ids
(and spans) out.

Contract: ``encode_texts`` returns what ``gputok.tokenizer.Tokenizer._encode_codepoints`` returns,
stage by stage, for a pipeline of a huggingface ``Unigram`` (not SentencePiece mode, not
sampling) after a ``Metaspace`` pre-tokenizer and a normalizer made of an optional ``Precompiled``
charsmap, then ``Strip``, ``Prepend`` and ``Replace`` steps the CPU kernels take (a character, a
string, runs of one character class): transformers' conversion of T5, XLM-R, ALBERT and the other
SentencePiece Unigram models, and the file ``Tokenizer.save`` writes for a Unigram ``.model``. int64
token ids, their int64 offsets per text and, with ``with_spans``, int64 [tokens, 2] character spans,
whether a character needed an unk piece the model lacks (the caller raises), and whether the batch
was *refused*: a text in it may read the charsmap otherwise by huggingface's grapheme clusters
(``gputok.huggingface_precompiled``, whose ``differing`` this checks as it does), which only the
stage path rewrites; the caller then runs the stages. The reference is the stage path
(``tests/test_hf_unigram_texts.py`` compares the two on real text and random Unicode).

How: the stage kernels called in order inside one compiled function (``ingest_numba`` ->
``charsmap_numba.rewrite_walk`` -> the normalizer steps of ``normalize_numba``, each a row of
``steps`` -> ``word_split_numba``'s Metaspace rewrite and split -> ``word_cache_numba.lookup_dedup``
(each word looked up in the word cache's snapshot, the misses deduplicated) ->
``unigram_words_numba``'s float64 Viterbi per distinct miss -> ``unigram_finish_numba`` ->
``word_cache_numba.assemble`` -> ``scatter_numba.scatter_tokens``), the characters' sources
composed step by step. A word's tokens depend on the word alone, so a cached word's are exact.
Re-entrant: the cache is only read here (a snapshot), the caller inserts the misses under its lock;
the caller runs chunks of a large batch on its threads.

``steps``: one int64 row per normalizer step after the charsmap, ``(kind, a, b, c, d)``:
``STRIP`` (left, right), ``PREPEND`` (text), ``CHAR`` (char, text), ``STRING`` (literal text,
text), ``RUNS`` (member table, shortest, longest, at ends) with its content text in column 5; a
"text" is a row of ``texts`` (int32 values, int64 offsets), a member table a row of ``members``
(uint8 values, int64 offsets).

``encode_padded_cells``: ``encode_texts`` then ``cells_numba``'s post-processing in the same call;
a refused batch returns the error ``cells_numba.REFUSED`` (``gputok.tokenizer._cells_in_one_call``
then takes the other path); ``gputok._whole_hf_unigram.encode_ragged_cells`` is its ragged twin.
"""

import numpy as np

from ._numba import kernel
from .cells_numba import REFUSED, padded_cells
from .charsmap_numba import rewrite_walk
from .ingest_numba import codepoints_numba
from .normalize_numba import (prepend_numba, replace_char_numba, replace_spans_numba, run_matches_numba,
                              string_matches_numba, strip_numba)
from .scatter_numba import scatter_tokens
from .unigram_finish_numba import unigram_finish_numba
from .unigram_words_numba import unigram_words_numba
from .word_cache_numba import _bit_length, assemble, lookup_dedup, pack_misses
from .word_split_numba import gather_words, prepend_unless_first, split_at_marks, split_by_class

STRIP, PREPEND, CHAR, STRING, RUNS = range(5)
# gputok.huggingface_precompiled's table bits
KEYED, JOINING, ALONE, REMOVED, EXPANDS = 1, 2, 4, 8, 16
_NO_INDEX = np.zeros(0, np.int64)


@kernel
def _flag(flags, c):
    return flags[c] if 0 <= c < flags.size else 0


@kernel
def huggingface_may_differ(values, offsets, flags, crlf_keyed):
    """Whether ``HuggingfacePrecompiled.differing`` finds a text of these ragged codepoints (the
    same rules, per text; ``flags`` its table, ``crlf_keyed``: a rule's key holds CR or LF)."""
    for t in range(offsets.size - 1):
        lo, hi = offsets[t], offsets[t + 1]
        for i in range(lo, hi):
            here = _flag(flags, values[i])
            if crlf_keyed and values[i] == 13 and i + 1 < hi and values[i + 1] == 10:
                return True
            if here & (JOINING | ALONE | REMOVED):
                before = _flag(flags, values[i - 1]) if i > lo else 0
                after = _flag(flags, values[i + 1]) if i + 1 < hi else 0
                if here & ALONE or (here & JOINING and (here | before | after) & KEYED):
                    return True
                if here & REMOVED and (i == lo or before & (EXPANDS | REMOVED)):
                    return True
    return False


@kernel
def normalize_steps(values, offsets, steps, texts, text_offsets, members, member_offsets, white):
    """The normalizer steps of ``steps`` in order: ``(values, offsets, source)``, each output
    character's index in the input."""
    source = np.arange(values.size)
    for k in range(steps.shape[0]):
        kind = steps[k, 0]
        text = texts[text_offsets[steps[k, 5]]:text_offsets[steps[k, 5] + 1]]
        if kind == STRIP:
            out, out_offsets, moved = strip_numba(values, offsets, white, steps[k, 1] != 0, steps[k, 2] != 0)
        elif kind == PREPEND:
            out, out_offsets, moved = prepend_numba(values, offsets, text)
        elif kind == CHAR:
            out, out_offsets, moved = replace_char_numba(values, offsets, steps[k, 1], text)
        else:
            if kind == STRING:
                literal = texts[text_offsets[steps[k, 1]]:text_offsets[steps[k, 1] + 1]]
                match_offsets, match_start, match_end = string_matches_numba(values, offsets, literal)
            else:
                member = members[member_offsets[steps[k, 1]]:member_offsets[steps[k, 1] + 1]]
                match_offsets, match_start, match_end = run_matches_numba(values, offsets, member, steps[k, 2],
                                                                          steps[k, 3], steps[k, 4] != 0)
            out, out_offsets, moved = replace_spans_numba(values, offsets, match_offsets, match_start, match_end, text)
        values, offsets, source = out, out_offsets, source[moved]
    return values, offsets, source


@kernel
def encode_texts(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
                 rule_values, rule_offsets, max_long, flags, crlf_keyed, ascii_may_differ, steps, texts, text_offsets,
                 members, member_offsets, white, replacement, prepend, split, whitespace_first, classes, code_of, trie,
                 dense, rare_offsets, rare_codes, rare_rows, piece_score, unk_score, unk_id, byte_ids, byte_fallback,
                 slot_keys, slot_entry, count, entries, chars, stored_ids, stored_ends, with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths (or
    ``ingest_numba.JOINED_LENGTHS``). ``charsmap``: whether there is a ``Precompiled`` step (its
    rules: ``charsmap_numba``'s arrays; ``flags``, ``crlf_keyed``, ``ascii_may_differ``: its
    huggingface reading's); ``steps`` .. ``white``: the normalizer steps after it (see the module
    notes); ``replacement``, ``prepend``, ``split``: the Metaspace (``prepend``: its scheme is not
    "never"), with ``whitespace_first`` after a WhitespaceSplit (``classes``: its per-codepoint
    table), rewriting each word as huggingface rewrites each split; the model arguments
    ``unigram_words_numba``'s and ``unigram_finish_numba``'s; then the word cache's snapshot
    (``word_cache_numba.lookup_dedup``'s arrays): each distinct word it lacks is segmented once.
    Returns ``(ids, token_offsets, spans, misses, missing, refused)``, ``misses`` the distinct words
    segmented here (``word_cache_numba.pack_misses``), for the caller to insert."""
    values, offsets = codepoints_numba(units, lengths)
    refused = False
    if charsmap:
        ascii_only = True
        for i in range(values.size):
            ascii_only &= values[i] < 0x80
        if not ascii_only or ascii_may_differ:  # (Precompiled.__call__'s shortcut)
            refused = huggingface_may_differ(values, offsets, flags, crlf_keyed)
    if refused:  # (new arrays: a global one would type every return read-only)
        return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, 2), np.int64), np.zeros(3, np.int64),
                False, True)
    norm, norm_offsets, unit = rewrite_walk(values, offsets, charsmap, direct, table_values, table_offsets, hashes,
                                            order, key_values, key_offsets, rule_values, rule_offsets, max_long,
                                            _NO_INDEX, _NO_INDEX, _NO_INDEX)
    norm, norm_offsets, moved = normalize_steps(norm, norm_offsets, steps, texts, text_offsets, members,
                                                member_offsets, white)
    source = unit[moved]
    if whitespace_first:  # the words of a WhitespaceSplit, each rewritten and split by the Metaspace
        spaced_starts, spaced_ends, spaced_offsets = split_by_class(norm, norm_offsets, classes)
        gathered, rows = gather_words(norm, spaced_starts, spaced_ends)
        position = np.empty(gathered.size, np.int64)  # a gathered character's place in norm
        for w in range(spaced_starts.size):
            for k in range(rows[w + 1] - rows[w]):
                position[rows[w] + k] = spaced_starts[w] + k
        norm, rows, moved = prepend_unless_first(gathered, rows, 32, replacement, replacement, prepend)
        source = source[position[moved]]
        starts, ends, row_words = split_at_marks(norm, rows, replacement, split)
        word_offsets = row_words[spaced_offsets]
    else:
        norm, norm_offsets, moved = prepend_unless_first(norm, norm_offsets, 32, replacement, replacement, prepend)
        source = source[moved]
        starts, ends, word_offsets = split_at_marks(norm, norm_offsets, replacement, split)
    out_chars = np.empty(norm.size, norm.dtype)
    mask = slot_keys.size - 1
    no_keys = np.empty(0, np.int64)  # (a local: lookup_dedup writes the keys it makes where this is empty)
    entry, uniq, _, miss_keys, miss_offsets = lookup_dedup(norm, starts, ends - starts, no_keys, slot_keys,
                                                           slot_entry, 64 - _bit_length(mask), mask, count, entries,
                                                           chars, out_chars)
    miss_chars = out_chars[:miss_offsets[-1]]
    miss_starts = miss_offsets[:-1]
    new_ids, new_ends, new_offsets, _, missing = unigram_words_numba(miss_chars, miss_starts, np.diff(miss_offsets),
                                                                     code_of, trie, dense, rare_offsets, rare_codes,
                                                                     rare_rows, piece_score, unk_score, unk_id)
    new_ids, new_ends, new_offsets = unigram_finish_numba(new_ids, new_ends, new_offsets, miss_chars, miss_starts,
                                                          unk_id, byte_ids, byte_fallback)
    piece_ids, piece_ends, piece_offsets = assemble(entry, uniq, entries, stored_ids, stored_ends, new_ids, new_ends,
                                                    new_offsets, with_spans)
    out_ids, out_offsets, spans = scatter_tokens(piece_ids, piece_ends, piece_offsets, _NO_INDEX, starts, word_offsets,
                                                 source, offsets, with_spans, True)
    misses = pack_misses(miss_keys, miss_offsets, miss_chars, new_offsets, new_ids, new_ends)
    return out_ids, out_offsets, spans, misses, missing, False


@kernel
def encode_padded_cells(units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                        key_offsets, rule_values, rule_offsets, max_long, flags, crlf_keyed, ascii_may_differ, steps,
                        texts, text_offsets, members, member_offsets, white, replacement, prepend, split,
                        whitespace_first, classes, code_of, trie, dense, rare_offsets, rare_codes, rare_rows,
                        piece_score, unk_score, unk_id, byte_ids,
                        byte_fallback, slot_keys, slot_entry, count, entries, chars, stored_ids, stored_ends,
                        max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple, left, pad_id,
                        with_types):
    """``encode_texts`` then ``cells_numba.padded_cells``: (cells, misses, error), error
    ``REFUSED`` for a refused batch."""
    ids, offsets, _, misses, _, refused = encode_texts(
        units, lengths, charsmap, direct, table_values, table_offsets, hashes, order, key_values, key_offsets,
        rule_values, rule_offsets, max_long, flags, crlf_keyed, ascii_may_differ, steps, texts, text_offsets, members,
        member_offsets, white, replacement, prepend, split, whitespace_first, classes, code_of, trie, dense,
        rare_offsets, rare_codes, rare_rows, piece_score, unk_score, unk_id, byte_ids, byte_fallback, slot_keys,
        slot_entry, count, entries, chars, stored_ids, stored_ends, False)
    if refused:
        return np.empty((3 if with_types else 2, 0, 0), np.int64), misses, REFUSED
    cells, error = padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width,
                                multiple, left, pad_id, with_types)
    return cells, misses, error
