"""gputok.train(..., model="unigram") and `gputok train --model unigram`: the trained Tokenizer against
sentencepiece (its exported .model) and huggingface tokenizers (its tokenizer.json), on real text.

The exported .model has no precompiled charsmap (identity normalization), so sentencepiece gets the
held-out lines normalized by gputok.trainers.unigram.nmt_nfkc first; gputok gets them raw.
"""

import functools
import os
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputok
from gputok import assets, cli
from gputok.training import nmt_nfkc_normalizer, save_sentencepiece_model, train_with_summary
from gputok.trainers.unigram import nmt_nfkc

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

# Lines where nmt_nfkc does something (ligatures, fullwidth forms, tabs, controls, the kept U+FF5E).
ODD = ["ﬁne ｆｕｌｌｗｉｄｔｈ\tTab\x01bed ～ wave ~ ASCII", "Ⅳ\u3000ideographic  space\u200b", "naïve café ñ",
       "line\nbreak\r\nend", "  leading and trailing  ", "emoji 🤗 and 中文 mixed"]


@pytest.fixture(scope="module")
def corpus():
    with open(assets.english_corpus(1), encoding="utf-8") as f:
        lines = f.read().split("\n")
    return lines[:6000], [line for line in lines[6000:10000] if line.strip()] + ODD


@pytest.fixture(scope="module")
def trained(corpus):
    train, _ = corpus
    tok, summary = train_with_summary(iter(train + ODD), model="unigram", vocab_size=1000, progress=False)
    return tok, summary


def _sp(tok, path):
    save_sentencepiece_model(tok, path)
    return spm.SentencePieceProcessor(model_file=str(path))


def test_ids_equal_sentencepiece_of_exported_model(trained, corpus, tmp_path):
    tok, summary = trained
    _, held = corpus
    sp = _sp(tok, tmp_path / "u.model")
    assert sp.get_piece_size() == len(tok.model.pieces) == summary.vocab_size == 1000
    assert [sp.id_to_piece(i) for i in range(1000)] == tok.model.pieces
    assert sp.unk_id() == 0 and sp.bos_id() == 1 and sp.eos_id() == 2
    ours = tok.encode_batch(held)
    theirs = sp.encode([nmt_nfkc(line.replace("\n", " ")) for line in held])
    assert sum(a != b for a, b in zip(ours, theirs)) == 0
    assert sum(map(len, ours)) > 30000  # the comparison covered real text
    assert summary.unique_words > 5000 and summary.words > summary.unique_words and summary.rounds > 0
    assert {"reading", "seeds", "e_step", "prune", "building"} <= set(summary.seconds)


def test_tokenizer_json_loads_in_huggingface_with_the_same_ids(trained, corpus, tmp_path):
    tok, _ = trained
    _, held = corpus
    tok.save(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours = tok.encode_batch(held)
    theirs = [e.ids for e in hf.encode_batch(held, add_special_tokens=False)]
    # huggingface breaks exact ties between segmentations its own way (see gputok.training.unigram_tokenizer);
    # none occur in these lines, and nothing else may differ.
    scores = tok.model.scores
    differ = [(a, b) for a, b in zip(ours, theirs) if a != b]
    assert all(sum(scores[i] for i in a) == sum(scores[i] for i in b) for a, b in differ)
    assert len(differ) == 0
    reloaded = gputok.Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert reloaded.encode_batch(held) == theirs
    assert tok.decode(tok.encode("  The ﬁne  day,\tit was.")) == "The fine day, it was."
    assert tok.decode(tok.encode("naïve")) == "na ⁇ ve"  # ï is below character_coverage here: unk


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufdd0"), max_size=12),
                min_size=1, max_size=8))
def test_nmt_nfkc_normalizer_matches_the_trainer_and_huggingface(texts):
    from gputok.ingest import codepoints

    out, _ = nmt_nfkc_normalizer()(codepoints(texts, "cpu"))
    offsets, values = out.offsets.tolist(), out.values.tolist()
    got = ["".join(map(chr, values[offsets[i]:offsets[i + 1]])) for i in range(len(texts))]
    assert got == [nmt_nfkc(t.replace("\n", " ")) for t in texts]
    # huggingface's NFKC tables are an older Unicode than Python's: skip the characters they disagree on
    hf_texts = [t for t, g in zip(texts, got) if not _unicode_version_gaps().intersection(t)]
    assert [g for t, g in zip(texts, got) if t in hf_texts] == [_hf_normalizer().normalize_str(t) for t in hf_texts]


@functools.cache
def _unicode_version_gaps() -> frozenset[str]:
    """Characters whose NFKC huggingface and Python's ``unicodedata`` disagree on (newer Unicode only)."""
    gaps = frozenset(c for c in map(chr, range(0x110000)) if not "\ud800" <= c <= "\udfff"
                     and unicodedata.normalize("NFKC", c) != c and nmt_nfkc(c) != _hf_normalizer().normalize_str(c))
    # 72 with Python's Unicode 14 against tokenizers 0.23: U+32FF, Latin Extended-F, ... never common text
    assert len(gaps) < 200 and not any(c.isascii() or "\u00a0" <= c <= "\u2fff" for c in gaps)
    return gaps


_HF = []


def _hf_normalizer():
    if not _HF:
        import json

        spec = {"version": "1.0", "normalizer": nmt_nfkc_normalizer().to_json(),
                "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}
        _HF.append(tokenizers.Tokenizer.from_str(json.dumps(spec)).normalizer)
    return _HF[0]


def test_byte_fallback(corpus, tmp_path):
    train, _ = corpus
    tok = gputok.train(iter(train[:2000]), model="unigram", vocab_size=700, byte_fallback=True,
                       character_coverage=0.99, progress=False)
    assert tok.model.pieces[3:5] == ["<0x00>", "<0x01>"]
    text = ["snowman ☃ and 𝄞 clef", train[2001]]
    ids = tok.encode_batch(text)
    assert tok.model.pieces.index("<0xE2>") in ids[0]  # ☃ = E2 98 83 is no piece: its bytes are
    sp = _sp(tok, tmp_path / "b.model")
    assert sp.encode([nmt_nfkc(t) for t in text]) == ids
    assert tok.decode(ids[0]) == text[0]


def test_cli_writes_json_and_sentencepiece_model(corpus, tmp_path, capsys):
    train, held = corpus
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(train[:2500]) + "\n", encoding="utf-8")
    out, sp_out = tmp_path / "tok.json", tmp_path / "tok.model"
    assert cli.main(["train", str(path), "--model", "unigram", "--vocab-size", "600", "--max-piece-length", "8",
                     "--no-progress", "-o", str(out), "--sp-model", str(sp_out)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "tok.json", "tok.model"]  # no temporary files left
    err = capsys.readouterr().err
    assert "unique" in err and "e_step" in err and str(out) in err
    tok = gputok.Tokenizer.from_file(out)
    hf = tokenizers.Tokenizer.from_file(str(out))
    sp = spm.SentencePieceProcessor(model_file=str(sp_out))
    assert sp.get_piece_size() == 600 and max(len(p) for p in tok.model.pieces if not p.startswith("<")) <= 8
    ids = [e.ids for e in hf.encode_batch(held[:500], add_special_tokens=False)]
    assert tok.encode_batch(held[:500]) == ids == sp.encode([nmt_nfkc(t.replace("\n", " ")) for t in held[:500]])


def test_cli_errors(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b c\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="--sp-model writes a SentencePiece Unigram model"):
        cli.main(["train", str(path), "--vocab-size", "300", "-o", str(tmp_path / "o.json"),
                  "--sp-model", str(tmp_path / "o.model")])
    with pytest.raises(SystemExit, match="--vocab-txt/--vocab-json/--merges-txt are for WordPiece and BPE"):
        cli.main(["train", str(path), "--model", "unigram", "-o", str(tmp_path / "o.json"),
                  "--vocab-txt", str(tmp_path / "v.txt")])
    with pytest.raises(SystemExit, match="Unigram options; add --model unigram"):
        cli.main(["train", str(path), "--byte-fallback", "-o", str(tmp_path / "o.json")])
    with pytest.raises(SystemExit, match="vocab_size=5 is too small"):
        cli.main(["train", str(path), "--model", "unigram", "--vocab-size", "5", "--no-progress",
                  "-o", str(tmp_path / "o.json")])
    assert sorted(os.listdir(tmp_path)) == ["c.txt"]


def test_bad_input(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\t\n", encoding="utf-8")
    for source in (iter([]), iter(["", "   "]), str(empty)):
        with pytest.raises(ValueError, match="holds no words"):
            gputok.train(source, model="unigram", vocab_size=100, progress=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gputok.train(str(tmp_path / "missing.txt"), model="unigram", progress=False)
    with pytest.raises(ValueError, match=r"vocab_size=10 is too small: \d+ required characters"):
        gputok.train(iter(["the quick brown fox jumps over the lazy dog"] * 3), model="unigram", vocab_size=10,
                     progress=False)
    with pytest.raises(ValueError, match="unk_token '<unk>' is not among special_tokens"):
        gputok.train(iter(["a b"]), model="unigram", vocab_size=100, special_tokens=["<s>"], progress=False)
    with pytest.raises(ValueError, match="model='unigram' takes none"):
        gputok.train(iter(["a b"]), model="unigram", preset="char-bpe", progress=False)
    with pytest.raises(ValueError, match=r"\['min_frequency'\]: BPE/WordPiece options"):
        gputok.train(iter(["a b"]), model="unigram", min_frequency=5, progress=False)
    with pytest.raises(ValueError, match=r"\['byte_fallback'\]: Unigram options"):
        gputok.train(iter(["a b"]), model="bpe", byte_fallback=True, progress=False)
    # Invalid UTF-8 in a file becomes U+FFFD, which nmt_nfkc turns into a space.
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"ab\xffcd ab cd\n" * 20)
    tok = gputok.train(str(broken), model="unigram", vocab_size=10, progress=False)
    assert tok.encode("ab\ufffdcd") == tok.encode("ab cd")


def test_unigram_training_says_it_runs_on_the_cpu(monkeypatch):
    import torch

    from gputok import _dispatch

    monkeypatch.setattr(_dispatch, "checked_device", lambda device: torch.device(device))  # as if CUDA were here
    with pytest.raises(ValueError, match="Unigram training runs on the CPU only"):
        gputok.train(iter(["a b"]), model="unigram", vocab_size=100, device="cuda", progress=False)
