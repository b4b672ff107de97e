"""The whole-pipeline CPU kernel of SentencePiece BPE tokenizers (``Tokenizer._whole_pipeline_kernel``).

A SentencePiece BPE ``.model`` read by :func:`gputok.models.bpe_sentencepiece.sentencepiece_tokenizer`
(SentencePiece's normalizer, the merge-safe word split, a character-level BPE) encodes a chunk of
texts in one call of ``gputok.kernels.sp_bpe_texts_numba``: the stage path's ids and spans, without
its Python glue per stage (tests/test_sp_bpe_texts.py compares the two). So does the Llama-style
tokenizer.json of such a model (``Prepend("▁")`` and ``Replace(" " -> "▁")``, no pre-tokenizer:
:func:`sentencepiece_normalizer_of`). Pipelines it does not cover (user-defined pieces, byte-level
or dropout BPE, other normalizers) keep the stage path.

The word cache. The kernel looks each word up in a store of words it merged before, and adds the
words it merges (:class:`WordStore`: numpy arrays the kernel reads and writes). A store belongs to
one thread (the chunks of a batch run on several, ``gputok._cpu_threads``) and to the tokenizer's
``word_cache`` of the moment: no store is ever shared by two threads at once, so the kernel needs
no lock, and setting ``tokenizer.word_cache`` to a new :class:`gputok.word_cache.WordCache` starts
from empty stores (None: no cache). Words longer than its ``max_word_length`` are not kept; a full
store keeps its words until misses outnumber hits (``sp_bpe_texts_numba``'s module notes). Stores
are never pickled (they hang off this closure). Why a store per thread and not one shared by the
threads: over the 20 MB English bench at batch 1,024 the threads' stores merge 17% more words than
one store would (450,847 distinct words per half against 385,277 for the whole), but with short
words merged over the packed pair map a cold pass gains only ~7% from any store (one thread's half
of each batch: no store 0.509 s, 2**14 words 0.507, 2**16 0.471, 2**17 0.479), so a shared
store's barrier or serialized inserts would cost about what it saves. A small batch is one kernel call from text to
output arrays (``WholeKernel``'s ``padded_cells``), a batch of a few thousand lines one call per CPU
thread, each on its thread's store, and one to post-process (``encode_part``).
Memory: ~160 bytes per kept word and thread, at most ``min(capacity, 2**17)`` words (~27 MB).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._whole_cells import NO_CHARSMAP, WholeKernel
from .kernels import sp_bpe_texts_numba
from .kernels.bpe_heap import packed_pairs
from .models.bpe import BPE
from .models.bpe_sentencepiece import ESCAPED_SPACE, MergeSafeSplit
from .normalizers import Prepend, Replace, Sequence, SentencePieceNormalizer
from .ragged import Ragged


class WordStore:
    """One thread's words and their tokens, as the kernel's arrays
    (``gputok.kernels.sp_bpe_texts_numba._cached``): an open-addressing table of 32-byte slots
    (key, characters' start, tokens' start, length << 32 | count), kept at most half full, the
    words' characters back to back, their tokens as (id, end) rows, and the counters of what is
    used (slots, characters, tokens) with the hits and misses since it filled, and how many misses
    since then (at least) empty it: ``FULL_MISSES``, at most the capacity (a small store refills
    sooner)."""

    def __init__(self, capacity: int, longest: int) -> None:
        slots = 1 << max(4, (2 * capacity - 1).bit_length())
        self.slots = np.empty((slots, 4), np.int64)
        self.slots[:, 0] = -1
        self.shift = 64 - (slots - 1).bit_length()
        self.chars = np.empty(12 * capacity, np.int32)  # English words average ~6 characters
        self.tokens = np.empty((6 * capacity, 2), np.int64)
        self.used = np.zeros(5, np.int64)
        self.longest = longest
        self.full_misses = min(FULL_MISSES, capacity)

    def arrays(self) -> tuple:
        """The kernel's ``cache_*`` arguments."""
        return self.slots, self.shift, self.chars, self.tokens, self.used, self.longest, self.full_misses


# No cache: no word is long enough to be looked up or added (``cache_longest`` -1).
_NO_STORE = (np.full((16, 4), -1, np.int64), 60, np.zeros(0, np.int32), np.zeros((0, 2), np.int64), np.zeros(5, np.int64),
             -1, 1)
# A vocabulary too large for the packed pair map: every row merges over the map's slot arrays.
_NOT_PACKED = (np.zeros(0, np.int64), 0, 0)
STORE_WORDS = 1 << 17  # at most, per thread
# A full store empties after at least this many misses since it filled, if they outnumber its hits.
FULL_MISSES = 1 << 14


# Codepoints below this take their first symbol from one array read (``direct_chars``): Latin,
# Greek, Cyrillic, the punctuation and SentencePiece's "▁" (U+2581); 48 kB.
DIRECT_CHARS = 0x3000


def direct_chars(symbols: dict) -> np.ndarray:
    """The kernel's ``char_direct``: for each codepoint below ``DIRECT_CHARS``, the token the char
    map gives it wherever it stands in a word (all four of its keys, ``variant << 21 |
    codepoint``, hold that token), else -1 (looked up as before: byte fallback, unk, a token per
    place). Empty where a whole word may be one token first (``whole_slots``): every word goes
    through ``_symbols`` then. A miss's characters took ~12 ns each through the char map."""
    if symbols["whole_slots"].size:
        return np.zeros(0, np.int32)
    keys, values = symbols["char_keys"], symbols["char_values"]
    live = (keys != -1) & ((keys & 0x1FFFFF) < DIRECT_CHARS)
    by_variant = np.full((4, DIRECT_CHARS), -1, np.int64)
    by_variant[keys[live] >> 21, keys[live] & 0x1FFFFF] = values[live]
    same = (by_variant == by_variant[0]).all(axis=0)
    return np.where(same, by_variant[0], -1).astype(np.int32)


def sentencepiece_normalizer_of(normalizer: Sequence) -> SentencePieceNormalizer | None:
    """The SentencePiece normalizer that rewrites every text as ``normalizer`` does, sources
    included, where it is the huggingface Sequence a SentencePiece BPE without a charsmap or
    ``remove_extra_whitespaces`` is saved as (transformers' Llama converter, ``Tokenizer.save``):
    ``Prepend("▁")`` (with ``add_dummy_prefix``) then ``Replace(" " -> "▁")``; else None."""
    *prepend, replace = normalizer.normalizers or (None,)
    if not (type(replace) is Replace and replace.pattern == {"String": " "} and replace.content == ESCAPED_SPACE
            and len(prepend) <= 1 and all(type(p) is Prepend and p.prepend == ESCAPED_SPACE for p in prepend)):
        return None
    return SentencePieceNormalizer(b"", add_dummy_prefix=bool(prepend), remove_extra_whitespaces=False,
                                   escape_whitespaces=True)


def whole_sentencepiece_bpe_kernel(owner: Any, normalizer: Any, pre_tokenizer: Any,
                                   model: Any) -> Callable[[np.ndarray, np.ndarray, bool], Any] | None:
    """``Tokenizer._whole_pipeline_kernel`` for these stages, or None; ``owner``: the
    tokenizer, whose ``word_cache`` says whether and which stores to use (held weakly)."""
    from .tokenizer import Encoded as encoded

    if type(normalizer) is Sequence:  # a Llama-style tokenizer.json (read with a MergeSafeSplit for its none)
        normalizer = sentencepiece_normalizer_of(normalizer)
    if not (type(normalizer) is SentencePieceNormalizer and type(pre_tokenizer) is MergeSafeSplit
            and type(model) is BPE and not model.byte_level and not getattr(model, "dropout", None)):
        return None
    tables = model._numba_tables
    symbols, merges = tables["symbols"], tables["merges"]
    # The pair map's two slot arrays as they are: as strided views of one [slots, 2] array (a
    # slot's key and value in one cache line) a cold encode took 5-15% more CPU, with the merges'
    # scan over packed symbols (bpe_heap._merge_tiny; the two layouts alternated, best of 4 runs).
    slot_keys, slot_values = merges["slot_keys"], merges["slot_values"]
    model_arrays = (symbols["byte_to_id"], symbols["char_keys"], symbols["char_values"], symbols["char_mask"],
                    64 - symbols["char_mask"].bit_length(), symbols["char_probes"], symbols["byte_fallback"],
                    symbols["fallback_ids"], symbols["prefix"], symbols["suffix"], symbols["has_unk"],
                    symbols["unk_id"], symbols["fuse_unk"], symbols["whole_slots"], symbols["token_keys"],
                    symbols["token_offsets"], slot_keys, slot_values, merges["hash_mask"],
                    64 - merges["hash_mask"].bit_length(), merges["max_probes"], merges["vocab_size"],
                    merges["level_start"], *(packed_pairs(slot_keys, slot_values, merges["vocab_size"]) or _NOT_PACKED),
                    direct_chars(symbols))
    rules = (normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces, normalizer.escape_whitespaces,
             -1 if pre_tokenizer.char is None else ord(pre_tokenizer.char))
    precompiled = normalizer.precompiled
    if precompiled is None:
        charsmap = (False, *NO_CHARSMAP)
    else:
        rules_of = precompiled.charsmap
        charsmap = (True, *rules_of.numpy_rules())
    unk = model.unk_token
    tokenizer = weakref.ref(owner)
    stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # word cache -> {thread id: WordStore}
    local = threading.local()  # this thread's word cache and its store's arrays, the last call's

    def store() -> tuple:
        """The calling thread's store for the tokenizer's word cache of the moment."""
        cache = getattr(tokenizer(), "word_cache", None)
        if cache is None:
            return _NO_STORE
        held = local.__dict__.get("cache")
        if held is None or held() is not cache:  # a new thread, or a new word cache
            mine = stores.get(cache)
            if mine is None:
                mine = stores.setdefault(cache, {})
            found = mine.get(threading.get_ident())
            if found is None:
                found = mine[threading.get_ident()] = WordStore(min(cache.capacity, STORE_WORDS),
                                                                 cache.max_word_length)
            local.cache, local.arrays = weakref.ref(cache), found.arrays()
        return local.arrays

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Any:
        ids, offsets, spans = sp_bpe_texts_numba.encode_texts(units, lengths, *charsmap, *rules, *model_arrays,
                                                             *store(), with_spans)
        if not offsets.size:
            raise ValueError(f"unk_token {unk!r} is not in the vocabulary; add it or pass another")
        return encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)

    def encode_part(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A part of a batch the one-call path takes (its caller checked ``tables``): ids and token
        offsets, with the calling thread's store (each part runs on its own thread)."""
        ids, offsets, _ = sp_bpe_texts_numba.encode_texts(units, lengths, *charsmap, *rules, *model_arrays, *store(),
                                                          False)
        return ids, offsets

    # The one-call path: where every character has tokens (the encode cannot fail).
    encodes_all = not (symbols["has_unk"] and symbols["unk_id"] < 0)
    return WholeKernel(encode, lambda: (*charsmap, *rules, *model_arrays, *store()) if encodes_all else None,
                       sp_bpe_texts_numba.encode_padded_cells, sp_bpe_texts_numba.encode_ragged_cells, encode_part)
