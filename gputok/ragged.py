"""Ragged tensors: a batch of variable-length rows as one flat ``values`` tensor plus ``offsets``.

Row ``i`` is ``values[offsets[i]:offsets[i + 1]]``; ``offsets`` is int64 with ``len(rows) + 1``
entries, starting at 0. Bytes, codepoints, words and token ids of a batch are all ragged tensors,
and the segment helpers below replace per-row Python loops.

>>> r = Ragged.from_lengths(torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([2, 0, 4]))
>>> r.lengths().tolist(), r.row_ids().tolist()
([2, 0, 4], [0, 0, 2, 2, 2, 2])
>>> r.tolist()
[[1, 2], [], [3, 4, 5, 6]]
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Ragged:
    values: torch.Tensor
    offsets: torch.Tensor

    @staticmethod
    def from_lengths(values: torch.Tensor, lengths: torch.Tensor) -> Ragged:
        return Ragged(values, offsets_from_lengths(lengths))

    def __len__(self) -> int:
        return self.offsets.numel() - 1

    @property
    def device(self) -> torch.device:
        return self.values.device

    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def row_ids(self) -> torch.Tensor:
        """The row of every value: ``[2, 0, 4]`` lengths -> ``[0, 0, 2, 2, 2, 2]``."""
        return row_ids(self.offsets, self.values.numel())

    def tolist(self) -> list[list]:
        flat = self.values.tolist()
        bounds = self.offsets.tolist()
        return [flat[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    def to(self, device: torch.device | str) -> Ragged:
        return Ragged(self.values.to(device), self.offsets.to(device))


def rows_as_lists(values: torch.Tensor | np.ndarray, offsets: torch.Tensor | np.ndarray) -> list[list]:
    """The rows of flat ``values`` cut at ``offsets`` as Python lists: one conversion of all
    values, then a slice per row, with the cyclic garbage collector paused: every new list counts
    towards a collection, and with torch imported a full one walks ~250k objects (65,536 lines of
    English, 643k tokens: 0.57-0.70 s of slicing with it, 0.03-0.06 s without).

    >>> rows_as_lists(torch.tensor([5, 6, 7]), torch.tensor([0, 2, 2, 3]))
    [[5, 6], [], [7]]
    """
    flat, bounds = values.tolist(), offsets.tolist()
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [flat[a:b] for a, b in zip(bounds, bounds[1:])]
    finally:
        if collecting:
            gc.enable()


def nonzero(mask: torch.Tensor) -> torch.Tensor:
    """Indices (int64) of the non-zero entries of a 1-D tensor: ``torch.nonzero(mask).flatten()``.

    On the CPU through numpy's ``flatnonzero``, ~6x faster than ``torch.nonzero`` there (2M
    entries: 1.7 ms against 10 ms, one thread); boolean-mask indexing ``x[mask]`` costs a
    ``torch.nonzero`` too, so hot paths write ``x.index_select(0, nonzero(mask))``.

    >>> nonzero(torch.tensor([False, True, True, False])).tolist()
    [1, 2]
    """
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return torch.nonzero(mask).flatten()


def search_sorted(sorted_values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """``torch.searchsorted(sorted_values, query)`` (left side, int64), through numpy on the CPU:
    ~1.7x faster there (65k queries into 540k values: 2.0 ms against 3.4 ms), and like
    ``flatnonzero`` it releases the GIL, so chunk threads run it side by side. (numpy's cumsum is
    ~2x faster than torch's on bools too, but it holds the GIL: chunk threads running it wait for
    each other, and Unigram's 2-thread encode lost ~12% with it.)"""
    if sorted_values.device.type == "cpu" and sorted_values.dtype == query.dtype:
        return torch.from_numpy(np.searchsorted(sorted_values.numpy(), query.numpy()).astype(np.int64, copy=False))
    return torch.searchsorted(sorted_values, query)


def select(mask: torch.Tensor, a: torch.Tensor | int, b: torch.Tensor | int) -> torch.Tensor:
    """``torch.where(mask, a, b)`` for integer tensors of one dtype (broadcast), one of them
    possibly an int.

    On the CPU as ``b + (a - b) * mask`` (integers wrap around, so it is exact): torch.where
    branches per element there, ~6x slower than these three passes on an irregular mask (781k
    int32: 3.1 ms against 0.5 ms; the kinds of a split's segments: 1.2 ms against 0.4 ms). On a
    mask that is nearly all True or all False torch.where is the faster one (int64 hash lookups
    with 97% hits: 0.57 ms against 0.69 ms), so those keep it.

    >>> select(torch.tensor([True, False]), torch.tensor([1, 2]), 7).tolist()
    [1, 7]
    """
    if a.device.type != "cpu":
        return torch.where(mask, a, b)
    return (a - b).mul_(mask).add_(b)


def offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    offsets = torch.empty(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    offsets[0] = 0
    torch.cumsum(lengths, 0, out=offsets[1:])
    return offsets


def repeat_rows(values: torch.Tensor, offsets: torch.Tensor, total: int) -> torch.Tensor:
    """``values[i]`` repeated for every position of row ``i``: ``torch.repeat_interleave(values,
    lengths)`` for the rows of ``offsets`` (``total = offsets[-1]``).

    A scatter-add of the differences at the row starts and one cumsum: ~2x faster than
    ``repeat_interleave`` on CPU (540k rows, 2.1M values: 4.5 ms against 8.1 ms). Integer
    differences wrap around modulo the dtype's width and the cumsum undoes them exactly.

    >>> repeat_rows(torch.tensor([7, 8, 9]), torch.tensor([0, 2, 2, 5]), 5).tolist()
    [7, 7, 9, 9, 9]
    """
    return _row_runs(values, offsets, total, step=0)


def _row_runs(row_values: torch.Tensor, offsets: torch.Tensor, total: int, *, step: int) -> torch.Tensor:
    """``row_values[i] + step * k`` at every position ``k`` (counted over all rows) of row ``i``:
    one cumsum of ``step`` everywhere plus each row's change of ``row_values`` at its first
    position (a scatter-add; empty rows add changes that cancel out)."""
    delta = torch.full((total + 1,), step, dtype=row_values.dtype, device=row_values.device)
    delta[:1] = 0
    if row_values.numel():
        delta.scatter_add_(0, _zero_based(offsets[:-1]), _steps(row_values))
    return torch.cumsum(delta[:total], 0, dtype=row_values.dtype)


def _zero_based(row_starts: torch.Tensor) -> torch.Tensor:
    """``row_starts`` shifted so that the first is 0 (int64); on the CPU without a copy when it is 0 already."""
    if row_starts.device.type == "cpu" and row_starts.dtype == torch.int64 and (not row_starts.numel() or row_starts[0] == 0):
        return row_starts
    return (row_starts - row_starts[:1]).long()


def _steps(values: torch.Tensor) -> torch.Tensor:
    """``values[i] - values[i - 1]``, with ``values[-1]`` read as 0: ``torch.diff`` with a zero
    prepended, without the copy its ``prepend`` makes."""
    out = torch.empty_like(values)
    out[:1] = values[:1]
    torch.sub(values[1:], values[:-1], out=out[1:])
    return out


def row_ids(offsets: torch.Tensor, total: int) -> torch.Tensor:
    return repeat_rows(torch.arange(offsets.numel() - 1, device=offsets.device), offsets, total)


def segment_sum(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sum of each row, by a cumsum difference (faster than ``index_add_`` on int64 here).

    Integer sums wrap around modulo 2**64, which is what the word hashes rely on.
    """
    csum = torch.zeros(values.numel() + 1, dtype=values.dtype, device=values.device)
    torch.cumsum(values, 0, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def positions_in_rows(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """Index of every value inside its row: lengths ``[2, 3]`` -> ``[0, 1, 0, 1, 2]``."""
    return torch.arange(total, device=offsets.device) - repeat_rows(offsets[:-1], offsets, total)


def span_indices(starts: torch.Tensor, lengths: torch.Tensor, *,
                 dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices of the spans ``[starts[i], starts[i] + lengths[i])``, in order, and their offsets.

    ``dtype``: of the indices, int64 unless given (int32 halves the memory traffic of the
    per-value passes where the indices fit); the offsets are int64.

    >>> idx, off = span_indices(torch.tensor([5, 0]), torch.tensor([2, 3]))
    >>> idx.tolist(), off.tolist()
    ([5, 6, 0, 1, 2], [0, 2, 5])
    """
    offsets = offsets_from_lengths(lengths)
    total = int(offsets[-1])
    # Each value's index is its position plus its span's (start - offset).
    return _row_runs((starts - offsets[:-1]).to(dtype or torch.int64), offsets, total, step=1), offsets


def expand_rows(table: Ragged, keys: torch.Tensor) -> tuple[Ragged, torch.Tensor]:
    """Replace every key by its row of ``table`` (a ragged map): the core of per-codepoint rewrites.

    Returns the expanded ragged values (one row per key) and, for each output value, the index of
    the key it came from.

    >>> table = Ragged.from_lengths(torch.tensor([7, 8, 9]), torch.tensor([0, 1, 2]))
    >>> out, src = expand_rows(table, torch.tensor([2, 0, 1]))
    >>> out.values.tolist(), src.tolist()
    ([8, 9, 7], [0, 0, 2])
    """
    starts = table.offsets[keys]
    lengths = table.offsets[keys + 1] - starts  # only the rows asked for: tables can be 1.1M rows
    if bool((lengths == 1).all()):  # the common case (e.g. English through a normalizer): a gather
        src = torch.arange(keys.numel(), device=keys.device)
        return Ragged(table.values[starts], torch.arange(keys.numel() + 1, device=keys.device)), src
    out_offsets = offsets_from_lengths(lengths)
    total = int(out_offsets[-1])
    src = row_ids(out_offsets, total)
    gather = starts[src] + positions_in_rows(out_offsets, total)
    return Ragged(table.values[gather], out_offsets), src
