"""Decode: token ids back to bytes, rows at once, over a CSR table of each token's bytes.

Contract (the reference is ``gputok.tokenizer.Tokenizer.decode`` token by token in Python, the
path ``GPUTOK_BACKEND=torch`` keeps): each row of ``ids`` (``row_offsets``) becomes the
concatenation of its tokens' bytes, skipping the ids marked in ``skip`` when ``skip_specials``;
the first token kept in a row takes its ``first`` form, the others their ``later`` form (a
WordPiece decoder strips ``##`` or puts a space before a later token; byte-level BPE has one
form). An id outside the table or marked ``missing`` makes the call return ``bad`` = the index
of that id (the caller raises the reference's error), else -1.

How: a pass for each row's size, a pass that copies the bytes; sequential, re-entrant.
"""

import numpy as np

from ._numba import kernel


@kernel
def decode_rows(ids, row_offsets, first_values, first_offsets, later_values, later_offsets, skip, missing,
                skip_specials):
    rows = row_offsets.size - 1
    vocab = first_offsets.size - 1
    out_offsets = np.empty(rows + 1, np.int64)
    out_offsets[0] = 0
    for r in range(rows):
        size = 0
        kept = 0
        for j in range(row_offsets[r], row_offsets[r + 1]):
            i = ids[j]
            if i < 0 or i >= vocab or missing[i]:
                return np.zeros(0, np.uint8), out_offsets, j
            if skip_specials and skip[i]:
                continue
            if kept == 0:
                size += first_offsets[i + 1] - first_offsets[i]
            else:
                size += later_offsets[i + 1] - later_offsets[i]
            kept += 1
        out_offsets[r + 1] = out_offsets[r] + size
    out = np.empty(out_offsets[rows], np.uint8)
    for r in range(rows):
        at = out_offsets[r]
        kept = 0
        for j in range(row_offsets[r], row_offsets[r + 1]):
            i = ids[j]
            if skip_specials and skip[i]:
                continue
            if kept == 0:
                for b in range(first_offsets[i], first_offsets[i + 1]):
                    out[at] = first_values[b]
                    at += 1
            else:
                for b in range(later_offsets[i], later_offsets[i + 1]):
                    out[at] = later_values[b]
                    at += 1
            kept += 1
    return out, out_offsets, -1
