"""Apply one BPE merge in place to the linked symbol lists of the words (one lane per occurrence).

Torch twin: ``gputok.trainers.pair_ops.apply_merge_torch`` (same arguments, same effect). Symbols of
all words sit in one flat array; ``nxt`` / ``prv`` link the live symbols of a word (-1 at its ends)
and dead slots hold symbol -1. For every start ``p`` of a selected occurrence (non-overlapping, so no
two lanes touch the same slot), with ``q = nxt[p]`` and ``r = nxt[q]``: ``symbols[p] = new_id``,
``symbols[q] = -1``, ``nxt[p] = r`` and ``prv[r] = p``. No lane reads a slot another lane writes
(``nxt[q]`` of an occurrence is never written, since ``q`` starts no occurrence), so the lanes need
no ordering.
"""

import torch
import triton
import triton.language as tl


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["n", "new_id"])
def _apply_merge_kernel(sym_ptr, nxt_ptr, prv_ptr, start_ptr, n, new_id, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < n
    p = tl.load(start_ptr + index, mask=inside, other=0)
    q = tl.load(nxt_ptr + p, mask=inside, other=0).to(tl.int64)
    r = tl.load(nxt_ptr + q, mask=inside, other=-1)
    tl.store(sym_ptr + p, tl.full([BLOCK], 0, tl.int32) + new_id, mask=inside)
    tl.store(sym_ptr + q, tl.full([BLOCK], -1, tl.int32), mask=inside)
    tl.store(nxt_ptr + p, r, mask=inside)
    tl.store(prv_ptr + r, p.to(tl.int32), mask=inside & (r >= 0))


def apply_merge_triton(symbols: torch.Tensor, nxt: torch.Tensor, prv: torch.Tensor, starts: torch.Tensor,
                       new_id: int) -> None:
    """``symbols``, ``nxt``, ``prv``: int32, updated in place; ``starts``: int64 occurrence starts."""
    starts = starts.long().contiguous()
    if starts.numel() == 0:
        return
    # A handful of scattered loads and stores per lane; 256 lanes keep enough warps in flight.
    block = 256
    _apply_merge_kernel[(triton.cdiv(starts.numel(), block),)](symbols, nxt, prv, starts, starts.numel(),
                                                                new_id, BLOCK=block)
