"""DeepSeek-V3's Sequence of three Splits (gputok.split_sequences) against huggingface and the regex module."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputok import Tokenizer, assets, regex_split
from gputok.ingest import codepoints
from gputok.split_sequences import DEEPSEEK_V3, SplitSequence, from_sequence_spec
from gputok.unicode import MAX_CODEPOINT

tokenizers = pytest.importorskip("tokenizers")
SPEC = {"type": "Sequence", "pretokenizers": [
    *({"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False} for p in DEEPSEEK_V3),
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def ours(texts: list[str]) -> list[str]:
    words = SplitSequence(SPEC)(codepoints(texts))
    joined = "".join(texts)
    return [joined[s:e] for s, e in zip(words.starts.tolist(), words.ends.tolist())]


def regex_module(texts: list[str]) -> list[str]:
    """The three Isolated Splits, each on the pieces of the one before, with the regex module."""
    pieces = list(texts)
    for pattern in DEEPSEEK_V3:
        compiled = regex_split.compile_with_table_classes(pattern)
        out = []
        for piece in pieces:
            previous = 0
            for s, e in regex_split._matches(compiled, piece):
                out += [piece[previous:s]] if s > previous else []
                out.append(piece[s:e])
                previous = e
            out += [piece[previous:]] if previous < len(piece) else []
        pieces = out
    return pieces


def huggingface(texts: list[str]) -> list[str]:
    pre = tokenizers.pre_tokenizers.Sequence([tokenizers.pre_tokenizers.Split(tokenizers.Regex(p), "isolated")
                                              for p in DEEPSEEK_V3])
    return [p for t in texts for p, _ in pre.pre_tokenize_str(t)]


def test_real_text(parity_lines):
    lines = parity_lines[::50] + ["#include <stdio.h>\n\n  x", "ひらがな カタカナ 中文 1234567", "a\u0301 \x00 \u200d"]
    assert ours(lines) == huggingface(lines) == regex_module(lines)


def test_every_codepoint_in_context():
    cps = [c for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000]
    texts = ["".join(f" {chr(cps[i])}a{chr(cps[i + 1])}!{chr(cps[i + 2])}12345\n " for i in range(j, min(j + 9700, len(cps) - 2), 97))
             for j in range(0, len(cps), 9700)]
    assert ours(texts) == regex_module(texts)


_MIX = list("aZé中ひカ1١²'s!#<.\"\u00a0\t\r\n \u3000\u0301\x00\u200d") + ["\U0001F600", "\u309b", "\u30fb"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(st.one_of(st.sampled_from(_MIX), st.characters(exclude_categories=("Cs",))), max_size=30),
                min_size=1, max_size=8))
def test_hypothesis_text(texts):
    assert ours(texts) == regex_module(texts)


def test_tokenizer_json_takes_the_fast_path_and_encodes_as_huggingface(parity_lines):
    spec = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").to_json()
    spec["pre_tokenizer"] = SPEC
    text = json.dumps(spec)
    tok = Tokenizer.from_str(text)
    assert tok.pre_tokenizer.rule == "deepseek_v3"
    assert tok.to_json()["pre_tokenizer"] == SPEC
    theirs = tokenizers.Tokenizer.from_str(text)
    lines = parity_lines[::400] + ["1234567 中文 #include <x>\n\n  y"]
    assert tok.encode_batch(lines) == [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]


def test_other_sequences_are_not_taken():
    other = json.loads(json.dumps(SPEC))
    other["pretokenizers"][0]["pattern"]["Regex"] = r"\p{N}{1,4}"
    assert from_sequence_spec(other) is None
    other = json.loads(json.dumps(SPEC))
    other["pretokenizers"][2]["behavior"] = "Removed"
    assert from_sequence_spec(other) is None
