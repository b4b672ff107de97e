"""A batch too large for the one-call path of the WordPiece (BERT) and BPE (cl100k) kernels, encoded a
part per CPU thread (``Tokenizer._cells_in_parts``: ``encode_part`` on each thread, then
``cells_numba`` on the caller), against the same tokenizer with that path off (the chunked encode
and fill, ``Tokenizer._padded_in_chunks``): the same tensors for every post-processing option,
with and without a word cache; the oracles' ids; 8 Python threads calling at once get what one
call gets; a BPE model that samples (dropout) never takes the path, so its draws stay in order."""

import random

import pytest
import torch
from tiktoken import Encoding
from tiktoken.load import load_tiktoken_bpe
from test_components_bpe_dropout import _hf
from test_cpu_threads import _assert_same
from test_unigram_parts import (_spy_parts, check_eight_threads_get_one_calls_tensors,
                                check_parts_give_the_chunked_paths_tensors)

from gputok import Tokenizer, assets
from gputok import tokenizer as tokenizer_module
from gputok.regex_split import PATTERNS


@pytest.fixture(scope="module")
def cl100k():
    return Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")


@pytest.fixture(params=["bert", "cl100k"])
def tok(request, bert, cl100k):
    return {"bert": bert, "cl100k": cl100k}[request.param]


@pytest.fixture(scope="module")
def lines(parity_lines):
    rng = random.Random(3)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity_lines, 300) + rng.sample(chinese, 40) + ["", " ", "x" * 3000, "naïve café  ＡＢＣ"]


def test_parts_give_the_chunked_paths_tensors(tok, lines, split_small, monkeypatch):
    check_parts_give_the_chunked_paths_tensors(tok, lines, monkeypatch)


def test_parts_give_the_oracles_ids(bert, hf_bert, cl100k, lines, split_small, monkeypatch):
    reference = Encoding("cl100k", pat_str=PATTERNS["cl100k"], special_tokens={},
                         mergeable_ranks=load_tiktoken_bpe(str(assets.fetch("cl100k-tiktoken"))))
    for tok, expected in ((bert, [e.ids for e in hf_bert.encode_batch(lines)]),
                          (cl100k, reference.encode_ordinary_batch(lines))):
        calls = _spy_parts(tok, monkeypatch)
        for _ in range(2):  # cl100k: a cold word cache, then warm
            got = tok(lines, padding=False, add_special_tokens=tok is bert)
            ids, ends = got["input_ids"].tolist(), got["row_offsets"].tolist()
            assert [ids[a:b] for a, b in zip(ends, ends[1:])] == expected
        assert len(calls) == 4


def test_eight_threads_get_one_calls_tensors(tok, lines, split_small, monkeypatch):
    check_eight_threads_get_one_calls_tensors(tok, lines, monkeypatch)


def test_a_sampling_bpe_takes_no_part(hf_trained_models, lines, split_small, monkeypatch):
    tok = Tokenizer.from_str(_hf(hf_trained_models, "bpe_byte", None).to_str())  # it samples when asked
    calls = _spy_parts(tok, monkeypatch)
    assert tok(lines, padding=False)["input_ids"].numel() and len(calls) == 2  # not sampling: parts
    calls.clear()
    with tok.model.sampling(0.2, torch.Generator().manual_seed(5)):
        got = tok(lines)
    with tok.model.sampling(0.2, torch.Generator().manual_seed(5)):
        again = tok(lines)
    assert not calls
    _assert_same(got, again)


@pytest.fixture(params=["bert", "cl100k", "unigram"])
def ragged_tok(request, bert, cl100k, sp_test_model_path):
    if request.param == "unigram":
        return Tokenizer.from_sentencepiece(sp_test_model_path)
    return {"bert": bert, "cl100k": cl100k}[request.param]


def test_encode_ragged_takes_the_parts_path(ragged_tok, lines, split_small, monkeypatch):
    """``encode_ragged`` / ``encode_batch`` without spans: the parts path, the chunked path's ids."""
    calls = _spy_parts(ragged_tok, monkeypatch)
    for batch in (lines, lines[:150]):
        calls.clear()
        got = ragged_tok.encode_ragged(batch)
        assert len(calls) == 2
        with monkeypatch.context() as patch:
            patch.setattr(tokenizer_module, "PARTS_MAX_CHARS", 0)
            want = ragged_tok.encode_ragged(batch)
            spans = ragged_tok.encode_ragged(batch, with_spans=True)
        assert torch.equal(got.ids.values, want.ids.values) and torch.equal(got.ids.offsets, want.ids.offsets)
        ids, ends = want.ids.values.tolist(), want.ids.offsets.tolist()
        assert ragged_tok.encode_batch(batch, add_special_tokens=False) == [ids[a:b] for a, b in zip(ends, ends[1:])]
        assert len(calls) == 4  # encode_batch's two parts
        calls.clear()
        with_spans = ragged_tok.encode_ragged(batch, with_spans=True)  # spans: the chunked path
        assert not calls and torch.equal(with_spans.spans, spans.spans)
        assert torch.equal(with_spans.ids.values, want.ids.values)
