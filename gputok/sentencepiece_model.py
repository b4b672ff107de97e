"""Read and write SentencePiece ``.model`` files without the protobuf package.

A ``.model`` file is one serialized ``ModelProto`` message (sentencepiece_model.proto):
its pieces (text, score, type), the trainer spec (model type, byte_fallback, special ids...) and
the normalizer spec (rule name, precompiled charsmap, whitespace flags). Protobuf's wire format is
a list of (field number, wire type, value) records; this module decodes the fields gputok uses
into a :class:`SentencePieceModel` and keeps every other field as raw records, so a model read and
written back keeps the settings gputok does not interpret.

>>> m = SentencePieceModel(pieces=[Piece("<unk>", 0.0, UNKNOWN), Piece("▁a", -1.5)], model_type=BPE)
>>> back = parse_model(serialize_model(m))
>>> [(p.piece, p.score, p.type) for p in back.pieces], back.model_type, back.normalizer.add_dummy_prefix
([('<unk>', 0.0, 2), ('▁a', -1.5, 1)], 2, True)
"""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

from ._validate import FileFormatError, check_sentencepiece_pieces
from .charsmap import check_charsmap

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
MODEL_TYPE_NAMES = {UNIGRAM: "unigram", BPE: "bpe", WORD: "word", CHAR: "char"}

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


@dataclasses.dataclass
class Piece:
    piece: str
    score: float = 0.0
    type: int = NORMAL


@dataclasses.dataclass
class NormalizerSpec:
    """How SentencePiece normalizes: ``name`` (nmt_nfkc, nfkc, identity, ...), the compiled rules
    (``precompiled_charsmap``), and the whitespace rules."""

    name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    other: list[tuple[int, int, object]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SentencePieceModel:
    pieces: list[Piece]
    model_type: int = UNIGRAM
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_surface: str = " \u2047 "
    treat_whitespace_as_suffix: bool = False
    normalizer: NormalizerSpec = dataclasses.field(default_factory=NormalizerSpec)
    denormalizer: NormalizerSpec | None = None
    trainer_other: list[tuple[int, int, object]] = dataclasses.field(default_factory=list)
    other: list[tuple[int, int, object]] = dataclasses.field(default_factory=list)


# (field number, attribute, kind) of the fields decoded; everything else stays raw.
_TRAINER_FIELDS = {3: ("model_type", "int"), 35: ("byte_fallback", "bool"), 40: ("unk_id", "int"),
                   41: ("bos_id", "int"), 42: ("eos_id", "int"), 43: ("pad_id", "int"),
                   44: ("unk_surface", "str"), 24: ("treat_whitespace_as_suffix", "bool")}
_NORMALIZER_FIELDS = {1: ("name", "str"), 2: ("precompiled_charsmap", "bytes"), 3: ("add_dummy_prefix", "bool"),
                      4: ("remove_extra_whitespaces", "bool"), 5: ("escape_whitespaces", "bool")}


def read_model(path: str | os.PathLike) -> SentencePieceModel:
    """Read a SentencePiece ``.model`` file; a damaged file, or one SentencePiece would refuse
    (:func:`gputok._validate.check_sentencepiece_pieces`), raises ValueError naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read SentencePiece model {path}: {e}") from e
    try:
        model = parse_model(data)
    except ValueError as e:
        raise FileFormatError(f"{path} is not a valid SentencePiece model: {e}") from e
    check_sentencepiece_pieces(model.pieces, model.byte_fallback, str(path), model_type=model.model_type)
    for name, spec in (("normalizer_spec", model.normalizer), ("denormalizer_spec", model.denormalizer)):
        try:
            check_charsmap(spec.precompiled_charsmap if spec is not None else b"", sentencepiece=True)
        except ValueError as e:
            raise FileFormatError(f"{path}: {name}.{e}; SentencePiece refuses this model too: download it "
                                  "again if it is damaged") from e
    return model


def write_model(model: SentencePieceModel, path: str | os.PathLike) -> None:
    """Write ``model`` as a ``.model`` file (atomically: :func:`gputok._atomic.write_atomic`)."""
    from ._atomic import write_atomic

    write_atomic({path: serialize_model(model)})


def parse_model(data: bytes) -> SentencePieceModel:
    pieces, trainer, normalizer, denormalizer, other = [], [], None, None, []
    for field, wire, value in _records(data):
        if field == 1 and wire == _BYTES:
            pieces.append(_parse_piece(value))
        elif field == 2 and wire == _BYTES:
            trainer = _records(value)
        elif field == 3 and wire == _BYTES:
            normalizer = _parse_normalizer(value)
        elif field == 5 and wire == _BYTES:
            denormalizer = _parse_normalizer(value)
        else:
            other.append((field, wire, value))
    if not pieces:
        raise ValueError("it has no pieces")
    model = SentencePieceModel(pieces=pieces, normalizer=normalizer or NormalizerSpec(),
                               denormalizer=denormalizer, other=other)
    for field, wire, value in trainer:
        if field in _TRAINER_FIELDS:
            name, kind = _TRAINER_FIELDS[field]
            setattr(model, name, _decode(value, wire, kind))
        else:
            model.trainer_other.append((field, wire, value))
    if model.model_type not in MODEL_TYPE_NAMES:
        raise ValueError(f"unknown model_type {model.model_type}")
    return model


def serialize_model(model: SentencePieceModel) -> bytes:
    out = bytearray()
    for p in model.pieces:
        body = (_field_bytes(1, p.piece.encode("utf-8", errors="surrogateescape")) + _tag(2, _FIXED32)
                + struct.pack("<f", p.score))
        if p.type != NORMAL:
            body += _tag(3, _VARINT) + _varint(p.type)
        out += _field_bytes(1, body)
    trainer = bytearray()
    for field, (name, kind) in _TRAINER_FIELDS.items():
        trainer += _encode(field, getattr(model, name), kind)
    for record in model.trainer_other:
        trainer += _encode_raw(*record)
    out += _field_bytes(2, bytes(trainer))
    out += _field_bytes(3, _serialize_normalizer(model.normalizer))
    if model.denormalizer is not None:
        out += _field_bytes(5, _serialize_normalizer(model.denormalizer))
    for record in model.other:
        out += _encode_raw(*record)
    return bytes(out)


def _parse_piece(data: bytes) -> Piece:
    piece = Piece("")
    for field, wire, value in _records(data):
        if field == 1:
            piece.piece = _decode(value, wire, "str")
        elif field == 2:
            piece.score = _decode(value, wire, "float")
        elif field == 3:
            value = _decode(value, wire, "int")
            if NORMAL <= value <= BYTE:  # protobuf leaves an enum value it does not know unset: NORMAL
                piece.type = value
    return piece


def _parse_normalizer(data: bytes) -> NormalizerSpec:
    spec = NormalizerSpec()
    for field, wire, value in _records(data):
        if field in _NORMALIZER_FIELDS:
            name, kind = _NORMALIZER_FIELDS[field]
            setattr(spec, name, _decode(value, wire, kind))
        else:
            spec.other.append((field, wire, value))
    return spec


def _serialize_normalizer(spec: NormalizerSpec) -> bytes:
    out = bytearray()
    for field, (name, kind) in _NORMALIZER_FIELDS.items():
        out += _encode(field, getattr(spec, name), kind)
    for record in spec.other:
        out += _encode_raw(*record)
    return bytes(out)


_MAX_FIELD = (1 << 29) - 1  # protobuf's parser (SentencePiece's) refuses a larger field number


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _records(data: bytes) -> list[tuple[int, int, object]]:
    """The (field, wire type, value) records of one message: ints for varints, bytes otherwise."""
    records, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if field > _MAX_FIELD:
            raise ValueError(f"field number {field} is above protobuf's largest, 2**29 - 1")
        if wire == _VARINT:
            value, i = _read_varint(data, i)
        elif wire in (_FIXED64, _FIXED32, _BYTES):
            if wire == _BYTES:
                size, i = _read_varint(data, i)
            else:
                size = 8 if wire == _FIXED64 else 4
            if i + size > len(data):
                raise ValueError("truncated field")
            value, i = bytes(data[i:i + size]), i + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        records.append((field, wire, value))
    return records


def _decode(value: object, wire: int, kind: str):
    if kind == "str":
        if wire != _BYTES:
            raise ValueError("a string field has the wrong wire type")
        # bytes that are no UTF-8 (sentencepiece reads them as bytes no text holds) as lone
        # surrogates, which no text holds either and which write back as the same bytes
        return value.decode("utf-8", errors="surrogateescape")
    if kind == "bytes":
        return value
    if kind == "float":
        if wire != _FIXED32:
            raise ValueError("a float field has the wrong wire type")
        return struct.unpack("<f", value)[0]
    if wire != _VARINT:
        raise ValueError("an integer field has the wrong wire type")
    if kind == "bool":
        return bool(value)
    return value - (1 << 64) if value >= 1 << 63 else value  # int32/int64 negatives are 10-byte varints


def _encode(field: int, value, kind: str) -> bytes:
    if kind == "str":
        return _field_bytes(field, value.encode("utf-8", errors="surrogateescape"))
    if kind == "bytes":
        return _field_bytes(field, value)
    return _tag(field, _VARINT) + _varint(int(value))


def _encode_raw(field: int, wire: int, value) -> bytes:
    if wire == _VARINT:
        return _tag(field, wire) + _varint(value)
    if wire == _BYTES:
        return _field_bytes(field, value)
    return _tag(field, wire) + value


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(field: int, payload: bytes) -> bytes:
    return _tag(field, _BYTES) + _varint(len(payload)) + payload
