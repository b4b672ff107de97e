"""One encode call on the CUDA code path as a handful of Triton kernels: no torch op per stage, one host sync.

``Tokenizer.__call__`` hands a batch here when the Triton backend runs it (CUDA tensors, or CPU
tensors under ``GPUTOK_BACKEND=triton`` with ``TRITON_INTERPRET=1``) and :func:`supports` says every
stage of the tokenizer has a Triton kernel; otherwise the call takes the stage-by-stage path.
Covered now, for single texts, no offsets, truncation without overflow, every padding option:
WordPiece tokenizers with a table normalizer (BertNormalizer, Lowercase, or none) and
BertPreTokenizer / WhitespaceSplit (BERT); byte-level BPE with no normalizer and the cl100k,
llama3 or qwen2 regex split (tiktoken's cl100k_base and its kin); SentencePiece's Unigram and
BPE pipelines (``Tokenizer.from_sentencepiece``: its normalizer, with or without a precompiled
charsmap; a Unigram with an unk piece, not sampling; a character-level BPE without dropout).

The stages and their kernels (``gputok.kernels``; each has a numba twin of the same per-row
algorithm that the CPU runs):

1. ingest: the batch joined and encoded by CPython's UTF-32 codec (lone surrogates as U+FFFD), one
   copy to the device with its row offsets;
2. normalize: ``normalize.rewrite_table_triton``, or SentencePiece's
   ``charsmap.charsmap_rewrite_triton`` then ``whitespace_rules.whitespace_rules_triton``, one
   text per lane;
3. split: ``word_split.split_by_class_triton`` (BERT), ``regex_split.cl100k_split_triton`` or
   ``word_split.split_before_marks_triton`` (SentencePiece BPE), one text per lane; none for
   Unigram, whose Viterbi runs over each whole text, as SentencePiece's does;
4. model: ``wordpiece_match.wordpiece_encode_triton``, ``bpe_words.byte_bpe_words_triton`` (UTF-8
   bytes, the whole-word rule, the merges) or ``sp_bpe_words.sp_bpe_words_triton`` (characters
   to symbols, byte fallback or unk, the same merges), one word per lane (every word occurrence:
   on a GPU a lane per word costs less than finding the repeated ones); or
   ``unigram_texts.unigram_texts_triton`` (SentencePiece's float32 Viterbi, then unk fusing or
   byte pieces), one text per lane, its tokens one word slot of the post-process;
5. post-process: ``postprocess.row_tokens_triton`` (tokens per text), then the one host sync of
   the call (the output's width, or the ragged output's size), then
   ``postprocess.write_rows_triton`` (specials, truncation, padding, mask, type ids).

No stage sizes its output on the host: each writes every text (word) into a region sized by an
upper bound (a text has at most one word per character, a WordPiece word at most one piece per
character, a byte-level BPE word at most four tokens per character) and the next stage reads the
regions; the split packs the words with one atomic add per text. Memory: ~52 bytes per place of
the normalized buffer for WordPiece (``expand`` places per input character, 3 for BERT: ~160 bytes
per input character; 1 GB for 6.5M characters): codepoints 4, word slots and packed words 32,
piece ids and ends 8, piece counts 8; ~100 bytes per character for byte-level BPE (words 32,
tokens and pair values 64). SentencePiece texts are laid out from ``expand * offsets[t] + 2 * t``
(``expand``: the most codepoints the charsmap writes per codepoint, 18 for nmt_nfkc; 1 without
a charsmap): ~36 bytes per place for Unigram (codepoints and units 12, scratch 12, tokens 8;
tokens 32 with byte fallback), so ~650 bytes per input character with nmt_nfkc's 18 (65 MB for
100k characters: the bound, not the text, sets it); ~110 bytes per place for SentencePiece BPE.

Tables (the normalizer's rows, the charsmap's, the character classes, the split's kind tables,
the vocabulary trie, the Unigram piece trie, the BPE pair map, the template) are put on the
device once per component and device and kept.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch

from . import normalizers, pre_tokenizers
from .ingest import _join
from .models.bpe import BPE
from .models.unigram import SCORE_RESET_THRESHOLD
from .models.wordpiece import WordPiece
from .processors import check_truncation

_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # component -> {device: tables}


def _on_device(component, device: torch.device, make):
    """``make()``'s tables for ``component``, made once per device and kept with the component."""
    per_device = _tables.setdefault(component, {})
    if device not in per_device:
        per_device[device] = make()
    return per_device[device]


def supports(tok, *, pairs: Sequence[str] | None, return_offsets: bool, overflow: bool, truncation: str | None) -> bool:
    """Whether every stage of ``tok`` and every option of the call has its Triton kernel here."""
    table_normalizer = tok.normalizer is None or (isinstance(tok.normalizer, normalizers.Normalizer)
                                                  and type(tok.normalizer).__call__ is normalizers.Normalizer.__call__)
    splitter = type(tok.pre_tokenizer) in (pre_tokenizers.BertPreTokenizer, pre_tokenizers.WhitespaceSplit)
    wordpiece = type(tok.model) is WordPiece and table_normalizer and splitter
    options = pairs is None and not return_offsets and not overflow and truncation in (None, "longest_first",
                                                                                       "only_first")
    return options and (wordpiece or _byte_level_bpe(tok) or _sentencepiece_unigram(tok) or _sentencepiece_bpe(tok))


def _sentencepiece_bpe(tok) -> bool:
    """SentencePiece's BPE pipeline (``bpe_sentencepiece.sentencepiece_tokenizer``: its normalizer,
    the merge-safe split, a character-level BPE without dropout, ``ignore_merges``, a subword prefix
    or suffix; unknown characters spelled in byte pieces that all exist, or an unk piece):
    ``_sp_bpe_words`` covers it."""
    from .models.bpe_sentencepiece import MergeSafeSplit

    model = tok.model
    if not (type(model) is BPE and not model.byte_level and not getattr(model, "dropout", None)
            and type(tok.normalizer) is normalizers.SentencePieceNormalizer
            and type(tok.pre_tokenizer) is MergeSafeSplit):
        return False
    symbols = model._numba_tables["symbols"]
    spelled = bool(symbols["byte_fallback"]) and bool((symbols["fallback_ids"] >= 0).all())
    return (not symbols["whole_slots"].size and not symbols["prefix"].size and not symbols["suffix"].size
            and (spelled or (bool(symbols["has_unk"]) and symbols["unk_id"] >= 0)))


def _sentencepiece_unigram(tok) -> bool:
    """SentencePiece's Unigram pipeline (``Tokenizer.from_sentencepiece``: its normalizer, the
    Metaspace split, a Unigram with an unk piece, not sampling): ``_unigram_words`` covers it."""
    from .models.unigram import MetaspaceSplit, Unigram

    model = tok.model
    return (type(model) is Unigram and model.sentencepiece and model.unk_id is not None and not model.is_sampling
            and type(tok.normalizer) is normalizers.SentencePieceNormalizer
            and type(tok.pre_tokenizer) is MetaspaceSplit)


_REGEX_RULES = {"cl100k": (3, True), "llama3": (3, False), "qwen2": (1, False)}  # rule: (digits, end_first)


def _byte_level_bpe(tok) -> bool:
    """Byte-level BPE words of a cl100k-style split (no normalizer, no dropout): ``_bpe_words`` covers it."""
    from . import regex_split

    split = tok.pre_tokenizer
    return (type(tok.model) is BPE and tok.model.byte_level and not getattr(tok.model, "dropout", None)
            and tok.normalizer is None
            and type(split) is pre_tokenizers.Split and split.tiles
            and regex_split._RULE.get(split.rule) in _REGEX_RULES)


def _classes(pre_tokenizer, device: torch.device) -> torch.Tensor:
    if type(pre_tokenizer) is pre_tokenizers.BertPreTokenizer:
        return pre_tokenizers._bert_classes(device)
    return pre_tokenizers._whitespace_classes(device)


def _normalizer_tables(normalizer, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int]:
    from .kernels.normalize import longest_row

    def make():
        table = normalizer.table
        return (table.values.to(device=device, dtype=torch.int32), table.offsets.to(device),
                longest_row(table.offsets))

    return _on_device(normalizer, device, make)


def _ingest(texts: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """int32 codepoints of the batch and int64 row offsets, on ``device`` (host work, then two copies)."""
    units = np.frombuffer(_join(texts).encode("utf-32-le"), dtype=np.int32)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    return (torch.from_numpy(units.copy()).to(device, non_blocking=True),
            torch.from_numpy(offsets).to(device, non_blocking=True))


def _wordpiece_words(tok, values: torch.Tensor, offsets: torch.Tensor, device: torch.device):
    """(word_base, word_counts, piece_starts, piece_counts, piece_ids) of the texts: normalizer, split
    by class, WordPiece per word."""
    from .kernels.normalize import rewrite_table_triton
    from .kernels.word_split import split_by_class_triton
    from .kernels.wordpiece_match import wordpiece_encode_triton

    if tok.normalizer is not None:
        norm, starts, lengths = rewrite_table_triton(values, offsets, *_normalizer_tables(tok.normalizer, device))
    else:
        norm, starts, lengths = values, offsets[:-1], offsets[1:] - offsets[:-1]
    word_starts, word_ends, word_base, word_counts = split_by_class_triton(norm, starts, lengths,
                                                                           _classes(tok.pre_tokenizer, device))
    model = tok.model
    piece_ids, _, piece_counts = wordpiece_encode_triton(
        norm, word_starts, word_ends, max_chars=model.max_input_chars_per_word, unk_id=model.unk_id,
        partial_unk=model.partial_unk, **model.trie.tensors(device))
    return word_base, word_counts, word_starts, piece_counts, piece_ids


def _bpe_tables(model: BPE, device: torch.device) -> dict:
    """The byte-level BPE model's tables for ``bpe_words.byte_bpe_words_triton`` on ``device``."""
    def make():
        symbols, merges = model._numba_tables["symbols"], model._numba_tables["merges"]
        on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        return dict(byte_to_id=on(symbols["byte_to_id"]), whole_slots=on(symbols["whole_slots"]),
                    token_keys=on(symbols["token_keys"]), token_offsets=on(symbols["token_offsets"]),
                    slot_keys=on(merges["slot_keys"]), slot_values=on(merges["slot_values"]),
                    hash_mask=merges["hash_mask"], max_probes=merges["max_probes"], vocab_size=merges["vocab_size"])

    return _on_device(model, device, make)


def _bpe_words(tok, values: torch.Tensor, offsets: torch.Tensor, device: torch.device):
    """(word_base, word_counts, piece_starts, piece_counts, piece_ids) of the texts: the regex split,
    then byte-level BPE per word."""
    from . import regex_split
    from .kernels.bpe_words import byte_bpe_words_triton
    from .kernels.regex_split import cl100k_split_triton

    rule = regex_split._RULE[tok.pre_tokenizer.rule]
    kinds, letters = _on_device(tok.pre_tokenizer, device, lambda: tuple(
        torch.from_numpy(a).to(device) for a in regex_split._numba_tables(rule)[:2]))
    digits, end_first = _REGEX_RULES[rule]
    word_starts, word_ends, word_base, word_counts, total = cl100k_split_triton(values, offsets, kinds, letters,
                                                                                digits=digits, end_first=end_first)
    piece_ids, piece_starts, piece_counts = byte_bpe_words_triton(values, word_starts, word_ends, total,
                                                                  **_bpe_tables(tok.model, device))
    return word_base, word_counts, piece_starts, piece_counts, piece_ids


def _charsmap_tables(normalizer, device: torch.device) -> dict | None:
    """A SentencePiece normalizer's charsmap tables on ``device`` (None: no charsmap)."""
    from .kernels.charsmap import device_rules

    def make():
        precompiled = normalizer.precompiled
        charsmap = None if precompiled is None else precompiled.charsmap
        return None if charsmap is None else device_rules(
            charsmap.numpy_rules(), device)

    return _on_device(normalizer, device, make)


def _sentencepiece_normalized(normalizer, values: torch.Tensor, offsets: torch.Tensor, device: torch.device
                              ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(the normalized texts, text ``t`` from ``expand * offsets[t] + 2 * t``; their lengths;
    ``expand``): the charsmap, if any, then SentencePiece's whitespace rules."""
    from .kernels.charsmap import charsmap_rewrite_triton
    from .kernels.whitespace_rules import whitespace_rules_triton

    rules = _charsmap_tables(normalizer, device)
    if rules is not None:
        expand, gap = rules["expand"], 2
        rewritten, units, lengths = charsmap_rewrite_triton(values, offsets, **rules)
    else:
        expand, gap, rewritten, units, lengths = 1, 0, values, None, offsets[1:] - offsets[:-1]
    text, text_lengths = whitespace_rules_triton(
        rewritten, units, offsets, lengths, chars=values.numel(), in_expand=expand, in_gap=gap, out_expand=expand,
        add_dummy_prefix=normalizer.add_dummy_prefix, remove_extra_whitespaces=normalizer.remove_extra_whitespaces,
        escape_whitespaces=normalizer.escape_whitespaces)
    return text, text_lengths, expand


def _unigram_tables(model, device: torch.device) -> dict:
    """The Unigram model's trie, scores and unk handling on ``device``."""
    def make():
        code_of, trie, dense, rare_offsets, rare_codes, rare_rows = model.trie.walk_arrays
        on = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
        return dict(code_of=on(code_of), trie=on(trie), dense=int(dense), rare_offsets=on(rare_offsets),
                    rare_codes=on(rare_codes), rare_rows=on(rare_rows), piece_score=on(model.score32),
                    byte_ids=model.byte_ids.to(device), unk_id=model.unk_id, unk_score=float(model.unk_score),
                    reset_threshold=float(SCORE_RESET_THRESHOLD), byte_fallback=bool(model.byte_fallback))

    return _on_device(model, device, make)


def _unigram_words(tok, values: torch.Tensor, offsets: torch.Tensor, device: torch.device):
    """(word_base, word_counts, piece_starts, piece_counts, piece_ids) of the texts, one word slot
    per text: the SentencePiece normalizer, then SentencePiece's Viterbi over each whole text."""
    from .kernels.unigram_texts import unigram_texts_triton

    text, text_lengths, expand = _sentencepiece_normalized(tok.normalizer, values, offsets, device)
    split = tok.pre_tokenizer
    piece_ids, piece_starts, piece_counts = unigram_texts_triton(
        text, offsets, text_lengths, expand=expand, mark=ord(split.replacement) if split.split else -1,
        **_unigram_tables(tok.model, device))
    word_base = torch.arange(offsets.numel() - 1, dtype=torch.int64, device=device)
    return word_base, torch.ones_like(word_base), piece_starts, piece_counts, piece_ids


def _sp_bpe_tables(model: BPE, device: torch.device) -> dict:
    """The SentencePiece BPE model's tables for ``sp_bpe_words.sp_bpe_words_triton`` on ``device``."""
    def make():
        symbols, merges = model._numba_tables["symbols"], model._numba_tables["merges"]
        on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        return dict(char_keys=on(symbols["char_keys"]), char_values=on(symbols["char_values"]),
                    char_mask=symbols["char_mask"], char_probes=symbols["char_probes"],
                    byte_fallback=bool(symbols["byte_fallback"]), fallback_ids=on(symbols["fallback_ids"]),
                    unk_id=int(symbols["unk_id"]), fuse_unk=bool(symbols["fuse_unk"]),
                    slot_keys=on(merges["slot_keys"]), slot_values=on(merges["slot_values"]),
                    hash_mask=merges["hash_mask"], max_probes=merges["max_probes"], vocab_size=merges["vocab_size"])

    return _on_device(model, device, make)


def _sp_bpe_words(tok, values: torch.Tensor, offsets: torch.Tensor, device: torch.device):
    """(word_base, word_counts, piece_starts, piece_counts, piece_ids) of the texts: the
    SentencePiece normalizer, the split before each run of '▁', then BPE per word."""
    from .kernels.sp_bpe_words import sp_bpe_words_triton
    from .kernels.word_split import split_before_marks_triton

    text, text_lengths, expand = _sentencepiece_normalized(tok.normalizer, values, offsets, device)
    char = tok.pre_tokenizer.char
    word_starts, word_ends, word_base, word_counts, total = split_before_marks_triton(
        text, offsets, text_lengths, expand=expand, mark=-1 if char is None else ord(char))
    piece_ids, piece_starts, piece_counts = sp_bpe_words_triton(text, word_starts, word_ends, total,
                                                                **_sp_bpe_tables(tok.model, device))
    return word_base, word_counts, piece_starts, piece_counts, piece_ids


def encode(tok, texts: Sequence[str], device: torch.device, *, template: Sequence, truncation: str | None,
           budget: int | None, padding: str, max_length: int | None, pad_to_multiple_of: int | None, left: bool,
           with_types: bool) -> dict[str, torch.Tensor]:
    """``tok(texts, ...)``'s outputs (single texts, no added token written in them) on ``device``."""
    from .kernels.postprocess import row_tokens_triton, write_rows_triton
    from .tokenizer import _template_arrays

    if truncation is not None:
        check_truncation(budget, truncation, False, False)
    values, offsets = _ingest(texts, device)
    words = (_wordpiece_words if type(tok.model) is WordPiece else _unigram_words if type(tok.model) is not BPE
             else _bpe_words if tok.model.byte_level else _sp_bpe_words)
    word_base, word_counts, piece_starts, piece_counts, piece_ids = words(tok, values, offsets, device)
    tokens = row_tokens_triton(word_base, word_counts, piece_counts)
    keep = tokens if budget is None else tokens.clamp(max=budget)
    item_seq, item_id, item_type = _on_device(tok, (device, tuple(template)), lambda: tuple(
        torch.from_numpy(a).to(device) for a in _template_arrays(tuple(template))))
    specials = sum(item.sequence is None for item in template)
    row_lengths = keep + specials
    rows = len(texts)
    if padding == "do_not_pad":
        row_offsets = torch.zeros(rows + 1, dtype=torch.int64, device=device)
        torch.cumsum(row_lengths, 0, out=row_offsets[1:])
        total = int(row_offsets[-1])  # the call's one host sync: the size of the output
        ids = torch.empty(total, dtype=torch.int64, device=device)
        types = torch.zeros_like(ids) if with_types else None
        write_rows_triton(item_seq, item_id, item_type, word_base, word_counts, piece_starts, piece_counts, piece_ids,
                          keep, row_offsets, ids, None, types)
        out = {"input_ids": ids, "row_offsets": row_offsets}
    else:
        width = int(row_lengths.max()) if rows else 0  # the call's one host sync: the output's width
        if padding == "max_length":
            width = max(width, max_length)
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        ids = torch.full((rows, width), tok._pad_id, dtype=torch.int64, device=device)
        mask = torch.zeros_like(ids)
        types = torch.zeros_like(ids) if with_types else None
        row_base = torch.arange(rows, dtype=torch.int64, device=device) * width
        if left:
            row_base += width - row_lengths
        write_rows_triton(item_seq, item_id, item_type, word_base, word_counts, piece_starts, piece_counts, piece_ids,
                          keep, row_base, ids, mask, types)
        out = {"input_ids": ids, "attention_mask": mask}
    if with_types:
        out["token_type_ids"] = types
    return out
