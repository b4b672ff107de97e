"""Bad input: each case has a defined result (checked against huggingface ``tokenizers`` where it
has one) or raises an exception whose message names the problem."""

import json
import random

import pytest
import torch

from gputok import Tokenizer

CLS, SEP, UNK = 101, 102, 100


def hf_ids(hf, texts, pairs=None):
    if pairs is None:
        return [e.ids for e in hf.encode_batch(texts)]
    return [e.ids for e in hf.encode_batch(list(zip(texts, pairs)))]


@pytest.fixture(scope="module")
def raw_bert(bert_vocab_path):
    """BERT without clean_text, so U+FFFD (and NUL) survive normalization and reach the model."""
    return Tokenizer.from_vocab(bert_vocab_path, clean_text=False)


@pytest.fixture(scope="module")
def hf_raw_bert(bert_vocab_path):
    from tokenizers import BertWordPieceTokenizer

    return BertWordPieceTokenizer(str(bert_vocab_path), clean_text=False)


# ---- text that is not clean UTF-8 ---------------------------------------------------------

def test_invalid_utf8_bytes_decode_with_replacement(bert, hf_bert, raw_bert, hf_raw_bert):
    raw = [b"caf\xc3 \xff ok", b"\xe4\xb8", b"ok \xed\xa0\x80 x", bytearray(b"na\xc3\xafve \x80end")]
    decoded = [bytes(b).decode("utf-8", errors="replace") for b in raw]
    assert "\ufffd" in decoded[0] and decoded[0] != raw[0].decode("latin-1")
    assert bert.encode_batch(raw) == bert.encode_batch(decoded) == hf_ids(hf_bert, decoded)
    # A batch mixing str and bytes: each item decoded on its own.
    mixed = ["plain text", raw[0], "naïve"]
    assert bert.encode_batch(mixed) == hf_ids(hf_bert, ["plain text", decoded[0], "naïve"])
    # Where U+FFFD is not cleaned away, it is a real character: "caf\ufffd" is one unknown word.
    ok = raw_bert.token_to_id("ok")
    assert raw_bert.encode_batch([raw[0]]) == [[CLS, UNK, UNK, ok, SEP]]
    assert raw_bert.encode_batch(raw) == hf_ids(hf_raw_bert, decoded)


def test_non_text_input_raises(bert):
    with pytest.raises(TypeError, match="text 1 is a int; expected str or bytes"):
        bert.encode_batch(["fine", 3])
    with pytest.raises(TypeError, match="text 0 is a NoneType"):
        bert(["x"], [None])


def test_nul_bytes_are_dropped_like_huggingface(bert, hf_bert):
    texts = ["a\x00b c\x00 \x00", "\x00", "hello\x00world", "x\x00[MASK]\x00y", "\x00\x00 \x00",
             "na\x00ïve\x00" * 3, "中\x00文"]
    got = bert.encode_batch(texts)
    assert got == hf_ids(hf_bert, texts)
    assert got[1] == [CLS, SEP] and got[2] == bert.encode("helloworld")
    assert bert.encode_batch([t.encode() for t in texts]) == got


def test_lone_surrogates_are_replacement_characters(bert, hf_bert, raw_bert, hf_raw_bert):
    texts = ["a\ud800b \udfff x", "\ud83d\ude42 pair of halves", "\udc80", "end\ud800"]
    replaced = ["".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in t) for t in texts]
    assert replaced[1].startswith("\ufffd\ufffd ")
    assert bert.encode_batch(texts) == bert.encode_batch(replaced) == hf_ids(hf_bert, replaced)
    # U+FFFD survives without clean_text: the surrogate is not dropped, it is one unknown character.
    got = raw_bert.encode_batch(texts)
    assert got == raw_bert.encode_batch(replaced) == hf_ids(hf_raw_bert, replaced)
    assert got != raw_bert.encode_batch([t.replace("\ud800", "").replace("\udfff", "") for t in texts])
    assert got[2] == [CLS, UNK, SEP]
    # Offsets count the surrogate as one character, as the U+FFFD it becomes.
    offsets = bert(["a\ud800 bc"], return_offsets=True)["offsets"][0].tolist()
    assert offsets == bert(["a\ufffd bc"], return_offsets=True)["offsets"][0].tolist()
    assert [3, 5] in offsets
    # and in pairs too
    assert bert.encode_batch(["x"], ["\udfffy z"]) == bert.encode_batch(["x"], ["\ufffdy z"])


def test_ten_megabyte_line(bert, hf_bert, parity_lines):
    """One 10 MB line of real words (plus Chinese, accents, a >100-character word and NULs) equals
    the concatenated huggingface encodings of its words (BERT pre-tokenization is per word)."""
    rng = random.Random(0)
    corpus_words = sorted({w for line in parity_lines[::50] for w in line.split()})
    words = rng.sample(corpus_words, 3000) + ["x" * 150, "été", "naïve", "中文字", "a\x00b", "[MASK]", "Ünïcödé"]
    encoded = {w: e.ids for w, e in zip(words, hf_bert.encode_batch(words, add_special_tokens=False))}
    sequence, size = [], 0
    while size < 10_000_000:
        w = rng.choice(words)
        sequence.append(w)
        size += len(w) + 1
    line = " ".join(sequence)
    assert len(line) >= 10_000_000
    expected = [CLS] + [i for w in sequence for i in encoded[w]] + [SEP]
    got = bert.encode_batch([line])
    assert len(got) == 1 and len(got[0]) == len(expected)
    assert got[0] == expected


# ---- empty things -------------------------------------------------------------------------

def test_empty_batch(bert):
    assert bert.encode_batch([]) == []
    assert bert.encode_batch([], []) == []
    out = bert([])
    assert set(out) == {"input_ids", "attention_mask", "token_type_ids"}
    for value in out.values():
        assert value.shape == (0, 0) and value.dtype == torch.int64
    assert bert([], padding="max_length", max_length=8)["input_ids"].shape == (0, 8)
    assert bert([], return_offsets=True)["offsets"].shape == (0, 0, 2)
    flat = bert([], padding=False, return_offsets=True)
    assert flat["input_ids"].shape == (0,) and flat["row_offsets"].tolist() == [0]
    assert flat["offsets"].shape == (0, 2)
    over = bert([], truncation=True, max_length=8, return_overflowing_tokens=True)
    assert over["input_ids"].shape == (0, 0) and over["overflow_to_sample_mapping"].shape == (0,)
    assert bert.decode_batch([]) == [] and bert.decode([]) == ""


def test_empty_and_whitespace_only_texts(bert, hf_bert):
    texts = ["", " ", "\t\n  ", "\u3000", "\u200b", "\r\n", "\x00\x00", "\u00a0\u2028"]
    assert hf_ids(hf_bert, texts) == [[CLS, SEP]] * len(texts)
    assert bert.encode_batch(texts) == [[CLS, SEP]] * len(texts)
    assert bert.encode_batch(texts, add_special_tokens=False) == [[]] * len(texts)
    mixed = ["", "hello", "  ", "world !"]
    assert bert.encode_batch(mixed) == hf_ids(hf_bert, mixed)
    assert bert.encode_batch(["hello", ""], ["", " "]) == hf_ids(hf_bert, ["hello", ""], ["", " "])
    out = bert(["", "hi"], return_offsets=True)
    assert out["input_ids"].tolist() == [[CLS, SEP, 0], [CLS, bert.token_to_id("hi"), SEP]]
    assert out["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert out["offsets"][0].tolist() == [[0, 0]] * 3
    only_empty = bert([""], return_offsets=True, add_special_tokens=False)
    assert only_empty["input_ids"].shape == (1, 0) and only_empty["offsets"].shape == (1, 0, 2)


# ---- broken vocabulary and tokenizer files ------------------------------------------------

def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_vocab_without_unk_token(tmp_path):
    path = _write(tmp_path, "vocab.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    with pytest.raises(ValueError, match=r"vocab\.txt: the WordPiece unk token '\[UNK\]' is not in the vocabulary"):
        Tokenizer.from_vocab(path)
    with pytest.raises(ValueError, match=r"'<unk>' is not in the vocabulary"):
        Tokenizer.from_vocab(path, unk_token="<unk>")
    no_cls = _write(tmp_path, "vocab2.txt", "[PAD]\n[UNK]\n[SEP]\nhello\n")
    with pytest.raises(ValueError, match=r"cls_token='\[CLS\]' is not in"):
        Tokenizer.from_vocab(no_cls)


def test_empty_or_unreadable_vocab_file(tmp_path):
    with pytest.raises(ValueError, match=r"vocabulary .*empty\.txt is empty"):
        Tokenizer.from_vocab(_write(tmp_path, "empty.txt", ""))
    # One empty line is a vocabulary of one empty token: it has none of the special tokens.
    with pytest.raises(ValueError, match=r"cls_token='\[CLS\]' is not in .*newline\.txt"):
        Tokenizer.from_vocab(_write(tmp_path, "newline.txt", "\n"))
    with pytest.raises(ValueError, match="cannot read vocabulary"):
        Tokenizer.from_vocab(_write(tmp_path, "latin1.txt", b"[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n"))
    with pytest.raises(ValueError, match="cannot read vocabulary .*missing-vocab.txt"):
        Tokenizer.from_vocab(tmp_path / "missing-vocab.txt")


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
def test_vocab_lines_end_at_newline_as_huggingface_reads_them(tmp_path, newline):
    """huggingface reads a vocab.txt's lines as Rust's lines() does: they end at "\\n" (a "\\r" before
    it is stripped with the trailing whitespace), so a file of "\\r" alone is one long token and it
    fails with 'sep_token not found'. gputok read it in text mode, where "\\r" ends a line too, and
    loaded it (the fuzz campaign's vt-line-endings). U+001C..U+001F are not whitespace to Rust."""
    from tokenizers import BertWordPieceTokenizer

    path = _write(tmp_path, "vocab.txt", newline.join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##s", "x\x1c"]) + newline)
    if newline == "\r":
        with pytest.raises(Exception, match="sep_token not found"):
            BertWordPieceTokenizer(str(path))
        with pytest.raises(ValueError, match=r"cls_token='\[CLS\]' is not in .*vocab\.txt; it ends lines with '\\r' "
                                             r"alone, which huggingface \(and gputok\) does not take as a line end"):
            Tokenizer.from_vocab(path)
        return
    reference = BertWordPieceTokenizer(str(path))
    tok = Tokenizer.from_vocab(path)
    assert tok.token_to_id("x\x1c") == reference.token_to_id("x\x1c") == 6
    assert tok.encode_batch(["Hellos hi"]) == [reference.encode("Hellos hi").ids] == [[2, 4, 5, 1, 3]]


def test_small_vocab_file_works(tmp_path):
    """The happy path of the same files, so the failures above are about what they name."""
    path = _write(tmp_path, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##s\n")
    tok = Tokenizer.from_vocab(path)
    assert tok.encode_batch(["Hellos hi"]) == [[2, 4, 5, 1, 3]]


@pytest.fixture(scope="module")
def bert_spec(bert_json_path):
    return json.loads(open(bert_json_path, encoding="utf-8").read())


def _spec_file(tmp_path, spec, name="tokenizer.json"):
    return _write(tmp_path, name, spec if isinstance(spec, str) else json.dumps(spec))


def test_malformed_tokenizer_json(tmp_path, bert_spec):
    with pytest.raises(ValueError, match=r"not-json\.json is not valid JSON"):
        Tokenizer.from_file(_spec_file(tmp_path, "{ this is not json", "not-json.json"))
    with pytest.raises(ValueError, match=r"is not valid JSON"):
        Tokenizer.from_file(_spec_file(tmp_path, "", "empty.json"))
    for no_model in ({k: v for k, v in bert_spec.items() if k != "model"}, [1, 2], {"model": "WordPiece"}):
        with pytest.raises(ValueError, match=r"is not a tokenizer\.json: it has no 'model' object"):
            Tokenizer.from_file(_spec_file(tmp_path, no_model))
    fancy_model = dict(bert_spec, model={"type": "FancyModel", "vocab": {"a": 0}})
    with pytest.raises(ValueError, match=r"model type 'FancyModel' is not supported; supported: \['BPE', 'Unigram', 'WordLevel', 'WordPiece'\]"):
        Tokenizer.from_file(_spec_file(tmp_path, fancy_model))
    bpe = dict(bert_spec, model={"type": "BPE", "vocab": {}, "merges": []})
    with pytest.raises(ValueError, match=r"BPE model in tokenizer.json needs a non-empty 'vocab'"):
        Tokenizer.from_file(_spec_file(tmp_path, bpe))
    unknown_norm = dict(bert_spec, normalizer={"type": "FancyNormalizer"})
    with pytest.raises(ValueError, match=r"unknown normalizer type 'FancyNormalizer'; known types: \['BertNormalizer', "):
        Tokenizer.from_file(_spec_file(tmp_path, unknown_norm))
    unknown_pre = dict(bert_spec, pre_tokenizer={"type": "FancySplit"})
    with pytest.raises(ValueError, match=r"unknown pre_tokenizer type 'FancySplit'"):
        Tokenizer.from_file(_spec_file(tmp_path, unknown_pre))
    unknown_post = dict(bert_spec, post_processor={"type": "FancyProcessing"})
    with pytest.raises(ValueError, match=r"unknown post_processor type 'FancyProcessing'"):
        Tokenizer.from_file(_spec_file(tmp_path, unknown_post))
    bad_vocab = dict(bert_spec, model=dict(bert_spec["model"], vocab=["[UNK]", "a"]))
    with pytest.raises(ValueError, match=r"model\.vocab = \['\[UNK\]', 'a'\]: expected a JSON object; write the vocabulary as \{.token.: id"):
        Tokenizer.from_file(_spec_file(tmp_path, bad_vocab))
    no_unk = dict(bert_spec, added_tokens=[], model=dict(bert_spec["model"], vocab={"a": 0, "b": 1}))
    with pytest.raises(ValueError, match=r"unk token '\[UNK\]' is not in the vocabulary \(2 tokens\)"):
        Tokenizer.from_file(_spec_file(tmp_path, no_unk))
    bad_added = dict(bert_spec, added_tokens=[{"content": "[X]"}])
    with pytest.raises(ValueError, match=r"added_tokens\[0\] = \{'content': '\[X\]'\}: an added token needs 'id'"):
        Tokenizer.from_file(_spec_file(tmp_path, bad_added))
    with pytest.raises(ValueError, match=r"<string> is not a tokenizer\.json"):
        Tokenizer.from_str("{}")


def test_missing_and_unreadable_tokenizer_file(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read tokenizer file .*does-not-exist\.json"):
        Tokenizer.from_file(tmp_path / "does-not-exist.json")
    with pytest.raises(ValueError, match="cannot read tokenizer file"):
        Tokenizer.from_file(tmp_path)  # a directory
    with pytest.raises(ValueError, match="cannot read tokenizer file"):
        Tokenizer.from_file(_write(tmp_path, "bin.json", b"\xff\xfe{}"))


# ---- bad call options ---------------------------------------------------------------------

def test_pair_count_mismatch(bert):
    with pytest.raises(ValueError, match="got 2 texts but 1 text_pair entries"):
        bert(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="got 1 texts but 2 text_pair entries"):
        bert.encode_batch(["a"], ["x", "y"])
    with pytest.raises(ValueError, match="got 0 texts but 1 text_pair entries"):
        bert([], ["x"])


@pytest.mark.parametrize("options, message", [
    (dict(padding="longest_first"), r"padding='longest_first'; choose True, False or one of"),
    (dict(padding="yes"), r"padding='yes'"),
    (dict(truncation="only_third", max_length=8), r"truncation='only_third'; choose True, False or one of"),
    (dict(truncation=True), r"truncation='longest_first' / padding='longest' need max_length="),
    (dict(truncation="only_first"), r"need max_length="),
    (dict(padding="max_length"), r"padding='max_length' need max_length="),
    (dict(padding_side="middle"), r"padding_side='middle'; choose 'left' or 'right'"),
    (dict(truncation=True, max_length=1), r"max_length=-1 leaves no room for the special tokens"),
    (dict(truncation=True, max_length=5, stride=3, return_overflowing_tokens=True),
     r"stride=3 must be smaller than the tokens left per row"),
    (dict(truncation="only_second", max_length=8), r"truncation='only_second' needs pairs of texts"),
])
def test_bad_options(bert, options, message):
    with pytest.raises(ValueError, match=message):
        bert(["hello world, this is a longer sentence"], **options)


def test_bad_pair_truncation(bert):
    with pytest.raises(ValueError, match="overflowing rows are not defined for pairs with truncation='longest_first'"):
        bert(["a b c d e f"], ["g h i j"], truncation=True, max_length=6, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="truncation='only_second' cannot fit a pair into max_length"):
        bert(["a b c d e f g h"], ["i"], truncation="only_second", max_length=6)


def test_decode_out_of_range(bert):
    with pytest.raises(ValueError, match=r"token id 99999 is outside the vocabulary \(size 30522\)"):
        bert.decode([CLS, 99999, SEP])
    with pytest.raises(ValueError, match="token id -1 is outside the vocabulary"):
        bert.decode(torch.tensor([-1]))
    with pytest.raises(ValueError, match="token id 30522 is outside"):
        bert.decode_batch([[7592], [30522]])
    last = bert.vocab_size - 1  # the largest valid id decodes
    assert bert.decode([7592, last]) == "hello" + bert.id_to_token(last).removeprefix("##")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a torch without CUDA")
def test_cuda_device_without_cuda_is_a_clear_error(bert):
    import gputok

    message = r"device='cuda' but this torch has no usable CUDA device .*pass device='cpu'"
    with pytest.raises(ValueError, match=message):
        bert(["hello"], device="cuda")
    with pytest.raises(ValueError, match=message):
        gputok.train(iter(["a b c"]), preset="byte-level-bpe", vocab_size=300, device="cuda", progress=False)
    with pytest.raises(ValueError, match=message):
        gputok.train_from_counts({"ab": 3}, model="bpe", vocab_size=300, device="cuda")
    with pytest.raises(ValueError, match=r"device='gpu' is not a torch device"):
        bert(["hello"], device="gpu")
