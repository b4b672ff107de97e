"""Loaders check everything they read, up front (issue 22, items 2-5 and 8): a bad file raises a
``FileFormatError`` (a ValueError) naming the file, the field and the fix, where the reference
library rejects it too; where the reference accepts a file, gputok gives its ids."""

import base64
import json

import pytest

from gputok import Tokenizer
from gputok._validate import FileFormatError

tokenizers = pytest.importorskip("tokenizers")


# ---- helpers ------------------------------------------------------------------------------

def wordpiece(vocab=None, **options):
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100, "vocab": vocab or {"[UNK]": 0, "a": 1, "ab": 2, "c": 3}}
    return {**model, **options}


def bpe(vocab=None, merges=("a b",), **options):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": vocab or {"a": 0, "b": 1, "c": 2, "ab": 3}, "merges": list(merges)}
    return {**model, **options}


def unigram(vocab=None, **options):
    model = {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
             "vocab": vocab or [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["ab", -1.5], ["c", -1.0]]}
    return {**model, **options}


def added(i, content, **flags):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True, **flags}


def template(type_id=0, extra=None, sequence="A"):
    first = {"SpecialToken": {"id": "a", "type_id": type_id}, **(extra or {})}
    return {"type": "TemplateProcessing", "single": [first, {"Sequence": {"id": sequence, "type_id": 0}}],
            "pair": [first, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"a": {"id": "a", "ids": [1], "tokens": ["a"]}}}


def spec(model, *, pre=(), added_tokens=(), **parts):
    pre = {"type": "WhitespaceSplit"} if pre == () else pre
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added_tokens),
            "normalizer": None, "pre_tokenizer": pre, "post_processor": None, "decoder": None, "model": model, **parts}


def both(text, *texts):
    """gputok and huggingface tokenizers from the same tokenizer.json text."""
    return Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)


def hf_rejects(text):
    with pytest.raises(Exception):
        tokenizers.Tokenizer.from_str(text)


# ---- tokenizer.json: what huggingface rejects, gputok rejects up front ---------------------

TRUNCATION = {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0}
PADDING = {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0, "pad_type_id": 0,
           "pad_token": "[PAD]"}

BAD_SPECS = {
    # item 3: a negative id overwrote another token ("ab c" -> [2], the "c" gone)
    "negative id": (spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": -1})), r'model\.vocab\["c"\] = -1: expected an integer id'),
    "negative BPE id": (spec(bpe({"a": 0, "b": 1, "c": -1, "ab": 3})), r'model\.vocab\["c"\] = -1'),
    "id past u32": (spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 2 ** 32})), r'model\.vocab\["c"\] = 4294967296'),
    # item 8: a JSON bool is not an id, a string is not a count
    "bool id": (spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": True})), r'model\.vocab\["c"\] = True: expected an integer id'),
    "float id": (spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 3.0})), r'model\.vocab\["c"\] = 3\.0'),
    "string max chars": (spec(wordpiece(max_input_chars_per_word="100")),
                         r"model\.max_input_chars_per_word = '100': expected an integer >= 0"),
    "negative max chars": (spec(wordpiece(max_input_chars_per_word=-1)), r"model\.max_input_chars_per_word = -1"),
    "null prefix": (spec(wordpiece(continuing_subword_prefix=None)), r"model\.continuing_subword_prefix = None: expected a string"),
    "null unk": (spec(wordpiece(unk_token=None)), r"model\.unk_token = None"),
    "added content 7": (spec(wordpiece(), added_tokens=[added(4, 7)]), r"added_tokens\[0\]\.content = 7: expected a string"),
    "added id -1": (spec(wordpiece(), added_tokens=[added(-1, "X")]), r"added_tokens\[0\]\.id = -1"),
    "added id bool": (spec(wordpiece(), added_tokens=[added(True, "X")]), r"added_tokens\[0\]\.id = True"),
    "added flag string": (spec(wordpiece(), added_tokens=[added(4, "X", special="yes")]),
                          r"added_tokens\[0\]\.special = 'yes': expected a JSON boolean"),
    "BPE merge not in vocab": (spec(bpe(merges=["a z"])), r"merge 0 \('a', 'z'\) names tokens that are not in the vocabulary: \['z', 'az'\]"),
    "BPE merge result not in vocab": (spec(bpe(merges=["b c"])), r"not in the vocabulary: \['bc'\]"),
    "BPE merge of 3": (spec(bpe(merges=["a b c"])), r"merge 0 is not 'left right'"),
    "BPE merge int": (spec(bpe(merges=[7])), r"model\.merges\[0\] = 7: a merge is a string"),
    "BPE flag string": (spec(bpe(fuse_unk="yes")), r"model\.fuse_unk = 'yes': expected a JSON boolean"),
    "BPE flag int": (spec(bpe(byte_fallback=1)), r"model\.byte_fallback = 1"),
    "BPE dropout 2": (spec(bpe(dropout=2.0)), r"model\.dropout = 2\.0: a probability is in 0 \.\. 1"),
    "BPE vocab list": (spec(bpe([["a", 0]])), r"model\.vocab = \[\['a', 0\]\]: expected a JSON object"),
    "Unigram unk_id past the end": (spec(unigram(unk_id=9)), r"model\.unk_id = 9: the vocabulary has 5 pieces"),
    "Unigram unk_id -1": (spec(unigram(unk_id=-1)), r"model\.unk_id = -1"),
    "Unigram unk_id bool": (spec(unigram(unk_id=True)), r"model\.unk_id = True"),
    "Unigram score string": (spec(unigram([["<unk>", 0.0], ["d", "-1"]])), r"model\.vocab\[1\]\[1\] = '-1': expected a finite number"),
    "Unigram piece int": (spec(unigram([["<unk>", 0.0], [5, -1.0]])), r"model\.vocab\[1\]\[0\] = 5: expected a string"),
    "Unigram triple": (spec(unigram([["<unk>", 0.0], ["d", -1.0, 3]])), r"model\.vocab\[1\] = \['d', -1\.0, 3\]: a Unigram piece is"),
    "Unigram flag string": (spec(unigram(byte_fallback="no")), r"model\.byte_fallback = 'no'"),
    "normalizer flag": (spec(wordpiece(), normalizer={"type": "BertNormalizer", "lowercase": "yes"}),
                        r"normalizer\.lowercase = 'yes': expected a JSON boolean"),
    "nested normalizer flag": (spec(wordpiece(), normalizer={"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": 1, "strip_right": True}]}), r"normalizer\.normalizers\[0\]\.strip_left = 1"),
    "pre_tokenizer enum": (spec(unigram(), pre={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes",
                                                "split": True}),
                           r"pre_tokenizer\.prepend_scheme = 'sometimes': expected one of \['always', 'first', 'never'\]"),
    "decoder option": (spec(wordpiece(), decoder={"type": "WordPiece", "prefix": "##", "cleanup": "true"}),
                       r"decoder\.cleanup = 'true'"),
    "post_processor id": (spec(wordpiece(), post_processor={"type": "BertProcessing", "sep": ["c", -3], "cls": ["a", 1]}),
                          r"post_processor\.sep = \['c', -3\]: expected \[token, id\]"),
    # the fuzz campaign's findings (benchmarks/fuzz.py): files huggingface refuses and gputok loaded
    "unknown top-level key": ({**spec(wordpiece()), "Type": True}, r'"Type" = True: huggingface reads only the keys'),
    "version 2.0": ({**spec(wordpiece()), "version": "2.0"}, r"version = '2\.0': huggingface reads tokenizer\.json version"),
    "template type_id ''": (spec(wordpiece(), post_processor=template(type_id="")),
                            r"post_processor\.single\[0\]\.SpecialToken\.type_id = '': expected an integer id"),
    "template piece extra key": (spec(wordpiece(), post_processor=template(extra={"bogus": 1})),
                                 r"post_processor\.single\[0\] = .*: a template piece is an object with one key"),
    "template sequence C": (spec(wordpiece(), post_processor=template(sequence="C")),
                            r"post_processor\.single\[1\]\.Sequence\.id = 'C': expected one of \['A', 'B'\]"),
    "template without pair": (spec(wordpiece(), post_processor={**template(), "pair": None} | {}),
                              r"post_processor\.pair = None: expected a JSON list"),
    "split pattern of two keys": (spec(wordpiece(), pre={"type": "Split", "pattern": {"Regex": "a", "String": "a"},
                                                         "behavior": "Isolated", "invert": False}),
                                  r"pre_tokenizer\.pattern = .*: a pattern is an object with one key"),
    "component type not a string": (spec(wordpiece(), normalizer={"type": {"a": 1}}),
                                    r"normalizer\.type = \{'a': 1\}: expected null or a string"),
    # fuzz seed 31: a TypeError (unhashable dict) from deep inside
    "model type not a string": (spec(bpe(type={})), r"model\.type = \{\}: expected null or a string"),
    **{f"added token without {field}": (spec(wordpiece(), added_tokens=[{k: v for k, v in added(4, "X").items() if k != field}]),
                                         rf"added_tokens\[0\] = .*: an added token needs '{field}'")
       for field in ("id", "content", "special", "single_word", "lstrip", "rstrip", "normalized")},
    # the fuzz campaign's json-wrong-type / json-unknown-type (long run, seed 7)
    "truncation max_length ''": (spec(wordpiece(), truncation={**TRUNCATION, "max_length": ""}),
                                 r"truncation\.max_length = '': expected an integer >= 0"),
    "truncation strategy": (spec(wordpiece(), truncation={**TRUNCATION, "strategy": "Longest"}),
                            r"truncation\.strategy = 'Longest': expected one of \['LongestFirst', 'OnlyFirst', 'OnlySecond'\]"),
    "padding strategy Fixed": (spec(wordpiece(), padding={**PADDING, "strategy": "Fixed"}),
                               r"padding\.strategy = 'Fixed': expected \"BatchLongest\" or \{\"Fixed\": length\}"),
    "padding Fixed -1": (spec(wordpiece(), padding={**PADDING, "strategy": {"Fixed": -1}}), r"padding\.strategy = \{'Fixed': -1\}"),
    "padding direction": (spec(wordpiece(), padding={**PADDING, "direction": "Up"}),
                          r"padding\.direction = 'Up': expected one of \['Left', 'Right'\]"),
    "padding type id": (spec(wordpiece(), padding={**PADDING, "pad_type_id": -1}), r"padding\.pad_type_id = -1"),
    "decoder Sequence of a BPEDecoder's fields": (spec(wordpiece(), decoder={"type": "Sequence", "suffix": "</w>"}),
                                                   r"decoder = .*: a Sequence needs the field 'decoders'"),
}


@pytest.mark.parametrize("name", BAD_SPECS)
def test_bad_tokenizer_json_is_rejected_like_huggingface(name, tmp_path):
    bad, message = BAD_SPECS[name]
    text = json.dumps(bad)
    hf_rejects(text)
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FileFormatError, match=message) as raised:
        Tokenizer.from_file(path)
    assert str(path) in str(raised.value)
    with pytest.raises(FileFormatError, match=r"^<string>: "):
        Tokenizer.from_str(text)


# Each part with every field, as huggingface (tokenizers 0.23) writes it; (where, type): (part, required fields).
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_METASPACE = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
FULL_PARTS = {
    ("truncation", None): (TRUNCATION, ["max_length", "strategy", "stride"]),
    ("padding", None): (PADDING, ["strategy", "direction", "pad_id", "pad_type_id", "pad_token"]),
    ("normalizer", "BertNormalizer"): ({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                        "strip_accents": None, "lowercase": True},
                                       ["clean_text", "handle_chinese_chars", "lowercase"]),
    ("normalizer", "Strip"): ({"type": "Strip", "strip_left": True, "strip_right": True}, ["strip_left", "strip_right"]),
    ("normalizer", "Prepend"): ({"type": "Prepend", "prepend": "x"}, ["prepend"]),
    ("normalizer", "Replace"): ({"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, ["pattern", "content"]),
    ("normalizer", "Sequence"): ({"type": "Sequence", "normalizers": []}, ["normalizers"]),
    ("pre_tokenizer", "ByteLevel"): (_BYTE_LEVEL, ["add_prefix_space", "trim_offsets"]),
    ("pre_tokenizer", "Metaspace"): (_METASPACE, ["replacement"]),
    ("pre_tokenizer", "Split"): ({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": False},
                                 ["pattern", "behavior", "invert"]),
    ("pre_tokenizer", "Sequence"): ({"type": "Sequence", "pretokenizers": []}, ["pretokenizers"]),
    ("decoder", "WordPiece"): ({"type": "WordPiece", "prefix": "##", "cleanup": True}, ["prefix", "cleanup"]),
    ("decoder", "ByteLevel"): (_BYTE_LEVEL, ["add_prefix_space", "trim_offsets"]),
    ("decoder", "Metaspace"): (_METASPACE, ["replacement"]),
    ("decoder", "BPEDecoder"): ({"type": "BPEDecoder", "suffix": "</w>"}, ["suffix"]),
    ("decoder", "Strip"): ({"type": "Strip", "content": " ", "start": 1, "stop": 0}, ["content", "start", "stop"]),
    ("decoder", "Replace"): ({"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, ["pattern", "content"]),
    ("decoder", "Sequence"): ({"type": "Sequence", "decoders": []}, ["decoders"]),
    ("post_processor", "ByteLevel"): (_BYTE_LEVEL, ["add_prefix_space", "trim_offsets"]),
    ("post_processor", "BertProcessing"): ({"type": "BertProcessing", "sep": ["c", 3], "cls": ["a", 1]}, ["sep", "cls"]),
    ("post_processor", "TemplateProcessing"): (template(), ["single", "pair", "special_tokens"]),
    ("model", "WordPiece"): (wordpiece(), ["unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"]),
    ("model", "BPE"): (bpe(), ["vocab", "merges"]),
    ("model", "Unigram"): (unigram(), ["vocab"]),
}


def _with_part(where, part):
    if where == "model":
        return spec(part)
    if where == "pre_tokenizer":
        return spec(wordpiece(), pre={"type": "Sequence", "pretokenizers": [part]})  # nested, as in cl100k's files
    return spec(wordpiece(), **{where: part})


@pytest.mark.parametrize("where, kind, field", [(where, kind, field) for (where, kind), (_, required) in FULL_PARTS.items()
                                                for field in required])
def test_fields_huggingface_requires_are_required(where, kind, field):
    """huggingface refuses a tokenizer.json without these ('missing field `strategy`', 'data did not
    match any variant of untagged enum PyDecoderWrapper'); gputok loaded them with defaults (the
    fuzz campaign's json-delete-key, long run seed 7)."""
    from gputok._validate import check_tokenizer_json

    full, _ = FULL_PARTS[where, kind]
    tokenizers.Tokenizer.from_str(json.dumps(_with_part(where, full)))  # the whole part: both take it
    check_tokenizer_json(_with_part(where, full), "<string>")
    text = json.dumps(_with_part(where, {k: v for k, v in full.items() if k != field}))
    hf_rejects(text)
    with pytest.raises(FileFormatError, match=rf"^<string>: {where}\S* = .*: .* needs the field '{field}' \(huggingface "
                                              rf"refuses it without\); add \"{field}\""):
        Tokenizer.from_str(text)


@pytest.mark.parametrize("where, kind, field", [(where, kind, field) for (where, kind), (full, required) in FULL_PARTS.items()
                                                for field in full if field not in required and field != "type"])
def test_fields_huggingface_does_not_require_may_be_left_out(where, kind, field):
    from gputok._validate import check_tokenizer_json

    full, _ = FULL_PARTS[where, kind]
    part = _with_part(where, {k: v for k, v in full.items() if k != field})
    tokenizers.Tokenizer.from_str(json.dumps(part))
    check_tokenizer_json(part, "<string>")


def test_two_tokens_of_one_id_are_an_error():
    """huggingface maps both tokens to the id (and decodes it as either, by hash-map order); gputok
    kept the last one only, so '<unk>' was lost when an empty token took its id 0 (the fuzz
    campaign's vocab-empty-token: 'loads, then encode raises unk_token '<unk>' is not in the
    vocabulary')."""
    vocab = {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "": 0}
    text = json.dumps(spec(bpe(vocab, unk_token="<unk>")))
    assert tokenizers.Tokenizer.from_str(text).encode("a z").ids == [1, 0]
    with pytest.raises(FileFormatError, match=r'^<string>: model\.vocab\[""\] = 0: model\.vocab\["<unk>"\] has this id '
                                              r"too; give each token its own id"):
        Tokenizer.from_str(text)
    with pytest.raises(FileFormatError, match=r'model\.vocab\["c"\] = 1: model\.vocab\["a"\] has this id too'):
        Tokenizer.from_str(json.dumps(spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 1}))))


@pytest.mark.parametrize("options, text", [
    (dict(end_of_word_suffix="</w>"), "a\u2581b \u2581a"),
    (dict(continuing_subword_prefix="##"), "a\u2581b \u2581a"),
    (dict(fuse_unk=True), "\u2603\u2581a \u2581\u2581a"),
], ids=["end_of_word_suffix", "continuing_subword_prefix", "fuse_unk"])
def test_bpe_without_pre_tokenizer_keeps_each_text_one_word(options, text):
    """With no pre-tokenizer each text is one word. gputok cut texts before each '▁' (no merge
    crosses one), but a cut makes the characters beside it a word's last or first, which take
    end_of_word_suffix / continuing_subword_prefix, and parts an unknown run that fuse_unk makes one
    <unk> (the fuzz campaign's char-bpe json-delete-key of pre_tokenizer: 'x' encoded as 'x</w>')."""
    marked = [f"{options.get('continuing_subword_prefix', '')}{c}{options.get('end_of_word_suffix', '')}" for c in "ab"]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(["<unk>", "a", "b", "\u2581", *marked]))}
    if "fuse_unk" in options:
        del vocab["\u2581"]
    text_spec = json.dumps(spec(bpe(vocab, merges=[], unk_token="<unk>", **options), pre=None))
    ours, reference = both(text_spec)
    assert ours.encode_batch([text]) == [reference.encode(text).ids]


@pytest.mark.parametrize("depth", [100_000, 200, 128])
def test_deeply_nested_json_is_a_value_error(depth):
    """Item 8: RecursionError before; huggingface: 'recursion limit exceeded' from 128 levels
    (serde_json's limit). 200 levels in an ignored field loaded (the fuzz campaign's json-deep-nesting)."""
    deep = json.dumps(spec(wordpiece(), normalizer={"type": "Strip", "strip_left": True, "strip_right": True,
                                                    "ignored": "NEST"}))
    deep = deep.replace('"NEST"', "[" * (depth - 2) + "1" + "]" * (depth - 2))
    hf_rejects(deep)
    with pytest.raises(FileFormatError, match=r"<string>: JSON nested too deeply"):
        Tokenizer.from_str(deep)


def test_json_nested_below_the_limit_loads():
    nested = json.dumps(spec(wordpiece(), normalizer={"type": "Strip", "strip_left": True, "strip_right": True,
                                                      "ignored": "NEST"}))
    nested = nested.replace('"NEST"', "[" * 125 + "1" + "]" * 125)  # the deepest list at level 127
    ours, reference = both(nested)
    assert ours.encode("a ab c") == reference.encode("a ab c").ids


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_is_not_json(constant):
    """Python's reader takes NaN; huggingface's refuses it (the fuzz campaign's json-wrong-type)."""
    text = json.dumps(spec(wordpiece(), post_processor=template())).replace('"type_id": 0', f'"type_id": {constant}', 1)
    hf_rejects(text)
    with pytest.raises(FileFormatError, match=rf"<string> is not valid JSON: {constant} is not a JSON number"):
        Tokenizer.from_str(text)


@pytest.mark.parametrize("where", ["model", "added_tokens"])
def test_huge_id_fails_up_front(where):
    """Item 4: one id of 10**8 in a 5-token file took 123 s and 12 GB (10**9: MemoryError).
    gputok keeps ids dense, so it refuses an id far past the token count before allocating."""
    if where == "model":
        bad = spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 10 ** 9}))
        message = r'<string>: model\.vocab\["c"\] = 1000000000: this id is far past the 4 tokens .*renumber the tokens'
    else:
        bad = spec(wordpiece(), added_tokens=[added(10 ** 9, "X")])
        message = r"<string>: added_tokens\[0\]\.id = 1000000000: this id is far past the 5 tokens"
    with pytest.raises(FileFormatError, match=message):
        Tokenizer.from_str(json.dumps(bad))


def test_modest_id_gaps_load():
    """Gaps that real files have (unused ids, added tokens past the vocabulary) still load."""
    tok, hf = both(json.dumps(spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 900}),
                                   added_tokens=[added(1000, "[X]")])))
    assert tok.encode("ab c") == hf.encode("ab c").ids == [2, 900]
    assert tok.encode("ab[X]") == [2, 1000]


def test_added_token_ids_that_huggingface_would_change_are_errors():
    """huggingface gives an added token that is a vocabulary token the vocabulary's id, and one that
    takes another token's id a new one; gputok would use the file's id, so it says so instead."""
    in_vocab = spec(wordpiece(), added_tokens=[added(7, "ab")])
    with pytest.raises(FileFormatError, match=r"added_tokens\[0\]\.id = 7: 'ab' is model\.vocab\[\"ab\"\] = 2.*write 2"):
        Tokenizer.from_str(json.dumps(in_vocab))
    taken = spec(wordpiece(), added_tokens=[added(1, "X")])
    with pytest.raises(FileFormatError, match=r"added_tokens\[0\]\.id = 1: that is the id of model\.vocab\[\"a\"\]"):
        Tokenizer.from_str(json.dumps(taken))
    twice = spec(wordpiece(), added_tokens=[added(4, "X"), added(5, "X")])
    with pytest.raises(FileFormatError, match=r"added_tokens\[1\]\.content = 'X': added_tokens\[0\] has it too"):
        Tokenizer.from_str(json.dumps(twice))


# ---- tokenizer.json: what huggingface accepts, gputok encodes as it does -------------------

def test_empty_added_token_is_ignored_like_huggingface():
    """Item 5: an added token with empty content turned "ab" into [3, 0, 3, 1, 3]."""
    text = json.dumps(spec(wordpiece(), added_tokens=[added(4, "")]))
    tok, hf = both(text)
    assert tok.encode("ab") == hf.encode("ab").ids == [2]
    assert tok.encode_batch(["ab c", "", "a"]) == [e.ids for e in hf.encode_batch(["ab c", "", "a"])]


def test_empty_continuing_subword_prefix_matches_huggingface():
    """Item 8: prefix "" made every word of two pieces [UNK]; huggingface continues with the plain tokens."""
    text = json.dumps(spec(wordpiece({"[UNK]": 0, "a": 1, "ab": 2, "c": 3, "b": 4}, continuing_subword_prefix="")))
    tok, hf = both(text)
    texts = ["ab c", "abab", "ca", "cab", "abz", "b"]
    assert tok.encode_batch(texts) == [e.ids for e in hf.encode_batch(texts)]
    assert tok.encode("abab") == [2, 2]


@pytest.mark.parametrize("model", [wordpiece(), unigram(), bpe()], ids=["WordPiece", "Unigram", "BPE"])
def test_no_pre_tokenizer_is_one_word_per_text_like_huggingface(model):
    """Item 8: without a pre_tokenizer every encode raised; huggingface takes each text as one word."""
    tok, hf = both(json.dumps(spec(model, pre=None)))
    texts = ["ab c", "ab", "", "cab ab", "a  b"]
    assert tok.encode_batch(texts) == [e.ids for e in hf.encode_batch(texts)]


def test_int_scores_and_null_options_load_like_huggingface():
    text = json.dumps(spec(unigram([["<unk>", 0], ["a", -1], ["ab", -1.5], ["b", -2]])))
    tok, hf = both(text)
    assert tok.encode("ab a") == hf.encode("ab a").ids
    tok, hf = both(json.dumps(spec(bpe(ignore_merges=None, dropout=0.0))))
    assert tok.encode("ab c") == hf.encode("ab c").ids == [3, 2]


# ---- .tiktoken files ------------------------------------------------------------------------

def tiktoken_lines(extra=()):
    ranks = [(bytes([b]), b) for b in range(256)] + [(b"zz", 256), (b"qq", 257), (b"zzqq", 258), (b" w", 259)]
    ranks += list(extra)
    return [base64.b64encode(t) + b" " + str(r).encode() for t, r in ranks]


def write_tiktoken(tmp_path, lines, name="test.tiktoken"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("case, extra, message", [
    ("negative rank", [(b"zzqqzz", -1)], r"rank -1 is outside 0 \.\. 4294967295"),
    ("rank past u32", [(b"zzqqzz", 2 ** 32)], r"rank 4294967296 is outside"),
    ("duplicate rank", [(b"zzqqzz", 258)], r":261: rank 258 is also the rank of line 259"),
    # a truncated last line: " world" 1917 cut to " world" 19, a rank taken already
    ("truncated rank", [(b" world", 19)], r"rank 19 is also the rank of line 20 .*truncated"),
    ("duplicate token", [(b"zz", 300)], r"token b'zz' is also on line 257"),
    ("rank far past the tokens", [(b" world", 10 ** 8)], r"rank = 100000000: this id is far past the 261 tokens"),
])
def test_bad_tiktoken_ranks_are_rejected(tmp_path, case, extra, message):
    """Item 3: such files loaded and ids decoded to the wrong bytes; tiktoken rejects all but the
    repeated token (which it reads with its last rank, leaving a hole) and the far rank (a hash map)."""
    path = write_tiktoken(tmp_path, tiktoken_lines(extra))
    with pytest.raises(FileFormatError, match=r"test\.tiktoken:?.*" + message):
        Tokenizer.from_tiktoken(path, pattern="gpt2")


def test_tiktoken_reference_rejects_the_same_ranks(tmp_path):
    """The rules above are tiktoken's own: its Encoding refuses negative, > u32 and repeated ranks."""
    tiktoken = pytest.importorskip("tiktoken")
    base = {bytes([b]): b for b in range(256)}
    for bad in ({**base, b"ab": -1}, {**base, b"ab": 2 ** 32}, {**base, b"ab": 5}):
        with pytest.raises(BaseException):  # OverflowError, or a Rust panic for the repeated rank
            tiktoken.Encoding("t", pat_str=r"\S+", mergeable_ranks=bad, special_tokens={})


@pytest.mark.parametrize("line, message", [
    (b"IHdvcmxk", r":261: not a 'base64-token rank' line"),
    (b"IHdvcmxk 19 17", r":261: not a 'base64-token rank' line"),
    (b"IHd@cmxk 1917", r":261: token b'IHd@cmxk' is not valid base64"),
    (b"IHdvcmxk 19x7", r":261: rank b'19x7' is not an integer"),
    (b"IHdvcmxk 1.5", r":261: rank b'1.5' is not an integer"),
])
def test_malformed_tiktoken_lines(tmp_path, line, message):
    path = write_tiktoken(tmp_path, tiktoken_lines() + [line])
    with pytest.raises(FileFormatError, match=message):
        Tokenizer.from_tiktoken(path, pattern="gpt2")


def test_empty_tiktoken_file(tmp_path):
    with pytest.raises(FileFormatError, match=r"empty\.tiktoken holds no tokens"):
        Tokenizer.from_tiktoken(write_tiktoken(tmp_path, [b""], "empty.tiktoken"))


def test_good_tiktoken_file_decodes_its_ranks(tmp_path):
    tok = Tokenizer.from_tiktoken(write_tiktoken(tmp_path, tiktoken_lines([(b" world", 1917)])), pattern="gpt2")
    assert tok.decode([1917]) == " world" and tok.decode([258]) == "zzqq"
    assert tok.encode(" world zzqq") == [1917, 32, 258]  # " world" is a token; " zzqq" is " " + "zzqq"


def test_special_tokens_are_checked(tmp_path):
    path = write_tiktoken(tmp_path, tiktoken_lines())
    with pytest.raises(ValueError, match=r"special_tokens\['<s>'\] = 256 is the rank of b'zz'"):
        Tokenizer.from_tiktoken(path, special_tokens={"<s>": 256})
    with pytest.raises(ValueError, match=r"special_tokens\['<s>'\] = True; expected an integer id"):
        Tokenizer.from_tiktoken(path, special_tokens={"<s>": True})
    with pytest.raises(ValueError, match=r"this id is far past"):
        Tokenizer.from_tiktoken(path, special_tokens={"<s>": 10 ** 9})
    assert Tokenizer.from_tiktoken(path, special_tokens={"<s>": 300}).encode("zz<s>") == [256, 300]


# ---- split patterns -------------------------------------------------------------------------

@pytest.mark.parametrize("alias, rule", [("cl100k_base", "cl100k"), ("o200k_base", "o200k"), ("r50k_base", "gpt2"),
                                         ("p50k_base", "gpt2"), ("p50k_edit", "gpt2"), ("o200k_harmony", "o200k"),
                                         ("gpt2", "gpt2")])
def test_tiktoken_encoding_names_are_aliases(tmp_path, alias, rule):
    """Item 2: tiktoken's own names were taken as regexes that match nothing: every encode gave []."""
    path = write_tiktoken(tmp_path, tiktoken_lines())
    text = "Hello world's 12345 zzqq  \n中文"
    expected = Tokenizer.from_tiktoken(path, pattern=rule).encode(text)
    assert expected and Tokenizer.from_tiktoken(path, pattern=alias).encode(text) == expected


def test_tiktoken_names_use_tiktokens_patterns():
    """The aliases name the rule each encoding of tiktoken splits with."""
    pytest.importorskip("tiktoken")
    import tiktoken_ext.openai_public as openai_public

    from gputok import pre_tokenizers, regex_split

    assert regex_split.PATTERNS["gpt2"] == openai_public.r50k_pat_str
    assert pre_tokenizers.Split("cl100k_base").pattern == regex_split.PATTERNS["cl100k"]
    assert pre_tokenizers.Split("r50k_base").pattern == openai_public.r50k_pat_str


@pytest.mark.parametrize("pattern, message", [
    ("cl100K", r"Split pattern 'cl100K' matches nothing .*did you mean 'cl100k'\?"),
    ("gpt-2", r"Split pattern 'gpt-2' matches nothing .*did you mean 'gpt2'\?"),
    ("", r"Split pattern '' matches nothing in the probe text .*'cl100k_base'"),
    ("x{999}", r"matches nothing"),
    ("cl100k_base(", r"Split pattern 'cl100k_base\(' is neither a known name \[.*'o200k_base'.*\] nor a valid regex"),
])
def test_pattern_that_splits_nothing_is_an_error(tmp_path, pattern, message):
    path = write_tiktoken(tmp_path, tiktoken_lines())
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_tiktoken(path, pattern=pattern)


def test_a_tokenizer_json_split_that_never_matches_loads_as_in_huggingface():
    """The probe refuses a tiktoken ``pattern`` argument (a misspelled name, most likely), never a
    file huggingface loads: ``Split("ing", Removed, invert)`` keeps only the matches."""
    from tokenizers import Tokenizer as HfTokenizer, models, pre_tokenizers as hf_pre

    hf = HfTokenizer(models.BPE(vocab={"g": 0, "i": 1, "n": 2, "in": 3, "ing": 4, "x": 5}, merges=[("i", "n"), ("in", "g")]))
    for pattern in ("ing", "xyz"):
        hf.pre_tokenizer = hf_pre.Split(pattern, "removed", invert=True)
        ours = Tokenizer.from_str(hf.to_str())
        for text in ("singing", "x", ""):
            assert ours.encode(text) == hf.encode(text).ids


def test_custom_regex_still_works(tmp_path):
    tok = Tokenizer.from_tiktoken(write_tiktoken(tmp_path, tiktoken_lines()), pattern=r"\S+|\s+")
    assert tok.decode(tok.encode("zzqq ok")) == "zzqq ok"


# ---- GPT-2 vocab.json + merges.txt ----------------------------------------------------------

def test_gpt2_files_name_the_file(tmp_path):
    from gputok.models.bpe import byte_decoder

    alphabet = sorted(byte_decoder(), key=byte_decoder().get)
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n", encoding="utf-8")
    (tmp_path / "vocab.json").write_text(json.dumps({**vocab, "ab": -5}), encoding="utf-8")
    with pytest.raises(FileFormatError, match=r'vocab\.json: vocab\["ab"\] = -5: expected an integer id'):
        Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"merges\.txt: merge 0 \('a', 'b'\) names tokens that are not in the vocabulary: \['ab'\]"):
        Tokenizer.from_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


# ---- SentencePiece .model -------------------------------------------------------------------

def _sp_model(tmp_path, extra=(), **options):
    from gputok.sentencepiece_model import CONTROL, UNKNOWN, Piece, SentencePieceModel, serialize_model

    pieces = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL), Piece("</s>", 0.0, CONTROL),
              Piece("▁a", -1.0), Piece("b", -2.0), Piece("▁", -3.0), Piece("a", -3.0), *extra]
    path = tmp_path / "test.model"
    path.write_bytes(serialize_model(SentencePieceModel(pieces=pieces, **options)))
    return path


def _sp_cases():
    from gputok.sentencepiece_model import BPE, BYTE, NORMAL, UNKNOWN, NormalizerSpec, Piece

    return {
        "repeated piece": (dict(extra=[Piece("b", -0.5)]), r"pieces\[7\]\.piece = 'b': pieces\[4\] is the same piece"),
        "repeated piece (BPE)": (dict(extra=[Piece("b", -0.5)], model_type=BPE), r"pieces\[4\] is the same piece"),
        "empty piece": (dict(extra=[Piece("", -0.5)]), r"pieces\[7\]\.piece = '': a piece must not be empty"),
        "two unknown pieces": (dict(extra=[Piece("<unk2>", 0.0, UNKNOWN)]), r"pieces\[0\] is the unknown piece already"),
        "NaN score": (dict(extra=[Piece("c", float("nan"))]), r"pieces\[7\]\.score = nan: a score must be finite"),
        "infinite score": (dict(extra=[Piece("c", float("-inf"))]), r"pieces\[7\]\.score = -inf"),
        "byte piece without byte_fallback": (dict(extra=[Piece("<0x41>", 0.0, BYTE)]),
                                             r"'<0x41>': a byte piece in a model without byte_fallback"),
        "byte_fallback without 256 bytes": (dict(extra=[Piece("<0x41>", 0.0, BYTE)], byte_fallback=True),
                                            r"byte_fallback is true but there are 1 byte pieces, not 256"),
        "valid": (dict(extra=[Piece("c", -0.5, NORMAL)]), None),
        # the fuzz campaign's sp-charsmap / sp-byte-flip: the message named no file, or the model loaded
        "charsmap of 1 byte": (dict(normalizer=NormalizerSpec(precompiled_charsmap=b"\x00")),
                               r"normalizer_spec\.precompiled_charsmap of 1 bytes is truncated"),
        "charsmap trie out of bounds": (dict(normalizer=NormalizerSpec(precompiled_charsmap=_bad_trie())),
                                        r"normalizer_spec\.precompiled_charsmap is invalid: its trie points outside"),
        # the fuzz campaign's sp-byte-flip (sp-test.model, seed 777004050): a leaf past the strings
        "charsmap leaf past its strings": (dict(normalizer=NormalizerSpec(precompiled_charsmap=_leaf_past_strings())),
                                           r"precompiled_charsmap is invalid: a rule's output starts at byte 100 of 4"),
        # darts-clone's checks pass, SentencePiece's loader checks the blob's layout first
        "charsmap trie not whole blocks": (dict(normalizer=NormalizerSpec(precompiled_charsmap=_one_more_unit())),
                                           r"precompiled_charsmap is invalid: its trie has 1028 bytes, not whole "
                                           r"blocks of 1,024"),
        "charsmap of 4 bytes": (dict(normalizer=NormalizerSpec(precompiled_charsmap=bytes(4))),
                                r"precompiled_charsmap of 4 bytes is truncated"),
        "charsmap without a trie": (dict(normalizer=NormalizerSpec(precompiled_charsmap=bytes(4) + b"ab\0")),
                                    r"precompiled_charsmap is invalid: its trie has 0 bytes"),
        "charsmap without strings": (dict(normalizer=NormalizerSpec(precompiled_charsmap=_example_strings(b""))),
                                     r"precompiled_charsmap is invalid: no normalized strings follow its trie"),
        "charsmap strings without a NUL": (
            dict(normalizer=NormalizerSpec(precompiled_charsmap=_example_strings(b"b\0X"))),
            r"precompiled_charsmap is invalid: its normalized strings do not end in a NUL"),
        # the fuzz campaign's sp-byte-flip (sp-test.model, seed 151516454981): a leaf unit's flag cleared
        "charsmap node's leaf no leaf": (dict(normalizer=NormalizerSpec(precompiled_charsmap=_leaf_unflagged())),
                                         r"precompiled_charsmap is invalid: a node's leaf is no leaf unit"),
        # sp-byte-flip-header: a byte piece's text damaged ("byte piece 80x04> is invalid")
        "byte piece not <0xNN>": (dict(extra=[Piece(f"<0x{b:02X}>" if b != 0x4A else "<0x4a>", 0.0, BYTE) for b in range(256)],
                                       byte_fallback=True),
                                  r"pieces\[81\]\.piece = '<0x4a>': a byte piece is written <0xNN>, NN two upper-case hex"),
    }


def _leaf_past_strings() -> bytes:
    """The example charsmap with its first rule's output at byte 100 of its 4 bytes of strings."""
    import numpy as np

    from gputok.charsmap import _example_charsmap

    blob = bytearray(_example_charsmap())
    units = np.frombuffer(bytes(blob[4:4 + int.from_bytes(blob[:4], "little")]), dtype="<u4")
    leaf = int(np.flatnonzero(units == (1 << 31) | 0)[0])  # the leaf of 'a', value 0
    blob[4 + 4 * leaf:8 + 4 * leaf] = ((1 << 31) | 100).to_bytes(4, "little")
    return bytes(blob)


def _example_strings(strings: bytes) -> bytes:
    """The example charsmap with other normalized strings after its trie."""
    from gputok.charsmap import _example_charsmap

    blob = _example_charsmap()
    return blob[:4 + int.from_bytes(blob[:4], "little")] + strings


def _leaf_unflagged() -> bytes:
    """The example charsmap with its first leaf unit's leaf flag (bit 31) cleared."""
    import numpy as np

    from gputok.charsmap import _example_charsmap

    blob = bytearray(_example_charsmap())
    units = np.frombuffer(bytes(blob[4:4 + int.from_bytes(blob[:4], "little")]), dtype="<u4")
    leaf = int(np.flatnonzero(units >> 31 == 1)[0])
    blob[4 + 4 * leaf:8 + 4 * leaf] = (int(units[leaf]) & 0x7FFFFFFF).to_bytes(4, "little")
    return bytes(blob)


def _one_more_unit() -> bytes:
    """The example charsmap (a trie of one block) with an empty unit after its trie."""
    from gputok.charsmap import _example_charsmap

    blob = _example_charsmap()
    size = int.from_bytes(blob[:4], "little")
    return (size + 4).to_bytes(4, "little") + blob[4:4 + size] + bytes(4) + blob[4 + size:]


def _bad_trie() -> bytes:
    """The example charsmap with a unit pointing past the end of the trie."""
    from gputok.charsmap import _example_charsmap

    blob = bytearray(_example_charsmap())
    size = int.from_bytes(blob[:4], "little")
    blob[4 + size - 4:4 + size] = ((1 << 20) << 10 | 0x41).to_bytes(4, "little")  # label 'A', offset 2**20
    return bytes(blob)


@pytest.mark.parametrize("case", list(_sp_cases()))
def test_sentencepiece_model_checks_match_sentencepiece(tmp_path, case):
    """SentencePiece refuses these models at load; gputok loaded them (a repeated piece took the
    last id, a BPE one failed with 'HashMap got 4 duplicated keys')."""
    spm = pytest.importorskip("sentencepiece")
    options, message = _sp_cases()[case]
    path = _sp_model(tmp_path, **options)
    if message is None:
        reference = spm.SentencePieceProcessor(model_file=str(path))
        assert Tokenizer.from_sentencepiece(path).encode("a b ab c") == reference.encode("a b ab c")
        return
    with pytest.raises(RuntimeError):
        spm.SentencePieceProcessor(model_file=str(path))
    with pytest.raises(FileFormatError, match=r"test\.model: .*" + message + r".*SentencePiece refuses this model too"):
        Tokenizer.from_sentencepiece(path)


@pytest.mark.parametrize("field", [(1 << 29) - 1, 1 << 29, 542639937785])
def test_sentencepiece_model_field_numbers_as_protobuf(tmp_path, field):
    """A record with a field number above protobuf's 2**29 - 1 (the fuzz campaign's sp-insert-junk
    made one): SentencePiece refuses the file, and so does gputok, naming it; at 2**29 - 1 both
    load it (an unknown field)."""
    spm = pytest.importorskip("sentencepiece")
    from gputok.sentencepiece_model import _varint

    path = _sp_model(tmp_path)
    path.write_bytes(path.read_bytes() + _varint(field << 3) + _varint(7))  # a varint record
    if field < 1 << 29:
        reference = spm.SentencePieceProcessor(model_file=str(path))
        assert Tokenizer.from_sentencepiece(path).encode("a b ab") == reference.encode("a b ab")
        return
    with pytest.raises(RuntimeError):
        spm.SentencePieceProcessor(model_file=str(path))
    with pytest.raises(FileFormatError, match=rf"test\.model is not a valid SentencePiece model: field number {field}"):
        Tokenizer.from_sentencepiece(path)


def test_bpe_unk_token_outside_the_vocabulary_is_an_error():
    """huggingface loads such a file and fails on the first unknown character ('Unk token
    `<unk>` not found in the vocabulary'); gputok refuses it at load (the fuzz campaign's
    vocab-missing-unk), naming the field and the fix."""
    text = json.dumps(spec(bpe(unk_token="<unk>")))
    with pytest.raises(Exception):
        tokenizers.Tokenizer.from_str(text).encode("a z")
    with pytest.raises(FileFormatError, match=r"<string>: model\.unk_token = '<unk>': it is not in model\.vocab.*"
                                              r"add it to model\.vocab, or write null"):
        Tokenizer.from_str(text)


def test_unigram_model_without_pieces_to_match(tmp_path):
    """SentencePiece: 'no pieces are loaded' for a Unigram model of only unknown/control pieces
    (the fuzz campaign's sp-no-pieces); gputok loaded it. A BPE model of those loads in both."""
    spm = pytest.importorskip("sentencepiece")
    from gputok.sentencepiece_model import BPE, CONTROL, UNIGRAM, UNKNOWN, Piece, SentencePieceModel, serialize_model

    for model_type in (UNIGRAM, BPE):
        path = tmp_path / "test.model"
        pieces = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL)]
        path.write_bytes(serialize_model(SentencePieceModel(pieces=pieces, model_type=model_type)))
        if model_type == BPE:
            spm.SentencePieceProcessor(model_file=str(path))
            Tokenizer.from_sentencepiece(path)
            continue
        with pytest.raises(RuntimeError, match="no pieces are loaded"):
            spm.SentencePieceProcessor(model_file=str(path))
        with pytest.raises(FileFormatError, match=r"test\.model: the Unigram model has no pieces to match text with"):
            Tokenizer.from_sentencepiece(path)


def test_tiktoken_without_a_single_byte_names_the_file(tmp_path):
    """The fuzz campaign's tt-missing-byte: the message named no file."""
    lines = [base64.b64encode(bytes([b])) + b" " + str(b).encode() for b in range(256) if b != 250]
    path = tmp_path / "x.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(FileFormatError, match=r"x\.tiktoken: the BPE vocabulary lacks single-byte tokens for bytes \[250\]"):
        Tokenizer.from_tiktoken(path, pattern="cl100k")


@pytest.mark.parametrize("behavior", ["Isolated", "Removed", "MergedWithPrevious"])
def test_a_split_regex_that_never_matches_keeps_the_text_like_huggingface(behavior):
    """Only a regex whose matches alone are words (Removed + invert, tiktoken's way) may be
    refused for matching nothing; any other Split keeps the text between matches, so a separator
    the probe text lacks ("|||") must load and encode as huggingface does."""
    from tokenizers import Tokenizer as HFTokenizer

    text = json.dumps(spec(wordpiece(), pre={"type": "Split", "pattern": {"Regex": r"\|\|\|"},
                                             "behavior": behavior, "invert": False}))
    texts = ["ab|||c", "a b", "|||ab"]
    assert Tokenizer.from_str(text).encode_batch(texts) == [e.ids for e in HFTokenizer.from_str(text).encode_batch(texts)]
