"""Token shards on disk: Megatron's indexed dataset, flat memmap files, and reading them back.

A shard holds the token ids of a run of documents in one or two forms:

- ``megatron``: ``NAME.bin`` + ``NAME.idx``, the ``MMIDIDX`` indexed dataset that megatron-core's
  ``IndexedDataset(prefix)`` reads (``megatron/core/datasets/indexed_dataset.py``): the ``.bin``
  is the ids back to back; the ``.idx`` is the header ``b"MMIDIDX\\x00\\x00"``, version ``<Q`` 1,
  the dtype code ``<B`` (uint16 8, int32 4), the sequence count ``<Q``, the document count + 1
  ``<Q``, then int32 sequence lengths, int64 byte pointers and int64 document indices (one
  sequence per document, as ``preprocess_data.py`` writes without sentence splitting). Its dtype
  follows Megatron's rule (``DType.optimal_dtype``): uint16 under 65500 ids, else int32 (it has no
  uint32 code).
- ``flat``: ``NAME.tokens``, the ids back to back in uint16 (vocabularies up to 65536) or uint32,
  the nanoGPT / Dolma layout, plus ``NAME.docs.npy``, int64 document offsets into it.

:class:`ShardWriter` streams a shard to temporary files beside its final names, with sha256
computed on the way, and moves them into place when the shard is done (a killed run never leaves a
half shard under a final name). :class:`TokenShards` reads a directory back (memmap: no copy), by
document or as a torch Dataset of fixed-length samples in a seeded order.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

MANIFEST = "manifest.json"
FORMATS = ("megatron", "flat")
DTYPES = ("auto", "uint16", "uint32", "int32")
_MEGATRON_HEADER = b"MMIDIDX\x00\x00"
_MEGATRON_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4, np.dtype(np.int64): 5}
#: Megatron's DType.optimal_dtype: uint16 below this many ids.
_MEGATRON_UINT16_LIMIT = 65500


def shard_dtypes(vocab_size: int, formats: Sequence[str], dtype: str = "auto") -> dict[str, np.dtype]:
    """The id dtype of each output format for a vocabulary of ``vocab_size`` ids.

    >>> {k: str(v) for k, v in shard_dtypes(50257, ["megatron", "flat"]).items()}
    {'megatron': 'uint16', 'flat': 'uint16'}
    >>> {k: str(v) for k, v in shard_dtypes(100277, ["megatron", "flat"]).items()}
    {'megatron': 'int32', 'flat': 'uint32'}
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}; choose one of {DTYPES}")
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"formats={list(formats)!r}; choose one or more of {FORMATS}")
    if dtype == "uint16" and vocab_size > 1 << 16:
        raise ValueError(f"dtype uint16 holds ids below 65536, but this tokenizer has {vocab_size} ids; "
                         "use dtype 'auto' (or --dtype auto), 'uint32' or 'int32'")
    out = {}
    for fmt in formats:
        if dtype != "auto":
            chosen = np.dtype(dtype)
        elif fmt == "megatron":
            chosen = np.dtype(np.uint16 if vocab_size < _MEGATRON_UINT16_LIMIT else np.int32)
        else:
            chosen = np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)
        if fmt == "megatron" and chosen not in _MEGATRON_CODES:
            raise ValueError(f"Megatron's indexed dataset has no {chosen} dtype; use int32 (or dtype 'auto')")
        out[fmt] = chosen
    return out


def shard_name(index: int) -> str:
    return f"shard_{index:05d}"


def _shard_files(fmt: str, name: str) -> list[str]:
    return [f"{name}.bin", f"{name}.idx"] if fmt == "megatron" else [f"{name}.tokens", f"{name}.docs.npy"]


class _HashedFile:
    """A file written through a sha256 digest."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb")
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self.file.write(data)
        self.digest.update(data)
        self.size += len(data)

    def close(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


class ShardWriter:
    """One shard of every format in ``dtypes``, streamed: :meth:`add` documents, then :meth:`finish`."""

    def __init__(self, folder: Path, name: str, dtypes: dict[str, np.dtype]) -> None:
        self.folder, self.name, self.dtypes = folder, name, dtypes
        self.lengths: list[np.ndarray] = []
        self._data = {fmt: _HashedFile(self._temporary(_shard_files(fmt, name)[0])) for fmt in dtypes}

    def _temporary(self, file: str) -> Path:
        return self.folder / f".{file}.tmp"

    def add(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents: their ids back to back (any integer dtype) and each one's length."""
        for fmt, dtype in self.dtypes.items():
            self._data[fmt].write(memoryview(np.ascontiguousarray(ids, dtype=dtype)).cast("B"))
        self.lengths.append(np.asarray(lengths, dtype=np.int64))

    def finish(self) -> dict:
        """Write the index files, move everything into place; returns the shard's manifest entry."""
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        files = {}
        for fmt, dtype in self.dtypes.items():
            data_name, index_name = _shard_files(fmt, self.name)
            self._data[fmt].close()
            index = _HashedFile(self._temporary(index_name))
            index.write(megatron_index(lengths, dtype) if fmt == "megatron" else _npy_bytes(_offsets(lengths)))
            index.close()
            for file, written in ((data_name, self._data[fmt]), (index_name, index)):
                files[file] = {"bytes": written.size, "sha256": written.digest.hexdigest()}
        for file in files:
            os.replace(self._temporary(file), self.folder / file)
        return {"name": self.name, "documents": int(lengths.size), "tokens": int(lengths.sum()), "files": files}

    def abandon(self) -> None:
        for fmt in self.dtypes:
            self._data[fmt].file.close()
            for file in _shard_files(fmt, self.name):
                self._temporary(file).unlink(missing_ok=True)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def megatron_index(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` bytes of documents of ``lengths`` tokens, one sequence each (module doc)."""
    n = lengths.size
    pointers = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1] * np.dtype(dtype).itemsize, out=pointers[1:])
    return b"".join([_MEGATRON_HEADER, struct.pack("<Q", 1), struct.pack("<B", _MEGATRON_CODES[np.dtype(dtype)]),
                     struct.pack("<Q", n), struct.pack("<Q", n + 1), lengths.astype(np.int32).tobytes(),
                     pointers.tobytes(), np.arange(n + 1, dtype=np.int64).tobytes()])


def read_megatron_index(path: str | os.PathLike) -> tuple[np.dtype, np.ndarray]:
    """The dtype and int64 document offsets (in tokens) of a Megatron ``.idx`` file."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    if bytes(raw[:9]) != _MEGATRON_HEADER:
        raise ValueError(f"{path} is not a Megatron MMIDIDX index (bad header)")
    code = int(raw[17])
    dtype = {v: k for k, v in _MEGATRON_CODES.items()}.get(code)
    if dtype is None:
        raise ValueError(f"{path}: dtype code {code} is not one gputok reads ({sorted(_MEGATRON_CODES.values())})")
    sequences, documents = struct.unpack("<QQ", bytes(raw[18:34]))
    lengths = np.frombuffer(raw, dtype=np.int32, count=sequences, offset=34)
    pointers = np.frombuffer(raw, dtype=np.int64, count=sequences, offset=34 + 4 * sequences)
    doc_index = np.frombuffer(raw, dtype=np.int64, count=documents, offset=34 + 12 * sequences)
    starts = np.append(pointers, pointers[-1] + lengths[-1] * dtype.itemsize if sequences else 0) // dtype.itemsize
    return dtype, starts[doc_index].astype(np.int64)


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


class TokenShards:
    """The documents of a directory written by ``encode_corpus``, memory-mapped.

    ``shards[i]`` is document ``i``'s ids (a numpy view); ``len(shards)`` documents;
    ``shards.tokens`` the ids of all documents back to back, across shards, by global position
    (:meth:`token_slice`); :meth:`samples` a torch Dataset of fixed-length training samples.
    ``verify=True`` checks every file against the manifest's sha256 first.
    """

    def __init__(self, folder: str | os.PathLike, *, format: str | None = None, verify: bool = False) -> None:
        self.folder = Path(folder)
        path = self.folder / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: not a finished encode_corpus output "
                                    "(an interrupted run finishes with --resume)")
        self.manifest = json.loads(path.read_text(encoding="utf-8"))
        formats = self.manifest["formats"]
        self.format = format or formats[0]
        if self.format not in formats:
            raise ValueError(f"format={self.format!r}; this directory holds {formats}")
        self._data, doc_offsets = [], []
        for shard in self.manifest["shards"]:
            data_name, index_name = _shard_files(self.format, shard["name"])
            if verify:
                for file in (data_name, index_name):
                    if file_sha256(self.folder / file) != shard["files"][file]["sha256"]:
                        raise ValueError(f"{self.folder / file} does not match the manifest's sha256")
            if self.format == "megatron":
                dtype, offsets = read_megatron_index(self.folder / index_name)
            else:
                dtype, offsets = np.dtype(self.manifest["dtypes"]["flat"]), np.load(self.folder / index_name)
            size = int(offsets[-1]) if offsets.size else 0
            self._data.append(np.memmap(self.folder / data_name, dtype=dtype, mode="r", shape=(size,))
                              if size else np.zeros(0, dtype=dtype))
            doc_offsets.append(offsets)
        self._doc_offsets = doc_offsets
        self._shard_docs = _offsets(np.array([o.size - 1 for o in doc_offsets], dtype=np.int64))
        self._shard_tokens = _offsets(np.array([d.size for d in self._data], dtype=np.int64))

    def __len__(self) -> int:
        return int(self._shard_docs[-1])

    @property
    def num_tokens(self) -> int:
        return int(self._shard_tokens[-1])

    def __getitem__(self, index: int) -> np.ndarray:
        if not -len(self) <= index < len(self):
            raise IndexError(f"document {index} of {len(self)}")
        index %= len(self)
        shard = int(np.searchsorted(self._shard_docs, index, side="right")) - 1
        offsets = self._doc_offsets[shard]
        local = index - int(self._shard_docs[shard])
        return self._data[shard][offsets[local]:offsets[local + 1]]

    def token_slice(self, start: int, stop: int) -> np.ndarray:
        """Ids ``start:stop`` of all documents back to back (a copy when it spans shards)."""
        first = int(np.searchsorted(self._shard_tokens, start, side="right")) - 1
        parts, position = [], start
        for shard in range(max(first, 0), len(self._data)):
            if position >= stop:
                break
            base = int(self._shard_tokens[shard])
            parts.append(self._data[shard][position - base:stop - base])
            position = base + self._data[shard].size
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def samples(self, seq_len: int, *, seed: int | None = 0) -> TokenSamples:
        """A Dataset of ``seq_len``-token windows of all ids back to back (documents are not cut
        apart: add ``append_eos`` when encoding), each ``{"input_ids", "labels"}`` (``labels``: the
        next ids), in an order shuffled by ``seed`` (None: in file order)."""
        return TokenSamples(self, seq_len, seed)


class TokenSamples(torch.utils.data.Dataset):
    """Fixed-length samples of :class:`TokenShards` (see :meth:`TokenShards.samples`)."""

    def __init__(self, shards: TokenShards, seq_len: int, seed: int | None) -> None:
        if seq_len < 1:
            raise ValueError(f"seq_len={seq_len}; give a positive length")
        self.shards, self.seq_len = shards, seq_len
        count = max(shards.num_tokens - 1, 0) // seq_len
        self.order = (torch.randperm(count, generator=torch.Generator().manual_seed(seed)) if seed is not None
                      else torch.arange(count))

    def __len__(self) -> int:
        return self.order.numel()

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        start = int(self.order[index]) * self.seq_len
        window = torch.from_numpy(self.shards.token_slice(start, start + self.seq_len + 1).astype(np.int64))
        return {"input_ids": window[:-1], "labels": window[1:]}
