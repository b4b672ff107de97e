"""The post-processing tail of the one-call small-batch path of the whole-pipeline kernels.

Contract: given single sequences' encoded ids and their offsets per text (a whole-pipeline
kernel's ``encode_texts`` output), ``padded_cells`` / ``ragged_cells`` return what
``postprocess_numba.padded_rows`` / ``ragged_rows`` write for single sequences without offsets or
overflow, as the one array ``gputok.tokenizer._cell_outputs`` reads: ``padded_cells`` (cells,
error), cells [2 or 3, rows, width] = ids, mask and, ``with_types``, type ids; ``ragged_cells``
(cells, row_offsets, error), cells [1 or 2, tokens] = ids and, ``with_types``, type ids.

Why one array: a numba call costs ~0.15 us per argument and ~1 us per array it returns, so a
batch-1 call feels each. For the same reason ``padded_cells``' eleven options travel as one int64
array (:func:`pack_padded`, read back by ``padded_cells_packed``) where a kernel takes them so
(``bpe_texts_numba.encode_padded_cells``): ~0.6 us less per call than as arguments. A
pipeline's ``encode_padded_cells`` kernel calls its encode and then this, inside the same
compiled call (``wordpiece_texts_numba``, ``bpe_texts_numba``, ``unigram_texts_numba``,
``sp_bpe_texts_numba``); its ``encode_ragged_cells`` is the two calls from Python
(:func:`ragged_after`).

Untruncated rows are told by the options' types, not their values, so that numba compiles them
apart: ``strategy`` None (not an int), and the packed options one-dimensional (a [1, n] array where
the rows are truncated). numba drops the branch a type rules out before it types the function
(``x is None``, ``a.ndim``), so a pipeline's untruncated ``encode_padded_cells``, which nearly
every call runs, holds no truncation code (the row plan, ``_fill_padded``): ~1.3 s less to compile
cold, and a fifth less of each family's kernel to optimise; the truncating one compiles on the
first truncating call.
"""

import numpy as np

from ._numba import kernel
from .postprocess_numba import _fill_padded, _row_length, _row_lengths, _rows_of, _write_row


@kernel
def padded_cells(ids, offsets, max_length, strategy, stride, item_seq, item_id, item_type, min_width, multiple, left,
                 pad_id, with_types):
    """``padded_rows`` of single sequences (ids, their offsets per text) without offsets or overflow;
    ``strategy`` None: not truncated (a compile of its own, see above)."""
    if strategy is None:
        return _untruncated_cells(ids, offsets, item_seq, item_id, item_type, min_width, multiple, left, pad_id,
                                  with_types), 0
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


# ``pack_padded``'s scalars, in order, then the template's items count and its three arrays.
(MAX_LENGTH, STRATEGY, STRIDE, MIN_WIDTH, MULTIPLE, LEFT, PAD_ID, WITH_TYPES, ITEMS) = range(9)


def pack_padded(max_length: int, strategy: int | None, stride: int, item_seq: np.ndarray, item_id: np.ndarray,
                item_type: np.ndarray, min_width: int, multiple: int, left: bool, pad_id: int,
                with_types: bool) -> np.ndarray:
    """``padded_cells``' options (its arguments after ``offsets``, in order) as one int64 array:
    [n] where ``strategy`` is None (not truncated), else [1, n]."""
    scalars = np.array([max_length, -1 if strategy is None else strategy, stride, min_width, multiple, left, pad_id,
                        with_types, item_seq.size], np.int64)
    packed = np.concatenate([scalars, item_seq, item_id, item_type]).astype(np.int64)
    return packed if strategy is None else packed[None]


@kernel
def padded_cells_packed(ids, offsets, options):
    """``padded_cells`` with its options packed by :func:`pack_padded`."""
    if options.ndim == 1:  # a constant of the compile (see above)
        return _padded_cells_unpacked(ids, offsets, options, None)
    return _padded_cells_unpacked(ids, offsets, options[0], options[0, STRATEGY])


@kernel
def _padded_cells_unpacked(ids, offsets, options, strategy):
    n = options[ITEMS]
    at = ITEMS + 1
    return padded_cells(ids, offsets, options[MAX_LENGTH], strategy, options[STRIDE], options[at:at + n],
                        options[at + n:at + 2 * n], options[at + 2 * n:at + 3 * n],
                        options[MIN_WIDTH], options[MULTIPLE], options[LEFT] != 0, options[PAD_ID],
                        options[WITH_TYPES] != 0)


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


RAGGED_OPTIONS = 7  # ragged_cells' arguments after ids and offsets
# The error a pipeline's cells kernel gives for a batch it leaves to the stage path (no truncation
# error is this): gputok.tokenizer._cells_in_one_call then takes the other path.
REFUSED = -(1 << 40)


def ragged_after(encode_texts):
    """A pipeline's ``encode_ragged_cells``: its ``encode_texts`` (units, lengths, its tables,
    with_spans -> ids, offsets, ...) then :func:`ragged_cells` (the last ``RAGGED_OPTIONS``
    arguments): (cells, row_offsets, error). Two kernel calls from Python, where the padded twin
    is one kernel: fused, numba would compile the pipeline's whole tree once more (~2.5 s of each
    family's cold compile) to save a ragged small call ~3 us."""
    def encode_ragged_cells(units, lengths, *tables_then_options):
        got = encode_texts(units, lengths, *tables_then_options[:-RAGGED_OPTIONS], False)
        return ragged_cells(got[0], got[1], *tables_then_options[-RAGGED_OPTIONS:])
    return encode_ragged_cells


@kernel
def _untruncated_cells(ids, offsets, item_seq, item_id, item_type, min_width, multiple, left, pad_id, with_types):
    """``padded_cells`` without truncation: row ``t`` is text ``t`` in the template, so the cells are
    written straight from ``offsets``, without the row plan (``_rows_of``) the truncation needs:
    that plan's dozen small arrays were ~0.7 us of a ~12 us batch-1 call."""
    rows = offsets.size - 1
    specials = 0
    copies = 0  # the template's items of the text (a single template holds A once; a B there is empty)
    for k in range(item_seq.size):
        if item_seq[k] < 0:
            specials += 1
        elif item_seq[k] == 0:
            copies += 1
    width = min_width
    for r in range(rows):
        width = max(width, specials + copies * (offsets[r + 1] - offsets[r]))
    if multiple > 0:
        width = -(-width // multiple) * multiple
    cells = np.empty((3 if with_types else 2, rows, width), np.int64)
    out_ids, mask, types = cells[0], cells[1], cells[2 if with_types else 0]  # (no types: never written)
    for r in range(rows):
        n = specials + copies * (offsets[r + 1] - offsets[r])
        at = width - n if left else 0
        pad_at = 0 if left else n
        for c in range(pad_at, pad_at + width - n):
            out_ids[r, c] = pad_id
            mask[r, c] = 0
            if with_types:
                types[r, c] = 0
        for k in range(item_seq.size):
            if item_seq[k] < 0:
                out_ids[r, at] = item_id[k]
                mask[r, at] = 1
                if with_types:
                    types[r, at] = item_type[k]
                at += 1
                continue
            if item_seq[k] > 0:
                continue
            for i in range(offsets[r], offsets[r + 1]):
                out_ids[r, at] = ids[i]
                mask[r, at] = 1
                if with_types:
                    types[r, at] = item_type[k]
                at += 1
    return cells
