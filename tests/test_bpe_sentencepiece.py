"""SentencePiece BPE (the Mistral model: identity normalizer, dummy prefix, byte fallback, tied
scores on the runs of "▁"): ids and decoding identical to ``sentencepiece`` on real text (English,
accented, the Chinese kernel docs) and random Unicode; the tokenizer.json gputok saves gives the
same ids in huggingface ``tokenizers`` and back in gputok. ``GPUTOK_FULL=1`` runs the ~20 MB
parity corpus."""

import json
import os

import pytest
import sentencepiece
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from gputok import Tokenizer, assets
from gputok.sentencepiece_model import WORD, read_model, write_model

FULL = bool(os.environ.get("GPUTOK_FULL"))
CHUNK = 65536


@pytest.fixture(scope="module")
def mistral_path():
    return assets.fetch("mistral-sp-model")


@pytest.fixture(scope="module")
def sp(mistral_path):
    return sentencepiece.SentencePieceProcessor(model_file=str(mistral_path))


@pytest.fixture(scope="module")
def ours(mistral_path):
    return Tokenizer.from_sentencepiece(mistral_path)


@pytest.fixture(scope="module")
def saved(ours, tmp_path_factory):
    path = tmp_path_factory.mktemp("mistral") / "tokenizer.json"
    ours.save(path)
    return path


@pytest.fixture(scope="module")
def lines(parity_lines):
    """~3000 real lines: a stride through the parity corpus plus the Chinese kernel docs."""
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return parity_lines[::200] + chinese[::40]


EDGE = ["", " ", "  ", "a", " a", "a ", "a  b", "\n", "\t x \r\n", "<s>", "</s> <unk>", "▁", "▁▁x ▁", "x\x00y",
        "é中文𝔘\U0001F600", "\U000F0000\U0010FFFD", *(" " * k + "x" for k in range(1, 40)), "1" * 300,
        " " * 300, "x" + " " * 77 + "y", "日本語の文章" * 60]


def test_real_text_matches_sentencepiece(ours, sp, lines):
    mismatches = sum(a != b for a, b in zip(ours.encode_batch(lines), sp.encode(lines)))
    print(f"\nmistral: {len(lines)} lines, {mismatches} mismatches")
    assert mismatches == 0


def test_edge_cases_match_sentencepiece(ours, sp):
    assert ours.encode_batch(EDGE) == sp.encode(EDGE)


@pytest.mark.skipif(not FULL, reason="set GPUTOK_FULL=1 for the ~20 MB parity run")
def test_full_parity_corpus(ours, sp, saved, parity_lines):
    hf = HFTokenizer.from_file(str(saved))
    mismatches = hf_mismatches = 0
    for i in range(0, len(parity_lines), CHUNK):
        chunk = parity_lines[i:i + CHUNK]
        reference = sp.encode(chunk)
        mismatches += sum(a != b for a, b in zip(ours.encode_batch(chunk), reference))
        hf_ids = (e.ids for e in hf.encode_batch(chunk, add_special_tokens=False))
        hf_mismatches += sum(a != b for a, b in zip(hf_ids, reference))
    print(f"\nmistral full: {len(parity_lines)} lines, gputok {mismatches}, saved json in huggingface "
          f"{hf_mismatches} mismatches")
    assert mismatches == hf_mismatches == 0


def test_long_words_and_tied_words_merge_in_the_kernel(ours, sp, monkeypatch):
    """A 200 KB word, one letter or one pair repeated, and words with runs of tied pieces merge in
    the numba kernel (issue 22: the Python heap took ~5 s per MB), with sentencepiece's ids."""
    import random
    import string

    import gputok.models.bpe as bpe

    def python_heap(*args):
        raise AssertionError("a word merged in the Python heap")

    monkeypatch.setattr(bpe, "bpe_merge_heap", python_heap)
    rng = random.Random(12)
    texts = ["".join(rng.choices(string.ascii_letters, k=200_000)), "a" * 100_000, "ab" * 50_000,
             "x" + "   " * 2000 + "y", "one  two    three" * 300]
    assert ours.encode_batch(texts) == sp.encode(texts)


def test_one_long_line(ours, sp, long_line):
    """The English corpus as one line (100 KB; 1 MB under GPUTOK_FULL=1): sentencepiece's ids."""
    assert ours.encode(long_line) == sp.encode(long_line)


def test_saved_tokenizer_json(ours, sp, saved, lines):
    """The saved file is Llama-style (Prepend + Replace normalizer, no pre-tokenizer, byte-fallback
    BPE, Replace/ByteFallback/Fuse/Strip decoder); huggingface and gputok read it back."""
    hf = HFTokenizer.from_file(str(saved))
    back = Tokenizer.from_file(saved)
    texts = lines[::3] + EDGE
    reference = sp.encode(texts)
    assert [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)] == reference
    assert back.encode_batch(texts) == reference
    assert [hf.decode(ids) for ids in reference[:300]] == [back.decode(ids) for ids in reference[:300]]


def test_decode_matches_sentencepiece(ours, sp, lines):
    texts = lines[::5] + EDGE
    for ids in sp.encode(texts):
        assert ours.decode(ids) == sp.decode(ids)
    cut = sp.encode("中文")[:-1]  # a character's bytes cut short: U+FFFD, as sentencepiece decodes it
    assert ours.decode(cut) == sp.decode(cut)


def test_offsets_match_huggingface(ours, saved, lines):
    """Character spans as huggingface gives them for the saved file (byte-fallback pieces of one
    character each span that character)."""
    hf = HFTokenizer.from_file(str(saved))
    texts = lines[::7] + EDGE
    for tok in (ours, Tokenizer.from_file(saved)):
        got = tok(texts, return_offsets=True, padding=False)["offsets"].tolist()
        assert got == [list(o) for e in hf.encode_batch(texts, add_special_tokens=False) for o in e.offsets]


@pytest.mark.parametrize("scheme,split", [("first", False), ("always", True), ("never", True)])
def test_metaspace_pre_tokenizer_and_decoder(saved, lines, scheme, split):
    """The same model behind huggingface's Metaspace (the newer Llama/Mistral files): ids,
    offsets and decoding as huggingface gives them."""
    spec = json.loads(saved.read_text(encoding="utf-8"))
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
    text = json.dumps(dict(spec, normalizer=None, pre_tokenizer=metaspace, decoder=metaspace))
    hf, ours = HFTokenizer.from_str(text), Tokenizer.from_str(text)
    texts = lines[::40] + EDGE
    expected = hf.encode_batch(texts, add_special_tokens=False)
    got = ours(texts, return_offsets=True, padding=False)
    assert ours.encode_batch(texts) == [e.ids for e in expected]
    assert got["offsets"].tolist() == [list(o) for e in expected for o in e.offsets]
    assert [ours.decode(e.ids) for e in expected] == [hf.decode(e.ids) for e in expected]


TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("  \t\n\r0123456789▁<>sxé")),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # many are not pieces: byte fallback
        st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=80,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_random_unicode(ours, sp, texts):
    assert ours.encode_batch(texts) == sp.encode(texts)


@pytest.fixture(scope="module")
def hf(saved):
    return HFTokenizer.from_file(str(saved))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([" ", "  ", "\n", "1", "22", "x", "中"]), max_size=120).map("".join))
def test_runs_of_spaces_digits_newlines(ours, sp, hf, text):
    assert ours.encode(text) == sp.encode(text) == hf.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def back(saved):
    return Tokenizer.from_file(saved)


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXT | st.sampled_from(EDGE), min_size=1, max_size=8))
def test_saved_json_in_one_kernel_call_as_huggingface(back, hf, texts):
    """The Llama-style tokenizer.json runs the SentencePiece BPE whole-pipeline kernel (its
    ``Prepend("▁")``, ``Replace(" " -> "▁")`` read as SentencePiece's normalizer): huggingface's
    ids and offsets on random Unicode, padded and ragged, a batch at a time and one text at a time."""
    assert back._whole_pipeline_kernel is not None
    expected = hf.encode_batch(texts, add_special_tokens=False)
    got = back(texts, return_offsets=True, padding=False)
    bounds = got["row_offsets"].tolist()
    ids, spans = got["input_ids"].tolist(), [tuple(o) for o in got["offsets"].tolist()]
    assert [ids[a:b] for a, b in zip(bounds, bounds[1:])] == [e.ids for e in expected]
    assert [spans[a:b] for a, b in zip(bounds, bounds[1:])] == [e.offsets for e in expected]
    padded = back(texts, padding=True)
    assert [row[:int(m.sum())] for row, m in zip(padded["input_ids"].tolist(), padded["attention_mask"])] == \
        [e.ids for e in expected]
    assert back.encode_batch(texts) == [back.encode(t) for t in texts]


def test_only_sentencepiece_shaped_normalizers_take_the_kernel():
    """The normalizer is read as SentencePiece's only where it is exactly the Sequence a
    SentencePiece BPE is saved as."""
    from gputok import normalizers as N
    from gputok._whole_sp_bpe import sentencepiece_normalizer_of

    prepend, replace = N.Prepend("▁"), N.Replace({"String": " "}, "▁")
    assert sentencepiece_normalizer_of(N.Sequence([prepend, replace])).add_dummy_prefix
    assert not sentencepiece_normalizer_of(N.Sequence([replace])).add_dummy_prefix
    for steps in ([], [replace, prepend], [N.Prepend("_"), replace], [prepend, N.Replace({"String": " "}, "_")],
                  [prepend, N.Replace({"Regex": " "}, "▁")], [prepend, prepend, replace], [N.Lowercase(), replace]):
        assert sentencepiece_normalizer_of(N.Sequence(steps)) is None, steps


def test_no_dummy_prefix_json_as_huggingface(hf, saved, tmp_path, lines):
    """A saved file without the Prepend (a model without ``add_dummy_prefix``) takes the kernel too,
    with huggingface's ids and offsets."""
    spec = json.loads(saved.read_text(encoding="utf-8"))
    spec["normalizer"]["normalizers"] = spec["normalizer"]["normalizers"][1:]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    ours, theirs = Tokenizer.from_file(path), HFTokenizer.from_file(str(path))
    assert ours._whole_pipeline_kernel is not None
    texts = lines[::11] + EDGE
    expected = theirs.encode_batch(texts, add_special_tokens=False)
    assert ours.encode_batch(texts) == [e.ids for e in expected]
    got = ours(texts, return_offsets=True, padding=False)["offsets"].tolist()
    assert got == [list(o) for e in expected for o in e.offsets]


@pytest.mark.parametrize("byte_fallback,rule", [(False, "nmt_nfkc"), (True, "nfkc")])
def test_models_trained_by_sentencepiece(tmp_path, parity_lines, byte_fallback, rule):
    """BPE models as spm_train writes them by default: a charsmap, extra whitespace removed,
    ``<unk>`` for unknown characters (a run of them is one ``<unk>``)."""
    (tmp_path / "train.txt").write_text("\n".join(parity_lines[::80]), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "m"),
                                             model_type="bpe", vocab_size=2000, byte_fallback=byte_fallback,
                                             normalization_rule_name=rule, minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    ours = Tokenizer.from_sentencepiece(tmp_path / "m.model")
    texts = parity_lines[7::300] + EDGE + ["ｈｅｌｌｏ　ｗｏｒｌｄ", "①②  ", "\U0001F600\U0001F600 x"]
    expected = sp.encode(texts)
    assert ours.encode_batch(texts) == expected
    ours.save(tmp_path / "tokenizer.json")
    hf = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    # A "▁" written in the text is whitespace to these models; huggingface's normalizers keep it.
    plain = [i for i, t in enumerate(texts) if "▁" not in t]
    hf_ids = [e.ids for e in hf.encode_batch([texts[i] for i in plain], add_special_tokens=False)]
    assert hf_ids == [expected[i] for i in plain]
    if byte_fallback:  # else <unk> occurs, which sentencepiece decodes as " ⁇ " and gputok as "<unk>"
        assert [ours.decode(expected[i]) for i in plain] == [sp.decode(expected[i]) for i in plain]


def test_unsupported_models_fail_clearly(mistral_path, tmp_path):
    model = read_model(mistral_path)
    model.model_type = WORD
    write_model(model, tmp_path / "word.model")
    with pytest.raises(ValueError, match=r"model type 'word' is not supported; supported: \['unigram', 'bpe'\]"):
        Tokenizer.from_sentencepiece(tmp_path / "word.model")
    (tmp_path / "broken.model").write_bytes(b"\x0a\xff")
    with pytest.raises(ValueError, match="is not a valid SentencePiece model"):
        Tokenizer.from_sentencepiece(tmp_path / "broken.model")
