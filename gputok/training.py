"""Training BPE, WordPiece and Unigram tokenizers: corpus -> word counts -> vocabulary -> a gputok Tokenizer.

``train(files_or_iterator, preset=...)`` follows huggingface ``tokenizers``' ready-made classes,
with their defaults (checked against ``tokenizers/implementations/``):

- ``"byte-level-bpe"``: ``ByteLevelBPETokenizer()``: no normalizer, ``ByteLevel`` pre-tokenizer
  (GPT-2 split, ``add_prefix_space=False``), the 256 byte characters as initial alphabet, no
  special tokens, ``ByteLevel`` post-processor (``trim_offsets=False``) and decoder;
- ``"char-bpe"``: ``CharBPETokenizer()``: ``BertNormalizer(lowercase=False)``,
  ``BertPreTokenizer``, end-of-word suffix ``</w>``, special token and unk ``<unk>``,
  ``limit_alphabet=1000``, ``BPEDecoder``;
- ``"bert-wordpiece"``: ``BertWordPieceTokenizer(lowercase=True)``: ``BertNormalizer``,
  ``BertPreTokenizer``, ``[PAD] [UNK] [CLS] [SEP] [MASK]``, ``limit_alphabet=1000``, the ``##``
  prefix, ``WordPiece`` decoder. One difference: the trained tokenizer gets the
  ``BertProcessing`` post-processor (``[CLS] A [SEP]``) that ``BertWordPieceTokenizer(vocab)``
  has; huggingface's freshly trained one has none until reloaded from its vocab.txt.

``model="bpe"`` without a preset means ``"byte-level-bpe"``, ``model="wordpiece"`` means
``"bert-wordpiece"``. ``model="unigram"`` is SentencePiece's Unigram trainer instead
(:func:`_train_unigram`: nmt_nfkc, EM and pruning in :mod:`gputok.trainers.unigram`). The
phases: counting (:mod:`gputok.trainers.counting`: streamed, on tensors, memory following the unique words), merging (``learn_bpe`` / ``learn_wordpiece`` of
:mod:`gputok.trainers.bpe` / :mod:`gputok.trainers.wordpiece`), building the Tokenizer from the
huggingface ``tokenizer.json`` those make. Differences from the reference, by design: invalid
UTF-8 in a training file becomes U+FFFD (the reference stops with an error), and a
``vocab_size`` below the special tokens plus the alphabet is an error (the reference silently
returns the larger vocabulary).

>>> import gputok
>>> tok = gputok.train_from_counts({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5},
...                                preset="bert-wordpiece", vocab_size=19, progress=False)
>>> [tok.id_to_token(i) for i in tok.encode("Hugs pun")]
['[CLS]', 'hug', '##s', 'p', '##un', '[SEP]']
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import _dispatch, normalizers, pre_tokenizers
from ._cpu_threads import with_gputok_threads
from ._memory import _GLIBC_MAX_DYNAMIC_THRESHOLD, big_blocks_unmapped_when_freed, release_free_memory
from .ragged import Ragged
from .tokenizer import Tokenizer
from .trainers import counting

MODELS = ("bpe", "wordpiece", "unigram")
SCORES = ("frequency", "likelihood")


@dataclass(frozen=True)
class Preset:
    """A huggingface ready-made tokenizer class: its pipeline (tokenizer.json parts) and trainer defaults."""

    model: str
    normalizer: dict | None
    pre_tokenizer: dict
    decoder: dict
    post_processor: dict | None = None
    byte_level: bool = False
    special_tokens: tuple[str, ...] = ()
    limit_alphabet: int | None = None
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None
    unk_token: str | None = None


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
PRESETS = {
    "byte-level-bpe": Preset(
        "bpe", None, _BYTE_LEVEL,
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        post_processor={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        byte_level=True),
    "char-bpe": Preset(
        "bpe", {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                "strip_accents": None, "lowercase": False},
        {"type": "BertPreTokenizer"}, decoder={"type": "BPEDecoder", "suffix": "</w>"},
        special_tokens=("<unk>",), limit_alphabet=1000, end_of_word_suffix="</w>", unk_token="<unk>"),
    "bert-wordpiece": Preset(
        "wordpiece", {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                      "strip_accents": None, "lowercase": True},
        {"type": "BertPreTokenizer"}, decoder={"type": "WordPiece", "prefix": "##", "cleanup": True},
        special_tokens=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), limit_alphabet=1000,
        continuing_subword_prefix="##", unk_token="[UNK]"),
}
DEFAULT_PRESET = {"bpe": "byte-level-bpe", "wordpiece": "bert-wordpiece"}


@dataclass
class TrainingSummary:
    """What a training run did, and the seconds of each phase."""

    words: int = 0  # word occurrences (trained from counts: the sum of the counts)
    unique_words: int = 0
    vocab_size: int = 0
    merges: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # counting, merging, building; writing (CLI)

    def __str__(self) -> str:
        phases = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())
        return (f"{self.words:,} words, {self.unique_words:,} unique, vocabulary {self.vocab_size:,}, "
                f"{self.merges:,} merges; {phases}")


def _resolve(model: str | None, preset: str | None, score: str) -> tuple[str, Preset]:
    """The preset's name and settings for these options, or a ValueError naming the valid ones."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    if model is not None and model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {list(MODELS)}")
    if model == "unigram":
        raise ValueError("model='unigram' has no huggingface preset; call train(..., model='unigram') "
                         "without preset= (train_from_counts does not train Unigram models)")
    if preset is None:
        preset = DEFAULT_PRESET[model or "bpe"]
    chosen = PRESETS[preset]
    if model is not None and model != chosen.model:
        raise ValueError(f"preset {preset!r} trains a {chosen.model!r} model, not model={model!r}; "
                         f"drop model= or pick a {model} preset: "
                         f"{sorted(p for p, v in PRESETS.items() if v.model == model)}")
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {list(SCORES)}")
    if score != "frequency" and chosen.model != "wordpiece":
        raise ValueError(f"score={score!r} is a WordPiece option; BPE merges by frequency (drop score=)")
    return preset, chosen


def _check_numbers(vocab_size: int, min_frequency: int, limit_alphabet: int | None,
                   max_token_length: int | None) -> None:
    for name, value, low in (("vocab_size", vocab_size, 1), ("min_frequency", min_frequency, 0),
                             ("limit_alphabet", limit_alphabet, 0), ("max_token_length", max_token_length, 1)):
        if value is None and name in ("limit_alphabet", "max_token_length"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r}; pass an integer >= {low}")


def _components(chosen: Preset):
    return normalizers.from_json(chosen.normalizer), pre_tokenizers.from_json(chosen.pre_tokenizer)


def count_words(files_or_iterator: str | os.PathLike | Iterable, *, preset: str = "byte-level-bpe",
                device: torch.device | str = "cpu", progress: bool = False) -> tuple[counting.WordCounts, int]:
    """Unique words (ragged int32 codepoints) and their int64 counts of a corpus through
    ``preset``'s normalizer and pre-tokenizer, and the number of words seen. ``files_or_iterator``:
    a path, a list of paths, or an iterable of texts (``str``); files are checked before any work
    starts.
    """
    _, chosen = _resolve(None, preset, "frequency")
    normalizer, pre_tokenizer = _components(chosen)
    counter = counting.WordCounter(normalizer, pre_tokenizer, byte_level=chosen.byte_level,
                                   device=_dispatch.checked_device(device))
    share = counting.RankShare()  # under torchrun, this rank's chunks; the counts are merged below
    _read(files_or_iterator, on_file_chunk=share.wrap(counter.add_lines), on_texts=share.wrap(counter.add_texts),
          progress=progress, desc="counting")
    return counting.all_ranks_counts(counter.result(), counter.words_seen)


def _read(files_or_iterator, *, on_file_chunk: Callable[[str], None], on_texts: Callable[[list[str]], None],
          progress: bool, desc: str) -> None:
    """Stream the input in chunks: files (checked before any work starts) as whole lines with a
    byte progress bar (``on_file_chunk``), an iterable's texts as lists (``on_texts``)."""
    paths = _as_paths(files_or_iterator)
    if paths is None:
        for texts in counting.text_chunks(files_or_iterator):
            on_texts(texts)
        return
    paths = counting.check_files(paths)
    from tqdm import tqdm

    with tqdm(total=sum(p.stat().st_size for p in paths), unit="B", unit_scale=True, desc=desc,
              disable=not progress, file=sys.stderr) as bar:
        for chunk in counting.file_chunks(paths, on_bytes=bar.update):
            on_file_chunk(chunk)


def _as_paths(source) -> list | None:
    """The file paths in ``source`` (a path, or a list/tuple of paths), or None for an iterable of texts."""
    if isinstance(source, (str, os.PathLike)):
        return [source]
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("no training input: an empty list; pass text files or an iterator of texts")
        if not all(isinstance(s, (str, os.PathLike)) for s in source):
            raise TypeError("a list passed to train() must hold file paths; pass texts as an iterator: iter(texts)")
        return list(source)
    return None


@big_blocks_unmapped_when_freed()
@with_gputok_threads
def train_with_summary(files_or_iterator, *, model: str | None = None, preset: str | None = None,
                       vocab_size: int | None = None, min_frequency: int = 2, special_tokens: Sequence[str] | None = None,
                       score: str = "frequency", limit_alphabet: int | None = None,
                       initial_alphabet: Sequence[str] = (), max_token_length: int | None = None,
                       device: torch.device | str = "cpu", progress: bool = True, byte_fallback: bool = False,
                       character_coverage: float = 0.9995,
                       max_piece_length: int = 16,
                       max_sentence_length: int | None = 4192) -> tuple[Tokenizer, TrainingSummary]:
    """:func:`train`, also returning the :class:`TrainingSummary`."""
    if vocab_size is None:
        vocab_size = 8000 if model == "unigram" else 30000
    if model == "unigram":
        if preset is not None:
            raise ValueError(f"preset={preset!r} is a BPE/WordPiece preset; model='unigram' takes none (drop preset=)")
        given = {"min_frequency": min_frequency != 2, "score": score != "frequency",
                 "limit_alphabet": limit_alphabet is not None, "initial_alphabet": bool(initial_alphabet),
                 "max_token_length": max_token_length is not None}
        if any(given.values()):
            raise ValueError(f"{[k for k, v in given.items() if v]}: BPE/WordPiece options; model='unigram' takes "
                             "byte_fallback, character_coverage, max_piece_length and max_sentence_length instead")
        if _dispatch.checked_device(device).type != "cpu":
            raise ValueError(f"device={str(device)!r}: Unigram training runs on the CPU only (its expected-count "
                             "kernel is tested against its twin, but the trainer keeps its tables on the host); "
                             "drop device=")
        return _train_unigram(files_or_iterator, vocab_size=vocab_size, special_tokens=special_tokens,
                              byte_fallback=byte_fallback, character_coverage=character_coverage,
                              max_piece_length=max_piece_length, max_sentence_length=max_sentence_length,
                              progress=progress)
    unigram_only = {"byte_fallback": byte_fallback is not False, "character_coverage": character_coverage != 0.9995,
                    "max_piece_length": max_piece_length != 16, "max_sentence_length": max_sentence_length != 4192}
    if any(unigram_only.values()):
        raise ValueError(f"{[k for k, v in unigram_only.items() if v]}: Unigram options; pass model='unigram'")
    name, chosen = _resolve(model, preset, score)
    _check_numbers(vocab_size, min_frequency, limit_alphabet, max_token_length)
    _check_vocab_size(chosen, vocab_size, special_tokens, None)  # byte-level: known before counting
    start = time.perf_counter()
    table, words_seen = count_words(files_or_iterator, preset=name, device=device, progress=progress)
    if not len(table):
        raise ValueError("the training corpus holds no words (empty, or only whitespace); nothing to train on")
    counted = time.perf_counter()
    release_free_memory()  # counting's freed temporaries, before the merge loop allocates
    tok, summary = _learn(chosen, table.words, table.counts, vocab_size=vocab_size, min_frequency=min_frequency,
                          special_tokens=special_tokens, score=score, limit_alphabet=limit_alphabet,
                          initial_alphabet=initial_alphabet, max_token_length=max_token_length, progress=progress)
    summary.words = words_seen
    summary.seconds = {"counting": counted - start, **summary.seconds}
    return tok, summary


def train(files_or_iterator, *, model: str | None = None, preset: str | None = None, vocab_size: int | None = None,
          min_frequency: int = 2, special_tokens: Sequence[str] | None = None, score: str = "frequency",
          limit_alphabet: int | None = None, initial_alphabet: Sequence[str] = (),
          max_token_length: int | None = None, device: torch.device | str = "cpu", progress: bool = True,
          byte_fallback: bool = False, character_coverage: float = 0.9995, max_piece_length: int = 16,
          max_sentence_length: int | None = 4192) -> Tokenizer:
    """Train a tokenizer on text files (a path or a list of paths) or an iterator of texts
    (``iter(texts)``, a generator, ...: anything but a list or tuple, which must hold paths).

    ``model``: "bpe" or "wordpiece"; ``preset``: "byte-level-bpe" (default for bpe), "char-bpe"
    or "bert-wordpiece" (default for wordpiece), huggingface's classes with their defaults (see
    the module docstring). ``special_tokens`` and ``limit_alphabet`` default to the preset's;
    ``min_frequency`` (default 2, as the presets' ``train``): a pair seen fewer times is never
    merged. ``score`` (WordPiece): "frequency" (the reference) or "likelihood"
    (freq(ab) / (freq(a) * freq(b))). Files are read line by line (each line with its ``\\n``
    is one sequence, as huggingface reads them; invalid UTF-8 becomes U+FFFD); an iterable's
    items are sequences. ``progress``: progress bars and a summary on stderr.

    ``model="unigram"``: SentencePiece's Unigram trainer (:mod:`gputok.trainers.unigram`; no preset):
    nmt_nfkc normalization, ``special_tokens`` default ``("<unk>", "<s>", "</s>")`` (``<unk>`` is
    required), ``byte_fallback`` (256 ``<0xNN>`` pieces), ``character_coverage`` and
    ``max_piece_length`` as SentencePiece's options; ``max_sentence_length`` (UTF-8 bytes, default
    4192 as SentencePiece's): longer lines are not trained on, as SentencePiece skips them, with a
    warning that counts them (an error if no line is left); None trains on every line. ``vocab_size`` defaults to 8000 (SentencePiece's
    default; 30000 for the other models). The tokenizer encodes as sentencepiece does with these pieces (see :func:`unigram_tokenizer`);
    :func:`save_sentencepiece_model` writes them as a ``.model`` file.

    Returns a :class:`gputok.Tokenizer`; ``tok.save("tokenizer.json")`` writes a file huggingface
    ``tokenizers`` loads and encodes with identically.

    Memory: on glibc, training fixes the C heap's mmap threshold (4 MB during training, 32 MB
    after, for the rest of the process) so that freed temporaries leave the process, and its trim
    threshold at 64 MB (:func:`gputok._memory.big_blocks_unmapped_when_freed`);
    ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` or their glibc tunables keep your own
    settings.
    """
    tok, summary = train_with_summary(files_or_iterator, model=model, preset=preset, vocab_size=vocab_size,
                                      min_frequency=min_frequency, special_tokens=special_tokens, score=score,
                                      limit_alphabet=limit_alphabet, initial_alphabet=initial_alphabet,
                                      max_token_length=max_token_length, device=device, progress=progress,
                                      byte_fallback=byte_fallback, character_coverage=character_coverage,
                                      max_piece_length=max_piece_length, max_sentence_length=max_sentence_length)
    if progress:
        print(f"gputok train: {summary}", file=sys.stderr)
    return tok


@big_blocks_unmapped_when_freed()
@with_gputok_threads
def train_from_counts(word_counts: Mapping[str, int] | tuple[Ragged, torch.Tensor], *, model: str | None = None,
                      preset: str | None = None, vocab_size: int = 30000, min_frequency: int = 2,
                      special_tokens: Sequence[str] | None = None, score: str = "frequency",
                      limit_alphabet: int | None = None, initial_alphabet: Sequence[str] = (),
                      max_token_length: int | None = None, device: torch.device | str = "cpu",
                      progress: bool = True) -> Tokenizer:
    """Train from word counts the caller already has; options as :func:`train`.

    ``word_counts``: ``{word: count}`` with words as the preset's pre-tokenizer outputs them
    (normalized and split; for byte-level presets plain text, mapped to the byte characters
    here; nothing else is applied to them), or ``(words, counts)``: ragged integer codepoints
    exactly as the trainers take them (byte-level: already byte characters; the
    :func:`count_words` output) and int64 counts. Counts may exceed 2**31.
    """
    _, chosen = _resolve(model, preset, score)
    _check_numbers(vocab_size, min_frequency, limit_alphabet, max_token_length)
    device = _dispatch.checked_device(device)
    if isinstance(word_counts, Mapping):
        words, counts = _from_mapping(word_counts, chosen.byte_level, device)
    elif isinstance(word_counts, tuple) and len(word_counts) == 2 and isinstance(word_counts[0], Ragged):
        words, counts = word_counts
        if not isinstance(counts, torch.Tensor) or counts.dim() != 1 or counts.numel() != len(words):
            raise ValueError(f"(words, counts): counts must be a 1-D tensor with one count per word "
                             f"({len(words)} words)")
        if counts.dtype.is_floating_point or bool((counts < 0).any()):
            raise ValueError("(words, counts): counts must be non-negative integers")
        words = Ragged(words.values.to(device), words.offsets.long().to(device))
        counts = counts.long().to(device)
    else:
        raise TypeError(f"word_counts is a {type(word_counts).__name__}; pass a mapping {{word: count}} "
                        "or a (Ragged words, counts tensor) pair")
    keep = (counts > 0) & (words.lengths() > 0)
    if not bool(keep.all()):
        kept = torch.nonzero(keep).flatten()
        words = counting.gather_words(words.values, words.offsets[:-1][kept], words.lengths()[kept])
        counts = counts[kept]
    if not counts.numel():
        raise ValueError("word_counts holds no word with a positive count; nothing to train on")
    table, _ = counting.merge_tables([counting.WordCounts(words, counts, None)])  # duplicates sum up
    tok, summary = _learn(chosen, table.words, table.counts, vocab_size=vocab_size, min_frequency=min_frequency,
                          special_tokens=special_tokens, score=score, limit_alphabet=limit_alphabet,
                          initial_alphabet=initial_alphabet, max_token_length=max_token_length, progress=progress)
    summary.words = int(table.counts.sum())
    if progress:
        print(f"gputok train: {summary}", file=sys.stderr)
    return tok


# ---- Unigram (SentencePiece's trainer) ----------------------------------------------------
UNIGRAM_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
# nmt_nfkc's rules on top of NFKC (gputok.trainers.unigram): controls go, breaks become spaces.
# U+000A too: in encoded text a line break is a space (the trainer splits lines there instead).
_NMT_REMOVE_RE = "[\x01-\x08\x0b\x0e-\x1f\x7f\x8f\x9f]"
_NMT_SPACE_RE = "[\t\n\x0c\r\u1680\u200b\u200c\u200e\u200f\u2028\u2029\u2581\ufeff\ufffd]"
_TILDE_STAND_IN = "\ufdd0"  # a noncharacter NFKC leaves alone, holding U+FF5E's place through NFKC


@dataclass
class UnigramTrainingSummary(TrainingSummary):
    """:class:`TrainingSummary` of a Unigram run: EM rounds instead of merges; seconds per phase
    (reading, the trainer's seeds / lattice / e_step / m_step / prune / finalize, building)."""

    rounds: int = 0
    em_steps: int = 0
    skipped_long_lines: int = 0  # lines over max_sentence_length bytes, not trained on

    def __str__(self) -> str:
        phases = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())
        skipped = f", {self.skipped_long_lines:,} too long lines skipped" if self.skipped_long_lines else ""
        return (f"{self.words:,} words, {self.unique_words:,} unique, vocabulary {self.vocab_size:,}, "
                f"{self.rounds} pruning rounds, {self.em_steps} EM steps{skipped}; {phases}")


def nmt_nfkc_normalizer() -> normalizers.Sequence:
    """SentencePiece's nmt_nfkc rule from huggingface components (huggingface has no charsmap of its
    own for it): the removals and spaces of :func:`gputok.trainers.unigram.nmt_nfkc`, then NFKC
    with U+FF5E (fullwidth tilde) kept. Equal to that function except that a U+FDD0 in the text
    (a noncharacter) comes out as U+FF5E, and that line breaks become spaces.

    >>> out, _ = nmt_nfkc_normalizer()(Ragged.from_lengths(torch.tensor([0xFB01, 9, 0x2163, 1, 0xFF5E]), torch.tensor([5])))
    >>> "".join(map(chr, out.values.tolist()))
    'fi IV～'
    """
    return normalizers.Sequence([
        normalizers.Replace({"Regex": _NMT_REMOVE_RE}, ""), normalizers.Replace({"Regex": _NMT_SPACE_RE}, " "),
        normalizers.Replace({"String": "\uff5e"}, _TILDE_STAND_IN), normalizers.NFKC(),
        normalizers.Replace({"String": _TILDE_STAND_IN}, "\uff5e")])


def unigram_tokenizer(pieces: Sequence[tuple[str, float]], *, byte_fallback: bool = False,
                      special_tokens: Sequence[str] = UNIGRAM_SPECIAL_TOKENS, unk_token: str = "<unk>") -> Tokenizer:
    """The Tokenizer of trained Unigram pieces (:func:`gputok.trainers.unigram.learn_unigram`'s output):
    what ``Tokenizer.from_sentencepiece`` builds for their ``.model`` file, with
    :func:`nmt_nfkc_normalizer` in front of SentencePiece's whitespace rules. It encodes as
    sentencepiece does on nmt_nfkc-normalized text (float32 sentence scores included); saved as
    tokenizer.json it is a huggingface Unigram with NFKC, Replace, Prepend and Metaspace parts, which
    huggingface (and gputok reloading it) encodes alike, except where two segmentations of a word
    score exactly the same and huggingface breaks the tie the other way (e.g. a run of 17 ``-`` with
    pieces ``-`` and 16 x ``-``: 37 of 35,634 lines of English, Chinese and Shakespeare here).
    """
    from .models.unigram import sentencepiece_tokenizer
    from .sentencepiece_model import read_model
    from .trainers.unigram import write_sentencepiece_model

    # Built from the very .model file save_sentencepiece_model writes, so the two cannot drift apart.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "unigram.model"
        write_sentencepiece_model(pieces, path, byte_fallback=byte_fallback, unk_token=unk_token,
                                  special_tokens=special_tokens)
        tok = sentencepiece_tokenizer(read_model(path), Tokenizer)
    tok.normalizer = normalizers.Sequence([nmt_nfkc_normalizer(), tok.normalizer])
    return tok


def save_sentencepiece_model(tok: Tokenizer, path: str | os.PathLike) -> None:
    """Write a Unigram Tokenizer from :func:`train` as a SentencePiece ``.model`` (atomically) that
    the ``sentencepiece`` library loads. It holds no precompiled charsmap, so it says ``identity``
    normalization: sentencepiece then applies only the whitespace rules, and text must be
    normalized first (:func:`gputok.trainers.unigram.nmt_nfkc`) to get the Tokenizer's ids.
    """
    from .models.unigram import BYTE, CONTROL, UNKNOWN, Unigram
    from .trainers.unigram import write_sentencepiece_model

    model = tok.model
    if not isinstance(model, Unigram) or not model.sentencepiece:
        raise ValueError("save_sentencepiece_model needs a Unigram tokenizer from train(..., model='unigram')")
    special = [p for p, t in zip(model.pieces, model.types) if t in (UNKNOWN, CONTROL)]
    write_sentencepiece_model(list(zip(model.pieces, model.scores)), path,
                              byte_fallback=model.byte_fallback and BYTE in model.types,
                              unk_token=model.pieces[model.unk_id], special_tokens=special)


def _unigram_counts(files_or_iterator, progress: bool, max_sentence_length: int | None
                    ) -> tuple[Ragged, torch.Tensor, torch.Tensor, int, int]:
    """Unique words, counts and sentence-final counts of the input (files read line by line as
    :func:`count_words` reads them, an iterable's items as sentences), streamed in chunks; and the
    number of lines skipped for being over ``max_sentence_length`` bytes, and the longest of them."""
    from .trainers.unigram import UnigramWordCounter

    counter = UnigramWordCounter(max_sentence_length=max_sentence_length)
    _read(files_or_iterator, on_file_chunk=lambda chunk: counter.add_lines(chunk.split("\n")),
          on_texts=counter.add_lines, progress=progress, desc="reading")
    return (*counter.result(), counter.skipped_lines, counter.longest_skipped)


def _train_unigram(files_or_iterator, *, vocab_size: int, special_tokens: Sequence[str] | None,
                   byte_fallback: bool, character_coverage: float, max_piece_length: int,
                   max_sentence_length: int | None, progress: bool) -> tuple[Tokenizer, UnigramTrainingSummary]:
    from .trainers.unigram import UnigramTrainStats, learn_unigram

    if not isinstance(byte_fallback, bool):
        raise ValueError(f"byte_fallback={byte_fallback!r}; pass True or False")
    specials = tuple(UNIGRAM_SPECIAL_TOKENS if special_tokens is None else special_tokens)
    for token in specials:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special token {token!r}: special tokens must be non-empty strings")
    if max_sentence_length is not None and (isinstance(max_sentence_length, bool)
                                            or not isinstance(max_sentence_length, int) or max_sentence_length < 1):
        raise ValueError(f"max_sentence_length={max_sentence_length!r}; pass a positive number of UTF-8 bytes, "
                         "or None to train on every line")
    start = time.perf_counter()
    words, counts, final, skipped, longest = _unigram_counts(files_or_iterator, progress, max_sentence_length)
    if skipped:
        too_long = (f"{skipped:,} line(s) longer than max_sentence_length={max_sentence_length} UTF-8 bytes "
                    f"(the longest {longest:,} bytes)")
        if not counts.numel():
            raise ValueError(f"the training corpus holds no words: its {too_long} are skipped, as SentencePiece's "
                             "trainer skips them; pass max_sentence_length=None (--max-sentence-length 0) or a "
                             "larger number to train on them, or split the lines")
        warnings.warn(f"{too_long} were not trained on, as SentencePiece's trainer skips them; pass "
                      "max_sentence_length=None (--max-sentence-length 0) or a larger number to train on them",
                      stacklevel=4)
    if not counts.numel():
        raise ValueError("the training corpus holds no words (empty, or only whitespace); nothing to train on")
    read = time.perf_counter()
    stats = UnigramTrainStats()
    # Blocks under 32 MB from the heap, as glibc would have them: the trainer gives freed memory back
    # between its phases itself, and a block of its own per 4 MB cost its seed search ~1 s on 20 MB
    # of English (10.0 against 8.8-9.1 s in all) for 25 MB less at the peak (749 against 774-776).
    with big_blocks_unmapped_when_freed(_GLIBC_MAX_DYNAMIC_THRESHOLD):
        pieces = learn_unigram(words, counts, vocab_size=vocab_size, character_coverage=character_coverage,
                               max_piece_length=max_piece_length, byte_fallback=byte_fallback,
                               special_tokens=specials, unk_token="<unk>", sentence_final_counts=final,
                               progress=progress, stats=stats)
    learned = time.perf_counter()
    tok = unigram_tokenizer(pieces, byte_fallback=byte_fallback, special_tokens=specials)
    seconds = {"reading": read - start, **(stats.seconds or {}), "building": time.perf_counter() - learned}
    return tok, UnigramTrainingSummary(words=int(counts.sum()), unique_words=counts.numel(), vocab_size=len(pieces),
                                       seconds=seconds, rounds=stats.rounds, em_steps=stats.em_steps,
                                       skipped_long_lines=skipped)


def _from_mapping(word_counts: Mapping[str, int], byte_level: bool, device) -> tuple[Ragged, torch.Tensor]:
    words, counts = list(word_counts), list(word_counts.values())
    for w, c in zip(words, counts):
        if not isinstance(w, str):
            raise TypeError(f"word_counts key {w!r} is a {type(w).__name__}; keys must be str words")
        if isinstance(c, bool) or not isinstance(c, int) or c < 0 or c >= 1 << 63:
            raise ValueError(f"word_counts[{w!r}] = {c!r}; counts must be integers in [0, 2**63)")
    from .ingest import codepoints

    text = codepoints(words, device)
    ragged = Ragged(text.values.long(), text.offsets)
    if byte_level:
        ragged = counting.to_byte_level(ragged)
    return ragged, torch.tensor(counts, dtype=torch.int64, device=device)


def _alphabet_size(words: Ragged, counts: torch.Tensor, limit_alphabet: int | None,
                   initial_alphabet: Sequence[str]) -> int:
    chars = set(torch.unique(words.values).tolist()) | {ord(a[0]) for a in initial_alphabet if a}
    return len(chars) if limit_alphabet is None else min(len(chars), limit_alphabet)


def _check_vocab_size(chosen: Preset, vocab_size: int, special_tokens, alphabet: int | None) -> None:
    specials = len(dict.fromkeys(chosen.special_tokens if special_tokens is None else special_tokens))
    if alphabet is None:
        if not chosen.byte_level:
            return
        alphabet = 256
    if vocab_size < specials + alphabet:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {specials} special tokens plus the "
                         f"{alphabet} characters of the alphabet, which every vocabulary starts with; pass "
                         f"vocab_size >= {specials + alphabet}"
                         + ("" if chosen.byte_level else " (or a smaller limit_alphabet=)"))


def _learn(chosen: Preset, words: Ragged, counts: torch.Tensor, *, vocab_size: int, min_frequency: int,
           special_tokens, score: str, limit_alphabet, initial_alphabet, max_token_length,
           progress: bool) -> tuple[Tokenizer, TrainingSummary]:
    """Merging and building: the learner of ``chosen.model``, then the Tokenizer."""
    start = time.perf_counter()
    specials = list(dict.fromkeys(chosen.special_tokens if special_tokens is None else special_tokens))
    for token in specials:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special token {token!r}: special tokens must be non-empty strings")
    limit = chosen.limit_alphabet if limit_alphabet is None else limit_alphabet
    initial = list(initial_alphabet)
    if chosen.byte_level:
        from .models.bpe import byte_decoder

        initial = sorted(byte_decoder()) + initial
    _check_vocab_size(chosen, vocab_size, specials, _alphabet_size(words, counts, limit, initial))
    if chosen.unk_token is not None and chosen.model == "wordpiece" and chosen.unk_token not in specials:
        raise ValueError(f"special_tokens={specials} lacks the unk token {chosen.unk_token!r}, which WordPiece "
                         "needs for words it cannot split; add it")
    options = dict(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
                   limit_alphabet=limit, initial_alphabet=initial, max_token_length=max_token_length,
                   progress=progress)
    from .trainers import TrainStats, learn_bpe, learn_wordpiece

    stats = TrainStats()
    merges: list[tuple[str, str]] = []
    if chosen.model == "bpe":
        vocab, merges = learn_bpe(words, counts, continuing_subword_prefix=chosen.continuing_subword_prefix,
                                  end_of_word_suffix=chosen.end_of_word_suffix, stats=stats, **options)
    else:
        vocab = learn_wordpiece(words, counts, continuing_subword_prefix=chosen.continuing_subword_prefix,
                                score=score, stats=stats, **options)
    learned = time.perf_counter()
    release_free_memory()  # the merge loop's arrays, before the tokenizer's tables
    tok = Tokenizer.from_str(json.dumps(tokenizer_json(chosen, vocab, merges, specials), ensure_ascii=False),
                             source="the trained tokenizer")
    summary = TrainingSummary(unique_words=counts.numel(), vocab_size=len(vocab),
                              merges=stats.merges,
                              seconds={"merging": learned - start, "building": time.perf_counter() - learned})
    return tok, summary


def tokenizer_json(chosen: Preset, vocab: dict[str, int], merges: list[tuple[str, str]],
                   specials: list[str]) -> dict[str, Any]:
    """The huggingface tokenizer.json of a trained vocabulary, as the preset's class saves it."""
    if chosen.model == "bpe":
        model = {"type": "BPE", "dropout": None, "unk_token": chosen.unk_token,
                 "continuing_subword_prefix": chosen.continuing_subword_prefix,
                 "end_of_word_suffix": chosen.end_of_word_suffix, "fuse_unk": False, "byte_fallback": False,
                 "ignore_merges": False, "vocab": vocab, "merges": [list(m) for m in merges]}
    else:
        model = {"type": "WordPiece", "unk_token": chosen.unk_token,
                 "continuing_subword_prefix": chosen.continuing_subword_prefix,
                 "max_input_chars_per_word": 100, "vocab": vocab}
    post = chosen.post_processor
    if chosen.model == "wordpiece" and "[CLS]" in vocab and "[SEP]" in vocab:
        post = {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]], "cls": ["[CLS]", vocab["[CLS]"]]}
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in specials if t in vocab]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": chosen.normalizer, "pre_tokenizer": chosen.pre_tokenizer, "post_processor": post,
            "decoder": chosen.decoder, "model": model}


# ---- output files -------------------------------------------------------------------------


def output_files(tok: Tokenizer, *, tokenizer_json_path=None, vocab_txt=None, vocab_json=None,
                 merges_txt=None) -> dict[Path, str]:
    """The texts of the requested output files: tokenizer.json, WordPiece ``vocab.txt`` (a token
    per line, in id order), BPE ``vocab.json`` + ``merges.txt`` (GPT-2 layout, as huggingface
    ``BPE.save`` writes them)."""
    spec = tok.to_json()
    model = spec["model"]
    out: dict[Path, str] = {}
    if tokenizer_json_path is not None:
        out[Path(tokenizer_json_path)] = json.dumps(spec, ensure_ascii=False, indent=2)
    if vocab_txt is not None:
        if model["type"] != "WordPiece":
            raise ValueError("vocab.txt is the WordPiece vocabulary format; for BPE ask for vocab.json + merges.txt")
        by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        out[Path(vocab_txt)] = "".join(t + "\n" for t, _ in by_id)
    if vocab_json is not None or merges_txt is not None:
        if model["type"] != "BPE":
            raise ValueError("vocab.json + merges.txt are the BPE formats; for WordPiece ask for vocab.txt")
        if vocab_json is None or merges_txt is None:
            raise ValueError("vocab.json and merges.txt go together; ask for both")
        vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1]))
        out[Path(vocab_json)] = json.dumps(vocab, ensure_ascii=False)
        out[Path(merges_txt)] = "#version: 0.2\n" + "".join(
            (m if isinstance(m, str) else " ".join(m)) + "\n" for m in model["merges"])
    return out
