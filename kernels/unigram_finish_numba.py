"""Unk tokens of Unigram segmentations fused, or spelled as UTF-8 byte pieces: the CPU path of
``Unigram._finish``.

Reference: ``gputok.models.unigram.Unigram._finish`` (same outputs, dtypes included). An unk
token (``ids == unk_id``) followed by another unk of the same row is dropped (a run becomes its
last token); with byte fallback every unk token becomes the ``<0xNN>`` pieces (``byte_ids``) of
the UTF-8 bytes of its last character (an unk candidate covers one character), each with the end
of its run of unks: huggingface spells the run fused into one unk, so every byte piece of it spans
the whole run (``scatter_numba.scatter_tokens``' ``shared_start`` gives them the run's start).
Memory: the outputs, at most 4 tokens per input token.
"""

import numpy as np

from ._numba import kernel


@kernel
def unigram_finish_numba(ids, ends, offsets, values, row_starts, unk_id, byte_ids, byte_fallback):
    """Rows ``offsets[r] .. offsets[r + 1]`` of token ``ids`` / ``ends`` (int64; ends in characters
    of the row, which is ``values[row_starts[r]:]``). Returns ``(ids, ends, offsets)``, the inputs
    themselves when there is nothing to change."""
    rows = offsets.size - 1
    unks = 0
    if unk_id >= 0:
        for t in range(ids.size):
            if ids[t] == unk_id:
                unks += 1
    if unks == 0:
        return ids, ends, offsets
    room = ids.size + (3 * unks if byte_fallback else 0)
    out_ids = np.empty(room, np.int64)
    out_ends = np.empty(room, np.int64)
    out_offsets = np.zeros(rows + 1, np.int64)
    at = 0
    run_end = 0
    for r in range(rows):
        for t in range(offsets[r], offsets[r + 1]):
            if ids[t] == unk_id:
                if byte_fallback:
                    if t == offsets[r] or ids[t - 1] != unk_id:  # a run of unks starts: find its end
                        last = t
                        while last + 1 < offsets[r + 1] and ids[last + 1] == unk_id:
                            last += 1
                        run_end = ends[last]
                    c = np.int64(values[row_starts[r] + ends[t] - 1])
                    width = 1 + (c >= 0x80) + (c >= 0x800) + (c >= 0x10000)
                    for k in range(width):
                        if width == 1:
                            byte = c
                        elif k == 0:
                            byte = (0xF0 if width == 4 else 0xE0 if width == 3 else 0xC0) | (c >> (6 * (width - 1)))
                        else:
                            byte = 0x80 | ((c >> (6 * (width - 1 - k))) & 0x3F)
                        out_ids[at] = byte_ids[byte & 0xFF]
                        out_ends[at] = run_end
                        at += 1
                    continue
                if t + 1 < offsets[r + 1] and ids[t + 1] == unk_id:
                    continue
            out_ids[at] = ids[t]
            out_ends[at] = ends[t]
            at += 1
        out_offsets[r + 1] = at
    return out_ids[:at], out_ends[:at], out_offsets
