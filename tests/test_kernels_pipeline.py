"""The CUDA pipeline's Triton kernels against their numba twins, and the pipeline against huggingface.

Each kernel of ``gputok.cuda_pipeline`` (normalize, split, WordPiece per word, row tokens + rows)
runs under ``TRITON_INTERPRET=1`` on CPU tensors (conftest) on the same inputs as its numba twin,
on odd shapes (no text, empty texts, one character, words longer than a block's others), real
lines of the parity corpus and random Unicode; the Triton kernels leave their rows apart (upper-bound
regions), so each row is compared after cutting it out. Inputs stay small: the interpreter runs a
kernel's lanes as numpy vectors, a few ms per step.
"""

import random

import numpy as np
import pytest
import torch

import gputok
from gputok import _dispatch, assets, cuda_pipeline, pre_tokenizers
from gputok.kernels import postprocess_numba
from gputok.kernels.normalize import longest_row, rewrite_table_triton
from gputok.kernels.normalize_numba import rewrite_table_numba
from gputok.kernels.postprocess import row_tokens_triton, write_rows_triton
from gputok.kernels.word_split import split_by_class_triton
from gputok.kernels.word_split_numba import split_by_class
from gputok.kernels.wordpiece_match import wordpiece_encode_triton
from gputok.kernels.wordpiece_match_numba import wordpiece_encode_numba
from gputok.normalizers import BertNormalizer

from test_cuda import _random_texts


@pytest.fixture(scope="module")
def texts(parity_lines):
    """Real English and Chinese lines, random Unicode, and the odd shapes."""
    english = [line for line in parity_lines[3::997] if line.strip()][:14]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][5::200][:4]
    return english + chinese + _random_texts(12, seed=3) + ["", "x", " ", "İstanbul Café naïve", "a" * 130 + " ok", ""]


def _ragged(texts):
    units = np.frombuffer(gputok.ingest._join(texts).encode("utf-32-le"), dtype=np.int32).copy()
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return units, offsets


def _rows(values, starts, lengths):
    """Each row ``values[starts[i]:starts[i] + lengths[i]]`` as a list."""
    return [values[s:s + n].tolist() for s, n in zip(starts.tolist(), lengths.tolist())]


def _normalized(texts):
    """(numba's normalized codepoints and offsets, Triton's buffer, row starts and lengths)."""
    table = BertNormalizer().table
    units, offsets = _ragged(texts)
    expected, expected_offsets, _ = rewrite_table_numba(units, offsets, table.values.numpy(), table.offsets.numpy())
    got = rewrite_table_triton(torch.from_numpy(units), torch.from_numpy(offsets), table.values.int(), table.offsets,
                               longest_row(table.offsets))
    return expected, expected_offsets, got


@pytest.mark.parametrize("case", ["corpus", "none", "empty"])
def test_normalize_equals_twin(texts, case):
    chosen = {"corpus": texts, "none": [], "empty": ["", ""]}[case]
    expected, expected_offsets, (out, starts, lengths) = _normalized(chosen)
    assert _rows(out, starts, lengths) == [expected[a:b].tolist() for a, b in zip(expected_offsets[:-1],
                                                                                 expected_offsets[1:])]


@pytest.mark.parametrize("splitter", [pre_tokenizers.BertPreTokenizer, pre_tokenizers.WhitespaceSplit])
def test_split_equals_twin(texts, splitter):
    values, offsets, (out, starts, lengths) = _normalized(texts)
    classes = cuda_pipeline._classes(splitter(), torch.device("cpu"))
    want_starts, want_ends, want_offsets = split_by_class(values, offsets, classes.numpy())
    word_starts, word_ends, word_base, counts = split_by_class_triton(out, starts, lengths, classes)
    for t in range(len(texts)):
        a, b = want_offsets[t], want_offsets[t + 1]
        assert int(counts[t]) == b - a
        packed = slice(int(word_base[t]), int(word_base[t]) + b - a)
        # The same words: the same characters (the two lay the normalized text out apart).
        got_words = [out[s:e].tolist() for s, e in zip(word_starts[packed].tolist(), word_ends[packed].tolist())]
        assert got_words == [values[s:e].tolist() for s, e in zip(want_starts[a:b], want_ends[a:b])]
    total = want_offsets[-1]
    ranges = sorted((b, b + n) for b, n in zip(word_base.tolist(), counts.tolist()))  # they tile the packed words
    assert all(r[1] == q[0] for r, q in zip(ranges, ranges[1:])) and ranges[0][0] == 0 and ranges[-1][1] == total
    assert not word_starts[total:].any() and not word_ends[total:].any()  # every other place: an empty word


@pytest.fixture(scope="module")
def bert_model():
    return gputok.Tokenizer.from_vocab(assets.fetch("bert-vocab")).model


@pytest.mark.parametrize("partial_unk", [False, True])
@pytest.mark.parametrize("max_chars", [100, 5])
def test_wordpiece_equals_twin(texts, bert_model, partial_unk, max_chars):
    values, offsets, _ = _normalized(texts)
    starts, ends, _ = split_by_class(values, offsets, cuda_pipeline._classes(pre_tokenizers.BertPreTokenizer(),
                                                                             torch.device("cpu")).numpy())
    # Words packed back to back, as the twin takes them, plus unknown characters and a lone unk run.
    words = [values[s:e] for s, e in zip(starts, ends)] + [np.array([0x2603, 0x2603, 120, 0x2603], np.int32),
                                                          np.array([0x2603], np.int32)]
    codes = np.concatenate(words).astype(np.int32)
    word_offsets = np.zeros(len(words) + 1, np.int64)
    np.cumsum([w.size for w in words], out=word_offsets[1:])
    tables = bert_model._numba_tables
    ids, piece_ends, piece_offsets = wordpiece_encode_numba(codes, word_offsets, max_chars=max_chars,
                                                            unk_id=bert_model.unk_id, partial_unk=partial_unk,
                                                            **tables)
    word_starts = torch.from_numpy(word_offsets[:-1].copy())
    got_ids, got_ends, counts = wordpiece_encode_triton(
        torch.from_numpy(codes), word_starts, torch.from_numpy(word_offsets[1:].copy()), max_chars=max_chars,
        unk_id=bert_model.unk_id, partial_unk=partial_unk, **bert_model.trie.tensors("cpu"))
    assert counts.tolist() == np.diff(piece_offsets).tolist()
    assert _rows(got_ids, word_starts, counts) == [ids[a:b].tolist() for a, b in zip(piece_offsets[:-1],
                                                                                     piece_offsets[1:])]
    assert _rows(got_ends, word_starts, counts) == [piece_ends[a:b].tolist() for a, b in zip(piece_offsets[:-1],
                                                                                             piece_offsets[1:])]


def test_wordpiece_no_words(bert_model):
    none = torch.zeros(0, dtype=torch.int64)
    ids, ends, counts = wordpiece_encode_triton(torch.zeros(0, dtype=torch.int32), none, none, max_chars=100, unk_id=1,
                                                partial_unk=False, **bert_model.trie.tensors("cpu"))
    assert counts.numel() == 0


def _token_layout(lengths, seed):
    """Random token ids of texts with ``lengths`` tokens, laid out as the pipeline leaves them: each
    text's tokens cut into words (slots) of 1-3 pieces, the slots and pieces apart, with empty slots
    between texts. Returns the compact ids and offsets (the twin's input) and the layout."""
    rng = random.Random(seed)
    compact, slot_starts, slot_counts, piece_starts, piece_counts = [], [], [], [], []
    pieces = [-7] * 3  # room no slot points at
    for n in lengths:
        ids = [rng.randrange(30000) for _ in range(n)]
        compact.append(ids)
        slot_starts.append(len(piece_counts))
        at = 0
        while at < n:
            k = min(rng.randint(1, 3), n - at)
            piece_starts.append(len(pieces))
            piece_counts.append(k)
            pieces += ids[at:at + k] + [-9]
            at += k
        slot_counts.append(len(piece_counts) - slot_starts[-1])
        piece_starts.append(0), piece_counts.append(5)  # a slot past the text's own: never read
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.array([i for row in compact for i in row], np.int64)
    as_tensor = lambda v, dtype=torch.int64: torch.tensor(v, dtype=dtype)  # noqa: E731
    layout = (as_tensor(slot_starts), as_tensor(slot_counts), as_tensor(piece_starts), as_tensor(piece_counts),
              as_tensor(pieces, torch.int32))
    return flat, offsets, layout


@pytest.mark.parametrize("padding", ["longest", "do_not_pad"])
@pytest.mark.parametrize("options", [dict(), dict(left=True, multiple=8), dict(budget=3, min_width=9),
                                     dict(specials=False)])
def test_rows_equal_twin(padding, options):
    lengths = [0, 5, 1, 17, 0, 3, 70, 2]
    flat, offsets, (slot_starts, slot_counts, piece_starts, piece_counts, pieces) = _token_layout(lengths, seed=5)
    template = ([] if options.get("specials") is False else [(-1, 101, 0)]) + [(0, 0, 0)] + (
        [] if options.get("specials") is False else [(-1, 102, 0), (-1, 103, 1)])
    item_seq, item_id, item_type = (np.array(column, np.int64) for column in zip(*template))
    budget = options.get("budget")
    sample, a_start, a_len, b_start, b_len, error = postprocess_numba.truncate_rows(
        np.diff(offsets), np.zeros(0, np.int64), budget or 0, -1 if budget is None else 0, 0, False)
    no_spans = np.zeros((0, 2), np.int64)
    args = (item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, flat, offsets, flat, offsets,
            no_spans, no_spans)
    tokens = row_tokens_triton(slot_starts, slot_counts, piece_counts)
    assert tokens.tolist() == lengths
    keep = tokens if budget is None else tokens.clamp(max=budget)
    assert keep.tolist() == a_len.tolist()
    row_lengths = keep + int((item_seq < 0).sum())
    template_tensors = [torch.from_numpy(a) for a in (item_seq, item_id, item_type)]
    rows = len(lengths)
    if padding == "do_not_pad":
        want_ids, want_offsets, want_types, _ = postprocess_numba.ragged(*args, True, False)
        row_offsets = torch.zeros(rows + 1, dtype=torch.int64)
        torch.cumsum(row_lengths, 0, out=row_offsets[1:])
        ids, types = torch.full((int(row_offsets[-1]),), -5), torch.full((int(row_offsets[-1]),), -5)
        write_rows_triton(*template_tensors, slot_starts, slot_counts, piece_starts, piece_counts, pieces, keep,
                          row_offsets, ids, None, types)
        assert row_offsets.tolist() == want_offsets.tolist()
        assert ids.tolist() == want_ids.tolist() and types.tolist() == want_types.tolist()
        return
    left, multiple, min_width = options.get("left", False), options.get("multiple", 0), options.get("min_width", 0)
    want_ids, want_mask, want_types, _ = postprocess_numba.padded(*args, min_width, multiple, left, 0, True, False)
    width = want_ids.shape[1]
    ids, mask, types = torch.full((rows, width), 0), torch.zeros(rows, width, dtype=torch.int64), \
        torch.zeros(rows, width, dtype=torch.int64)  # the padding, as the caller fills it
    row_base = torch.arange(rows) * width + ((width - row_lengths) if left else 0)
    write_rows_triton(*template_tensors, slot_starts, slot_counts, piece_starts, piece_counts, pieces, keep, row_base,
                      ids, mask, types)
    assert ids.tolist() == want_ids.tolist()
    assert mask.tolist() == want_mask.tolist() and types.tolist() == want_types.tolist()


@pytest.fixture(scope="module")
def bert(bert_json_path):
    return gputok.Tokenizer.from_file(bert_json_path)


def test_pipeline_equals_huggingface(bert, hf_bert, texts, monkeypatch):
    calls = []
    monkeypatch.setattr(cuda_pipeline, "encode", lambda *a, _encode=cuda_pipeline.encode, **k: calls.append(1) or
                        _encode(*a, **k))
    with _dispatch.use_backend("triton"):
        out = bert(texts)
        flat = bert(texts, padding=False)
    assert len(calls) == 2, "the Triton backend did not take gputok.cuda_pipeline"
    expected = [e.ids for e in hf_bert.encode_batch([gputok.ingest.without_surrogates(t) for t in texts])]
    mask = out["attention_mask"].bool()
    assert [row[m].tolist() for row, m in zip(out["input_ids"], mask)] == expected
    assert out["input_ids"].shape[1] == max(map(len, expected))
    bounds = flat["row_offsets"].tolist()
    assert [flat["input_ids"][a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == expected
    assert torch.equal(out["token_type_ids"], torch.zeros_like(out["input_ids"]))


@pytest.mark.parametrize("options", [dict(padding_side="left", pad_to_multiple_of=8),
                                     dict(truncation=True, max_length=7, padding="max_length"),
                                     dict(add_special_tokens=False, return_token_type_ids=False)])
def test_pipeline_options_equal_cpu(bert, texts, options):
    chosen = texts[::3]
    want = bert(chosen, **options)
    with _dispatch.use_backend("triton"):
        got = bert(chosen, **options)
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key


def test_pipeline_partial_unk_and_added_tokens(bert_vocab_path):
    tok = gputok.Tokenizer.from_vocab(bert_vocab_path, partial_unk=True)
    chosen = ["unaffable ☃☃x☃ a☃", "", "[MASK] is [CLS] here"]  # added tokens: the stage-by-stage path
    want = tok(chosen)
    with _dispatch.use_backend("triton"):
        got = tok(chosen)
        assert not cuda_pipeline.supports(tok, pairs=["x"], return_offsets=False, overflow=False, truncation=None)
    for key in want:
        assert torch.equal(got[key], want[key]), key


def test_pipeline_finds_added_tokens_matched_after_the_normalizer():
    """An added token with ``normalized: true`` shows only after the normalizer ("NewWord" is
    "newword" there): the CUDA code path takes the stage-by-stage path for such a tokenizer, and
    gives the CPU's ids (the whole-call kernels searched the raw text alone and split the word)."""
    from tokenizers import AddedToken, Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(assets.fetch("bert-tokenizer-json")))
    hf.add_tokens([AddedToken("newword", normalized=True)])
    tok = gputok.Tokenizer.from_str(hf.to_str())
    chosen = ["NewWord here", "a newword b", "nothing", ""]
    want = tok(chosen, padding=True)
    assert want["input_ids"][0, 1] == hf.token_to_id("newword")
    with _dispatch.use_backend("triton"):
        got = tok(chosen, padding=True)
    for key in want:
        assert torch.equal(got[key], want[key]), key
