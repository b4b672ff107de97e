"""Unigram training on lines over SentencePiece's max_sentence_length (4192 UTF-8 bytes).

SentencePiece's trainer skips such lines (it logs "Found too long line"); gputok skips them too by
default, so its pieces stay SentencePiece's, but says so: a warning with the count, an error that
names them when nothing else is left, and ``max_sentence_length=None`` trains on every line.
"""

import pytest

import gputok
from gputok import assets
from gputok.training import train_with_summary

spm = pytest.importorskip("sentencepiece")

TOY = ["hug hugs pug pun bun hugs"] * 5
LONG = "zebra quux " * 500  # 5,500 bytes


def _sentencepiece_pieces(tmp_path, lines, vocab_size, **options):
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "sp"),
                                   model_type="unigram", vocab_size=vocab_size, num_threads=2, minloglevel=2,
                                   **options)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def test_long_lines_are_skipped_as_sentencepiece_skips_them_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match=r"1 line\(s\) longer than max_sentence_length=4192 UTF-8 bytes "
                                         r"\(the longest 5,500 bytes\) were not trained on"):
        tok, summary = train_with_summary(iter(TOY + [LONG]), model="unigram", vocab_size=13, progress=False)
    assert summary.skipped_long_lines == 1
    assert tok.model.pieces == _sentencepiece_pieces(tmp_path, TOY + [LONG], 13)


def test_a_corpus_of_only_long_lines_says_why_it_holds_no_words():
    with pytest.raises(ValueError, match=r"holds no words: its 2 line\(s\) longer than max_sentence_length=4192 "
                                         r"UTF-8 bytes .* are skipped.*max_sentence_length=None"):
        gputok.train(iter([LONG, LONG + "x"]), model="unigram", vocab_size=13, progress=False)


def test_max_sentence_length_none_trains_on_a_long_line(tmp_path):
    with assets.english_corpus(20).open(encoding="utf-8") as f:
        line = f.read(100_000).replace("\n", " ")
    tok, summary = train_with_summary(iter([line]), model="unigram", vocab_size=300, progress=False,
                                      max_sentence_length=None)
    assert summary.skipped_long_lines == 0 and summary.words > 10_000
    theirs = _sentencepiece_pieces(tmp_path, [line], 300, max_sentence_length=200_000)
    assert len(set(tok.model.pieces) & set(theirs)) >= 0.9 * 300
    assert tok.decode(tok.encode(line[:500])) == " ".join(line[:500].split())


def test_max_sentence_length_is_checked():
    with pytest.raises(ValueError, match=r"max_sentence_length=0; pass a positive number"):
        gputok.train(iter(TOY), model="unigram", vocab_size=13, progress=False, max_sentence_length=0)
    with pytest.raises(ValueError, match=r"\['max_sentence_length'\]: Unigram options"):
        gputok.train(iter(TOY), model="bpe", vocab_size=300, progress=False, max_sentence_length=None)
