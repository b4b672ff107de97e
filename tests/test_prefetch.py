"""``kernels._numba.prefetch``: a hint that changes no result, at any index, and takes only arrays
whose items it can count (C-contiguous)."""

import numba
import numpy as np
import pytest

from gputok.kernels._numba import prefetch


@numba.njit
def _sum_with_prefetches(table, ahead):
    total = 0
    flat = table.size
    for i in range(flat):
        prefetch(table, i + ahead)  # past the end too: a prefetch never faults
        total += table[i // table.shape[1], i % table.shape[1]]
    return total


@pytest.mark.parametrize("ahead", [0, 7, 1 << 40, -(1 << 40)])
def test_prefetch_changes_nothing(ahead):
    table = np.arange(64 * 5, dtype=np.int64).reshape(64, 5)
    assert _sum_with_prefetches(table, ahead) == int(table.sum())


def test_prefetch_takes_only_contiguous_arrays():
    table = np.arange(40, dtype=np.int64).reshape(8, 5)
    with pytest.raises(numba.core.errors.TypingError):
        _sum_with_prefetches(table[:, ::2], 1)
