"""64-bit hashing and an open-addressing hash map, both as batched tensor operations.

``mix64`` is the splitmix64 finalizer written with int64 tensor ops (multiplication wraps modulo
2**64; right shifts are made logical with a mask). ``HashMap`` maps non-negative int64 keys to
int64 values with linear probing: one Fibonacci hash (a multiply and a shift: three tensor ops,
where mix64 takes twelve, which matters in the trie's inner loop), then ``max_probes`` gathers at
most, for any number of queries at once (the first probe is one pass over all queries, later
ones cover only the keys not resolved yet, and the last few keys probe all their slots at once).
It is the transition table of the vocabulary trie (``gputok.trie``) and is built once per
vocabulary. Memory: two int64 arrays of ``4 * len(keys)`` slots (load factor 1/4, which
keeps the longest probe sequence short).
"""

from __future__ import annotations

import torch

from . import _dispatch
from .ragged import nonzero

_M1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_M2 = 0x94D049BB133111EB - (1 << 64)
FIBONACCI = 0x9E3779B97F4A7C15 - (1 << 64)  # 2**64 / golden ratio, odd


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer: a bijection on 64-bit integers that scatters nearby inputs.

    >>> mix64(torch.tensor([0, 1])).tolist()
    [0, 6238072747940578789]
    """
    x = x.long()
    x = (x ^ _shr(x, 30)) * _M1
    x = (x ^ _shr(x, 27)) * _M2
    return x ^ _shr(x, 31)


def home_slot(keys: torch.Tensor, mask: int) -> torch.Tensor:
    """Fibonacci hashing: the top bits of ``key * 2**64/phi`` pick the slot of a power-of-2 table.

    (An arithmetic shift, then ``& mask``: the same bits as a logical shift, one op fewer.)
    """
    return ((keys * FIBONACCI) >> (64 - mask.bit_length())) & mask


class HashMap:
    """int64 keys (>= 0) -> int64 values, looked up in batches.

    >>> m = HashMap(torch.tensor([5, 9, 1 << 40]), torch.tensor([50, 90, 7]))
    >>> m.get(torch.tensor([9, 4, 1 << 40])).tolist()
    [90, -1, 7]
    """

    EMPTY = -1

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        keys, values = keys.long().cpu(), values.long().cpu()
        if keys.numel() and int(keys.min()) < 0:
            raise ValueError("HashMap keys must be non-negative")
        capacity = 1 << max(4, (4 * max(1, keys.numel()) - 1).bit_length())
        mask = capacity - 1
        slot_keys = torch.full((capacity,), self.EMPTY, dtype=torch.int64)
        slot_values = torch.full((capacity,), self.EMPTY, dtype=torch.int64)
        max_probes = insert(slot_keys, slot_values, mask, keys, values)
        duplicated = keys.numel() - int(torch.unique(keys).numel())
        if duplicated:
            raise ValueError(f"HashMap got {duplicated} duplicated keys")
        self.slot_keys, self.slot_values = slot_keys, slot_values
        self.mask, self.max_probes = mask, max_probes
        self._on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def tensors(self, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
        """The slot arrays on ``device`` (copied once per device)."""
        device = torch.device(device)
        if device.type == "cpu":
            return self.slot_keys, self.slot_values
        if device not in self._on_device:
            self._on_device[device] = (self.slot_keys.to(device), self.slot_values.to(device))
        return self._on_device[device]

    def get(self, query: torch.Tensor, default: int = -1) -> torch.Tensor:
        slot_keys, slot_values = self.tensors(query.device)
        return hash_lookup(slot_keys, slot_values, self.mask, self.max_probes, query, default)


def insert(slot_keys: torch.Tensor, slot_values: torch.Tensor, mask: int, keys: torch.Tensor,
           values: torch.Tensor) -> int:
    """Put distinct ``keys`` (absent from the table) and their values into the slot arrays, in
    place, by linear probing for all keys at once; returns the longest probe sequence + 1.

    The table must have a free slot per key. Several keys may want one free slot in the same
    round: the smallest key index wins it (deterministic), the others probe on.

    >>> keys, values = torch.full((8,), -1), torch.full((8,), -1)
    >>> insert(keys, values, 7, torch.tensor([3, 11]), torch.tensor([30, 110])) >= 1
    True
    >>> hash_lookup(keys, values, 7, 8, torch.tensor([11, 3, 5])).tolist()
    [110, 30, -1]
    """
    n = keys.numel()
    home = home_slot(keys, mask)
    pending = torch.arange(n, device=keys.device)
    attempt = 0  # every pending key has lost all its earlier rounds: it probes slot home + attempt
    max_probe = 0
    while pending.numel():
        slot = (home.index_select(0, pending) + attempt) & mask
        free = nonzero(slot_keys.index_select(0, slot) == HashMap.EMPTY)
        # Conflicts are resolved over the wanted slots only (a table-sized scratch array would
        # cost the whole table per call: the word cache inserts a few words per batch).
        free_slot, free_key = slot.index_select(0, free), pending.index_select(0, free)
        wanted, claim = torch.unique(free_slot, return_inverse=True)
        owner = torch.full((wanted.numel(),), n, dtype=torch.int64, device=keys.device)
        owner.scatter_reduce_(0, claim, free_key, reduce="amin")
        won = nonzero(owner.index_select(0, claim) == free_key)
        won_slot, won_key = free_slot.index_select(0, won), free_key.index_select(0, won)
        slot_keys.scatter_(0, won_slot, keys.index_select(0, won_key))
        slot_values.scatter_(0, won_slot, values.index_select(0, won_key))
        if won.numel():
            max_probe = attempt
        lost = torch.ones(pending.numel(), dtype=torch.bool, device=keys.device)
        lost.index_fill_(0, free.index_select(0, won), False)
        pending = pending.index_select(0, nonzero(lost))
        attempt += 1
    return max_probe + 1


_BLOCK_BELOW = 4096  # pending keys under which the remaining probes are one block (per-op overhead beats work)


def lookup(slot_keys: torch.Tensor, slot_values: torch.Tensor, mask: int, max_probes: int,
           query: torch.Tensor, default: int = -1) -> torch.Tensor:
    """:func:`hash_lookup` through the dispatch: the Triton kernel on CUDA, the torch twin on CPU."""
    if _dispatch.backend(query.device) == "triton":
        from .kernels.hash_lookup import hash_lookup_triton

        return hash_lookup_triton(slot_keys, slot_values, mask, max_probes, query, default)
    return hash_lookup(slot_keys, slot_values, mask, max_probes, query, default)


def hash_lookup(slot_keys: torch.Tensor, slot_values: torch.Tensor, mask: int, max_probes: int,
                query: torch.Tensor, default: int = -1) -> torch.Tensor:
    """Look ``query`` up in the slot arrays of a :class:`HashMap` (probing only unresolved keys).

    The torch twin of ``gputok.kernels.hash_lookup``.
    """
    query = query.long()
    slot = home_slot(query, mask)
    found = slot_keys.index_select(0, slot)
    hit = found == query
    # Most keys sit in their home slot (load factor <= 1/2): the first probe is one pass over
    # all queries, and only the rest probe on.
    result = torch.where(hit, slot_values.index_select(0, slot), default)
    pending = nonzero(~hit & (found != HashMap.EMPTY))
    slot, probes = slot.index_select(0, pending), 1
    while pending.numel() > _BLOCK_BELOW and probes < max_probes:  # a pass per probe while many are left
        slot = (slot + 1) & mask
        found = slot_keys.index_select(0, slot)
        hit = found == query.index_select(0, pending)
        at = nonzero(hit)
        result.scatter_(0, pending.index_select(0, at), slot_values.index_select(0, slot.index_select(0, at)))
        go_on = nonzero(~hit & (found != HashMap.EMPTY))
        pending, slot, probes = pending.index_select(0, go_on), slot.index_select(0, go_on), probes + 1
    if pending.numel() and probes < max_probes:
        # The few left probe all their remaining slots at once (one gather of a [pending, probes]
        # block instead of a pass per probe): a key never sits past an empty slot of its
        # sequence (nothing is deleted), so any hit in the block is the key.
        later = (slot[:, None] + torch.arange(1, max_probes - probes + 1, device=query.device)) & mask
        # (index_select of the flat block: advanced indexing cost ~2.7x more per element on the CPU)
        hits = slot_keys.index_select(0, later.flatten()).view_as(later) == query.index_select(0, pending)[:, None]
        at = nonzero(hits.any(1))
        if at.numel():
            where_hit = later.index_select(0, at).gather(1, hits.index_select(0, at).to(torch.uint8).argmax(1, keepdim=True))
            result.scatter_(0, pending.index_select(0, at), slot_values.index_select(0, where_hit.flatten()))
    return result
