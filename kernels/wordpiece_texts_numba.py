"""A whole WordPiece encode on the CPU in one kernel call: texts in, token ids (and spans) out.

Contract: ``encode_texts`` returns what ``gputok.tokenizer.Tokenizer._encode_codepoints`` returns for a
BERT-style pipeline (a table normalizer such as BertNormalizer or Lowercase, or none; the
BertPreTokenizer split; WordPiece): int64 token ids, their int64 offsets per text and, with
``with_spans``, int64 [tokens, 2] character spans. The reference is that method run stage by stage
(``tests/test_models_numba.py`` compares the two on real text and random Unicode).

How: the stage kernels called in order inside one compiled function, so a batch pays one kernel
call instead of a call and its Python glue per stage (at batch 1 the glue was most of the time):
``ingest_numba.codepoints_numba`` -> ``normalize_numba.rewrite_table_numba`` ->
``word_split_numba.split_by_class`` -> ``wordpiece_match_numba._encode`` (the words read in place
in the normalized text, not gathered: that copy was 9% of the call) ->
``scatter_numba.scatter_tokens``. There is no word cache: a WordPiece longest match walks each
word's characters once through the trie's dense ASCII table, about what a cache probe costs (hash,
compare, copy; a table of the short whole-word tokens, one probe a word, measured no faster than
the walk, whose first trie levels stay in cache). Re-entrant; the caller runs chunks of a large
batch on its threads.

``encode_padded_cells``: ``encode_texts`` then what ``postprocess_numba.padded_rows`` writes
(``cells_numba``), in the same call, so a small padded batch (one chunk) pays one kernel call from
text to output arrays (``encode_ragged_cells``: the same as two calls,
``cells_numba.ragged_after``). The outputs come back as one array (ids, mask, types stacked): a
numba call costs ~0.15 us per argument and ~1 us per array it returns, and the two calls with the
torch wrapping between them were half of a batch-1 call.
"""

import numpy as np

from ._numba import kernel
from .cells_numba import padded_cells, ragged_after
from .ingest_numba import codepoints_numba
from .normalize_numba import rewrite_table_numba
from .scatter_numba import scatter_tokens
from .word_split_numba import split_by_class
from .wordpiece_match_numba import _encode

_NO_INDEX = np.zeros(0, np.int64)


@kernel
def encode_texts(units, lengths, table_values, table_offsets, classes, slot_keys, slot_values, hash_mask,
                 hash_shift, max_probes, token_of_node, ascii_row, ascii_children, max_chars, unk_id, partial_unk,
                 with_spans):
    """``units``: the texts' UTF-32 code units back to back, ``lengths`` their lengths; an empty
    ``table_offsets`` means no normalizer."""
    values, offsets = codepoints_numba(units, lengths)
    if table_offsets.size:
        text, text_offsets, source = rewrite_table_numba(values, offsets, table_values, table_offsets)
    else:
        text, text_offsets, source = values, offsets, np.zeros(0, np.int64)
    starts, ends, word_offsets = split_by_class(text, text_offsets, classes)
    words = starts.size
    bound = text.size + words  # a piece per character, or one unk per word
    piece_ids = np.empty(bound, np.int32)
    piece_ends = np.empty(bound, np.int32)
    piece_offsets = np.zeros(words + 1, np.int64)
    _encode(text, starts, ends, slot_keys, slot_values, hash_mask, hash_shift, max_probes,
            token_of_node, ascii_row, ascii_children, max_chars, unk_id, partial_unk, piece_ids, piece_ends,
            piece_offsets[1:])
    for w in range(words):
        piece_offsets[w + 1] += piece_offsets[w]
    return scatter_tokens(piece_ids, piece_ends, piece_offsets, _NO_INDEX, starts, word_offsets, source,
                          offsets, with_spans, False)



@kernel
def encode_padded_cells(units, lengths, table_values, table_offsets, classes, slot_keys, slot_values, hash_mask,
                        hash_shift, max_probes, token_of_node, ascii_row, ascii_children, max_chars, unk_id,
                        partial_unk, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple,
                        left, pad_id, with_types):
    """``encode_texts`` then ``padded_rows`` of single sequences without offsets or overflow:
    (cells, error), ``cells`` [2 or 3, rows, width]: ids, mask and, ``with_types``, type ids."""
    ids, offsets, _ = encode_texts(units, lengths, table_values, table_offsets, classes, slot_keys, slot_values,
                                   hash_mask, hash_shift, max_probes, token_of_node, ascii_row, ascii_children,
                                   max_chars, unk_id, partial_unk, False)
    return padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width,
                        multiple, left, pad_id, with_types)


encode_ragged_cells = ragged_after(encode_texts)
