"""The pre-tokenizer kernels (kernels/regex_split_numba.py, kernels/word_split_numba.py) against
their torch twins (``_dispatch.use_backend("torch")``) and, for the regex rules, against
``regex.finditer`` with the classes tiktoken reads: values, offsets and dtypes, exactly.

Inputs: the parity corpus, random Unicode (every plane, marks, contractions in both cases and
``ſ``, digit and whitespace runs, lone surrogates), adversarial runs, and odd shapes.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputok import _dispatch, regex_split
from gputok.ingest import codepoints, without_surrogates
from gputok.models.bpe_sentencepiece import MergeSafeSplit
from gputok.pre_tokenizers import (BertPreTokenizer, ByteLevel, Metaspace, Split, WhitespaceSplit, Words,
                                   whole_texts, words_from_starts)
from gputok.ragged import Ragged

RULES = ["gpt2", "cl100k", "o200k"]
BEHAVIORS = list(regex_split.BEHAVIORS)


def pre_tokenizers() -> dict[str, object]:
    out = {"bert": BertPreTokenizer(), "whitespace": WhitespaceSplit(), "bytelevel-noregex": ByteLevel(use_regex=False),
           "bytelevel-prefix": ByteLevel(add_prefix_space=True)}
    for scheme in Metaspace.SCHEMES:
        for split in (True, False):
            out[f"metaspace-{scheme}-{split}"] = Metaspace(prepend_scheme=scheme, split=split)
    for rule in RULES + ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]:
        out[f"split-{rule}"] = Split(rule)
    out["merge-safe-▁"], out["merge-safe-none"] = MergeSafeSplit("▁"), MergeSafeSplit(None)  # SentencePiece BPE
    return out


PRE_TOKENIZERS = pre_tokenizers()


def run(pre, text: Ragged, backend: str):
    """(the rewritten text and sources, or None; the words) of ``pre`` on ``text`` under ``backend``."""
    with _dispatch.use_backend(backend):
        rewrite = getattr(pre, "rewrite", None)
        rewritten = None
        if rewrite is not None:
            rewritten = rewrite(text)
            text = rewritten[0]
        return rewritten, pre(text)


def assert_same_tensor(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == b.dtype, (what, a.dtype, b.dtype)
    assert a.device == b.device, what
    assert torch.equal(a, b), (what, a[:20], b[:20])


def assert_same_words(a: Words, b: Words, what: str) -> None:
    assert_same_tensor(a.starts, b.starts, f"{what}: starts")
    assert_same_tensor(a.ends, b.ends, f"{what}: ends")
    assert_same_tensor(a.text_offsets, b.text_offsets, f"{what}: text_offsets")


def assert_twins(texts: list[str], names=None) -> None:
    """Every pre-tokenizer gives the same (rewrite and) words on the numba and the torch path."""
    text = codepoints(texts)
    for name in names or PRE_TOKENIZERS:
        pre = PRE_TOKENIZERS[name]
        (rew_n, words_n), (rew_t, words_t) = run(pre, text, "numba"), run(pre, text, "torch")
        if rew_n is not None:
            assert_same_tensor(rew_n[0].values, rew_t[0].values, f"{name}: rewritten values")
            assert_same_tensor(rew_n[0].offsets, rew_t[0].offsets, f"{name}: rewritten offsets")
            assert_same_tensor(rew_n[1], rew_t[1], f"{name}: sources")
        assert_same_words(words_n, words_t, name)


@functools.lru_cache(maxsize=None)
def reference_pattern(rule: str) -> regex.Pattern:
    return regex.compile(regex_split.with_table_classes(regex_split.PATTERNS[rule]))


def assert_regex(texts: list[str], rules=RULES) -> None:
    """The kernel's words are ``regex.finditer``'s spans, and equal the torch twin's."""
    cps = codepoints(texts)
    for rule in rules:
        finditer = reference_pattern(rule).finditer
        starts, ends, counts, base = [], [], [0], 0
        for t in texts:
            t = without_surrogates(t)
            for m in finditer(t):
                starts.append(base + m.start())
                ends.append(base + m.end())
            base += len(t)
            counts.append(len(starts))
        words = regex_split.split(cps, rule)
        assert words.starts.tolist() == starts and words.ends.tolist() == ends, (rule, texts[:3])
        assert words.text_offsets.tolist() == counts, rule
        with _dispatch.use_backend("torch"):
            assert_same_words(words, regex_split.split(cps, rule), rule)


# ---- real text ------------------------------------------------------------------------------

CORPUS_TWINS = ["bert", "whitespace", "bytelevel-noregex", "bytelevel-prefix", "metaspace-always-True",
                "metaspace-first-False", "metaspace-never-True", "merge-safe-▁", "merge-safe-none"]  # the regex rules: tests/test_regex_split.py


def test_parity_corpus_twins(parity_lines):
    assert_twins(parity_lines, CORPUS_TWINS)


def test_parity_corpus_regex(parity_lines):
    # The whole corpus against the regex module is tests/test_regex_split.py's; a tenth here.
    assert_regex(parity_lines[::10])


# ---- random Unicode -------------------------------------------------------------------------

WHITESPACE = [" ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", " \n ", "\u00a0", "\u1680", "\u2000", "\u2007",
              "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u0085", "\u000b", "\u000c", "\u001c", "\u180e"]
CONTRACTIONS = ["'" + c for c in ["s", "d", "m", "t", "ll", "ve", "re", "S", "D", "M", "T", "LL", "VE", "RE",
                                  "lL", "Ll", "vE", "Re", "ſ", "ſs", "x"]] + ["''", "'", "\u2019s"]
ATOMS = WHITESPACE + CONTRACTIONS + [
    "a", "Z", "é", "ß", "ǅ", "ʰ", "ж", "中文", "あ", "ー", "0", "7", "١", "²", "Ⅻ", "½", "123", "4567890",
    ".", "!", "?", "/", "//", "-", "@", "€", "«", "「", "\u0301", "e\u0301", "!\u0301", "\u0301\u0301", "\u064b",
    "😀", "👍🏽", "🇫🇷", "\x00", "\x7f", "\u200b", "\u200d", "\ufeff", "\ufffd", "\u2581", "\u2581\u2581",
    "\U00016ebb", "\u0295", "\U00010d50", "\U000e0001", "\U000f0000", "\U0010fffd", "\ud800", "\udfff",
    "HTTPServer", "camelCase", "ABC中DEF", "don't", "we'LL",
]
TEXT = st.lists(st.one_of(st.sampled_from(ATOMS), st.characters(), st.characters(max_codepoint=0x3FF),
                          st.characters(min_codepoint=0x10000)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, max_size=6))
def test_random_unicode(texts):
    assert_twins(texts)
    assert_regex(texts)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, max_size=6), st.sampled_from(RULES), st.sampled_from(BEHAVIORS), st.booleans())
def test_rule_behaviors(texts, rule, behavior, invert):
    """A named rule with another behavior: the kernel's matches grouped as split_with_regex
    groups them (the torch path), and what huggingface's words are (a regex per text)."""
    pre = Split(rule, behavior=behavior, invert=invert)
    text = codepoints(texts)
    (_, numba), (_, torch_words) = run(pre, text, "numba"), run(pre, text, "torch")
    assert_same_words(numba, torch_words, f"{rule} {behavior} {invert}")
    expected = regex_split.split_with_regex([without_surrogates(t) for t in texts], regex_split.PATTERNS[rule],
                                            behavior=behavior, invert=invert)
    assert_same_words(numba, expected, f"{rule} {behavior} {invert} (split_with_regex)")


def test_other_regex_keeps_the_regex_module():
    pre = Split(r"\w+|[^\w\s]+", behavior="MergedWithNext", invert=True)
    texts = ["Hello, world!", "", "  a1_b  ", "x", "\U00016ebb:A"]
    (_, numba), (_, torch_words) = run(pre, codepoints(texts), "numba"), run(pre, codepoints(texts), "torch")
    assert_same_words(numba, torch_words, "custom regex")
    assert numba.starts.numel() > 0


def test_words_of():
    texts = ["Hello world's  end", "", "x123456 \n\n", "\ud800's"]
    for rule in RULES:
        got = Split(rule).words_of(texts)
        assert got == [reference_pattern(rule).findall(without_surrogates(t)) for t in texts], rule


# ---- adversarial runs ----------------------------------------------------------------------

N = 100_000
LONG = {
    "spaces": " " * N,
    "spaces then a word": " " * N + "x",
    "tabs then a word": "\t" * N + "x",
    "newlines and spaces": " \n" * (N // 2) + "x",
    "crlf": "\r\n" * (N // 2),
    "digits": "7" * N,
    "letters": "a" * N,
    "apostrophe chain": "'s" * (N // 2),
    "apostrophe chain after a word": "x" + "'s" * (N // 2),
    "upper then lo": "\u4e2d" + "A" * N,
    "marks": "\u0301" * N,
    "replacement marks": "\u2581" * N,
}


@pytest.mark.parametrize("name", list(LONG))
def test_long_runs(name):
    assert_twins([LONG[name], "a b"])
    assert_regex([LONG[name]])


# ---- odd shapes ----------------------------------------------------------------------------

@pytest.mark.parametrize("texts", [[], [""], ["", ""], ["a"], [" "], ["\n"], ["'"], ["\u2581"], ["", "x", ""],
                                   ["1"], ["\u0301"]], ids=repr)
def test_odd_shapes(texts):
    assert_twins(texts)
    assert_regex(texts)


def test_dtypes():
    text = codepoints(["Hello world", ""])
    for name, pre in PRE_TOKENIZERS.items():
        rewritten, words = run(pre, text, "numba")
        for t in (words.starts, words.ends, words.text_offsets):
            assert t.dtype == torch.int64, name
        if rewritten is not None:
            assert rewritten[0].values.dtype == torch.int32 and rewritten[0].offsets.dtype == torch.int64, name
            assert rewritten[1].dtype == torch.int64, name
    # int64 codepoints (a normalizer may hand those on): the same words, the dtype kept.
    wide = Ragged(text.values.long(), text.offsets)
    for name, pre in PRE_TOKENIZERS.items():
        (rew_a, words_a), (rew_b, words_b) = run(pre, wide, "numba"), run(pre, text, "numba")
        assert_same_words(words_a, words_b, name)
        if rew_a is not None:
            assert rew_a[0].values.dtype == torch.int64 and torch.equal(rew_a[0].values, rew_b[0].values.long())


def test_values_that_are_no_codepoints_read_as_replacement():
    good = codepoints(["a\ufffdb \ufffd!"])
    bad = Ragged(good.values.clone(), good.offsets)
    bad.values[1], bad.values[4] = 0x110000, -5
    for name in ("bert", "whitespace", "split-gpt2", "split-cl100k", "split-o200k"):
        assert_same_words(run(PRE_TOKENIZERS[name], bad, "numba")[1], run(PRE_TOKENIZERS[name], good, "numba")[1], name)


def test_helpers_are_twins():
    text = codepoints(["ab c", "", "xyz", "q"])
    rng = np.random.default_rng(17)
    for _ in range(20):
        mask = torch.from_numpy(rng.random(text.values.numel()) < 0.4)
        with _dispatch.use_backend("torch"):
            expected = words_from_starts(text, mask)
        assert_same_words(words_from_starts(text, mask), expected, "words_from_starts")
    with _dispatch.use_backend("torch"):
        expected = whole_texts(text)
    assert_same_words(whole_texts(text), expected, "whole_texts")
    assert whole_texts(text).starts.tolist() == [0, 4, 7]


def test_merge_safe_split_at_runs_of_the_marker():
    rng = np.random.default_rng(5)
    texts = ["".join(rng.choice(list("▁▁ab c")) for _ in range(rng.integers(0, 30))) for _ in range(300)]
    texts += ["▁a▁▁b", "▁▁", "a▁", "▁", "", "ab"]
    assert_twins(texts, ["merge-safe-▁", "merge-safe-none"])
    words = PRE_TOKENIZERS["merge-safe-▁"](codepoints(["▁a▁▁b", "a▁"]))
    assert (words.starts.tolist(), words.ends.tolist(), words.text_offsets.tolist()) == ([0, 2, 5, 6], [2, 5, 6, 7], [0, 2, 4])


def test_a_kernel_result_is_checked_against_known_words():
    # Not only twin against twin: BERT and Metaspace words on a known text.
    text = codepoints(["Hello, world!  ok", " a  b"])
    words = PRE_TOKENIZERS["bert"](text)
    assert list(zip(words.starts.tolist(), words.ends.tolist())) == [(0, 5), (5, 6), (7, 12), (12, 13), (15, 17),
                                                                   (18, 19), (21, 22)]
    assert words.text_offsets.tolist() == [0, 5, 7]
    meta = PRE_TOKENIZERS["metaspace-always-True"]
    rewritten, src = meta.rewrite(text)
    assert "".join(map(chr, rewritten.values.tolist())) == "▁Hello,▁world!▁▁ok▁a▁▁b"
    assert src.tolist()[:3] == [0, 0, 1] and rewritten.offsets.tolist() == [0, 18, 23]
    words = meta(rewritten)
    assert list(zip(words.starts.tolist(), words.ends.tolist()))[:4] == [(0, 7), (7, 14), (14, 15), (15, 18)]


def test_threads_give_the_single_call_words(parity_lines):
    """The kernels hold no state between calls: 8 threads at once give each call's own words."""
    from concurrent.futures import ThreadPoolExecutor

    chunks = [parity_lines[i * 500:(i + 1) * 500] for i in range(16)]
    names = ["bert", "split-cl100k", "split-o200k", "metaspace-always-True"]
    expected = [[run(PRE_TOKENIZERS[n], codepoints(c), "numba") for n in names] for c in chunks]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda c: [run(PRE_TOKENIZERS[n], codepoints(c), "numba") for n in names], chunks))
    for want, have in zip(expected, got):
        for name, (_, a), (_, b) in zip(names, want, have):
            assert_same_words(a, b, name)
