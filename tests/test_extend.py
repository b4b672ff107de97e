"""Domain vocabulary (issue 20): gputok.extend, the savings kernels, extend_embeddings, phrases, fertility.

The extended tokenizers are built from a slice of the Gene Ontology definitions (the domain corpus
of the acceptance experiment, ``benchmarks/domain_extend.py``) with a smaller K, so the tests stay
fast; parity is checked against huggingface ``tokenizers`` on the parity corpus.
"""

import json
import os
from itertools import islice

import numpy as np
import pytest
import torch

import gputok
from gputok import assets
from gputok.embeddings import extend_embeddings
from gputok.extending import _extended_wordpiece, extend_with_report
from gputok.fertility import fertility, plot, table
from gputok.phrases import with_phrases

GO_LINES = 5000


@pytest.fixture(scope="module")
def go_train(tmp_path_factory):
    with open(assets.corpus("go-terms"), encoding="utf-8") as f:
        lines = list(islice(f, GO_LINES))
    path = tmp_path_factory.mktemp("go") / "go-train.txt"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def extended(bert, go_train):
    return {method: extend_with_report(bert, [go_train], add=1500, method=method, select="frequency")
            for method in ("vocab", "added-tokens")}


def _hf(tok, tmp_path, name):
    from tokenizers import Tokenizer as HFTokenizer

    path = tmp_path / name
    tok.save(path)
    hf = HFTokenizer.from_file(str(path))
    hf.no_padding()
    hf.no_truncation()
    return hf


def test_every_base_token_keeps_its_id(bert, extended):
    for method, (tok, report) in extended.items():
        assert report.base_size == bert.vocab_size == 30522
        assert [tok.id_to_token(i) for i in range(bert.vocab_size)] == [bert.id_to_token(i) for i in range(bert.vocab_size)]
        new = [tok.id_to_token(i) for i in range(bert.vocab_size, tok.vocab_size)]
        assert len(new) == report.added == 1500 and len(set(new)) == 1500
        assert not set(new) & set(bert.model.vocab), method
        assert [p["token"] for p in report.pieces] == new


def test_vocab_extension_parity_with_huggingface(extended, parity_lines, tmp_path):
    """Every 4th line of the parity corpus (all of it under GPUTOK_FULL=1: ~70 s here)."""
    tok, _ = extended["vocab"]
    hf = _hf(tok, tmp_path, "vocab.json")
    lines = parity_lines if os.environ.get("GPUTOK_FULL") else parity_lines[::4]
    ours = tok.encode_batch(lines)
    theirs = [e.ids for e in hf.encode_batch(lines)]
    assert sum(a != b for a, b in zip(ours, theirs)) == 0
    assert any(i >= 30522 for row in ours for i in row)  # the new pieces are used


def test_added_tokens_parity_with_huggingface(extended, parity_lines, tmp_path):
    tok, _ = extended["added-tokens"]
    hf = _hf(tok, tmp_path, "added.json")
    lines = parity_lines[::200]  # gputok matches added tokens with a Python regex: slow with many tokens
    ours = tok.encode_batch(lines)
    assert ours == [e.ids for e in hf.encode_batch(lines)]


def test_vocab_shortens_domain_words_and_added_tokens_fragment(bert, extended):
    vocab, _ = extended["vocab"]
    added, _ = extended["added-tokens"]
    text = "The regulation of mitochondrial transmembrane transport in response to stimulus."
    pieces = lambda tok: [tok.id_to_token(i) for i in tok.encode(text, add_special_tokens=False)]  # noqa: E731
    assert len(pieces(vocab)) < len(pieces(bert))
    assert "mitochondrial" in pieces(bert) and "mitochondrial" not in pieces(added)  # broken apart
    general = "This method returns the number of bytes written to the buffer in response to a process."
    assert len(vocab.encode(general)) <= len(bert.encode(general))
    # the issue's report: pieces added as added tokens are matched inside ordinary words
    issue = _extended_wordpiece(bert, ["meth", "proc"], "added-tokens")
    assert [issue.id_to_token(i) for i in issue.encode("method process", add_special_tokens=False)] == [
        "meth", "o", "##d", "proc", "es", "##s"]
    same = _extended_wordpiece(bert, ["meth", "proc"], "vocab")
    assert same.encode("method process") == bert.encode("method process")


def test_vocab_txt_written_for_wordpiece(extended, tmp_path):
    from gputok.training import output_files

    tok, _ = extended["vocab"]
    files = output_files(tok, tokenizer_json_path=tmp_path / "t.json", vocab_txt=tmp_path / "vocab.txt")
    lines = files[tmp_path / "vocab.txt"].splitlines()
    assert len(lines) == tok.vocab_size and lines[30522] == tok.id_to_token(30522)
    again = gputok.Tokenizer.from_vocab(_write(tmp_path / "vocab.txt", files[tmp_path / "vocab.txt"]))
    assert again.encode_batch(["Mitochondrial transmembrane transport"]) == tok.encode_batch(["Mitochondrial transmembrane transport"])


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_savings_selection_recount_matches_the_model(bert, go_train):
    """The greedy's own tally (base tokens less what each chosen piece saved) is what the extended
    WordPiece model gives on the corpus's words: the kernels' recount is exact."""
    tok, report = extend_with_report(bert, [go_train], add=400, select="savings")
    saved = [p["saved"] for p in report.pieces]
    assert report.added == 400 and all(s > 0 for s in saved)
    assert report.domain_tokens_base - sum(saved) == report.domain_tokens_extended
    assert saved[0] >= max(saved[1:])  # the first choice saves most


def test_match_lists_and_counts_against_wordpiece():
    from gputok.kernels import extend_savings_numba as K
    from gputok.models.wordpiece import WordPiece

    vocab = {"[UNK]": 0, "un": 1, "u": 2, "##n": 3, "##a": 4, "##ab": 5, "##b": 6, "a": 7, "##le": 8, "##l": 9}
    model = WordPiece(vocab)
    words = ["unable", "un", "ab", "unab", "zz", "a"]
    text = gputok.ingest.codepoints(words)
    codes, offsets = text.values.numpy().astype(np.int32), text.offsets.numpy()
    where, ends, pieces = K.match_lists(codes, offsets, max_chars=100, **model._numba_tables)
    counts = K.greedy_counts(np.arange(len(words)), offsets, where, ends, pieces, np.ones(10, dtype=np.bool_), -1, 100)
    ids, _ = model.encode_words(gputok.ragged.Ragged(text.values.int(), text.offsets))
    assert counts.tolist() == np.diff(ids.offsets.numpy()).tolist()
    without_ab = np.ones(10, dtype=np.bool_)
    without_ab[5] = False
    smaller = WordPiece({t: i for t, i in vocab.items() if t != "##ab"})
    expected = np.diff(smaller.encode_words(gputok.ragged.Ragged(text.values.int(), text.offsets))[0].offsets.numpy())
    everyone = np.arange(len(words))
    assert K.greedy_counts(everyone, offsets, where, ends, pieces, without_ab, -1, 100).tolist() == expected.tolist()
    assert K.greedy_counts(everyone, offsets, where, ends, pieces, without_ab, 5, 100).tolist() == counts.tolist()
    assert expected.tolist()[3] == 3 and counts.tolist()[3] == 2  # un ##a ##b, then un ##ab


def test_bpe_base_continued_training(parity_lines, go_train, tmp_path):
    base = gputok.train(iter(parity_lines[:20000]), model="bpe", vocab_size=1500, progress=False)
    tok, report = extend_with_report(base, [go_train], add=300)
    assert report.added == 300 and tok.vocab_size == base.vocab_size + 300
    spec, base_spec = tok.to_json()["model"], base.to_json()["model"]
    assert spec["merges"][:len(base_spec["merges"])] == base_spec["merges"]
    assert all(spec["vocab"][t] == i for t, i in base_spec["vocab"].items())
    assert report.domain_tokens_extended < report.domain_tokens_base
    lines = parity_lines[::20]
    assert tok.encode_batch(lines) == [e.ids for e in _hf(tok, tmp_path, "bpe.json").encode_batch(lines)]
    added, _ = extend_with_report(base, [go_train], add=300, method="added-tokens")
    assert added.encode_batch(lines[:500]) == [e.ids for e in _hf(added, tmp_path, "bpe-added.json").encode_batch(lines[:500])]
    weight = torch.randn(base.vocab_size, 8)
    out = extend_embeddings(base, tok, weight)
    assert out.weight.shape == (tok.vocab_size, 8) and torch.equal(out.weight[:base.vocab_size], weight)
    # the first new merge joins two base tokens: its row is their mean
    left, right = spec["merges"][len(base_spec["merges"])]
    first_new = spec["vocab"][left + right]
    assert first_new >= base.vocab_size
    torch.testing.assert_close(out.weight[first_new], weight[[spec["vocab"][left], spec["vocab"][right]]].mean(0))


def test_extend_embeddings_bert_size(bert, extended):
    tok, report = extended["vocab"]
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(30522, 768, generator=generator)
    out = extend_embeddings(bert, tok, weight)
    assert out.weight.shape == (30522 + 1500, 768) and out.parameters_added == 1500 * 768
    assert torch.equal(out.weight[:30522], weight)
    for k in (0, 1, 700, 1499):
        token = tok.id_to_token(30522 + k)
        if token.startswith("##"):
            continue_model = gputok.embeddings._continuation_model(bert.model)
            text = gputok.ingest.codepoints([token[2:]])
            pieces = continue_model.encode_words(gputok.ragged.Ragged(text.values.int(), text.offsets))[0].values.tolist()
        else:
            pieces = bert.encode(token, add_special_tokens=False)
        assert len(pieces) >= 2, token
        torch.testing.assert_close(out.weight[30522 + k], weight[pieces].mean(0))
    sampled = extend_embeddings(bert, tok, weight, method="mean-resizing", generator=generator)
    assert torch.equal(sampled.weight[:30522], weight)
    new_rows = sampled.weight[30522:]
    torch.testing.assert_close(new_rows.mean(0), weight.mean(0), atol=1e-3, rtol=0)
    assert float((new_rows - weight.mean(0)).abs().max()) < 1e-2  # 1e-9 x covariance: close to the mean
    assert not torch.equal(new_rows[0], new_rows[1])  # sampled, not copied


def test_extend_embeddings_refuses_a_tokenizer_that_moved_ids(bert, extended):
    tok, _ = extended["vocab"]
    with pytest.raises(ValueError, match="keep every old id"):
        extend_embeddings(tok, bert, torch.zeros(tok.vocab_size, 4))
    with pytest.raises(ValueError, match="choose one of"):
        extend_embeddings(bert, tok, torch.zeros(30522, 4), method="random")


@pytest.mark.parametrize("bad, match", [({"method": "merge"}, "method='merge'"), ({"select": "best"}, "select='best'"),
                                        ({"add": 0}, "add=0")])
def test_bad_options(bert, bad, match):
    with pytest.raises(ValueError, match=match):
        gputok.extend(bert, iter(["a b"]), **bad)


def test_phrases_kept_whole_english_and_chinese(bert, tmp_path):
    phrases = ["tumor necrosis factor", "人工智能"]
    tok = with_phrases(bert, phrases)
    tnf, ai = (tok.token_to_id(p) for p in phrases)
    assert (tnf, ai) == (30522, 30523)
    rows = tok.encode_batch(["Tumor necrosis factor alpha", "the tumor  necrosis factor.", "发展人工智能技术",
                             "tumor necrosis"], add_special_tokens=False)
    assert rows[0][0] == tnf and len(rows[0]) == 2
    assert rows[1][1] == tnf and rows[1][-1] == bert.token_to_id(".")
    assert ai in rows[2] and len(rows[2]) == 5  # 发 展 人工智能 技 术
    assert tnf not in rows[3]
    assert tok.decode(rows[0]) == "tumor necrosis factor alpha"
    # saved: the phrases are added tokens, found as written, in huggingface and in gputok alike
    hf = _hf(tok, tmp_path, "phrases.json")
    again = gputok.Tokenizer.from_file(tmp_path / "phrases.json")
    texts = ["tumor necrosis factor alpha", "发展人工智能技术", "Tumor necrosis factor"]
    assert again.encode_batch(texts) == [e.ids for e in hf.encode_batch(texts)]
    assert tnf in again.encode(texts[0]) and ai in again.encode(texts[1])


def test_phrases_in_training_and_extension():
    texts = ["tumor necrosis factor signalling", "人工智能 and 机器学习", "the tumor grows"] * 20
    tok = gputok.phrases.train(iter(texts), ["tumor necrosis factor", "人工智能"], model="wordpiece", vocab_size=120,
                               progress=False)
    assert [tok.id_to_token(i) for i in tok.encode("Tumor necrosis factor 人工智能", add_special_tokens=False)] == [
        "tumor necrosis factor", "人工智能"]
    base = gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    base.no_padding()  # the file pads encode's rows to 128
    domain = ["tumor necrosis factor binds mitochondrial receptors", "mitochondrial tumor"] * 10
    ext, report = extend_with_report(base, iter(domain), add=50, phrases=["tumor necrosis factor"])
    assert ext.vocab_size == base.vocab_size + report.added + 1
    assert ext.encode("tumor necrosis factor", add_special_tokens=False) == [ext.vocab_size - 1]
    assert [p["token"] for p in report.pieces] == ["necrosis"]  # "mitochondrial" and "tumor" are BERT's


def test_fertility_report_and_figure(bert, tmp_path):
    tok = _extended_wordpiece(bert, ["meth", "proc", "ber"], "added-tokens")
    general = tmp_path / "general.txt"
    general.write_text("This method returns the number of bytes.\nA study of the process.\n", encoding="utf-8")
    report = fertility([bert, tok], [general], names=["bert", "added"])
    stats = report["files"][str(general)]["stats"]
    assert stats["bert"]["lines"] == 2 and stats["bert"]["words"] == 12
    assert stats["added"]["tokens_per_line"] > stats["bert"]["tokens_per_line"]
    changed = report["files"][str(general)]["changed_words"]["added"]
    assert changed and changed[0]["change"] > 0 and changed[0]["after"] != changed[0]["before"]
    lengths = [len(bert.encode(line, add_special_tokens=False)) for line in general.read_text().splitlines()]
    assert stats["bert"]["tokens"] == sum(lengths)
    assert "| general.txt | added |" in table(report)
    plot(report, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_extend_and_fertility(bert_json_path, go_train, tmp_path, capsys):
    from gputok.cli import main

    out = tmp_path / "ext.json"
    assert main(["extend", "--base", str(bert_json_path), "--corpus", str(go_train), "--add", "200", "-o", str(out),
                 "--vocab-txt", str(tmp_path / "vocab.txt"), "--report", str(tmp_path / "report.json")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["added"] == 200 and len(report["pieces"]) == 200
    assert len((tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 30522 + 200
    assert main(["fertility", "--tokenizer", str(bert_json_path), "--tokenizer", str(out), str(go_train),
                 "--json", str(tmp_path / "f.json"), "--png", str(tmp_path / "f.png")]) == 0
    printed = capsys.readouterr().out
    assert "tokens/word" in printed and (tmp_path / "f.png").exists()
    assert json.loads((tmp_path / "f.json").read_text())["tokenizers"] == [str(bert_json_path), str(out)]
