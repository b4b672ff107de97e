"""Shared fixtures: real assets (fetched once into the cache by gputok.assets) and oracles."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # kernels run on CPU tensors in the tests

import pytest

from gputok import Tokenizer, assets


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
    return Tokenizer.from_file(bert_json_path)


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
