"""Shared fixtures: real assets (fetched once into the cache by gputok.assets) and oracles."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # kernels run on CPU tensors in the tests

import pytest

import torch

from gputok import Tokenizer, _cpu_threads, assets


@pytest.fixture(scope="session")
def bert_vocab_path():
    return assets.fetch("bert-vocab")


@pytest.fixture(scope="session")
def bert_json_path():
    return assets.fetch("bert-tokenizer-json")


@pytest.fixture(scope="session")
def hf_bert(bert_json_path):
    """huggingface's own tokenizer for the same file, padding and truncation off (see ASSETS.md)."""
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(bert_json_path))
    hf.no_padding()
    hf.no_truncation()
    return hf


@pytest.fixture(scope="session")
def bert(bert_json_path):
    tok = Tokenizer.from_file(bert_json_path)
    tok.no_padding()  # as hf_bert: the file pads and truncates to 128
    tok.no_truncation()
    return tok


@pytest.fixture(scope="session")
def parity_lines():
    """~20 MB of real text: English (accents, symbols), the Chinese kernel docs, Shakespeare, GO terms."""
    return assets.parity_corpus().read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def sp_test_model_path():
    return str(assets.fetch("sp-test-model"))


@pytest.fixture(scope="session")
def sp_test_tokenizer(sp_test_model_path):
    return Tokenizer.from_sentencepiece(sp_test_model_path)


@pytest.fixture(scope="session")
def long_line():
    """The English corpus's lines joined by spaces into one line: 1,000,000 characters under
    ``GPUTOK_FULL=1``, else 100,000 (issue 22: lines of any length give the reference's ids)."""
    size = 1_000_000 if os.environ.get("GPUTOK_FULL") else 100_000
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        text = f.read(3 * size)
    return " ".join(text.splitlines())[:size]


@pytest.fixture(scope="session")
def hf_trained_models(parity_lines):
    """``{kind: model json}``: a vocabulary per model kind, trained once per session by huggingface's
    own trainers on the parity corpus (tests/test_components.py, tests/test_fuzz_pipelines.py)."""
    import json

    from tokenizers import Tokenizer as HFTokenizer, models as M, pre_tokenizers as P, trainers

    lines = parity_lines[::97][:4000]

    def train(model, trainer, pre_tokenizer) -> dict:
        tok = HFTokenizer(model)
        tok.pre_tokenizer = pre_tokenizer
        tok.train_from_iterator(lines, trainer)
        return json.loads(tok.to_str())["model"]

    quiet = {"show_progress": False, "special_tokens": ["<s>", "</s>", "<pad>", "<unk>", "[UNK]"]}
    return {
        "bpe_byte": train(M.BPE(), trainers.BpeTrainer(vocab_size=800, initial_alphabet=P.ByteLevel.alphabet(), **quiet),
                          P.ByteLevel(add_prefix_space=False)),
        "bpe_char": train(M.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"),
                          trainers.BpeTrainer(vocab_size=1500, continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                              limit_alphabet=300, **quiet), P.Whitespace()),
        "bpe": train(M.BPE(unk_token="[UNK]", fuse_unk=True), trainers.BpeTrainer(vocab_size=1500, limit_alphabet=300,
                                                                                 **quiet), P.Whitespace()),
        "wordpiece": train(M.WordPiece(unk_token="[UNK]"), trainers.WordPieceTrainer(vocab_size=1500, limit_alphabet=300,
                                                                                     **quiet), P.BertPreTokenizer()),
        "wordlevel": train(M.WordLevel(unk_token="[UNK]"), trainers.WordLevelTrainer(vocab_size=3000, **quiet),
                           P.Whitespace()),
        "unigram": train(M.Unigram(), trainers.UnigramTrainer(vocab_size=800, unk_token="<unk>", **quiet),
                         P.Metaspace()),
    }


@pytest.fixture
def split_small(monkeypatch):
    """Two torch threads and chunks from 2,000 characters; counts the chunks of every map."""
    monkeypatch.setattr(_cpu_threads, "MIN_CHUNK_CHARS", 2000)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    maps = []
    real_map = _cpu_threads.map_chunks

    def counting_map(fn, parts):
        maps.append(len(parts))
        return real_map(fn, parts)

    monkeypatch.setattr(_cpu_threads, "map_chunks", counting_map)
    yield maps
    torch.set_num_threads(threads)
