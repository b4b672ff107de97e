"""The whole BPE pipeline as one CPU kernel call (``kernels/bpe_texts_numba.py``, ``gputok._whole_bpe``)
against the stages one kernel each (``Tokenizer._encode_codepoints``): the same ids, offsets and
spans for every split rule, with and without a prefix space, a table normalizer and the word cache,
on real text and random Unicode, batch 1 included; the cache shared with the stage path and
between threads."""

import contextlib
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from gputok import Tokenizer, assets, normalizers, pre_tokenizers
from gputok.word_cache import WordCache


@pytest.fixture(scope="module")
def cl100k():
    return Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")


@pytest.fixture(scope="module")
def gpt2():
    return Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2")


def _random_text(rng: random.Random) -> str:
    """All planes, CJK, emoji, marks, lone surrogates, digits, contractions, whitespace runs."""
    pick = [lambda: chr(rng.randint(0x20, 0x7E)), lambda: chr(rng.randint(0x4E00, 0x9FFF)),
            lambda: chr(rng.randint(0x300, 0x36F)), lambda: chr(rng.randint(0x1F600, 0x1F64F)),
            lambda: chr(rng.randint(0, 0x10FFFF)), lambda: chr(rng.randint(0xD800, 0xDFFF)),
            lambda: rng.choice(["'s", "'LL", "1234567", "\u017f"]),
            lambda: rng.choice([" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", " \n "])]
    return "".join(rng.choice(pick)() for _ in range(rng.randint(0, 40)))


@pytest.fixture(scope="module")
def batch(parity_lines):
    rng = random.Random(1717)
    real = [line for line in parity_lines[::151] if line.strip()][:1500]
    # words about as long as kernels/bpe_texts_numba.SHORT symbols: the scan merge, then the heap
    near_short = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzé") for _ in range(k)) for k in range(28, 36)]
    return (real + [_random_text(rng) for _ in range(300)] + near_short
            + ["", " ", "a", "x" * 700, " " * 70, "\n\n  \n"])


@contextlib.contextmanager
def _stages(tok):
    """``tok`` encoding stage by stage (no whole-pipeline kernel) inside the block."""
    tok._whole_kernel = ((tok.normalizer, tok.pre_tokenizer, tok.model), None)
    try:
        yield
    finally:
        del tok._whole_kernel


def _same(got, want, context=""):
    assert got.keys() == want.keys(), context
    for key in want:
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), (key, context)


def _check(tok, batch):
    """Whole kernel == stages: the batch (spans, ragged and padded), then texts one at a time, with
    a cold cache, a warm one and none."""
    assert tok._whole_pipeline_kernel is not None
    for cache in (WordCache(), "warm", None):
        if cache != "warm":
            tok.word_cache = cache
        for kwargs in ({"padding": False, "return_offsets": True}, {}):
            got = tok(batch, add_special_tokens=False, **kwargs)
            with _stages(tok):
                want = tok(batch, add_special_tokens=False, **kwargs)
            _same(got, want, (cache, kwargs))
    tok.word_cache = WordCache()
    for text in batch[::37]:  # batch 1, where the one kernel call matters most
        got = tok([text], add_special_tokens=False, return_offsets=True)
        with _stages(tok):
            want = tok([text], add_special_tokens=False, return_offsets=True)
        _same(got, want, text)


@pytest.mark.parametrize("rule", ["cl100k", "o200k", "llama3", "qwen2", "gpt2"])
def test_rules_match_the_stages(cl100k, batch, rule):
    """Every named split (on cl100k's ranks: the split does not depend on them)."""
    saved = cl100k.pre_tokenizer
    cl100k.pre_tokenizer = pre_tokenizers.Split.tiktoken(rule)
    try:
        _check(cl100k, batch)
    finally:
        cl100k.pre_tokenizer = saved


@pytest.mark.parametrize("pre", ["bytelevel", "prefix-space", "no-regex", "no-regex-prefix", "sequence"])
def test_bytelevel_pre_tokenizers_match_the_stages(gpt2, batch, pre):
    """GPT-2's ranks under the ByteLevel pre-tokenizer as tokenizer.json files have it: with and
    without its regex and prefix space, and a Split + ByteLevel Sequence that is not collapsed."""
    saved = gpt2.pre_tokenizer
    gpt2.pre_tokenizer = {
        "bytelevel": pre_tokenizers.ByteLevel(),
        "prefix-space": pre_tokenizers.ByteLevel(add_prefix_space=True),
        "no-regex": pre_tokenizers.ByteLevel(use_regex=False),
        "no-regex-prefix": pre_tokenizers.ByteLevel(use_regex=False, add_prefix_space=True),
        "sequence": pre_tokenizers.Sequence([pre_tokenizers.Split("llama3"), pre_tokenizers.ByteLevel(use_regex=False)]),
    }[pre]
    try:
        _check(gpt2, batch[::3])
    finally:
        gpt2.pre_tokenizer = saved


def test_table_normalizer_matches_the_stages(gpt2, batch):
    saved = gpt2.normalizer
    gpt2.normalizer = normalizers.Lowercase()
    try:
        _check(gpt2, batch[::3])
    finally:
        gpt2.normalizer = saved


def test_only_pipelines_it_implements_take_it(cl100k):
    """Other pre-tokenizers and normalizers keep the stages; replacing a stage drops the kernel."""
    saved = cl100k.pre_tokenizer, cl100k.normalizer
    try:
        for pre in (pre_tokenizers.Split.tiktoken(r"\w+"), pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Sequence(
                [pre_tokenizers.Split("gpt2"), pre_tokenizers.Split("cl100k")])):
            cl100k.pre_tokenizer = pre
            assert cl100k._whole_pipeline_kernel is None, pre
        cl100k.pre_tokenizer = saved[0]
        assert cl100k._whole_pipeline_kernel is not None
        cl100k.normalizer = normalizers.UnicodeForm("NFC")
        assert cl100k._whole_pipeline_kernel is None
    finally:
        cl100k.pre_tokenizer, cl100k.normalizer = saved
    assert cl100k.encode_batch(["Hello world"]) == [[9906, 1917]]


def test_cache_shared_with_the_stages_and_threads(cl100k, batch):
    """Words the kernel stored serve the stage path and back; 8 threads on a small cache (reset
    when full, mid-batch) give the single-call ids."""
    want = cl100k.encode_batch(batch)
    cl100k.word_cache = WordCache()
    with _stages(cl100k):
        assert cl100k.encode_batch(batch[:900]) == want[:900]
    held = len(cl100k.word_cache)
    assert cl100k.encode_batch(batch) == want
    assert len(cl100k.word_cache) > held  # the kernel's misses were inserted
    with _stages(cl100k):
        assert cl100k.encode_batch(batch) == want
    cl100k.word_cache = WordCache(capacity=500)
    parts = [batch[k::8] for k in range(8)]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            got = list(pool.map(cl100k.encode_batch, parts))
            assert got == [want[k::8] for k in range(8)]
    assert 0 < len(cl100k.word_cache) <= 500


def test_cache_hits_across_calls(cl100k, batch, monkeypatch):
    """A second call of the same words inserts nothing (every word hit); a third with new words
    inserts only those, each once however often it occurs; the stage path then reads them."""
    inserted = []
    insert = WordCache.insert_misses

    def counting(self, owner, keys, *rest):
        inserted.append(keys.size)
        return insert(self, owner, keys, *rest)

    monkeypatch.setattr(WordCache, "insert_misses", counting)
    cl100k.word_cache = WordCache()
    short = [t for t in batch if len(t) <= 64]  # every word fits the cache (max_word_length 64)
    first = cl100k(short, return_offsets=True)
    # (chunks on two threads may both miss a word: the second insert skips it)
    assert len(cl100k.word_cache) > 100 and sum(inserted) >= len(cl100k.word_cache)
    inserted.clear()
    _same(cl100k(short, return_offsets=True), first)
    assert inserted == []
    cl100k(short + ["zqxj zqxj zqxj wvkp"])
    assert inserted == [3]  # "zqxj", " zqxj", " wvkp"
    with _stages(cl100k):
        _same(cl100k(short, return_offsets=True), first)
