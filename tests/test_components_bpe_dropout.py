"""BPE dropout: huggingface's sampled merges, reproducible from a torch.Generator.

p = 0 is plain BPE and p = 1 leaves the initial symbols, both exactly as huggingface; in between
the same seed gives the same ids, and the share of merges taken falls with p as huggingface's does
(mean tokens per text within a few percent of huggingface's own samples)."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders as D, models as M, pre_tokenizers as P

from gputok import Tokenizer


def _hf(trained: dict, kind: str, dropout: float | None) -> HFTokenizer:
    spec = json.loads(HFTokenizer(M.WordLevel({"[UNK]": 0}, unk_token="[UNK]")).to_str())
    spec["model"] = dict(trained[kind], dropout=dropout)
    tok = HFTokenizer.from_str(json.dumps(spec))
    tok.pre_tokenizer = P.ByteLevel(add_prefix_space=False) if kind == "bpe_byte" else P.Whitespace()
    if kind == "bpe_byte":
        tok.decoder = D.ByteLevel()
    return tok


@pytest.fixture(scope="module")
def lines(parity_lines):
    return [line for line in parity_lines[::300] if line.strip()][:400]


def _ids(tok: Tokenizer, lines: list[str], p: float | None = None, seed: int = 0) -> list[list[int]]:
    with tok.model.sampling(p, torch.Generator().manual_seed(seed)):
        return tok.encode_batch(lines)


@pytest.mark.parametrize("kind", ["bpe", "bpe_byte"])
def test_dropout_edges_match_huggingface(hf_trained_models, lines, kind):
    for p in (0.0, 1.0):
        hf = _hf(hf_trained_models, kind, p)
        ours = Tokenizer.from_str(hf.to_str())
        expected = [e.ids for e in hf.encode_batch(lines)]
        assert ours.encode_batch(lines) == expected, p
        assert HFTokenizer.from_str(json.dumps(ours.to_json(), ensure_ascii=False)).to_str() == hf.to_str()
    plain = Tokenizer.from_str(_hf(hf_trained_models, kind, None).to_str())
    assert _ids(plain, lines, 0.0) == [e.ids for e in _hf(hf_trained_models, kind, None).encode_batch(lines)]
    symbols = _ids(plain, lines, 1.0)
    assert symbols == [e.ids for e in _hf(hf_trained_models, kind, 1.0).encode_batch(lines)]
    if kind == "bpe_byte":  # one token per byte
        assert [len(row) for row in symbols] == [len(t.encode("utf-8")) for t in lines]


def test_dropout_is_reproducible_and_falls_with_p_as_huggingface(hf_trained_models, lines):
    ours = Tokenizer.from_str(_hf(hf_trained_models, "bpe_byte", 0.2).to_str())
    first, again, other = _ids(ours, lines, seed=1), _ids(ours, lines, seed=1), _ids(ours, lines, seed=2)
    assert first == again and first != other
    assert ours.decode_batch(first) == ours.decode_batch(other)  # another segmentation of the same text
    words = lines * 3
    means = []
    for p in (0.0, 0.1, 0.3, 0.6, 1.0):
        ours_mean = sum(map(len, _ids(ours, words, p))) / len(words)
        hf_mean = sum(len(e.ids) for e in _hf(hf_trained_models, "bpe_byte", p).encode_batch(words)) / len(words)
        assert abs(ours_mean - hf_mean) <= 0.03 * hf_mean, (p, ours_mean, hf_mean)
        means.append(ours_mean)
    assert means == sorted(means) and means[0] < means[-1]


def test_file_dropout_samples_every_call_and_each_occurrence(hf_trained_models):
    ours = Tokenizer.from_str(_hf(hf_trained_models, "bpe_byte", 0.5).to_str())
    torch.manual_seed(0)  # the default generator: a fixed state, so the count below is too
    rows = ours.encode_batch(["internationalization"] * 200)
    # no cache, no dedup: each occurrence draws its own (a dedup would give one row 200 times)
    assert len({tuple(r) for r in rows}) > 10
    torch.manual_seed(3)
    a = ours.encode_batch(["internationalization"] * 20)
    torch.manual_seed(3)
    assert ours.encode_batch(["internationalization"] * 20) == a  # the default generator


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.1", True])
def test_bad_dropout_is_refused_naming_it(hf_trained_models, bad):
    spec = json.loads(_hf(hf_trained_models, "bpe", None).to_str())
    spec["model"]["dropout"] = bad
    with pytest.raises(ValueError, match=r"dropout"):
        Tokenizer.from_str(json.dumps(spec))
