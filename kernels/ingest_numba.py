"""Ingest on the CPU: UTF-32 code units to ragged codepoints, and codepoints to UTF-8 bytes.

``codepoints_numba(units, lengths)``: ``units`` is the whole batch joined and encoded by CPython's
UTF-32 codec with ``surrogatepass`` (one C call; read-only), ``lengths`` each text's characters;
or ``lengths`` is ``JOINED_LENGTHS`` ([``JOINED``]) and the texts in ``units`` are joined by NUL
(``"\x00".join(texts)`` encoded): each NUL ends a text. Returns the int32 codepoints (a writable
copy, lone surrogates as U+FFFD, no separators) and the int64 row offsets, one row per text found
(a text that held a NUL comes out as two: the caller compares the count with its own). Reference:
``gputok.ingest.codepoints`` under the torch backend (``_join`` replaces the surrogates with a
regex, then the codec's output is copied). Why the joined form: a batch's lengths from Python are
a call per text (``np.fromiter(map(len, texts))``: ~30 us of 1,024 lines, the GIL held), and
finding them in a kernel before the encode was a pass on the calling thread while the other
threads waited (20-38 us of a two-part call of 1,024 lines); inside each part's kernel it is a
count of the NULs in that part, on that part's thread.

``codepoints_pairs_numba(units, lengths)``: the same, but a high surrogate followed by a low one
in the same text becomes the one codepoint the pair stands for (and the text a character shorter),
as tiktoken treats a Python str that holds surrogate pairs; any other surrogate becomes U+FFFD.
Reference: ``text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")`` per text
(``gputok.ingest.joined_surrogate_pairs``).

``utf8_numba(values, offsets)``: the UTF-8 bytes of ragged codepoints (uint8), their int64 row
offsets and for every byte the int64 index of its codepoint. Reference: the tensor-op path of
``gputok.ingest.utf8_bytes``. Two passes: byte counts per row, then the bytes.
``utf8_units_numba(data, starts, ends)``: rows ``data[starts[t]:ends[t]]`` of UTF-8 bytes (uint8,
read-only) as the UTF-32 units the CPU kernels read: the int32 codepoints back to back, each row's
length in codepoints (int64) and whether the row held invalid UTF-8 (bool). Invalid bytes become
U+FFFD by the rule of Python's ``bytes.decode("utf-8", errors="replace")`` (Unicode's "maximal
subpart" practice): a byte that cannot start a character, or the longest prefix of a character
that the next byte (or the row's end) cuts short, is one U+FFFD; surrogates (ED A0..BF) and
overlong forms (C0, C1, E0 80..9F, F0 80..8F) are invalid, so no surrogate ever comes out.
Reference: that decode per row. One pass; the units buffer is sized for the worst case (a unit per
byte) and returned as a view of its used part. ``utf8_invalid_rows(data, offsets)``: only the
bool per row (no units written), for readers that apply a bad-record policy before encoding.

``rows_matching(match_starts, match_ends, row_offsets)``: a bool per row, True where a byte range
``[match_starts[k], match_ends[k])`` touches the row (all rows from the one holding its first byte
to the one holding its last): the rows a regex search over the joined rows may have matched in.

``splice_rows(a_ids, a_offsets, a_spans, b_ids, b_offsets, b_spans, from_b, with_spans)``: one
ragged batch from two: row ``t`` is row ``t`` of ``a`` where ``from_b[t]`` is False, else the next
row of ``b`` (``b`` holds exactly the rows taken from it, in order); spans ([tokens, 2] int64)
follow their ids when ``with_spans``.
Memory: the outputs only.
"""

import numpy as np

from ._numba import kernel


# ``lengths`` [JOINED]: the units hold the texts joined by NUL (see the module notes). (-1 is
# bpe_texts_numba.encode_padded_cells' one text of UTF-8.)
JOINED = -2
JOINED_LENGTHS = np.array([JOINED], np.int64)


@kernel
def codepoints_numba(units, lengths):
    if lengths.size == 1 and lengths[0] == JOINED:
        return _split_at_nuls(units)
    n = units.size
    values = np.empty(n, np.int32)
    for i in range(n):
        c = units[i]
        values[i] = 0xFFFD if 0xD800 <= c < 0xE000 else c
    offsets = np.empty(lengths.size + 1, np.int64)
    offsets[0] = 0
    for t in range(lengths.size):
        offsets[t + 1] = offsets[t] + lengths[t]
    return values, offsets


@kernel
def _split_at_nuls(units):
    """``codepoints_numba`` of texts joined by NUL."""
    # The separators counted first (a loop LLVM vectorises), so that the copy's loop holds no exit.
    separators = 0
    for i in range(units.size):
        separators += units[i] == 0
    values = np.empty(units.size - separators, np.int32)
    offsets = np.empty(separators + 2, np.int64)
    offsets[0] = 0
    at = 0
    t = 1
    for i in range(units.size):
        c = units[i]
        if c == 0:
            offsets[t] = at
            t += 1
        else:
            values[at] = 0xFFFD if 0xD800 <= c < 0xE000 else c
            at += 1
    offsets[t] = at
    return values, offsets


@kernel
def codepoints_pairs_numba(units, lengths):
    values = np.empty(units.size, np.int32)
    offsets = np.empty(lengths.size + 1, np.int64)
    offsets[0] = 0
    at = 0
    i = 0
    for t in range(lengths.size):
        end = i + lengths[t]
        while i < end:
            c = units[i]
            if 0xD800 <= c < 0xDC00 and i + 1 < end and 0xDC00 <= units[i + 1] < 0xE000:
                c = 0x10000 + ((c - 0xD800) << 10) + (units[i + 1] - 0xDC00)
                i += 1
            elif 0xD800 <= c < 0xE000:
                c = 0xFFFD
            values[at] = c
            at += 1
            i += 1
        offsets[t + 1] = at
    return values[:at], offsets


@kernel
def utf8_numba(values, offsets):
    rows = offsets.size - 1
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        count = 0
        for i in range(offsets[t], offsets[t + 1]):
            c = values[i]
            count += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
        out_offsets[t + 1] = out_offsets[t] + count
    total = out_offsets[rows]
    out = np.empty(total, np.uint8)
    source = np.empty(total, np.int64)
    at = 0
    for i in range(values.size):
        c = values[i]
        if c < 0x80:
            out[at] = c
            source[at] = i
            at += 1
        elif c < 0x800:
            out[at] = 0xC0 | (c >> 6)
            out[at + 1] = 0x80 | (c & 0x3F)
            source[at] = i
            source[at + 1] = i
            at += 2
        elif c < 0x10000:
            out[at] = 0xE0 | (c >> 12)
            out[at + 1] = 0x80 | ((c >> 6) & 0x3F)
            out[at + 2] = 0x80 | (c & 0x3F)
            for k in range(3):
                source[at + k] = i
            at += 3
        else:
            out[at] = 0xF0 | (c >> 18)
            out[at + 1] = 0x80 | ((c >> 12) & 0x3F)
            out[at + 2] = 0x80 | ((c >> 6) & 0x3F)
            out[at + 3] = 0x80 | (c & 0x3F)
            for k in range(4):
                source[at + k] = i
            at += 4
    return out, out_offsets, source


@kernel
def utf8_char(data, i, end):
    """The codepoint that starts at ``data[i]`` (U+FFFD if invalid), the index after it, and
    whether it was valid: one step of Python's ``errors="replace"`` decoding."""
    b = np.int32(data[i])
    i += 1
    if b < 0x80:
        return b, i, True
    # continuation bytes still needed, and the range the next one must fall in
    if 0xC2 <= b <= 0xDF:
        need, c, low, high = 1, b & 0x1F, 0x80, 0xBF
    elif 0xE0 <= b <= 0xEF:
        need, c = 2, b & 0x0F
        low = 0xA0 if b == 0xE0 else 0x80
        high = 0x9F if b == 0xED else 0xBF
    elif 0xF0 <= b <= 0xF4:
        need, c = 3, b & 0x07
        low = 0x90 if b == 0xF0 else 0x80
        high = 0x8F if b == 0xF4 else 0xBF
    else:
        return np.int32(0xFFFD), i, False
    while need > 0 and i < end and low <= data[i] <= high:
        c = (c << 6) | (np.int32(data[i]) & 0x3F)
        i += 1
        need -= 1
        low, high = 0x80, 0xBF
    if need != 0:
        return np.int32(0xFFFD), i, False
    return c, i, True


@kernel
def utf8_units_numba(data, starts, ends):
    rows = starts.size
    total = 0
    for t in range(rows):
        total += ends[t] - starts[t]
    units = np.empty(total, np.int32)
    lengths = np.empty(rows, np.int64)
    invalid = np.zeros(rows, np.bool_)
    at = 0
    for t in range(rows):
        i, end, first = starts[t], ends[t], at
        while i < end:
            if data[i] < 0x80:  # ASCII without the call (most bytes of most text)
                units[at] = data[i]
                at += 1
                i += 1
                continue
            c, i, ok = utf8_char(data, i, end)
            units[at] = c
            at += 1
            if not ok:
                invalid[t] = True
        lengths[t] = at - first
    return units[:at], lengths, invalid


@kernel
def utf8_invalid_rows(data, offsets):
    rows = offsets.size - 1
    invalid = np.zeros(rows, np.bool_)
    for t in range(rows):
        i, end = offsets[t], offsets[t + 1]
        while i < end:
            if data[i] < 0x80:
                i += 1
                continue
            _, i, ok = utf8_char(data, i, end)
            if not ok:
                invalid[t] = True
                break
    return invalid


@kernel
def rows_matching(match_starts, match_ends, row_offsets):
    rows = row_offsets.size - 1
    hit = np.zeros(rows, np.bool_)
    for k in range(match_starts.size):
        first = np.searchsorted(row_offsets, match_starts[k], side="right") - 1
        last = np.searchsorted(row_offsets, match_ends[k] - 1, side="right") - 1
        for t in range(max(first, 0), min(last, rows - 1) + 1):
            hit[t] = True
    return hit


@kernel
def splice_rows(a_ids, a_offsets, a_spans, b_ids, b_offsets, b_spans, from_b, with_spans):
    rows = from_b.size
    offsets = np.empty(rows + 1, np.int64)
    offsets[0] = 0
    taken = 0
    for t in range(rows):
        if from_b[t]:
            count = b_offsets[taken + 1] - b_offsets[taken]
            taken += 1
        else:
            count = a_offsets[t + 1] - a_offsets[t]
        offsets[t + 1] = offsets[t] + count
    ids = np.empty(offsets[rows], a_ids.dtype)
    spans = np.empty((offsets[rows] if with_spans else 0, 2), np.int64)
    taken = 0
    for t in range(rows):
        if from_b[t]:
            source, ids_in, spans_in = b_offsets[taken], b_ids, b_spans
            taken += 1
        else:
            source, ids_in, spans_in = a_offsets[t], a_ids, a_spans
        for k in range(offsets[t + 1] - offsets[t]):
            ids[offsets[t] + k] = ids_in[source + k]
            if with_spans:
                spans[offsets[t] + k, 0] = spans_in[source + k, 0]
                spans[offsets[t] + k, 1] = spans_in[source + k, 1]
    return ids, offsets, spans
