"""The whole-pipeline CPU kernel of huggingface Unigram tokenizer.json files
(``Tokenizer._whole_pipeline_kernel``): transformers' conversion of T5, XLM-R, ALBERT and the other
SentencePiece Unigram models (``Precompiled``, ``Strip``, ``Replace(" {2,}" -> "▁")``, then
``Metaspace``), and the file ``Tokenizer.save`` writes for a Unigram ``.model``.

One call of ``gputok.kernels.hf_unigram_texts_numba.encode_texts`` per chunk replaces the stages'
kernels and their Python glue (~0.2 ms a call). The pipeline must be: a normalizer of an optional
``Precompiled`` first, then ``Strip``, ``Prepend`` and ``Replace`` steps the CPU kernels take
(a character, a string, runs of one character class: :func:`gputok.normalizers.replace_runs`); a
``Metaspace`` pre-tokenizer (its "first" scheme only after a normalizer that cannot remove a
text's first characters, where the tokenizer handles it apart), or a ``Sequence`` of a
``WhitespaceSplit`` and a Metaspace (older T5 and Pegasus files); a huggingface ``Unigram`` (the
stage path's float64 Viterbi per word). Each distinct word the tokenizer's ``word_cache`` lacks
is segmented once, and inserted after the call (``WordCache.cpu_snapshot``, ``insert_misses``:
the store ``gputok._whole_bpe`` fills for BPE). A batch the kernel refuses (a text
that huggingface's grapheme-cluster reading of the charsmap may read otherwise) runs the stages,
which rewrite such texts in Python. Sampling runs the stages too.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._dispatch import CPU
from ._whole_cells import NO_CHARSMAP, NO_WORD_CACHE, WholeKernel
from ._whole_unigram import NO_UNK_PIECE
from .kernels import hf_unigram_texts_numba as kernel
from .kernels.cells_numba import RAGGED_OPTIONS, REFUSED, ragged_cells
from .kernels.ingest_numba import codepoints_numba
from .models.unigram import Unigram
from .normalizers import Precompiled, Prepend, Replace, Sequence, Strip, _white_space_numpy, may_remove_leading
from .pre_tokenizers import Metaspace, WhitespaceSplit, _whitespace_classes
from .pre_tokenizers import Sequence as PreTokenizerSequence
from .ragged import Ragged


def normalizer_program(normalizer: Any) -> tuple | None:
    """``encode_texts``' normalizer arguments (``charsmap`` .. ``white``) for ``normalizer``, or
    None where a step is not one the kernel runs."""
    steps = list(normalizer.normalizers) if type(normalizer) is Sequence else [] if normalizer is None else [normalizer]
    precompiled = steps.pop(0) if steps and type(steps[0]) is Precompiled else None
    rows, texts, members = [], [""], []  # (texts[0]: the empty text, for steps without one)

    def text(chars: str) -> int:
        texts.append(chars)
        return len(texts) - 1

    for step in steps:
        kind = type(step)
        if kind is Strip:
            rows.append((kernel.STRIP, step.strip_left, step.strip_right, 0, 0, 0))
        elif kind is Prepend:
            rows.append((kernel.PREPEND, 0, 0, 0, 0, text(step.prepend)))
        elif kind is Replace and step.char is not None:
            rows.append((kernel.CHAR, ord(step.char), 0, 0, 0, text(step.content)))
        elif kind is Replace and step._literal is not None:
            rows.append((kernel.STRING, text(step._literal), 0, 0, 0, text(step.content)))
        elif kind is Replace and step._runs is not None:
            table, shortest, longest, at_ends = step._runs
            members.append(table)
            rows.append((kernel.RUNS, len(members) - 1, shortest, longest, at_ends, text(step.content)))
        else:
            return None
    text_lengths = [len(t) for t in texts]
    program = (np.array(rows, np.int64).reshape(-1, 6),
               np.array([ord(c) for t in texts for c in t], np.int32),
               np.concatenate([[0], np.cumsum(text_lengths)]).astype(np.int64),
               np.concatenate(members or [np.zeros(0, np.uint8)]).astype(np.uint8),
               np.concatenate([[0], np.cumsum([m.size for m in members])]).astype(np.int64),
               _white_space_numpy().astype(np.uint8))
    if precompiled is None:
        return (False, *NO_CHARSMAP, np.zeros(0, np.uint8), False, False, *program)
    charsmap = precompiled.charsmap
    reading = charsmap.huggingface
    keyed = reading._arrays["key_lengths"].size > 0
    flags = reading._flags if keyed else np.zeros(0, np.uint8)
    crlf_keyed = bool(keyed and (flags[13] | flags[10]) & kernel.KEYED)
    return (True, *charsmap.numpy_rules(), flags, crlf_keyed, bool(keyed and reading.ascii_may_differ), *program)


def whole_hf_unigram_kernel(tokenizer: Any, normalizer: Any, pre_tokenizer: Any, model: Any) -> Callable | None:
    """``Tokenizer._whole_pipeline_kernel`` for these stages of ``tokenizer`` (held weakly; its stage
    path runs refused batches and sampling), or None where the pipeline is not one the kernel runs."""
    whitespace_first = (type(pre_tokenizer) is PreTokenizerSequence and len(pre_tokenizer.pretokenizers) == 2
                        and type(pre_tokenizer.pretokenizers[0]) is WhitespaceSplit)
    if whitespace_first:  # older T5 and Pegasus files (their Metaspace's scheme: always or never)
        pre_tokenizer = pre_tokenizer.pretokenizers[1]
    if not (type(model) is Unigram and not model.sentencepiece and type(pre_tokenizer) is Metaspace
            and not (pre_tokenizer.prepend_scheme == "first" and may_remove_leading(normalizer))):
        return None
    program = normalizer_program(normalizer)
    if program is None:
        return None
    from .tokenizer import Encoded

    tables = (*program, ord(pre_tokenizer.replacement), pre_tokenizer.prepend_scheme != "never", pre_tokenizer.split,
              whitespace_first, _whitespace_classes(CPU).numpy(), *model.trie.walk_arrays, model._score64_np,
              model.unk_score, -1 if model.unk_id is None else model.unk_id, model._byte_ids_np, model.byte_fallback)
    owner = weakref.ref(tokenizer)

    def snapshot() -> tuple:
        """The tokenizer's word cache of the moment and the kernel's view of it (an empty store: none)."""
        cache = owner().word_cache
        return cache, (NO_WORD_CACHE if cache is None else cache.cpu_snapshot(model))

    def settle(cache: Any, misses: np.ndarray, missing: bool = False) -> None:
        """The words the kernel segmented into the cache (under its lock), or the error where a
        character had no piece and the model no unk piece (those words then hold id -1: not kept)."""
        if missing:
            raise ValueError(NO_UNK_PIECE)
        if cache is not None and misses[0]:
            cache.insert_misses(model, misses)

    def stages(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        values, offsets = codepoints_numba(units, lengths)
        return owner()._encode_codepoints(Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), with_spans)

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        if model.is_sampling:  # a sample per word occurrence, from the stage path
            return stages(units, lengths, with_spans)
        cache, stored = snapshot()
        ids, offsets, spans, misses, missing, refused = kernel.encode_texts(units, lengths, *tables, *stored,
                                                                            with_spans)
        if refused:
            return stages(units, lengths, with_spans)
        settle(cache, misses, missing)
        return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)

    def encode_part(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """A part of a batch the one-call path takes: ids and token offsets, None where refused."""
        cache, stored = snapshot()
        ids, offsets, _, misses, missing, refused = kernel.encode_texts(units, lengths, *tables, *stored, False)
        if refused:
            return None
        settle(cache, misses, missing)
        return ids, offsets

    def padded_cells(units: np.ndarray, lengths: np.ndarray, cache: Any, *tables_then_options) -> tuple:
        """``encode_padded_cells`` on the cache's snapshot in the tables, its misses inserted after:
        (cells, error)."""
        cells, misses, error = kernel.encode_padded_cells(units, lengths, *tables_then_options)
        if error != REFUSED:
            settle(cache, misses)
        return cells, error

    def ragged_cells_(units: np.ndarray, lengths: np.ndarray, cache: Any, *tables_then_options) -> tuple:
        """``encode_texts`` then ``cells_numba.ragged_cells``: (cells, row offsets, error), the error
        ``REFUSED`` for a refused batch."""
        got = kernel.encode_texts(units, lengths, *tables_then_options[:-RAGGED_OPTIONS], False)
        if got[5]:
            return None, None, REFUSED
        settle(cache, got[3])
        return ragged_cells(got[0], got[1], *tables_then_options[-RAGGED_OPTIONS:])

    def cells_tables() -> tuple | None:
        """The one-call path's tables (the cache first, which the two functions above take, then the
        kernel's, the cache's snapshot last): none while sampling, or where a missing character
        would have to raise (no unk piece)."""
        if model.is_sampling or model.unk_id is None:
            return None
        cache, stored = snapshot()
        return (cache, *tables, *stored)
    return WholeKernel(encode, cells_tables, padded_cells, ragged_cells_, encode_part)
