"""The training kernel against its torch twin, under TRITON_INTERPRET=1 (set by conftest.py).

``pair_count_triton`` must equal ``pair_windows_torch`` (window keys and weights) on odd shapes:
empty, one symbol, rows of length 0 and 1, sizes just under and over a block of 1024 lanes, counts
above 2**31, and real words. Then the whole merge loop with the kernel forced on must learn the
same merges as with the twin; ``apply_merge`` runs the same on torch tensors and numpy arrays.
"""

import random

import numpy as np
import pytest
import torch

from gputok import _dispatch
from gputok.kernels.pair_count import pair_count_triton
from gputok.ragged import Ragged
from gputok.trainers import learn_bpe
from gputok.trainers.pair_ops import apply_merge, pair_count, pair_windows_torch


def _random_rows(num_rows, max_len, alphabet, seed):
    rng = random.Random(seed)
    lengths = [rng.randint(0, max_len) for _ in range(num_rows)]
    symbols = [rng.randrange(alphabet) for _ in range(sum(lengths))]
    rows = [i for i, n in enumerate(lengths) for _ in range(n)]
    counts = [rng.choice([1, 2, 7, 3 << 31, 5 << 40]) for _ in range(num_rows)]
    return (torch.tensor(symbols, dtype=torch.int32), torch.tensor(rows, dtype=torch.int64),
            torch.tensor(counts, dtype=torch.int64))


@pytest.mark.parametrize("num_rows,max_len", [(0, 3), (1, 1), (1, 2), (3, 0), (40, 5), (300, 6), (173, 12)])
def test_pair_count_kernel_equals_twin(num_rows, max_len):
    symbols, rows, counts = _random_rows(num_rows, max_len, alphabet=5, seed=num_rows * 31 + max_len)
    expected = pair_windows_torch(symbols, rows, counts)
    got = pair_count_triton(symbols, rows, counts)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert torch.equal(g, e)


def test_pair_count_block_edges():
    # 1023, 1024 and 1025 symbols in one row: windows end exactly at, before and after a block
    for n in (1023, 1024, 1025):
        symbols = torch.arange(n, dtype=torch.int32) % 3
        rows, counts = torch.zeros(n, dtype=torch.int64), torch.tensor([2 ** 33])
        assert all(torch.equal(e, g) for e, g in zip(pair_windows_torch(symbols, rows, counts),
                                                     pair_count_triton(symbols, rows, counts)))


def test_pair_count_both_backends_count_every_window():
    # "a a a a" holds (a, a) three times; counts above 2**31 stay exact
    symbols = torch.tensor([0, 0, 0, 0, 1, 0], dtype=torch.int32)
    rows = torch.tensor([0, 0, 0, 0, 1, 1])
    counts = torch.tensor([3 << 31, 5])
    for name in ("torch", "triton"):
        with _dispatch.use_backend(name):
            keys, totals, slot = pair_count(symbols, rows, counts)
        assert keys.tolist() == [0, 1 << 32]
        assert totals.tolist() == [9 << 31, 5]
        assert slot.tolist() == [0, 0, 0, -1, 1, -1]


def _linked(words):
    """Flat int32 symbols with nxt / prv links (-1 at word ends) for a list of symbol lists."""
    symbols = np.array([s for w in words for s in w], dtype=np.int32)
    nxt = np.arange(1, symbols.size + 1, dtype=np.int32)
    prv = np.arange(-1, symbols.size - 1, dtype=np.int32)
    end = 0
    for w in words:
        if w:
            prv[end] = -1
            end += len(w)
            nxt[end - 1] = -1
    return symbols, nxt, prv


def _starts(symbols, nxt, a, b):
    """Left-to-right, non-overlapping occurrences of (a, b) (what the trainer hands the op)."""
    starts, p = [], 0
    while p < symbols.size:
        if symbols[p] == a and nxt[p] >= 0 and symbols[nxt[p]] == b:
            starts.append(p)
            p = nxt[p] + 1
        else:
            p += 1
    return np.array(starts, dtype=np.int32)


def test_apply_merge_on_torch_and_numpy():
    symbols, nxt, prv = _linked([[0, 0, 0, 0, 0], [1, 0, 0]])
    starts = _starts(symbols, nxt, 0, 0)
    assert starts.tolist() == [0, 2, 6]
    as_numpy = [x.copy() for x in (symbols, nxt, prv)]
    as_torch = [torch.from_numpy(x.copy()) for x in (symbols, nxt, prv)]
    apply_merge(*as_numpy, starts, 9)
    apply_merge(*as_torch, torch.from_numpy(starts), 9)
    assert as_numpy[0].tolist() == [9, -1, 9, -1, 0, 1, 9, -1]
    assert all(np.array_equal(n, t.numpy()) for n, t in zip(as_numpy, as_torch))


def test_merge_loop_with_the_kernel_equals_the_twin():
    rng = random.Random(5)
    text = ["".join(rng.choice("aab c") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    words = Ragged.from_lengths(torch.tensor([ord(c) for w in text for c in w]),
                                torch.tensor([len(w) for w in text]))
    counts = torch.tensor([rng.randint(1, 9) for _ in text])
    results = []
    for name in ("torch", "triton"):
        with _dispatch.use_backend(name):
            results.append(learn_bpe(words, counts, vocab_size=60, progress=False))
    assert results[0] == results[1]
    assert len(results[0][1]) > 20


def test_pair_count_dense_table_equals_sort():
    symbols, rows, counts = _random_rows(500, 9, alphabet=37, seed=3)
    for name in ("torch", "triton"):
        with _dispatch.use_backend(name):
            by_sort = pair_count(symbols, rows, counts)
            by_table = pair_count(symbols, rows, counts, num_symbols=37)
        for s, t in zip(by_sort, by_table):
            assert s.dtype == t.dtype and torch.equal(s, t)
