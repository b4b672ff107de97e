"""transformers' names and semantics (issue 21): gputok against ``PreTrainedTokenizerFast`` loaded
from the same tokenizer.json, on real lines, for every call the README maps."""

import warnings

import pytest
import torch

from gputok import Tokenizer, assets

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["bert", "cl100k"])
def pair(request, tmp_path_factory):
    if request.param == "bert":
        path = str(assets.fetch("bert-tokenizer-json"))
    else:  # the cl100k tokenizer.json that gputok writes
        path = str(tmp_path_factory.mktemp("cl100k") / "tokenizer.json")
        Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    tok = Tokenizer.from_file(path)
    if hf.pad_token is None:  # cl100k has no pad token: transformers refuses to pad without one
        hf.pad_token = tok.pad_token = "!"
    return tok, hf


@pytest.fixture(scope="module")
def lines(parity_lines):
    picked = [line for line in parity_lines[5::401] if line.strip()][:40]
    return picked + ["Hello, world! [MASK] café", "", "x" * 50, "日本語のテキスト 123"]


def _lists(batch):
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in batch.items()}


@pytest.mark.parametrize("options", [
    dict(padding=True, truncation=True, max_length=12),
    dict(padding=False, max_length=7),  # max_length alone truncates (surprise 2), silently as transformers
    dict(padding="max_length", truncation=True, max_length=20, padding_side="left"),
    dict(padding=False, truncation=False),
    dict(padding="longest", pad_to_multiple_of=8, return_special_tokens_mask=True, return_length=True),
])
def test_call_matches_transformers(pair, lines, options):
    tok, hf = pair
    want = hf(lines, return_token_type_ids=False, **options)
    got = tok(lines, return_tensors=None, return_token_type_ids=False, **options)
    assert _lists(got) == _lists(want)
    pairs = [line[:20] for line in reversed(lines)]
    want = hf(lines, pairs, return_token_type_ids=True, **options)
    got = tok(lines, pairs, return_tensors=None, return_token_type_ids=True, **options)
    assert _lists(got) == _lists(want)


def test_return_tensors_and_single_text(pair, lines):
    tok, hf = pair
    for kind in ("pt", "np"):
        want = hf(lines[:8], padding=True, return_tensors=kind, return_token_type_ids=False)
        got = tok(lines[:8], return_tensors=kind, return_token_type_ids=False)
        assert got.keys() == want.keys()
        for key in want:
            assert type(got[key]) is type(want[key]) and (got[key] == want[key]).all(), (kind, key)
    assert _lists(tok(lines[0], padding=False, return_tensors=None, return_token_type_ids=False)) == _lists(
        hf(lines[0], return_token_type_ids=False))
    batch = tok(lines[:2]).to("cpu")
    assert torch.equal(batch.input_ids, batch["input_ids"])


def test_vocabulary_names(pair, lines):
    tok, hf = pair
    assert tok.get_vocab() == hf.get_vocab()
    assert len(tok) == len(hf)
    assert tok.model_max_length == hf.model_max_length
    assert (tok.pad_token, tok.pad_token_id) == (hf.pad_token, hf.pad_token_id)
    ids = list(range(0, len(hf), 97))
    assert tok.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
    assert tok.convert_ids_to_tokens(ids[3]) == hf.convert_ids_to_tokens(ids[3])
    tokens = hf.convert_ids_to_tokens(ids)
    assert tok.convert_tokens_to_ids(tokens) == hf.convert_tokens_to_ids(tokens)
    assert tok.convert_tokens_to_ids(tokens[5]) == hf.convert_tokens_to_ids(tokens[5])
    for line in lines:
        assert tok.tokenize(line) == hf.tokenize(line)
    assert tok.tokenize(lines[0], lines[1], add_special_tokens=True) == hf.tokenize(lines[0], lines[1],
                                                                                     add_special_tokens=True)


def test_decode_shapes(pair, lines):
    """Surprise 2: ``decode`` of a 2-D tensor raised a TypeError."""
    tok, hf = pair
    batch = hf(lines[:6], padding=True, return_tensors="pt")["input_ids"]
    for skip in (False, True):
        want = hf.batch_decode(batch, skip_special_tokens=skip)
        assert tok.batch_decode(batch, skip_special_tokens=skip) == want
        assert tok.decode(batch, skip_special_tokens=skip) == want
        assert tok.batch_decode(batch.numpy(), skip_special_tokens=skip) == want
        assert tok.batch_decode(batch.tolist(), skip_special_tokens=skip) == want
        assert tok.decode(batch[0].numpy(), skip_special_tokens=skip) == want[0]
        assert tok.decode(batch[0], skip_special_tokens=skip) == want[0]
        assert tok.decode(int(batch[0, 1]), skip_special_tokens=skip) == hf.decode(int(batch[0, 1]))


def test_special_tokens_of_a_bert_vocab(bert_vocab_path):
    tok = Tokenizer.from_vocab(bert_vocab_path)
    assert (tok.cls_token, tok.sep_token, tok.pad_token, tok.unk_token, tok.mask_token) == (
        "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
    assert (tok.cls_token_id, tok.sep_token_id, tok.pad_token_id, tok.unk_token_id, tok.mask_token_id) == (
        101, 102, 0, 100, 103)
    assert tok.bos_token is None and tok.eos_token_id is None
    assert tok.convert_tokens_to_ids("qqqzzz") == 100  # unknown tokens give unk_token_id, as transformers
    assert tok.all_special_ids == [0, 100, 101, 102, 103]


def test_max_length_alone_truncates_with_transformers_warning(bert):
    """Surprise 2: ``tok(..., max_length=5)`` without ``truncation=True`` did not truncate."""
    with pytest.warns(UserWarning, match="truncates the rows"):
        out = bert(["one two three four five six seven"], max_length=5)
    assert out["input_ids"].shape == (1, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bert(["one two three four five six"], max_length=5, truncation=True)["input_ids"].shape == (1, 5)
        assert bert(["one two three four five six"], max_length=5, padding=False)["input_ids"].numel() == 5
        assert bert(["one two three four five six"], max_length=5, truncation=False)["input_ids"].shape == (1, 8)
    with pytest.raises(ValueError, match="return_tensors"):
        bert(["a"], return_tensors="tf")


def test_pad_token_can_be_set(tmp_path):
    tok = Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token is None
    tok.pad_token = tok.eos_token  # what transformers users do for GPT-2
    out = tok(["a b c", "a"])
    assert out["input_ids"][1, 1:].tolist() == [50256, 50256] and tok.pad_token_id == 50256
    with pytest.raises(ValueError, match="not a token"):
        tok.pad_token = "<never-a-token>"


def test_help_is_current():
    assert "for now" not in Tokenizer.__doc__
    assert "return_tensors" in Tokenizer.__call__.__doc__
