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
- ``replace_spans_numba``: each match of a Replace becomes ``content``, pointing at the match's
  last character, as huggingface aligns it; the matches come from ``run_matches_numba`` and
  ``string_matches_numba`` (the regexes and strings ``gputok.normalizers.Replace`` recognizes:
  one character class alone or repeated, ``X``, ``X+``, ``X{m,}``, ``X{m,n}``, or runs only at
  a text's ends, ``\\AX+|X+\\z``; a string) or, for any other regex, from the ``regex`` module
  per text. Reference: ``gputok.normalizers._replace_matches``.

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
def replace_spans_numba(values, offsets, match_offsets, match_start, match_end, content):
    """Each text's matches (``match_start[k]:match_end[k]``, indices into ``values``, rows of
    ``match_offsets``, in order and not overlapping) replaced by ``content``, whose characters
    point at the match's last character (an empty match's at the one before it, at a text's
    start its first), as huggingface aligns them; the other characters keep their index."""
    rows = offsets.size - 1
    k = content.size
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for t in range(rows):
        count = offsets[t + 1] - offsets[t]
        for m in range(match_offsets[t], match_offsets[t + 1]):
            count += k - (match_end[m] - match_start[m])
        out_offsets[t + 1] = out_offsets[t] + count
    out = np.empty(out_offsets[rows], values.dtype)
    source = np.empty(out_offsets[rows], np.int64)
    at = 0
    for t in range(rows):
        lo, hi = offsets[t], offsets[t + 1]
        i = lo
        for m in range(match_offsets[t], match_offsets[t + 1]):
            a, b = match_start[m], match_end[m]
            for c in range(i, a):
                out[at] = values[c]
                source[at] = c
                at += 1
            r = b - 1 if b > a else max(a - 1, lo)
            for c in range(k):
                out[at] = content[c]
                source[at] = r
                at += 1
            i = b
        for c in range(i, hi):
            out[at] = values[c]
            source[at] = c
            at += 1
    return out, out_offsets, source


@kernel
def _run_end(values, i, hi, member):
    """One past the run of ``member`` characters that starts at ``i`` (a codepoint past the table
    is no member)."""
    limit = member.size
    j = i
    while j < hi and values[j] < limit and member[values[j]]:
        j += 1
    return j


@kernel
def run_matches_numba(values, offsets, member, min_run, max_run, at_ends):
    """The matches of ``X{min_run,max_run}`` (``max_run`` 0: no bound) for a one-character ``X``
    (``member``: a uint8 table; codepoints past it are no member), with ``at_ends`` (no bound)
    only those that start or end their text, ``\\AX{m,}|X{m,}\\z``: ``replace_spans_numba``'s
    ``(match_offsets, match_start, match_end)``. Greedy leftmost search cuts each maximal run of
    members into matches of ``max_run`` from its start, the rest one more if ``min_run`` long."""
    rows = offsets.size - 1
    match_offsets = np.empty(rows + 1, np.int64)
    match_offsets[0] = 0
    match_start = np.empty(values.size, np.int64)
    match_end = np.empty(values.size, np.int64)
    m = 0
    for t in range(rows):
        lo, hi = offsets[t], offsets[t + 1]
        i = lo
        while i < hi:
            j = _run_end(values, i, hi, member)
            if j == i:
                i += 1
                continue
            if not at_ends or i == lo or j == hi:
                chunk = j - i if max_run == 0 else max_run
                while j - i >= min_run:
                    match_start[m], match_end[m] = i, min(i + chunk, j)
                    i = match_end[m]
                    m += 1
            i = j
        match_offsets[t + 1] = m
    return match_offsets, match_start[:m], match_end[:m]


@kernel
def string_matches_numba(values, offsets, literal):
    """The occurrences of ``literal`` (one or more characters), leftmost first and none overlapping
    the one before: ``replace_spans_numba``'s ``(match_offsets, match_start, match_end)``."""
    rows = offsets.size - 1
    n = literal.size
    match_offsets = np.empty(rows + 1, np.int64)
    match_offsets[0] = 0
    match_start = np.empty(values.size, np.int64)
    m = 0
    for t in range(rows):
        i, hi = offsets[t], offsets[t + 1]
        while i + n <= hi:
            c = 0
            while c < n and values[i + c] == literal[c]:
                c += 1
            if c == n:
                match_start[m] = i
                m += 1
                i += n
            else:
                i += 1
        match_offsets[t + 1] = m
    return match_offsets, match_start[:m], match_start[:m] + n
