"""Ingest: Python strings, bytes and text files become ragged codepoint or UTF-8 byte tensors.

The whole batch is joined and encoded once by CPython's UTF-32 codec and viewed as one tensor of
codepoints, so there is no Python work per character; the only per-text work is taking each
text's length. On CPU tensors the numba kernels of ``gputok.kernels.ingest_numba`` replace lone
surrogates and make the offsets (from ``surrogatepass`` code units) and write UTF-8 bytes; the
tensor ops below are their reference and the CUDA path. Rows are the texts; character offsets reported by the tokenizer are
codepoint indices into them, as in huggingface ``tokenizers``.

Defined results for bad input: bytes that are not valid UTF-8 are decoded with U+FFFD replacement
characters (the rule of the references), and lone surrogates in ``str`` input become U+FFFD.
With ``join_surrogate_pairs`` (:mod:`gputok.tiktoken` asks for it) a surrogate pair in a ``str``
becomes the codepoint it encodes, as tiktoken reads such a string; lone surrogates still become
U+FFFD.
Memory: 4 bytes per character (codepoints) or 1 per UTF-8 byte, plus 8 bytes per text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from typing import TYPE_CHECKING

import functools
import re

import numpy as np
import torch

from . import _dispatch
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, segment_sum
from .kernels.ingest_numba import codepoints_numba, codepoints_pairs_numba
from .kernels.ingest_numba import rows_matching, utf8_numba

if TYPE_CHECKING:
    from .literals import LiteralPattern

TextInput = str | bytes
ByteBuffer = np.ndarray | torch.Tensor | bytes | bytearray | memoryview
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_texts(inputs: TextInput | Iterable[TextInput]) -> list[str]:
    """One text or an iterable of texts (``str`` or UTF-8 ``bytes``) as a list of ``str``."""
    if isinstance(inputs, (str, bytes, bytearray)):
        inputs = [inputs]
    texts = list(inputs)
    try:  # every text a str: join checks that at C speed, ~8x faster than set(map(type, texts))
        "".join(texts)
        return texts
    except TypeError:
        pass
    for i, text in enumerate(texts):
        if isinstance(text, (bytes, bytearray)):
            texts[i] = bytes(text).decode("utf-8", errors="replace")
        elif not isinstance(text, str):
            raise TypeError(f"text {i} is a {type(text).__name__}; expected str or bytes")
    return texts


def read_lines(path: str | PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without line ends (invalid bytes become U+FFFD)."""
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace").splitlines()


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 holds) as U+FFFD, the defined result."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def joined_surrogate_pairs(text: str) -> str:
    """``text`` with each surrogate pair as the codepoint it encodes and any other surrogate as
    U+FFFD (what UTF-16 decoding with replacement makes of it: tiktoken's reading of a ``str``).

    >>> high, low = chr(0xD83D), chr(0xDC4D)
    >>> [hex(ord(c)) for c in joined_surrogate_pairs(high + low + " " + low + high)]
    ['0x1f44d', '0x20', '0xfffd', '0xfffd']
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _join(texts: Sequence[str]) -> str:
    return without_surrogates("".join(texts))


def utf32_units(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-32 code units back to back (int32; surrogates kept for the kernels to
    replace or join) and each text's length (int64): what the CPU ingest kernels read."""
    units = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    return units, np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def codepoints(texts: Sequence[str], device: torch.device | str = "cpu", *,
               join_surrogate_pairs: bool = False) -> Ragged:
    """Ragged int32 codepoints, one row per text; ``join_surrogate_pairs``: a surrogate pair is
    its codepoint (:func:`joined_surrogate_pairs`), else each surrogate is U+FFFD.

    >>> codepoints(["hé", "", "€", chr(0xD800)]).tolist()
    [[104, 233], [], [8364], [65533]]
    >>> pair = chr(0xD83D) + chr(0xDC4D)  # U+1F44D in UTF-16
    >>> codepoints([pair, pair[0], pair[1] + "x"], join_surrogate_pairs=True).tolist()
    [[128077], [65533], [65533, 120]]
    """
    if _dispatch.on_cpu_kernels(device):  # the codec's code units; surrogates replaced in the kernel
        kernel = codepoints_pairs_numba if join_surrogate_pairs else codepoints_numba
        values, offsets = kernel(*utf32_units(texts))
        return Ragged(torch.from_numpy(values), torch.from_numpy(offsets))
    if join_surrogate_pairs:
        texts = [joined_surrogate_pairs(t) for t in texts]
    encoded = _join(texts).encode("utf-32-le")
    values = torch.from_numpy(np.frombuffer(encoded, dtype=np.int32).copy())
    lengths = torch.from_numpy(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    return Ragged(values.to(device), offsets_from_lengths(lengths).to(device))


def strings(text: Ragged) -> list[str]:
    """The texts of ragged codepoints, the inverse of :func:`codepoints` (one decode of the batch;
    a slice per row; values that are not codepoints become U+FFFD).

    >>> strings(codepoints(["hé", "", "€"]))
    ['hé', '', '€']
    """
    joined = text.values.cpu().to(torch.int32).numpy().tobytes().decode("utf-32-le", errors="replace")
    bounds = text.offsets.tolist()
    return [joined[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


def utf8(texts: Sequence[str], device: torch.device | str = "cpu") -> Ragged:
    """Ragged uint8 UTF-8 bytes, one row per text (lone surrogates become U+FFFD).

    >>> utf8(["hé", "€"]).tolist()
    [[104, 195, 169], [226, 130, 172]]
    """
    return utf8_bytes(codepoints(texts, device))[0]


def utf8_bytes(words: Ragged) -> tuple[Ragged, torch.Tensor]:
    """UTF-8 bytes of ragged codepoints, and for every byte the index of its codepoint.

    >>> b, src = utf8_bytes(Ragged.from_lengths(torch.tensor([104, 233, 8364]), torch.tensor([1, 2])))
    >>> b.tolist(), src.tolist()
    ([[104], [195, 169, 226, 130, 172]], [0, 1, 1, 2, 2, 2])
    """
    if _dispatch.on_cpu_kernels(words.device):
        values, offsets, source = utf8_numba(words.values.numpy(), words.offsets.numpy())
        return Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), torch.from_numpy(source)
    if not bool((words.values >= 0x80).any()):  # ASCII: each codepoint is its own byte
        return Ragged(words.values.to(torch.uint8), words.offsets), torch.arange(words.values.numel(), device=words.device)
    cp = words.values.long()
    width = 1 + (cp >= 0x80).long() + (cp >= 0x800).long() + (cp >= 0x10000).long()
    per_char = offsets_from_lengths(width)
    total = int(per_char[-1])
    src = row_ids(per_char, total)
    k = positions_in_rows(per_char, total)  # byte index inside its character
    c, w = cp[src], width[src]
    trailing = w - 1 - k  # 6-bit groups after this byte
    payload = (c >> (6 * trailing)) & 0x3F
    lead_bits = torch.tensor([0, 0, 0xC0, 0xE0, 0xF0], device=cp.device)[w]
    lead = torch.where(w == 1, c, lead_bits | (c >> (6 * (w - 1))))
    values = torch.where(k == 0, lead, 0x80 | payload).to(torch.uint8)
    return Ragged(values, offsets_from_lengths(segment_sum(width, words.offsets))), src


def utf8_rows(data: ByteBuffer, offsets: np.ndarray | torch.Tensor | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged UTF-8 bytes as numpy, without a copy where the input allows: ``data`` (a uint8
    array or tensor, or any bytes-like object) and ``offsets`` (n + 1 non-decreasing int64 byte
    offsets into it; row ``t`` is ``data[offsets[t]:offsets[t + 1]]``). ValueError names a bad one.

    >>> data, offsets = utf8_rows(b"hi\\xc3\\xa9", [0, 2, 4])
    >>> data.dtype, offsets.tolist()
    (dtype('uint8'), [0, 2, 4])
    """
    if isinstance(data, torch.Tensor):
        data = data.detach().cpu().numpy()
    elif not isinstance(data, np.ndarray):
        data = np.frombuffer(data, dtype=np.uint8)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError(f"data is {data.dtype} with shape {data.shape}; pass 1-D uint8 UTF-8 bytes")
    offsets = (offsets.detach().cpu().numpy() if isinstance(offsets, torch.Tensor) else np.asarray(offsets))
    if offsets.ndim != 1 or offsets.size < 1 or offsets.dtype.kind not in "iu":
        raise ValueError(f"offsets has shape {offsets.shape} and dtype {offsets.dtype}; pass n + 1 integer row offsets")
    offsets = offsets.astype(np.int64, copy=False)
    if offsets[0] < 0 or offsets[-1] > data.size or (offsets.size > 1 and bool((offsets[1:] < offsets[:-1]).any())):
        raise ValueError(f"offsets must rise from >= 0 to <= len(data) = {data.size}; got {offsets[0]} ... {offsets[-1]}")
    return data, offsets


def rows_with(pattern: re.Pattern | LiteralPattern, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A bool per row of ragged UTF-8 bytes: True where ``pattern`` (a ``str`` regex of literal
    strings, or a :class:`gputok.literals.LiteralPattern`, searched as UTF-8 bytes) may match. One
    search over all the rows' bytes; a match across rows marks every row it touches, so a match
    inside a row that an earlier one across rows overlapped is still marked. A literal's UTF-8
    bytes decode to it wherever they occur, even beside invalid bytes (a UTF-8 character never
    starts with a continuation byte).
    """
    from .literals import LiteralPattern  # (which reads this module's utf32_units)

    rows = data[offsets[0]:offsets[-1]]
    if isinstance(pattern, LiteralPattern):
        spans = pattern.utf8_spans(rows)
    else:
        spans = np.asarray([m.span() for m in _as_bytes_pattern(pattern).finditer(memoryview(rows))], np.int64)
    if not spans.size:
        return np.zeros(offsets.size - 1, dtype=bool)
    spans = spans.reshape(-1, 2) + offsets[0]
    return rows_matching(spans[:, 0], spans[:, 1], offsets)


@functools.lru_cache(maxsize=64)
def _as_bytes_pattern(pattern: re.Pattern) -> re.Pattern:
    # the pattern's escaped literals in UTF-8: ASCII escapes read the same in a bytes regex, and
    # other characters stand for themselves (re.escape leaves them as they are)
    return re.compile(pattern.pattern.encode("utf-8", "surrogatepass"))


def row_chunks(offsets: np.ndarray, threads: int, min_bytes: int) -> list[tuple[int, int]]:
    """Consecutive row ranges of about equal bytes, at most ``threads`` of them and none much
    under ``min_bytes`` (one range when that is all that pays).

    >>> row_chunks(np.array([0, 5, 10, 15, 20]), threads=2, min_bytes=4)
    [(0, 2), (2, 4)]
    """
    rows, total = offsets.size - 1, int(offsets[-1] - offsets[0])
    parts = min(threads, rows, total // max(min_bytes, 1))
    if parts < 2:
        return [(0, rows)]
    cuts = np.searchsorted(offsets, offsets[0] + total * np.arange(1, parts) // parts, side="left")
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < rows}), rows]
    return list(zip(bounds, bounds[1:]))
