"""A batch too large for the one-call path of the SentencePiece BPE kernel (Mistral's model), encoded
a part per CPU thread (``Tokenizer._cells_in_parts``: ``encode_part`` on each thread with that
thread's word store, then ``cells_numba`` on the caller), against the same batch on one thread:
the same tensors for every post-processing option, cold and warm word stores, and sentencepiece's
ids; 8 Python threads calling at once get what one call gets (``test_unigram_parts``' test)."""

import itertools

import pytest
import sentencepiece
from test_cpu_threads import _assert_same
import test_unigram_parts
from test_sp_cells import OPTIONS
# The eight-threads test runs again with this module's ``tok``.
from test_unigram_parts import _spy_parts, test_eight_threads_get_one_calls_tensors  # noqa: F401

from gputok import Tokenizer, assets, set_num_threads
from gputok.word_cache import WordCache

lines = test_unigram_parts.lines  # the fixture, under its own name


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))


def _one_thread(tok, batch, **kwargs):
    set_num_threads(1)
    try:
        return tok(batch, **kwargs)
    finally:
        set_num_threads(None)  # split_small's two torch threads


def test_parts_give_one_threads_tensors(tok, lines, split_small, monkeypatch):
    calls = _spy_parts(tok, monkeypatch)
    batches = [lines, lines[:150], lines[200:]]
    for word_cache in (None, WordCache()):  # none, then cold at first and warm from the batches before
        tok.word_cache = word_cache
        for batch, kwargs in itertools.product(batches, OPTIONS):
            calls.clear()
            got = tok(batch, **kwargs)
            assert len(calls) == 2, (len(batch), kwargs)  # two parts, one per thread
            want = _one_thread(tok, batch, **kwargs)
            assert len(calls) == 2, (len(batch), kwargs)  # one thread encodes no part
            assert [got[key].dtype for key in got] == [want[key].dtype for key in want], kwargs
            _assert_same(got, want)


def test_parts_give_sentencepieces_ids(tok, lines, split_small, monkeypatch):
    calls = _spy_parts(tok, monkeypatch)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(assets.fetch("mistral-sp-model")))
    tok.word_cache = WordCache()
    for _ in range(2):  # cold stores, then warm
        got = tok(lines, add_special_tokens=False, padding=False)
        ids, ends = got["input_ids"].tolist(), got["row_offsets"].tolist()
        assert [ids[a:b] for a, b in zip(ends, ends[1:])] == sp.encode(lines)
    assert len(calls) == 4
