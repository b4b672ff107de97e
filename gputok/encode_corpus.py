"""Corpus to token shards: ``gputok.encode_corpus`` and ``gputok encode-corpus``.

The records of the inputs (``gputok.corpus``: text, JSON Lines, Parquet, Arrow, ``datasets``) are
numbered across all inputs, and shard ``k`` holds the documents of records
``[k * shard_documents, (k + 1) * shard_documents)``. So what goes into a shard depends on the
inputs and the options only, never on batch sizes, timing, the number of processes or where an
earlier run was killed, which gives the guarantees:

- exactness: each batch of records is encoded by one ``tokenizer(texts, padding=False)`` call (the
  ids of ``tok.encode_batch(texts, add_special_tokens=...)``), then BOS/EOS are added with numpy;
- resumption: a shard is written to temporary files and moved into place when complete, then a
  small record of it (counts, sha256) is written to ``OUT/.progress/``; ``resume=True`` keeps the
  shards recorded there and writes the others, so a killed run, resumed (any number of times),
  gives byte-identical files to an uninterrupted one;
- ranks: under ``torchrun`` (``torch.distributed`` initialized, gloo or NCCL) rank ``r`` writes the
  shards ``k`` with ``k % world_size == r``; every rank reads all inputs (reading is cheap next to
  encoding) and so counts every bad record; rank 0 writes the manifest after a barrier. The output
  equals a one-process run's.

The manifest (``OUT/manifest.json``, written last and atomically) holds the tokenizer's sha256 (of
its canonical tokenizer.json), the options, document/token/record counts, the bad-record report,
and every shard's files with their sizes and sha256. Memory: a block of input (``CHUNK_BYTES``) and
its ids, and an int64 length per document of the shard being written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._atomic import write_atomic
from . import _dispatch
from .corpus import BadRecords, ByteRecords, RecordReader, sources
from .kernels.documents_numba import wrap_rows
from .shards import MANIFEST, ShardWriter, file_sha256, shard_dtypes, shard_name
from .tokenizer import Tokenizer

PROGRESS = ".progress"
_EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "[SEP]")
_BOS_CANDIDATES = ("<s>", "<|begin_of_text|>", "<bos>", "<|endoftext|>", "[CLS]")


def tokenizer_sha256(tokenizer: Tokenizer) -> str:
    """sha256 of the tokenizer's canonical tokenizer.json (sorted keys): equal tokenizers, equal hash.
    Kept per tokenizer object (~1 s for a 50k BPE: the JSON of every merge)."""
    if tokenizer not in _HASHES:
        text = json.dumps(tokenizer.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        _HASHES[tokenizer] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return _HASHES[tokenizer]


_HASHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _special_id(tokenizer: Tokenizer, name: str | None, candidates: Sequence[str], what: str) -> int:
    for token in [name] if name is not None else candidates:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    if name is not None:
        raise ValueError(f"{what} token {name!r} is not in the tokenizer's vocabulary")
    raise ValueError(f"the tokenizer has none of {list(candidates)}; name its {what} token "
                     f"({what}_token= / --{what}-token)")


def encode_corpus(inputs: Any, tokenizer: Tokenizer, out: str | os.PathLike, *,
                  formats: Sequence[str] = ("megatron",), dtype: str = "auto", text_field: str = "text",
                  mode: str = "lines", input_format: str | None = None, append_eos: bool = False,
                  prepend_bos: bool = False, eos_token: str | None = None, bos_token: str | None = None,
                  add_special_tokens: bool = False, shard_documents: int = 1_000_000,
                  on_bad_record: str = "replace", resume: bool = False, device: str | torch.device = "cpu",
                  progress: bool = False) -> dict:
    """Encode ``inputs`` (paths, or a ``datasets.Dataset``) into token shards under ``out``; returns
    the manifest. See the module doc, ``gputok.corpus`` for the inputs and ``gputok.shards`` for the
    files. ``add_special_tokens`` runs the tokenizer's template ([CLS] ... [SEP]); off by default,
    as Megatron's ``preprocess_data.py`` does, which adds only the EOS (``append_eos``).
    """
    srcs = sources(inputs, input_format=input_format)
    if shard_documents < 1:
        raise ValueError(f"shard_documents={shard_documents}; give a positive number of records per shard")
    dtypes = shard_dtypes(tokenizer.vocab_size, formats, dtype)
    reader = RecordReader(text_field=text_field, mode=mode, on_bad_record=on_bad_record)
    eos = _special_id(tokenizer, eos_token, _EOS_CANDIDATES, "eos") if append_eos else None
    bos = _special_id(tokenizer, bos_token, _BOS_CANDIDATES, "bos") if prepend_bos else None
    rank, world = _rank_and_world()
    folder, progress_dir = Path(out), Path(out) / PROGRESS
    config = {"format": "gputok-token-shards", "version": 1, "tokenizer_sha256": tokenizer_sha256(tokenizer),
              "vocab_size": tokenizer.vocab_size, "formats": list(dtypes),
              "dtypes": {fmt: str(d) for fmt, d in dtypes.items()}, "add_special_tokens": add_special_tokens,
              "prepend_bos": prepend_bos, "bos_id": bos, "append_eos": append_eos, "eos_id": eos,
              "text_field": text_field, "mode": mode, "on_bad_record": on_bad_record,
              "shard_documents": shard_documents,
              "inputs": [{"name": s.name, "kind": s.kind, "bytes": s.size()} for s in srcs]}
    finished = _prepare(folder, progress_dir, config, resume, rank, world)
    if finished is not None:
        return finished
    done = _done_shards(folder, progress_dir)

    encoder = _Encoder(tokenizer, add_special_tokens, bos, eos, device)
    from tqdm import tqdm

    # text bytes as read (decompressed): the total is known for plain files only
    sizes = [s.size() if s.kind in ("parquet", "arrow") or not s.compressed else None for s in srcs]
    bar = tqdm(total=None if None in sizes else sum(sizes), unit="B", unit_scale=True, desc="encode-corpus",
               disable=not progress or rank != 0, file=sys.stderr)
    start, tokens, writer, records = time.perf_counter(), 0, None, []
    g = 0  # global index of the next record

    def on_bytes(n: int) -> None:
        bar.update(n)
        bar.set_postfix_str(f"{tokens / max(time.perf_counter() - start, 1e-9) / 1e6:.2f}M tok/s", refresh=False)

    try:
        for source in srcs:
            count = 0
            for batch in reader.batches(source, on_bytes, as_bytes=encoder.reads_bytes):
                count += len(batch)
                position = 0
                while position < len(batch):
                    shard = (g + position) // shard_documents
                    take = min(len(batch) - position, (shard + 1) * shard_documents - g - position)
                    if writer is not None and writer.index != shard:
                        _commit(writer, progress_dir)
                        writer = None
                    if writer is None and shard % world == rank and shard not in done:
                        writer = _OpenShard(folder, shard, dtypes, g + position)
                    if writer is not None:
                        tokens += writer.add(encoder, batch[position:position + take])
                    position += take
                g += len(batch)
            records.append(count)
        if writer is not None:
            _commit(writer, progress_dir)
            writer = None
    except BaseException:
        if writer is not None:
            writer.shard.abandon()
        raise
    finally:
        bar.close()
    if world > 1:
        torch.distributed.barrier()
    manifest = None
    if rank == 0:
        manifest = _write_manifest(folder, progress_dir, config, records, reader.bad, g, shard_documents)
    if world > 1:
        torch.distributed.barrier()
        if manifest is None:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return manifest


def _rank_and_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _prepare(folder: Path, progress_dir: Path, config: dict, resume: bool, rank: int, world: int) -> dict | None:
    """Check ``out`` against ``resume``; the finished manifest if there is nothing left to do."""
    manifest_path = folder / MANIFEST
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not resume:
            raise ValueError(f"{folder} already holds a finished encode_corpus output; choose another folder "
                             "(or resume=True / --resume to check it and leave it as it is)")
        if _settings(manifest) != _settings(config):
            raise ValueError(f"{folder} holds shards made with other options or another tokenizer; "
                             "choose another folder")
        return manifest
    if (progress_dir / "config.json").exists():
        if not resume:
            raise ValueError(f"{folder} holds an interrupted encode_corpus run; pass resume=True (--resume) "
                             "to continue it, or choose another folder")
        recorded = json.loads((progress_dir / "config.json").read_text(encoding="utf-8"))
        if recorded != config:
            changed = sorted(k for k in config if recorded.get(k) != config[k])
            raise ValueError(f"{folder} holds an interrupted run with other settings ({', '.join(changed)}); "
                             "resume it with the same tokenizer, inputs and options, or choose another folder")
    elif folder.exists() and any(p.name.startswith("shard_") for p in folder.iterdir()):
        raise ValueError(f"{folder} holds shard files but no encode_corpus record; choose another folder")
    if world > 1:
        torch.distributed.barrier()  # every rank has looked before rank 0 writes anything
    if rank == 0:
        progress_dir.mkdir(parents=True, exist_ok=True)
        write_atomic({progress_dir / "config.json": json.dumps(config, indent=1, sort_keys=True) + "\n"})
    if world > 1:
        torch.distributed.barrier()
    return None


def _done_shards(folder: Path, progress_dir: Path) -> set[int]:
    """Shards recorded as complete whose files are all there with the recorded sizes and sha256
    (hashing runs at disk speed, far above encoding's)."""
    done = set()
    for record in progress_dir.glob("shard_*.json"):
        entry = json.loads(record.read_text(encoding="utf-8"))
        if all((folder / f).is_file() and (folder / f).stat().st_size == meta["bytes"]
               and file_sha256(folder / f) == meta["sha256"] for f, meta in entry["files"].items()):
            done.add(int(record.stem.split("_")[1]))
    return done


class _Encoder:
    """Records -> ids and lengths of their non-empty documents, BOS/EOS added.

    On the CPU kernels documents read as bytes (:class:`ByteRecords`) are encoded by
    ``tokenizer.encode_utf8`` (no Python string per document) and the template's special tokens
    ([CLS] ... [SEP], with ``add_special_tokens``) put around them like BOS/EOS: the ids of
    ``tokenizer(texts, padding=False)``. Other devices get strings and that call.
    """

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool, bos: int | None, eos: int | None,
                 device: str | torch.device) -> None:
        self.tokenizer, self.add_special_tokens, self.bos, self.eos = tokenizer, add_special_tokens, bos, eos
        self.device = device
        self.reads_bytes = _dispatch.on_cpu_kernels(torch.device(device))
        template = tokenizer.post_processor.single if add_special_tokens and tokenizer.post_processor else []
        sequence = next((k for k, item in enumerate(template) if item.sequence is not None), len(template))
        self.prefix = [bos] * (bos is not None) + [item.token_id for item in template[:sequence]]
        self.suffix = [item.token_id for item in template[sequence + 1:]] + [eos] * (eos is not None)

    def __call__(self, texts: list[str] | tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(texts, tuple):  # a ByteRecords' documents: bytes and offsets
            if texts[1].size < 2:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            encoded = self.tokenizer.encode_utf8(*texts)
            return self._around(encoded.ids.values.numpy(), encoded.ids.offsets.numpy(), self.prefix, self.suffix)
        if not texts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        out = self.tokenizer(texts, padding=False, add_special_tokens=self.add_special_tokens, device=self.device)
        ids, offsets = out["input_ids"].cpu().numpy(), out["row_offsets"].cpu().numpy()
        return self._around(ids, offsets, [self.bos] * (self.bos is not None), [self.eos] * (self.eos is not None))

    @staticmethod
    def _around(ids: np.ndarray, offsets: np.ndarray, prefix: list[int], suffix: list[int]
                ) -> tuple[np.ndarray, np.ndarray]:
        """Each row of ragged ``ids`` with ``prefix`` before it and ``suffix`` after it, and the
        rows' lengths."""
        if not prefix and not suffix:
            return ids, np.diff(offsets)
        return wrap_rows(ids.astype(np.int64, copy=False), offsets.astype(np.int64, copy=False),
                         np.asarray(prefix, dtype=np.int64), np.asarray(suffix, dtype=np.int64))


class _OpenShard:
    """A shard being written, with its counts of records, empty and skipped documents."""

    def __init__(self, folder: Path, index: int, dtypes: dict, first_record: int) -> None:
        self.index, self.first_record = index, first_record
        self.shard = ShardWriter(folder, shard_name(index), dtypes)
        self.records = self.empty = self.skipped = 0

    def add(self, encoder: _Encoder, records: list[str | None] | ByteRecords) -> int:
        if isinstance(records, ByteRecords):
            texts = records.documents()
            skipped = int(records.skipped.sum())
            documents = texts[1].size - 1
        else:
            texts = [t for t in records if t]
            skipped = records.count(None)
            documents = len(texts)
        self.records += len(records)
        self.skipped += skipped
        self.empty += len(records) - documents - skipped
        ids, lengths = encoder(texts)
        self.shard.add(ids, lengths)
        return int(ids.size)


def _commit(writer: _OpenShard, progress_dir: Path) -> None:
    entry = writer.shard.finish()
    entry["records"] = [writer.first_record, writer.first_record + writer.records]
    entry["empty_documents"], entry["skipped_records"] = writer.empty, writer.skipped
    write_atomic({progress_dir / f"{entry['name']}.json": json.dumps(entry, sort_keys=True) + "\n"})


def _write_manifest(folder: Path, progress_dir: Path, config: dict, records: list[int], bad: BadRecords,
                    total_records: int, shard_documents: int) -> dict:
    shards = []
    for index in range(-(-total_records // shard_documents)):
        record = progress_dir / f"{shard_name(index)}.json"
        if not record.is_file():
            raise RuntimeError(f"shard {index} was not written (its rank failed?); rerun with --resume")
        shards.append(json.loads(record.read_text(encoding="utf-8")))
    manifest = dict(config)
    manifest["inputs"] = [{**entry, "records": count} for entry, count in zip(config["inputs"], records)]
    manifest.update(records=total_records, documents=sum(s["documents"] for s in shards),
                    tokens=sum(s["tokens"] for s in shards),
                    empty_documents=sum(s["empty_documents"] for s in shards), bad_records=bad.to_json(),
                    shards=shards)
    write_atomic({folder / MANIFEST: json.dumps(manifest, indent=1, sort_keys=True) + "\n"})
    shutil.rmtree(progress_dir)
    for leftover in folder.glob(".shard_*.tmp"):  # from shards a killed run had begun
        leftover.unlink()
    return manifest


def _settings(manifest_or_config: dict) -> dict:
    """What must match for a folder to be resumed: the config, without the counts of a manifest."""
    out = {k: v for k, v in manifest_or_config.items() if k not in _COUNTS}
    out["inputs"] = [{k: v for k, v in entry.items() if k != "records"} for entry in out["inputs"]]
    return out


_COUNTS = ("records", "documents", "tokens", "empty_documents", "bad_records", "shards")
