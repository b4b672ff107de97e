"""BPE merges of ragged rows of token ids, one program per row (word), one merge at a time.

Torch twin: ``gputok.models.bpe.bpe_merge_torch`` (same arguments, same result): each row is
merged by the reference rule, the adjacent pair of lowest rank first, the leftmost among equals,
until no adjacent pair has a rank. The twin gets there by batched merge rounds over all rows;
the kernel follows the rule literally inside each program: rank every adjacent pair of its row
(the pair map is a :class:`gputok.hashing.HashMap` probed in the kernel by
``kernels/hash_lookup.py``'s ``probe``), take the minimum and its leftmost position, write the merged
token there and shift the rest of the row left by one. The row lives in the output buffer and
is walked in chunks of ``BLOCK`` lanes, so rows of any length work (a merge costs the row's
length: BPE gives the kernel words of at most ``gputok.models.bpe.LONG_WORD`` symbols).
"""

import torch
import triton
import triton.language as tl

from .hash_lookup import probe

NO_RANK = tl.constexpr((1 << 63) - 1)  # a kernel reads only constexpr globals


@triton.jit
def _bpe_merge_kernel(tokens_ptr, offsets_ptr, lengths_ptr, slot_keys_ptr, slot_values_ptr, hash_mask,
                      hash_shift, max_probes, vocab_size, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(offsets_ptr + row)
    n = tl.load(offsets_ptr + row + 1) - start
    base = tokens_ptr + start
    lane = tl.arange(0, BLOCK).to(tl.int64)
    go = n > 1
    while go:
        # The last merge's stores before this scan's loads: a merge of the row's last pair shifts
        # nothing, so no barrier of the shift loop separates its store from other lanes' loads.
        tl.debug_barrier()
        best = tl.full([], NO_RANK, dtype=tl.int64)
        best_at = n
        best_id = tl.full([], 0, dtype=tl.int64)
        for chunk in range(0, n - 1, BLOCK):
            i = chunk + lane
            inside = i < n - 1
            left = tl.load(base + i, mask=inside, other=0)
            right = tl.load(base + i + 1, mask=inside, other=0)
            found = probe(left * vocab_size + right, inside, tl.full([BLOCK], -1, dtype=tl.int64),
                          slot_keys_ptr, slot_values_ptr, hash_mask, hash_shift, max_probes)
            rank = tl.where(found >= 0, found >> 32, NO_RANK)
            chunk_best = tl.min(rank, 0)
            chunk_at = tl.min(tl.where(inside & (rank == chunk_best), i, n), 0)
            chunk_id = tl.sum(tl.where(i == chunk_at, found & 0xFFFFFFFF, 0), 0)
            better = chunk_best < best  # strictly: an earlier chunk keeps ties (leftmost)
            best_at = tl.where(better, chunk_at, best_at)
            best_id = tl.where(better, chunk_id, best_id)
            best = tl.minimum(chunk_best, best)
        if best < NO_RANK:
            tl.debug_barrier()
            tl.store(base + best_at, best_id)
            # Shift the rest of the row left by one, chunk by chunk; a barrier between the loads
            # and the stores, so that no lane overwrites a token another lane has yet to read.
            for chunk in range(best_at + 1, n - 1, BLOCK):
                i = chunk + lane
                inside = i < n - 1
                moved = tl.load(base + i + 1, mask=inside, other=0)
                tl.debug_barrier()
                tl.store(base + i, moved, mask=inside)
                tl.debug_barrier()
            n = n - 1
            go = n > 1
        else:
            go = n < 0  # False, as a tensor like the other branch's
    tl.store(lengths_ptr + row, n)


def bpe_merge_triton(tokens: torch.Tensor, offsets: torch.Tensor, *, slot_keys: torch.Tensor,
                     slot_values: torch.Tensor, hash_mask: int, max_probes: int, vocab_size: int,
                     block: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Merged (tokens, offsets) of ragged rows; ``block``: lanes per program (a power of 2).

    128 lanes: BPE words are a few to 256 symbols, so most rows fit one chunk and a wider block
    would idle its lanes.
    """
    from gputok.ragged import offsets_from_lengths, span_indices

    num_rows = offsets.numel() - 1
    work = tokens.long().contiguous().clone()
    offsets = offsets.long().contiguous()
    lengths = torch.zeros(num_rows, dtype=torch.int64, device=tokens.device)
    if num_rows == 0:
        return work, offsets_from_lengths(lengths)
    _bpe_merge_kernel[(num_rows,)](work, offsets, lengths, slot_keys, slot_values, hash_mask,
                                   64 - hash_mask.bit_length(), max_probes, vocab_size, BLOCK=block)
    index, out_offsets = span_indices(offsets[:-1], lengths)
    return work[index], out_offsets
