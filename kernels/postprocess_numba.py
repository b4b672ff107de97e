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
the output arrays, every cell once (its token or its padding: no fill pass before); sequential,
re-entrant. A large padded batch is split in two calls (``plan_padded``, then ``fill_padded`` over
row ranges on the caller's threads, into arrays the caller allocated), see ``plan_padded``.
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
def _fill_padded(r0, r1, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                 a_ids, a_offsets, b_ids, b_offsets, a_spans, b_spans, lengths, ids, mask, types, offsets, with_types,
                 with_offsets):
    """Rows ``r0`` to ``r1`` of the [rows, width] outputs, each cell written once: the row's
    tokens (mask 1) and its padding (``pad_id``, mask 0, type 0, offsets (0, 0)); ``types`` and
    ``offsets`` only where asked, so the caller may hand in zeros it need not write."""
    flat_ids = ids.reshape(-1)
    flat_mask = mask.reshape(-1)
    flat_types = types.reshape(-1)
    flat_offsets = offsets.reshape(-1, 2)
    for r in range(r0, r1):
        n = lengths[r]
        base = r * width
        at = base + (width - n if left else 0)
        pad_at = base if left else base + n
        for c in range(pad_at, pad_at + width - n):
            flat_ids[c] = pad_id
            flat_mask[c] = 0
            if with_types:
                flat_types[c] = 0
            if with_offsets:
                flat_offsets[c, 0] = 0
                flat_offsets[c, 1] = 0
        for c in range(at, at + n):
            flat_mask[c] = 1
        _write_row(r, at, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets,
                   b_ids, b_offsets, a_spans, b_spans, flat_ids, flat_types, flat_offsets, with_types, with_offsets)


@kernel
def _row_lengths(item_seq, a_len, b_len, min_width, multiple):
    """Each row's length and the padded width (the longest row, at least ``min_width``, rounded
    up to ``multiple``)."""
    rows = a_len.size
    lengths = np.empty(rows, np.int64)
    width = 0
    for r in range(rows):
        lengths[r] = _row_length(r, item_seq, a_len, b_len)
        width = max(width, lengths[r])
    width = max(width, min_width)
    if multiple > 0:
        width = -(-width // multiple) * multiple
    return lengths, width


@kernel
def padded(item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids, a_offsets, b_ids,
           b_offsets, a_spans, b_spans, min_width, multiple, left, pad_id, with_types, with_offsets):
    rows = sample.size
    lengths, width = _row_lengths(item_seq, a_len, b_len, min_width, multiple)
    ids = np.empty((rows, width), np.int64)
    mask = np.empty((rows, width), np.int64)
    types = np.empty((rows if with_types else 0, width), np.int64)
    offsets = np.empty((rows if with_offsets else 0, width, 2), np.int64)
    _fill_padded(0, rows, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                 a_ids, a_offsets, b_ids, b_offsets, a_spans, b_spans, lengths, ids, mask, types, offsets, with_types,
                 with_offsets)
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


@kernel
def _windows(length, keep, stride, overflow):
    """(step, count) of the windows of a sequence of ``length`` tokens, ``keep`` at a time
    (:func:`gputok.processors._windows`); count -1: the stride is not below ``keep``."""
    if not overflow or length <= keep:
        return 1, 1
    if stride >= keep:
        return 1, -1
    step = max(keep - stride, 1)
    return step, (length - keep + step - 1) // step + 1


@kernel
def truncate_rows(a_lengths, b_lengths, max_length, strategy, stride, overflow):
    """:func:`gputok.processors.truncate` in one kernel. ``strategy``: -1 none (no max_length),
    0 longest_first, 1 only_first, 2 only_second; ``b_lengths`` empty: single sequences.
    Returns (sample, a_start, a_len, b_start, b_len, error): error 1 a stride not below the
    tokens left, 2 a pair that cannot fit (the caller raises the reference's errors)."""
    n = a_lengths.size
    count = np.ones(n, np.int64)
    keep = np.empty(n, np.int64)
    error = 0
    for i in range(n):
        a = a_lengths[i]
        if strategy == -1:
            keep[i] = a
            continue
        if b_lengths.size == 0:
            keep[i] = max_length
            step, c = _windows(a, max_length, stride, overflow)
        elif strategy == 0:
            keep[i] = 0
            c = 1
        else:
            target = a if strategy == 1 else b_lengths[i]
            other = b_lengths[i] if strategy == 1 else a
            budget = max_length - other
            over = a + b_lengths[i] > max_length
            if over and budget <= 0:
                return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                        np.zeros(0, np.int64), 2)
            keep[i] = budget if over else target
            step, c = _windows(target, keep[i], stride, overflow)
        if c < 0:
            error = 1
            c = 1
        count[i] = c
    if error:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                np.zeros(0, np.int64), 1)
    rows = 0
    for i in range(n):
        rows += count[i]
    sample = np.empty(rows, np.int64)
    a_start = np.zeros(rows, np.int64)
    a_len = np.empty(rows, np.int64)
    b_start = np.zeros(rows, np.int64)
    b_len = np.zeros(rows, np.int64)
    r = 0
    for i in range(n):
        a = a_lengths[i]
        b = b_lengths[i] if b_lengths.size else 0
        if strategy == -1:
            sample[r] = i
            a_len[r] = a
            b_len[r] = b
            r += 1
            continue
        if b_lengths.size and strategy == 0:
            sample[r] = i
            if a + b > max_length:
                n1, n2 = min(a, b), max(a, b)
                n2 = n1 if n1 > max_length else max(n1, max_length - n1)
                if n1 + n2 > max_length:
                    n1, n2 = max_length // 2, max_length // 2 + max_length % 2
                keep_a, keep_b = (n2, n1) if a > b else (n1, n2)
                a_len[r], b_len[r] = min(keep_a, a), min(keep_b, b)
            else:
                a_len[r], b_len[r] = a, b
            r += 1
            continue
        target = b if strategy == 2 else a
        step = max(keep[i] - stride, 1) if overflow else 1
        for w in range(count[i]):
            start = w * step
            size = min(keep[i], target - start)
            sample[r] = i
            if strategy == 2:
                a_len[r] = a
                b_start[r] = start
                b_len[r] = size
            else:
                a_start[r] = start
                a_len[r] = size
                b_len[r] = b
            r += 1
    return sample, a_start, a_len, b_start, b_len, 0


@kernel
def _lengths(offsets):
    return offsets[1:] - offsets[:-1]


@kernel
def _rows_of(a_offsets, b_offsets, max_length, strategy, stride, overflow):
    """``truncate_rows`` of the sequences' offsets (``b_offsets`` empty: single sequences).
    ``strategy`` None: not truncated, a row per sequence, told by its type so that numba compiles
    it apart, without ``truncate_rows`` (see ``cells_numba``: each untruncated kernel that plans
    rows compiles less, ~1 s of a family's cold compile)."""
    if strategy is None:
        a_len = _lengths(a_offsets)
        rows = a_len.size
        b_len = _lengths(b_offsets) if b_offsets.size else np.zeros(rows, np.int64)
        return np.arange(rows), np.zeros(rows, np.int64), a_len, np.zeros(rows, np.int64), b_len, 0
    b_lengths = _lengths(b_offsets) if b_offsets.size else np.zeros(0, np.int64)
    sample, a_start, a_len, b_start, b_len, error = truncate_rows(_lengths(a_offsets), b_lengths, max_length,
                                                                  strategy, stride, overflow)
    if error:
        sample = np.zeros(0, np.int64)
    return sample, a_start, a_len, b_start, b_len, error


@kernel
def padded_rows(a_offsets, b_offsets, max_length, strategy, stride, overflow, item_seq, item_id, item_type, a_ids,
                b_ids, a_spans, b_spans, min_width, multiple, left, pad_id, with_types, with_offsets):
    """``truncate_rows`` then ``padded`` in one call (``b_offsets`` empty: single sequences, B is A):
    (ids, mask, types, offsets, sample, error); error as ``truncate_rows``'s, the arrays then empty."""
    sample, a_start, a_len, b_start, b_len, error = _rows_of(a_offsets, b_offsets, max_length, strategy, stride,
                                                             overflow)
    b_ids, b_offsets, b_spans = (b_ids, b_offsets, b_spans) if b_offsets.size else (a_ids, a_offsets, a_spans)
    ids, mask, types, offsets = padded(item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, a_ids,
                                       a_offsets, b_ids, b_offsets, a_spans, b_spans, min_width, multiple, left,
                                       pad_id, with_types, with_offsets)
    return ids, mask, types, offsets, sample, error


@kernel
def ragged_rows(a_offsets, b_offsets, max_length, strategy, stride, overflow, item_seq, item_id, item_type, a_ids,
                b_ids, a_spans, b_spans, with_types, with_offsets):
    """``truncate_rows`` then ``ragged`` in one call: (ids, row_offsets, types, offsets, sample, error)."""
    sample, a_start, a_len, b_start, b_len, error = _rows_of(a_offsets, b_offsets, max_length, strategy, stride,
                                                             overflow)
    b_ids, b_offsets, b_spans = (b_ids, b_offsets, b_spans) if b_offsets.size else (a_ids, a_offsets, a_spans)
    ids, row_offsets, types, offsets = ragged(item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                                              a_ids, a_offsets, b_ids, b_offsets, a_spans, b_spans, with_types,
                                              with_offsets)
    return ids, row_offsets, types, offsets, sample, error


@kernel
def plan_padded(a_offsets, b_offsets, max_length, strategy, stride, overflow, item_seq, min_width, multiple):
    """The first half of ``padded_rows`` for a large batch, whose outputs the caller allocates
    (in memory earlier outputs gave back, ``gputok._recycled``: fresh pages cost more to fill than
    the batch to encode) and fills in row ranges on its threads with ``fill_padded``:
    (sample, a_start, a_len, b_start, b_len, lengths, width, error)."""
    sample, a_start, a_len, b_start, b_len, error = _rows_of(a_offsets, b_offsets, max_length, strategy, stride,
                                                             overflow)
    lengths, width = _row_lengths(item_seq, a_len, b_len, min_width, multiple)
    return sample, a_start, a_len, b_start, b_len, lengths, width, error


@kernel
def fill_padded(r0, r1, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                a_ids, a_offsets, b_ids, b_offsets, a_spans, b_spans, lengths, ids, mask, types, offsets, with_types,
                with_offsets):
    """Rows ``r0`` to ``r1`` of ``plan_padded``'s rows into the caller's [rows, width] int64
    ``ids``, ``mask`` (and ``types``, ``offsets`` [rows, width, 2] where asked; ``b_offsets``
    empty: single sequences), every cell."""
    b_ids, b_offsets, b_spans = (b_ids, b_offsets, b_spans) if b_offsets.size else (a_ids, a_offsets, a_spans)
    _fill_padded(r0, r1, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len,
                 a_ids, a_offsets, b_ids, b_offsets, a_spans, b_spans, lengths, ids, mask, types, offsets, with_types,
                 with_offsets)
