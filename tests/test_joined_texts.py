"""Texts joined by NUL as the CPU kernels read them: ``codepoints_numba`` in its joined form
(``ingest_numba.JOINED_LENGTHS``) against the plain join's units and the texts' lengths,
``tokenizer._joined_part_starts`` against ``_cpu_threads._bounds`` run on the texts' ends in the
joined string, and a batch whose texts hold NULs (the kernel finds more texts than the batch has,
the Python lengths take over) encodes as the stage path does, in parts and in one call."""

import random

import numpy as np
import pytest
from test_cpu_threads import _assert_same
from test_unigram_parts import _spy_parts

from gputok import Tokenizer, _cpu_threads, assets, set_num_threads
from gputok import tokenizer as tokenizer_module
from gputok.kernels import ingest_numba


def _units(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.int32)


def _shapes(rng):
    words = ["a", "bb", "héllo", "日本語", "\U0001F600x", "\ud800", "\udfff", " ", "x" * 300]
    yield ["", ""]
    yield [""] * 50
    yield ["x" * 5000]
    yield ["x" * 5000, ""]
    yield ["", "y" * 9000, ""]
    yield ["z" * 20000, "a", "b"]  # one text of nearly all the characters: one part
    yield ["a" * 100] * 100
    for _ in range(40):
        yield ["".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(rng.randrange(1, 400))]


def test_joined_codepoints_match_the_lengths_form():
    rng = random.Random(0)
    for texts in _shapes(rng):
        units = _units("\x00".join(texts))
        units.flags.writeable = False  # as the codec's buffer is
        values, offsets = ingest_numba.codepoints_numba(units, ingest_numba.JOINED_LENGTHS)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        want_values, want_offsets = ingest_numba.codepoints_numba(_units("".join(texts)), lengths)
        assert values.dtype == np.int32 and offsets.dtype == np.int64
        assert np.array_equal(values, want_values) and np.array_equal(offsets, want_offsets)
        assert 0xFFFD in values or not any("\ud800" in t or "\udfff" in t for t in texts)


def test_joined_codepoints_count_a_nul_in_a_text_as_a_separator():
    for texts, rows in ((["a\x00b", "c"], [[97], [98], [99]]), (["\x00"], [[], []]), (["", "b\x00"], [[], [98], []]),
                        (["c\x00\x00"], [[99], [], []])):
        values, offsets = ingest_numba.codepoints_numba(_units("\x00".join(texts)), ingest_numba.JOINED_LENGTHS)
        assert [values[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == rows


def _reference_starts(texts, threads):
    """``_bounds`` on the texts' ends in the joined string (a text ends at its separator)."""
    ends = np.cumsum(np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))) - 1
    bounds = _cpu_threads._bounds(ends, 1, len(texts), threads, _cpu_threads.PART_CALLER_CHARS)
    return None if bounds is None else [0, *(int(ends[b - 1]) + 1 for b in bounds[1:-1]), int(ends[-1]) + 1]


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("min_chars", [1, 100, 2000, 8192])
def test_part_starts_follow_the_bounds_rule(threads, min_chars, monkeypatch):
    monkeypatch.setattr(_cpu_threads, "MIN_CHUNK_CHARS", min_chars)
    rng = random.Random(threads * min_chars)
    for texts in _shapes(rng):
        joined = "\x00".join(texts)
        starts = tokenizer_module._joined_part_starts(joined, len(texts), threads)
        assert starts == _reference_starts(texts, threads), (len(texts), threads, min_chars)
        if starts is not None:
            assert 2 < len(starts) <= threads + 1 and starts[-1] == len(joined) + 1
            assert all(joined[s - 1] == "\x00" for s in starts[1:-1])


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
    many = [text[:3] for text in batch] * 2  # one call (under a chunk's characters)
    with monkeypatch.context() as patch:  # the stage path, on the Python lengths: no joined form
        patch.setattr(Tokenizer, "_cells_in_one_call", lambda *args, **kwargs: None)
        want_parts, want_small, want_many = tok(batch), tok(small), tok(many)
        want_clean = [tok([t.replace("\x00", "") for t in texts]) for texts in (batch, many)]
    assert not calls
    set_num_threads(1)  # one thread: no parts
    try:
        want_one = tok(batch)
    finally:
        set_num_threads(None)
    got_parts, got_small = tok(batch), tok(small)
    assert len(calls) == 4  # two parts, then two again with the Python lengths
    _assert_same(got_parts, want_parts)
    _assert_same(got_parts, want_one)
    _assert_same(got_small, want_small)
    _assert_same(tok(many), want_many)
    assert "\x00" in "".join(many)
    _assert_same(got_small, tok(small, padding="longest"))  # (joined by _cells_in_one_call)
    for texts, want in zip((batch, many), want_clean):  # without their NULs: the kernel's lengths
        _assert_same(tok([t.replace("\x00", "") for t in texts]), want)
