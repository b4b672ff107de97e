"""``gputok.data.Collate`` keeps every field of the rows (issue 21): rows as texts, dicts and
tuples; numbers, lists, arrays and tensors become tensors, anything else a list; ``label`` becomes
``labels`` as transformers' collators name it."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from gputok.data import Collate


def test_multi_label_rows_keep_their_labels(bert):
    """Surprise 1: a label holding a list (multi-label rows) was dropped without a word."""
    rows = [{"text": "a good film", "label": [1, 0, 1]}, {"text": "bad", "label": [0, 1, 0]}]
    batch = Collate(bert)(rows)
    assert batch["labels"].tolist() == [[1, 0, 1], [0, 1, 0]] and batch["labels"].dtype == torch.int64
    assert "label" not in batch
    tensors = [{"text": "x", "label_ids": torch.tensor([0.5, 1.0])}, {"text": "y", "label_ids": torch.tensor([1.0, 0.0])}]
    assert Collate(bert)(tensors)["labels"].tolist() == [[0.5, 1.0], [1.0, 0.0]]


def test_tuple_rows_by_position(bert):
    """Surprise 1: ``(text, label)`` rows failed with "text 0 is a tuple"."""
    batch = Collate(bert)([("hello world", 1), ("bye", 0)])
    assert torch.equal(batch["input_ids"], bert(["hello world", "bye"])["input_ids"])
    assert batch["labels"].tolist() == [1, 0]
    triples = [("what is it ?", "a cat", 2), ("who ?", "me", 0)]
    batch = Collate(bert, fields=("text", "pair", "label"))(triples)
    expected = bert(["what is it ?", "who ?"], ["a cat", "me"])
    assert torch.equal(batch["input_ids"], expected["input_ids"])
    assert torch.equal(batch["token_type_ids"], expected["token_type_ids"])
    assert batch["labels"].tolist() == [2, 0]
    with pytest.raises(ValueError, match="fields="):
        Collate(bert)([("a", "b", 1)])
    with pytest.raises(ValueError, match="names no 'text'"):
        Collate(bert, fields=("sentence", "label"))


def test_fields_become_tensors_or_lists(bert):
    rows = [{"text": "one two", "tags": [1, 2, 3], "emb": np.ones(4, dtype=np.float32), "id": "r0", "meta": {"k": 1},
             "score": np.float64(0.5), "flag": True},
            {"text": "three", "tags": [4], "emb": np.zeros(4, dtype=np.float32), "id": "r1", "meta": None,
             "score": np.float64(1.5), "flag": False}]
    batch = Collate(bert, rename={})(rows)
    assert batch["tags"].tolist() == [[1, 2, 3], [4, 0, 0]]  # padded with 0 (not a label)
    assert batch["emb"].shape == (2, 4) and batch["emb"].dtype == torch.float32
    assert batch["id"] == ["r0", "r1"] and batch["meta"] == [{"k": 1}, None]
    assert batch["score"].tolist() == [0.5, 1.5] and batch["flag"].tolist() == [True, False]
    token_labels = [{"text": "a b c", "label": [3, 4, 5]}, {"text": "d", "label": [6]}]
    assert Collate(bert)(token_labels)["labels"].tolist() == [[3, 4, 5], [6, -100, -100]]  # as transformers pads labels
    assert Collate(bert, rename={})(token_labels)["label"].shape == (2, 3)  # rename={} keeps the name
    with pytest.raises(ValueError, match="overwrite"):
        Collate(bert)([{"text": "a", "input_ids": [1]}])


def test_dataloader_multi_label_tuples_and_string_metadata(bert):
    """The DataLoader test the issue asks for: multi-label dict rows with string metadata, and
    tuple rows, through forked workers, equal to the collate function called in this process."""
    rows = [{"text": f"sentence number {i} is here", "label": [i % 2, (i // 2) % 2, 1], "source": f"doc{i}"}
            for i in range(24)]
    collate = Collate(bert, max_length=16)
    loader = DataLoader(rows, batch_size=8, num_workers=2, multiprocessing_context="fork", collate_fn=collate)
    got = list(loader)
    assert len(got) == 3
    for k, batch in enumerate(got):
        want = collate(rows[8 * k:8 * k + 8])
        assert torch.equal(batch["input_ids"], want["input_ids"])
        assert batch["labels"].shape == (8, 3) and torch.equal(batch["labels"], want["labels"])
        assert batch["source"] == [f"doc{i}" for i in range(8 * k, 8 * k + 8)]
    pairs = [(f"text {i}", i % 4) for i in range(10)]
    batches = list(DataLoader(pairs, batch_size=5, collate_fn=Collate(bert)))
    assert [b["labels"].tolist() for b in batches] == [[0, 1, 2, 3, 0], [1, 2, 3, 0, 1]]
