"""Sequences of Split pre-tokenizers with a fast path: DeepSeek-V3's three Splits before ByteLevel.

DeepSeek-V3's tokenizer.json pre-tokenizes with a ``Sequence`` of three ``Split`` s, each
``Isolated`` (the matches and the text between them are pieces), each applied to the pieces of
the one before (matches included), then ``ByteLevel(use_regex=false)``: digits ``\\p{N}{1,3}``,
runs of CJK (``[一-龥぀-ゟ゠-ヿ]+``), then :data:`DEEPSEEK_V3_WORDS` on every piece (a CJK run
splits again at its marks and punctuation: ``中゛`` -> 中, ゛). :class:`SplitSequence`
computes those pieces in one pass per text, the numba kernel
``regex_split_numba.deepseek_split_numba`` (other devices: on a CPU copy), span for span equal to
running the three regexes with the ``regex`` module (``tests/test_split_sequences.py``, also
against huggingface). Recognised by spelling: the file's three patterns exactly (any other
Sequence goes to the general pre-tokenizers). ``\\p{P}``, ``\\p{S}`` are read as the installed
``regex`` module reads them (Unicode 17 from regex 2025.10.23: a few new symbols differ from
huggingface's Unicode 16); the other classes from the references' tables.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from .pre_tokenizers import Words
from .ragged import Ragged

DEEPSEEK_V3_DIGITS = r"\p{N}{1,3}"
DEEPSEEK_V3_CJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
DEEPSEEK_V3_WORDS = (r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"""
                     r""" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
DEEPSEEK_V3 = (DEEPSEEK_V3_DIGITS, DEEPSEEK_V3_CJK, DEEPSEEK_V3_WORDS)


@functools.lru_cache(maxsize=1)
def deepseek_kinds() -> tuple[np.ndarray, np.ndarray]:
    """The per-codepoint kind tables of ``deepseek_split_numba`` (``kernels.regex_split_numba.D_*``):
    with digits and CJK marked, and without (the third regex's view)."""
    from . import regex_split
    from .kernels import regex_split_numba as k
    from .split_recognition import atom_mask
    from .unicode import MAX_CODEPOINT

    classes = regex_split.class_tables()[0].numpy()
    kinds = np.full(MAX_CODEPOINT, k.D_X, dtype=np.uint8)
    kinds[(classes & regex_split._M) != 0] = k.D_M
    kinds[atom_mask(r"[\p{P}\p{S}]", False)] = k.D_PS
    kinds[(classes & regex_split._L) != 0] = k.D_L
    kinds[[ord(c) for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]] = k.D_AP
    kinds[np.r_[ord("A"):ord("Z") + 1, ord("a"):ord("z") + 1]] = k.D_AL
    kinds[(classes & regex_split._WS) != 0] = k.D_OWS
    kinds[[0x0D, 0x0A]] = k.D_NL
    kinds[0x20] = k.D_SP
    inner = kinds.copy()
    kinds[np.r_[0x4E00:0x9FA6, 0x3040:0x3100]] = k.D_CJK
    kinds[(classes & regex_split._N) != 0] = k.D_N
    return kinds, inner


class SplitSequence:
    """DeepSeek-V3's ``Sequence[Split, Split, Split, ByteLevel(use_regex=false)]``, fast (module docstring)."""

    type = "Sequence"
    byte_level = True  # its words feed a byte-level BPE
    rule = "deepseek_v3"

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def __call__(self, text: Ragged) -> Words:
        from .kernels.regex_split_numba import deepseek_split_numba

        device = text.values.device
        starts, ends, offsets = deepseek_split_numba(text.values.cpu().numpy(), text.offsets.cpu().numpy(),
                                                     *deepseek_kinds())
        return Words(*(torch.from_numpy(a).to(device) for a in (starts, ends, offsets)))

    def to_json(self) -> dict[str, Any]:
        return self.spec


def from_sequence_spec(spec: dict[str, Any]) -> SplitSequence | None:
    """A fast :class:`SplitSequence` for a tokenizer.json ``Sequence`` pre-tokenizer it knows, else None."""
    steps = spec.get("pretokenizers") or []
    if len(steps) != 4 or not all(isinstance(s, dict) for s in steps):
        return None
    *splits, last = steps
    if last.get("type") != "ByteLevel" or last.get("use_regex", True) or last.get("add_prefix_space", False):
        return None
    for split, pattern in zip(splits, DEEPSEEK_V3):
        if (split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
                or (split.get("pattern") or {}).get("Regex") != pattern):
            return None
    return SplitSequence(spec)
