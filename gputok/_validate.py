"""Up-front checks of what the loaders read: every field's type, ids, option values.

A loader calls these before it builds anything, so a bad file fails at load with a
:class:`FileFormatError` naming the file (or ``<string>``), the field as a JSON path
(``model.vocab["ab"]``), the bad value and the fix, instead of loading and then failing or
encoding wrong. The rules are those of the format's reference library (checked against the
installed huggingface ``tokenizers`` 0.23, ``tiktoken`` 0.14): ids are JSON integers (not
booleans or floats) in ``0 .. 2**32 - 1``; option flags are JSON booleans; counts are integers.

Memory at load follows the file, never a number written in it: gputok keeps ids dense (tables
indexed by id), so an id far past the token count (:func:`check_id_space`) is an error before
anything is allocated. huggingface and tiktoken keep sparse ids in hash maps; gputok accepts gaps
up to ``2 * tokens + ID_SLACK`` (cl100k leaves 21 ids unused, added tokens sit past the vocabulary),
which every real file is within.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

U32 = 1 << 32  # huggingface reads ids as u32, tiktoken ranks as u32
ID_SLACK = 1 << 16


class FileFormatError(ValueError):
    """A tokenizer file that is not valid: the message names the file, the field and the fix."""


def fail(source: str, field: str, value: Any, problem: str, fix: str) -> FileFormatError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return FileFormatError(f"{source}: {field} = {shown}: {problem}; {fix}")


def key_path(parent: str, key: str | int) -> str:
    """``model.vocab["ab"]``, ``added_tokens[3]``."""
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


# ---- JSON ------------------------------------------------------------------------------------

def load_json(text: str, source: str) -> Any:
    """``json.loads`` as huggingface's reader (serde_json) takes it: bad syntax, ``NaN`` /
    ``Infinity`` (not JSON; Python's reader takes them) and nesting past :data:`MAX_DEPTH` are
    errors naming the file."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise FileFormatError(f"{source} is not valid JSON: {e}") from e
    except _NotJson as e:
        raise FileFormatError(f"{source} is not valid JSON: {e} is not a JSON number (huggingface refuses it); "
                              "write a number or null") from None
    except RecursionError:  # deeper than Python's reader goes: far past MAX_DEPTH
        raise _nested_too_deep(source) from None
    if _too_deep(value):
        raise _nested_too_deep(source)
    return value


def _nested_too_deep(source: str) -> FileFormatError:
    return FileFormatError(f"{source}: JSON nested too deeply, {MAX_DEPTH} or more levels (huggingface stops there); "
                           "a tokenizer.json nests a few levels: the file is damaged")


# serde_json's recursion limit: an array or object at depth MAX_DEPTH (the outermost at 1) is an error.
MAX_DEPTH = 128


class _NotJson(ValueError):
    pass


def _no_constant(name: str):
    raise _NotJson(name)


def _too_deep(value: Any) -> bool:
    """Whether a container sits MAX_DEPTH levels down (the top-level value at level 1). Walks
    containers only: a vocabulary's numbers and a merge list's strings are skipped by type."""
    level, frontier = 1, [value] if isinstance(value, (dict, list)) else []
    while frontier:
        if level >= MAX_DEPTH:
            return True
        children = []
        for node in frontier:
            items = node.values() if isinstance(node, dict) else node
            children += [v for v in items if isinstance(v, (dict, list))]
        frontier, level = children, level + 1
    return False


# ---- kinds of values: (name for the message, test) -------------------------------------------

Kind = tuple[str, Callable[[Any], bool]]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


BOOL: Kind = ("a JSON boolean (true or false)", lambda v: isinstance(v, bool))
STR: Kind = ("a string", lambda v: isinstance(v, str))
COUNT: Kind = ("an integer >= 0", lambda v: _is_int(v) and v >= 0)
INT: Kind = ("an integer", _is_int)
NUMBER: Kind = ("a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
ID: Kind = (f"an integer id in 0 .. {U32 - 1}", lambda v: _is_int(v) and 0 <= v < U32)
LIST: Kind = ("a JSON list", lambda v: isinstance(v, list))
OBJECT: Kind = ("a JSON object", lambda v: isinstance(v, dict))


def optional(kind: Kind) -> Kind:
    return (f"null or {kind[0]}", lambda v: v is None or kind[1](v))


def one_of(*values: Any) -> Kind:
    return (f"one of {list(values)}", lambda v: isinstance(v, str) and v in values)


def check(value: Any, kind: Kind, source: str, field: str, example: str | None = None) -> Any:
    if not kind[1](value):
        raise fail(source, field, value, f"expected {kind[0]}", f"write {example or kind[0]} there")
    return value


def check_fields(spec: dict[str, Any], kinds: dict[str, Kind], source: str, path: str,
                 required: tuple[str, ...] = ()) -> None:
    """Each field of ``spec`` named in ``kinds`` that is present has its kind, and each named in
    ``required`` is present (the others, absent, take their defaults)."""
    for name, kind in kinds.items():
        if name in spec:
            check(spec[name], kind, source, f"{path}.{name}")
    for name in required:
        if name not in spec:
            what = f"a {spec['type']}" if isinstance(spec.get("type"), str) else path
            raise fail(source, path, spec, f"{what} needs the field {name!r} (huggingface refuses it without)",
                       f"add \"{name}\"")


# ---- ids -------------------------------------------------------------------------------------

def id_limit(tokens: int) -> int:
    """The largest id + 1 that gputok's dense tables accept for a file of ``tokens`` tokens."""
    return 2 * tokens + ID_SLACK


def check_id_space(largest: int, tokens: int, source: str, field: str) -> None:
    """Raise before allocating if ``largest`` (an id in ``field``) is far past the token count."""
    if largest >= id_limit(tokens):
        raise fail(source, field, largest,
                   f"this id is far past the {tokens} tokens of the file (gputok keeps ids dense, so it "
                   f"accepts ids below 2 x tokens + {ID_SLACK} = {id_limit(tokens)})",
                   "renumber the tokens 0 .. n-1 (huggingface and tiktoken keep such ids; gputok would "
                   "need memory for every id up to it)")


def check_vocab(vocab: Any, source: str, field: str) -> dict[str, int]:
    """A ``{token: id}`` object: string keys, ids of kind :data:`ID`, within the id space."""
    check(vocab, OBJECT, source, field, example='the vocabulary as {"token": id, ...}')
    owner: dict[int, str] = {}
    for token, i in vocab.items():
        check(i, ID, source, key_path(field, token))
        if owner.setdefault(i, token) != token:
            # huggingface maps both tokens to the id and decodes it as either (hash-map order);
            # gputok keeps one token per id, so one of the two would be lost from the vocabulary.
            raise fail(source, key_path(field, token), i, f"{key_path(field, owner[i])} has this id too",
                       "give each token its own id (and remove an empty token \"\": no text splits into it)")
    if vocab:
        token, largest = max(vocab.items(), key=lambda kv: kv[1])
        check_id_space(largest, len(vocab), source, key_path(field, token))
    return vocab


# ---- huggingface tokenizer.json --------------------------------------------------------------

_METASPACE = {"replacement": STR, "str_rep": STR, "prepend_scheme": one_of("always", "first", "never"),
              "split": BOOL, "add_prefix_space": BOOL}
_BYTE_LEVEL = {"add_prefix_space": BOOL, "trim_offsets": BOOL, "use_regex": BOOL}
_BEHAVIOR = one_of("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
# The option fields of each component type, by stage (fields not named here are not read).
COMPONENT_FIELDS: dict[str, dict[str, dict[str, Kind]]] = {
    "normalizer": {
        "BertNormalizer": {"clean_text": BOOL, "handle_chinese_chars": BOOL, "strip_accents": optional(BOOL),
                           "lowercase": BOOL},
        "Strip": {"strip_left": BOOL, "strip_right": BOOL}, "Prepend": {"prepend": STR},
        "Replace": {"pattern": OBJECT, "content": STR}, "Precompiled": {"precompiled_charsmap": optional(STR)},
        "Sequence": {"normalizers": LIST}},
    "pre_tokenizer": {
        "ByteLevel": _BYTE_LEVEL, "Metaspace": _METASPACE,
        "Split": {"pattern": OBJECT, "behavior": _BEHAVIOR, "invert": BOOL}, "Sequence": {"pretokenizers": LIST},
        "Punctuation": {"behavior": _BEHAVIOR}, "Digits": {"individual_digits": BOOL},
        "CharDelimiterSplit": {"delimiter": STR}, "FixedLength": {"length": COUNT}},
    "decoder": {
        "WordPiece": {"prefix": STR, "cleanup": BOOL}, "ByteLevel": _BYTE_LEVEL, "Metaspace": _METASPACE,
        "BPEDecoder": {"suffix": STR}, "Strip": {"content": STR, "start": COUNT, "stop": COUNT},
        "Replace": {"pattern": OBJECT, "content": STR}, "Sequence": {"decoders": LIST},
        "CTC": {"pad_token": STR, "word_delimiter_token": STR, "cleanup": BOOL}},
    "post_processor": {
        "ByteLevel": _BYTE_LEVEL, "BertProcessing": {"cls": LIST, "sep": LIST},
        "TemplateProcessing": {"single": LIST, "pair": LIST, "special_tokens": OBJECT},
        "RobertaProcessing": {"cls": LIST, "sep": LIST, "trim_offsets": BOOL, "add_prefix_space": BOOL},
        "Sequence": {"processors": LIST}},
}
# The fields huggingface requires of each component type (it refuses the file without them):
# checked against tokenizers 0.23 by deleting each field of a serialized component in turn.
_BYTE_LEVEL_REQUIRED = ("add_prefix_space", "trim_offsets")
REQUIRED_COMPONENT_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "normalizer": {
        "BertNormalizer": ("clean_text", "handle_chinese_chars", "lowercase"), "Strip": ("strip_left", "strip_right"),
        "Prepend": ("prepend",), "Replace": ("pattern", "content"), "Precompiled": ("precompiled_charsmap",),
        "Sequence": ("normalizers",)},
    "pre_tokenizer": {
        "ByteLevel": _BYTE_LEVEL_REQUIRED, "Metaspace": ("replacement",), "Split": ("pattern", "behavior", "invert"),
        "Sequence": ("pretokenizers",), "Digits": ("individual_digits",), "CharDelimiterSplit": ("delimiter",)},
    "decoder": {
        "WordPiece": ("prefix", "cleanup"), "ByteLevel": _BYTE_LEVEL_REQUIRED, "Metaspace": ("replacement",),
        "BPEDecoder": ("suffix",), "Strip": ("content", "start", "stop"), "Replace": ("pattern", "content"),
        "Sequence": ("decoders",), "CTC": ("pad_token", "word_delimiter_token", "cleanup")},
    "post_processor": {
        "ByteLevel": _BYTE_LEVEL_REQUIRED, "BertProcessing": ("cls", "sep"),
        "TemplateProcessing": ("single", "pair", "special_tokens"), "RobertaProcessing": ("cls", "sep"),
        "Sequence": ("processors",)},
}
_NESTED = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "decoder": "decoders",
           "post_processor": "processors"}
MODEL_FIELDS: dict[str, dict[str, Kind]] = {
    "WordPiece": {"unk_token": STR, "continuing_subword_prefix": STR, "max_input_chars_per_word": COUNT},
    "BPE": {"dropout": optional(NUMBER), "unk_token": optional(STR), "continuing_subword_prefix": optional(STR),
            "end_of_word_suffix": optional(STR), "fuse_unk": BOOL, "byte_fallback": BOOL,
            "ignore_merges": optional(BOOL), "merges": LIST},
    "Unigram": {"unk_id": optional(COUNT), "byte_fallback": BOOL, "vocab": LIST},
    "WordLevel": {"unk_token": STR},
}
# BPE's vocab and merges are required too (huggingface: "Missing vocab/merges"); checked with the vocabulary.
REQUIRED_MODEL_FIELDS = {"WordPiece": ("unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"),
                         "BPE": ("vocab", "merges"), "Unigram": ("vocab",), "WordLevel": ("vocab", "unk_token")}
_DIRECTION = one_of("Left", "Right")
TRUNCATION_FIELDS = {"max_length": COUNT, "strategy": one_of("LongestFirst", "OnlyFirst", "OnlySecond"),
                     "stride": COUNT, "direction": _DIRECTION}
PADDING_FIELDS = {"strategy": ("\"BatchLongest\" or {\"Fixed\": length}",
                               lambda v: v == "BatchLongest" or isinstance(v, dict) and list(v) == ["Fixed"]
                               and COUNT[1](v["Fixed"])),
                  "direction": _DIRECTION, "pad_to_multiple_of": optional(COUNT), "pad_id": ID, "pad_type_id": ID,
                  "pad_token": STR}
# huggingface requires these (truncation.direction and padding.pad_to_multiple_of may be left out).
REQUIRED_TRUNCATION_FIELDS = ("max_length", "strategy", "stride")
REQUIRED_PADDING_FIELDS = ("strategy", "direction", "pad_id", "pad_type_id", "pad_token")
ADDED_TOKEN_FIELDS = {"id": ID, "content": STR, "special": BOOL, "single_word": BOOL, "lstrip": BOOL,
                      "rstrip": BOOL, "normalized": BOOL}  # all required by huggingface
# huggingface reads these top-level keys and fails on any other (its reader leaves the value unread).
TOP_LEVEL_KEYS = ("version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                  "post_processor", "decoder", "model")


def check_tokenizer_json(spec: Any, source: str) -> None:
    """Every field gputok reads from a parsed tokenizer.json, before anything is built.

    The ``type`` tags themselves are checked where the components are built (the error lists the
    supported ones); here, their options, the model's vocabulary, merges and ids, and the added tokens.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise FileFormatError(f"{source} is not a tokenizer.json: it has no 'model' object")
    for key in spec:
        if key not in TOP_LEVEL_KEYS:
            raise fail(source, json.dumps(key, ensure_ascii=False), spec[key], f"huggingface reads only the keys "
                       f"{list(TOP_LEVEL_KEYS)} at the top of a tokenizer.json and refuses others", "remove it")
    if "version" in spec and spec["version"] != "1.0":
        raise fail(source, "version", spec["version"], "huggingface reads tokenizer.json version \"1.0\" only",
                   'write "1.0"')
    for stage in COMPONENT_FIELDS:
        _check_component(spec.get(stage), stage, source, stage)
    for name, kinds, required in (("truncation", TRUNCATION_FIELDS, REQUIRED_TRUNCATION_FIELDS),
                                  ("padding", PADDING_FIELDS, REQUIRED_PADDING_FIELDS)):
        if check(spec.get(name), optional(OBJECT), source, name) is not None:
            check_fields(spec[name], kinds, source, name, required)
    tokens = _check_model(spec["model"], source)
    _check_post_processor_ids(spec.get("post_processor"), source)
    _check_added_tokens(spec.get("added_tokens"), tokens, source)


def _check_component(spec: Any, stage: str, source: str, path: str) -> None:
    if spec is None:
        return
    check(spec, OBJECT, source, path)
    kind = check(spec.get("type"), optional(STR), source, f"{path}.type", "the component's type name")
    check_fields(spec, COMPONENT_FIELDS[stage].get(kind, {}), source, path,
                 REQUIRED_COMPONENT_FIELDS[stage].get(kind, ()))
    if "pattern" in COMPONENT_FIELDS[stage].get(kind, {}) and "pattern" in spec:
        _check_pattern(spec["pattern"], source, f"{path}.pattern")
    if kind == "Sequence" and stage in _NESTED:
        children = f"{path}.{_NESTED[stage]}"
        for k, child in enumerate(spec.get(_NESTED[stage]) or []):
            _check_component(child, stage, source, key_path(children, k))


def _check_pattern(pattern: dict[str, Any], source: str, path: str) -> None:
    """A Split / Replace pattern is ``{"Regex": "..."}`` or ``{"String": "..."}``, one key only."""
    if len(pattern) != 1 or next(iter(pattern)) not in ("Regex", "String"):
        raise fail(source, path, pattern, "a pattern is an object with one key, \"Regex\" or \"String\"",
                   'write {"Regex": "\\\\s+"} or {"String": " "}')
    kind, text = next(iter(pattern.items()))
    check(text, STR, source, f"{path}.{kind}")


def _check_model(model: dict[str, Any], source: str) -> dict[str, int]:
    """The model's options, ids and merges; returns its ``{token: id}`` (Unigram: first id of a piece)."""
    kind = model.get("type", "WordPiece" if "vocab" in model and "merges" not in model else None)
    check(kind, optional(STR), source, "model.type", "the model's type name")
    check_fields(model, MODEL_FIELDS.get(kind, {}), source, "model", REQUIRED_MODEL_FIELDS.get(kind, ()))
    if kind == "Unigram":
        return _check_unigram(model, source)
    if kind not in MODEL_FIELDS:
        return {}  # an unsupported model type: the loader names the supported ones
    vocab = check_vocab(model.get("vocab"), source, "model.vocab")
    if kind == "BPE":
        dropout = model.get("dropout")
        if dropout is not None and not 0 <= dropout <= 1:
            raise fail(source, "model.dropout", dropout, "a probability is in 0 .. 1",
                       "write null (gputok encodes deterministically) or a value in 0 .. 1")
        for rank, merge in enumerate(model.get("merges") or []):
            if not (isinstance(merge, str) or isinstance(merge, list) and len(merge) == 2
                    and all(isinstance(part, str) for part in merge)):
                raise fail(source, key_path("model.merges", rank), merge, "a merge is a string 'left right' or "
                           "a list [left, right] of two strings", "write the merge in one of those forms")
        unk = model.get("unk_token")
        if unk is not None and unk not in vocab:
            # huggingface loads it, then fails on the first text with a character outside the vocabulary
            raise fail(source, "model.unk_token", unk, "it is not in model.vocab, so a text with an unknown "
                       "character cannot be encoded", "add it to model.vocab, or write null (unknown characters "
                       "are then dropped)")
    return vocab


def _check_unigram(model: dict[str, Any], source: str) -> dict[str, int]:
    pieces: dict[str, int] = {}
    for i, entry in enumerate(model.get("vocab") or []):
        path = key_path("model.vocab", i)
        if not (isinstance(entry, list) and len(entry) == 2):
            raise fail(source, path, entry, "a Unigram piece is a list [piece, score]", "write it as [\"piece\", -1.5]")
        check(entry[0], STR, source, f"{path}[0]")
        check(entry[1], NUMBER, source, f"{path}[1]")
        pieces.setdefault(entry[0], i)
    unk_id = model.get("unk_id")
    if unk_id is not None and unk_id >= len(model.get("vocab") or []):
        raise fail(source, "model.unk_id", unk_id, f"the vocabulary has {len(model.get('vocab') or [])} pieces",
                   "write the id of the unknown piece, or null")
    return pieces


def _check_post_processor_ids(spec: Any, source: str, path: str = "post_processor") -> None:
    """The ids a post-processor inserts: they index the vocabulary table, so they are ids."""
    if not isinstance(spec, dict):
        return
    if spec.get("type") == "Sequence":
        for k, child in enumerate(spec.get("processors") or []):
            _check_post_processor_ids(child, source, key_path(f"{path}.processors", k))
    if spec.get("type") in ("BertProcessing", "RobertaProcessing"):
        for name in ("cls", "sep"):
            pair = spec.get(name)
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and ID[1](pair[1])):
                raise fail(source, f"{path}.{name}", pair, "expected [token, id]", 'write ["[CLS]", 101]')
    if spec.get("type") == "TemplateProcessing":
        for name in ("single", "pair"):
            for k, piece in enumerate(spec[name]):
                _check_template_piece(piece, source, key_path(f"{path}.{name}", k))
        for name, entry in spec["special_tokens"].items():
            entry_path = key_path(f"{path}.special_tokens", name)
            check(entry, OBJECT, source, entry_path)
            check(entry.get("id"), STR, source, f"{entry_path}.id")
            for k, i in enumerate(check(entry.get("ids"), LIST, source, f"{entry_path}.ids")):
                check(i, ID, source, key_path(f"{entry_path}.ids", k))
            for k, token in enumerate(check(entry.get("tokens"), LIST, source, f"{entry_path}.tokens")):
                check(token, STR, source, key_path(f"{entry_path}.tokens", k))


def _check_template_piece(piece: Any, source: str, path: str) -> None:
    """``{"SpecialToken": {"id": "[CLS]", "type_id": 0}}`` or ``{"Sequence": {"id": "A", "type_id": 0}}``."""
    example = '{"SpecialToken": {"id": "[CLS]", "type_id": 0}} or {"Sequence": {"id": "A", "type_id": 0}}'
    if not (isinstance(piece, dict) and len(piece) == 1 and next(iter(piece)) in ("SpecialToken", "Sequence")):
        raise fail(source, path, piece, "a template piece is an object with one key, \"SpecialToken\" or "
                   "\"Sequence\"", f"write {example}")
    kind, body = next(iter(piece.items()))
    check(body, OBJECT, source, f"{path}.{kind}", example)
    check(body.get("id"), one_of("A", "B") if kind == "Sequence" else STR, source, f"{path}.{kind}.id")
    check(body.get("type_id"), ID, source, f"{path}.{kind}.type_id")


def _check_added_tokens(added: Any, vocab: dict[str, int], source: str) -> None:
    """Types and ids of ``added_tokens``. An added token that is a vocabulary token has its id
    (huggingface would use the vocabulary's); contents and ids are unique."""
    check(added, optional(LIST), source, "added_tokens")
    seen_content: dict[str, int] = {}
    seen_id: dict[int, int] = {}
    owner = {i: t for t, i in vocab.items()}
    for k, token in enumerate(added or []):
        path = key_path("added_tokens", k)
        check(token, OBJECT, source, path)
        for required in ADDED_TOKEN_FIELDS:
            if required not in token:
                raise fail(source, path, token, f"an added token needs {required!r} (huggingface refuses it without)",
                           f"add \"{required}\" (an added token has id, content, special, single_word, lstrip, "
                           "rstrip and normalized)")
        check_fields(token, ADDED_TOKEN_FIELDS, source, path)
        content, i = token["content"], token["id"]
        if not content:
            continue  # huggingface ignores an added token with empty content; so does the loader
        if content in vocab and vocab[content] != i:
            raise fail(source, f"{path}.id", i, f"{content!r} is model.vocab[{json.dumps(content)}] = {vocab[content]}, "
                       "the id huggingface gives it", f"write {vocab[content]}")
        if content not in vocab and i in owner:
            raise fail(source, f"{path}.id", i, f"that is the id of model.vocab[{json.dumps(owner[i])}]; huggingface "
                       f"would give {content!r} a new id", "give the added token an id no vocabulary token has")
        if content in seen_content:
            raise fail(source, f"{path}.content", content, f"added_tokens[{seen_content[content]}] has it too",
                       "keep one of them")
        if i in seen_id:
            raise fail(source, f"{path}.id", i, f"added_tokens[{seen_id[i]}] has this id too", "give each its own id")
        seen_content[content] = k
        seen_id[i] = k
    if seen_id:
        largest, k = max(seen_id.items())
        check_id_space(largest, len(vocab) + len(added), source, key_path("added_tokens", k) + ".id")


# ---- SentencePiece .model --------------------------------------------------------------------

# The byte pieces' texts, as SentencePiece writes them (and reads them back: PieceToByte).
_BYTE_PIECES = frozenset(f"<0x{b:02X}>" for b in range(256))


def check_sentencepiece_pieces(pieces: list, byte_fallback: bool, source: str, *, model_type: int | None = None) -> None:
    """SentencePiece's own checks of a model's pieces (``ModelInterface::InitializePieces``):
    no empty or repeated piece, finite scores, exactly one unknown piece, byte pieces only with
    ``byte_fallback``, each written ``<0xNN>``, and then all 256 of them; a Unigram model has some
    piece to match (a normal, user-defined or unused one). ``pieces``: :class:`gputok.sentencepiece_model.Piece`."""
    from .sentencepiece_model import BYTE, NORMAL, UNIGRAM, UNKNOWN, UNUSED, USER_DEFINED

    fix = "SentencePiece refuses this model too: retrain it, or download it again if it is damaged"
    seen: dict[str, int] = {}
    unknown: list[int] = []
    byte_pieces = 0
    for i, p in enumerate(pieces):
        field = f"pieces[{i}]"
        if not p.piece:
            raise fail(source, f"{field}.piece", p.piece, "a piece must not be empty", fix)
        if not math.isfinite(p.score):
            raise fail(source, f"{field}.score", p.score, "a score must be finite", fix)
        if p.piece in seen:
            raise fail(source, f"{field}.piece", p.piece, f"pieces[{seen[p.piece]}] is the same piece", fix)
        seen[p.piece] = i
        if p.type == UNKNOWN:
            unknown.append(i)
            if len(unknown) > 1:
                raise fail(source, f"{field}.type", "UNKNOWN", f"pieces[{unknown[0]}] is the unknown piece already", fix)
        if p.type == BYTE:
            if not byte_fallback:
                raise fail(source, f"{field}.piece", p.piece, "a byte piece in a model without byte_fallback", fix)
            if p.piece not in _BYTE_PIECES:
                raise fail(source, f"{field}.piece", p.piece, "a byte piece is written <0xNN>, NN two upper-case hex "
                           "digits (SentencePiece: 'byte piece ... is invalid')", fix)
            byte_pieces += 1
    if not unknown:
        raise FileFormatError(f"{source}: the model has no unknown piece (no piece of type UNKNOWN); {fix}")
    if model_type == UNIGRAM and not any(p.type in (NORMAL, USER_DEFINED, UNUSED) for p in pieces):
        raise FileFormatError(f"{source}: the Unigram model has no pieces to match text with (only unknown, "
                              f"control or byte pieces; SentencePiece says 'no pieces are loaded'); {fix}")
    if byte_fallback and byte_pieces != 256:
        raise FileFormatError(f"{source}: trainer_spec.byte_fallback is true but there are {byte_pieces} byte pieces, "
                              f"not 256; {fix}")
