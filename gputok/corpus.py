"""Reading a corpus as batches of documents: text, JSON Lines, Parquet, Arrow and ``datasets``.

One reader for every consumer of a corpus (``encode_corpus``, ``TextStream``): each input yields
*records* in a fixed order, a batch at a time, and a record is a document's text, or ``None`` for
a bad record that the policy skips. Records are numbered across all inputs (the global record
index), which is what shards, ranks, workers and resumption are keyed on: the same inputs always
give the same records, whatever the batch boundaries.

Inputs, by file name (``.gz`` / ``.zst`` / ``.zstd`` suffixes are decompressed on the fly, gzip by
the standard library, zstd by ``zstandard`` when it is installed):

- text (any other suffix): a record per line (``mode="lines"``, ``\\r\\n`` ends read as ``\\n``), or
  per block of lines separated by blank lines (``mode="blocks"``);
- JSON Lines (``.jsonl``, ``.ndjson``, ``.json``): a record per line, its ``text_field``;
- Parquet (``.parquet``) and Arrow IPC (``.arrow``, ``.feather``; files or streams, as ``datasets``
  caches them): the ``text_field`` column, read a row group / record batch at a time;
- a huggingface ``datasets.Dataset`` (its Arrow table, in batches).

Files are read in blocks of ~``CHUNK_BYTES``, cut after a ``\\n`` (a byte never inside a UTF-8
character), and each block is decoded and split by one C call: no Python work per line except for
JSON, whose lines are parsed one by one. Memory: a block's bytes and its strings, whatever the
corpus size. With ``as_bytes`` (what ``encode_corpus`` reads on the CPU) no string is made: a
block is cut into records with numpy (``\\r\\n`` and blank-line blocks as the string path cuts
them; blocks of whitespace only found on the bytes, decoded only when they hold non-ASCII bytes
and nothing else), Arrow string/binary columns are viewed through their offsets and data
buffers, and a numba kernel finds the invalid UTF-8 records the policy acts on
(:class:`ByteRecords`).

Bad records follow ``on_bad_record``: ``"replace"`` (invalid UTF-8 becomes U+FFFD; a JSON line that
does not parse, lacks the field or holds a non-string, and a null in a column, become an empty
document), ``"skip"`` (the record is dropped) or ``"fail"`` (``BadRecordError`` naming the input
and the record). Replaced and skipped records are counted in :class:`BadRecords`, never silently.
Empty documents (empty lines, say) are records that give no tokens; consumers drop them.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .kernels.ingest_numba import utf8_invalid_rows

#: Bytes read per block of a text or JSON Lines file (and so per batch of documents).
CHUNK_BYTES = 1 << 22
#: Rows per batch of a Parquet/Arrow column or a ``datasets.Dataset``.
ARROW_ROWS = 16384
POLICIES = ("replace", "skip", "fail")
MODES = ("lines", "blocks")
_JSON_SUFFIXES = {".jsonl", ".ndjson", ".json"}
_ARROW_SUFFIXES = {".arrow", ".feather", ".ipc"}
_COMPRESSED = (".gz", ".zst", ".zstd")
_BLANK_LINES = re.compile(r"\n(?:[ \t\r\f\v]*\n)+")
_BLANK_LINES_BYTES = re.compile(_BLANK_LINES.pattern.encode())
# bytes of the ASCII characters str.isspace() holds: a block made of these alone is blank
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[c for c in range(128) if chr(c).isspace()]] = True


class BadRecordError(ValueError):
    """A bad record under ``on_bad_record="fail"``: names the input, the record and the problem."""


@dataclass
class BadRecords:
    """How many records were replaced or skipped, by reason (``"invalid utf-8"``, ``"missing field"``...)."""

    replaced: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, policy: str, reason: str, count: int = 1) -> None:
        table = self.replaced if policy == "replace" else self.skipped
        table[reason] = table.get(reason, 0) + count

    def merge(self, other: BadRecords) -> None:
        for reason, n in other.replaced.items():
            self.add("replace", reason, n)
        for reason, n in other.skipped.items():
            self.add("skip", reason, n)

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"replaced": dict(sorted(self.replaced.items())), "skipped": dict(sorted(self.skipped.items()))}

    def __str__(self) -> str:
        parts = [f"{n} {why} replaced" for why, n in sorted(self.replaced.items())]
        parts += [f"{n} {why} skipped" for why, n in sorted(self.skipped.items())]
        return ", ".join(parts) or "no bad records"


@dataclass
class ByteRecords:
    """A batch of records as ragged UTF-8 bytes (what :meth:`Tokenizer.encode_utf8` reads): record
    ``i`` is ``data[offsets[i]:offsets[i + 1]]``, or ``None`` where ``skipped[i]`` (a bad record the
    policy drops). Bytes are as read: invalid UTF-8 left in a record is replaced when it is decoded.

    >>> batch = ByteRecords(np.frombuffer(b"abc\\xff", np.uint8), np.array([0, 2, 2, 4]), np.array([0, 0, 1], bool))
    >>> batch.texts(), batch[1:].texts()
    (['ab', '', None], ['', None])
    """

    data: np.ndarray  # uint8
    offsets: np.ndarray  # int64, len(records) + 1; need not start at 0
    skipped: np.ndarray  # bool per record

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, rows: slice) -> ByteRecords:
        start, stop, _ = rows.indices(len(self))
        return ByteRecords(self.data, self.offsets[start:stop + 1], self.skipped[start:stop])

    def documents(self) -> tuple[np.ndarray, np.ndarray]:
        """The bytes and offsets of the records that are documents: neither skipped nor empty
        (bytes copied only when a skipped record's bytes lie between them)."""
        lengths = np.diff(self.offsets)
        keep = ~self.skipped & (lengths > 0)
        if bool(keep.all()):
            return self.data, self.offsets
        if not bool((lengths[~keep] > 0).any()):  # only empty records dropped: the same bytes
            return self.data, np.append(self.offsets[:-1][keep], self.offsets[-1])
        byte_keep = np.repeat(keep, lengths)
        data = self.data[self.offsets[0]:self.offsets[-1]][byte_keep]
        return data, np.concatenate([[0], np.cumsum(lengths[keep])])

    def texts(self) -> list[str | None]:
        """The records as Python strings (invalid UTF-8 as U+FFFD), ``None`` for skipped ones."""
        bounds = self.offsets.tolist()
        return [None if skip else self.data[a:b].tobytes().decode("utf-8", errors="replace")
                for a, b, skip in zip(bounds, bounds[1:], self.skipped.tolist())]


@dataclass(frozen=True)
class Source:
    """One input: a file path (with its format) or a ``datasets.Dataset``."""

    name: str
    kind: str  # "text", "jsonl", "parquet", "arrow", "dataset"
    path: Path | None = None
    dataset: Any = None

    def size(self) -> int | None:
        """Bytes on disk (None for a dataset)."""
        return None if self.path is None else self.path.stat().st_size

    @property
    def compressed(self) -> bool:
        return self.path is not None and self.path.suffix.lower() in _COMPRESSED


def sources(inputs: str | os.PathLike | Any | Sequence[str | os.PathLike | Any], *,
            input_format: str | None = None) -> list[Source]:
    """The inputs as :class:`Source` s, each file checked to exist and be readable before any work.

    ``input_format`` (``"text"``, ``"jsonl"``, ``"parquet"``, ``"arrow"``) overrides the suffix.
    """
    if isinstance(inputs, (str, os.PathLike)) or _is_dataset(inputs):
        inputs = [inputs]
    out = []
    for item in inputs:
        if _is_dataset(item):
            out.append(Source(f"<dataset {len(out)}>", "dataset", dataset=item))
            continue
        path = check_readable(item, "input file")
        kind = input_format or _kind(path)
        if kind not in ("text", "jsonl", "parquet", "arrow"):
            raise ValueError(f"input_format={kind!r}; choose text, jsonl, parquet or arrow")
        out.append(Source(str(item), kind, path=path))
    if not out:
        raise ValueError("no inputs given; pass at least one file or dataset")
    return out


def check_readable(path: str | os.PathLike, what: str, *, missing_hint: str = "", files: str = "files") -> Path:
    """``path`` as a Path once it is known to be a readable regular file; else FileNotFoundError,
    ValueError or PermissionError naming ``what`` and the path."""
    where = f"{what} {str(path)!r}"
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{where} does not exist{missing_hint}")
    if not path.is_file():
        raise ValueError(f"{where} is not a regular file (a directory?); pass {files}")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise PermissionError(f"{where} cannot be read: {e.strerror or e}") from e
    return path


def _is_dataset(obj: Any) -> bool:
    return type(obj).__name__ == "Dataset" and hasattr(obj, "with_format")


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last in _JSON_SUFFIXES:
        return "jsonl"
    if last == ".parquet":
        return "parquet"
    if last in _ARROW_SUFFIXES:
        return "arrow"
    return "text"


def open_binary(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed if its suffix says gzip or zstd."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix in (".zst", ".zstd"):
        try:
            import zstandard
        except ImportError as e:
            raise ImportError(f"{path} is zstd-compressed; pip install zstandard to read it") from e
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")


@dataclass
class RecordReader:
    """Batches of records (``list[str | None]``) from sources; see the module doc."""

    text_field: str = "text"
    mode: str = "lines"
    on_bad_record: str = "replace"
    bad: BadRecords = field(default_factory=BadRecords)
    chunk_bytes: int = CHUNK_BYTES

    def __post_init__(self) -> None:
        if self.on_bad_record not in POLICIES:
            raise ValueError(f"on_bad_record={self.on_bad_record!r}; choose one of {POLICIES}")
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}; choose one of {MODES}")

    def batches(self, source: Source, on_bytes=None, *, as_bytes: bool = False
                ) -> Iterator[list[str | None] | ByteRecords]:
        """The records of ``source`` in order, a batch at a time; ``on_bytes(n)`` after each block of
        ``n`` bytes of a file is done.

        ``as_bytes``: the records of text files and of Arrow string or binary columns come as
        :class:`ByteRecords` (lines and blocks cut on the bytes, columns taken from their Arrow
        buffers: no Python object per record); JSON Lines, parsed a line at a time, and string-view
        columns still come as strings. The same records, bad-record counts and errors either way.
        """
        if source.kind == "text" and as_bytes:
            yield from self._text_byte_batches(source, on_bytes)
        elif source.kind in ("text", "jsonl"):
            yield from self._text_batches(source, on_bytes)
        elif source.kind == "parquet":
            yield from self._parquet_batches(source, on_bytes, as_bytes)
        elif source.kind == "arrow":
            yield from self._arrow_batches(source, on_bytes, as_bytes)
        else:
            yield from self._dataset_batches(source, as_bytes)

    # ---- text and JSON Lines -------------------------------------------------------------
    def _text_batches(self, source: Source, on_bytes) -> Iterator[list[str | None]]:
        first_record = 0
        mode = self.mode if source.kind == "text" else "lines"  # JSON Lines: a record per line
        with open_binary(source.path) as f:
            for block in byte_blocks(f, self.chunk_bytes, mode):
                records = self._decode(source, block, first_record, mode)
                if source.kind == "jsonl":
                    records = self._json_texts(source, records, first_record)
                first_record += len(records)
                yield records
                if on_bytes is not None:
                    on_bytes(len(block))

    @staticmethod
    def _split(text: str, mode: str) -> list[str]:
        text = text.replace("\r\n", "\n") if "\r" in text else text
        if mode == "lines":
            return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        return [b for b in _BLANK_LINES.split(text.strip("\n")) if b.strip()]

    def _decode(self, source: Source, block: bytes, first_record: int, mode: str) -> list[str | None]:
        try:
            return self._split(block.decode("utf-8"), mode)
        except UnicodeDecodeError:
            pass
        # A block with invalid bytes: find its bad records one by one (rare, so a Python loop).
        records: list[str | None] = self._split(block.decode("utf-8", errors="surrogateescape"), mode)
        for i, record in enumerate(records):
            try:
                record.encode("utf-8")
            except UnicodeEncodeError:
                raw = record.encode("utf-8", errors="surrogateescape")
                records[i] = self._bad(source, first_record + i, "invalid utf-8",
                                       raw.decode("utf-8", errors="replace"))
        return records

    def _text_byte_batches(self, source: Source, on_bytes) -> Iterator[ByteRecords]:
        first_record = 0
        with open_binary(source.path) as f:
            for block in byte_blocks(f, self.chunk_bytes, self.mode):
                data = np.frombuffer(block, dtype=np.uint8)
                not_cr = np.ones(data.size, dtype=bool)  # the \r of each \r\n: read as \n, as _split does
                not_cr[:-1] = (data[:-1] != 0x0D) | (data[1:] != 0x0A)
                data = data[not_cr] if not bool(not_cr.all()) else data
                data, offsets = _lines(data) if self.mode == "lines" else _blocks(data)
                records = self._checked_utf8(source, data, offsets, first_record)
                first_record += len(records)
                yield records
                if on_bytes is not None:
                    on_bytes(len(block))

    def _checked_utf8(self, source: Source, data: np.ndarray, offsets: np.ndarray, first_record: int,
                      nulls: np.ndarray | None = None) -> ByteRecords:
        """The records, each bad one (invalid UTF-8, or null where ``nulls``), in order, counted
        (replace), marked skipped, or raised (fail). A null record holds no bytes."""
        bad = np.zeros(offsets.size - 1, dtype=bool) if nulls is None else nulls.copy()
        used = data[offsets[0]:offsets[-1]]  # (an Arrow slice's buffer holds the whole batch's bytes)
        if used.size and int(used.max()) >= 0x80:  # ASCII is valid UTF-8
            bad |= utf8_invalid_rows(data, offsets)
        skipped = np.zeros(offsets.size - 1, dtype=bool)
        for i in np.flatnonzero(bad).tolist():  # rare: a loop over bad records
            null = nulls is not None and bool(nulls[i])
            skipped[i] = self._bad(source, first_record + i, "null" if null else "invalid utf-8", "",
                                   f"{self.text_field!r} is null" if null else "") is None
        return ByteRecords(data, offsets, skipped)

    def _json_texts(self, source: Source, lines: list[str | None], first_record: int) -> list[str | None]:
        out: list[str | None] = []
        for i, line in enumerate(lines):
            if line is None or not line.strip():  # skipped (invalid UTF-8), or an empty document
                out.append(None if line is None else "")
                continue
            try:
                value = json.loads(line)
            except ValueError:
                out.append(self._bad(source, first_record + i, "invalid json", ""))
                continue
            text = value.get(self.text_field) if isinstance(value, dict) else None
            if isinstance(text, str):
                out.append(text)
            elif isinstance(value, dict) and self.text_field not in value:
                out.append(self._bad(source, first_record + i, "missing field", "",
                                     f"has no field {self.text_field!r} (fields: {sorted(value)[:10]})"))
            else:
                out.append(self._bad(source, first_record + i, "not a string", "",
                                     f"field {self.text_field!r} is not a string"))
        return out

    def _bad(self, source: Source, record: int, reason: str, replacement: str, detail: str = "") -> str | None:
        if self.on_bad_record == "fail":
            unit = ("row" if source.kind not in ("text", "jsonl")
                    else "block" if source.kind == "text" and self.mode == "blocks" else "line")
            raise BadRecordError(f"{source.name}: record {record} ({unit} {record + 1}): {detail or reason}; "
                                 "pass on_bad_record='replace' or 'skip' (--on-bad-record) to go on")
        self.bad.add(self.on_bad_record, reason)
        return replacement if self.on_bad_record == "replace" else None

    # ---- Arrow ---------------------------------------------------------------------------
    def _column_records(self, source: Source, column, first_record: int,
                        as_bytes: bool = False) -> list[str | None] | ByteRecords:
        import pyarrow as pa

        if isinstance(column, pa.ChunkedArray):  # a datasets batch is a Table of chunked columns
            column = column.combine_chunks()
        if as_bytes and any(kind(column.type) for kind in (pa.types.is_string, pa.types.is_large_string,
                                                           pa.types.is_binary, pa.types.is_large_binary)):
            return self._column_bytes(source, column, first_record)
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            raw = column.to_pylist()
            records = []
            for i, value in enumerate(raw):
                if value is None:
                    records.append(self._bad(source, first_record + i, "null", "", f"{self.text_field!r} is null"))
                    continue
                try:
                    records.append(value.decode("utf-8"))
                except UnicodeDecodeError:
                    records.append(self._bad(source, first_record + i, "invalid utf-8",
                                             value.decode("utf-8", errors="replace")))
            return records
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                or pa.types.is_string_view(column.type)):
            raise ValueError(f"{source.name}: column {self.text_field!r} holds {column.type}, not text")
        records = column.to_pylist()
        if column.null_count:
            for i in (i for i, r in enumerate(records) if r is None):
                records[i] = self._bad(source, first_record + i, "null", "", f"{self.text_field!r} is null")
        return records

    def _column_bytes(self, source: Source, column, first_record: int) -> ByteRecords:
        """A string or binary column's records straight from its offsets and data buffers (no copy
        unless a null's slot holds bytes)."""
        import pyarrow as pa

        _, offsets_buffer, data_buffer = column.buffers()
        large = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
        offset_type = np.int64 if large else np.int32
        offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[column.offset:column.offset + len(column) + 1]
        offsets = offsets.astype(np.int64)
        data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        nulls = None
        if column.null_count:
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            if bool((np.diff(offsets)[nulls] > 0).any()):  # Arrow lets a null's slot hold bytes: leave them out
                keep = np.repeat(~nulls, np.diff(offsets))
                data = data[offsets[0]:offsets[-1]][keep]
                lengths = np.where(nulls, 0, np.diff(offsets))
                offsets = np.concatenate([[0], np.cumsum(lengths)])
        return self._checked_utf8(source, data, offsets, first_record, nulls)

    def _table_batches(self, source: Source, batches, columns: list[str], on_bytes=None, bytes_per_batch=0,
                       as_bytes: bool = False):
        if self.text_field not in columns:
            raise ValueError(f"{source.name}: no column {self.text_field!r}; its columns are {columns} "
                             "(choose one with text_field= / --text-field)")
        first_record = 0
        for batch in batches:
            records = self._column_records(source, batch.column(self.text_field), first_record, as_bytes)
            first_record += len(records)
            yield records
            if on_bytes is not None and bytes_per_batch:
                on_bytes(bytes_per_batch)

    def _parquet_batches(self, source: Source, on_bytes, as_bytes: bool = False) -> Iterator[list[str | None]]:
        import pyarrow.parquet as pq

        try:
            file = pq.ParquetFile(source.path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError... for a file that is not Parquet
            raise ValueError(f"{source.name} is not a readable Parquet file ({e})") from e
        columns = file.schema_arrow.names
        rows = max(file.metadata.num_rows, 1)
        per_batch = source.size() * ARROW_ROWS // rows
        yield from self._table_batches(source, file.iter_batches(batch_size=ARROW_ROWS, columns=[self.text_field]
                                                                 if self.text_field in columns else None),
                                       columns, on_bytes, per_batch, as_bytes)

    def _arrow_batches(self, source: Source, on_bytes, as_bytes: bool = False) -> Iterator[list[str | None]]:
        import pyarrow as pa

        try:
            reader = pa.ipc.open_file(source.path)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except Exception:
            try:
                reader = pa.ipc.open_stream(open(source.path, "rb"))
                batches = iter(reader)
            except Exception as e:
                raise ValueError(f"{source.name} is not a readable Arrow IPC file or stream ({e})") from e
        yield from self._table_batches(source, _sliced(batches), reader.schema.names, on_bytes, 0, as_bytes)

    def _dataset_batches(self, source: Source, as_bytes: bool = False) -> Iterator[list[str | None]]:
        data = source.dataset.with_format("arrow")
        batches = data.iter(batch_size=ARROW_ROWS)
        yield from self._table_batches(source, batches, list(source.dataset.column_names), as_bytes=as_bytes)


def _sliced(batches):
    """Arrow record batches cut to at most ``ARROW_ROWS`` rows (bounded memory per batch)."""
    for batch in batches:
        for start in range(0, batch.num_rows, ARROW_ROWS):
            yield batch.slice(start, ARROW_ROWS)


def _lines(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lines of a block (``\\r\\n`` already read as ``\\n``): their bytes back to back and
    their offsets, as ``_split(text, "lines")`` cuts them; no record after a final ``\\n``."""
    lf = np.flatnonzero(data == 0x0A)
    ends = lf if data.size and data[-1] == 0x0A else np.append(lf, data.size)
    offsets = np.zeros(ends.size + 1, dtype=np.int64)
    offsets[1:] = ends - np.arange(ends.size)  # each line end before it is left out
    return (data[data != 0x0A] if lf.size else data), offsets


def _blocks(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The blocks of a block of text (``\\r\\n`` already read as ``\\n``), as
    ``_split(text, "blocks")`` cuts them: the text less its outer ``\\n``, split at blank lines
    (a bytes regex: every character involved is ASCII), blocks of whitespace only left out."""
    inner = np.flatnonzero(data != 0x0A)
    if not inner.size:
        return data[:0], np.zeros(1, dtype=np.int64)
    first, last = int(inner[0]), int(inner[-1]) + 1
    cuts = np.array([m.span() for m in _BLANK_LINES_BYTES.finditer(data[first:last].tobytes())],
                    dtype=np.int64).reshape(-1, 2) + first
    starts, ends = np.append(first, cuts[:, 1]), np.append(cuts[:, 0], last)
    kept = ~_blank(data, starts, ends)
    starts, ends = starts[kept], ends[kept]
    inside = np.zeros(data.size + 1, dtype=np.int64)
    np.add.at(inside, starts, 1)
    np.add.at(inside, ends, -1)
    lengths = ends - starts
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return data[np.cumsum(inside[:-1]) > 0], offsets


def _blank(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each ``data[starts[k]:ends[k]]`` is whitespace only (``not text.strip()``): decided on
    the bytes unless a span holds non-ASCII bytes and no other character (then decoded)."""
    def count(mask: np.ndarray) -> np.ndarray:
        prefix = np.zeros(mask.size + 1, dtype=np.int64)
        np.cumsum(mask, out=prefix[1:])
        return prefix[ends] - prefix[starts]

    ascii_text = count(~_ASCII_SPACE[data] & (data < 0x80))
    non_ascii = count(data >= 0x80)
    blank = (ascii_text == 0) & (non_ascii == 0)
    for k in np.flatnonzero((ascii_text == 0) & (non_ascii > 0)).tolist():  # rare: Unicode spaces, say
        blank[k] = not data[starts[k]:ends[k]].tobytes().decode("utf-8", errors="replace").strip()
    return blank


def byte_blocks(f: BinaryIO, chunk_bytes: int, mode: str = "lines") -> Iterator[bytes]:
    """Blocks of ~``chunk_bytes`` of ``f`` ending after a ``\\n`` (lines) or a blank line (blocks),
    the last one with whatever is left. A ``\\n`` never occurs inside a UTF-8 character, so each
    block decodes on its own."""
    separators = (b"\n\n", b"\n\r\n") if mode == "blocks" else (b"\n",)
    rest = b""
    while True:
        data = f.read(chunk_bytes)
        if not data:
            break
        data = rest + data
        found, separator = max((data.rfind(sep), sep) for sep in separators)
        if found < 0:
            rest = data
            continue
        cut = found + len(separator)
        rest = data[cut:]
        yield data[:cut]
    if rest:
        yield rest
