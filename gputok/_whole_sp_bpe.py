"""The whole-pipeline CPU kernel of SentencePiece BPE tokenizers (``Tokenizer._whole_pipeline_kernel``).

A SentencePiece BPE ``.model`` read by :func:`gputok.models.bpe_sentencepiece.sentencepiece_tokenizer`
(SentencePiece's normalizer, the merge-safe word split, a character-level BPE) encodes a chunk of
texts in one call of ``gputok.kernels.sp_bpe_texts_numba``: the stage path's ids and spans, without
its Python glue per stage (tests/test_sp_bpe_texts.py compares the two). Pipelines it does not
cover (user-defined pieces, byte-level or dropout BPE, other normalizers) keep the stage path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .kernels import sp_bpe_texts_numba
from .models.bpe import BPE
from .models.bpe_sentencepiece import MergeSafeSplit
from .normalizers import SentencePieceNormalizer
from .ragged import Ragged


def whole_sentencepiece_bpe_kernel(normalizer: Any, pre_tokenizer: Any, model: Any,
                                   encoded: Callable[..., Any]) -> Callable[[np.ndarray, np.ndarray, bool], Any] | None:
    """``Tokenizer._whole_pipeline_kernel`` for these stages, or None; ``encoded``: the
    ``Encoded`` class the callable returns (``gputok.tokenizer.Encoded``)."""
    if not (type(normalizer) is SentencePieceNormalizer and type(pre_tokenizer) is MergeSafeSplit
            and type(model) is BPE and not model.byte_level and not getattr(model, "dropout", None)):
        return None
    tables = model._numba_tables
    symbols, merges = tables["symbols"], tables["merges"]
    model_arrays = (symbols["byte_to_id"], symbols["char_keys"], symbols["char_values"], symbols["char_mask"],
                    64 - symbols["char_mask"].bit_length(), symbols["char_probes"], symbols["byte_fallback"],
                    symbols["fallback_ids"], symbols["prefix"], symbols["suffix"], symbols["has_unk"],
                    symbols["unk_id"], symbols["fuse_unk"], symbols["whole_slots"], symbols["token_keys"],
                    symbols["token_offsets"], merges["slot_keys"], merges["slot_values"], merges["hash_mask"],
                    64 - merges["hash_mask"].bit_length(), merges["max_probes"], merges["vocab_size"],
                    merges["level_start"])
    rules = (normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces, normalizer.escape_whitespaces,
             -1 if pre_tokenizer.char is None else ord(pre_tokenizer.char))
    precompiled = normalizer.precompiled
    if precompiled is None:
        run, charsmap = sp_bpe_texts_numba.encode_texts, ()
    else:
        run = sp_bpe_texts_numba.encode_texts_charsmap
        rules_of = precompiled.charsmap
        charsmap = rules_of.__dict__.get("_numpy_rules") or rules_of._numpy_rules_build()
    unk = model.unk_token

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Any:
        ids, offsets, spans = run(units, lengths, *charsmap, *rules, *model_arrays, with_spans)
        if not offsets.size:
            raise ValueError(f"unk_token {unk!r} is not in the vocabulary; add it or pass another")
        return encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)
    return encode
