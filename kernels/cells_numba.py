"""The post-processing tail of the one-call small-batch path of the whole-pipeline kernels.

Contract: given single sequences' encoded ids and their offsets per text (a whole-pipeline
kernel's ``encode_texts`` output), ``padded_cells`` / ``ragged_cells`` return what
``postprocess_numba.padded_rows`` / ``ragged_rows`` write for single sequences without offsets or
overflow, as the one array ``gputok.tokenizer._cell_outputs`` reads: ``padded_cells`` (cells,
error), cells [2 or 3, rows, width] = ids, mask and, ``with_types``, type ids; ``ragged_cells``
(cells, row_offsets, error), cells [1 or 2, tokens] = ids and, ``with_types``, type ids.

Why one array: a numba call costs ~0.15 us per argument and ~1 us per array it returns, so a
batch-1 call feels each. A pipeline's ``encode_padded_cells`` kernel calls its encode and then
this, inside the same compiled call (``wordpiece_texts_numba``, ``bpe_texts_numba``,
``unigram_texts_numba``, ``sp_bpe_texts_numba``).
"""

import numpy as np

from ._numba import kernel
from .postprocess_numba import _fill_padded, _row_length, _row_lengths, _rows_of, _write_row


@kernel
def padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple, left,
                 pad_id, with_types):
    """``padded_rows`` of single sequences (ids, their offsets per text) without offsets or overflow."""
    none = np.zeros(0, np.int64)
    spans = np.zeros((0, 2), np.int64)
    sample, a_start, a_len, b_start, b_len, error = _rows_of(offsets, none, max_length, strategy, stride, False)
    row_lengths, width = _row_lengths(item_seq, a_len, b_len, min_width, multiple)
    rows = sample.size
    cells = np.empty((3 if with_types else 2, rows, width), np.int64)
    types = cells[2] if with_types else np.empty((0, width), np.int64)
    _fill_padded(0, rows, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                 ids, offsets, ids, offsets, spans, spans, row_lengths, cells[0], cells[1], types,
                 np.empty((0, width, 2), np.int64), with_types, False)
    return cells, error


@kernel
def ragged_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, with_types):
    """``ragged_rows`` of single sequences (ids, their offsets per text) without offsets or overflow."""
    none = np.zeros(0, np.int64)
    spans = np.zeros((0, 2), np.int64)
    sample, a_start, a_len, b_start, b_len, error = _rows_of(offsets, none, max_length, strategy, stride, False)
    rows = sample.size
    row_offsets = np.empty(rows + 1, np.int64)
    row_offsets[0] = 0
    for r in range(rows):
        row_offsets[r + 1] = row_offsets[r] + _row_length(r, item_seq, a_len, b_len)
    cells = np.empty((2 if with_types else 1, row_offsets[rows]), np.int64)
    types = cells[1] if with_types else np.empty(0, np.int64)
    for r in range(rows):
        _write_row(r, row_offsets[r], item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, ids,
                   offsets, ids, offsets, spans, spans, cells[0], types, spans, with_types, False)
    return cells, row_offsets, error
