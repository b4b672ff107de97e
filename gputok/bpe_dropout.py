"""BPE-dropout for :class:`gputok.models.bpe.BPE`: sampled merges, reproducible from a torch.Generator.

huggingface's BPE with ``dropout = p`` skips each merge it considers with probability ``p``
(``kernels/bpe_dropout_numba.py`` does exactly its loop), and keeps no cache then: every word
occurrence draws its own segmentation. ``p = 0`` (or null) is plain BPE; ``p = 1`` merges nothing
(words come out as their initial symbols: characters, or bytes for byte-level BPE).

A file's ``dropout`` applies to every encode, as in huggingface, drawing from torch's default
generator; :meth:`BPE.sampling` sets ``p`` and a ``torch.Generator`` for that model within a block
(in every thread: ``sampling(0)`` must also reach the threads a plain encode's chunks run on), as
``Unigram.sampling`` does for its thread: the same seed gives the same ids. While sampling, a batch is
encoded on one thread in text order (no chunks, no word cache, no deduplication), each word from
its own seed drawn from the generator, on the CPU whatever the device.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
import torch

from .kernels.bpe_dropout_numba import merge_rows_dropout
from .kernels.bpe_symbols_numba import bpe_symbols_numba
from .ragged import Ragged

if TYPE_CHECKING:
    from .models.bpe import BPE

_CHOSEN: dict[int, tuple[float, torch.Generator | None]] = {}  # {id(model): (p, generator)} set by sampling()


def checked_dropout(dropout: object) -> float | None:
    """A file's ``dropout``: None, or a number in [0, 1] (huggingface refuses others)."""
    if dropout is None:
        return None
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout <= 1.0:
        raise ValueError(f"BPE dropout={dropout!r}: expected null or a number between 0 and 1")
    return float(dropout)


def any_sampling() -> bool:
    """Whether some model samples now (inside a :func:`sampling` block): while none does, a model
    samples only by its own ``dropout`` (read by the caller; the one-call paths check this first,
    two plain reads instead of ``BPE.is_sampling``)."""
    return bool(_CHOSEN)


def settings(model: BPE) -> tuple[float, torch.Generator | None] | None:
    """``(p, generator)`` when ``model`` samples, else None (p = 0 does not)."""
    chosen = _CHOSEN.get(id(model))
    if chosen is None:
        p = model.dropout
        chosen = (p, None) if p else None
    return chosen if chosen is not None and chosen[0] > 0 else None


@contextlib.contextmanager
def sampling(model: BPE, dropout: float | None = None, generator: torch.Generator | None = None):
    """:meth:`gputok.models.bpe.BPE.sampling`."""
    p = checked_dropout(model.dropout if dropout is None else dropout)
    previous = _CHOSEN.get(id(model))
    _CHOSEN[id(model)] = (p or 0.0, generator)
    try:
        yield model
    finally:
        if previous is None:
            _CHOSEN.pop(id(model), None)
        else:
            _CHOSEN[id(model)] = previous


def encode_words(model: BPE, words: Ragged) -> tuple[Ragged, Ragged]:
    """``model.encode_words`` with sampled merges: token ids of each word and each token's end in
    characters (on the words' device; the work on the CPU)."""
    p, generator = settings(model)
    device = words.values.device
    codes = words.values.cpu().numpy().astype(np.int32, copy=False)
    tables = model._numba_tables
    got = bpe_symbols_numba(codes, words.offsets.cpu().numpy(), **tables["symbols"])
    if got is None:
        raise ValueError(f"unk_token {model.unk_token!r} is not in the vocabulary; add it or pass another")
    symbols, offsets, source = got
    seeds = torch.randint(0, 1 << 62, (offsets.size - 1,), generator=generator).numpy()
    merges = tables["merges"]
    last = np.empty(symbols.size, np.int64)
    out_offsets = merge_rows_dropout(symbols, offsets, last, seeds, p, merges["slot_keys"], merges["slot_values"],
                                     merges["hash_mask"], 64 - merges["hash_mask"].bit_length(), merges["max_probes"],
                                     merges["vocab_size"])
    total = out_offsets[-1]
    ends = source[last[:total] - 1] + 1  # the character holding the token's last symbol, + 1
    out_offsets = torch.from_numpy(out_offsets).to(device)
    return (Ragged(torch.from_numpy(symbols[:total].copy()).to(device), out_offsets),
            Ragged(torch.from_numpy(ends).to(device), out_offsets))


def encode_in_context(model: BPE, values: torch.Tensor, words, cache=None) -> tuple[Ragged, Ragged, torch.Tensor]:
    """Every word occurrence sampled on its own (no deduplication, no cache): the rows' ids and
    ends, and each occurrence's row (itself)."""
    from .dedup import gather_words

    lengths = words.ends - words.starts
    ids, ends = encode_words(model, gather_words(values, words.starts, lengths))
    return ids, ends, torch.arange(lengths.numel(), device=lengths.device)
