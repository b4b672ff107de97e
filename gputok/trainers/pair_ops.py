"""The two array ops of the BPE merge loop.

``pair_count`` counts the adjacent symbol pairs of all words, each window weighted by its word's
count (overlapping windows all count: ``a a a`` holds ``(a, a)`` twice); ``gputok._dispatch.backend``
picks its Triton kernel (``gputok.kernels.pair_count``, for CUDA words) or the torch twin
``pair_windows_torch``. ``apply_merge`` rewrites the occurrences of one merge in the flat, linked
symbol lists, in the merge loop's numpy arrays.

Memory: ``pair_count`` holds two int64 arrays per symbol (the window keys and weights) and the sort
of the keys; ``apply_merge`` works in place.
"""

from __future__ import annotations

import torch

from .. import _dispatch


def pair_windows_torch(symbols: torch.Tensor, row_ids: torch.Tensor,
                       counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Window keys ``left << 32 | right`` (-1 at a row's last symbol) and their weights.

    The twin of ``gputok.kernels.pair_count.pair_count_triton``.

    >>> keys, weights = pair_windows_torch(torch.tensor([1, 2, 2, 7]), torch.tensor([0, 0, 0, 1]),
    ...                                    torch.tensor([5, 3]))
    >>> keys.tolist() == [1 << 32 | 2, 2 << 32 | 2, -1, -1], weights.tolist()
    (True, [5, 5, 0, 0])
    """
    # in-place steps: the corpus-sized temporaries are what bounds the trainer's peak memory
    keys = torch.full(symbols.shape, -1, dtype=torch.int64, device=symbols.device)
    weights = torch.zeros(symbols.shape, dtype=torch.int64, device=symbols.device)
    cut = ~(row_ids[:-1] == row_ids[1:])
    pairs = keys[:-1]
    pairs.copy_(symbols[:-1])
    pairs.bitwise_left_shift_(32).bitwise_or_(symbols[1:]).masked_fill_(cut, -1)
    torch.index_select(counts.long(), 0, row_ids[:-1], out=weights[:-1])
    weights[:-1].masked_fill_(cut, 0)
    return keys, weights


def pair_count(symbols: torch.Tensor, row_ids: torch.Tensor, counts: torch.Tensor, *,
               num_symbols: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unique pair keys (sorted), their weighted counts, and the int32 pair index of every window (-1: none).

    Pairs ``(left, right)`` are keyed ``left << 32 | right``, so sorted keys are sorted pairs. With
    ``num_symbols`` (all symbols below it) and ``num_symbols**2 <= 2**22``, the pairs are counted
    in a dense table (32 MB at most) instead of sorted.

    >>> keys, totals, slot = pair_count(torch.tensor([1, 2, 2, 2]), torch.tensor([0, 0, 0, 0]),
    ...                                 torch.tensor([3]))
    >>> [(k >> 32, k & 0xFFFFFFFF) for k in keys.tolist()], totals.tolist(), slot.tolist()
    ([(1, 2), (2, 2)], [3, 6], [0, 1, 1, -1])
    """
    if _dispatch.backend(symbols.device) == "triton":
        from ..kernels.pair_count import pair_count_triton

        keys, weights = pair_count_triton(symbols, row_ids, counts)
    else:
        keys, weights = pair_windows_torch(symbols, row_ids, counts)
    window = keys >= 0
    if num_symbols is not None and num_symbols * num_symbols <= 1 << 22:
        # dense pair numbers, in place: the corpus-sized arrays bound the trainer's peak memory
        bins = num_symbols * num_symbols
        high = keys >> 32
        dense = keys.bitwise_and_(0xFFFFFFFF).add_(high.mul_(num_symbols))
        del high
        dense.masked_fill_(~window, bins)  # an extra bin for the non-windows
        table = torch.zeros(bins + 1, dtype=torch.int64, device=dense.device)
        table.index_add_(0, dense, weights)
        del weights
        present = torch.bincount(dense, minlength=bins + 1)[:bins] > 0
        where = torch.nonzero(present).flatten()
        unique = ((where // num_symbols) << 32) | (where % num_symbols)
        totals = table[where]
        rank = torch.cat((torch.cumsum(present, 0, dtype=torch.int32) - 1,
                          torch.tensor([-1], dtype=torch.int32, device=dense.device)))
        return unique, totals, rank[dense]
    unique, inverse = torch.unique(keys[window], return_inverse=True)
    totals = torch.zeros(unique.numel(), dtype=torch.int64, device=keys.device)
    totals.index_add_(0, inverse, weights[window])
    slot = torch.full(window.shape, -1, dtype=torch.int32, device=window.device)
    slot[window] = inverse.int()
    return unique, totals, slot


def apply_merge(symbols: torch.Tensor, nxt: torch.Tensor, prv: torch.Tensor, starts: torch.Tensor,
                new_id: int) -> None:
    """Merge the occurrences starting at ``starts`` into ``new_id``, in place.

    ``symbols[p] = new_id``, the right half ``q = nxt[p]`` dies (symbol -1), ``p`` links to
    ``r = nxt[q]``. ``starts`` must not overlap (no start is the right half of another); all four
    are int32. Only indexing is used, so the same code runs on numpy arrays: the merge loop passes
    its numpy state (numpy's per-op cost on these small index arrays is a fraction of torch's).

    >>> sym = torch.tensor([5, 6, 5, 6], dtype=torch.int32)
    >>> nxt = torch.tensor([1, 2, 3, -1], dtype=torch.int32)
    >>> prv = torch.tensor([-1, 0, 1, 2], dtype=torch.int32)
    >>> apply_merge(sym, nxt, prv, torch.tensor([0, 2], dtype=torch.int32), 9)
    >>> sym.tolist(), nxt.tolist(), prv.tolist()
    ([9, -1, 9, -1], [2, 2, -1, -1], [-1, 0, 0, 2])
    """
    q = nxt[starts]
    r = nxt[q]
    symbols[starts] = new_id
    symbols[q] = -1
    nxt[starts] = r
    linked = r >= 0
    prv[r[linked]] = starts[linked]
