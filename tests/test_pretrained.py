"""Tokenizer.from_pretrained (gputok.pretrained): model folders as transformers' AutoTokenizer reads them.

Folders are built here with ``transformers``' own ``save_pretrained`` (BERT with and without its
tokenizer.json, GPT-2's vocab.json + merges.txt, a Llama-style SentencePiece folder) and by hand
(added tokens, special tokens, model_max_length); gputok must give AutoTokenizer's ids, and never
open a socket.
"""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from gputok import Tokenizer, assets
from gputok._transformers_api import VERY_LARGE_INTEGER

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

TEXTS = ["Hello, world!", "Tokenizers on tensors: 12345 naïve café.", "  spaces  and\ttabs\n", "中文 and 😀",
         "I'm here <extra_1> and [NEW]"]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("from_pretrained opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _rows(out):
    ids, offsets = out["input_ids"].tolist(), out["row_offsets"].tolist()
    return [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def ids_of(tok, texts, **kwargs):
    return _rows(tok(texts, padding=False, **kwargs))


@pytest.fixture(scope="module")
def lines(parity_lines):
    return parity_lines[::2000] + TEXTS


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    hf = transformers.BertTokenizerFast(vocab_file=str(assets.fetch("bert-vocab")), model_max_length=16)
    # normalized=False: gputok refuses added tokens matched in the normalized text (transformers' default)
    hf.add_tokens([tokenizers.AddedToken("[NEW]", normalized=False)])
    hf.add_special_tokens({"additional_special_tokens": ["<extra_1>"]})
    hf.save_pretrained(str(folder))
    return folder


def test_bert_folder(bert_folder, lines):
    ours = Tokenizer.from_pretrained(bert_folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(bert_folder))
    assert ids_of(ours, lines) == theirs(lines)["input_ids"]
    assert ours.model_max_length == 16
    # model_max_length is the default max_length, as in transformers
    assert ids_of(ours, lines, truncation=True) == theirs(lines, truncation=True)["input_ids"]
    for token in ("[NEW]", "<extra_1>", "[CLS]"):
        assert ours.token_to_id(token) == theirs.convert_tokens_to_ids(token)


def test_normalized_added_token_matches_transformers(tmp_path, lines):
    hf = transformers.BertTokenizerFast(vocab_file=str(assets.fetch("bert-vocab")))
    hf.add_tokens(["[NEW]"])  # normalized: true, as transformers adds a token by default: matched lowercased
    hf.save_pretrained(str(tmp_path))
    ours = Tokenizer.from_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    texts = [line + " [NEW] [new]x [New]" for line in lines[:50]]
    assert ids_of(ours, texts) == theirs(texts)["input_ids"]


def test_bert_folder_without_tokenizer_json(bert_folder, lines, tmp_path):
    folder = tmp_path / "slow"
    shutil.copytree(bert_folder, folder)
    (folder / "tokenizer.json").unlink()  # transformers 5 saves no vocab.txt beside it: as an older folder
    shutil.copy(assets.fetch("bert-vocab"), folder / "vocab.txt")
    ours = Tokenizer.from_pretrained(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert ids_of(ours, lines) == theirs(lines)["input_ids"]
    assert ours.token_to_id("<extra_1>") == theirs.convert_tokens_to_ids("<extra_1>") == 30522


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory, parity_lines):
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gpt2")
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(parity_lines[:20000], vocab_size=1000, special_tokens=["<|endoftext|>"],
                                show_progress=False)
    trainer.save_model(str(folder))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "model_max_length": 1024}))
    return folder


def test_gpt2_vocab_and_merges(gpt2_folder, lines):
    ours = Tokenizer.from_pretrained(gpt2_folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(gpt2_folder))
    assert ids_of(ours, lines) == theirs(lines)["input_ids"]
    assert ours.token_to_id("<|endoftext|>") == theirs.eos_token_id
    assert ids_of(ours, ["a<|endoftext|>b"]) == theirs(["a<|endoftext|>b"])["input_ids"]


def test_sentencepiece_folder_with_bos(tmp_path, lines):
    shutil.copy(assets.fetch("mistral-sp-model"), tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
        "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 32, "legacy": False}))
    ours = Tokenizer.from_pretrained(tmp_path)
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    assert ids_of(ours, lines) == [[sp.bos_id()] + ids for ids in sp.encode(lines)]
    truncated = ids_of(ours, lines, truncation=True)
    assert max(map(len, truncated)) == 32 and all(row[0] == sp.bos_id() for row in truncated)


def test_config_added_tokens_and_specials_by_hand(tmp_path):
    shutil.copy(assets.fetch("bert-vocab"), tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "do_lower_case": True, "model_max_length": 1000000000000000019884624838656,
        "added_tokens_decoder": {"30522": {"content": "<tool>", "lstrip": False, "normalized": False, "rstrip": False,
                                           "single_word": False, "special": True}}}))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"additional_special_tokens": ["<tool>", "<img>"]}))
    tok = Tokenizer.from_pretrained(tmp_path)
    assert tok.model_max_length == VERY_LARGE_INTEGER  # transformers' "no limit" placeholder, as transformers
    assert tok.token_to_id("<tool>") == 30522 and tok.token_to_id("<img>") == 30523
    assert tok.encode("a <tool> b <img>") == [101, 1037, 30522, 1038, 30523, 102]


def test_a_single_file(tmp_path):
    tok = Tokenizer.from_pretrained(assets.fetch("bert-tokenizer-json"))
    assert tok.encode("Hello") == [101, 7592, 102]
    with pytest.raises(ValueError, match="reads a model folder"):
        Tokenizer.from_pretrained(shutil.copy(assets.fetch("bert-vocab"), tmp_path / "merges.txt"))


def test_errors_name_what_was_looked_for(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"looked for tokenizer.json / tokenizer.model .* found \['config.json'\]"):
        Tokenizer.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="reads local folders only.*huggingface-cli download meta-llama/Llama-3"):
        Tokenizer.from_pretrained("meta-llama/Llama-3")
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "tokenizer_config.json").write_text("[1]")
    with pytest.raises(ValueError, match="tokenizer_config.json: expected a JSON object"):
        Tokenizer.from_pretrained(tmp_path)
