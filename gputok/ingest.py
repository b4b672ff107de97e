"""Ingest: Python strings, bytes and text files become ragged codepoint or UTF-8 byte tensors.

The whole batch is joined and encoded once by CPython's codecs (UTF-32 for codepoints, UTF-8 for
bytes) and viewed as one tensor, so there is no Python work per character; the only per-text work
is taking each text's length. Rows are the texts; character offsets reported by the tokenizer are
codepoint indices into them, as in huggingface ``tokenizers``.

Defined results for bad input: bytes that are not valid UTF-8 are decoded with U+FFFD replacement
characters (the rule of the references), and lone surrogates in ``str`` input become U+FFFD.
Memory: 4 bytes per character (codepoints) or 1 per UTF-8 byte, plus 8 bytes per text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike

import re

import numpy as np
import torch

from .ragged import Ragged, offsets_from_lengths, segment_sum

TextInput = str | bytes
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_texts(inputs: TextInput | Iterable[TextInput]) -> list[str]:
    """One text or an iterable of texts (``str`` or UTF-8 ``bytes``) as a list of ``str``."""
    if isinstance(inputs, (str, bytes, bytearray)):
        inputs = [inputs]
    texts = list(inputs)
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


def _join(texts: Sequence[str]) -> str:
    joined = "".join(texts)
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the defined result is U+FFFD
        joined = _SURROGATE.sub("\ufffd", joined)
    return joined


def codepoints(texts: Sequence[str], device: torch.device | str = "cpu") -> Ragged:
    """Ragged int32 codepoints, one row per text.

    >>> codepoints(["hé", "", "€", chr(0xD800)]).tolist()
    [[104, 233], [], [8364], [65533]]
    """
    encoded = _join(texts).encode("utf-32-le")
    values = torch.from_numpy(np.frombuffer(encoded, dtype=np.int32).copy())
    lengths = torch.from_numpy(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    return Ragged(values.to(device), offsets_from_lengths(lengths).to(device))


def utf8(texts: Sequence[str], device: torch.device | str = "cpu") -> Ragged:
    """Ragged uint8 UTF-8 bytes, one row per text.

    >>> utf8(["hé", "€"]).tolist()
    [[104, 195, 169], [226, 130, 172]]
    """
    encoded = _join(texts).encode("utf-8")
    cps = codepoints(texts)
    width = 1 + (cps.values >= 0x80).long() + (cps.values >= 0x800).long() + (cps.values >= 0x10000).long()
    values = torch.frombuffer(bytearray(encoded), dtype=torch.uint8) if encoded else torch.zeros(0, dtype=torch.uint8)
    return Ragged(values.to(device), offsets_from_lengths(segment_sum(width, cps.offsets)).to(device))
