"""A tokenizer.json's own ``truncation`` and ``padding`` sections: ``encode_batch`` gives what
huggingface's ``Tokenizer.from_file(...).encode_batch`` gives with them set (each option), save
writes them back, and transformers' ``__call__`` reads the two directions as its side defaults."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models as M, pre_tokenizers as P, processors as PP

from gputok import Tokenizer

TRUNCATIONS = {
    "none": None,
    **{f"{s}-{d}-7": dict(max_length=7, strategy=s, direction=d, stride=0)
       for s in ("longest_first", "only_first", "only_second") for d in ("right", "left")},
    "longest_first-right-30": dict(max_length=30, strategy="longest_first", direction="right", stride=0),
    "stride": dict(max_length=20, strategy="longest_first", direction="left", stride=2),
}
PADDINGS = {
    "none": None,
    "longest-right": dict(direction="right", pad_id=2, pad_token="<pad>"),
    "longest-left-multiple": dict(direction="left", pad_id=2, pad_token="<pad>", pad_to_multiple_of=8),
    "fixed-left": dict(direction="left", pad_id=3, pad_type_id=1, pad_token="<unk>", length=10),
    "fixed-right-multiple": dict(direction="right", pad_id=2, pad_token="<pad>", length=6, pad_to_multiple_of=4),
}


@pytest.fixture(scope="module")
def hf_base(hf_trained_models) -> str:
    spec = json.loads(HFTokenizer(M.WordLevel({"[UNK]": 0}, unk_token="[UNK]")).to_str())
    spec["model"] = hf_trained_models["bpe_byte"]
    hf = HFTokenizer.from_str(json.dumps(spec))
    hf.pre_tokenizer = P.ByteLevel(add_prefix_space=False)
    hf.post_processor = PP.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                              special_tokens=[("<s>", 0), ("</s>", 1)])
    return hf.to_str()


@pytest.fixture(scope="module")
def lines(parity_lines):
    rnd = random.Random(3)
    return [line[:rnd.randrange(1, 80)] for line in parity_lines[::4000][:60]] + ["", "a", "é 😀"]


@pytest.mark.parametrize("padding", sorted(PADDINGS))
@pytest.mark.parametrize("truncation", sorted(TRUNCATIONS))
def test_file_sections_match_huggingface_encode_batch(hf_base, lines, truncation, padding):
    hf = HFTokenizer.from_str(hf_base)
    if TRUNCATIONS[truncation] is not None:
        hf.enable_truncation(**TRUNCATIONS[truncation])
    if PADDINGS[padding] is not None:
        hf.enable_padding(**PADDINGS[padding])
    ours = Tokenizer.from_str(hf.to_str())
    half = len(lines) // 2
    pairs = list(zip(lines[:half], lines[half:2 * half]))
    for inputs, firsts, seconds in ((lines, lines, None), (pairs, lines[:half], lines[half:2 * half])):
        if seconds is None and "only_second" in truncation:  # huggingface: "Second sequence not provided"
            with pytest.raises(ValueError, match="truncation='only_second' needs pairs of texts"):
                ours.encode_batch(firsts)
            continue
        for add_special_tokens in (True, False):
            try:
                expected = [e.ids for e in hf.encode_batch(inputs, add_special_tokens=add_special_tokens)]
            except Exception as e:  # a pair whose other sequence alone is too long
                assert "too short to respect the provided max_length" in str(e)
                with pytest.raises(ValueError, match="cannot fit a pair into max_length"):
                    ours.encode_batch(firsts, seconds, add_special_tokens=add_special_tokens)
                continue
            assert ours.encode_batch(firsts, seconds, add_special_tokens=add_special_tokens) == expected
            fields = ours.encode_batch_fields(firsts, seconds, add_special_tokens=add_special_tokens)
            encodings = hf.encode_batch(inputs, add_special_tokens=add_special_tokens)
            assert fields["ids"] == expected
            assert fields["type_ids"] == [e.type_ids for e in encodings]  # padding: the file's pad_type_id
            assert fields["attention_mask"] == [e.attention_mask for e in encodings]
    if "only_second" not in truncation:
        assert ours.encode(lines[1]) == hf.encode(lines[1]).ids
    assert json.loads(json.dumps(ours.to_json()))["truncation"] == json.loads(hf.to_str())["truncation"]
    assert HFTokenizer.from_str(json.dumps(ours.to_json(), ensure_ascii=False)).to_str() == hf.to_str()


def test_file_directions_are_the_call_defaults_and_arguments_override(hf_base, lines):
    """transformers reads the file's padding and truncation directions as ``padding_side`` and
    ``truncation_side``; the call's own arguments decide whether and how far to pad or cut."""
    hf = HFTokenizer.from_str(hf_base)
    hf.enable_truncation(max_length=6, direction="left")
    hf.enable_padding(direction="left", pad_id=2, pad_token="<pad>")
    ours = Tokenizer.from_str(hf.to_str())
    expected = hf.encode_batch(lines[:8])
    got = ours(lines[:8], truncation=True, max_length=6)
    assert got["input_ids"].tolist() == [e.ids for e in expected]
    assert got["attention_mask"].tolist() == [e.attention_mask for e in expected]
    right = ours(lines[:8], padding_side="right", padding="max_length", truncation=False, max_length=40)
    hf.no_truncation()
    hf.enable_padding(direction="right", pad_id=2, pad_token="<pad>", length=40)
    assert right["input_ids"].tolist() == [e.ids[:max(40, len(e.ids))] for e in hf.encode_batch(lines[:8])]
    with pytest.raises(ValueError, match="return_overflowing_tokens with left truncation"):
        ours(lines[:8], truncation=True, max_length=6, return_overflowing_tokens=True)


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("max_length,stride", [(6, 3), (6, 4), (6, 5), (9, 2), (9, 3), (9, 4), (9, 7), (12, 5)])
def test_stride_where_huggingface_panics_is_a_value_error(hf_base, lines, strategy, max_length, stride):
    """huggingface panics (``Encoding::truncate``) when a sequence is cut to n > 0 tokens with
    stride >= n (n: max_length less the special tokens, or a pair member's share); gputok raises
    a ValueError there and gives huggingface's ids everywhere else."""
    spec = json.loads(hf_base)
    spec["truncation"] = {"direction": "Right", "max_length": max_length, "strategy": _HF_STRATEGY[strategy],
                          "stride": stride}  # as a file may hold it: enable_truncation would refuse some
    hf, ours = HFTokenizer.from_str(json.dumps(spec)), Tokenizer.from_str(json.dumps(spec))
    half = 12
    for firsts, seconds in ((lines[:half], None), (lines[:half], lines[half:2 * half]), (["a b", "c"], ["d", "e f"])):
        if seconds is None and strategy == "only_second":
            continue
        failed = False
        for i in range(len(firsts)):  # row by row: in a batch huggingface reports whichever row fails first
            first, second = firsts[i:i + 1], None if seconds is None else seconds[i:i + 1]
            try:
                expected = [e.ids for e in hf.encode_batch(first if second is None else list(zip(first, second)))]
            except BaseException as e:  # pyo3's PanicException is a BaseException
                failed = True
                too_short = "too short to respect the provided max_length" in str(e)
                assert too_short or "`stride` must be strictly less than" in str(e)
                message = "cannot fit a pair into max_length" if too_short else f"stride={stride} must be smaller than"
                with pytest.raises(ValueError, match=message):
                    ours.encode_batch(first, second)
                continue
            assert ours.encode_batch(first, second) == expected
        if failed:
            with pytest.raises(ValueError, match="cannot fit a pair|must be smaller than"):
                ours.encode_batch(firsts, seconds)
        else:
            assert ours.encode_batch(firsts, seconds) == [e.ids for e in hf.encode_batch(
                firsts if seconds is None else list(zip(firsts, seconds)))]


_HF_STRATEGY = {"longest_first": "LongestFirst", "only_first": "OnlyFirst", "only_second": "OnlySecond"}


def test_enable_truncation_refuses_a_stride_longer_than_the_room_left(hf_base):
    hf, ours = HFTokenizer.from_str(hf_base), Tokenizer.from_str(hf_base)
    hf.enable_truncation(max_length=8, stride=6)  # 8 less 2 special tokens: 6 left, allowed
    ours.enable_truncation(max_length=8, stride=6)
    assert ours.truncation == json.loads(hf.to_str())["truncation"]
    with pytest.raises(Exception, match="greater than or equal to its effective max length of 6"):
        hf.enable_truncation(max_length=8, stride=7)
    with pytest.raises(ValueError, match="stride is longer than the 6 tokens left per text after 2 special tokens"):
        ours.enable_truncation(max_length=8, stride=7)
