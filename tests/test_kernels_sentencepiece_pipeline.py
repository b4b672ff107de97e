"""The CUDA pipeline's SentencePiece kernels (Unigram, BPE) against their numba twins, the pipelines against the CPU.

``charsmap.charsmap_rewrite_triton`` against ``charsmap_numba.charsmap_rewrite_numba``,
``whitespace_rules.whitespace_rules_triton`` against ``sentencepiece_whitespace.whitespace_rules_numba``,
``unigram_texts.unigram_texts_triton`` against ``unigram_sentence.unigram_sentences_encode`` +
``unigram_finish_numba`` (byte fallback and SentencePiece's re-centring included: a low threshold
makes it run on short texts), ``word_split.split_before_marks_triton`` against
``word_split_numba.split_before_runs`` / ``whole_texts`` and ``sp_bpe_words.sp_bpe_words_triton``
against ``bpe_symbols_numba`` + ``bpe_heap.merge_rows`` (byte fallback, and unk with and without
fusing), under ``TRITON_INTERPRET=1`` on CPU tensors (conftest), with the tests' 8k SentencePiece
Unigram model (nmt_nfkc charsmap) and Mistral's SentencePiece BPE, on odd shapes (no text, empty texts, runs of
spaces, Hangul jamo and combining sequences the longer charsmap rules rewrite, a ligature that
becomes 18 codepoints), real lines of the parity corpus (cut short: the interpreter runs a
kernel's lanes as numpy vectors, a few ms per step) and random Unicode. The Triton kernels leave
texts apart (upper-bound regions), so each is compared after cutting it out.
"""

import copy

import numpy as np
import pytest
import torch
from test_cuda import _random_texts
from test_kernels_pipeline import _ragged

import gputok
from gputok import _dispatch, assets, cuda_pipeline
from gputok.kernels.bpe_heap import merge_rows
from gputok.kernels.bpe_symbols_numba import bpe_symbols_numba
from gputok.kernels.charsmap import charsmap_rewrite_triton, device_rules
from gputok.kernels.charsmap_numba import charsmap_rewrite_numba
from gputok.kernels.sentencepiece_whitespace import whitespace_rules_numba
from gputok.kernels.sp_bpe_words import sp_bpe_words_triton
from gputok.kernels.unigram_finish_numba import unigram_finish_numba
from gputok.kernels.unigram_sentence import unigram_sentences_encode
from gputok.kernels.unigram_texts import unigram_texts_triton
from gputok.kernels.whitespace_rules import whitespace_rules_triton
from gputok.kernels.word_split import split_before_marks_triton
from gputok.kernels.word_split_numba import (
    split_at_marks,
    split_before_runs,
    whole_texts,
)
from gputok.models import unigram
from gputok.models.unigram import SCORE_RESET_THRESHOLD

ODD = ["", "x", " ", "  Hello   world  ", "\u1100\u1161\u11a8 e\u0301 \u1112\u1161\u11ab", "ﷺ ok", "▁▁ a▁ ",
       "\t\n x \u3000", "😀\ud800 ﬁ①", "   ", "a" * 40 + " b", ""]


@pytest.fixture(scope="module")
def texts(parity_lines):
    """Real lines (their first 80 characters), random Unicode, and the odd shapes."""
    real = [line[:80] for line in parity_lines[7::1999] if line.strip()][:12]
    return real + _random_texts(10, seed=17) + ODD


@pytest.fixture(scope="module")
def rules(sp_test_tokenizer):
    charsmap = sp_test_tokenizer.normalizer.precompiled.charsmap
    return charsmap.numpy_rules()


@pytest.fixture(scope="module")
def mistral():
    return gputok.Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))


def _normalized(units, offsets, rules, **flags):
    """The twins' normalized texts: charsmap, then the whitespace rules."""
    out, out_offsets, unit = charsmap_rewrite_numba(units, offsets, *rules)
    text, text_offsets, _ = whitespace_rules_numba(out, out_offsets, unit, flags.get("add_dummy_prefix", True),
                                                   flags.get("remove_extra_whitespaces", True),
                                                   flags.get("escape_whitespaces", True))
    return out, out_offsets, unit, text, text_offsets


def _cut(values, starts, lengths):
    return [values[s:s + n].tolist() for s, n in zip(starts, lengths)]


def test_charsmap_equals_twin(texts, rules):
    units, offsets = _ragged(texts)
    want, want_offsets, want_units = charsmap_rewrite_numba(units, offsets, *rules)
    tables = device_rules(rules, torch.device("cpu"))
    assert tables["expand"] == 18 and tables["sorted_hashes"].numel() > 0  # the ligature; the longer rules
    out, out_units, lengths = charsmap_rewrite_triton(torch.from_numpy(units), torch.from_numpy(offsets), **tables)
    starts = [tables["expand"] * offsets[t] + 2 * t for t in range(len(texts))]
    assert lengths.tolist() == np.diff(want_offsets).tolist()
    bounds = list(zip(want_offsets[:-1], want_offsets[1:]))
    assert _cut(out.numpy(), starts, lengths.tolist()) == [want[a:b].tolist() for a, b in bounds]
    assert _cut(out_units.numpy(), starts, lengths.tolist()) == [want_units[a:b].tolist() for a, b in bounds]
    assert any(np.diff(want_units[a:b]).tolist().count(2) for a, b in bounds)  # a longer rule ran


def test_charsmap_rule_longer_than_the_expansion(rules):
    """A longer rule that writes more codepoints than ``expand`` (the most it writes per codepoint
    it reads): the kernel writes all of them, as the twin (it wrote ``expand`` and left holes)."""
    direct, table_values, table_offsets, hashes, order, key_values, key_offsets, rule_values, rule_offsets, longest = (
        rules)
    written = rule_offsets[1] - rule_offsets[0]
    rule_values = np.concatenate([np.arange(0x41, 0x41 + 40, dtype=rule_values.dtype), rule_values[written:]])
    rule_offsets = np.concatenate([[0], rule_offsets[1:] - written + 40]).astype(rule_offsets.dtype)
    rules = (direct, table_values, table_offsets, hashes, order, key_values, key_offsets, rule_values, rule_offsets,
             longest)
    key = "".join(map(chr, key_values[key_offsets[0]:key_offsets[1]]))
    texts = [key, "x" + key + "y" + key, key * 3, "plain", ""]
    units, offsets = _ragged(texts)
    want, want_offsets, want_units = charsmap_rewrite_numba(units, offsets, *rules)
    tables = device_rules(rules, torch.device("cpu"))
    assert tables["expand"] < 40 and np.diff(want_offsets)[0] == 40  # the rule ran, longer than expand
    out, out_units, lengths = charsmap_rewrite_triton(torch.from_numpy(units), torch.from_numpy(offsets), **tables)
    starts = [tables["expand"] * offsets[t] + 2 * t for t in range(len(texts))]
    bounds = list(zip(want_offsets[:-1], want_offsets[1:]))
    assert _cut(out.numpy(), starts, lengths.tolist()) == [want[a:b].tolist() for a, b in bounds]
    assert _cut(out_units.numpy(), starts, lengths.tolist()) == [want_units[a:b].tolist() for a, b in bounds]


def test_charsmap_no_texts(rules):
    *_, lengths = charsmap_rewrite_triton(torch.zeros(0, dtype=torch.int32), torch.zeros(1, dtype=torch.int64),
                                          **device_rules(rules, torch.device("cpu")))
    assert lengths.numel() == 0


@pytest.mark.parametrize("flags", [dict(), dict(add_dummy_prefix=False, escape_whitespaces=False),
                                   dict(remove_extra_whitespaces=False)])
@pytest.mark.parametrize("with_charsmap", [True, False])
def test_whitespace_rules_equal_twin(texts, rules, flags, with_charsmap):
    units, offsets = _ragged(texts)
    spec = dict(dict(add_dummy_prefix=True, remove_extra_whitespaces=True, escape_whitespaces=True), **flags)
    if with_charsmap:
        out, out_offsets, unit = charsmap_rewrite_numba(units, offsets, *rules)
        tables = device_rules(rules, torch.device("cpu"))
        rewritten, rewritten_units, lengths = charsmap_rewrite_triton(torch.from_numpy(units),
                                                                      torch.from_numpy(offsets), **tables)
        expand, gap = tables["expand"], 2
    else:
        out, out_offsets, unit = units, offsets, np.arange(units.size)
        rewritten, rewritten_units, lengths = torch.from_numpy(units), None, torch.from_numpy(np.diff(offsets))
        expand, gap = 1, 0
    want, want_offsets, _ = whitespace_rules_numba(out, out_offsets, unit, spec["add_dummy_prefix"],
                                                   spec["remove_extra_whitespaces"], spec["escape_whitespaces"])
    text, text_lengths = whitespace_rules_triton(rewritten, rewritten_units, torch.from_numpy(offsets), lengths,
                                                 chars=units.size, in_expand=expand, in_gap=gap, out_expand=expand,
                                                 **spec)
    starts = [expand * offsets[t] + 2 * t for t in range(len(texts))]
    assert _cut(text.numpy(), starts, text_lengths.tolist()) == [want[a:b].tolist() for a, b in
                                                                 zip(want_offsets[:-1], want_offsets[1:])]


def _layout(text, text_offsets):
    """Normalized texts in the CUDA pipeline's layout, expand 1: text ``t`` from ``offsets[t] + 2 * t``
    (``offsets``: the cumulative lengths). Returns (values, offsets, lengths)."""
    lengths = np.diff(text_offsets)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.zeros(text.size + 2 * lengths.size, np.int32)
    for t in range(lengths.size):
        values[offsets[t] + 2 * t:offsets[t + 1] + 2 * t] = text[text_offsets[t]:text_offsets[t + 1]]
    return values, offsets, lengths


def _twin_tokens(text, text_offsets, trie, score32, unk_score, unk_id, threshold, byte_ids, byte_fallback):
    """Each text's tokens by the CPU path's kernels: the Viterbi over the whole text, cut at its
    words, then unk handling per word."""
    starts, ends, word_offsets = split_at_marks(text, text_offsets, 0x2581, True)
    ids, piece_ends, offsets = unigram_sentences_encode(text, starts, ends, word_offsets, *trie, score32, unk_score,
                                                        unk_id, threshold)
    ids, _, offsets = unigram_finish_numba(ids, piece_ends, offsets, text, starts, unk_id, byte_ids, byte_fallback)
    return [ids[offsets[word_offsets[t]]:offsets[word_offsets[t + 1]]].tolist() for t in range(len(text_offsets) - 1)]


@pytest.mark.parametrize(("byte_fallback", "threshold", "arrayed"),
                         [(False, SCORE_RESET_THRESHOLD, None), (True, 30.0, None), (False, SCORE_RESET_THRESHOLD, 3)])
def test_unigram_texts_equal_twin(texts, rules, sp_test_tokenizer, byte_fallback, threshold, arrayed):
    units, offsets = _ragged(texts + ["x" * 300 + " ☃ ☃☃"])  # a text of several re-centrings
    *_, text, text_offsets = _normalized(units, offsets, rules)
    model = sp_test_tokenizer.model
    if arrayed is not None:  # a trie whose array holds 3 codes below the root: most steps search rare edges
        model = copy.copy(model)
        model.trie = unigram.PieceTrie({p: i for i, (p, t) in enumerate(zip(model.pieces, model.types))
                                        if p and t in (unigram.NORMAL, unigram.USER_DEFINED)}, arrayed=arrayed)
        assert model.trie.walk_arrays[2] == arrayed and model.trie.walk_arrays[4].size > 1000
    byte_ids = np.arange(256, dtype=np.int64) + 5000  # any 256 ids: the model has no byte pieces
    want = _twin_tokens(text, text_offsets, model.trie.walk_arrays, model.score32, model.unk_score, model.unk_id,
                        threshold, byte_ids, byte_fallback)
    values, layout_offsets, lengths = _layout(text, text_offsets)
    tables = dict(cuda_pipeline._unigram_tables(model, torch.device("cpu")), byte_ids=torch.from_numpy(byte_ids),
                  byte_fallback=byte_fallback, reset_threshold=threshold)
    tokens, piece_starts, counts = unigram_texts_triton(torch.from_numpy(values), torch.from_numpy(layout_offsets),
                                                        torch.from_numpy(lengths), expand=1, mark=0x2581, **tables)
    assert _cut(tokens.numpy(), piece_starts.tolist(), counts.tolist()) == want
    assert any(model.unk_id in row for row in want) != byte_fallback  # unk pieces were made (and spelled as bytes)


def test_pipeline_equals_cpu(sp_test_tokenizer, texts, monkeypatch):
    calls = []
    monkeypatch.setattr(cuda_pipeline, "encode", lambda *a, _encode=cuda_pipeline.encode, **k: calls.append(1) or
                        _encode(*a, **k))
    some = texts[::3]  # the ragged output and the options: the same kernels, another row layout
    want, want_flat = sp_test_tokenizer(texts), sp_test_tokenizer(some, padding=False)
    want_cut = sp_test_tokenizer(some, truncation=True, max_length=5, padding="max_length", padding_side="left")
    with _dispatch.use_backend("triton"):
        got, flat = sp_test_tokenizer(texts), sp_test_tokenizer(some, padding=False)
        cut = sp_test_tokenizer(some, truncation=True, max_length=5, padding="max_length", padding_side="left")
    assert len(calls) == 3, "the Triton backend did not take gputok.cuda_pipeline"
    for a, b in ((got, want), (flat, want_flat), (cut, want_cut)):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_pipeline_covers_sentencepiece_unigram(sp_test_tokenizer):
    covered = dict(pairs=None, return_offsets=False, overflow=False, truncation=None)
    assert cuda_pipeline.supports(sp_test_tokenizer, **covered)
    assert not cuda_pipeline.supports(sp_test_tokenizer, **dict(covered, return_offsets=True))


@pytest.mark.parametrize("mark", [0x2581, -1])
def test_split_before_marks_equals_twin(texts, rules, mark):
    units, offsets = _ragged(texts)
    *_, text, text_offsets = _normalized(units, offsets, rules, remove_extra_whitespaces=False)
    want_starts, want_ends, want_offsets = (split_before_runs(text, text_offsets, mark) if mark >= 0
                                            else whole_texts(text_offsets))
    values, layout_offsets, lengths = _layout(text, text_offsets)
    starts, ends, word_base, counts, total = split_before_marks_triton(
        torch.from_numpy(values), torch.from_numpy(layout_offsets), torch.from_numpy(lengths), expand=1, mark=mark)
    assert int(total) == want_offsets[-1]
    shift = layout_offsets + 2 * np.arange(layout_offsets.size) - text_offsets  # layout place - twin place
    for t in range(len(texts)):
        a, b = want_offsets[t], want_offsets[t + 1]
        packed = slice(int(word_base[t]), int(word_base[t]) + b - a)
        assert int(counts[t]) == b - a
        assert (starts[packed].numpy() - shift[t]).tolist() == want_starts[a:b].tolist()
        assert (ends[packed].numpy() - shift[t]).tolist() == want_ends[a:b].tolist()


@pytest.mark.parametrize(("byte_fallback", "fuse_unk"), [(True, True), (False, True), (False, False)])
def test_sp_bpe_words_equal_twin(texts, mistral, byte_fallback, fuse_unk):
    units, offsets = _ragged(texts + ["▁" + "ab" * 20 + "☃☃x☃"])  # a word of several tiles; a run of unknowns
    text, text_offsets, _ = whitespace_rules_numba(units, offsets, np.arange(units.size), True, False, True)
    starts, ends, _ = split_before_runs(text, text_offsets, 0x2581)
    codes = np.concatenate([text[s:e] for s, e in zip(starts, ends)]).astype(np.int32)
    word_offsets = np.zeros(starts.size + 1, np.int64)
    np.cumsum(ends - starts, out=word_offsets[1:])
    tables = mistral.model._numba_tables
    symbols = dict(tables["symbols"], byte_fallback=byte_fallback, fuse_unk=fuse_unk)
    ids, symbol_offsets, _ = bpe_symbols_numba(codes, word_offsets, **symbols)
    merged = merge_rows(ids, symbol_offsets, np.empty(0, np.int64), **tables["merges"])
    want = [ids[a:b].tolist() for a, b in zip(merged[:-1], merged[1:])]

    on_device = dict(cuda_pipeline._sp_bpe_tables(mistral.model, torch.device("cpu")), byte_fallback=byte_fallback,
                     fuse_unk=fuse_unk)
    # The words as the split leaves them, one empty place past the total.
    tokens, piece_starts, counts = sp_bpe_words_triton(torch.from_numpy(text), torch.from_numpy(np.append(starts, 0)),
                                                       torch.from_numpy(np.append(ends, 0)),
                                                       torch.tensor([starts.size]), **on_device)
    assert [tokens[s:s + n].tolist() for s, n in zip(piece_starts[:-1].tolist(), counts[:-1].tolist())] == want
    assert int(counts[-1]) == 0  # the place past the total: no word
    unk = tables["symbols"]["unk_id"]
    assert any(unk in row for row in want) != byte_fallback


def test_sp_bpe_pipeline_equals_cpu(mistral, texts, monkeypatch):
    calls = []
    monkeypatch.setattr(cuda_pipeline, "_sp_bpe_words", lambda *a, _words=cuda_pipeline._sp_bpe_words:
                        calls.append(1) or _words(*a))
    some = texts[::3]
    want, want_flat = mistral(texts), mistral(some, padding=False)
    with _dispatch.use_backend("triton"):
        got, flat = mistral(texts), mistral(some, padding=False)
    assert len(calls) == 2, "the Triton backend did not take gputok.cuda_pipeline"
    for a, b in ((got, want), (flat, want_flat)):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
    assert cuda_pipeline.supports(mistral, pairs=None, return_offsets=False, overflow=False, truncation=None)
