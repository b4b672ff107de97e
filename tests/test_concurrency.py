"""One tokenizer shared by threads, and by DataLoader worker processes through ``gputok.data.Collate``
(forked, and spawned: those receive the tokenizer pickled)."""

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.utils.data import DataLoader

from gputok import Tokenizer, assets
from gputok.data import Collate

THREADS = 8


@pytest.fixture(scope="module")
def real_lines(parity_lines):
    english = [line for line in parity_lines[3::157] if line.strip()][:1400]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::80][:200]
    lines = english + chinese
    lines[::7] = [line + " [MASK] café" for line in lines[::7]]  # added tokens and accents in the mix
    return lines


def _encode_all_ways(tok, chunk, pairs):
    """Several entry points with different options, so threads interleave different code paths."""
    ids = tok.encode_batch(chunk)
    padded = tok(chunk, truncation=True, max_length=32, return_offsets=True, padding_side="left")
    pair = tok(chunk, pairs, truncation="only_first", max_length=48, stride=8, return_overflowing_tokens=True)
    return ids, {k: v.clone() for k, v in padded.items()}, {k: v.clone() for k, v in pair.items()}


def _same(a, b):
    ids_a, padded_a, pair_a = a
    ids_b, padded_b, pair_b = b
    assert ids_a == ids_b
    for x, y in ((padded_a, padded_b), (pair_a, pair_b)):
        assert x.keys() == y.keys()
        for key in x:
            assert torch.equal(x[key], y[key]), key


def test_one_tokenizer_eight_threads(bert_json_path, real_lines):
    # A fresh tokenizer: its lazily built per-device tables are first built under contention.
    tok = Tokenizer.from_file(bert_json_path)
    chunks = [real_lines[i::THREADS][:150] for i in range(THREADS)]
    pairs = [[line[:12] for line in reversed(chunk)] for chunk in chunks]
    assert len({tuple(c) for c in chunks}) == THREADS
    rounds = 3
    start = threading.Barrier(THREADS)

    def work(i):
        start.wait()
        return [_encode_all_ways(tok, chunks[i], pairs[i]) for _ in range(rounds)]

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(work, range(THREADS)))
    reference = Tokenizer.from_file(bert_json_path)
    for i in range(THREADS):
        expected = _encode_all_ways(reference, chunks[i], pairs[i])
        assert len(results[i]) == rounds
        for got in results[i]:
            _same(got, expected)
    # The threads really did different work.
    assert results[0][0][0] != results[1][0][0]


def test_threads_match_huggingface(bert, hf_bert, real_lines):
    chunks = [real_lines[i::THREADS][:60] for i in range(THREADS)]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        got = list(pool.map(bert.encode_batch, chunks * 3))
    for i, ids in enumerate(got):
        assert ids == [e.ids for e in hf_bert.encode_batch(chunks[i % THREADS])]


def _batches(loader):
    return [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()} for batch in loader]


def _assert_batches_equal(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.keys() == e.keys()
        for key in e:
            if not isinstance(e[key], torch.Tensor):  # fields passed through as lists (string metadata)
                assert g[key] == e[key], key
                continue
            assert g[key].dtype == e[key].dtype and torch.equal(g[key], e[key]), key


def test_dataloader_fork_workers(bert, real_lines):
    lines = [" ".join(real_lines[i:i + 1 + i % 5]) for i in range(300)]  # 1 to 5 lines each
    collate = Collate(bert, max_length=64)
    loader = DataLoader(lines, batch_size=16, num_workers=2, multiprocessing_context="fork",
                        collate_fn=collate)
    got = _batches(loader)
    expected = [collate(lines[i:i + 16]) for i in range(0, len(lines), 16)]
    _assert_batches_equal(got, expected)
    # and those are the tokenizer's own truncated, padded rows
    direct = bert(lines[:16], truncation=True, max_length=64)
    assert torch.equal(got[0]["input_ids"], direct["input_ids"])
    assert set(got[0]) == {"input_ids", "attention_mask", "token_type_ids"}
    widths = {b["input_ids"].shape[1] for b in got}
    assert max(widths) == 64 and min(widths) < 64  # some batches were cut, some were not
    assert all(int(b["input_ids"][:, 0].eq(101).sum()) == b["input_ids"].shape[0] for b in got)


def test_collate_dict_samples_stack_labels(bert, real_lines):
    samples = [{"text": line, "label": i % 3, "weight": 0.5 * i, "flag": i % 2 == 0, "id": f"s{i}"}
               for i, line in enumerate(real_lines[:40])]
    collate = Collate(bert, max_length=32)
    batch = collate(samples[:8])
    assert batch["labels"].tolist() == [0, 1, 2, 0, 1, 2, 0, 1] and batch["labels"].dtype == torch.int64
    assert batch["weight"].tolist() == [0.5 * i for i in range(8)]
    assert batch["flag"].tolist() == [True, False] * 4 and batch["flag"].dtype == torch.bool
    assert batch["id"] == [f"s{i}" for i in range(8)] and "text" not in batch and "label" not in batch
    assert torch.equal(batch["input_ids"], bert(real_lines[:8], truncation=True, max_length=32)["input_ids"])
    # the same through fork workers
    loader = DataLoader(samples, batch_size=8, num_workers=2, multiprocessing_context="fork", collate_fn=collate)
    _assert_batches_equal(_batches(loader), [collate(samples[i:i + 8]) for i in range(0, 40, 8)])
    # pairs from another field, and a custom text field
    pairs = [{"q": "what is it ?", "doc": line, "label": 1} for line in real_lines[:4]]
    paired = Collate(bert, text_field="q", pair_field="doc", max_length=24, truncation="only_second")(pairs)
    expected = bert(["what is it ?"] * 4, real_lines[:4], truncation="only_second", max_length=24)
    assert torch.equal(paired["input_ids"], expected["input_ids"])
    assert torch.equal(paired["token_type_ids"], expected["token_type_ids"])
    assert paired["labels"].tolist() == [1] * 4
    assert bool(paired["token_type_ids"].eq(1).any())


FAMILIES = {
    "wordpiece (tokenizer.json)": lambda: Tokenizer.from_file(assets.fetch("bert-tokenizer-json")),
    "byte-level BPE (.tiktoken)": lambda: Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2"),
    "SentencePiece BPE": lambda: Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model")),
    "SentencePiece Unigram": lambda: Tokenizer.from_sentencepiece(assets.fetch("sp-test-model")),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_pickles(family, real_lines, tmp_path):
    """A spawned DataLoader worker gets the tokenizer pickled: every family must survive that,
    encode the same, and still save the same file (the merges to save are derived on save)."""
    tok = FAMILIES[family]()
    expected = tok.encode_batch(real_lines[:200])
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode_batch(real_lines[:200]) == expected
    if family.startswith("SentencePiece BPE"):  # derived merges, reasonably fast to write twice
        tok.save(tmp_path / "a.json")
        copy.save(tmp_path / "b.json")
        assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_dataloader_spawn_workers(real_lines):
    tok = FAMILIES["byte-level BPE (.tiktoken)"]()
    lines = real_lines[:64]
    collate = Collate(tok, max_length=32)
    loader = DataLoader(lines, batch_size=16, num_workers=1, multiprocessing_context="spawn", collate_fn=collate)
    _assert_batches_equal(_batches(loader), [collate(lines[i:i + 16]) for i in range(0, len(lines), 16)])
