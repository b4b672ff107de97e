"""A whole-pipeline kernel (``Tokenizer._whole_pipeline_kernel``) with the one-call small-batch path
(``padded_cells`` / ``ragged_cells``: ``(kernel, tables)``, see ``Tokenizer._encode_rows_cpu``)
whose tables are made at each use: the SentencePiece kernels read the calling thread's word cache
(``gputok._whole_unigram``, ``gputok._whole_sp_bpe``), and a sampling Unigram model has no such path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# charsmap_rewrite_numba's arrays for a normalizer without a charsmap (never read; typed as the real ones)
NO_CHARSMAP = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, np.uint64),
               np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, np.int32),
               np.zeros(1, np.int64), 0)
# A whole-pipeline kernel's word-cache store where the tokenizer has none (word_cache_numba.lookup_dedup's
# arrays; gputok._whole_bpe, gputok._whole_hf_unigram): two empty slots (a table of one would shift a
# hash by 64 bits), nothing held.
NO_WORD_CACHE = (np.full(2, -1, np.int64), np.full(2, -1, np.int64), 0, np.zeros((0, 4), np.int64),
                 np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))


class WholeKernel:
    """``encode(units, lengths, with_spans)`` called as the kernel; ``tables()``: the cells
    kernels' tables for the calling thread now, or None where the one-call path does not apply.
    ``encode_part(units, lengths)``, where given: the ids and token offsets of a part of a batch
    the one-call path would take were it not too large for one thread, on the calling thread's
    tables (``Tokenizer._ids_in_parts`` runs a part per CPU thread)."""

    __slots__ = ("encode", "encode_part", "padded_kernel", "ragged_kernel", "tables")

    def __init__(self, encode: Callable, tables: Callable[[], tuple | None], padded_kernel: Callable,
                 ragged_kernel: Callable, encode_part: Callable | None = None) -> None:
        self.encode, self.tables, self.encode_part = encode, tables, encode_part
        self.padded_kernel, self.ragged_kernel = padded_kernel, ragged_kernel

    def __call__(self, units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Any:
        return self.encode(units, lengths, with_spans)

    @property
    def padded_cells(self) -> tuple[Callable, tuple] | None:
        tables = self.tables()
        return None if tables is None else (self.padded_kernel, tables)

    @property
    def ragged_cells(self) -> tuple[Callable, tuple] | None:
        tables = self.tables()
        return None if tables is None else (self.ragged_kernel, tables)
