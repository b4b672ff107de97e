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

import re

import numpy as np
import torch

from . import _dispatch
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, segment_sum
from .kernels.ingest_numba import codepoints_numba, codepoints_pairs_numba
from .kernels.ingest_numba import utf8_numba

TextInput = str | bytes
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_texts(inputs: TextInput | Iterable[TextInput]) -> list[str]:
    """One text or an iterable of texts (``str`` or UTF-8 ``bytes``) as a list of ``str``."""
    if isinstance(inputs, (str, bytes, bytearray)):
        inputs = [inputs]
    texts = list(inputs)
    if set(map(type, texts)) <= {str}:  # every text a str, checked at C speed without copying them
        return texts
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
