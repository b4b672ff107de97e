"""Unicode normalization forms NFC, NFD, NFKC, NFKD on the CPU: one numba kernel over a batch.

The algorithm of UAX #15 as CPython's ``unicodedata.normalize`` runs it, from flat tables that
``gputok.unicode_forms`` builds once from that ``unicodedata`` (so the results are its results,
at its Unicode version):

1. decompose: every codepoint becomes its full (recursive) canonical or compatibility
   decomposition, Hangul syllables included (``decomp_offsets``: CSR over all codepoints, an
   empty row meaning "itself"; ``decomp_values``);
2. canonical ordering: each run of characters with a nonzero combining class (``ccc``) is sorted
   stably by class (insertion sort; a run longer than 32 by a stable merge sort, so a text of
   many marks stays O(n log n));
3. compose (NFC, NFKC): each character that is not blocked from the last starter (nothing
   between them, or everything between has a lower nonzero class) and forms a primary composite
   with it replaces that starter; Hangul LV / LVT are pairs of the same table. The pair table is
   dense over the characters that occur first / second in a pair (``first_index``,
   ``second_index``: -1 elsewhere; ``pair_table[first, second]``: the composite or -1), so
   composition exclusions are simply absent from it.

A text made only of codepoints that the quick-check table (``quick``) marks for the form (starters
that stay as they are and compose with nothing before them) is copied as it is: most real text.

Values that are no Unicode scalar value (surrogates, negatives, > U+10FFFF) are read as U+FFFD,
as ``gputok.ingest.strings`` decodes them for ``unicodedata``.

Sources, as huggingface aligns them: its forms come from a crate whose iterator tags each output
character with a *change*: in step 1 a codepoint's first character 0 and the others of its
decomposition +1; the tag moves with its character in step 2; in step 3 a composite takes its
starter's tag plus the absorbed character's, minus 1. huggingface then reads the tags in order
against the input: a tag of +1 is a new character, aligned with the input character before it; a
tag of 0 or -k is the next input character, and -k removes the k after it. So ``e`` + U+0301 is
one ``é`` (tag -1) sourced at the ``e``, and ``ﬁ`` under NFKC is ``f`` (0), ``i`` (+1), both at
the ligature. A text made of quick-check codepoints keeps its indices. References:
``gputok.unicode_forms.aligned`` per text, and huggingface's offsets (``tests/test_nf_forms.py``).
Memory: the decomposed batch (int32), whose start is returned as the output values, its tags
(int8), and the sources.
"""

import numpy as np

from ._numba import kernel

_REPLACEMENT = 0xFFFD
_SHORT_RUN = 32  # runs of marks up to this long are insertion-sorted (real text: 1-3 marks)


@kernel
def _scalar(c):
    if c < 0 or c > 0x10FFFF or (0xD800 <= c <= 0xDFFF):
        return _REPLACEMENT
    return c


@kernel
def _order_marks(buf, tags, lo, hi, ccc):
    """Canonical ordering of ``buf[lo:hi]``: every run of nonzero classes sorted stably by class,
    each character's tag (``tags``) moving with it."""
    i = lo
    while i < hi:
        if ccc[buf[i]] == 0:
            i += 1
            continue
        j = i
        while j < hi and ccc[buf[j]] != 0:
            j += 1
        if j - i <= _SHORT_RUN:
            for k in range(i + 1, j):
                c = buf[k]
                tag = tags[k]
                cc = ccc[c]
                m = k
                while m > i and ccc[buf[m - 1]] > cc:
                    buf[m] = buf[m - 1]
                    tags[m] = tags[m - 1]
                    m -= 1
                buf[m] = c
                tags[m] = tag
        else:
            classes = np.empty(j - i, np.int64)
            for k in range(i, j):
                classes[k - i] = ccc[buf[k]]
            order = np.argsort(classes, kind="mergesort")
            run = buf[i:j].copy()
            run_tags = tags[i:j].copy()
            for k in range(j - i):
                buf[i + k] = run[order[k]]
                tags[i + k] = run_tags[order[k]]
        i = j


@kernel
def _compose(buf, tags, lo, hi, ccc, first_index, second_index, pair_table):
    """Canonical composition of ``buf[lo:hi]`` in place, a composite's tag its starter's plus the
    absorbed character's minus 1; returns the new end."""
    out = lo
    starter = -1  # position in the output of the last starter
    last_class = 0  # class of the last character written after that starter (0: none written)
    for i in range(lo, hi):
        c = buf[i]
        cc = np.int64(ccc[c])
        if starter >= 0:
            adjacent = out == starter + 1
            if adjacent or (last_class != 0 and last_class < cc):
                f = first_index[buf[starter]]
                s = second_index[c]
                if f >= 0 and s >= 0:
                    composite = pair_table[f, s]
                    if composite >= 0:
                        buf[starter] = composite
                        tags[starter] += tags[i] - 1
                        continue
        if cc == 0:
            starter = out
            last_class = 0
        else:
            last_class = cc
        buf[out] = c
        tags[out] = tags[i]
        out += 1
    return out


@kernel
def normalize_form_numba(values, offsets, compose, quick_bit, quick, ccc, decomp_offsets, decomp_values, first_index,
                         second_index, pair_table):
    """Ragged codepoints (``values``, int64 row ``offsets``) in a normalization form: the int32
    values, their int64 row offsets and each output's int64 source index (module docstring).
    ``compose``: NFC / NFKC (else NFD / NFKD); the tables pick canonical or compatibility;
    ``quick & quick_bit``: the codepoints that leave a text of them as it is."""
    rows = offsets.size - 1
    sizes = np.empty(rows + 1, np.int64)  # decomposed row starts
    sizes[0] = 0
    stable = np.empty(rows, np.bool_)  # the text is in the form already (most real text)
    for t in range(rows):
        same = True
        for i in range(offsets[t], offsets[t + 1]):
            c = values[i]
            if 0 <= c < 0x80:  # ASCII is in every form: no table read
                continue
            if not quick[_scalar(c)] & quick_bit:
                same = False
                break
        stable[t] = same
        n = offsets[t + 1] - offsets[t]
        if not same:  # room for the full decomposition (a stable text's may be longer: it is not made)
            n = 0
            for i in range(offsets[t], offsets[t + 1]):
                c = _scalar(values[i])
                width = decomp_offsets[c + 1] - decomp_offsets[c]
                n += width if width > 0 else 1
        sizes[t + 1] = sizes[t] + n
    buf = np.empty(sizes[rows], np.int32)
    tags = np.empty(sizes[rows], np.int8)  # written for the rows that change
    ends = np.empty(rows, np.int64)
    for t in range(rows):
        at = sizes[t]
        if stable[t]:
            for i in range(offsets[t], offsets[t + 1]):
                buf[at] = _scalar(values[i])
                at += 1
            ends[t] = at
            continue
        for i in range(offsets[t], offsets[t + 1]):
            c = _scalar(values[i])
            lo, hi = decomp_offsets[c], decomp_offsets[c + 1]
            if lo == hi:
                buf[at] = c
                tags[at] = 0
                at += 1
            else:
                for k in range(lo, hi):
                    buf[at] = decomp_values[k]
                    tags[at] = 0 if k == lo else 1
                    at += 1
        _order_marks(buf, tags, sizes[t], at, ccc)
        ends[t] = _compose(buf, tags, sizes[t], at, ccc, first_index, second_index, pair_table) if compose else at
    out_offsets = np.zeros(rows + 1, np.int64)
    out_offsets[1:] = np.cumsum(ends - sizes[:-1])
    # The rows move left within ``buf`` (composition only shortens them): no second buffer to fault in.
    source = np.empty(out_offsets[rows], np.int64)
    for t in range(rows):
        start, n = offsets[t], offsets[t + 1] - offsets[t]
        at, m = out_offsets[t], out_offsets[t + 1] - out_offsets[t]
        read = 0  # input characters read so far
        for j in range(m):
            buf[at + j] = buf[sizes[t] + j]
            if stable[t]:
                source[at + j] = start + j
                continue
            tag = tags[sizes[t] + j]
            if tag > 0:  # a new character: the input character before it (huggingface's empty span at 0)
                source[at + j] = start + max(read - 1, 0)
            else:  # the next input character, and -tag more removed after it
                source[at + j] = start + min(read, n - 1)
                read += 1 - tag
    return buf[: out_offsets[rows]], out_offsets, source
