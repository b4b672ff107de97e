"""Unigram parity with sentencepiece (and huggingface for the same models as tokenizer.json).

Models: the SentencePiece test model of ASSETS.md, and Unigram models that sentencepiece trains
here on ASSETS text (English + the Chinese kernel docs; nmt_nfkc; one with byte_fallback),
cached under the gputok cache dir. CI runs a few thousand real lines; ``GPUTOK_FULL=1`` runs the
20 MB parity corpus and adds a vocab-32000 model.
"""

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputok
from gputok import assets
from gputok._cache import cache_dir
from gputok.sentencepiece_model import UNKNOWN, read_model, serialize_model, write_model

spm = pytest.importorskip("sentencepiece")
FULL = bool(os.environ.get("GPUTOK_FULL"))

EDGE_CASES = ["", " ", "   ", "  Hello   wörld  ｱ ", "a\u3000b", "ｶﾞｷﾞ ㌀ ﬁ", "x\u0301y e\u0301", "\ufffd", "▁▁a▁",
              "  ▁ x", "\t tab\tand\nnewline", "ＡＢＣ１２３", "한국어 텍스트", "\u1100\u1161\u11a8", "emoji 😀👍🏽",
              "+------+------+", "a" * 300, "中文文本，没有空格。" * 20, "\x00\x01 control", "ǅ Ǆ ǆ"]


def training_text(megabytes: float) -> Path:
    """English from the assets plus the Chinese kernel docs (a quarter), as one training file."""
    path = cache_dir() / "unigram-tests" / f"train-{megabytes}MB.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        english = assets.english_corpus(None).open("rb").read(int(megabytes * 0.75e6))
        chinese = assets.corpus("kernel-docs-zh").open("rb").read(int(megabytes * 0.25e6))
        text = (english + b"\n" + chinese).decode("utf-8", errors="ignore")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def trained_model(vocab_size: int, *, byte_fallback: bool = False, megabytes: float = 2) -> str:
    """A Unigram model trained by sentencepiece itself (cached: training is the slow part)."""
    name = f"unigram-{vocab_size}-{'bytes' if byte_fallback else 'unk'}-{megabytes}MB"
    prefix = cache_dir() / "unigram-tests" / name
    if not Path(f"{prefix}.model").exists():
        spm.SentencePieceTrainer.train(input=str(training_text(megabytes)), model_prefix=str(prefix),
                                       vocab_size=vocab_size, model_type="unigram", normalization_rule_name="nmt_nfkc",
                                       byte_fallback=byte_fallback, num_threads=2, minloglevel=2,
                                       input_sentence_size=2_000_000, shuffle_input_sentence=False)
    return f"{prefix}.model"


MODELS = {
    "sp-test-model": lambda: str(assets.fetch("sp-test-model")),
    "trained-8000": lambda: trained_model(8000),
    "trained-8000-byte-fallback": lambda: trained_model(8000, byte_fallback=True),
}
if FULL:
    MODELS["trained-32000"] = lambda: trained_model(32000, megabytes=10)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    path = MODELS[request.param]()
    return request.param, path, gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)


@pytest.fixture(scope="module")
def lines():
    """CI: 4,000 real lines (random parity-corpus lines, the Chinese kernel docs) plus edge cases;
    GPUTOK_FULL: the whole ~20 MB parity corpus."""
    parity = assets.parity_corpus().read_text(encoding="utf-8").splitlines()
    if FULL:
        return parity + EDGE_CASES
    rng = random.Random(5)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity, 3000) + rng.sample(chinese, 1000) + EDGE_CASES


def mismatches(ours, theirs):
    return [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]


def test_parity_with_sentencepiece(model, lines):
    name, _, tok, sp = model
    ours = tok.encode_batch(lines)
    bad = mismatches(ours, sp.encode(lines))
    print(f"{name}: {len(bad)} mismatches of {len(lines)} lines, {sum(map(len, ours))} tokens")
    assert not bad, f"{name}: first mismatch on {lines[bad[0]]!r}"


def test_parity_with_huggingface_tokenizer_json(model, lines, tmp_path):
    """The tokenizer.json gputok writes: huggingface loads it, and gputok reading it back gives
    huggingface's ids. huggingface itself differs from sentencepiece only on near ties (it sums
    float64 scores per word, sentencepiece float32 per sentence), where both segmentations must
    score the same up to float32 rounding, and on control pieces written in the text."""
    from tokenizers import Tokenizer as HFTokenizer

    name, _, tok, sp = model
    tok.save(tmp_path / "tokenizer.json")
    hf = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    back = gputok.Tokenizer.from_file(tmp_path / "tokenizer.json")
    # the edge cases too: huggingface's reading of the file (its grapheme-cluster charsmap rule,
    # gputok.huggingface_precompiled) differs from SentencePiece's on several of them
    every = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
    bad = mismatches(back.encode_batch(lines), every)
    assert not bad, f"{name}: gputok on the saved tokenizer.json differs from huggingface on {lines[bad[0]]!r}"
    # huggingface's Precompiled, Replace and Prepend only approximate SentencePiece's whitespace and
    # grapheme rules on odd inputs: against sentencepiece, the real lines, not the edge cases.
    real = lines[: len(lines) - len(EDGE_CASES)]
    theirs = every[: len(real)]
    reference = sp.encode(real)
    model_ = tok.model
    score = lambda ids: sum(model_.unk_score if i == model_.unk_id else model_.scores[i] for i in ids)  # noqa: E731
    ties = mismatches(theirs, reference)
    # huggingface's Unigram also matches control pieces written in the text ("<s>"): not a tie.
    control = [p.piece for p in read_model(model[1]).pieces if p.type == 3]
    literal = [i for i in ties if any(c in real[i] for c in control)]
    print(f"{name}: huggingface differs from sentencepiece on {len(ties)} of {len(real)} lines "
          f"(near ties; {len(literal)} with a control piece in the text)")
    for i in sorted(set(ties) - set(literal)):
        assert abs(score(theirs[i]) - score(reference[i])) < 1e-3 * max(1.0, abs(score(reference[i]))), real[i]


def test_decode_round_trip(model, lines):
    name, _, tok, sp = model
    sample = lines[:300]
    ids = sp.encode(sample)
    assert tok.decode_batch(ids) == sp.decode(ids)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=8))
def test_random_unicode_matches_sentencepiece(sp_test_model_path, sp_test_tokenizer, texts):
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    assert sp_test_tokenizer.encode_batch(texts) == sp.encode(texts)


def test_float32_near_ties_follow_sentencepiece(sp_test_model_path, sp_test_tokenizer):
    # Runs of '-' split between '-' and '--' pieces whose scores tie up to float32 rounding:
    # SentencePiece's choice depends on the sentence's running score, so these lines go
    # through the whole-sentence float32 path.
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    texts = ["+" + "-" * n + "+" + "-" * m + "+" for n in range(1, 40, 3) for m in (1, 4, 9)]
    texts += ["word " * k + "-" * 17 for k in range(0, 60, 7)]
    assert sp_test_tokenizer.encode_batch(texts) == sp.encode(texts)


@pytest.fixture
def torch_backend():
    """The torch-op path (the CUDA path of these stages): the CPU's numba kernels keep no word cache."""
    from gputok._dispatch import use_backend

    with use_backend("torch"):
        yield


def test_word_cache_keeps_parity_and_margins(sp_test_model_path, lines, torch_backend):
    """Words seen in an earlier batch come from the tokenizer's word cache, with their margins:
    the near-tie sentences must still take the float32 path when every word is a cache hit."""
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    tok = gputok.Tokenizer.from_sentencepiece(sp_test_model_path)
    # Lines of the kernel docs where the per-word float64 segmentation differs from sentencepiece's.
    ties = ["  +------------+         +---------------------------------------+",
            "  |  PCI BUS   | <-----> |  PCI EP BUS   |        |  Virtual PCI |",
            " |       BAR5      |    |      |                |   | |     +-----------------+"]
    texts = lines[:400] + ties
    want = sp.encode(texts)
    assert [ids for i in range(0, len(texts), 37) for ids in tok.encode_batch(texts[i:i + 37])] == want
    stored = len(tok.word_cache)
    assert stored > 100
    assert tok.encode_batch(texts) == want  # every word a hit
    assert len(tok.word_cache) == stored
    tok.word_cache = None
    assert tok.encode_batch(texts) == want


def test_huggingface_mode_word_cache_holds_just_ids_and_ends(sp_test_tokenizer, lines, tmp_path, torch_backend):
    """A huggingface-mode Unigram (from tokenizer.json) has no float32 check, so its cache entries
    are each word's ids and ends alone, without the margin and score the SentencePiece mode keeps."""
    import torch

    from gputok.ragged import Ragged, span_indices

    sp_test_tokenizer.save(tmp_path / "t.json")
    tok = gputok.Tokenizer.from_file(tmp_path / "t.json")
    assert not tok.model.sentencepiece
    texts = lines[:300]
    batches = [ids for i in range(0, len(texts), 37) for ids in tok.encode_batch(texts[i:i + 37])]
    assert tok.encode_batch(texts) == batches  # every word a hit
    (store,) = tok.word_cache._stores.values()
    entries = store.entries[:store.count]
    chars, offsets = span_indices(entries[:, 0], entries[:, 1])
    ids, ends = tok.model.encode_words(Ragged(store.chars.data.index_select(0, chars).long(), offsets))
    stored = span_indices(entries[:, 2], entries[:, 3])[0]
    assert store.count > 100 and torch.equal(entries[:, 3], ids.lengths())
    assert torch.equal(store.ids.data.index_select(0, stored), ids.values)
    assert torch.equal(store.ends.data.index_select(0, stored), ends.values)
    tok.word_cache = None
    assert tok.encode_batch(texts) == batches


def test_lattice_searches_only_codes_that_follow_a_character(torch_backend):
    """Codes that only start pieces label no edge below the root: the lattice walk must not
    search the rare edges for them (the search could only miss), and the ids stay the same."""
    import torch

    from gputok.models.unigram import PieceTrie, Unigram
    from gputok.ragged import Ragged

    vocab = [("<unk>", 0.0), ("ab", -1.0), ("a", -2.0), ("b", -2.0), ("c", -2.0), ("bc", -1.5), ("x", -3.0),
             ("xa", -2.5), ("y", -3.0)]
    model = Unigram(vocab, unk_id=0)
    words = ["abcab", "xyabx", "ayxcbz", "yy", "cab"]
    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w]), torch.tensor([len(w) for w in words]))
    want = model.encode_words(ragged)
    trie = model.trie = PieceTrie({p: i for i, (p, _) in enumerate(vocab)}, dense=1)  # every code but 0 searched
    assert trie.codes - 1 > trie.inner  # x and y only start pieces
    searched = []
    step = trie.rare_step
    trie.rare_step = lambda node, code: searched.append(code) or step(node, code)
    got = model.encode_words(ragged)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    codes = torch.cat(searched)
    assert codes.numel() and bool((codes <= trie.inner).all())


def test_bytes_invalid_utf8_and_lone_surrogates(sp_test_model_path, sp_test_tokenizer):
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    assert sp_test_tokenizer.encode_batch([b"ab\xffcd", "x\ud800y", ""]) == [
        sp.encode("ab\ufffdcd"), sp.encode("x\ufffdy"), []]


def test_byte_fallback_pieces():
    path = trained_model(8000, byte_fallback=True)
    tok, sp = gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)
    text = "rare: ☃ ꙮ 𝌆 and 𝔘𝔫𝔦"  # nmt_nfkc turns 𝔘𝔫𝔦 into Uni
    ids = tok.encode(text)
    assert ids == sp.encode(text)
    assert sum(tok.id_to_token(i).startswith("<0x") for i in ids) >= 6
    assert tok.decode(ids) == sp.decode(ids) == "rare: ☃ ꙮ 𝌆 and Uni"


def test_byte_fallback_runs_span_the_run(tmp_path):
    # The .model's kernel gives every byte piece of a run of unknown characters the run's span, as
    # huggingface does on the tokenizer.json gputok writes for the model (single spaces: where
    # several collapse, the two read the collapsed spaces' span apart), and sentencepiece's ids.
    import tokenizers

    path = trained_model(8000, byte_fallback=True)
    tok, sp = gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)
    tok.save(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    rng = random.Random(5)
    rare = ["\U0001F600", "\u2603", "\ua66e", "\U0001D306", "\u0fff", "é", "中", "ß"]
    texts = [" ".join("".join(rng.choice(rare + [*"ab."]) for _ in range(rng.randint(1, 6)))
                      for _ in range(rng.randint(1, 4))) for _ in range(300)]
    out = tok(texts, return_offsets=True, padding=False, add_special_tokens=False)
    bounds, ids = out["row_offsets"].tolist(), out["input_ids"].tolist()
    spans = [tuple(o) for o in out["offsets"].tolist()]
    expected = hf.encode_batch(texts, add_special_tokens=False)
    assert [ids[a:b] for a, b in zip(bounds, bounds[1:])] == [e.ids for e in expected] == sp.encode(texts)
    assert [spans[a:b] for a, b in zip(bounds, bounds[1:])] == [e.offsets for e in expected]
    assert sum(len(set(e.offsets)) < len(e.offsets) - 4 for e in expected) > 50  # runs of bytes share spans


def test_offsets_point_into_the_text(sp_test_tokenizer):
    text = "  Hello   world"
    out = sp_test_tokenizer([text], return_offsets=True)
    spans = out["offsets"][0].tolist()
    pieces = [text[a:b] for a, b in spans]
    assert "".join(pieces).replace(" ", "") == "Helloworld"


def test_truncated_or_corrupted_model_raises(sp_test_model_path, tmp_path):
    data = Path(sp_test_model_path).read_bytes()
    (tmp_path / "cut.model").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        gputok.Tokenizer.from_sentencepiece(tmp_path / "cut.model")
    (tmp_path / "junk.model").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        gputok.Tokenizer.from_sentencepiece(tmp_path / "junk.model")
    with pytest.raises(ValueError, match="cannot read"):
        gputok.Tokenizer.from_sentencepiece(tmp_path / "missing.model")


def test_corrupted_charsmap_raises(sp_test_model_path, tmp_path):
    model = read_model(sp_test_model_path)
    model.normalizer.precompiled_charsmap = model.normalizer.precompiled_charsmap[:1000]
    write_model(model, tmp_path / "bad.model")
    with pytest.raises(ValueError, match="precompiled_charsmap"):
        gputok.Tokenizer.from_sentencepiece(tmp_path / "bad.model")


def test_model_without_unk_piece_raises(sp_test_model_path, tmp_path):
    model = read_model(sp_test_model_path)
    for p in model.pieces:
        if p.type == UNKNOWN:
            p.type = 1
    (tmp_path / "nounk.model").write_bytes(serialize_model(model))
    with pytest.raises(ValueError, match="no unknown piece"):
        gputok.Tokenizer.from_sentencepiece(tmp_path / "nounk.model")


def test_tokenizer_json_round_trip_in_gputok(sp_test_tokenizer, tmp_path):
    sp_test_tokenizer.save(tmp_path / "t.json")
    back = gputok.Tokenizer.from_file(tmp_path / "t.json")
    texts = ["Hello world, this is a test.", "中文", "  spaced   out  "]
    assert back.encode_batch(texts) == sp_test_tokenizer.encode_batch(texts)


def test_huggingface_converter_layout_matches_huggingface(model, lines, tmp_path):
    """A tokenizer.json laid out as transformers' SentencePiece converter writes it (Precompiled +
    Replace normalizers, Metaspace prepend_scheme=always): gputok reads it with huggingface's rules
    (every piece in the trie, float64 per word) and gives huggingface's ids."""
    import base64
    import json

    from tokenizers import Tokenizer as HFTokenizer

    name, path, _, _ = model
    proto = read_model(path)
    steps = [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    if proto.normalizer.precompiled_charsmap:
        steps.insert(0, {"type": "Precompiled",
                         "precompiled_charsmap": base64.b64encode(proto.normalizer.precompiled_charsmap).decode()})
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": {"type": "Sequence", "normalizers": steps},
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
            "post_processor": None,
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": proto.unk_id, "byte_fallback": proto.byte_fallback,
                      "vocab": [[p.piece, p.score] for p in proto.pieces]}}
    (tmp_path / "hf.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    hf = HFTokenizer.from_file(str(tmp_path / "hf.json"))
    ours = gputok.Tokenizer.from_file(tmp_path / "hf.json")
    real = lines[: len(lines) - len(EDGE_CASES)]
    theirs = [e.ids for e in hf.encode_batch(real, add_special_tokens=False)]
    bad = mismatches(ours.encode_batch(real), theirs)
    assert not bad, f"{name}: differs from huggingface on {real[bad[0]]!r}"


def test_empty_input_and_no_unk_id(sp_test_tokenizer):
    import torch

    from gputok.models.unigram import Unigram
    from gputok.ragged import Ragged

    assert sp_test_tokenizer.encode_batch([]) == []
    assert sp_test_tokenizer.encode_batch(["", "   "]) == [[], []]
    assert sp_test_tokenizer([""], padding=True)["input_ids"].shape == (1, 0)
    model = Unigram([("a", -1.0)], unk_id=None)
    assert model.encode_words(Ragged.from_lengths(torch.tensor([97, 97]), torch.tensor([2])))[0].tolist() == [[0, 0]]
    with pytest.raises(ValueError, match="no unk_id"):
        model.encode_words(Ragged.from_lengths(torch.tensor([98]), torch.tensor([1])))
    with pytest.raises(ValueError, match="vocabulary is empty"):
        Unigram([])
