"""``TextStream``: a torch IterableDataset of a corpus's documents, split across ranks and workers.

The documents are those ``encode_corpus`` encodes (``gputok.corpus``: the non-empty records of
text, JSON Lines, Parquet and Arrow files or a ``datasets.Dataset``, bad records by the same
policy), numbered in order across the inputs. With ``world_size`` ranks (``torch.distributed``,
or given) and ``num_workers`` DataLoader workers per rank, the stream of rank ``r``, worker ``w``
takes the documents ``k`` with ``k % (world_size * num_workers) == r * num_workers + w``: every
document goes to exactly one stream, whatever the numbers. Each stream reads all inputs and
keeps its share (reading is cheap next to tokenizing and training; a stream holds one block of
input at a time).

``shuffle_buffer=n`` shuffles each stream through a buffer of ``n`` documents with a
``random.Random`` seeded by ``seed``, the epoch (:meth:`set_epoch`) and the stream, so an order
is reproducible. :meth:`state_dict` / :meth:`load_state_dict` follow torchdata's
``StatefulDataLoader`` protocol (called on the dataset inside each worker): the state is the
epoch and how many documents the stream has yielded, and a loaded stream replays its
deterministic order and skips that many, so it yields exactly the remaining documents (replay
costs reading, not tokenizing).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import torch

from .corpus import RecordReader, sources


class TextStream(torch.utils.data.IterableDataset):
    """Documents (``str``) of ``inputs``, sharded by rank and DataLoader worker; see the module doc.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.txt")
    >>> _ = open(path, "w").write("a\\nb\\nc\\nd\\ne\\n")
    >>> list(TextStream(path, rank=1, world_size=2))
    ['b', 'd']
    >>> stream = TextStream(path, shuffle_buffer=3, seed=0)
    >>> it = iter(stream); first = [next(it), next(it)]
    >>> resumed = TextStream(path, shuffle_buffer=3, seed=0); resumed.load_state_dict(stream.state_dict())
    >>> sorted(first + list(resumed))
    ['a', 'b', 'c', 'd', 'e']
    """

    def __init__(self, inputs: Any, *, text_field: str = "text", mode: str = "lines",
                 input_format: str | None = None, on_bad_record: str = "replace", shuffle_buffer: int = 0,
                 seed: int = 0, rank: int | None = None, world_size: int | None = None) -> None:
        self.sources = sources(inputs, input_format=input_format)
        self.reader = RecordReader(text_field=text_field, mode=mode, on_bad_record=on_bad_record)
        if shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer={shuffle_buffer}; give 0 (no shuffling) or a buffer size")
        if (rank is None) != (world_size is None) or world_size is not None and not 0 <= rank < world_size:
            raise ValueError(f"rank={rank}, world_size={world_size}; give both, with 0 <= rank < world_size")
        self.shuffle_buffer, self.seed, self.rank, self.world_size = shuffle_buffer, seed, rank, world_size
        self.epoch, self._yielded, self._skip = 0, 0, 0

    def set_epoch(self, epoch: int) -> None:
        """A new shuffled order for epoch ``epoch`` (call it before each epoch, as with DistributedSampler)."""
        self.epoch = epoch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "seed": self.seed, "yielded": self._yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("seed", self.seed) != self.seed:
            raise ValueError(f"the state is of a stream with seed {state['seed']}, this one has seed {self.seed}")
        self.epoch, self._skip = state["epoch"], state["yielded"]

    def _stream(self) -> tuple[int, int]:
        """(this stream's number, the number of streams)."""
        if self.world_size is not None:
            rank, world = self.rank, self.world_size
        elif torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            rank, world = 0, 1
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def _documents(self, stream: int, streams: int) -> Iterator[str]:
        k = 0  # index of the next document across all inputs
        for source in self.sources:
            for records in self.reader.batches(source):
                texts = [t for t in records if t]
                first = (stream - k) % streams
                yield from texts[first::streams]
                k += len(texts)

    def __iter__(self) -> Iterator[str]:
        stream, streams = self._stream()
        documents = self._documents(stream, streams)
        if self.shuffle_buffer:
            documents = _shuffled(documents, self.shuffle_buffer,
                                  random.Random(f"{self.seed}/{self.epoch}/{stream}/{streams}"))
        skip, self._skip = self._skip, 0
        self._yielded = 0
        for text in documents:
            self._yielded += 1
            if self._yielded > skip:
                yield text


def _shuffled(items: Iterator[str], size: int, rng: random.Random) -> Iterator[str]:
    """``items`` through a shuffle buffer of ``size``: each new item takes a random slot's place."""
    buffer: list[str] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        slot = rng.randrange(size)
        yield buffer[slot]
        buffer[slot] = item
    rng.shuffle(buffer)
    yield from buffer
