"""A batch too large for the one-call path of the SentencePiece Unigram kernel, encoded a part per
CPU thread (``Tokenizer._cells_in_parts``: ``encode_part`` on each thread, then ``cells_numba``
on the caller), against the same tokenizer with that path off (the chunked encode, then the
post-processing kernels): the same tensors for every post-processing option, cold and warm word
caches, with and without byte fallback; 8 Python threads calling at once get what one call gets;
the caller's part is the longer by what a worker waits to start."""

import itertools
import random
import threading

import numpy as np
import pytest
from test_cpu_threads import _assert_same
from test_sp_cells import OPTIONS
from test_unigram import trained_model

from gputok import Tokenizer, _cpu_threads, assets, set_num_threads
from gputok import tokenizer as tokenizer_module
from gputok.word_cache import WordCache


@pytest.fixture(scope="module", params=[False, True], ids=["unk", "byte-fallback"])
def tok(request):
    return Tokenizer.from_sentencepiece(trained_model(8000, byte_fallback=request.param))


@pytest.fixture(scope="module")
def lines(parity_lines):
    rng = random.Random(7)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity_lines, 300) + rng.sample(chinese, 40) + ["", " ", "x" * 3000]


def _spy_parts(tok, monkeypatch) -> list:
    whole = tok._whole_pipeline_kernel
    calls = []
    encode_part = whole.encode_part
    monkeypatch.setattr(whole, "encode_part", lambda *args: calls.append(1) or encode_part(*args))
    return calls


def check_parts_give_the_chunked_paths_tensors(tok, lines, monkeypatch) -> None:
    """The parts path against the chunked one (``PARTS_MAX_CHARS`` 0) on three batches of ``lines``,
    for every option, without a word cache, then with one cold at first (also for
    tests/test_wordpiece_bpe_parts.py; two CPU threads: ``split_small``)."""
    calls = _spy_parts(tok, monkeypatch)
    batches = [lines, lines[:150], lines[200:]]
    for word_cache in (None, WordCache()):  # none, then one cold at first and warm from the batches before
        tok.word_cache = word_cache
        for batch, kwargs in itertools.product(batches, OPTIONS):
            calls.clear()
            got = tok(batch, **kwargs)
            assert len(calls) == 2, (len(batch), kwargs)  # two parts, one per thread
            with monkeypatch.context() as patch:
                patch.setattr(tokenizer_module, "PARTS_MAX_CHARS", 0)
                want = tok(batch, **kwargs)
            assert len(calls) == 2, (len(batch), kwargs)  # that path encodes no part
            assert [got[key].dtype for key in got] == [want[key].dtype for key in want], kwargs
            _assert_same(got, want)


def check_eight_threads_get_one_calls_tensors(tok, lines, monkeypatch) -> None:
    """8 Python threads calling ``tok`` at once on one word cache, three calls each, get the
    chunked path's tensors of each batch, every call in two parts."""
    calls = _spy_parts(tok, monkeypatch)
    tok.word_cache = WordCache()
    batches = [lines[k * 30:] + lines[:k * 30] for k in range(8)]
    with monkeypatch.context() as patch:
        patch.setattr(tokenizer_module, "PARTS_MAX_CHARS", 0)
        want = [tok(batch, padding=True) for batch in batches]
    tok.word_cache = WordCache()
    results = [None] * 8

    def run(k):
        results[k] = [tok(batches[k], padding=True) for _ in range(3)]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    set_num_threads(2)  # in every thread, not only this one's torch count
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        set_num_threads(None)
    assert len(calls) == 8 * 3 * 2
    for got, expected in zip(results, want):
        for one in got:
            _assert_same(one, expected)


def test_parts_give_the_chunked_paths_tensors(tok, lines, split_small, monkeypatch):
    check_parts_give_the_chunked_paths_tensors(tok, lines, monkeypatch)


def test_eight_threads_get_one_calls_tensors(tok, lines, split_small, monkeypatch):
    check_eight_threads_get_one_calls_tensors(tok, lines, monkeypatch)


def test_the_callers_part_is_longer_by_a_workers_start():
    ends = np.cumsum(np.full(4000, 10, np.int64))
    set_num_threads(2)
    try:
        first, cut, last = _cpu_threads.part_bounds(ends)
    finally:
        set_num_threads(None)
    assert (first, last) == (0, 4000)
    caller, worker = int(ends[cut - 1]), int(ends[-1] - ends[cut - 1])
    assert abs(caller - worker + _cpu_threads.PART_CALLER_CHARS) <= 20  # within a text or two
