"""WordPiece (BERT) parity with huggingface ``tokenizers`` on real text.

The oracle is always huggingface itself: the ``hf_bert`` fixture (the same tokenizer.json, padding
and truncation off), a copy of it with truncation/padding switched on, or
``BertWordPieceTokenizer`` for the vocab.txt path. Every test reports how much it compared.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch
from tokenizers import BertWordPieceTokenizer
from tokenizers import Tokenizer as HFTokenizer

from gputok import Tokenizer

CHUNK = 65536
CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")

# Hand-written lines where normalization changes lengths (offsets must still point at the original).
TRICKY = [
    "\u0130stanbul caf\u00e9 na\u00efve",  # 'İ' lowercases to two codepoints
    "e\u0301te\u0301 x",  # combining accents, stripped
    "\u00adab\u200bcd",  # soft hyphen, zero width space: dropped by clean_text
    "hello [MASK] world[SEP]x",  # added tokens written in the text
    "\ufb01ne \u01c5 \u00df \u1e9e",  # ligature, titlecase digraph, sharp s
    "\u4e2d\u6587\u5b57\u7b26\uff0c\u6d4b\u8bd5\u3002",  # CJK with fullwidth punctuation
    "\x00a\ufffdb",
    "a" * 150,  # longer than max_input_chars_per_word: [UNK]
    "unaffable antidisestablishmentarianism",
    "\u216b \u2460 \u338f \u00bd",
    "[UNK][UNK]",
    "  [CLS]  ",
    "",
]


def _split(flat: list, bounds: list[int]) -> list[list]:
    return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


def _count_mismatches(got: list, expected: list, inputs: list, examples: list) -> int:
    """Count rows where ``got != expected``; keep the first few as (input, got, expected) in ``examples``."""
    assert len(got) == len(expected) == len(inputs)
    bad = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    examples.extend((inputs[i], got[i], expected[i]) for i in bad[:max(0, 3 - len(examples))])
    return len(bad)


@pytest.fixture(scope="module")
def sample_lines(parity_lines):
    """~3,700 real lines: every accented (non-ASCII, non-CJK) line, 1,500 CJK lines, 2,000 others."""
    nonempty = [line for line in parity_lines if line.strip()]
    cjk = [line for line in nonempty if CJK.search(line)]
    accented = [line for line in nonempty if not line.isascii() and not CJK.search(line)]
    ascii_ = [line for line in nonempty if line.isascii()]
    assert len(cjk) > 10_000 and len(accented) > 100 and len(ascii_) > 100_000, "the parity corpus changed"
    rng = random.Random(1234)
    lines = accented + rng.sample(cjk, 1500) + rng.sample(ascii_, 2000)
    rng.shuffle(lines)
    return lines


@pytest.fixture
def hf_copy(hf_bert):
    """A fresh huggingface tokenizer (same file) whose truncation/padding a test may switch on."""
    return HFTokenizer.from_str(hf_bert.to_str())


# ---- ids over the whole corpus ---------------------------------------------------------------

def _corpus_mismatches(ours, reference, lines, label):
    mismatches, examples = 0, []
    for i in range(0, len(lines), CHUNK):
        chunk = lines[i:i + CHUNK]
        mismatches += _count_mismatches(ours.encode_batch(chunk), [e.ids for e in reference.encode_batch(chunk)],
                                        chunk, examples)
    print(f"\n{label}: {len(lines)} lines compared, {mismatches} mismatches")
    return mismatches, examples


def test_full_corpus_parity_tokenizer_json(bert, hf_bert, parity_lines):
    """The parity corpus (20.0 MB) and the 20 MB English set: ~40 MB of real text."""
    from gputok import assets

    english = assets.english_corpus(20).read_text(encoding="utf-8").splitlines()
    lines = parity_lines + english
    assert len(lines) > 1_000_000
    mismatches, examples = _corpus_mismatches(bert, hf_bert, lines, "tokenizer.json")
    assert mismatches == 0, examples


def test_full_corpus_parity_vocab_txt(bert_vocab_path, parity_lines):
    hf = BertWordPieceTokenizer(str(bert_vocab_path), lowercase=True)
    mismatches, examples = _corpus_mismatches(Tokenizer.from_vocab(bert_vocab_path), hf, parity_lines, "vocab.txt")
    assert mismatches == 0, examples


def test_full_corpus_pairs_ids_and_type_ids(bert, hf_bert, parity_lines):
    """Consecutive lines (lines[i], lines[i+1]) for every third i across the corpus: ~136k pairs."""
    starts = range(0, len(parity_lines) - 1, 3)
    assert len(starts) >= 100_000
    id_mismatches = type_mismatches = compared = 0
    examples: list = []
    for k in range(0, len(starts), CHUNK // 2):
        firsts = [parity_lines[i] for i in starts[k:k + CHUNK // 2]]
        seconds = [parity_lines[i + 1] for i in starts[k:k + CHUNK // 2]]
        expected = hf_bert.encode_batch(list(zip(firsts, seconds)))
        out = bert(firsts, seconds, padding=False)
        bounds = out["row_offsets"].tolist()
        pairs = list(zip(firsts, seconds))
        id_mismatches += _count_mismatches(_split(out["input_ids"].tolist(), bounds), [e.ids for e in expected],
                                           pairs, examples)
        type_mismatches += _count_mismatches(_split(out["token_type_ids"].tolist(), bounds),
                                             [e.type_ids for e in expected], pairs, examples)
        assert bert.encode_batch(firsts[:2000], seconds[:2000]) == [e.ids for e in expected[:2000]]
        compared += len(firsts)
    print(f"\npairs: {compared} pairs compared, {id_mismatches} id and {type_mismatches} type id mismatches")
    assert id_mismatches == 0 and type_mismatches == 0, examples


def test_empty_and_blank_inputs(bert, hf_bert):
    assert bert.encode_batch([]) == [] == hf_bert.encode_batch([])
    texts = ["", " ", "\x00", "\t\n\u3000", "\u200b"]
    assert bert.encode_batch(texts) == [e.ids for e in hf_bert.encode_batch(texts)]
    assert bert.encode_batch(texts, texts[::-1]) == [e.ids for e in hf_bert.encode_batch(list(zip(texts, texts[::-1])))]
    assert bert.encode_batch(texts, add_special_tokens=False) == [[]] * len(texts)


def test_added_tokens_are_matched_within_each_text(bert, hf_bert):
    batches = [["hello [CL", "S] world"], ["[MAS", "K]"], ["a[", "SEP]"], ["[SEP", "]"], ["x [", "", "UNK] y"]]
    for texts in batches:  # a special token cut across two texts of a batch is not matched
        assert bert.encode_batch(texts) == [e.ids for e in hf_bert.encode_batch(texts)], texts
    firsts, seconds = ["one [MA", "two"], ["SK] three", "four"]
    assert bert.encode_batch(firsts, seconds) == [e.ids for e in hf_bert.encode_batch(list(zip(firsts, seconds)))]


# ---- character offsets -----------------------------------------------------------------------

def _offsets_mismatches(out, encodings, inputs):
    bounds = out["row_offsets"].tolist()
    got_offsets = _split([tuple(o) for o in out["offsets"].tolist()], bounds)
    got_ids = _split(out["input_ids"].tolist(), bounds)
    bad = [(inputs[i], list(zip(e.tokens, got_offsets[i], e.offsets)))
           for i, e in enumerate(encodings) if got_offsets[i] != e.offsets or got_ids[i] != e.ids]
    return bad


def test_offsets_match_reference(bert, hf_bert, sample_lines):
    lines = sample_lines + TRICKY
    out = bert(lines, return_offsets=True, padding=False)
    assert out["offsets"].shape == (out["input_ids"].numel(), 2)
    encodings = hf_bert.encode_batch(lines)
    bad = _offsets_mismatches(out, encodings, lines)
    n_tokens = sum(len(e.ids) for e in encodings)
    print(f"\noffsets: {len(lines)} lines, {n_tokens} tokens compared, {len(bad)} lines differ")
    assert not bad, bad[:3]
    # the sample really has tokens whose span differs from their normalized length
    assert any(o[1] - o[0] != len(t.removeprefix("##")) for e in encodings for t, o in zip(e.tokens, e.offsets)
               if t not in ("[CLS]", "[SEP]", "[UNK]"))


def test_pair_offsets_match_reference(bert, hf_bert, sample_lines):
    firsts, seconds = sample_lines, sample_lines[1:] + sample_lines[:1]
    out = bert(firsts, seconds, return_offsets=True, padding=False)
    encodings = hf_bert.encode_batch(list(zip(firsts, seconds)))
    bad = _offsets_mismatches(out, encodings, list(zip(firsts, seconds)))
    print(f"\npair offsets: {len(firsts)} pairs compared, {len(bad)} differ")
    assert not bad, bad[:3]


def test_padded_offsets_match_reference(bert, hf_copy, sample_lines):
    lines = sample_lines[:500] + TRICKY
    hf_copy.enable_padding(direction="left")
    out = bert(lines, return_offsets=True, padding_side="left")
    expected = [e.offsets for e in hf_copy.encode_batch(lines)]
    assert out["offsets"].shape[:2] == out["input_ids"].shape
    assert [[tuple(o) for o in row] for row in out["offsets"].tolist()] == expected


# ---- truncation, stride, overflow, padding ---------------------------------------------------

def _hf_rows(encodings, overflow: bool):
    """huggingface's rows in gputok's order: each sample, then its overflowing rows."""
    rows, sample = [], []
    for i, e in enumerate(encodings):
        for row in [e, *e.overflowing] if overflow else [e]:
            rows.append(row)
            sample.append(i)
    return rows, sample


def _check_rows(out, encodings, *, overflow: bool, offsets: bool = False) -> int:
    rows, sample = _hf_rows(encodings, overflow)
    assert out["input_ids"].shape[0] == len(rows)
    assert out["input_ids"].tolist() == [r.ids for r in rows]
    assert out["attention_mask"].tolist() == [r.attention_mask for r in rows]
    assert out["token_type_ids"].tolist() == [r.type_ids for r in rows]
    if overflow:
        assert out["overflow_to_sample_mapping"].tolist() == sample
    else:
        assert "overflow_to_sample_mapping" not in out
    if offsets:
        assert [[tuple(o) for o in row] for row in out["offsets"].tolist()] == [r.offsets for r in rows]
    return len(rows)


@pytest.mark.parametrize("max_length,stride,padding,pad_to_multiple_of,side,add_special_tokens", [
    (32, 8, True, None, "right", True),
    (32, 8, True, 8, "left", True),
    (50, 0, True, None, "right", True),
    (17, 14, True, None, "left", False),  # the largest stride huggingface allows here; no special tokens
    (24, 5, "max_length", 16, "right", True),
    (256, 3, True, 64, "left", True),  # only the long texts overflow
])
def test_single_truncation_stride_padding(bert, hf_copy, sample_lines, max_length, stride, padding,
                                          pad_to_multiple_of, side, add_special_tokens):
    # Real lines, and a few long texts (40 lines joined) that overflow into many rows.
    texts = sample_lines[:2000] + [" ".join(sample_lines[i:i + 40]) for i in range(0, 400, 40)]
    hf_copy.enable_truncation(max_length, stride=stride, strategy="longest_first")
    hf_copy.enable_padding(direction=side, pad_to_multiple_of=pad_to_multiple_of,
                           **({"length": max_length} if padding == "max_length" else {}))
    encodings = hf_copy.encode_batch(texts, add_special_tokens=add_special_tokens)
    out = bert(texts, truncation=True, max_length=max_length, stride=stride, return_overflowing_tokens=True,
               padding=padding, pad_to_multiple_of=pad_to_multiple_of, padding_side=side,
               add_special_tokens=add_special_tokens, return_offsets=True)
    rows = _check_rows(out, encodings, overflow=True, offsets=True)
    assert rows > len(texts) + 10  # the long texts overflowed
    if pad_to_multiple_of:
        assert out["input_ids"].shape[1] % pad_to_multiple_of == 0
    # Without return_overflowing_tokens: only the main rows.
    out = bert(texts, truncation=True, max_length=max_length, stride=stride, padding=padding,
               pad_to_multiple_of=pad_to_multiple_of, padding_side=side, add_special_tokens=add_special_tokens)
    _check_rows(out, encodings, overflow=False)
    print(f"\n{len(texts)} lines -> {rows} rows compared")


@pytest.fixture(scope="module")
def long_and_short(hf_bert, sample_lines):
    """(lines of more than 30 tokens, lines of 1 to 20 tokens), tokens without special tokens."""
    lengths = [len(e.ids) for e in hf_bert.encode_batch(sample_lines, add_special_tokens=False)]
    longs = [t for t, n in zip(sample_lines, lengths) if n > 30]
    shorts = [t for t, n in zip(sample_lines, lengths) if 0 < n <= 20]
    n = min(len(longs), len(shorts))
    assert n > 200
    return longs[:n], shorts[:n]


@pytest.mark.parametrize("strategy,stride,pad_to_multiple_of,side", [
    ("only_first", 4, None, "right"),
    ("only_first", 0, 8, "left"),
    ("only_first", 16, None, "left"),  # window 17 for the longest short line: stride 16 still fits
    ("only_second", 4, 8, "left"),
    ("only_second", 10, None, "right"),
])
def test_pair_truncation_only_one_side_with_overflow(bert, hf_copy, long_and_short, strategy, stride,
                                                     pad_to_multiple_of, side):
    longs, shorts = long_and_short
    # The truncated side is the long one; mix in pairs that need no truncation at all.
    if strategy == "only_first":
        firsts, seconds = longs + shorts, shorts + shorts[::-1]
    else:
        firsts, seconds = shorts + shorts[::-1], longs + shorts
    max_length = 40
    hf_copy.enable_truncation(max_length, stride=stride, strategy=strategy)
    hf_copy.enable_padding(direction=side, pad_to_multiple_of=pad_to_multiple_of)
    encodings = hf_copy.encode_batch(list(zip(firsts, seconds)))
    out = bert(firsts, seconds, truncation=strategy, max_length=max_length, stride=stride,
               return_overflowing_tokens=True, padding=True, pad_to_multiple_of=pad_to_multiple_of,
               padding_side=side, return_offsets=True)
    rows = _check_rows(out, encodings, overflow=True, offsets=True)
    assert rows > len(firsts) + len(longs)  # long sides overflow into more than one extra row
    print(f"\n{strategy}: {len(firsts)} pairs -> {rows} rows compared")


@pytest.mark.parametrize("max_length,stride,side", [(32, 0, "right"), (33, 5, "left"), (7, 0, "right"), (128, 2, "left")])
def test_pair_truncation_longest_first(bert, hf_copy, sample_lines, max_length, stride, side):
    firsts, seconds = sample_lines[:2000], sample_lines[1:2001]
    hf_copy.enable_truncation(max_length, stride=stride, strategy="longest_first")
    hf_copy.enable_padding(direction=side)
    encodings = hf_copy.encode_batch(list(zip(firsts, seconds)))
    assert any(e.overflowing for e in encodings)  # truncation happened
    out = bert(firsts, seconds, truncation="longest_first", max_length=max_length, stride=stride, padding_side=side)
    _check_rows(out, encodings, overflow=False)
    # gputok defines no overflowing rows for longest_first pairs (huggingface's cross product of
    # both sides' windows is not what transformers returns); it says so instead of guessing.
    with pytest.raises(ValueError, match="longest_first"):
        bert(firsts, seconds, truncation="longest_first", max_length=max_length, stride=stride,
             return_overflowing_tokens=True)


def test_pair_truncation_other_side_too_long_raises_like_reference(bert, hf_copy, long_and_short):
    longs, shorts = long_and_short
    hf_copy.enable_truncation(20, strategy="only_second")
    with pytest.raises(Exception, match="too short"):
        hf_copy.encode_batch(list(zip(longs, shorts)))
    with pytest.raises(ValueError, match="only_second"):
        bert(longs, shorts, truncation="only_second", max_length=20)


def test_stride_too_large_raises(bert, sample_lines):
    # huggingface panics here (`stride` must be strictly less than `max_len`); gputok raises.
    with pytest.raises(ValueError, match="stride=15 must be smaller"):
        bert(sample_lines[:100], truncation=True, max_length=17, stride=15, return_overflowing_tokens=True)


# ---- decoding ------------------------------------------------------------------------------

def test_decode_matches_reference(bert, hf_bert, sample_lines):
    firsts, seconds = sample_lines, sample_lines[1:] + sample_lines[:1]
    batch = [e.ids for e in hf_bert.encode_batch(list(zip(firsts, seconds)))]
    rng = random.Random(7)
    vocab_size = hf_bert.get_vocab_size()
    batch += [[rng.randrange(vocab_size) for _ in range(rng.randrange(1, 30))] for _ in range(2000)]
    batch += [[0, 0, 101, 100, 103, 102, 0], [], [1012, 1005, 1056]]
    for skip in (True, False):
        got = bert.decode_batch(batch, skip_special_tokens=skip)
        expected = hf_bert.decode_batch(batch, skip_special_tokens=skip)
        bad = [(ids, g, e) for ids, g, e in zip(batch, got, expected) if g != e]
        print(f"\ndecode_batch(skip_special_tokens={skip}): {len(batch)} sequences compared, {len(bad)} differ")
        assert not bad, bad[:3]
        for ids in batch[:300] + batch[-300:]:
            assert bert.decode(ids, skip_special_tokens=skip) == hf_bert.decode(ids, skip_special_tokens=skip)
            assert bert.decode(torch.tensor(ids, dtype=torch.int64), skip_special_tokens=skip) == \
                hf_bert.decode(ids, skip_special_tokens=skip)
    assert bert.decode([101, 7592, 102]) == "hello"


# ---- save ----------------------------------------------------------------------------------

def test_save_round_trip(bert, bert_json_path, sample_lines, tmp_path):
    path = tmp_path / "t.json"
    Tokenizer.from_file(bert_json_path).save(path)  # the file's own padding and truncation (the fixture's are off)
    lines = sample_lines + TRICKY
    expected = bert.encode_batch(lines)

    reloaded_hf = HFTokenizer.from_file(str(path))
    original_hf = HFTokenizer.from_file(str(bert_json_path))
    # Same settings, truncation and padding included, as the file it came from.
    assert json.loads(reloaded_hf.to_str()) == json.loads(original_hf.to_str())
    assert [e.ids for e in reloaded_hf.encode_batch(lines)] == [e.ids for e in original_hf.encode_batch(lines)]
    reloaded_hf.no_truncation()
    reloaded_hf.no_padding()
    assert [e.ids for e in reloaded_hf.encode_batch(lines)] == expected

    reloaded = Tokenizer.from_file(path)
    assert reloaded.encode_batch(lines) == [e.ids for e in original_hf.encode_batch(lines)]  # padded to 128, as hf
    reloaded.no_truncation()
    reloaded.no_padding()
    assert reloaded.encode_batch(lines) == expected
    assert reloaded.encode_batch(lines[:500], lines[1:501]) == bert.encode_batch(lines[:500], lines[1:501])
    assert not list(tmp_path.glob("*.tmp"))
    print(f"\nsave round trip: {len(lines)} lines compared")


def test_save_round_trip_from_vocab(bert_vocab_path, sample_lines, tmp_path):
    gputok = Tokenizer.from_vocab(bert_vocab_path)
    path = tmp_path / "v.json"
    gputok.save(path)
    reference = BertWordPieceTokenizer(str(bert_vocab_path), lowercase=True)
    reloaded_hf = HFTokenizer.from_file(str(path))
    assert json.loads(reloaded_hf.to_str()) == json.loads(reference.to_str())
    lines = sample_lines + TRICKY
    expected = [e.ids for e in reference.encode_batch(lines)]
    assert [e.ids for e in reloaded_hf.encode_batch(lines)] == expected
    assert Tokenizer.from_file(path).encode_batch(lines) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["", "##", "unaffable", "running", "a" * 100, "a" * 101, "x" * 150]),
                          st.text(alphabet=st.sampled_from(list("abcdeüé中文#") + ["q", "z"]), max_size=12),
                          st.text(max_size=8)), max_size=40))
def test_numba_kernel_equals_the_lockstep_matcher(bert, words):
    """CPU words go through the numba kernel; it must give the torch twin's pieces (more in
    tests/test_models_numba.py)."""
    from gputok import _dispatch
    from gputok.ragged import Ragged

    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w], dtype=torch.int64),
                                 torch.tensor([len(w) for w in words], dtype=torch.int64))
    kernel = bert.model.encode_words(ragged)
    with _dispatch.use_backend("torch"):
        lockstep = bert.model.encode_words(ragged)
    for a, b in zip(kernel, lockstep):
        assert a.values.dtype == b.values.dtype and a.values.tolist() == b.values.tolist()
        assert a.offsets.tolist() == b.offsets.tolist()


def test_one_long_line(bert, hf_bert, long_line):
    """The English corpus as one line (100 KB; 1 MB under GPUTOK_FULL=1), and a 200 KB word
    (longer than max_input_chars_per_word: one [UNK]): huggingface's ids."""
    word = "".join(random.Random(13).choices("abcdefghij", k=200_000))
    for text in (long_line, word + " and " + word):
        assert bert.encode(text) == hf_bert.encode(text).ids
