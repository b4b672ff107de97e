"""The one-call small-batch path of the SentencePiece whole-pipeline kernels (``padded_cells`` /
``ragged_cells`` of ``gputok._whole_unigram`` and ``gputok._whole_sp_bpe``: encode and
post-process in one kernel call, ``kernels/cells_numba.py``) against the same tokenizer with that
path off (the chunked encode, then the post-processing kernels): the same tensors, for Unigram
models (a charsmap, unk; byte fallback) and Mistral's BPE, cold and warm word caches, at batch 1
and in small batches; a sampling Unigram model keeps its own path."""

import itertools
import random

import pytest
import torch
from test_unigram import EDGE_CASES, trained_model

from gputok import Tokenizer, assets
from gputok._whole_cells import WholeKernel
from gputok.word_cache import WordCache

MODELS = {
    "unigram-8000": lambda: trained_model(8000),
    "unigram-8000-byte-fallback": lambda: trained_model(8000, byte_fallback=True),
    "mistral": lambda: assets.fetch("mistral-sp-model"),
}
OPTIONS = ({}, {"padding": False}, {"truncation": True, "max_length": 9}, {"add_special_tokens": False},
           {"padding": "max_length", "max_length": 40, "padding_side": "left"},
           {"pad_to_multiple_of": 8, "return_token_type_ids": True},
           {"padding": False, "truncation": True, "max_length": 5, "return_token_type_ids": True})


@pytest.fixture(scope="module", params=sorted(MODELS))
def tok(request):
    return Tokenizer.from_sentencepiece(MODELS[request.param]())


@pytest.fixture(scope="module")
def lines(parity_lines):
    rng = random.Random(5)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity_lines, 60) + rng.sample(chinese, 10) + [t for t in EDGE_CASES if len(t) < 2000]


def _without_cells(tok, batch, kwargs, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(WholeKernel, "padded_cells", property(lambda self: None))
        patch.setattr(WholeKernel, "ragged_cells", property(lambda self: None))
        return tok(batch, **kwargs)


def test_one_kernel_call_matches_the_chunked_path(tok, lines, monkeypatch):
    whole = tok._whole_pipeline_kernel
    assert isinstance(whole, WholeKernel)
    calls = []
    for name in ("padded_kernel", "ragged_kernel"):
        kernel = getattr(whole, name)
        monkeypatch.setattr(whole, name, lambda *args, kernel=kernel: calls.append(1) or kernel(*args))
    batches = [[one] for one in lines[::4]] + [lines[:32], lines]
    for cache, (batch, kwargs) in itertools.product((False, True), itertools.product(batches, OPTIONS)):
        if not cache:
            tok.word_cache = None
        elif batch is batches[0]:
            tok.word_cache = WordCache()  # cold, then warm from the batches before
        calls.clear()
        got = tok(batch, **kwargs)
        # one kernel call, text to outputs; a second where a text holds a NUL (the kernel reads the texts
        # joined by NUL, and a row more than the batch has sends it again with their lengths)
        assert calls == [1] * (1 + (len(batch) > 1 and any("\x00" in text for text in batch))), (batch, kwargs)
        want = _without_cells(tok, batch, kwargs, monkeypatch)
        assert got.keys() == want.keys(), (batch, kwargs)
        for key in want:
            assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), (key, batch, kwargs)


def test_sampling_keeps_its_path():
    tok = Tokenizer.from_sentencepiece(trained_model(8000))
    whole = tok._whole_pipeline_kernel
    assert whole.padded_cells is not None
    with tok.model.sampling(0.1, torch.Generator().manual_seed(3)):
        assert whole.padded_cells is None and whole.ragged_cells is None
    assert whole.ragged_cells is not None
