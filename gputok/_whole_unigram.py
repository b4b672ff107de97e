"""The whole-pipeline CPU kernel of SentencePiece Unigram tokenizers (``Tokenizer.from_sentencepiece``
of a Unigram model): ``Tokenizer._whole_pipeline_kernel`` for a ``SentencePieceNormalizer`` (or one
inside ``DummySuffix``), ``MetaspaceSplit`` and a ``Unigram`` in SentencePiece mode.

One call of ``gputok.kernels.unigram_texts_numba.encode_texts`` per chunk replaces the stages'
kernels and their Python glue. Sampling (``Unigram.sampling``) keeps the stage path: its draws
come from a torch generator per call.

The word cache (``gputok.kernels.unigram_cache_numba``: a word's tokens where they are provably
SentencePiece's in context) is kept across calls, one per thread that encodes (the chunks of a
batch run on several threads at once; a table per thread needs no lock), while the tokenizer's
``word_cache`` is the same object: setting it to None turns the cache off, a new ``WordCache``
starts an empty one (as ``gputok bench`` does for each pass). The caches are not pickled (the
kernel is rebuilt on use) and a forked child starts with empty ones. Memory: 16 MB per thread.
A small batch is one kernel call from text to output arrays (``WholeKernel``'s ``padded_cells``), a
batch of a few thousand lines one call per CPU thread and one to post-process (``encode_part``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._whole_cells import NO_CHARSMAP, WholeKernel
from .kernels import unigram_texts_numba
from .models.sentencepiece_options import DummySuffix
from .models.unigram import SCORE_RESET_THRESHOLD, WHOLE_SENTENCE_CHARS, MetaspaceSplit, Unigram
from .normalizers import SentencePieceNormalizer
from .ragged import Ragged

# The cache's sizes: slots (a power of two; at most half of them used) and its store (int32 entries:
# a word's codepoints and twice its tokens); words over MAX_CACHED_CHARS codepoints are segmented
# every time.
CACHE_SLOTS, CACHE_STORE = 1 << 18, 1 << 21
MAX_CACHED_CHARS = 32
# A full cache stores no more words; it empties once this many misses since it filled outnumber its
# hits since then (text in another language or domain).
CACHE_FULL_MISSES = 1 << 14
_forks = [0]  # forked children count up: a cache made before the fork is dropped in the child
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


def _new_cache() -> tuple[np.ndarray, ...]:
    """An empty word cache (``unigram_cache_numba``'s arrays: the slots, the store, the counts)."""
    return np.zeros((CACHE_SLOTS, 4), np.int64), np.empty(CACHE_STORE, np.int32), np.zeros(4, np.int64)


_NO_CACHE = (np.zeros((1, 4), np.int64), np.zeros(0, np.int32), np.zeros(4, np.int64))
NO_UNK_PIECE = ("the text has characters no piece covers and this Unigram model has no unk_id; "
                "give the model an unk piece")


def whole_unigram_kernel(tokenizer: Any, normalizer: Any, pre_tokenizer: Any, model: Any) -> Callable | None:
    """``Tokenizer._whole_pipeline_kernel`` for these stages of ``tokenizer``, or None where the
    pipeline is not a SentencePiece Unigram one. ``tokenizer`` (held weakly) runs the stage path
    while its model samples."""
    suffix_code = -1
    if type(normalizer) is DummySuffix:
        suffix_code, normalizer = ord(normalizer.char), normalizer.inner
    if not (type(normalizer) is SentencePieceNormalizer and type(pre_tokenizer) is MetaspaceSplit
            and type(model) is Unigram and model.sentencepiece):
        return None
    from .tokenizer import Encoded

    charsmap = normalizer.precompiled.charsmap if normalizer.precompiled is not None else None
    rules = NO_CHARSMAP if charsmap is None else charsmap.numpy_rules()
    tables = (charsmap is not None, *rules, normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces,
              normalizer.escape_whitespaces, suffix_code, ord(pre_tokenizer.replacement), pre_tokenizer.split,
              model.splits_at_space, *model.trie.walk_arrays, model.score32, model.unk_score,
              -1 if model.unk_id is None else model.unk_id, SCORE_RESET_THRESHOLD, model.byte_ids.numpy(),
              model.byte_fallback)
    score64 = model.score64.numpy()
    max_abs = max(float(np.abs(score64).max()), abs(model.unk_score))
    owner = weakref.ref(tokenizer)
    local = threading.local()  # this thread's cache: (the word_cache it stands for, the fork count, arrays)

    def cache_arrays() -> tuple[int, tuple[np.ndarray, ...]]:
        """``segment_cached``'s ``whole_chars`` (-1: no cache) and this thread's cache."""
        word_cache = owner().word_cache
        if word_cache is None:
            return -1, _NO_CACHE
        made = getattr(local, "cache", None)
        if made is None or made[0]() is not word_cache or made[1] != _forks[0]:
            made = local.cache = (weakref.ref(word_cache), _forks[0], _new_cache())
        return WHOLE_SENTENCE_CHARS, made[2]

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        if model.is_sampling:  # a sample per word occurrence, from the stage path
            values, offsets = unigram_texts_numba.codepoints_numba(units, lengths)
            return owner()._encode_codepoints(Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), with_spans)
        whole_chars, cache = cache_arrays()
        ids, offsets, spans, missing = unigram_texts_numba.encode_texts(
            units, lengths, *tables, score64, max_abs, whole_chars, MAX_CACHED_CHARS, CACHE_FULL_MISSES, *cache,
            with_spans)
        if missing:
            raise ValueError(NO_UNK_PIECE)
        return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)

    def encode_part(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A part of a batch the one-call path takes (its caller checked ``cells_tables``): ids and
        token offsets, with the calling thread's cache."""
        whole_chars, cache = cache_arrays()
        ids, offsets, _, missing = unigram_texts_numba.encode_texts(
            units, lengths, *tables, score64, max_abs, whole_chars, MAX_CACHED_CHARS, CACHE_FULL_MISSES, *cache, False)
        if missing:
            raise ValueError(NO_UNK_PIECE)
        return ids, offsets

    def cells_tables() -> tuple | None:
        """The one-call path's tables for this thread: none while sampling, or where a missing
        character would have to raise (no unk piece)."""
        if model.is_sampling or model.unk_id is None:
            return None
        whole_chars, cache = cache_arrays()
        return (*tables, score64, max_abs, whole_chars, MAX_CACHED_CHARS, CACHE_FULL_MISSES, *cache)
    return WholeKernel(encode, cells_tables, unigram_texts_numba.encode_padded_cells,
                       unigram_texts_numba.encode_ragged_cells, encode_part)
