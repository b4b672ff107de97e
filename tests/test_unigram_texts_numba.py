"""The whole SentencePiece Unigram kernel (gputok._whole_unigram, kernels/unigram_texts_numba.py,
kernels/unigram_cache_numba.py) against the stage path it replaces, and its word cache against
sentencepiece on near ties: every result, cold or from the cache, is SentencePiece's."""

import pickle
import random
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_unigram import EDGE_CASES, trained_model

import gputok
from gputok import _whole_unigram, assets
from gputok.ingest import utf32_units
from gputok.kernels import unigram_cache_numba
from gputok.kernels.ingest_numba import codepoints_numba
from gputok.kernels.unigram_cache_numba import segment_cached
from gputok.kernels.unigram_sentence import unigram_sentences_encode
from gputok.models.unigram import SCORE_RESET_THRESHOLD, WHOLE_SENTENCE_CHARS
from gputok.ragged import Ragged
from gputok.word_cache import WordCache

spm = pytest.importorskip("sentencepiece")

MODELS = {
    "sp-test-model": lambda: str(assets.fetch("sp-test-model")),
    "trained-8000": lambda: trained_model(8000),
    "trained-8000-byte-fallback": lambda: trained_model(8000, byte_fallback=True),
}
# Lines of the kernel docs where a word's float64 segmentation differs from sentencepiece's in context
# (tests/test_unigram.py): with every word a cache hit they must still take the float32 sentence path.
TIES = ["  +------------+         +---------------------------------------+",
        "  |  PCI BUS   | <-----> |  PCI EP BUS   |        |  Virtual PCI |",
        " |       BAR5      |    |      |                |   | |     +-----------------+"]
TIES += ["+" + "-" * n + "+" + "-" * m + "+" for n in range(1, 40, 3) for m in (1, 4, 9)]
TIES += ["word " * k + "-" * 17 for k in range(0, 60, 7)]


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    path = MODELS[request.param]()
    return gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)


@pytest.fixture(scope="module")
def lines():
    rng = random.Random(17)
    parity = assets.parity_corpus().read_text(encoding="utf-8").splitlines()
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity, 1500) + rng.sample(chinese, 300) + EDGE_CASES + TIES


def stage_path(tok, texts, with_spans=True):
    """The stages one kernel each (``Tokenizer._encode_codepoints``): the reference."""
    values, offsets = codepoints_numba(*utf32_units(texts))
    return tok._encode_codepoints(Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), with_spans)


def whole(tok, texts, with_spans=True):
    kernel = tok._whole_pipeline_kernel
    assert kernel is not None
    return kernel(*utf32_units(texts), with_spans)


def assert_same(got, want):
    assert torch.equal(got.ids.offsets, want.ids.offsets)
    assert torch.equal(got.ids.values, want.ids.values)
    assert (got.spans is None) == (want.spans is None)
    if want.spans is not None:
        assert torch.equal(got.spans, want.spans)


def test_whole_kernel_equals_stage_path(model, lines):
    tok, _ = model
    want = stage_path(tok, lines)
    tok.word_cache = WordCache()  # a cold cache, then a warm one
    assert_same(whole(tok, lines), want)
    assert_same(whole(tok, lines), want)
    assert_same(whole(tok, lines, with_spans=False), stage_path(tok, lines, with_spans=False))
    for i in range(60):  # batch 1, warm
        assert_same(whole(tok, lines[i:i + 1]), stage_path(tok, lines[i:i + 1]))
    tok.word_cache = None  # no cache: SentencePiece's Viterbi over every text
    assert_same(whole(tok, lines), want)


def test_cached_words_keep_sentencepiece_near_ties(model, lines):
    tok, sp = model
    tok.word_cache = WordCache()
    texts = lines[:300] + TIES
    want = sp.encode(texts)
    assert [ids for i in range(0, len(texts), 37) for ids in tok.encode_batch(texts[i:i + 37])] == want
    assert tok.encode_batch(texts) == want  # every word a hit
    assert [tok.encode(t) for t in TIES] == sp.encode(TIES)


def test_cache_resets_when_full(monkeypatch, lines):
    path = MODELS["trained-8000"]()
    sp = spm.SentencePieceProcessor(model_file=path)
    monkeypatch.setattr(_whole_unigram, "CACHE_SLOTS", 256)
    monkeypatch.setattr(_whole_unigram, "CACHE_STORE", 700)
    monkeypatch.setattr(_whole_unigram, "CACHE_FULL_MISSES", 20)
    tok = gputok.Tokenizer.from_sentencepiece(path)
    texts = lines[:400]
    want = sp.encode(texts)
    for _ in range(2):
        assert [ids for i in range(0, len(texts), 50) for ids in tok.encode_batch(texts[i:i + 50])] == want


@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=8))
def test_random_unicode_equals_stage_path(sp_test_tokenizer, texts):
    assert_same(whole(sp_test_tokenizer, texts), stage_path(sp_test_tokenizer, texts))
    assert_same(whole(sp_test_tokenizer, texts), stage_path(sp_test_tokenizer, texts))  # cached


def test_threads_and_pickle(lines):
    path = MODELS["trained-8000"]()
    tok = gputok.Tokenizer.from_sentencepiece(path)
    want = spm.SentencePieceProcessor(model_file=path).encode(lines)
    results = [None] * 6

    def run(k):
        results[k] = tok.encode_batch(lines[k * 7:] + lines[:k * 7])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == want[k * 7:] + want[:k * 7] for k, r in enumerate(results))
    copy = pickle.loads(pickle.dumps(tok))
    assert "_whole_kernel" not in copy.__dict__
    assert copy.encode_batch(lines) == want


def test_sampling_keeps_its_path(sp_test_tokenizer):
    texts = ["hello world, sampling takes the stage path"] * 50
    with sp_test_tokenizer.model.sampling(0.5, torch.Generator().manual_seed(0)):
        sampled = sp_test_tokenizer.encode_batch(texts)
    assert len({tuple(ids) for ids in sampled}) > 1  # each occurrence drew its own



def test_forked_workers_start_with_their_own_cache(lines):
    from torch.utils.data import DataLoader

    path = MODELS["trained-8000"]()
    tok = gputok.Tokenizer.from_sentencepiece(path)
    texts = lines[:96] + TIES
    want = spm.SentencePieceProcessor(model_file=path).encode(texts)
    assert tok.encode_batch(texts) == want  # the parent's cache filled before the fork
    loader = DataLoader(texts, batch_size=16, num_workers=2, multiprocessing_context="fork",
                        collate_fn=tok.encode_batch)
    assert [ids for batch in loader for ids in batch] == want


@pytest.mark.parametrize("name", ["sp-test-model", "trained-8000"])
def test_cache_key_forms_read_back_as_written(name):
    """The cache's three forms of a word (a short word whose alphabet codes fit is its own key, its
    tokens in its slot where they are one or two, else in the store; any other word hashed, its
    codepoints and tokens in the store) each read back as SentencePiece's tokens, on the kernel:
    words of the model's characters by their codes (small ones, and past the packed bits where the
    alphabet has them), with '▁' first or not."""
    tok = gputok.Tokenizer.from_sentencepiece(MODELS[name]())
    model = tok.model
    code_of = model.trie.walk_arrays[0]
    coded = np.flatnonzero(code_of)
    by_code = coded[np.argsort(code_of[coded])]  # the alphabet's characters, commonest first
    small, large = by_code[:40], by_code[code_of[by_code] >= 1 << unigram_cache_numba.PACKED_CODE_BITS]
    rng = random.Random(11)
    pools = [small] * 6 + [np.concatenate([small, large[:200]])]  # (the test model's codes all fit 7 bits)
    words = []
    for pool in (rng.choice(pools) for _ in range(4000)):
        chars = "".join(chr(int(rng.choice(pool))) for _ in range(rng.choice((1, 2, 3, 5, 6, 7, 8, 11))))
        # without '▁' only first in a sentence, as a text's first word without a dummy prefix: a token
        # may cross no other word's start
        words.append(chars if len(words) % 4 == 0 and rng.random() < 0.5 else "▁" + chars)
    words += ["▁" + word for word in "the of and to in is was for on that with as by at from his her an it".split()]
    words = words[:len(words) // 4 * 4]
    values = np.frombuffer("".join(words).encode("utf-32-le"), np.int32).copy()
    ends = np.cumsum([len(w) for w in words]).astype(np.int64)
    starts = ends - np.array([len(w) for w in words], np.int64)
    sentences = np.arange(0, len(words) + 1, 4, dtype=np.int64)  # four words a sentence
    score64 = model.score64.numpy()
    max_abs = max(float(np.abs(score64).max()), abs(model.unk_score))
    args = (*model.trie.walk_arrays, model.score32, score64, model.unk_score, model.unk_id, SCORE_RESET_THRESHOLD,
            max_abs, WHOLE_SENTENCE_CHARS, _whole_unigram.MAX_CACHED_CHARS, _whole_unigram.CACHE_FULL_MISSES)
    want = unigram_sentences_encode(values, starts, ends, sentences, *model.trie.walk_arrays, model.score32,
                                    model.unk_score, model.unk_id, SCORE_RESET_THRESHOLD)
    cache = _whole_unigram._new_cache()
    for _ in range(2):  # cold, then every word from the cache
        got = segment_cached(values, starts, ends, sentences, *args, *cache)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    slot_ints, _, used = cache
    keys, entries = slot_ints[:, 0], slot_ints[:, 1]
    packed = (keys != 0) & (keys % 2 == 0)
    inline = packed & (entries & unigram_cache_numba.INLINE != 0)
    two = inline & (entries & unigram_cache_numba.TWO_TOKENS != 0)
    assert used[2] == 0 and used[0] == (keys != 0).sum()  # every word stored, none since a fill
    assert (keys % 2 == 1).sum() > 100 and (packed & ~inline).sum() > 100 and two.sum() > 100
    assert (inline & ~two).sum() > 40


def test_word_keys():
    """``_word_key``: a short word whose codes fit (the first's in FIRST_CODE_BITS, the others' in
    PACKED_CODE_BITS, none 0) gets an even key, one per sequence of codes and length; any other an
    odd one; none 0. Codes of every size, so that a packing without the length, or with a wider
    field than it checks, would give two words one key."""
    first_bits, other_bits = unigram_cache_numba.FIRST_CODE_BITS, unigram_cache_numba.PACKED_CODE_BITS
    code_of = np.zeros(0x2000, np.int32)
    code_of[0x100:0x100 + 5000] = np.arange(1, 5001, dtype=np.int32)  # character 0x100 + c - 1 has code c
    rng = random.Random(4)
    edges = [1, 2, 44, (1 << other_bits) - 1, 1 << other_bits, 300, (1 << first_bits) - 1, 1 << first_bits, 5000]
    words = [[0x100 + 300 - 1], [0x100 + 2 - 1, 0x100 + 44 - 1], [0x41], [0x100, 0x41]]  # 300 == 2 << 7 | 44
    for _ in range(20000):
        codes = [rng.choice(edges) if rng.random() < 0.5 else rng.randrange(1, 5001)
                 for _ in range(rng.choice((1, 2, 3, 4, 7, 8, 9)))]
        words.append([0x100 + c - 1 for c in codes])
    seen = {}
    for word in words:
        values = np.array(word, np.int32)
        key = unigram_cache_numba._word_key(values, 0, values.size, code_of)
        codes = tuple(int(code_of[v]) for v in word)
        fits = (len(codes) <= unigram_cache_numba.PACKED_CHARS and 1 <= codes[0] < 1 << first_bits
                and all(1 <= c < 1 << other_bits for c in codes[1:]))
        assert key != 0 and key % 2 == (0 if fits else 1), codes
        if fits:
            assert seen.setdefault(key, codes) == codes  # one key, one word
    assert len(seen) > 1000
