"""Token ids of documents, wrapped: special tokens put before and after every row of a ragged batch.

``wrap_rows(ids, offsets, prefix, suffix)``: ``ids`` (int64) with row ``t`` at
``ids[offsets[t]:offsets[t + 1]]``; returns the int64 ids with each row as ``prefix + row + suffix``
and the new row lengths (int64). What ``encode_corpus`` does to add BOS, EOS and the tokenizer's
template around each document. Reference: ``[prefix + row + suffix for row in rows]``.
One pass; memory: the output only (the numpy scatter it replaces built four index arrays as long as
the ids: ~0.6 s of an 11 s run on the 20 MB English set).
"""

import numpy as np

from ._numba import kernel


@kernel
def wrap_rows(ids, offsets, prefix, suffix):
    rows = offsets.size - 1
    extra = prefix.size + suffix.size
    lengths = np.empty(rows, np.int64)
    out = np.empty(offsets[rows] - offsets[0] + rows * extra, np.int64)
    at = 0
    for t in range(rows):
        for k in range(prefix.size):
            out[at] = prefix[k]
            at += 1
        for i in range(offsets[t], offsets[t + 1]):
            out[at] = ids[i]
            at += 1
        for k in range(suffix.size):
            out[at] = suffix[k]
            at += 1
        lengths[t] = offsets[t + 1] - offsets[t] + extra
    return out, lengths
