"""The CUDA pipeline's byte-level BPE kernels (cl100k) against their numba twins, and the pipeline against tiktoken.

``regex_split.cl100k_split_triton`` (cl100k, llama3, qwen2) against ``regex_split_numba``, and
``bpe_words.byte_bpe_words_triton`` against ``bpe_symbols_numba`` + ``bpe_heap.merge_rows``, under
``TRITON_INTERPRET=1`` on CPU tensors (conftest), on odd shapes (no text, empty texts, one
character, contractions, runs of whitespace and newlines at a text's end, a word longer than a
tile), real lines of the parity corpus and random Unicode. The Triton kernels leave words and
tokens apart (upper-bound regions), so each is compared after cutting it out. Inputs stay small:
the interpreter runs a kernel's lanes as numpy vectors, a few ms per step.
"""

import copy

import numpy as np
import pytest
import tiktoken
import torch
from tiktoken.load import load_tiktoken_bpe

import gputok
from gputok import _dispatch, assets, cuda_pipeline, regex_split
from gputok.kernels.bpe_heap import merge_rows
from gputok.kernels.bpe_symbols_numba import bpe_symbols_numba
from gputok.kernels.bpe_words import byte_bpe_words_triton
from gputok.kernels.regex_split import cl100k_split_triton
from gputok.kernels.regex_split_numba import regex_split_numba

from test_cuda import _random_texts
from test_kernels_pipeline import _ragged

ODD = ["", "x", " ", "Hello world's  end", "it's  \t\n", "'ll 'LL 're' 'S", "foo!!!\n\nbar   ", "  \n\n  x",
       "\r\n\r\n  ", "x1234567 ?!", "中文字 😀 ..", "a" * 70 + " ok", ""]


@pytest.fixture(scope="module")
def texts(parity_lines):
    """Real English and Chinese lines, random Unicode, and the odd shapes."""
    english = [line for line in parity_lines[5::1999] if line.strip()][:10]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][7::300][:2]
    return english + chinese + _random_texts(8, seed=11) + ODD


@pytest.fixture(scope="module")
def cl100k():
    return gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")


def _split(units, offsets, rule):
    kinds, letters, _ = regex_split._numba_tables(rule)
    digits, end_first = cuda_pipeline._REGEX_RULES[rule]
    return cl100k_split_triton(torch.from_numpy(units), torch.from_numpy(offsets), torch.from_numpy(kinds),
                               torch.from_numpy(letters), digits=digits, end_first=end_first)


@pytest.mark.parametrize("rule", ["cl100k", "llama3", "qwen2"])
def test_split_equals_twin(texts, rule):
    units, offsets = _ragged(texts)
    kinds, letters, code = regex_split._numba_tables(rule)
    want_starts, want_ends, want_offsets = regex_split_numba(units, offsets, kinds, letters, code)
    word_starts, word_ends, word_base, counts, total = _split(units, offsets, rule)
    assert int(total) == want_offsets[-1]
    for t in range(len(texts)):
        a, b = want_offsets[t], want_offsets[t + 1]
        assert int(counts[t]) == b - a
        packed = slice(int(word_base[t]), int(word_base[t]) + b - a)
        assert word_starts[packed].tolist() == want_starts[a:b].tolist()
        assert word_ends[packed].tolist() == want_ends[a:b].tolist()
    assert not word_starts[int(total):].any() and not word_ends[int(total):].any()  # the rest: empty words


def test_split_no_texts():
    *_, counts, total = _split(np.zeros(0, np.int32), np.zeros(1, np.int64), "cl100k")
    assert counts.numel() == 0 and int(total) == 0


@pytest.mark.parametrize("whole", [True, False])
def test_byte_bpe_equals_twin(texts, cl100k, whole):
    if not whole:  # the rule changes whole words only: a third of the texts, the long word kept
        texts = texts[::3] + ["a" * 70 + " ok"]
    units, offsets = _ragged(texts)
    kinds, letters, code = regex_split._numba_tables("cl100k")
    starts, ends, _ = regex_split_numba(units, offsets, kinds, letters, code)
    # The twins take the words back to back.
    codes = np.concatenate([units[s:e] for s, e in zip(starts, ends)]).astype(np.int32)
    word_offsets = np.zeros(starts.size + 1, np.int64)
    np.cumsum(ends - starts, out=word_offsets[1:])
    tables = cl100k.model._numba_tables
    symbols = dict(tables["symbols"], whole_slots=tables["symbols"]["whole_slots"] if whole else np.zeros(0, np.int64))
    ids, symbol_offsets, _ = bpe_symbols_numba(codes, word_offsets, **symbols)
    merged = merge_rows(ids, symbol_offsets, np.empty(0, np.int64), **tables["merges"])
    want = [ids[a:b].tolist() for a, b in zip(merged[:-1], merged[1:])]

    on_device = dict(cuda_pipeline._bpe_tables(cl100k.model, torch.device("cpu")))
    if not whole:
        on_device["whole_slots"] = torch.zeros(0, dtype=torch.int64)
    # The words as the split leaves them: positions in the texts, one empty place past the total.
    word_starts = torch.from_numpy(np.append(starts, 0))
    word_ends = torch.from_numpy(np.append(ends, 0))
    tokens, piece_starts, counts = byte_bpe_words_triton(torch.from_numpy(units), word_starts, word_ends,
                                                         torch.tensor([starts.size]), **on_device)
    got = [tokens[s:s + n].tolist() for s, n in zip(piece_starts[:-1].tolist(), counts[:-1].tolist())]
    assert got == want
    assert int(counts[-1]) == 0
    assert (ends - starts).max() > 16  # a word of several tiles (the kernel reads 16 positions at a time)


def test_pipeline_equals_tiktoken(cl100k, texts, monkeypatch):
    reference = tiktoken.Encoding("cl100k", pat_str=regex_split.PATTERNS["cl100k"], special_tokens={},
                                  mergeable_ranks=load_tiktoken_bpe(str(assets.fetch("cl100k-tiktoken"))))
    calls = []
    monkeypatch.setattr(cuda_pipeline, "encode", lambda *a, _encode=cuda_pipeline.encode, **k: calls.append(1) or
                        _encode(*a, **k))
    some = texts[::3]  # the ragged output: the same kernels, another row layout
    with _dispatch.use_backend("triton"):
        out = cl100k(texts)
        flat = cl100k(some, padding=False)
    assert len(calls) == 2, "the Triton backend did not take gputok.cuda_pipeline"
    expected = reference.encode_batch([gputok.ingest.without_surrogates(t) for t in texts])
    mask = out["attention_mask"].bool()
    assert [row[m].tolist() for row, m in zip(out["input_ids"], mask)] == expected
    bounds = flat["row_offsets"].tolist()
    assert [flat["input_ids"][a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == expected[::3]


@pytest.mark.parametrize("options", [dict(padding_side="left", pad_to_multiple_of=8),
                                     dict(truncation=True, max_length=5, padding="max_length")])
def test_pipeline_options_equal_cpu(cl100k, texts, options):
    chosen = texts[::4]
    want = cl100k(chosen, **options)
    with _dispatch.use_backend("triton"):
        got = cl100k(chosen, **options)
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key


def test_pipeline_covers_cl100k_style_splits(cl100k):
    covered = dict(pairs=None, return_offsets=False, overflow=False, truncation=None)
    assert cuda_pipeline.supports(cl100k, **covered)
    assert not cuda_pipeline.supports(cl100k, **dict(covered, return_offsets=True))
    other = copy.copy(cl100k)
    for split in (gputok.pre_tokenizers.Split("o200k", byte_level=True), gputok.pre_tokenizers.ByteLevel()):
        other.pre_tokenizer = split  # no Triton split for these rules yet: the stage-by-stage path
        assert not cuda_pipeline.supports(other, **covered)
