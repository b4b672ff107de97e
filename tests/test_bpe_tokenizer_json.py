"""Byte-level BPE through huggingface files: tokenizer.json written by gputok, read by both, and
GPT-2 vocab.json + merges.txt; ids identical to huggingface tokenizers on real text."""

import json

import pytest
from tokenizers import ByteLevelBPETokenizer
from tokenizers import Tokenizer as HFTokenizer

from gputok import Tokenizer, assets

CHUNK = 65536


@pytest.fixture(scope="module")
def gpt2_json(tmp_path_factory):
    """GPT-2's ranks saved by gputok as a huggingface tokenizer.json (merges derived from ranks)."""
    path = tmp_path_factory.mktemp("gpt2") / "tokenizer.json"
    Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2").save(path)
    return path


@pytest.fixture(scope="module")
def cl100k_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("cl100k") / "tokenizer.json"
    Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").save(path)
    return path


@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
def test_saved_file_matches_huggingface_and_tiktoken_on_real_text(name, request, parity_lines):
    """gputok's tokenizer.json of tiktoken ranks: huggingface reading it gives tiktoken's ids, and
    so does gputok reading it back (its Split pattern recognized as the named rule)."""
    from gputok.regex_split import PATTERNS

    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = request.getfixturevalue(f"{name}_json")
    hf = HFTokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    assert ours.pre_tokenizer.rule == name
    reference = tiktoken.Encoding(name, pat_str=PATTERNS[name], special_tokens={},
                                  mergeable_ranks=load_tiktoken_bpe(str(assets.fetch(f"{name}-tiktoken"))))
    hf_mismatches = ours_mismatches = 0
    for i in range(0, len(parity_lines), CHUNK):
        chunk = parity_lines[i:i + CHUNK]
        expected = reference.encode_ordinary_batch(chunk)
        hf_mismatches += sum(a != b for a, b in zip((e.ids for e in hf.encode_batch(chunk, add_special_tokens=False)), expected))
        ours_mismatches += sum(a != b for a, b in zip(ours.encode_batch(chunk, add_special_tokens=False), expected))
    print(f"\n{name} tokenizer.json: {len(parity_lines)} lines compared, {hf_mismatches} huggingface and "
          f"{ours_mismatches} gputok mismatches against tiktoken")
    assert hf_mismatches == ours_mismatches == 0


def test_gpt2_vocab_and_merges_files(gpt2_json, tmp_path, parity_lines):
    spec = json.loads(gpt2_json.read_text())["model"]
    (tmp_path / "vocab.json").write_text(json.dumps(spec["vocab"]))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in spec["merges"]) + "\n")
    ours = Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    hf = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    lines = parity_lines[::41]
    assert ours.encode_batch(lines) == [e.ids for e in hf.encode_batch(lines)]
    for line, ids in zip(lines[:300], ours.encode_batch(lines[:300])):
        assert ours.decode(ids) == hf.decode(ids) == line
        assert ours.encode(line) == ids  # one line: the small-batch path


def test_merges_with_unknown_tokens(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({chr(c): i for i, c in enumerate(range(0x21, 0x7F))}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nzz q\n")
    with pytest.raises(ValueError, match=r"merge 0 \('a', 'b'\) names tokens that are not in the vocabulary: \['ab'\]"):
        Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\nabc\n")
    with pytest.raises(ValueError, match="merge 1 is not 'left right'"):
        Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_unsupported_bpe_options_fail_clearly(gpt2_json, tmp_path):
    spec = json.loads(gpt2_json.read_text())
    spec["model"]["dropout"] = 1.5  # dropout itself is supported (tests/test_components_bpe_dropout.py)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"model\.dropout = 1\.5: a probability is in 0 \.\. 1"):
        Tokenizer.from_file(path)


def test_added_tokens_split_the_text_like_huggingface(gpt2_json, tmp_path, parity_lines):
    """Byte-level BPE keeps spaces as tokens: the text around an added token is cut, not blanked."""
    spec = json.loads(gpt2_json.read_text())
    spec["added_tokens"] = [{"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}]
    path = tmp_path / "with_eot.json"
    path.write_text(json.dumps(spec))
    hf, ours = HFTokenizer.from_file(str(path)), Tokenizer.from_file(path)
    texts = ["one<|endoftext|>two", " <|endoftext|> ", "<|endoftext|><|endoftext|>", "no special", "",
             *(f"{a} <|endoftext|>{b}" for a, b in zip(parity_lines[:200:2], parity_lines[1:200:2]))]
    assert ours.encode_batch(texts) == [e.ids for e in hf.encode_batch(texts)]
    got = ours(texts, return_offsets=True, padding=False)
    expected = [o for e in hf.encode_batch(texts) for o in e.offsets]
    assert got["offsets"].tolist() == [list(o) for o in expected]
    assert ours.decode(ours.encode("a<|endoftext|>b"), skip_special_tokens=False) == "a<|endoftext|>b"
