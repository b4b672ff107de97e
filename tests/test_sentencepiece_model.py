"""The .model reader/writer against the sentencepiece library on the real models of ASSETS.md."""

import pytest

from gputok import assets
from gputok.sentencepiece_model import BPE, BYTE, UNIGRAM, read_model, serialize_model, write_model

spm = pytest.importorskip("sentencepiece")

TEXT = "Hello wörld  你好,\tthe kernel's  docs 123 ☃"


@pytest.mark.parametrize("name, model_type, byte_fallback", [("mistral-sp-model", BPE, True),
                                                            ("sp-test-model", UNIGRAM, False)])
def test_read_matches_library(name, model_type, byte_fallback, tmp_path):
    path = assets.fetch(name)
    model = read_model(path)
    reference = spm.SentencePieceProcessor(model_file=str(path))
    assert model.model_type == model_type and model.byte_fallback == byte_fallback
    assert [p.piece for p in model.pieces] == [reference.id_to_piece(i) for i in range(reference.get_piece_size())]
    assert [p.score for p in model.pieces] == pytest.approx([reference.get_score(i) for i in range(reference.get_piece_size())])
    assert [i for i, p in enumerate(model.pieces) if p.type == BYTE] == \
        [i for i in range(reference.get_piece_size()) if reference.is_byte(i)]
    assert (model.unk_id, model.bos_id, model.eos_id) == (reference.unk_id(), reference.bos_id(), reference.eos_id())
    # Written back, the library loads it and encodes the same.
    write_model(model, tmp_path / "copy.model")
    copy = spm.SentencePieceProcessor(model_file=str(tmp_path / "copy.model"))
    assert copy.encode(TEXT) == reference.encode(TEXT)
    assert read_model(tmp_path / "copy.model") == model


def test_damaged_files_raise(tmp_path):
    data = serialize_model(read_model(assets.fetch("sp-test-model")))
    (tmp_path / "cut.model").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.model"):
        read_model(tmp_path / "cut.model")
    (tmp_path / "text.model").write_bytes(b"this is not a protobuf")
    with pytest.raises(ValueError, match="text.model"):
        read_model(tmp_path / "text.model")
    with pytest.raises(ValueError, match="missing.model"):
        read_model(tmp_path / "missing.model")


@pytest.mark.parametrize("piece_type", [0, 7, 99])
def test_a_piece_type_protobuf_does_not_know_reads_as_normal(piece_type, tmp_path):
    """protobuf leaves an enum value it does not know unset, so sentencepiece reads the piece as
    NORMAL (found by benchmarks/fuzz.py: gputok dropped it and gave <unk> for its character)."""
    from gputok import Tokenizer

    model = read_model(assets.fetch("sp-test-model"))
    index = next(i for i, p in enumerate(model.pieces) if p.piece == "S")
    model.pieces[index].type = piece_type
    write_model(model, tmp_path / "odd-type.model")
    reference = spm.SentencePieceProcessor(model_file=str(tmp_path / "odd-type.model"))
    ours = Tokenizer.from_sentencepiece(tmp_path / "odd-type.model")
    assert index in reference.encode("[CLS] Start")
    assert ours.encode("[CLS] Start") == reference.encode("[CLS] Start")


def test_a_piece_that_is_no_utf8_matches_no_text(tmp_path):
    """sentencepiece keeps a piece's bytes as they are, and bytes that are no UTF-8 match no text
    (found by benchmarks/fuzz.py: gputok read the byte 0xDB as U+FFFD, which the text held). The
    piece reads as a lone surrogate, no text's character, and writes back as the same bytes."""
    from gputok import Tokenizer

    path = assets.fetch("sp-test-model")
    data = serialize_model(read_model(path))
    model = read_model(path)
    index = next(i for i, p in enumerate(model.pieces) if p.piece == "I")
    model.pieces[index].piece = "\udcdb"  # the byte 0xDB, as the reader gives it
    write_model(model, tmp_path / "no-utf8.model")
    written = (tmp_path / "no-utf8.model").read_bytes()
    assert written != data and written.replace(b"\n\x01\xdb", b"\n\x01I") == data  # the piece field: 1 byte, 0xDB
    assert read_model(tmp_path / "no-utf8.model").pieces[index].piece == "\udcdb"
    reference = spm.SentencePieceProcessor(model_file=str(tmp_path / "no-utf8.model"))
    texts = ["\x00\ufffd\x7f", "I \ufffd\ufffd Û", "Hello"]
    assert Tokenizer.from_sentencepiece(tmp_path / "no-utf8.model").encode_batch(texts) == reference.encode(texts)
