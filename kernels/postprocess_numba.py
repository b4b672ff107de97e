"""Post-processing of a batch in one pass: template specials, rows, padding, masks, type ids, offsets.

Contract (the reference is the torch path of ``gputok.tokenizer.Tokenizer.__call__``:
:func:`gputok.processors.assemble`, :func:`~gputok.processors.filled_cells` and
:func:`~gputok.processors.pad`): row ``r`` (of :class:`gputok.processors.Rows`: ``sample``,
``a_start``/``a_len`` and ``b_start``/``b_len``) is the template's items in order: a special
token (``item_seq < 0``: ``item_id``, ``item_type``, offsets (0, 0)), or the row's window of
sequence A (``item_seq == 0``: ``a_len[r]`` tokens of text ``sample[r]`` from ``a_start[r]``)
or B, each token with the item's type id and its character span. ``padded``: [rows, width]
int64 arrays (width: the longest row, at least ``min_width``, rounded up to ``multiple``; pad
cells hold ``pad_id``, 0 mask, 0 type, (0, 0) offsets; ``left`` puts the padding first).
``ragged``: the rows flat, with their offsets.

How: a pass over the rows for their lengths, then each row written straight into its place in
the output arrays; sequential, re-entrant.
"""

import numpy as np

from ._numba import kernel


@kernel
def _row_length(r, item_seq, a_len, b_len):
    n = 0
    for k in range(item_seq.size):
        if item_seq[k] < 0:
            n += 1
        elif item_seq[k] == 0:
            n += a_len[r]
        else:
            n += b_len[r]
    return n


@kernel
def _write_row(r, at, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets,
               b_ids, b_offsets, a_spans, b_spans, ids, types, offsets, with_types, with_offsets):
    """Row ``r``'s tokens into the flat ``ids`` (and ``types``, ``offsets`` [n, 2]) from ``at``."""
    for k in range(item_seq.size):
        seq = item_seq[k]
        if seq < 0:
            ids[at] = item_id[k]
            if with_types:
                types[at] = item_type[k]
            if with_offsets:
                offsets[at, 0] = 0
                offsets[at, 1] = 0
            at += 1
            continue
        if seq == 0:
            src, size = a_offsets[sample[r]] + a_start[r], a_len[r]
            values, spans = a_ids, a_spans
        else:
            src, size = b_offsets[sample[r]] + b_start[r], b_len[r]
            values, spans = b_ids, b_spans
        for i in range(size):
            ids[at + i] = values[src + i]
            if with_types:
                types[at + i] = item_type[k]
            if with_offsets:
                offsets[at + i, 0] = spans[src + i, 0]
                offsets[at + i, 1] = spans[src + i, 1]
        at += size
    return at


@kernel
def padded(item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets, b_ids,
           b_offsets, a_spans, b_spans, min_width, multiple, left, pad_id, with_types, with_offsets):
    rows = sample.size
    lengths = np.empty(rows, np.int64)
    width = 0
    for r in range(rows):
        lengths[r] = _row_length(r, item_seq, a_len, b_len)
        width = max(width, lengths[r])
    width = max(width, min_width)
    if multiple > 0:
        width = -(-width // multiple) * multiple
    ids = np.full((rows, width), pad_id, np.int64)
    mask = np.zeros((rows, width), np.int64)
    types = np.zeros((rows if with_types else 0, width), np.int64)
    offsets = np.zeros((rows if with_offsets else 0, width, 2), np.int64)
    flat_ids = ids.reshape(-1)
    flat_types = types.reshape(-1)
    flat_offsets = offsets.reshape(-1, 2)
    for r in range(rows):
        at = r * width + (width - lengths[r] if left else 0)
        for c in range(lengths[r]):
            mask[r, at - r * width + c] = 1
        _write_row(r, at, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets,
                   b_ids, b_offsets, a_spans, b_spans, flat_ids, flat_types, flat_offsets, with_types, with_offsets)
    return ids, mask, types, offsets


@kernel
def ragged(item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets, b_ids,
           b_offsets, a_spans, b_spans, with_types, with_offsets):
    rows = sample.size
    row_offsets = np.empty(rows + 1, np.int64)
    row_offsets[0] = 0
    for r in range(rows):
        row_offsets[r + 1] = row_offsets[r] + _row_length(r, item_seq, a_len, b_len)
    total = row_offsets[rows]
    ids = np.empty(total, np.int64)
    types = np.zeros(total if with_types else 0, np.int64)
    offsets = np.zeros((total if with_offsets else 0, 2), np.int64)
    for r in range(rows):
        _write_row(r, row_offsets[r], item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids,
                   a_offsets, b_ids, b_offsets, a_spans, b_spans, ids, types, offsets, with_types, with_offsets)
    return ids, row_offsets, types, offsets
