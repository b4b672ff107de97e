"""gputok.processors on small hand-made cases: truncate (windows, budget split), assemble, pad.

Expected values are worked out by hand from huggingface ``tokenizers``' rules (quoted where they
matter); one test at the end checks the same rules against huggingface on real lines.
"""

import pytest
import torch

from gputok.processors import TemplateItem, TemplateProcessing, assemble, filled_cells, pad, truncate

T = torch.tensor
BERT = TemplateProcessing.bert(("[CLS]", 101), ("[SEP]", 102))


def rows_of(r):
    out = {"sample": r.sample.tolist(), "a_start": r.a_start.tolist(), "a_len": r.a_len.tolist()}
    if r.b_len is not None:
        out.update(b_start=r.b_start.tolist(), b_len=r.b_len.tolist())
    return out


# ---- truncate: one sequence ---------------------------------------------------------------

def test_no_max_length_keeps_everything():
    assert rows_of(truncate(T([5, 0, 2]), None, max_length=None)) == {
        "sample": [0, 1, 2], "a_start": [0, 0, 0], "a_len": [5, 0, 2]}
    assert rows_of(truncate(T([5, 1]), T([2, 7]), max_length=None)) == {
        "sample": [0, 1], "a_start": [0, 0], "a_len": [5, 1], "b_start": [0, 0], "b_len": [2, 7]}


def test_single_cut_without_overflow():
    # only the first window: the first max_length tokens
    assert rows_of(truncate(T([5, 3, 0, 2]), None, max_length=3)) == {
        "sample": [0, 1, 2, 3], "a_start": [0, 0, 0, 0], "a_len": [3, 3, 0, 2]}
    assert rows_of(truncate(T([4]), None, max_length=0)) == {"sample": [0], "a_start": [0], "a_len": [0]}


@pytest.mark.parametrize("length, max_length, stride, windows", [
    # windows step by max_length - stride until one reaches the end of the sequence
    (5, 3, 1, [(0, 3), (2, 3)]),  # [0:3] [2:5]
    (7, 3, 1, [(0, 3), (2, 3), (4, 3)]),  # [0:3] [2:5] [4:7]
    (8, 3, 0, [(0, 3), (3, 3), (6, 2)]),  # [0:3] [3:6] [6:8]
    (6, 4, 2, [(0, 4), (2, 4)]),  # [0:4] [2:6]: the second window reaches the end
    (9, 4, 3, [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4), (5, 4)]),  # step 1
    (3, 4, 2, [(0, 3)]),  # fits: one window, no overflow
    (0, 4, 2, [(0, 0)]),  # empty sequence: one empty row
])
def test_stride_windows(length, max_length, stride, windows):
    r = truncate(T([length]), None, max_length=max_length, stride=stride, overflow=True)
    assert r.sample.tolist() == [0] * len(windows)
    assert list(zip(r.a_start.tolist(), r.a_len.tolist())) == windows


def test_stride_windows_batch_order():
    r = truncate(T([2, 5, 7]), None, max_length=3, stride=1, overflow=True)
    assert rows_of(r) == {"sample": [0, 1, 1, 2, 2, 2], "a_start": [0, 0, 2, 0, 2, 4], "a_len": [2, 3, 3, 3, 3, 3]}


def test_stride_not_smaller_than_window_raises():
    with pytest.raises(ValueError, match="stride=3 must be smaller"):
        truncate(T([10]), None, max_length=3, stride=3, overflow=True)
    # a sequence that fits needs no step, so a large stride is harmless there
    r = truncate(T([2]), None, max_length=3, stride=5, overflow=True)
    assert rows_of(r) == {"sample": [0], "a_start": [0], "a_len": [2]}


def test_truncate_argument_errors():
    with pytest.raises(ValueError, match="unknown truncation strategy 'shortest_first'"):
        truncate(T([3]), None, max_length=2, strategy="shortest_first")
    with pytest.raises(ValueError, match="max_length=-2 leaves no room"):
        truncate(T([3]), None, max_length=-2)
    with pytest.raises(ValueError, match="'only_second' needs pairs"):
        truncate(T([3]), None, max_length=2, strategy="only_second")
    with pytest.raises(ValueError, match="not defined for pairs with truncation='longest_first'"):
        truncate(T([3]), T([3]), max_length=4, overflow=True)


# ---- truncate: pairs ----------------------------------------------------------------------

@pytest.mark.parametrize("a, b, max_length, keep_a, keep_b", [
    (2, 3, 10, 2, 3),  # fits: untouched
    (10, 4, 8, 4, 4),  # the longer one is cut down to what is left: 8 - 4
    (3, 10, 8, 3, 5),  # same, with B the longer one
    (2, 9, 10, 2, 8),
    (6, 9, 10, 5, 5),  # both too long for the other's share: half each
    (10, 10, 7, 3, 4),  # odd budget: the extra token goes to the second (the reference's n2)
    (9, 9, 5, 2, 3),
    (12, 7, 5, 3, 2),  # A longer: A takes the larger half
    (1, 20, 0, 0, 0),
    (0, 5, 3, 0, 3),
])
def test_longest_first_budget_split(a, b, max_length, keep_a, keep_b):
    r = truncate(T([a]), T([b]), max_length=max_length, strategy="longest_first")
    assert rows_of(r) == {"sample": [0], "a_start": [0], "a_len": [keep_a], "b_start": [0], "b_len": [keep_b]}


def test_longest_first_batch_is_per_sample():
    r = truncate(T([10, 3, 10, 2]), T([4, 10, 10, 3]), max_length=8)
    assert r.a_len.tolist() == [4, 3, 4, 2] and r.b_len.tolist() == [4, 5, 4, 3]
    assert r.sample.tolist() == [0, 1, 2, 3]


def test_only_second_and_only_first():
    r = truncate(T([3, 2]), T([10, 4]), max_length=8, strategy="only_second")
    assert rows_of(r) == {"sample": [0, 1], "a_start": [0, 0], "a_len": [3, 2], "b_start": [0, 0], "b_len": [5, 4]}
    r = truncate(T([10, 2]), T([3, 4]), max_length=8, strategy="only_first")
    assert rows_of(r) == {"sample": [0, 1], "a_start": [0, 0], "a_len": [5, 2], "b_start": [0, 0], "b_len": [3, 4]}


def test_only_second_with_stride_windows():
    # B: 10 tokens, room for 8 - 3 = 5 per row, stride 1 -> step 4: B[0:5] B[4:9] B[8:10]
    r = truncate(T([3, 1]), T([10, 2]), max_length=8, strategy="only_second", stride=1, overflow=True)
    assert rows_of(r) == {"sample": [0, 0, 0, 1], "a_start": [0, 0, 0, 0], "a_len": [3, 3, 3, 1],
                          "b_start": [0, 4, 8, 0], "b_len": [5, 5, 2, 2]}
    r = truncate(T([7]), T([2]), max_length=6, strategy="only_first", stride=2, overflow=True)
    # A: room for 4, step 2: A[0:4] A[2:6] A[4:7]
    assert rows_of(r) == {"sample": [0, 0, 0], "a_start": [0, 2, 4], "a_len": [4, 4, 3],
                          "b_start": [0, 0, 0], "b_len": [2, 2, 2]}


def test_only_second_cannot_fit():
    with pytest.raises(ValueError, match="truncation='only_second' cannot fit a pair"):
        truncate(T([9]), T([3]), max_length=8, strategy="only_second")
    with pytest.raises(ValueError, match="truncation='only_first' cannot fit a pair"):
        truncate(T([3]), T([8]), max_length=8, strategy="only_first")
    # the other sequence is long, but the pair fits: nothing to cut, no error
    r = truncate(T([9]), T([0]), max_length=9, strategy="only_second")
    assert r.a_len.tolist() == [9] and r.b_len.tolist() == [0]


# ---- assemble -----------------------------------------------------------------------------

def test_assemble_single():
    a_offsets = T([0, 3, 3, 5])  # A lengths 3, 0, 2 in a flat array of 5 tokens
    rows = truncate(T([3, 0, 2]), None, max_length=None)
    row_offsets, source, special, types = assemble(BERT.single, rows, a_offsets, None, 5)
    assert row_offsets.tolist() == [0, 5, 7, 11]
    assert source.tolist() == [-1, 0, 1, 2, -1, -1, -1, -1, 3, 4, -1]
    assert special.tolist() == [101, 0, 0, 0, 102, 101, 102, 101, 0, 0, 102]
    assert types.tolist() == [0] * 11


def test_assemble_pair_shifts_b_and_sets_type_ids():
    a_offsets, b_offsets = T([0, 2, 3]), T([0, 1, 4])  # A lengths 2, 1; B lengths 1, 3
    rows = truncate(T([2, 1]), T([1, 3]), max_length=None)
    row_offsets, source, special, types = assemble(BERT.pair, rows, a_offsets, b_offsets, 3)
    assert row_offsets.tolist() == [0, 6, 13]
    assert source.tolist() == [-1, 0, 1, -1, 3, -1, -1, 2, -1, 4, 5, 6, -1]
    assert special.tolist() == [101, 0, 0, 102, 0, 102, 101, 0, 102, 0, 0, 0, 102]
    assert types.tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1]


def test_assemble_stride_windows_read_the_right_tokens():
    a_offsets = T([0, 2, 7])  # sample 0: tokens 0..1, sample 1: tokens 2..6
    rows = truncate(T([2, 5]), None, max_length=3, stride=1, overflow=True)
    row_offsets, source, special, _ = assemble(BERT.single, rows, a_offsets, None, 7)
    assert row_offsets.tolist() == [0, 4, 9, 14]
    assert source.tolist() == [-1, 0, 1, -1, -1, 2, 3, 4, -1, -1, 4, 5, 6, -1]
    assert (special[source >= 0] == 0).all()


def test_assemble_only_second_windows_in_pairs():
    a_offsets, b_offsets = T([0, 1]), T([0, 4])  # A: 1 token, B: 4 tokens
    rows = truncate(T([1]), T([4]), max_length=3, strategy="only_second", stride=0, overflow=True)
    row_offsets, source, _, types = assemble(BERT.pair, rows, a_offsets, b_offsets, 1)
    # B windows of 2: B[0:2], B[2:4]; B token j sits at 1 + j in the joint flat array
    assert row_offsets.tolist() == [0, 6, 12]
    assert source.tolist() == [-1, 0, -1, 1, 2, -1, -1, 0, -1, 3, 4, -1]
    assert types.tolist() == [0, 0, 0, 1, 1, 1] * 2


def test_assemble_custom_template_and_no_template():
    # "<s> A </s> </s> B </s>" with type ids all 0 (a RoBERTa-like template)
    s, e = TemplateItem(None, "<s>", 0, 0), TemplateItem(None, "</s>", 2, 0)
    template = [s, TemplateItem(0, None, None, 0), e, e, TemplateItem(1, None, None, 0), e]
    rows = truncate(T([1]), T([2]), max_length=None)
    row_offsets, source, special, types = assemble(template, rows, T([0, 1]), T([0, 2]), 1)
    assert row_offsets.tolist() == [0, 7]
    assert source.tolist() == [-1, 0, -1, -1, 1, 2, -1]
    assert special.tolist() == [0, 0, 2, 2, 0, 0, 2] and types.tolist() == [0] * 7
    row_offsets, source, _, _ = assemble([TemplateItem(0, None, None, 0)], truncate(T([2, 1]), None, max_length=None),
                                         T([0, 2, 3]), None, 3)
    assert row_offsets.tolist() == [0, 2, 3] and source.tolist() == [0, 1, 2]


def test_template_from_json_template_processing():
    spec = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}}}
    t = TemplateProcessing.from_json(spec)
    assert t.single == BERT.single and t.pair == BERT.pair
    assert t.num_added(False) == 2 and t.num_added(True) == 3
    assert t.to_json() is spec


# ---- pad ----------------------------------------------------------------------------------

def _pad(values, offsets, *, width, pad_value, left=False):
    return pad(values, filled_cells(offsets[1:] - offsets[:-1], width, left=left), pad_value=pad_value)


def test_pad_right_and_left():
    values, offsets = T([1, 2, 3, 4, 5, 6]), T([0, 3, 4, 6])  # rows [1 2 3] [4] [5 6]
    assert _pad(values, offsets, width=4, pad_value=0).tolist() == [[1, 2, 3, 0], [4, 0, 0, 0], [5, 6, 0, 0]]
    assert _pad(values, offsets, width=4, pad_value=0, left=True).tolist() == [[0, 1, 2, 3], [0, 0, 0, 4], [0, 0, 5, 6]]
    assert _pad(values, offsets, width=3, pad_value=-1, left=True).tolist() == [[1, 2, 3], [-1, -1, 4], [-1, 5, 6]]


def test_pad_empty_rows_dtype_and_no_rows():
    out = _pad(T([7, 8], dtype=torch.int32), T([0, 0, 2, 2]), width=3, pad_value=9, left=True)
    assert out.dtype == torch.int32 and out.tolist() == [[9, 9, 9], [9, 7, 8], [9, 9, 9]]
    empty = _pad(torch.zeros(0, dtype=torch.int64), T([0]), width=5, pad_value=0)
    assert empty.shape == (0, 5)
    assert _pad(torch.zeros(0, dtype=torch.int64), T([0, 0]), width=0, pad_value=0).shape == (1, 0)


def test_pad_pairs_of_values():  # the offsets output: two values per cell
    offsets = T([[0, 1], [1, 3], [0, 2]])
    out = pad(offsets, filled_cells(T([2, 1]), 3)[:, :, None].expand(-1, -1, 2), pad_value=0)
    assert out.tolist() == [[[0, 1], [1, 3], [0, 0]], [[0, 2], [0, 0], [0, 0]]]


# ---- the same rules end to end, against huggingface ---------------------------------------

def _rows(out):
    flat, bounds = out["input_ids"].tolist(), out["row_offsets"].tolist()
    return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


def test_truncation_and_windows_match_huggingface(bert, bert_json_path, parity_lines):
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(bert_json_path))
    hf.no_padding()
    lines = [line for line in parity_lines[::997] if line.strip()][:120]
    others = lines[60:] + lines[:60]
    short = [line[:8] for line in lines]  # at most 8 tokens: pairs always fit
    cases = [  # (texts, pairs, strategy, max_length, stride, overflow)
        (lines, None, "longest_first", 16, 4, True),
        (lines, None, "only_first", 10, 0, True),
        (lines, others, "longest_first", 20, 0, False),
        (short, others, "only_second", 24, 3, True),
        (others, short, "only_first", 24, 5, True),
        (lines, short, "only_first", 16, 0, False),
    ]
    for texts, pairs, strategy, max_length, stride, overflow in cases:
        hf.enable_truncation(max_length, stride=stride, strategy=strategy)
        encodings = hf.encode_batch(texts if pairs is None else list(zip(texts, pairs)))
        expected = []
        for e in encodings:
            expected.append(e.ids)
            if overflow:
                expected += [o.ids for o in e.overflowing]
        out = bert(texts, pairs, truncation=strategy, max_length=max_length, stride=stride,
                   return_overflowing_tokens=overflow, padding=False)
        got = _rows(out)
        assert got == expected, (strategy, max_length, stride)
        if overflow:
            assert len(got) > len(texts)  # windows were really made
    # left padding of the same rows
    out = bert(lines[:5], truncation=True, max_length=12, padding="max_length", padding_side="left")
    hf.enable_truncation(12)
    hf.enable_padding(length=12, direction="left", pad_id=0)
    assert out["input_ids"].tolist() == [e.ids for e in hf.encode_batch(lines[:5])]
    assert out["attention_mask"].tolist() == [e.attention_mask for e in hf.encode_batch(lines[:5])]


def test_partial_unk_keeps_matched_pieces(tmp_path):
    """Whole-word unk is the reference rule; partial_unk turns each unmatched run into one [UNK]."""
    from gputok import Tokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##able", "##a", "x"]) + "\n")
    strict = Tokenizer.from_vocab(vocab)
    partial = Tokenizer.from_vocab(vocab, partial_unk=True)
    text = ["unqqable x unable q"]
    assert strict.encode_batch(text, add_special_tokens=False) == [[1, 7, 4, 5, 1]]
    assert partial.encode_batch(text, add_special_tokens=False) == [[4, 1, 5, 7, 4, 5, 1]]
    spans = partial(text, add_special_tokens=False, return_offsets=True, padding=False)["offsets"].tolist()
    assert spans == [[0, 2], [2, 4], [4, 8], [9, 10], [11, 13], [13, 17], [18, 19]]
