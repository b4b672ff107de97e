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

from dataclasses import dataclass

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


def offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return offsets


def row_ids(offsets: torch.Tensor, total: int) -> torch.Tensor:
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(
        torch.arange(lengths.numel(), device=offsets.device), lengths, output_size=total
    )


def segment_sum(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sum of each row, by a cumsum difference (faster than ``index_add_`` on int64 here).

    Integer sums wrap around modulo 2**64, which is what the word hashes rely on.
    """
    csum = torch.zeros(values.numel() + 1, dtype=values.dtype, device=values.device)
    torch.cumsum(values, 0, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def positions_in_rows(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """Index of every value inside its row: lengths ``[2, 3]`` -> ``[0, 1, 0, 1, 2]``."""
    starts = torch.repeat_interleave(offsets[:-1], offsets[1:] - offsets[:-1], output_size=total)
    return torch.arange(total, device=offsets.device) - starts


def span_indices(starts: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices of the spans ``[starts[i], starts[i] + lengths[i])``, in order, and their offsets.

    >>> idx, off = span_indices(torch.tensor([5, 0]), torch.tensor([2, 3]))
    >>> idx.tolist(), off.tolist()
    ([5, 6, 0, 1, 2], [0, 2, 5])
    """
    offsets = offsets_from_lengths(lengths)
    total = int(offsets[-1])
    # One repeat_interleave: each value's index is its position plus its span's (start - offset).
    shift = torch.repeat_interleave(starts - offsets[:-1], lengths, output_size=total)
    return shift + torch.arange(total, device=starts.device), offsets


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
