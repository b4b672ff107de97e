"""Unicode parity with huggingface ``tokenizers``: per-codepoint tables, then random texts.

The normalizer and pre-tokenizer of gputok are per-codepoint tables (see gputok.normalizers and
gputok.pre_tokenizers), so they are checked exhaustively, one codepoint at a time, against the
reference's own ``BertNormalizer.normalize_str`` and ``BertPreTokenizer.pre_tokenize_str``. The
hypothesis test then checks the whole pipeline on random mixed-script texts, where codepoints
meet (combining marks after letters, CJK next to punctuation, added tokens written literally).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import normalizers as hf_normalizers
from tokenizers import pre_tokenizers as hf_pre_tokenizers

from gputok import normalizers, pre_tokenizers
from gputok.unicode import MAX_CODEPOINT

CODEPOINTS = [c for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000]  # str cannot cross into Rust


# ---- exhaustive per-codepoint tables ------------------------------------------------------

NORMALIZER_FLAGS = [
    pytest.param({}, id="default"),
    pytest.param({"lowercase": False}, id="lowercase=False"),
    pytest.param({"strip_accents": True, "lowercase": False}, id="strip_accents=True,lowercase=False"),
    pytest.param({"clean_text": False}, id="clean_text=False"),
    pytest.param({"handle_chinese_chars": False, "strip_accents": False}, id="no_chinese,strip_accents=False"),
]


@pytest.mark.parametrize("flags", NORMALIZER_FLAGS)
def test_bert_normalizer_table_matches_reference_for_every_codepoint(flags):
    table = normalizers.BertNormalizer(**flags).table
    assert table.offsets.numel() == MAX_CODEPOINT + 1
    values, offsets = table.values.tolist(), table.offsets.tolist()
    reference = hf_normalizers.BertNormalizer(**flags)
    mismatches = []
    for c in CODEPOINTS:
        expected = reference.normalize_str(chr(c))
        got = "".join(map(chr, values[offsets[c]:offsets[c + 1]]))
        if got != expected:
            mismatches.append((hex(c), got, expected))
    print(f"\nBertNormalizer({flags}): {len(CODEPOINTS)} codepoints compared, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} codepoints differ (gputok, reference): {mismatches[:20]}"


def test_normalizer_table_is_not_trivially_identity():
    # Guards the exhaustive test against comparing two no-ops: the default table really rewrites.
    table = normalizers.BertNormalizer().table
    row = lambda c: table.values[table.offsets[c]:table.offsets[c + 1]].tolist()  # noqa: E731
    assert row(ord("A")) == [ord("a")]
    assert row(ord("\u00e9")) == [ord("e")]
    assert row(0x4E00) == [32, 0x4E00, 32]
    assert row(0) == [] and row(ord("\t")) == [32]


def _reference_class(ch: str, pre_tokenizer) -> int:
    pieces = [piece for piece, _ in pre_tokenizer.pre_tokenize_str("a" + ch + "b")]
    if pieces == ["a" + ch + "b"]:
        return pre_tokenizers.WORD
    if pieces == ["a", "b"]:
        return pre_tokenizers.SPACE
    if pieces == ["a", ch, "b"]:
        return pre_tokenizers.PUNCTUATION
    raise AssertionError(f"unexpected split of U+{ord(ch):04X}: {pieces}")


def test_bert_pre_tokenizer_classes_match_reference_for_every_codepoint():
    classes = pre_tokenizers._bert_classes(torch.device("cpu")).tolist()
    assert len(classes) == MAX_CODEPOINT
    reference = hf_pre_tokenizers.BertPreTokenizer()
    mismatches = []
    counts = [0, 0, 0]
    for c in CODEPOINTS:
        expected = _reference_class(chr(c), reference)
        counts[expected] += 1
        if classes[c] != expected:
            mismatches.append((hex(c), classes[c], expected))
    print(f"\nBertPreTokenizer: {len(CODEPOINTS)} codepoints compared (word/space/punct {counts}), "
          f"{len(mismatches)} mismatches")
    assert counts[pre_tokenizers.SPACE] > 10 and counts[pre_tokenizers.PUNCTUATION] > 500  # the probe works
    assert not mismatches, f"{len(mismatches)} codepoints differ (gputok, reference): {mismatches[:20]}"


# ---- differential test on random texts ------------------------------------------------------

def _chars(lo: int, hi: int):
    return st.characters(min_codepoint=lo, max_codepoint=hi, exclude_categories=["Cs"])


CONTROLS = [chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0), *range(0x200B, 0x2010), 0xFEFF]]
SPACES = [chr(c) for c in [0x20, 0xA0, *range(0x2000, 0x200B), 0x3000, 0x2028, 0x2029, 0x202F, 0x1680]]
CHARACTER = st.one_of(
    _chars(0x20, 0x7E),  # ASCII
    _chars(0x20, 0x7E),  # (twice: most real text is ASCII)
    _chars(0x4E00, 0x9FFF),  # CJK ideographs
    _chars(0x3000, 0x303F),  # CJK punctuation
    _chars(0x20000, 0x2A6DF),  # CJK extension B
    _chars(0x0300, 0x036F),  # combining marks
    st.sampled_from(CONTROLS),
    _chars(0x1F300, 0x1FAFF),  # emoji
    st.sampled_from(SPACES),
    _chars(0x00C0, 0x024F),  # accented Latin
    _chars(0x0370, 0x04FF),  # Greek, Cyrillic
    st.characters(exclude_categories=["Cs"]),  # anything
)
WORDY = st.text(CHARACTER, max_size=12)
FRAGMENT = st.one_of(
    WORDY, WORDY, WORDY, WORDY, WORDY, WORDY,  # (weights: long words are slow to match on CPU)
    st.sampled_from(["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[mask]", "[MASK", "##ing", "unaffable",
                     "don't", "e\u0301", "\u0130stanbul", "\ufb01ne", "\u00df", "\u00a0\u00a0", "\r\n"]),
    st.text(st.sampled_from("abcdefghij"), min_size=95, max_size=105),  # around max_input_chars_per_word
)
TEXT = st.lists(FRAGMENT, max_size=8).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(TEXT, min_size=1, max_size=20), seconds=st.lists(TEXT, min_size=20, max_size=20))
def test_random_texts_match_reference(hf_bert, bert, texts, seconds):
    # A batch, with special tokens.
    assert bert.encode_batch(texts) == [e.ids for e in hf_bert.encode_batch(texts)], texts

    # One text alone, without special tokens.
    text = texts[-1]
    assert bert.encode(text, add_special_tokens=False) == hf_bert.encode(text, add_special_tokens=False).ids, text

    # Pairs: ids and token type ids, row by row.
    seconds = seconds[:len(texts)]
    expected = hf_bert.encode_batch(list(zip(texts, seconds)))
    out = bert(texts, seconds, padding=False)
    ids, type_ids, bounds = out["input_ids"].tolist(), out["token_type_ids"].tolist(), out["row_offsets"].tolist()
    for i, e in enumerate(expected):
        assert ids[bounds[i]:bounds[i + 1]] == e.ids, (texts[i], seconds[i])
        assert type_ids[bounds[i]:bounds[i + 1]] == e.type_ids, (texts[i], seconds[i])
    assert len(bounds) == len(expected) + 1
