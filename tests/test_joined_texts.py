"""``joined_texts_numba.split_joined`` (texts joined by NUL as units, lengths and part cuts) against
its reference: the plain join's units, ``np.fromiter(map(len, texts))`` and
``_cpu_threads._bounds``' cuts; and a batch whose texts hold NULs (the kernel declines, the
Python lengths take over) encodes as before, in parts and in one call."""

import random

import numpy as np
import pytest
from test_cpu_threads import _assert_same
from test_unigram_parts import _spy_parts

from gputok import Tokenizer, _cpu_threads, assets, set_num_threads
from gputok import tokenizer as tokenizer_module
from gputok.kernels import joined_texts_numba


def _units(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.int32)


def _reference(texts, threads, min_chars, caller_chars, monkeypatch):
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    monkeypatch.setattr(_cpu_threads, "MIN_CHUNK_CHARS", min_chars)
    bounds = (_cpu_threads._bounds(ends, 1, len(texts), threads, caller_chars)
              if threads >= 2 and len(texts) >= 2 else None)
    cuts = (np.empty(0, np.int64) if bounds is None
            else np.array([bounds, [0, *(int(ends[b - 1]) for b in bounds[1:])]], np.int64).T.ravel())
    return _units("".join(texts)), lengths, cuts


def _shapes(rng):
    words = ["a", "bb", "héllo", "日本語", "\U0001F600x", "\ud800", " ", "x" * 300]
    yield ["", ""]
    yield [""] * 50
    yield ["x" * 5000]
    yield ["x" * 5000, ""]
    yield ["", "y" * 9000, ""]
    yield ["z" * 20000, "a", "b"]  # one text of nearly all the characters: one part
    yield ["a" * 100] * 100
    for _ in range(40):
        yield ["".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(rng.randrange(1, 400))]


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_split_joined_matches_its_reference(threads, monkeypatch):
    rng = random.Random(threads)
    for texts in _shapes(rng):
        for min_chars, caller_chars in ((1, 0), (100, -1024), (2000, 4096), (8192, -1024)):
            units, lengths, cuts, ok = joined_texts_numba.split_joined(
                _units("\x00".join(texts)), len(texts), threads, min_chars, caller_chars)
            want_units, want_lengths, want_cuts = _reference(texts, threads, min_chars, caller_chars, monkeypatch)
            assert ok
            assert np.array_equal(units, want_units) and units.dtype == np.int32
            assert np.array_equal(lengths, want_lengths)
            assert np.array_equal(cuts, want_cuts), (len(texts), threads, min_chars, caller_chars)


def test_split_joined_declines_a_text_holding_a_nul():
    for texts in (["a\x00b", "c"], ["a", "b\x00"], ["\x00"], ["\x00", ""], ["a", "b", "c\x00\x00"]):
        assert not joined_texts_numba.split_joined(_units("\x00".join(texts)), len(texts), 2, 1, 0)[3]


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.from_sentencepiece(assets.fetch("sp-test-model"))


def test_texts_holding_nuls_encode_as_before(tok, parity_lines, split_small, monkeypatch):
    calls = _spy_parts(tok, monkeypatch)
    rng = random.Random(3)
    batch = rng.sample(parity_lines, 300)
    batch[7] = "nul\x00inside"
    batch[150] += "\x00"
    batch[299] = "\x00"
    small = batch[:20]
    many = [text[:3] for text in batch] * 2  # one call (under a chunk's characters), split_joined's lengths
    assert len(many) >= tokenizer_module.SPLIT_JOINED_TEXTS
    with monkeypatch.context() as patch:  # the Python lengths, whatever the texts hold
        patch.setattr(tokenizer_module.joined_texts_numba, "split_joined",
                      lambda units, texts, *args: (units, None, None, False))
        want_parts, want_small, want_many = tok(batch), tok(small), tok(many)
        want_clean = [tok([t.replace("\x00", "") for t in texts]) for texts in (batch, many)]
    assert len(calls) == 4  # batch and its clean copy in two parts each
    set_num_threads(1)  # one thread: no parts
    try:
        want_one = tok(batch)
    finally:
        set_num_threads(None)
    got_parts, got_small = tok(batch), tok(small)
    assert len(calls) == 6
    _assert_same(got_parts, want_parts)
    _assert_same(got_parts, want_one)
    _assert_same(got_small, want_small)
    _assert_same(tok(many), want_many)
    assert "\x00" in "".join(many)
    _assert_same(got_small, tok(small, padding="longest"))  # (joined by _cells_in_one_call)
    for texts, want in zip((batch, many), want_clean):  # without their NULs: the kernel's lengths
        _assert_same(tok([t.replace("\x00", "") for t in texts]), want)
