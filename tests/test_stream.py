"""TextStream: 2 ranks x 3 DataLoader workers see every document exactly once; a stream resumed from
its state_dict yields exactly the remaining documents; shuffling is seeded."""

import json

import pytest
import torch

from gputok.data import TextStream


@pytest.fixture()
def corpus(tmp_path):
    """Two inputs (text with empty lines, JSON Lines) of numbered documents."""
    first = [f"doc {i}" if i % 7 else "" for i in range(500)]
    (tmp_path / "a.txt").write_text("\n".join(first) + "\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"text": f"json {i}"}) for i in range(301)) + "\n",
                                      encoding="utf-8")
    documents = [d for d in first if d] + [f"json {i}" for i in range(301)]
    return [tmp_path / "a.txt", tmp_path / "b.jsonl"], documents


@pytest.mark.parametrize("shuffle_buffer", [0, 50])
def test_ranks_and_workers_see_every_document_once(corpus, shuffle_buffer):
    paths, documents = corpus
    seen = []
    for rank in range(2):
        stream = TextStream(paths, rank=rank, world_size=2, shuffle_buffer=shuffle_buffer, seed=1)
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=3,
                                             multiprocessing_context="fork")
        got = list(loader)
        assert len(got) == sum(k % 6 // 3 == rank for k in range(len(documents)))  # streams 3r..3r+2 of 6
        seen += got
    assert sorted(seen) == sorted(documents) and len(seen) == len(documents)


def test_shuffle_is_seeded(corpus):
    paths, documents = corpus
    a = list(TextStream(paths, shuffle_buffer=64, seed=3))
    assert a == list(TextStream(paths, shuffle_buffer=64, seed=3)) and sorted(a) == sorted(documents)
    assert a != documents and a != list(TextStream(paths, shuffle_buffer=64, seed=4))
    stream = TextStream(paths, shuffle_buffer=64, seed=3)
    stream.set_epoch(1)
    assert list(stream) != a
    assert list(TextStream(paths)) == documents


@pytest.mark.parametrize("shuffle_buffer", [0, 40])
@pytest.mark.parametrize("taken", [0, 1, 333, 640])
def test_resume_yields_exactly_the_rest(corpus, shuffle_buffer, taken):
    paths, documents = corpus
    stream = TextStream(paths, shuffle_buffer=shuffle_buffer, seed=5, rank=1, world_size=2)
    stream.set_epoch(2)
    full = list(TextStream(paths, shuffle_buffer=shuffle_buffer, seed=5, rank=1, world_size=2).__iter__()) \
        if shuffle_buffer == 0 else None
    it = iter(stream)
    first = [next(it) for _ in range(min(taken, len(documents) // 2))]
    state = stream.state_dict()
    resumed = TextStream(paths, shuffle_buffer=shuffle_buffer, seed=5, rank=1, world_size=2)
    resumed.load_state_dict(state)
    rest = list(resumed)
    reference = TextStream(paths, shuffle_buffer=shuffle_buffer, seed=5, rank=1, world_size=2)
    reference.set_epoch(2)
    assert first + rest == list(reference)
    if full is not None:
        assert sorted(first + rest) == sorted(full)


def test_bad_arguments(corpus):
    paths, _ = corpus
    with pytest.raises(ValueError, match="rank=2, world_size=2"):
        TextStream(paths, rank=2, world_size=2)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        TextStream([paths[0], paths[0].parent / "missing.txt"])
    stream = TextStream(paths, seed=1)
    with pytest.raises(ValueError, match="seed 1"):
        TextStream(paths, seed=2).load_state_dict(stream.state_dict())


def test_parquet_and_dataset_inputs(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = [f"row {i}" for i in range(50)]
    pq.write_table(pa.table({"body": texts}), tmp_path / "p.parquet", row_group_size=7)
    got = [d for r in range(2) for d in TextStream(tmp_path / "p.parquet", text_field="body", rank=r, world_size=2)]
    assert sorted(got) == sorted(texts)
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": texts})
    assert list(TextStream(dataset, rank=0, world_size=5)) == texts[::5]
