"""The glue between the stages on the CPU as numba kernels (word cache and dedup, scatter back to
word occurrences, truncation / template / padding, decode) against the torch path
(``_dispatch.use_backend("torch")``), on whole ``Tokenizer.__call__`` outputs: same tensors,
dtypes and shapes included, same errors; and the word cache's kernels under threads and
DataLoader workers."""

import itertools
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from gputok import Tokenizer, _dispatch, assets
from gputok.data import Collate
from gputok.word_cache import WordCache


@pytest.fixture(scope="module")
def bert_tok():
    return Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))


@pytest.fixture(scope="module")
def cl100k_tok():
    return Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k",
                                   special_tokens={"<|endoftext|>": 100257})


@pytest.fixture(params=["bert", "cl100k"])
def tok(request, bert_tok, cl100k_tok):
    return bert_tok if request.param == "bert" else cl100k_tok


def _random_text(rng: random.Random) -> str:
    """All planes, combining marks, CJK, emoji, whitespace runs, lone surrogates, added tokens."""
    pick = [lambda: chr(rng.randint(0x20, 0x7E)), lambda: chr(rng.randint(0x4E00, 0x9FFF)),
            lambda: chr(rng.randint(0x300, 0x36F)), lambda: chr(rng.randint(0x1F600, 0x1F64F)),
            lambda: chr(rng.randint(0, 0x10FFFF)), lambda: chr(rng.randint(0xD800, 0xDFFF)),
            lambda: rng.choice([" ", "  ", "\n", "\t", "\u00a0", "\u3000", " \n "]),
            lambda: rng.choice(["[MASK]", "<|endoftext|>", "caf\u00e9", "don't", "\u00c9T\u00c9"])]
    return "".join(rng.choice(pick)() for _ in range(rng.randint(0, 40)))


@pytest.fixture(scope="module")
def texts(parity_lines):
    rng = random.Random(17)
    real = [line for line in parity_lines[5::301] if line.strip()][:60]
    added = ["x [MASK] y<|endoftext|>z", "[MASK]", "[MASK][MASK] <|endoftext|>", "caf\u00e9 [MASK]."]
    return real + [_random_text(rng) for _ in range(60)] + ["", "a", " ", "x" * 700] + added


def _both(tok, *args, **kwargs):
    """``tok(*args, **kwargs)`` on the numba path and on the torch path: both outputs, or both errors."""
    results = []
    for backend in ("numba", "torch"):
        with _dispatch.use_backend(backend):
            try:
                results.append(tok(*args, **kwargs))
            except ValueError as error:
                results.append(str(error))
    return results


def _assert_same(got, want, context=""):
    if isinstance(want, str) or isinstance(got, str):
        assert got == want, context
        return
    assert got.keys() == want.keys(), context
    for key in want:
        assert got[key].dtype == want[key].dtype, (key, context)
        assert got[key].shape == want[key].shape, (key, context)
        assert torch.equal(got[key], want[key]), (key, context)


OPTIONS = list(itertools.product(
    (True, False, "max_length"),  # padding
    (False, True, "only_first", "only_second"),  # truncation
    (0, 3),  # stride
    (False, True),  # overflow rows
    ("right", "left"),
    (None, 8),  # pad_to_multiple_of
))


@pytest.mark.parametrize("pairs", [False, True])
def test_call_options_match_torch(tok, texts, pairs):
    """Every option combination, with offsets, token types and specials, singles and pairs."""
    first, second = texts[:40], (texts[70:110] if pairs else None)  # B: short random texts
    checked = 0
    for padding, truncation, stride, overflow, side, multiple in OPTIONS:
        for offsets, add_special in ((True, True), (False, False)):
            kwargs = dict(padding=padding, truncation=truncation, max_length=48 if pairs else 14, stride=stride,
                          return_overflowing_tokens=overflow, padding_side=side, pad_to_multiple_of=multiple,
                          return_offsets=offsets, return_token_type_ids=True, add_special_tokens=add_special)
            got, want = _both(tok, first, second, **kwargs)
            _assert_same(got, want, kwargs)
            checked += not isinstance(want, str)
    assert checked > len(OPTIONS)  # most combinations encode (some raise, on both paths alike)


def test_parity_lines_and_random_unicode_match_torch(tok, texts, parity_lines):
    batch = [line for line in parity_lines[::97]][:2000] + texts
    for kwargs in ({}, {"return_offsets": True}, {"padding": False, "return_offsets": True},
                   {"truncation": True, "max_length": 64, "return_overflowing_tokens": True, "stride": 16}):
        _assert_same(*_both(tok, batch, **kwargs), kwargs)
    _assert_same(*_both(tok, batch[:300], batch[300:600], return_offsets=True))


@pytest.mark.parametrize("normalizer", ["bert", "bert-cased", "lowercase", "none"])
def test_whole_wordpiece_kernel_matches_torch(texts, parity_lines, normalizer):
    """BERT-style pipelines run as one kernel call (``kernels/wordpiece_texts_numba.py``) on the CPU:
    the same outputs as the stages on the torch path, for each table normalizer and none."""
    from gputok import normalizers

    tok = Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    tok.normalizer = {"bert": tok.normalizer, "bert-cased": normalizers.BertNormalizer(lowercase=False),
                      "lowercase": normalizers.Lowercase(), "none": None}[normalizer]
    assert tok._whole_pipeline_kernel is not None
    batch = [line for line in parity_lines[::89]][:1500] + texts
    for kwargs in ({}, {"return_offsets": True}, {"padding": False, "return_offsets": True}):
        _assert_same(*_both(tok, batch, **kwargs), kwargs)
    _assert_same(*_both(tok, batch[:300], batch[300:600], return_offsets=True))
    for one in batch[::50]:  # batch 1, where the one kernel call matters most
        _assert_same(*_both(tok, [one], return_offsets=True), one)


def test_one_kernel_call_matches_torch(texts, parity_lines):
    """A small batch of single texts with no offsets asked is one kernel call from text to output
    arrays (``encode_padded_cells`` / ``encode_ragged_cells``): the torch path's tensors."""
    tok = Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    whole = tok._whole_pipeline_kernel
    calls = []
    for name in ("padded_cells", "ragged_cells"):
        kernel, tables = getattr(whole, name)
        setattr(whole, name, (lambda *args, kernel=kernel: calls.append(1) or kernel(*args), tables))
    lines = [line for line in parity_lines[::89]][:40] + [t for t in texts[60:]  # no added token written in them
                                                          if not any(s in t for s in tok.all_special_tokens)]
    batches = [[one] for one in lines[::5]] + [lines[:32], lines]
    for batch, kwargs in itertools.product(batches, (
            {}, {"padding": False}, {"truncation": True, "max_length": 9}, {"add_special_tokens": False},
            {"padding": "max_length", "max_length": 40, "padding_side": "left"},
            {"pad_to_multiple_of": 8, "return_token_type_ids": False},
            {"padding": False, "truncation": True, "max_length": 5, "return_token_type_ids": False})):
        calls.clear()
        _assert_same(*_both(tok, batch, **kwargs), (batch, kwargs))
        assert calls == [1]  # the numba path was one kernel call
    with pytest.raises(ValueError, match="no room"):  # not even for [CLS] and [SEP]
        tok(lines[:3], truncation=True, max_length=1)


@pytest.mark.parametrize("threads", [1, 2])
def test_padded_in_row_ranges_matches_torch(tok, texts, parity_lines, threads, monkeypatch):
    """A large padded batch is planned in one kernel call and written in row ranges, one per
    thread, into arrays numpy allocated: the same tensors as the torch path (and its errors)."""
    from gputok import _cpu_threads, tokenizer

    monkeypatch.setattr(tokenizer, "PADDED_IN_RANGES_FROM", 1)
    _cpu_threads.set_num_threads(threads)
    try:
        batch = [line for line in parity_lines[::97]][:300] + texts
        for kwargs in ({}, {"return_offsets": True, "padding_side": "left", "pad_to_multiple_of": 8},
                       {"truncation": True, "max_length": 20, "return_overflowing_tokens": True, "stride": 4},
                       {"padding": "max_length", "max_length": 130, "return_token_type_ids": False},
                       {"truncation": True, "max_length": 5, "return_overflowing_tokens": True, "stride": 4}):
            _assert_same(*_both(tok, batch, **kwargs), kwargs)
        _assert_same(*_both(tok, batch[:150], batch[150:300], return_offsets=True))  # type ids of B written
    finally:
        _cpu_threads.set_num_threads(None)


def test_whole_pipeline_kernel_follows_the_stages(bert_tok):
    """Only pipelines the one kernel implements take it; replacing a stage drops it."""
    from gputok import pre_tokenizers

    tok = Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    tok.no_padding()  # the file pads every encode to 128
    assert tok._whole_pipeline_kernel is not None
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    assert tok._whole_pipeline_kernel is None
    assert tok.encode("Hello world") == [101, 7592, 2088, 102]
    tok.pre_tokenizer = bert_tok.pre_tokenizer
    assert tok._whole_pipeline_kernel is not None


@pytest.mark.parametrize("batch", [[], [""], ["", "", ""], ["a"], ["", "a b", ""]])
def test_empty_batch_and_empty_texts(tok, batch):
    for kwargs in ({}, {"padding": False}, {"return_offsets": True}, {"padding": "max_length", "max_length": 5},
                   {"pad_to_multiple_of": 4, "return_offsets": True, "padding_side": "left"}):
        _assert_same(*_both(tok, batch, **kwargs), kwargs)
        _assert_same(*_both(tok, batch, batch, **kwargs), kwargs)


def test_no_word_cache_matches_torch(cl100k_tok, texts):
    saved, cl100k_tok.word_cache = cl100k_tok.word_cache, None
    try:
        _assert_same(*_both(cl100k_tok, texts, return_offsets=True))
    finally:
        cl100k_tok.word_cache = saved


def test_cache_hits_across_calls(texts):
    """A second call of the same words runs the model on none of them; a third with new words,
    only on those (each once, however often it occurs)."""
    tok = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    # the stage path, whose model runs this counts (the whole-pipeline kernel: tests/test_whole_bpe.py)
    tok._whole_kernel = ((tok.normalizer, tok.pre_tokenizer, tok.model), None)
    seen = []
    encode_words = tok.model.encode_words

    def counting(words):
        seen.append(len(words))
        return encode_words(words)

    tok.model.encode_words = counting
    short = [t for t in texts if len(t) <= 64]  # every word fits the cache (max_word_length 64)
    first = tok(short, return_offsets=True)
    assert sum(seen) > 100 and len(tok.word_cache) == sum(seen)
    seen.clear()
    again = tok(short, return_offsets=True)
    assert seen == []
    _assert_same(again, first)
    tok(short + ["zqxj zqxj zqxj wvkp"])
    assert seen == [3]  # "zqxj", " zqxj", " wvkp": each new word once
    seen.clear()
    with _dispatch.use_backend("torch"):  # the torch path reads the store the kernels filled
        _assert_same(tok(short, return_offsets=True), first)
    assert seen == []


def test_cache_reset_at_capacity(texts):
    tok = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    plain = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    plain.word_cache = None
    tok.word_cache = WordCache(capacity=50)
    sizes, stores = [], set()
    for i in range(0, len(texts), 10):
        assert tok.encode_batch(texts[i:i + 10]) == plain.encode_batch(texts[i:i + 10])
        sizes.append(len(tok.word_cache))
        stores.add(id(tok.word_cache._stores[torch.device("cpu")]))
    assert max(sizes) <= 50 and len(stores) > 1


def test_eight_threads_one_tokenizer(texts, parity_lines):
    lines = [line for line in parity_lines[11::211] if line.strip()][:800] + texts
    for name in ("bert", "cl100k"):
        tok = (Tokenizer.from_file(assets.fetch("bert-tokenizer-json")) if name == "bert" else
               Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"))
        tok.word_cache = WordCache(capacity=700)  # small: resets while other threads read
        chunks = [lines[i::8] for i in range(8)]
        reference = Tokenizer.from_file(assets.fetch("bert-tokenizer-json")) if name == "bert" else \
            Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
        expected = [reference(c, return_offsets=True, truncation=True, max_length=40) for c in chunks]
        start = threading.Barrier(8)

        def work(i):
            start.wait()
            return [tok(chunks[i], return_offsets=True, truncation=True, max_length=40) for _ in range(3)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(8)))
        for got, want in zip(results, expected):
            for g in got:
                _assert_same(g, want)


def _batches(loader):
    return [{k: v.clone() for k, v in batch.items()} for batch in loader]


@pytest.mark.parametrize("family", ["cl100k", "bert", "unigram"])
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers(texts, context, family):
    """Workers give the parent's batches, and the parent's own batches after the workers start are
    unchanged: sending the tokenizer to spawned workers once moved its tensors into shared memory
    in place, and the parent's kernels then read freed memory through their cached numpy views
    (cl100k's "x" * 700 came out as 24 x 344 instead of 24 x 45202)."""
    tok = {"cl100k": lambda: Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"),
           "bert": lambda: Tokenizer.from_file(assets.fetch("bert-tokenizer-json")),
           "unigram": lambda: Tokenizer.from_sentencepiece(assets.fetch("sp-test-model"))}[family]()
    before = tok(texts)  # the parent has run the kernels and filled its cache before the workers start
    collate = Collate(tok, max_length=24)
    loader = DataLoader(texts, batch_size=16, num_workers=2, multiprocessing_context=context, collate_fn=collate)
    got = _batches(loader)
    expected = [collate(texts[i:i + 16]) for i in range(0, len(texts), 16)]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _assert_same(g, e)
    _assert_same(tok(texts), before)


def test_decode_matches_torch_free_reference(tok, texts):
    """Decode (the CSR kernel for byte-level BPE and WordPiece) equals decoding token by token."""
    ids = tok.encode_batch(texts)
    got = tok.decode_batch(ids)
    with _dispatch.use_backend("torch"):
        want = tok.decode_batch(ids)
    assert got == want
    assert tok.decode(torch.tensor(ids[0])) == want[0]
    assert tok.decode(ids[1], skip_special_tokens=False) == tok.decode_batch([ids[1]], skip_special_tokens=False)[0]
    assert tok.decode([]) == ""


def test_word_keys_equal_span_hashes():
    from gputok.dedup import span_hashes
    from gputok.kernels.word_cache_numba import word_keys

    rng = np.random.default_rng(3)
    values = torch.from_numpy(rng.integers(0, 0x110000, 500).astype(np.int32))
    starts = torch.from_numpy(np.sort(rng.choice(500, 60, replace=False)).astype(np.int64))
    ends = torch.cat([starts[1:], torch.tensor([500])])
    assert torch.equal(torch.from_numpy(word_keys(values.numpy(), starts.numpy(), (ends - starts).numpy())),
                       span_hashes(values, starts, ends))


def test_colliding_words_stay_apart():
    """Thue-Morse strings of 2048 characters collide under the polynomial hash: the dedup kernel
    (with and without a cache) and the cache's lookup still tell them apart."""
    from gputok.dedup import span_hashes, unique_gathered

    tm = "".join("ab"[bin(i).count("1") % 2] for i in range(2048))
    other = tm.translate(str.maketrans("ab", "ba"))
    values = torch.tensor([ord(c) for c in tm + other + tm], dtype=torch.int32)
    starts, lengths = torch.tensor([0, 2048, 4096]), torch.tensor([2048, 2048, 2048])
    keys = span_hashes(values, starts, starts + lengths)
    assert keys[0] == keys[1]  # the collision
    rows, inverse = unique_gathered(values, starts, lengths)
    assert inverse.tolist() == [0, 1, 0] and len(rows) == 2
    tok = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    tok.word_cache = WordCache(max_word_length=4096)
    plain = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    plain.word_cache = None
    expected = [plain.encode(tm), plain.encode(other)]
    assert expected[0] != expected[1]
    for batch in ([tm, other, tm], [other], [tm]):  # cold, then each through the cache
        assert tok.encode_batch(batch) == [expected[0] if t == tm else expected[1] for t in batch]
