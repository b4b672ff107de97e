"""The per-codepoint normalizers on the CPU: a table rewrite, one-character Replace, Prepend, Strip.

Every kernel takes ragged codepoints (``values``, int64 row ``offsets``) and returns the
rewritten values, their int64 row offsets and, for every output codepoint, the int64 index of
the input codepoint it came from: what the torch twins in ``gputok.normalizers`` return, values
dtype included (the table's for a table rewrite, the input's for the others).

- ``rewrite_table_numba``: each codepoint ``c`` becomes row ``c`` of a ragged map over all
  codepoints (``table_values[table_offsets[c]:table_offsets[c + 1]]``, CSR): BertNormalizer
  (clean text, CJK padding, accents, lowercase composed into one table) and Lowercase.
  Reference: ``Normalizer.__call__`` (``gputok.ragged.expand_rows``).
- ``replace_char_numba``: every ``char`` becomes ``content`` (its characters point at the
  replaced one). Reference: the one-character path of ``Replace.__call__``.
- ``prepend_numba``: ``add`` before every non-empty row, pointing at its first character.
  Reference: ``Prepend.__call__``.
- ``strip_numba``: white space (``white``, a boolean table over all codepoints) off the left
  and/or right of each row. Reference: ``Strip.__call__``.

Each is a counting pass (output row lengths) then a writing pass. A codepoint outside a table
raises ValueError (the torch twin's gather raises too). Memory: the outputs only.
"""

import numpy as np

from ._numba import kernel


@kernel
def rewrite_table_numba(values, offsets, table_values, table_offsets):
    rows = offsets.size - 1
    limit = table_offsets.size - 1
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        count = 0
        for i in range(offsets[t], offsets[t + 1]):
            c = values[i]
            if c < 0 or c >= limit:
                raise ValueError("a codepoint outside the normalizer's table (0..0x10FFFF)")
            count += table_offsets[c + 1] - table_offsets[c]
        out_offsets[t + 1] = out_offsets[t] + count
    total = out_offsets[rows]
    out = np.empty(total, table_values.dtype)
    source = np.empty(total, np.int64)
    at = 0
    for i in range(values.size):
        c = values[i]
        lo, hi = table_offsets[c], table_offsets[c + 1]
        for k in range(lo, hi):
            out[at] = table_values[k]
            source[at] = i
            at += 1
    return out, out_offsets, source


@kernel
def replace_char_numba(values, offsets, char, content):
    rows = offsets.size - 1
    k = content.size
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        count = 0
        for i in range(offsets[t], offsets[t + 1]):
            count += k if values[i] == char else 1
        out_offsets[t + 1] = out_offsets[t] + count
    total = out_offsets[rows]
    out = np.empty(total, values.dtype)
    source = np.empty(total, np.int64)
    at = 0
    for i in range(values.size):
        if values[i] == char:
            for j in range(k):
                out[at] = content[j]
                source[at] = i
                at += 1
        else:
            out[at] = values[i]
            source[at] = i
            at += 1
    return out, out_offsets, source


@kernel
def prepend_numba(values, offsets, add):
    rows = offsets.size - 1
    k = add.size
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        n = offsets[t + 1] - offsets[t]
        out_offsets[t + 1] = out_offsets[t] + (n + k if n > 0 else 0)
    total = out_offsets[rows]
    out = np.empty(total, values.dtype)
    source = np.empty(total, np.int64)
    at = 0
    for t in range(rows):
        lo, hi = offsets[t], offsets[t + 1]
        if hi > lo:
            for j in range(k):
                out[at] = add[j]
                source[at] = lo
                at += 1
        for i in range(lo, hi):
            out[at] = values[i]
            source[at] = i
            at += 1
    return out, out_offsets, source


@kernel
def strip_numba(values, offsets, white, strip_left, strip_right):
    rows = offsets.size - 1
    limit = white.size
    first = np.empty(rows, np.int64)
    last = np.empty(rows, np.int64)  # one past the last kept character
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        lo, hi = offsets[t], offsets[t + 1]
        a, b = lo, hi
        solid = False
        for i in range(lo, hi):
            c = values[i]
            if c < 0 or c >= limit:
                raise ValueError("a codepoint outside the white-space table (0..0x10FFFF)")
            if not white[c]:
                solid = True
        if not solid and (strip_left or strip_right):
            a, b = lo, lo
        else:
            if strip_left:
                while a < b and white[values[a]]:
                    a += 1
            if strip_right:
                while b > a and white[values[b - 1]]:
                    b -= 1
        first[t], last[t] = a, b
        out_offsets[t + 1] = out_offsets[t] + (b - a)
    total = out_offsets[rows]
    out = np.empty(total, values.dtype)
    source = np.empty(total, np.int64)
    at = 0
    for t in range(rows):
        for i in range(first[t], last[t]):
            out[at] = values[i]
            source[at] = i
            at += 1
    return out, out_offsets, source


@kernel
def rewrite_sources_numba(in_offsets, out_offsets, match_offsets, match_start, match_end, content_len):
    """The source index of every character of texts whose matches Python replaced
    (``gputok.normalizers._replace_matches``): per text, the matches
    ``match_start[k]:match_end[k]`` (text-relative, rows of ``match_offsets``) replaced by
    ``content_len`` characters pointing at the match's last character (an empty match's at the one
    before it), the others keeping theirs. Raises ValueError where the lengths disagree with the
    rewritten text's.
    """
    rows = in_offsets.size - 1
    source = np.empty(out_offsets[rows], np.int64)
    for t in range(rows):
        start, n = in_offsets[t], in_offsets[t + 1] - in_offsets[t]
        at, m = out_offsets[t], out_offsets[t + 1] - out_offsets[t]
        expected = n
        for k in range(match_offsets[t], match_offsets[t + 1]):
            expected += content_len - (match_end[k] - match_start[k])
        if expected != m:
            raise ValueError("a rewritten text's length disagrees with its matches")
        pos = 0
        for k in range(match_offsets[t], match_offsets[t + 1]):
            a, b = match_start[k], match_end[k]
            for j in range(pos, a):
                source[at] = start + j
                at += 1
            r = b - 1 if b > a else max(a - 1, 0)  # an empty match: the character before it
            for j in range(content_len):
                source[at] = start + r
                at += 1
            pos = b
        for j in range(pos, n):
            source[at] = start + j
            at += 1
    return source
