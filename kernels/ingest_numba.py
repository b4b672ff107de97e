"""Ingest on the CPU: UTF-32 code units to ragged codepoints, and codepoints to UTF-8 bytes.

``codepoints_numba(units, lengths)``: ``units`` is the whole batch joined and encoded by CPython's
UTF-32 codec with ``surrogatepass`` (one C call; read-only), ``lengths`` each text's characters.
Returns the int32 codepoints (a writable copy, lone surrogates as U+FFFD) and the int64 row
offsets. Reference: ``gputok.ingest.codepoints`` under the torch backend (``_join`` replaces the
surrogates with a regex, then the codec's output is copied).

``codepoints_pairs_numba(units, lengths)``: the same, but a high surrogate followed by a low one
in the same text becomes the one codepoint the pair stands for (and the text a character shorter),
as tiktoken treats a Python str that holds surrogate pairs; any other surrogate becomes U+FFFD.
Reference: ``text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")`` per text
(``gputok.ingest.joined_surrogate_pairs``).

``utf8_numba(values, offsets)``: the UTF-8 bytes of ragged codepoints (uint8), their int64 row
offsets and for every byte the int64 index of its codepoint. Reference: the tensor-op path of
``gputok.ingest.utf8_bytes``. Two passes: byte counts per row, then the bytes.
Memory: the outputs only.
"""

import numpy as np

from ._numba import kernel


@kernel
def codepoints_numba(units, lengths):
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
