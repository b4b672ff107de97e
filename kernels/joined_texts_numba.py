"""A batch of texts joined by NUL, as the UTF-32 units, lengths and part cuts the CPU kernels read.

``split_joined(units, texts, threads, min_chars, caller_chars)``: ``units`` is
``"\\x00".join(batch)`` encoded by CPython's UTF-32 codec (read-only), ``texts`` the batch's size.
Returns (the units without the separators, int32; each text's length, int64; the cuts, int64:
the text index and the character offset where each part starts, then the batch's end, in pairs;
ok). Not ok (nothing else meaningful) where the units hold more NULs than separators: a text held
one, and the caller measures its texts another way. The cuts are
``gputok._cpu_threads.part_bounds``' for ``threads`` threads, chunks of at least ``min_chars``
and the caller's part ``caller_chars`` longer (``_cpu_threads._bounds`` with every text sampled):
empty where that gives one part, as it does for ``threads`` below 2.

Why: a batch's lengths from Python are a call per text (``np.fromiter(map(len, texts))``: ~30 us
of 1,024 lines) and the cuts a dozen numpy calls (~10 us), all on the calling thread while the
part threads wait; the join is made anyway, and a separator is one unit to look for. Reference:
``"".join`` encoded, ``np.fromiter(map(len, texts))`` and ``part_bounds`` (tests/
test_joined_texts.py).
"""

import numpy as np

from ._numba import kernel


@kernel
def split_joined(units, texts, threads, min_chars, caller_chars):
    # The separators counted first (a loop LLVM vectorises: 1.7 us of 33k units), so that the
    # copy's loop holds no exit: with one (at a NUL past the last separator) the whole kernel took
    # 30 us of 1,024 English lines, now 20-25 (benchmarks/glue_parts.py).
    separators = 0
    for i in range(units.size):
        separators += units[i] == 0
    if separators != texts - 1:  # a text holds a NUL (fewer cannot be: join wrote them all)
        return np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64), False
    out = np.empty(units.size - separators, np.int32)
    lengths = np.empty(texts, np.int64)
    at = 0
    t = 0
    start = 0
    for i in range(units.size):
        c = units[i]
        if c == 0:
            lengths[t] = at - start
            t += 1
            start = at
        else:
            out[at] = c
            at += 1
    lengths[t] = at - start
    return out, lengths, _cuts(lengths, threads, min_chars, caller_chars), True


@kernel
def _cuts(lengths, threads, min_chars, caller_chars):
    """``_cpu_threads._bounds(np.cumsum(lengths), 1, lengths.size, threads, caller_chars)`` with
    ``MIN_CHUNK_CHARS`` = ``min_chars``, each cut followed by its character offset; empty for None."""
    count = lengths.size
    total = 0
    for t in range(count):
        total += lengths[t]
    # Comparisons written out: min, max and np.zeros here were 0.1 s of the kernel's 0.5 s cold
    # compile (after another kernel's, which readies the compiler).
    parts = total // min_chars
    if threads < parts:
        parts = threads
    if count < parts:
        parts = count
    if parts < 2:
        return np.empty(0, np.int64)
    caller = total / (2 * parts)
    if caller_chars < caller:
        caller = caller_chars * 1.0
    cuts = np.empty(2 * (parts + 1), np.int64)  # text, character of each part's start, then the end's
    cuts[0] = 0
    cuts[1] = 0
    k = 1
    end = 0  # characters of texts 0..t-1
    t = 0
    for part in range(1, parts):
        target = (total + caller) * part / parts - caller  # _bounds' float arithmetic, in its order (a
        # target below 0, which _bounds raises to 0, finds the same first text)
        while t < count and end + lengths[t] < target:  # searchsorted(ends, target, "left"): the first end >= target
            end += lengths[t]
            t += 1
        if t >= count:
            break
        cut = t + 1
        if cut < count and cut != cuts[2 * k - 2]:
            cuts[2 * k] = cut
            cuts[2 * k + 1] = end + lengths[t]
            k += 1
    cuts[2 * k] = count
    cuts[2 * k + 1] = total
    if k < 2:  # one text holds nearly all the characters
        return np.empty(0, np.int64)
    return cuts[:2 * k + 2]
