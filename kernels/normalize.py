"""A per-codepoint table rewrite on CUDA (BertNormalizer, Lowercase), one text per lane.

Numba twin: ``normalize_numba.rewrite_table_numba`` (same table, same per-text algorithm). Each
codepoint ``c`` of a text becomes row ``c`` of the CSR table (``table_values[table_offsets[c]:
table_offsets[c + 1]]``), rows written one after the other.

Layout (so that a call needs no host sync): text ``t``'s output is written from
``expand * offsets[t]`` (``expand``: the table's longest row, so every text has room), and its
length goes to ``lengths[t]``; the rest of the buffer is left as it was. Compacting row ``t``
(``out[starts[t]:starts[t] + lengths[t]]``) gives the twin's row. Source indices are not made
(the CUDA path reports no offsets yet). A codepoint outside the table reads as U+FFFD, whose row
the caller's table holds (ingest has already replaced what is not a codepoint).
Memory: ``expand`` int32 values per input codepoint.
"""

import torch
import triton
import triton.language as tl

REPLACEMENT = tl.constexpr(0xFFFD)


@triton.jit(do_not_specialize=["texts", "limit"])
def _rewrite_table_kernel(values_ptr, offsets_ptr, table_values_ptr, table_offsets_ptr, out_ptr, lengths_ptr,
                          texts, limit, EXPAND: tl.constexpr, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    start = tl.load(offsets_ptr + text, mask=inside, other=0)
    size = tl.load(offsets_ptr + text + 1, mask=inside, other=0) - start
    at = start * EXPAND
    written = tl.zeros([BLOCK], dtype=tl.int64)
    for i in range(0, tl.max(size, 0)):
        live = inside & (i < size)
        c = tl.load(values_ptr + start + i, mask=live, other=0).to(tl.int64)
        c = tl.where((c < 0) | (c >= limit), REPLACEMENT, c)
        lo = tl.load(table_offsets_ptr + c, mask=live, other=0)
        hi = tl.load(table_offsets_ptr + c + 1, mask=live, other=0)
        for k in range(0, EXPAND):
            put = live & (lo + k < hi)
            v = tl.load(table_values_ptr + lo + k, mask=put, other=0)
            tl.store(out_ptr + at + written + k, v.to(tl.int32), mask=put)
        written += hi - lo
    tl.store(lengths_ptr + text, written, mask=inside)


def rewrite_table_triton(values: torch.Tensor, offsets: torch.Tensor, table_values: torch.Tensor,
                         table_offsets: torch.Tensor, expand: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int32 out buffer, int64 row starts, int64 row lengths) of every text rewritten by the table;
    ``expand`` is the table's longest row (:func:`longest_row`)."""
    texts = offsets.numel() - 1
    out = torch.empty(max(values.numel() * expand, 1), dtype=torch.int32, device=values.device)
    lengths = torch.empty(texts, dtype=torch.int64, device=values.device)
    starts = offsets[:-1] * expand
    if texts:
        # 64 lanes: texts differ in length, a block runs as long as its longest text.
        block = 64
        _rewrite_table_kernel[(triton.cdiv(texts, block),)](values, offsets, table_values, table_offsets, out,
                                                            lengths, texts, table_offsets.numel() - 1,
                                                            EXPAND=expand, BLOCK=block)
    return out, starts, lengths


def longest_row(table_offsets: torch.Tensor) -> int:
    """The most codepoints one codepoint becomes (at least 1): the ``expand`` of the launcher."""
    return max(int((table_offsets[1:] - table_offsets[:-1]).max()), 1) if table_offsets.numel() > 1 else 1
