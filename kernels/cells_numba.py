"""The post-processing of a whole-pipeline kernel's small batch, inside the same kernel call.

Contract: a family's one-call kernel (``encode_padded_cells`` / ``encode_ragged_cells`` in
``wordpiece_texts_numba`` and ``bpe_texts_numba``) encodes its texts to (ids, offsets, spans) and
ends with :func:`padded_cells` or :func:`ragged_cells`: what ``postprocess_numba.padded_rows`` /
``ragged_rows`` write for single sequences without offsets or overflow, with the outputs stacked
in one array (``Tokenizer._encode_rows_cpu`` makes the tensors as views of it: a numba call
pays ~1 us for each array it returns, a good part of a batch-1 call).
"""

import numpy as np

from ._numba import kernel
from .postprocess_numba import _fill_padded, _row_length, _row_lengths, _rows_of, _write_row


@kernel
def padded_cells(ids, offsets, spans, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple,
                 left, pad_id, with_types):
    """(cells, error): ``cells`` [2 or 3, rows, width] holds ids, mask and, ``with_types``, type
    ids; ``error`` is ``truncate_rows``'s (the cells then empty)."""
    none = np.zeros(0, np.int64)
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
def ragged_cells(ids, offsets, spans, max_length, strategy, stride, item_seq, item_id, item_type, with_types):
    """(cells, row_offsets, error): ``cells`` [1 or 2, tokens] holds ids and, ``with_types``, type
    ids, a row per text by ``row_offsets``."""
    none = np.zeros(0, np.int64)
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
