"""Domain vocabulary: extend a pretrained vocabulary with the pieces of a domain corpus, keeping
every base id.

``extend(base, corpus, add=K, method=..., select=...)`` returns a tokenizer whose first ids are
the base's, unchanged, and whose next K ids are the new pieces.

Methods:

- ``"vocab"``: the new pieces join the model's own vocabulary. WordPiece: word-initial pieces and
  ``##`` continuation pieces, appended after the base ids, so greedy longest match uses them
  inside words and no word breaks apart where the base kept it whole. BPE: new merges appended
  after the base merges, learned by continuing training on the domain corpus from the base's
  state (each domain word starts as the base's pieces of it), so the base's merges still apply
  first and its ids are unchanged.
- ``"added-tokens"``: the common practice (``tokenizer.add_tokens(pieces)``), kept to measure it:
  the pieces become non-special added tokens, which huggingface matches in the raw text before
  the model runs, anywhere, inside words too ("method" -> "meth" + "od" once "meth" is added).
  They are written with ``normalized: false`` (matched in the raw text, as gputok matches added
  tokens); transformers' ``add_tokens`` sets ``normalized: true`` (matched in the lowercased
  text), which fragments more still.

Selection (which K pieces):

- ``"frequency"``: the workflow of a common failure report: train a domain WordPiece (the
  ``bert-wordpiece`` preset: 30,000 pieces, ``min_frequency``, lowercase) on the corpus, encode
  the corpus with it, keep the K most frequent pieces the base lacks (seen at least
  ``min_frequency`` times).
- ``"savings"``: the same candidate pieces, chosen greedily by the tokens each saves on the
  corpus under the base's own model (WordPiece greedy longest match with the pieces chosen so
  far), recounted as pieces join: lazy greedy, a candidate's gain is recounted only when it
  comes to the top after a chosen piece shared a word with it; fewer than K when no candidate
  saves a token any more (the numba kernels of
  ``gputok.kernels.extend_savings_numba``, over every vocabulary match of every unique domain
  word found once). For a BPE base both selections are the continued training, whose merges are
  chosen by pair count, the tokens each merge saves.

Words are counted with the base's own normalizer and pre-tokenizer. ``phrases`` (WordPiece
bases): each dictionary phrase also becomes one token, after the K pieces (:mod:`gputok.phrases`). Memory: the unique domain words, their
vocabulary matches (two int32 per match), the domain WordPiece trainer's.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .models.bpe import BPE
from .models.wordpiece import WordPiece
from .tokenizer import Tokenizer

METHODS = ("vocab", "added-tokens")
SELECTIONS = ("frequency", "savings")


@dataclass
class ExtendReport:
    """What :func:`extend` added and why: JSON-ready (``asdict``)."""

    method: str
    select: str
    base_size: int
    new_size: int
    added: int
    domain_words: int  # word occurrences in the corpus
    domain_unique_words: int
    candidates: int  # pieces the base lacks that were eligible
    domain_tokens_base: int  # tokens of the corpus's words under the base model
    domain_tokens_extended: int  # ... under the extended model (vocab method; WordPiece counted in isolation)
    seconds: dict[str, float] = field(default_factory=dict)
    pieces: list[dict[str, Any]] = field(default_factory=list)  # {"token", "id", "frequency", "saved"}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _load(base: Tokenizer | str | os.PathLike) -> Tokenizer:
    if isinstance(base, Tokenizer):
        return base
    path = str(base)
    return Tokenizer.from_vocab(path) if path.endswith(".txt") else Tokenizer.from_file(path)


def _check_options(add: int, method: str, select: str, min_frequency: int) -> None:
    if method not in METHODS:
        raise ValueError(f"method={method!r}; choose one of {list(METHODS)}")
    if select not in SELECTIONS:
        raise ValueError(f"select={select!r}; choose one of {list(SELECTIONS)}")
    for name, value, low in (("add", add, 1), ("min_frequency", min_frequency, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r}; pass an integer >= {low}")


def count_domain_words(tok: Tokenizer, corpus):
    """Unique words (ragged int32 codepoints, as ``tok``'s pre-tokenizer cuts its normalized text;
    the text itself, as ``tok.model.encode_words`` takes it) and int64 counts of ``corpus`` (files
    or texts), and the number of words seen."""
    from . import training
    from .trainers import counting

    counter = counting.WordCounter(tok.normalizer, tok.pre_tokenizer)
    training._read(corpus, on_file_chunk=counter.add_lines, on_texts=counter.add_texts, progress=False,
                   desc="counting")
    table = counter.result()
    if not len(table):
        raise ValueError("the domain corpus holds no words (empty, or only whitespace); nothing to extend with")
    return table, counter.words_seen


def _domain_pieces(words, counts: torch.Tensor, *, vocab_size: int, min_frequency: int) -> tuple[list[str], np.ndarray]:
    """The domain WordPiece (bert-wordpiece preset) of the counted words, and how often each of
    its pieces occurs when the corpus is encoded with it (by id)."""
    from .training import PRESETS, _learn

    domain, _ = _learn(PRESETS["bert-wordpiece"], words, counts, vocab_size=vocab_size, min_frequency=min_frequency,
                       special_tokens=None, score="frequency", limit_alphabet=None, initial_alphabet=(),
                       max_token_length=None, progress=False)
    ids, _ = domain.model.encode_words(words)
    per_piece_word = np.repeat(np.arange(len(words)), np.diff(ids.offsets.numpy()))
    frequency = np.bincount(ids.values.numpy(), weights=counts.numpy()[per_piece_word],
                            minlength=len(domain.model.id_to_token())).astype(np.int64)
    return domain.model.id_to_token(), frequency


def _wordpiece_candidates(base: Tokenizer, words, counts, *, vocab_size: int, min_frequency: int
                          ) -> tuple[list[str], np.ndarray]:
    """Pieces of the domain WordPiece that the base lacks, seen ``min_frequency`` times or more,
    most frequent first (ties: the domain id), with their frequencies."""
    tokens, frequency = _domain_pieces(words, counts, vocab_size=vocab_size, min_frequency=min_frequency)
    prefix = base.model.continuing_subword_prefix
    known = base.model.vocab
    specials = {t.content for t in base.added_tokens}
    keep = np.array([bool(t) and t not in known and t not in specials and t != prefix for t in tokens], dtype=bool)
    keep &= frequency >= min_frequency
    order = np.flatnonzero(keep)
    order = order[np.argsort(-frequency[order], kind="stable")]
    return [tokens[i] for i in order.tolist()], frequency[order]


def _savings_order(base: Tokenizer, words, counts: torch.Tensor, candidates: list[str], add: int
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Greedy by tokens saved, recounted as pieces join (lazy: see the module docstring). Returns
    the chosen candidates' indices in order, the tokens each saved when chosen, and the corpus's
    tokens under the base."""
    from .kernels import extend_savings_numba as K

    model = base.model
    base_size = base.vocab_size
    union = dict(model.vocab)
    for j, piece in enumerate(candidates):
        union[piece] = base_size + j
    matcher = WordPiece(union, unk_token=model.unk_token, continuing_subword_prefix=model.continuing_subword_prefix,
                        max_input_chars_per_word=model.max_input_chars_per_word)
    codes = words.values.numpy().astype(np.int32, copy=False)
    offsets = words.offsets.numpy()
    max_chars = model.max_input_chars_per_word
    position_offsets, ends, pieces = K.match_lists(codes, offsets, max_chars=max_chars, **matcher._numba_tables)
    in_vocab = np.zeros(base_size + len(candidates), dtype=np.bool_)
    in_vocab[np.array(list(model.vocab.values()), dtype=np.int64)] = True
    word_counts = counts.numpy().astype(np.int64)
    all_words = np.arange(len(words), dtype=np.int64)
    current = K.greedy_counts(all_words, offsets, position_offsets, ends, pieces, in_vocab, -1, max_chars)
    base_tokens = int((current * word_counts).sum())
    # which words hold which candidate (a match of its piece anywhere), both ways, as CSR
    word_of_char = np.repeat(all_words, np.diff(offsets))
    word_of_match = np.repeat(word_of_char, np.diff(position_offsets))
    is_candidate = pieces >= base_size
    pairs = np.unique((pieces[is_candidate].astype(np.int64) - base_size) * len(words) + word_of_match[is_candidate])
    cand_of_pair, word_of_pair = pairs // len(words), pairs % len(words)
    cand_word_offsets = np.zeros(len(candidates) + 1, np.int64)
    np.cumsum(np.bincount(cand_of_pair, minlength=len(candidates)), out=cand_word_offsets[1:])
    by_word = np.argsort(word_of_pair, kind="stable")
    word_cands = cand_of_pair[by_word]
    word_cand_offsets = np.zeros(len(words) + 1, np.int64)
    np.cumsum(np.bincount(word_of_pair, minlength=len(words)), out=word_cand_offsets[1:])
    piece_of_candidate = np.arange(base_size, base_size + len(candidates), dtype=np.int32)

    def gains(which: np.ndarray) -> np.ndarray:
        return K.candidate_gains(which, piece_of_candidate, cand_word_offsets, word_of_pair, word_counts, current,
                                 offsets, position_offsets, ends, pieces, in_vocab, max_chars)

    everyone = np.arange(len(candidates), dtype=np.int64)
    gain = gains(everyone)
    dirty = np.zeros(len(candidates), dtype=np.bool_)
    taken = np.zeros(len(candidates), dtype=np.bool_)
    chosen, saved = [], []
    batch = 64
    while len(chosen) < add:
        open_gain = np.where(taken, np.iinfo(np.int64).min, gain)
        top = int(open_gain.argmax())
        if taken[top] or open_gain[top] <= 0:
            break
        if dirty[top]:
            # recount the stale candidates among the top ``batch`` together (one kernel call)
            cut = open_gain.size - min(batch, open_gain.size)
            stale = np.flatnonzero((open_gain >= np.partition(open_gain, cut)[cut]) & dirty & ~taken)
            gain[stale] = gains(stale)
            dirty[stale] = False
            continue
        taken[top] = True
        chosen.append(top)
        saved.append(int(gain[top]))
        in_vocab[base_size + top] = True
        touched = word_of_pair[cand_word_offsets[top]:cand_word_offsets[top + 1]]
        current[touched] = K.greedy_counts(touched, offsets, position_offsets, ends, pieces, in_vocab, -1, max_chars)
        K.words_touched(top, cand_word_offsets, word_of_pair, word_cand_offsets, word_cands, dirty)
    return np.array(chosen, dtype=np.int64), np.array(saved, dtype=np.int64), base_tokens


def _wordpiece_tokens(model: WordPiece, words, counts: torch.Tensor) -> int:
    ids, _ = model.encode_words(words)
    return int((np.diff(ids.offsets.numpy()) * counts.numpy()).sum())


def _extended_wordpiece(base: Tokenizer, pieces: list[str], method: str) -> Tokenizer:
    spec = base.to_json()
    first = base.vocab_size
    if method == "vocab":
        vocab = dict(spec["model"]["vocab"])
        for i, piece in enumerate(pieces):
            vocab[piece] = first + i
        spec["model"] = {**spec["model"], "vocab": vocab}
    else:
        spec["added_tokens"] = list(spec["added_tokens"]) + [
            {"id": first + i, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False} for i, piece in enumerate(pieces)]
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False), source="the extended tokenizer")


def extend_with_report(base: Tokenizer | str | os.PathLike, corpus: str | os.PathLike | Iterable, *, add: int = 5000,
                       method: str = "vocab", select: str = "frequency", min_frequency: int = 3,
                       domain_vocab_size: int = 30000, phrases: Sequence[str] = ()) -> tuple[Tokenizer, ExtendReport]:
    """:func:`extend`, also returning the :class:`ExtendReport`."""
    _check_options(add, method, select, min_frequency)
    base = _load(base)
    started = time.perf_counter()
    if isinstance(base.model, BPE):
        from .extending_bpe import extend_bpe

        if phrases:
            raise ValueError("phrases= is for WordPiece bases; this base is BPE")
        return extend_bpe(base, corpus, add=add, method=method, select=select, min_frequency=min_frequency)
    if not isinstance(base.model, WordPiece):
        raise ValueError(f"extend works on WordPiece and BPE bases; this base is {type(base.model).__name__}")
    table, seen = count_domain_words(base, corpus)
    words, counts = table.words, table.counts
    counted = time.perf_counter()
    candidates, frequency = _wordpiece_candidates(base, words, counts, vocab_size=domain_vocab_size,
                                                  min_frequency=min_frequency)
    trained = time.perf_counter()
    if select == "frequency":
        chosen = np.arange(min(add, len(candidates)))
        saved = None
        base_tokens = _wordpiece_tokens(base.model, words, counts)
    else:
        chosen, saved, base_tokens = _savings_order(base, words, counts, candidates, add)
    pieces = [candidates[i] for i in chosen.tolist()]
    tok = as_vocab = _extended_wordpiece(base, pieces, method)
    if method != "vocab":
        as_vocab = _extended_wordpiece(base, pieces, "vocab")
    extended_tokens = _wordpiece_tokens(as_vocab.model, words, counts)
    if phrases:
        from .phrases import with_phrases

        tok = with_phrases(tok, phrases)
    first = base.vocab_size
    report = ExtendReport(
        method=method, select=select, base_size=first, new_size=tok.vocab_size, added=len(pieces),
        domain_words=seen, domain_unique_words=len(words), candidates=len(candidates),
        domain_tokens_base=base_tokens, domain_tokens_extended=extended_tokens,
        seconds={"counting": counted - started, "domain_training": trained - counted,
                 "selecting": time.perf_counter() - trained},
        pieces=[{"token": p, "id": first + k, "frequency": int(frequency[i]),
                 **({} if saved is None else {"saved": int(saved[k])})}
                for k, (p, i) in enumerate(zip(pieces, chosen.tolist()))])
    return tok, report


def extend(base: Tokenizer | str | os.PathLike, corpus: str | os.PathLike | Iterable, *, add: int = 5000,
           method: str = "vocab", select: str = "frequency", min_frequency: int = 3, domain_vocab_size: int = 30000,
           phrases: Sequence[str] = ()) -> Tokenizer:
    """Extend ``base`` (a Tokenizer, a tokenizer.json or a BERT vocab.txt) with ``add`` pieces of
    ``corpus`` (text files, or an iterator of texts): every base id keeps its token, the new ones
    follow. ``method``: ``"vocab"`` or ``"added-tokens"``; ``select``: ``"frequency"`` or
    ``"savings"`` (see the module docstring); ``min_frequency``: the domain trainer's, and the
    fewest occurrences of a kept piece; ``phrases``: dictionary phrases kept as one word each.

    >>> import gputok
    >>> base = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    >>> texts = ["hello mitochondria", "mitochondria world", "mitochondrial hello"] * 5
    >>> tok = gputok.extend(base, iter(texts), add=2, min_frequency=2)
    >>> [tok.id_to_token(i) for i in range(base.vocab_size, tok.vocab_size)]
    ['mitochondria', 'mitochondrial']
    >>> tok.encode("Hello mitochondria", add_special_tokens=False), base.encode("Hello mitochondria", add_special_tokens=False)
    ([5, 12], [5, 3])
    """
    return extend_with_report(base, corpus, add=add, method=method, select=select, min_frequency=min_frequency,
                              domain_vocab_size=domain_vocab_size, phrases=phrases)[0]
