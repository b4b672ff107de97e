"""Padded outputs on the CPU in reused memory (``gputok._recycled``): the fill kernel writes every
cell, so a batch whose outputs start full of an earlier batch's values gives the tensors of the
ragged output padded, per chunk (``Tokenizer._padded_in_chunks``) and in row ranges
(``_padded_in_ranges``, a pair batch); and the pool hands a buffer out again only once nothing
views it, from any thread and in a forked child."""

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import gputok
from gputok import Tokenizer, _recycled
from gputok.data import Collate
from gputok.processors import filled_cells, pad
from gputok import tokenizer as tokenizer_module

GARBAGE = -7


@pytest.fixture(scope="module")
def lines(parity_lines):
    return [line for line in parity_lines[11::97] if line.strip()][:400] + ["", "x"]


@pytest.fixture
def garbage_memory(monkeypatch):
    """Every output of every size comes from the pool and starts as garbage (as reused memory may)."""
    real = _recycled.empty

    def dirty(shape, dtype):
        array = real(shape, dtype)
        array.fill(GARBAGE)
        return array

    monkeypatch.setattr(_recycled, "FROM_BYTES", 0)
    monkeypatch.setattr(_recycled, "empty", dirty)


@pytest.mark.parametrize("options", [{}, {"return_offsets": True, "padding_side": "left"},
                                     {"return_token_type_ids": True, "pad_to_multiple_of": 8}])
def test_every_cell_written_in_reused_memory(bert: Tokenizer, lines, split_small, garbage_memory, monkeypatch,
                                             options):
    batch = lines * 3
    pairs = lines * 4  # past PADDED_IN_RANGES_FROM tokens: post-processed in one pass, filled in row ranges
    in_ranges = []
    real_ranges = tokenizer_module._padded_in_ranges
    monkeypatch.setattr(tokenizer_module, "_padded_in_ranges", lambda *a: in_ranges.append(1) or real_ranges(*a))
    padding = {key: value for key, value in options.items() if key in ("padding_side", "pad_to_multiple_of")}
    ragged_options = {key: value for key, value in options.items() if key not in padding}
    left = options.get("padding_side") == "left"
    for args in ((batch,), (pairs, pairs[::-1])):
        padded = bert(*args, padding=True, **options)
        ragged = bert(*args, padding=False, **ragged_options)
        width = padded["input_ids"].shape[1]
        assert width % options.get("pad_to_multiple_of", 1) == 0
        assert width >= (ragged["row_offsets"].diff().max())
        # the torch reference's padding of the ragged rows (gputok.processors, tests/test_processors.py)
        filled = filled_cells(ragged["row_offsets"].diff(), width, left=left)
        expected = {"input_ids": pad(ragged["input_ids"], filled, pad_value=bert._pad_id),
                    "attention_mask": filled.long()}
        if "token_type_ids" in ragged:
            expected["token_type_ids"] = pad(ragged["token_type_ids"], filled, pad_value=0)
        if "offsets" in ragged:
            expected["offsets"] = pad(ragged["offsets"], filled[:, :, None].expand(-1, -1, 2), pad_value=0)
        assert padded.keys() == expected.keys()
        for key, tensor in expected.items():
            assert torch.equal(padded[key], tensor), key
        assert (padded["attention_mask"] == 0).any()  # there were pad cells
    assert split_small[:2] == [2, 2] and in_ranges  # per chunk (single texts); in row ranges (pairs)


@pytest.fixture
def empty_pool():
    _recycled.release()
    yield
    _recycled.release()


def test_a_dropped_output_is_reused(empty_pool):
    tensor = torch.from_numpy(_recycled.empty((1000, 300), np.int64))
    pointer = tensor.data_ptr()
    del tensor
    assert _recycled.free_bytes() == 1000 * 300 * 8
    again = _recycled.empty((1000, 300), np.int64)
    other = _recycled.empty((1000, 300), np.int64)
    assert again.ctypes.data == pointer and other.ctypes.data != pointer  # taken: not handed out twice
    del again, other
    assert _recycled.free_bytes() == 2 * 1000 * 300 * 8
    gputok.release_memory()
    assert _recycled.free_bytes() == 0


def test_a_view_keeps_its_buffer(empty_pool):
    tensor = torch.from_numpy(_recycled.empty((1000, 300), np.int64))
    tensor.fill_(5)
    row, as_numpy = tensor[10], tensor.numpy()[3:5]
    array = _recycled.empty((1000, 300), np.int64)
    array_view = array[7:9]
    del tensor, array
    assert _recycled.free_bytes() == 0
    for _ in range(3):
        _recycled.empty((1000, 300), np.int64).fill(9)
    assert (row == 5).all() and (as_numpy == 5).all()
    array_view[:] = 1
    del row, as_numpy, array_view
    assert _recycled.free_bytes() == 3 * 1000 * 300 * 8  # the two held, and the one the loop reused


def test_small_requests_and_the_cap(empty_pool, monkeypatch):
    assert not _recycled.empty((_recycled.FROM_BYTES // 8 - 1,), np.int64).base  # below FROM_BYTES: numpy's own
    big = _recycled.empty((4 << 20,), np.uint8)
    pointer = big.ctypes.data
    del big
    small = _recycled.empty((1 << 20,), np.uint8)
    assert small.ctypes.data != pointer and _recycled.free_bytes() == 4 << 20  # a quarter: not the big buffer
    del small
    monkeypatch.setattr(_recycled, "KEEP_BYTES", 5 << 20)
    held = [_recycled.empty((2 << 20,), np.uint8) for _ in range(3)]
    del held
    assert _recycled.free_bytes() <= 5 << 20


def test_threads_never_share_a_buffer(empty_pool):
    def work(k: int) -> bool:
        rng = np.random.default_rng(k)
        intact = True
        for _ in range(60):
            array = _recycled.empty((int(rng.integers(1 << 17, 3 << 17)),), np.int64)
            array.fill(k)
            time.sleep(0)  # let the other threads take and fill buffers meanwhile
            intact &= bool((array == k).all())
        return intact

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


def _in_child(queue) -> None:
    free = _recycled.free_bytes()
    array = _recycled.empty((1000, 300), np.int64)
    array.fill(3)
    pointer = array.ctypes.data
    del array
    queue.put((int(_recycled.empty((1000, 300), np.int64).ctypes.data == pointer), free))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")
def test_dataloader_workers_send_recycled_outputs(bert: Tokenizer, lines, empty_pool, monkeypatch):
    """Forked DataLoader workers whose every padded output is leased give the parent's batches: a
    worker's buffers go back to its pool once the batch is sent, and its next batch reuses them.
    Pairs: their rows are post-processed in row ranges (``_padded_in_ranges``), into leased arrays."""
    monkeypatch.setattr(_recycled, "FROM_BYTES", 0)
    monkeypatch.setattr(tokenizer_module, "PADDED_IN_RANGES_FROM", 0)
    leased = []
    real = _recycled.empty
    monkeypatch.setattr(_recycled, "empty", lambda *a: leased.append(1) or real(*a))
    collate = Collate(bert, fields=("text", "pair"))
    rows = list(zip(lines, lines[::-1]))
    expected = [collate(rows[i:i + 50]) for i in range(0, len(rows), 50)]
    assert leased

    def collate_counting(batch):  # and how many arrays this worker has leased, and holds free
        return collate(batch), len(leased), _recycled.free_bytes()

    loader = DataLoader(rows, batch_size=50, num_workers=2, multiprocessing_context="fork",
                        collate_fn=collate_counting)
    got = [({key: value.clone() for key, value in batch.items()}, count, free) for batch, count, free in loader]
    assert len(got) == len(expected)
    for (batch, count, _), want in zip(got, expected):
        assert count > len(leased)  # this worker's batches were leased too
        assert batch.keys() == want.keys()
        for key in want:
            assert torch.equal(batch[key], want[key]), key
    assert any(free for *_, free in got)  # a sent batch's buffers went back to its worker's pool


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")
def test_a_forked_child_has_its_own_pool(empty_pool):
    kept = _recycled.empty((1000, 300), np.int64)
    del kept  # the parent's pool holds a buffer at the fork
    assert _recycled.free_bytes() > 0
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    reused, free = queue.get(timeout=60)  # free at the child's start
    child.join(60)
    assert child.exitcode == 0 and reused == 1 and free == 0
