"""The whole-pipeline kernel of SentencePiece BPE (``gputok.kernels.sp_bpe_texts_numba``, chosen by
``gputok._whole_sp_bpe``) against the stage path it replaces (``Tokenizer._encode_codepoints``:
normalizer, word split, BPE model, scatter, one kernel each) and against sentencepiece: the same
ids, offsets and spans on real text, random Unicode and edge cases, at batch 1 and in batches;
for Mistral's model (identity normalizer, byte fallback) and a model trained by sentencepiece
with a charsmap (nmt_nfkc, extra whitespace removed, ``<unk>``)."""

import random

import numpy as np
import pytest
import sentencepiece
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import Tokenizer, assets
from gputok.ingest import utf32_units
from gputok.kernels.ingest_numba import codepoints_numba
from gputok.models.bpe_sentencepiece import UserPiecesBPE
from gputok.ragged import Ragged

EDGE = ["", " ", "  ", "a", " a", "a ", "a  b", "\n", "\t x \r\n", "▁", "▁▁x ▁", "x\x00y", "é中文𝔘\U0001F600",
        "\U000F0000\U0010FFFD", "   x", "1" * 300, " " * 300, "x" + " " * 77 + "y", "日本語の文章" * 60,
        "ab" * 700, "ｈｅｌｌｏ　ｗｏｒｌｄ", "①②  "]


@pytest.fixture(scope="module")
def mistral():
    return Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))


@pytest.fixture(scope="module")
def mistral_sp():
    return sentencepiece.SentencePieceProcessor(model_file=str(assets.fetch("mistral-sp-model")))


@pytest.fixture(scope="module")
def texts(parity_lines):
    rng = random.Random(17)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return parity_lines[3::400] + chinese[::80] + [_random_text(rng) for _ in range(300)] + EDGE


def _random_text(rng: random.Random) -> str:
    """Spaces, "▁", ASCII, accents, CJK, astral characters (no lone surrogates: the reference
    ingest turns them into U+FFFD, as the kernel does, but sentencepiece refuses them)."""
    pools = [" ", "\u2581", "abcxyz.,!", "éàü\u0301", "中文日本語", "\U0001F600\U00010348\U0010FFFD"]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randrange(0, 60)))


def _both(tok: Tokenizer, texts: list[str], with_spans: bool):
    """(whole kernel, stage path) of ``texts``: ids, token offsets and spans as lists."""
    whole = tok._whole_pipeline_kernel
    assert whole is not None
    units, lengths = utf32_units(texts)
    values, offsets = codepoints_numba(units, lengths)
    stages = tok._encode_codepoints(Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), with_spans)
    got = whole(units, lengths, with_spans)
    assert got.ids.values.dtype == stages.ids.values.dtype == torch.int64
    return [(e.ids.values.tolist(), e.ids.offsets.tolist(), None if e.spans is None else e.spans.tolist())
            for e in (got, stages)]


@pytest.mark.parametrize("with_spans", [False, True])
def test_whole_kernel_equals_stages_and_sentencepiece(mistral, mistral_sp, texts, with_spans):
    got, stages = _both(mistral, texts, with_spans)
    assert got == stages
    assert Ragged(torch.tensor(got[0]), torch.tensor(got[1])).tolist() == mistral_sp.encode(texts)


def test_whole_kernel_at_batch_one(mistral, texts):
    for text in texts[::7]:
        got, stages = _both(mistral, [text], True)
        assert got == stages, text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40), max_size=6))
def test_whole_kernel_on_random_unicode(mistral, mistral_sp, batch):
    got, stages = _both(mistral, batch, True)
    assert got == stages
    assert Ragged(torch.tensor(got[0]), torch.tensor(got[1])).tolist() == mistral_sp.encode(batch)


def test_whole_kernel_with_a_charsmap(tmp_path, parity_lines, texts):
    """A model spm_train writes by default: nmt_nfkc charsmap, extra whitespace removed, <unk>."""
    (tmp_path / "train.txt").write_text("\n".join(parity_lines[::160]), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "m"),
                                             model_type="bpe", vocab_size=1000, minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    tok = Tokenizer.from_sentencepiece(tmp_path / "m.model")
    assert tok.normalizer.precompiled is not None
    got, stages = _both(tok, texts, True)
    assert got == stages
    assert Ragged(torch.tensor(got[0]), torch.tensor(got[1])).tolist() == sp.encode(texts)


def test_pipelines_the_kernel_does_not_cover_keep_the_stages(mistral, tmp_path):
    """User-defined pieces (matched whole before the merges) keep the stage path; replacing a
    stage drops the kernel made for the old one."""
    (tmp_path / "train.txt").write_text("hello world <sep> again\n" * 50, encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "u"),
                                             model_type="bpe", vocab_size=40, user_defined_symbols=["<sep>"],
                                             minloglevel=2)
    user = Tokenizer.from_sentencepiece(tmp_path / "u.model")
    assert isinstance(user.model, UserPiecesBPE) and user._whole_pipeline_kernel is None
    assert mistral._whole_pipeline_kernel is not None
    copy = Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))
    copy.pre_tokenizer = None
    assert copy._whole_pipeline_kernel is None
    assert np.array_equal(copy.encode_ragged(["a b"]).ids.values.numpy(), mistral.encode_ragged(["a b"]).ids.values.numpy())


def test_word_store_keeps_results_exact_through_resets_and_threads(texts):
    """The kernel's word store (one per thread and word cache): a cache too small for the batch
    fills, then empties once its misses outnumber its hits; no cache, a new cache, and 8 threads
    encoding at once all give the stage path's ids and spans."""
    import threading

    from gputok.word_cache import WordCache

    tok = Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))
    batches = [texts[i:i + 40] for i in range(0, len(texts), 40)]
    expected = [_both(tok, b, True)[1] for b in batches]
    for cache in (WordCache(capacity=50), None, WordCache()):
        tok.word_cache = cache
        for _ in range(2):  # the second pass reads what the first stored
            assert [_both(tok, b, True)[0] for b in batches] == expected
    errors = []

    def worker(k):
        try:
            for i in range(len(batches)):
                j = (i + k) % len(batches)
                assert _both(tok, batches[j], True)[0] == expected[j]
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_full_word_store_keeps_its_words_until_misses_outnumber_hits(mistral, parity_lines):
    """A full store adds no word and keeps answering from what it holds while its hits keep up
    with its misses; once at least ``full_misses`` misses since it filled outnumber the hits, it
    empties and refills. Every call gives the stage path's ids throughout."""
    from gputok._whole_sp_bpe import WordStore
    from gputok.kernels import sp_bpe_texts_numba

    tables = mistral._whole_pipeline_kernel.tables()
    store = WordStore(16, 64)
    arrays = store.arrays()
    used = store.used

    def encode(texts: list[str]) -> None:
        units, lengths = utf32_units(texts)
        ids, offsets, _ = sp_bpe_texts_numba.encode_texts(units, lengths, *tables[:-len(arrays)], *arrays, False)
        want = _both(mistral, texts, False)[1]
        assert (ids.tolist(), offsets.tolist()) == want[:2]

    common = ["the cat and the dog of the house in a town"] * 3
    encode(common)  # 9 distinct words: the store holds them all
    assert used[0] == 9 and used[3] == used[4] == 0
    fresh = sorted({w for line in parity_lines[:200] for w in line.split() if w.isalpha()} - set(common[0].split()))
    encode([" ".join(fresh[:12])])  # fills the store (16 words, or its characters), then a few misses
    full = used[0]
    assert 9 < full <= 16 and used[4] > 0
    hits = used[3]
    encode(common * 2)  # hits: the store keeps its words
    assert used[0] == full and used[3] == hits + 66  # 11 words a line
    encode([" ".join(fresh[12:12 + 100])])  # misses outnumber the hits: emptied, refilled with new words
    before = used.copy()
    encode(common)  # no longer all held: a miss counted, or a word added
    assert used[4] > before[4] or used[0] > before[0]


def test_rows_merge_alike_without_the_packed_pair_map_and_direct_chars(mistral, texts):
    """A vocabulary of 2**16 tokens or more has no packed pair map (``bpe_heap.packed_pairs``):
    its rows all merge over the map's slot arrays (``merge_row``); a model without the
    ``char_direct`` array (``_whole_sp_bpe.direct_chars``) looks every character up in the char
    map. Both give the same ids and spans as Mistral's tables with them."""
    from gputok._whole_sp_bpe import _NO_STORE, _NOT_PACKED
    from gputok.kernels import sp_bpe_texts_numba
    from gputok.kernels.bpe_heap import packed_pairs

    model = mistral._whole_pipeline_kernel.tables()[:-len(_NO_STORE)]
    assert model[-4].size and model[-1].size  # Mistral's 32,000 tokens fit the packed map
    merges = mistral.model._numba_tables["merges"]
    assert packed_pairs(merges["slot_keys"], merges["slot_values"], 1 << 16) is None
    units, lengths = utf32_units(texts)
    fast = sp_bpe_texts_numba.encode_texts(units, lengths, *model, *_NO_STORE, True)
    plain = sp_bpe_texts_numba.encode_texts(units, lengths, *model[:-4], *_NOT_PACKED, np.zeros(0, np.int32),
                                            *_NO_STORE, True)
    for a, b in zip(fast, plain):
        assert np.array_equal(a, b)
