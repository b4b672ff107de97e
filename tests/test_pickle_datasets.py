"""Small, deterministic pickles and ``datasets.Dataset.map`` (issue 21): a tokenizer pickles as its
source file (a few hundred bytes more), the same bytes before and after use, and datasets finds its
cached map again."""

import logging
import pickle

from pathlib import Path

import pytest

from gputok import Tokenizer, assets

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def cl100k_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("cl100k") / "tokenizer.json"
    Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").save(path)
    return path


@pytest.mark.parametrize("loader", ["json", "tiktoken", "vocab", "sentencepiece"])
def test_pickle_is_the_source_and_does_not_change_with_use(loader, cl100k_json, parity_lines):
    """Surprise 4: the Llama-3 tokenizer pickled to 61 MB, and its pickle changed after the first encode."""
    source, load = {
        "json": (cl100k_json, lambda p: Tokenizer.from_file(p)),
        "tiktoken": (assets.fetch("cl100k-tiktoken"), lambda p: Tokenizer.from_tiktoken(p, pattern="cl100k")),
        "vocab": (assets.fetch("bert-vocab"), lambda p: Tokenizer.from_vocab(p)),
        "sentencepiece": (assets.fetch("sp-test-model"), lambda p: Tokenizer.from_sentencepiece(p)),
    }[loader]
    tok = load(source)
    before = pickle.dumps(tok)
    assert len(before) <= Path(source).stat().st_size + 2048
    lines = parity_lines[:300]
    ids = tok.encode_batch(lines)
    tok(lines, return_offsets=True)
    tok.decode_batch(ids)
    tok.get_vocab(), tok.pad_token_id, len(tok)
    assert pickle.dumps(tok) == before  # caches, patterns and tables are not in it
    assert pickle.dumps(load(source)) == before  # a fresh load pickles the same: datasets' fingerprint holds
    copy = pickle.loads(before)
    assert copy.encode_batch(lines) == ids


def test_settings_survive_pickling_and_replaced_components_pickle_their_state(bert):
    tok = Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    tok.word_cache = None
    tok.model_max_length = 16
    tok.pad_token = "[MASK]"
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.word_cache is None and copy.model_max_length == 16 and copy.pad_token_id == 103
    assert copy(["a b", "a"])["input_ids"][1, -1].item() == 103
    tok.post_processor = None  # no longer what its file loads: pickled as its state
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode("a b") == tok.encode("a b")  # padded to 128, as the file says
    assert copy("a b", padding=False, return_tensors=None)["input_ids"] == bert.encode("a b", add_special_tokens=False)


def test_datasets_map_is_fingerprinted_and_cached(cl100k_json, parity_lines, tmp_path, caplog):
    """Surprise 4: datasets' cache was never reused (the pickle changed with use)."""
    from datasets.fingerprint import Hasher

    lines = [line for line in parity_lines[:2000] if line]
    text_file = tmp_path / "lines.txt"
    text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = datasets.load_dataset("text", data_files=str(text_file), cache_dir=str(tmp_path / "cache"))["train"]
    tok = Tokenizer.from_file(cl100k_json)
    fn = tok.datasets_map_fn(truncation=True, max_length=64)
    fingerprint = Hasher.hash(fn)
    first = dataset.map(fn, batched=True, batch_size=256)
    assert first.cache_files and first["input_ids"] == tok(lines, padding=False, truncation=True, max_length=64,
                                                          return_tensors=None)["input_ids"]
    assert first["attention_mask"] == [[1] * len(row) for row in first["input_ids"]]
    assert Hasher.hash(fn) == fingerprint  # the same after use
    again_fn = Tokenizer.from_file(cl100k_json).datasets_map_fn(truncation=True, max_length=64)  # a fresh load
    with caplog.at_level(logging.INFO, logger="datasets"):
        datasets.utils.logging.set_verbosity_info()
        try:
            second = dataset.map(again_fn, batched=True, batch_size=256)
        finally:
            datasets.utils.logging.set_verbosity_warning()
    assert second.cache_files == first.cache_files
    assert "Loading cached processed dataset" in caplog.text
    padded = dataset.map(tok.datasets_map_fn(padding="max_length", truncation=True, max_length=8), batched=True)
    assert {len(row) for row in padded["input_ids"]} == {8}
