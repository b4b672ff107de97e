"""Batched lookups in a linear-probing hash map (``gputok.hashing.HashMap``), one query per lane.

Torch twin: ``gputok.hashing.hash_lookup`` (same arguments, same result). BPE ranks every adjacent
pair of a batch through it each merge round.
"""

import torch
import triton
import triton.language as tl

# gputok.hashing.home_slot's multiplier; a constexpr, as kernels may read no other globals
FIBONACCI = tl.constexpr(0x9E3779B97F4A7C15 - (1 << 64))


@triton.jit
def probe(key, searching, result, slot_keys_ptr, slot_values_ptr, hash_mask, hash_shift, max_probes):
    """The value stored under each ``key`` where ``searching``, else ``result``: linear probing
    from the key's home slot (the one helper of every kernel that reads a ``HashMap``)."""
    slot = ((key * FIBONACCI) >> hash_shift) & hash_mask  # & mask makes the shift logical
    for _ in range(max_probes):
        found = tl.load(slot_keys_ptr + slot, mask=searching, other=-1)
        hit = searching & (found == key)
        result = tl.where(hit, tl.load(slot_values_ptr + slot, mask=hit, other=-1), result)
        searching = searching & ~hit & (found != -1)
        slot = (slot + 1) & hash_mask
    return result


@triton.jit
def probe_until_found(key, searching, result, slot_keys_ptr, slot_values_ptr, hash_mask, hash_shift, max_probes):
    """:func:`probe` that stops as soon as no lane is searching (most keys sit in their home slot
    or the next: 1-2 steps instead of ``max_probes``, for kernels that probe in their inner loop)."""
    slot = ((key * FIBONACCI) >> hash_shift) & hash_mask
    step = 0
    while (step < max_probes) & (tl.max(searching.to(tl.int32), 0) > 0):
        found = tl.load(slot_keys_ptr + slot, mask=searching, other=-1)
        hit = searching & (found == key)
        result = tl.where(hit, tl.load(slot_values_ptr + slot, mask=hit, other=-1), result)
        searching = searching & ~hit & (found != -1)
        slot = (slot + 1) & hash_mask
        step += 1
    return result


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["n", "hash_mask", "hash_shift", "max_probes", "default"])
def _hash_lookup_kernel(query_ptr, out_ptr, slot_keys_ptr, slot_values_ptr, n, hash_mask, hash_shift,
                        max_probes, default, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < n
    key = tl.load(query_ptr + index, mask=inside, other=0)
    result = probe(key, inside, tl.full([BLOCK], default, dtype=tl.int64), slot_keys_ptr, slot_values_ptr,
                   hash_mask, hash_shift, max_probes)
    tl.store(out_ptr + index, result, mask=inside)


def hash_lookup_triton(slot_keys: torch.Tensor, slot_values: torch.Tensor, mask: int, max_probes: int,
                       query: torch.Tensor, default: int = -1) -> torch.Tensor:
    query = query.long().contiguous()
    out = torch.empty_like(query)
    if query.numel() == 0:
        return out
    # 1024 lanes: the loop is a handful of gathers per lane, so wide blocks keep the GPU busy.
    block = 1024
    _hash_lookup_kernel[(triton.cdiv(query.numel(), block),)](
        query, out, slot_keys, slot_values, query.numel(), mask, 64 - mask.bit_length(), max_probes, default,
        BLOCK=block)
    return out
