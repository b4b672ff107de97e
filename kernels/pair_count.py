"""Adjacent-pair keys of a ragged batch of symbol rows, weighted by the row counts (one lane per symbol).

Torch twin: ``gputok.trainers.pair_ops.pair_windows_torch`` (same arguments, same result). Lane ``i``
writes the key ``symbols[i] << 32 | symbols[i + 1]`` and the weight ``counts[row_ids[i]]`` of the
window starting at ``i``, or key ``-1`` and weight 0 where ``i`` is the last symbol of its row. The
reduction into unique pairs (a dense table or a sort) is shared by both paths: ``pair_ops.pair_count``.
"""

import torch
import triton
import triton.language as tl


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["n"])
def _pair_count_kernel(sym_ptr, row_ptr, count_ptr, key_ptr, weight_ptr, n, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < n
    has_next = index + 1 < n
    row = tl.load(row_ptr + index, mask=inside, other=-1)
    next_row = tl.load(row_ptr + index + 1, mask=has_next, other=-2)
    window = inside & (row == next_row)
    left = tl.load(sym_ptr + index, mask=window, other=0).to(tl.int64)
    right = tl.load(sym_ptr + index + 1, mask=window, other=0).to(tl.int64)
    weight = tl.load(count_ptr + row, mask=window, other=0)
    tl.store(key_ptr + index, tl.where(window, (left << 32) | right, -1), mask=inside)
    tl.store(weight_ptr + index, tl.where(window, weight, 0), mask=inside)


def pair_count_triton(symbols: torch.Tensor, row_ids: torch.Tensor,
                      counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    symbols, row_ids, counts = symbols.contiguous(), row_ids.long().contiguous(), counts.long().contiguous()
    n = symbols.numel()
    keys = torch.empty(n, dtype=torch.int64, device=symbols.device)
    weights = torch.empty(n, dtype=torch.int64, device=symbols.device)
    if n == 0:
        return keys, weights
    # One load and two stores per lane: a wide block is pure bandwidth.
    block = 1024
    _pair_count_kernel[(triton.cdiv(n, block),)](symbols, row_ids, counts, keys, weights, n, BLOCK=block)
    return keys, weights
