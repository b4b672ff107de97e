"""The whole BPE pipeline on the CPU as one kernel call per chunk: ``Tokenizer._whole_pipeline_kernel``'s factory.

Which pipelines: a BPE model (byte-level: cl100k, o200k, gpt2, llama3, qwen2 from tiktoken files,
GPT-2 files or tokenizer.json; character-level too) without ``tie_chars`` (SentencePiece's equal
scores) and without sampling; a table normalizer (:class:`gputok.normalizers.Normalizer` subclasses
that are one codepoint map, ByteLevel's included) or none; a pre-tokenizer that is one named-rule
Split whose matches are the words (or a regex recognised as one, :mod:`gputok.split_recognition`),
ByteLevel with or without its regex and ``add_prefix_space``, or a Sequence of those that splits
at most once. Anything else keeps the stage-by-stage path (``Tokenizer._encode_codepoints``).

The kernel (``gputok.kernels.bpe_texts_numba.encode_texts``) reads the tokenizer's word cache
(:class:`gputok.word_cache.WordCache`, the same store the stage path fills) through a snapshot
(``WordCache.cpu_snapshot``: the one the last change under the cache's lock left), and the
words it missed are inserted under the lock after the call, so chunks of a batch on several
threads share one cache; ``tokenizer.word_cache = None`` turns the cache off (each call
deduplicates its words only), and a new cache is read from the next call on. The cache pickles
empty and its lock is renewed in a forked child (its own module).

A batch of up to ``gputok.tokenizer.PARTS_MAX_CHARS`` characters takes ``encode_part`` once per
CPU thread (``Tokenizer._ids_in_parts``), each part on the cache as ``encode`` reads and fills it.
A small batch (one chunk, single texts, no offsets) takes ``padded_cells`` / ``ragged_cells``
(``Tokenizer._encode_rows_cpu``): the encode and the post-processing in one kernel call
(``bpe_texts_numba.encode_padded_cells`` / ``encode_ragged_cells``). ``encode_ragged_cells`` reads
the cache and has it filled around it as above; ``encode_padded_cells`` runs under the cache's lock
and inserts its misses itself (``WordCache.encode_inserting``; where the lock is busy, the
lock-free way above), so a batch-1 call (~9 us in all) pays no separate insert, and it is called
through its one compiled version, without numba's type dispatch (:func:`_compiled`).
``padded_packed`` is ``padded_cells`` with the post-processing options packed in one array
(``cells_numba.pack_padded``), which ``Tokenizer._padded_plan`` makes once per plan for the plain
``tok(texts)`` call, with ``padded_text``: ``__call__``'s tensors of one text.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from . import bpe_dropout, normalizers, pre_tokenizers
from ._whole_cells import NO_WORD_CACHE
from .kernels import bpe_texts_numba, cells_numba, word_cache_numba
from .models.bpe import BPE
from .ragged import Ragged

_NO_TABLE = (np.zeros(0, np.int32), np.zeros(0, np.int64))
# ``encode_padded_cells``' store without a word cache: the arrays of an empty store of capacity 0
# (nothing inserted), of the types a cache's store has (``WordCache._Store.arrays``).
_NO_STORE = (*NO_WORD_CACHE[:2], *NO_WORD_CACHE[3:], np.zeros(word_cache_numba.STATE_SIZE, np.int64))
_ONE_TEXT = np.full(1, -1, np.int64)  # ``encode_padded_cells``' lengths for one text's UTF-8
_UNITS = np.dtype(np.int32)  # a dtype object: numpy parses np.int32 at each call


def _compiled(kernel: Any, options_ndim: int) -> Callable:
    """The one compiled version of a numba ``kernel`` (made or loaded by a first call through it)
    for post-processing options (its fourth argument, ``cells_numba.pack_padded``'s) of
    ``options_ndim`` dimensions, to call without numba's type dispatch (~0.4 us of a ~9 us batch-1
    call); the kernel itself where it has none or several. Only for a caller whose other argument
    types never change: ``encode_padded_cells``' are ``bytes``, int64 arrays made once and a word
    store's arrays, whose dtypes and layouts are fixed."""
    compiled = [overload for types, overload in getattr(kernel, "overloads", {}).items()
                if types[3].ndim == options_ndim]
    if len(compiled) != 1:
        return kernel
    return compiled[0].entry_point


def _split_of(pre_tokenizer: Any) -> tuple[str | None, bool] | None:
    """(the split rule's name, None for no split; whether a space goes before each text) of a
    pre-tokenizer the kernel runs, else None."""
    steps = pre_tokenizer.pretokenizers if type(pre_tokenizer) is pre_tokenizers.Sequence else [pre_tokenizer]
    rule, prefix_space = None, False
    for k, step in enumerate(steps):
        if type(step) is pre_tokenizers.ByteLevel:
            if step.add_prefix_space:
                if k:  # a rewrite only comes first (the Sequence checks it)
                    return None
                prefix_space = True
            if not step.use_regex:
                continue
        elif type(step) is not pre_tokenizers.Split or not step.tiles:
            return None
        if rule is not None:  # a second split of the words: not one rule's matches
            return None
        rule = step.rule
    return rule, prefix_space


def whole_bpe_kernel(tokenizer: Any, normalizer: Any, pre_tokenizer: Any,
                     model: Any) -> Callable[[np.ndarray, np.ndarray, bool], Any] | None:
    """``Tokenizer._whole_pipeline_kernel`` for a BPE pipeline (see the module notes), or None.
    ``tokenizer`` is held weakly (its ``word_cache`` is read at each call)."""
    from .regex_split import _numba_tables
    from .tokenizer import Encoded

    table_normalizer = normalizer is None or type(normalizer).__call__ is normalizers.Normalizer.__call__
    if not (table_normalizer and type(model) is BPE and not model.tie_chars and pre_tokenizer is not None
            and not getattr(model, "is_sampling", False) and not getattr(model, "dropout", None)):
        return None
    split = _split_of(pre_tokenizer)
    if split is None:
        return None
    rule, prefix_space = split
    table = _NO_TABLE if normalizer is None else (normalizer.table.values.numpy(), normalizer.table.offsets.numpy())
    kinds, letters, code = (None, None, bpe_texts_numba.NO_SPLIT) if rule is None else _numba_tables(rule)
    classes = np.zeros(0, np.uint8) if rule is None else np.concatenate([kinds, letters])
    tables = model._numba_tables
    packed = bpe_texts_numba.pack_pipeline(tables["symbols"], tables["merges"], prefix_space=prefix_space, rule=code,
                                           table_values=table[0], table_offsets=table[1], classes=classes)
    options = (*table, classes, packed)
    owner = weakref.ref(tokenizer)
    kernel, padded_kernel = bpe_texts_numba.encode_texts, bpe_texts_numba.encode_padded_cells
    # per options' ndim - 1 (untruncated, truncating: two compiles, see cells_numba.pack_padded): the
    # kernel, then its compiled version called without numba's dispatch
    direct = [padded_kernel, padded_kernel]
    any_sampling, from_numpy = bpe_dropout.any_sampling, torch.from_numpy

    def store() -> tuple:
        cache = owner().word_cache
        return cache, (NO_WORD_CACHE if cache is None else cache.cpu_snapshot(model))

    def unk_error() -> ValueError:
        return ValueError(f"unk_token {model.unk_token!r} is not in the vocabulary; add it or pass another")

    def settle(cache: Any, misses: np.ndarray) -> None:
        """The unk error where the kernel gave no misses at all, else the misses into the cache."""
        if misses.size == 0:
            raise unk_error()
        if cache is not None and misses[0]:
            cache.insert_misses(model, misses)

    def encode_arrays(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> tuple[np.ndarray, ...]:
        """The kernel's ids, token offsets and spans on the word cache of the moment, its misses
        inserted after."""
        cache, stored = store()
        ids, offsets, spans, misses = kernel(units, lengths, *options, *stored, with_spans)
        settle(cache, misses)
        return ids, offsets, spans

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        ids, offsets, spans = encode_arrays(units, lengths, with_spans)
        return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)

    # The encode and the post-processing of a small batch in one kernel call (the caller,
    # Tokenizer._encode_rows_cpu, calls kernel(units, lengths, *tables, *post-processing options));
    # here the kernel is a function that reads the word cache before the call and fills it after.
    # A model sampling (BPE-dropout, ``model.sampling``) encodes stage by stage, as _encode_units does.
    def sampled(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        encoded = owner()._encode_units(units, lengths, False)
        return encoded.ids.values.numpy(), encoded.ids.offsets.numpy()

    def padded_answer(data: bytes, lengths: np.ndarray, post: np.ndarray) -> np.ndarray:
        """``encode_padded_cells``' answer (cells, or an array of shape (0, status, error)) on the
        word cache of the moment, its misses inserted by the kernel under the cache's lock
        (``WordCache.encode_inserting``); where the lock is busy (another thread inserts), the
        lock-free path: ``encode_texts`` on a snapshot, the misses inserted after, then the cells."""
        cache = owner().word_cache
        slot = post.ndim - 1
        if cache is None:
            got = direct[slot](data, lengths, packed, post, *_NO_STORE)
        else:
            got = cache.encode_inserting(model, direct[slot], data, lengths, packed, post)
            if got is None:
                if lengths is _ONE_TEXT:  # (UTF-8)
                    text = data.decode("utf-8")
                    data, lengths = text.encode("utf-32-le"), np.array((len(text),), np.int64)
                ids, offsets, _, misses = kernel(np.frombuffer(data, _UNITS), lengths, *options,
                                                 *cache.cpu_snapshot(model), False)
                settle(cache, misses)
                got, error = cells_numba.padded_cells_packed(ids, offsets, post)
                return np.empty((0, bpe_texts_numba.TRUNCATION_ERROR, error), np.int64) if error else got
        if direct[slot] is padded_kernel:  # compiled (or loaded) by this first call: called directly from now on
            direct[slot] = _compiled(padded_kernel, post.ndim)
        if len(got) == 0 and got.shape[1] == bpe_texts_numba.DECLINED_UNK:
            raise unk_error()
        return got

    def padded_packed(units: np.ndarray, lengths: np.ndarray, post: np.ndarray) -> tuple[np.ndarray, int]:
        # the sampling check first as two plain reads (the property costs ~0.4 us)
        if (model.dropout or any_sampling()) and model.is_sampling:
            return cells_numba.padded_cells_packed(*sampled(units, lengths), post)
        got = padded_answer(units.tobytes(), lengths, post)  # (a small batch: the copy is ~0.1 us)
        return got, (got.shape[2] if len(got) == 0 else 0)

    def padded_text(post: np.ndarray, with_types: bool) -> Callable[[str], dict[str, torch.Tensor] | None]:
        """``padded_packed`` of one text for the options ``post`` (packed), its tensors made here
        (a batch-1 call: ~9 us in all); None where the model samples, the post-processing raises or
        the text holds a lone surrogate (the caller's other path does it)."""
        slot = post.ndim - 1  # (direct's)

        def tensors(text: str) -> dict[str, torch.Tensor] | None:
            if (model.dropout or any_sampling()) and model.is_sampling:
                return None
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (U+FFFD to the kernels): UTF-32 on the other path
                return None
            # padded_answer's common case written out (~0.2 us): a cache, its lock free, the kernel compiled
            cache = owner().word_cache
            kernel_now = direct[slot]
            cells = (None if cache is None or kernel_now is padded_kernel
                     else cache.encode_inserting(model, kernel_now, data, _ONE_TEXT, packed, post))
            if cells is None:
                cells = padded_answer(data, _ONE_TEXT, post)
            if len(cells) == 0:  # (the unk error, raised on the other path)
                return None
            out = {"input_ids": from_numpy(cells[0]), "attention_mask": from_numpy(cells[1])}
            if with_types:
                out["token_type_ids"] = from_numpy(cells[2])
            return out
        return tensors

    def padded_cells(units: np.ndarray, lengths: np.ndarray, *post: Any) -> tuple[np.ndarray, int]:
        return padded_packed(units, lengths, cells_numba.pack_padded(*post))

    def ragged_cells(units: np.ndarray, lengths: np.ndarray, *post: Any) -> tuple[np.ndarray, np.ndarray, int]:
        if model.is_sampling:
            return cells_numba.ragged_cells(*sampled(units, lengths), *post)
        cache, stored = store()
        cells, row_offsets, misses, error = bpe_texts_numba.encode_ragged_cells(units, lengths, *options, *stored,
                                                                                *post)
        settle(cache, misses)
        return cells, row_offsets, error

    def encode_part(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A part of a batch ``Tokenizer._ids_in_parts`` cuts (never while the model samples): its
        ids and token offsets."""
        return encode_arrays(units, lengths, False)[:2]

    encode.encode_part = encode_part
    encode.padded_cells = (padded_cells, ())
    # (kernel, packer): Tokenizer._padded_plan packs a plan's options once (cells_numba.pack_padded)
    encode.padded_packed = (padded_packed, cells_numba.pack_padded)
    encode.ragged_cells = (ragged_cells, ())
    # packed options -> (one text's units -> its cells or None): made once per plan by Tokenizer._padded_plan
    encode.padded_text = padded_text
    return encode
