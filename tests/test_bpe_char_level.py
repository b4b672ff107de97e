"""Character-level BPE from huggingface tokenizer.json files, ids identical to ``tokenizers``:
``CharBPETokenizer`` (``</w>`` suffix, ``<unk>``) trained here on real English, a ``##``
continuing-subword prefix, byte fallback, fused unknowns, ``ignore_merges``, both merge
spellings; and byte-level BPE with ``add_prefix_space``. ``GPUTOK_FULL=1`` runs the ~20 MB parity
corpus."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import ByteLevelBPETokenizer, CharBPETokenizer, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from gputok import Tokenizer, assets

FULL = bool(os.environ.get("GPUTOK_FULL"))
CHUNK = 65536


@pytest.fixture(scope="module")
def char_bpe_json(tmp_path_factory):
    """huggingface's CharBPETokenizer with its defaults, trained on 2 MB of English (vocab 5000)."""
    trained = CharBPETokenizer()
    trained.train([str(assets.english_corpus(2))], vocab_size=5000)
    path = tmp_path_factory.mktemp("charbpe") / "tokenizer.json"
    trained.save(str(path))
    return path


@pytest.fixture(scope="module")
def lines(parity_lines):
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return parity_lines[::200] + chinese[::80]


def variant(path, tmp_path, **model_changes):
    """The tokenizer.json at ``path`` with some model fields changed: (huggingface, gputok)."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    spec["model"].update(model_changes)
    out = tmp_path / "variant.json"
    out.write_text(json.dumps(spec), encoding="utf-8")
    return HFTokenizer.from_file(str(out)), Tokenizer.from_file(out)


def hf_ids(hf, texts):
    return [e.ids for e in hf.encode_batch(texts)]


EDGE = ["", "a", "I", "a b", "héllo wörld", "中文 text 𝔘\U0001F600", "x" * 400, "don't stop", "\t\n", "1234567890" * 9]


def test_char_bpe_matches_huggingface(char_bpe, lines):
    hf, ours = char_bpe
    texts = lines + EDGE
    expected = hf.encode_batch(texts)
    mismatches = sum(a != b.ids for a, b in zip(ours.encode_batch(texts), expected))
    print(f"\nchar BPE </w>: {len(texts)} lines, {mismatches} mismatches")
    assert mismatches == 0
    assert [ours.decode(e.ids) for e in expected[:500]] == [hf.decode(e.ids) for e in expected[:500]]
    offsets = ours(texts[:500], return_offsets=True, padding=False)["offsets"].tolist()
    assert offsets == [list(o) for e in expected[:500] for o in e.offsets]


@pytest.mark.skipif(not FULL, reason="set GPUTOK_FULL=1 for the ~20 MB parity run")
def test_char_bpe_full_parity_corpus(char_bpe_json, parity_lines):
    hf, ours = HFTokenizer.from_file(str(char_bpe_json)), Tokenizer.from_file(char_bpe_json)
    mismatches = 0
    for i in range(0, len(parity_lines), CHUNK):
        chunk = parity_lines[i:i + CHUNK]
        mismatches += sum(a != b for a, b in zip(ours.encode_batch(chunk), hf_ids(hf, chunk)))
    print(f"\nchar BPE </w> full: {len(parity_lines)} lines, {mismatches} mismatches")
    assert mismatches == 0


TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("  \t\n0123456789<>/w#éÉ")),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
)


@pytest.fixture(scope="module")
def char_bpe(char_bpe_json):
    return HFTokenizer.from_file(str(char_bpe_json)), Tokenizer.from_file(char_bpe_json)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_char_bpe_random_unicode(char_bpe, texts):
    hf, ours = char_bpe
    assert ours.encode_batch(texts) == hf_ids(hf, texts)


@pytest.fixture(scope="module")
def byte_fallback_json(char_bpe_json, tmp_path_factory):
    """The char BPE with ``<0xNN>`` tokens added and byte_fallback on."""
    spec = json.loads(char_bpe_json.read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    spec["model"]["byte_fallback"] = True
    path = tmp_path_factory.mktemp("fallback") / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def option_variants(char_bpe_json, byte_fallback_json, tmp_path_factory):
    """byte_fallback, fuse_unk and ignore_merges turned on, each in huggingface and gputok."""
    tmp = tmp_path_factory.mktemp("options")
    return [variant(byte_fallback_json, tmp), variant(char_bpe_json, tmp, fuse_unk=True),
            variant(char_bpe_json, tmp, ignore_merges=True)]


@settings(max_examples=40, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_options_random_unicode(option_variants, texts):
    for hf, ours in option_variants:
        assert ours.encode_batch(texts) == hf_ids(hf, texts)


def test_options_edge_cases(option_variants):
    for hf, ours in option_variants:
        assert ours.encode_batch(EDGE) == hf_ids(hf, EDGE)


def test_byte_fallback_real_text_and_decode(byte_fallback_json, lines):
    hf, ours = HFTokenizer.from_file(str(byte_fallback_json)), Tokenizer.from_file(byte_fallback_json)
    texts = lines[::3] + EDGE
    expected = hf_ids(hf, texts)
    assert ours.encode_batch(texts) == expected
    assert any(ours.id_to_token(i).startswith("<0x") for ids in expected for i in ids)  # fallback was used
    assert [ours.decode(ids) for ids in expected] == [hf.decode(ids) for ids in expected]


def test_merge_spellings_give_the_same_ids(char_bpe_json, tmp_path, lines):
    merges = json.loads(char_bpe_json.read_text(encoding="utf-8"))["model"]["merges"]
    as_pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    texts = lines[::5]
    hf, ours = variant(char_bpe_json, tmp_path, merges=[" ".join(m) for m in as_pairs])
    expected = hf_ids(hf, texts)
    assert ours.encode_batch(texts) == expected
    assert variant(char_bpe_json, tmp_path, merges=as_pairs)[1].encode_batch(texts) == expected


def test_continuing_subword_prefix(tmp_path, lines):
    """A BPE with a ``##`` prefix on every symbol but a word's first (trained here by huggingface)."""
    hf = HFTokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.train([str(assets.english_corpus(1))], trainers.BpeTrainer(vocab_size=3000, special_tokens=["[UNK]"],
                                                                  continuing_subword_prefix="##"))
    path = tmp_path / "prefix.json"
    hf.save(str(path))
    ours = Tokenizer.from_file(path)
    texts = lines[::2] + EDGE
    assert ours.encode_batch(texts) == hf_ids(hf, texts)
    spec = ours.to_json()["model"]
    assert spec["continuing_subword_prefix"] == "##" and spec["unk_token"] == "[UNK]"


def test_byte_level_add_prefix_space(tmp_path, lines):
    trained = ByteLevelBPETokenizer(add_prefix_space=True)
    trained.train([str(assets.english_corpus(1))], vocab_size=2000)
    path = tmp_path / "prefix_space.json"
    trained.save(str(path))
    hf, ours = HFTokenizer.from_file(str(path)), Tokenizer.from_file(path)
    texts = lines + EDGE + [" a", "  b"]
    expected = hf_ids(hf, texts)
    assert ours.encode_batch(texts) == expected
    assert [ours.decode(ids) for ids in expected[:300]] == [hf.decode(ids) for ids in expected[:300]]
    ours.save(tmp_path / "again.json")
    assert hf_ids(HFTokenizer.from_file(str(tmp_path / "again.json")), texts) == expected


def test_saved_char_bpe_loads_in_huggingface(char_bpe_json, tmp_path, lines):
    ours = Tokenizer.from_file(char_bpe_json)
    ours.save(tmp_path / "saved.json")
    hf = HFTokenizer.from_file(str(tmp_path / "saved.json"))
    assert hf_ids(hf, lines[::4]) == ours.encode_batch(lines[::4])


def test_normalizers_and_whitespace_split(char_bpe_json, tmp_path, lines):
    """The char BPE behind other huggingface components: NFKC, Lowercase, Strip, Replace, Prepend
    in a Sequence, and the WhitespaceSplit pre-tokenizer."""
    spec = json.loads(char_bpe_json.read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "0"}, {"type": "Prepend", "prepend": "x"},
        {"type": "Replace", "pattern": {"String": "-"}, "content": " - "}]}
    spec["pre_tokenizer"] = {"type": "WhitespaceSplit"}
    text = json.dumps(spec)
    hf, ours = HFTokenizer.from_str(text), Tokenizer.from_str(text)
    texts = lines[::4] + EDGE + ["ﬁ ＡＢＣ Ⅻ ½", "  a-b--c  ", "İstanbul ΣΑΣ"]
    expected = hf.encode_batch(texts)
    assert ours.encode_batch(texts) == [e.ids for e in expected]
    got = ours(texts, return_offsets=True, padding=False)["offsets"].tolist()
    assert got == [list(o) for e in expected for o in e.offsets]


def test_bad_merges_fail_clearly(char_bpe_json, tmp_path):
    spec = json.loads(char_bpe_json.read_text(encoding="utf-8"))
    spec["model"]["merges"] = ["t h", "zzz q</w>"]
    (tmp_path / "bad.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"merge 1 \('zzz', 'q</w>'\) names tokens that are not in the "
                                         r"vocabulary: \['zzz', 'zzzq</w>'\]"):
        Tokenizer.from_file(tmp_path / "bad.json")
    spec["model"]["merges"] = ["t h e"]
    (tmp_path / "bad.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"merge 0 is not 'left right' or \[left, right\]: 't h e'"):
        Tokenizer.from_file(tmp_path / "bad.json")
    spec["model"]["merges"] = []
    spec["model"]["unk_token"] = "<missing>"
    (tmp_path / "bad.json").write_text(json.dumps(spec), encoding="utf-8")
    # huggingface loads it and fails on the first unknown character; gputok refuses it at load
    with pytest.raises(ValueError, match=r"bad\.json: model\.unk_token = '<missing>': it is not in model\.vocab"):
        Tokenizer.from_file(tmp_path / "bad.json")
