"""The whole BPE pipeline as one CPU kernel call (``kernels/bpe_texts_numba.py``, ``gputok._whole_bpe``)
against the stages one kernel each (``Tokenizer._encode_codepoints``): the same ids, offsets and
spans for every split rule, with and without a prefix space, a table normalizer and the word cache,
on real text and random Unicode, batch 1 included; the cache shared with the stage path and
between threads."""

import contextlib
import itertools
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from gputok import Tokenizer, assets, normalizers, pre_tokenizers
from gputok.kernels import bpe_texts_numba
from gputok.processors import TemplateProcessing
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
        got = tok([text[::-1]], add_special_tokens=False)  # new words: the one-text kernel inserts them
        with _stages(tok):
            _same(got, tok([text[::-1]], add_special_tokens=False), text[::-1])


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

    def counting(self, owner, misses):
        inserted.append(int(misses[0]))  # the distinct words (word_cache_numba.pack_misses)
        return insert(self, owner, misses)

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


CELL_OPTIONS = ({}, {"padding": False}, {"add_special_tokens": False}, {"truncation": True, "max_length": 7},
                {"padding": "max_length", "max_length": 40, "padding_side": "left"},
                {"pad_to_multiple_of": 8, "return_token_type_ids": True},
                {"padding": False, "truncation": True, "max_length": 5, "return_token_type_ids": True})


@pytest.mark.parametrize("rule", ["cl100k", "o200k", "llama3", "qwen2", "gpt2"])
def test_one_kernel_call_matches_the_stages(cl100k, batch, rule, monkeypatch):
    """A small batch of single texts without offsets is one kernel call from text to output
    arrays (``encode_padded_cells``, which inserts its misses itself, / ``encode_ragged_cells``):
    the stage path's tensors, with a
    template's special tokens (type ids too) or none, truncation and padding either side, on a
    cold, warm or no word cache; the truncation error as the stage path raises it."""
    saved = cl100k.pre_tokenizer, cl100k.post_processor
    cl100k.pre_tokenizer = pre_tokenizers.Split.tiktoken(rule)
    cl100k.post_processor = TemplateProcessing.bert(("<|endoftext|>", 100257), ("<|fim_prefix|>", 100258))
    calls = []
    for name in ("encode_padded_cells", "encode_ragged_cells"):
        kernel = getattr(bpe_texts_numba, name)
        monkeypatch.setattr(bpe_texts_numba, name, lambda *args, kernel=kernel: calls.append(1) or kernel(*args))
    small = [t for t in batch if len(t) < 200]
    batches = [[one] for one in small[::150]] + [small[:32], small[-40:], ["", "a", ""], []]
    try:
        for cache in (WordCache(), "warm", None) if rule == "cl100k" else (WordCache(),):
            if cache != "warm":
                cl100k.word_cache = cache
            for texts, kwargs in itertools.product(batches, CELL_OPTIONS):
                calls.clear()
                got = cl100k(texts, **kwargs)
                # (a padded batch calls its kernel again where the word store had to grow first)
                assert calls == [1] or kwargs.get("padding", True) is not False and calls == [1, 1], (texts, kwargs)
                with _stages(cl100k):
                    _same(got, cl100k(texts, **kwargs), (cache, texts, kwargs))
        with pytest.raises(ValueError, match="no room"):  # not even for the two special tokens
            cl100k(small[:3], truncation=True, max_length=1)
    finally:
        cl100k.pre_tokenizer, cl100k.post_processor = saved
        cl100k.word_cache = WordCache()


def test_the_packed_plan_follows_the_padding_settings(cl100k, batch):
    """The one-call path's options, packed once per plan (``cells_numba.pack_padded``), follow a
    padding side and pad id set after a first call, as the stage path reads them afresh."""
    texts = [t for t in batch if len(t) < 200][:3]
    right = cl100k(texts)
    saved = cl100k._extra
    try:
        cl100k.enable_padding(direction="left", pad_id=100257, pad_token="<|endoftext|>")
        left = cl100k(texts)
        with _stages(cl100k):
            _same(left, cl100k(texts), texts)
        pads = left["attention_mask"] == 0
        assert pads.any() and left["attention_mask"][:, -1].all() and (left["input_ids"][pads] == 100257).all()
    finally:
        cl100k._extra = saved
        cl100k.__dict__.pop("_pad_id", None)
    _same(cl100k(texts), right, texts)


def test_one_kernel_call_from_threads(cl100k, batch):
    """8 Python threads making batch-1 calls on one small cache (reset when full) get the
    single-call tensors."""
    texts = [t for t in batch if len(t) < 200][:400]
    want = [cl100k([t]) for t in texts]
    cl100k.word_cache = WordCache(capacity=300)
    with ThreadPoolExecutor(8) as pool:
        for _ in range(2):
            for text, got, expected in zip(texts, pool.map(lambda t: cl100k([t]), texts), want):
                _same(got, expected, text)
    assert 0 < len(cl100k.word_cache) <= 300
    cl100k.word_cache = WordCache()


class _BusyLock:
    """A cache's lock that another thread always holds for a try (``acquire(False)``), and that is
    free for a wait."""

    def __init__(self):
        self.lock = threading.Lock()

    def acquire(self, blocking=True):
        return blocking and self.lock.acquire()

    def release(self):
        self.lock.release()

    def __enter__(self):
        self.lock.acquire()

    def __exit__(self, *exc):
        self.lock.release()


def test_padded_kernel_inserts_its_misses(cl100k, batch, monkeypatch):
    """A padded one-call batch (one text at the call's defaults above all) is one call of
    ``encode_padded_cells``, which inserts its new words into the word cache itself: no
    ``insert_misses``, also where the buffers grow or a full store is renewed (it is called again),
    and the stage path's tensors. Where the cache's lock is busy (another thread inserting), the
    lock-free path gives the same tensors and inserts after."""
    inserted = []
    insert = WordCache.insert_misses
    monkeypatch.setattr(WordCache, "insert_misses",
                        lambda self, owner, misses: inserted.append(int(misses[0])) or insert(self, owner, misses))
    cache = cl100k.word_cache = WordCache(capacity=1500)
    texts = [t for t in batch if len(t) < 300][:400]
    for k, text in enumerate(texts):
        got = cl100k([text] if k % 5 else texts[k:k + 3])
        with _stages(cl100k):
            _same(got, cl100k([text] if k % 5 else texts[k:k + 3]), text)
    assert inserted == [] and 0 < len(cache) <= 1500
    cache = cl100k.word_cache = WordCache()
    cl100k(["zqxj wvkp"])
    assert inserted == [] and len(cache) == 2  # "zqxj", " wvkp"
    cache._lock = _BusyLock()
    got = cl100k(["zqxjj wvkpp"])
    assert inserted == [2] and len(cache) == 4
    with _stages(cl100k):
        _same(got, cl100k(["zqxjj wvkpp"]))
    cl100k.word_cache = WordCache()


def test_one_kernel_call_unk_error():
    """A character-level BPE whose vocabulary lacks its unk token: the one-call path raises the
    stage path's error."""
    from gputok.models.bpe import BPE

    tok = Tokenizer(BPE(None, {}, tokens=["a", "b", " "], unk_token="<unk>"),
                    pre_tokenizer=pre_tokenizers.Split.tiktoken("gpt2"))
    assert tok._whole_pipeline_kernel is not None
    assert tok(["ab a"])["input_ids"].tolist() == [[0, 1, 2, 0]]
    for kwargs in ({}, {"padding": False}):
        with pytest.raises(ValueError, match="unk_token '<unk>' is not in the vocabulary"):
            tok(["abc"], **kwargs)


def test_one_kernel_call_while_sampling(cl100k):
    """A model sampling its merges (BPE-dropout) leaves the one-call kernel (plain BPE) for the
    stages: the stage path's draws, not the plain merges."""
    texts = ["zqxjwvkp unmergeable wordsmithing"]
    for kwargs in ({}, {"padding": False}):
        plain = cl100k(texts, **kwargs)
        with cl100k.model.sampling(1.0, torch.Generator().manual_seed(0)):
            got = cl100k(texts, **kwargs)
        with _stages(cl100k), cl100k.model.sampling(1.0, torch.Generator().manual_seed(0)):
            _same(got, cl100k(texts, **kwargs))
        assert got["input_ids"].numel() > plain["input_ids"].numel()
