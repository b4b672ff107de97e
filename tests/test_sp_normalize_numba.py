"""``kernels/sp_normalize_numba.normalize_split`` (SentencePiece's charsmap, whitespace rules,
dummy suffix and word split in one pass per text) against the kernels it stands for, in turn:
``charsmap_rewrite_numba``, ``whitespace_rules_numba``, ``add_dummy``, ``split_at_marks``
/ ``split_before_runs``; on real text, edge cases and random Unicode, every option, a charsmap
(nmt_nfkc) and none, batches the fast pass covers and ones it hands to those kernels."""

import itertools
import random

import numpy as np
import pytest
from test_unigram import EDGE_CASES, trained_model

from gputok import Tokenizer
from gputok._whole_cells import NO_CHARSMAP
from gputok.ingest import utf32_units
from gputok.kernels.charsmap_numba import charsmap_rewrite_numba
from gputok.kernels.ingest_numba import codepoints_numba
from gputok.kernels.sentencepiece_whitespace import add_dummy, dummy_sources_when_empty, whitespace_rules_numba
from gputok.kernels.sp_normalize_numba import normalize_split
from gputok.kernels.word_split_numba import _split_at

MARK = 0x2581
POOLS = [" ", "  ", "\u2581", "abcxyz.,!", "\u3000\u00a0", "éàü\u0301\u0308", "ｈｅｌｌｏ①", "中文日本語",
         "\U0001F600", "\x00\t\n", "\ufb01\u2126"]


@pytest.fixture(scope="module")
def rules():
    tok = Tokenizer.from_sentencepiece(trained_model(8000))
    charsmap = tok.normalizer.precompiled.charsmap
    return charsmap.numpy_rules()


@pytest.fixture(scope="module")
def batches(parity_lines):
    rng = random.Random(11)
    english = [line for line in rng.sample(parity_lines, 400) if line.isascii()]
    randoms = ["".join(rng.choice(rng.choice(POOLS)) for _ in range(rng.randrange(0, 30))) for _ in range(300)]
    edges = [t for t in EDGE_CASES if len(t) < 3000] + ["", " ", "  a  ", "a ▁", "▁", " ▁ ", "a\u0301 b", "x  "]
    return [english, randoms, edges, rng.sample(parity_lines, 200)] + [[t] for t in randoms[:60] + edges]


def _reference(values, offsets, charsmap, rules, prefix, remove, escape, suffix, split, runs):
    if charsmap:
        out, out_offsets, unit = charsmap_rewrite_numba(values, offsets, *rules)
    else:
        out, out_offsets, unit = values, offsets, np.arange(values.size)
    text, text_offsets, source = whitespace_rules_numba(out, out_offsets, unit, prefix, remove, escape)
    if suffix >= 0 or (prefix and not remove):
        empty_source = dummy_sources_when_empty(offsets, out, out_offsets, unit, text_offsets, remove)
        code = suffix if suffix >= 0 else (0x2581 if escape else 32)
        text, text_offsets, source = add_dummy(text, text_offsets, source, code, empty_source, suffix >= 0)
    return (text, text_offsets, source, *_split_at(text, text_offsets, MARK, split, runs))


@pytest.mark.parametrize("charsmap", [True, False])
def test_normalize_split_equals_the_kernels_in_turn(rules, batches, charsmap):
    arrays = rules if charsmap else NO_CHARSMAP
    for batch, (prefix, remove, escape, suffix, split, runs) in itertools.product(batches, itertools.product(
            (True, False), (True, False), (True, False), (-1, MARK), (True, False), (False, True))):
        values, offsets = codepoints_numba(*utf32_units(batch))
        got = normalize_split(values, offsets, charsmap, *arrays, prefix, remove, escape, suffix, MARK, split, runs,
                              True)
        want = _reference(values, offsets, charsmap, rules, prefix, remove, escape, suffix, split, runs)
        for name, g, w in zip(("text", "text_offsets", "source", "starts", "ends", "word_offsets"), got, want):
            assert np.array_equal(g, w) and g.dtype == w.dtype, (name, batch, prefix, remove, escape, suffix, split)
        # Without sources (no spans asked for) the fast pass writes none; everything else is the same.
        bare = normalize_split(values, offsets, charsmap, *arrays, prefix, remove, escape, suffix, MARK, split, runs,
                               False)
        for name, g, w in zip(("text", "text_offsets", "source", "starts", "ends", "word_offsets"), bare, got):
            assert (name == "source" and g.size == 0) or np.array_equal(g, w), (name, batch)


def test_fast_pass_covers_english_only(rules, parity_lines):
    from gputok.kernels.sp_normalize_numba import _fast_pass

    def fast(texts):
        return _fast_pass(*codepoints_numba(*utf32_units(texts)), True, rules[0], True, True, True, -1, MARK, True,
                          False, False)[0]

    assert fast([line for line in parity_lines[:300] if line.isascii()])
    assert not fast(["x", "e\u0301"])  # a longer rule
    assert not fast(["\ufb01"])  # a rule that writes two codepoints
