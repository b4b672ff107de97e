"""Domain phrases kept whole: a user dictionary of phrases ("人工智能", "tumor necrosis factor")
that encode as one token each.

``with_phrases(tok, phrases)`` returns a tokenizer (WordPiece) in which every phrase is one token
(its id after the existing ids) and stays one pre-token:

- pre-tokenization (:class:`PhrasePreTokenizer`, around the tokenizer's own pre-tokenizer): a run
  of consecutive words of the normalized text that spells a phrase (the words the same pipeline
  makes of the phrase itself: case folded, accents stripped, CJK characters each a word under
  BERT's normalizer) becomes one word. Words are compared by their 63-bit span hashes
  (``gputok.dedup.span_hashes``, one tensor op for the batch); only the words that begin some
  phrase are looked at further (a Python step per such occurrence, not per word).
- the model (:class:`PhraseModel`, around the WordPiece model): a word that is a phrase (its
  characters other than whitespace equal to the phrase's) is the phrase's token; any other word
  goes to the model as before.
- saved as tokenizer.json, each phrase is a non-special added token written as given
  (``normalized: false``): huggingface has no phrase pre-tokenizer, so there (and in gputok
  loading that file) a phrase is found as written in the raw text, before normalization. In
  memory, gputok also finds it after normalization (other case, accents, spacing).

Training and extension keep phrases whole the same way: ``train(corpus, phrases, ...)`` and
``gputok.extend(..., phrases=...)`` learn from the corpus as usual and give every phrase its
token (``with_phrases`` on the result).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .dedup import span_hashes
from .ingest import codepoints, strings
from .models.wordpiece import WordPiece
from .pre_tokenizers import Words
from .ragged import Ragged
from .tokenizer import AddedToken, Tokenizer


def read_phrases(path: str | os.PathLike) -> list[str]:
    """Phrases from a UTF-8 file, one a line (blank lines skipped, surrounding whitespace dropped)."""
    return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _hashes(text: Ragged, words: Words) -> np.ndarray:
    return span_hashes(text.values.long(), words.starts, words.ends).numpy()


class PhrasePreTokenizer:
    """``inner``'s words, with each run of words that spells a phrase made one word.

    >>> from gputok import normalizers, pre_tokenizers
    >>> norm = normalizers.BertNormalizer(lowercase=True)
    >>> pre = PhrasePreTokenizer(pre_tokenizers.BertPreTokenizer(), ["tumor necrosis factor", "人工智能"],
    ...                          normalizer=norm)
    >>> text, _ = norm(codepoints(["Tumor  necrosis factor levels", "发展人工智能"]))
    >>> words = pre(text)
    >>> [strings(text)[0][s:e] for s, e in zip(words.starts.tolist()[:2], words.ends.tolist()[:2])]
    ['tumor  necrosis factor', 'levels']
    >>> words.text_offsets.tolist()
    [0, 2, 5]
    """

    def __init__(self, inner, phrases: Sequence[str], *, normalizer=None) -> None:
        self.inner = inner
        self.phrases = list(dict.fromkeys(p for p in phrases if p.strip()))
        text = codepoints(self.phrases)
        if normalizer is not None:
            text, _ = normalizer(text)
        words = inner(text)
        hashes = _hashes(text, words)
        bounds = words.text_offsets.tolist()
        # phrases by the hash of their first word, the longest first (the longest match wins)
        self._by_first: dict[int, list[tuple[int, ...]]] = {}
        for k in range(len(self.phrases)):
            run = tuple(hashes[bounds[k]:bounds[k + 1]].tolist())
            if len(run) >= 2:  # a phrase of one word is a word already
                self._by_first.setdefault(run[0], []).append(run)
        for runs in self._by_first.values():
            runs.sort(key=len, reverse=True)
        self._first = np.array(sorted(self._by_first), dtype=np.int64)

    def __call__(self, text: Ragged) -> Words:
        words = self.inner(text)
        if not self._first.size or not words.starts.numel():
            return words
        hashes = _hashes(text, words)
        begins = np.flatnonzero(np.isin(hashes, self._first))
        if not begins.size:
            return words
        text_of_word = np.repeat(np.arange(words.text_offsets.numel() - 1), np.diff(words.text_offsets.numpy()))
        keep = np.ones(hashes.size, dtype=bool)
        ends = words.ends.numpy().copy()
        swallowed_until = -1
        for i in begins.tolist():  # one step per occurrence of a phrase's first word
            if i < swallowed_until:
                continue
            for run in self._by_first[int(hashes[i])]:
                last = i + len(run) - 1
                if (last < hashes.size and text_of_word[last] == text_of_word[i]
                        and tuple(hashes[i:last + 1].tolist()) == run):
                    keep[i + 1:last + 1] = False
                    ends[i] = ends[last]
                    swallowed_until = last + 1
                    break
        per_text = np.bincount(text_of_word[keep], minlength=words.text_offsets.numel() - 1)
        offsets = np.zeros(per_text.size + 1, dtype=np.int64)
        np.cumsum(per_text, out=offsets[1:])
        return Words(words.starts[torch.from_numpy(keep)], torch.from_numpy(ends[keep]), torch.from_numpy(offsets))

    def to_json(self) -> dict[str, Any] | None:
        """The inner pre-tokenizer's JSON: huggingface has no phrase step (the phrases are saved
        as added tokens)."""
        return None if self.inner is None else self.inner.to_json()


def _phrase_key(text: str) -> str:
    return "".join(text.split())


class PhraseModel:
    """``inner`` (WordPiece), except that a word which is a phrase is that phrase's one token.

    Everything else is the inner model's (attributes are read through)."""

    def __init__(self, inner: WordPiece, phrase_ids: dict[str, int], *, normalizer=None) -> None:
        self.inner = inner
        forms = list(phrase_ids)
        text = codepoints(forms)
        if normalizer is not None:
            text, _ = normalizer(text)
        self._ids = {_phrase_key(s): phrase_ids[p] for p, s in zip(forms, strings(text))}
        self._lengths = np.array(sorted({len(k) for k in self._ids}), dtype=np.int64)

    def __getattr__(self, name: str):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        ids, ends = self.inner.encode_words(words)
        values = words.values.numpy()
        offsets = words.offsets.numpy()
        lengths = np.diff(offsets)
        space = np.isin(values, _SPACES)
        spaces = np.add.reduceat(space, offsets[:-1]) if values.size else np.zeros(0, np.int64)
        spaces[lengths == 0] = 0
        # a phrase is a word with spaces (the pre-tokenizer joined it) or exactly a phrase's length
        candidates = np.flatnonzero((spaces > 0) | np.isin(lengths, self._lengths))
        if not candidates.size:
            return ids, ends
        found = {}
        for w in candidates.tolist():  # few: the batch's unique words of a phrase's length or with spaces
            key = _phrase_key("".join(map(chr, values[offsets[w]:offsets[w + 1]].tolist())))
            if key in self._ids:
                found[w] = self._ids[key]
        if not found:
            return ids, ends
        rows = np.array(sorted(found), dtype=np.int64)
        id_offsets = ids.offsets.numpy()
        counts = np.diff(id_offsets)
        counts[rows] = 1
        new_offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        keep = np.ones(ids.values.numel(), dtype=bool)
        for w in rows.tolist():
            keep[id_offsets[w]:id_offsets[w + 1]] = False
        new_ids = np.empty(int(new_offsets[-1]), dtype=ids.values.numpy().dtype)
        new_ends = np.empty_like(new_ids, dtype=ends.values.numpy().dtype)
        is_phrase = np.zeros(counts.size, dtype=bool)
        is_phrase[rows] = True
        slot_of_row = np.repeat(~is_phrase, counts)
        new_ids[slot_of_row] = ids.values.numpy()[keep]
        new_ends[slot_of_row] = ends.values.numpy()[keep]
        new_ids[new_offsets[rows]] = [found[w] for w in rows.tolist()]
        new_ends[new_offsets[rows]] = lengths[rows]
        out = torch.from_numpy(new_offsets)
        return Ragged(torch.from_numpy(new_ids), out), Ragged(torch.from_numpy(new_ends), out)


_SPACES = np.array([9, 10, 11, 12, 13, 32, 0xA0, 0x3000], dtype=np.int64)


def with_phrases(tok: Tokenizer, phrases: Sequence[str]) -> Tokenizer:
    """A tokenizer like ``tok`` (WordPiece) in which each phrase is one token: a phrase already a
    token keeps its id, the others get ids after ``tok``'s (see the module docstring).

    >>> import gputok
    >>> tok = with_phrases(gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab()), ["hello world"])
    >>> ids = tok.encode_batch(["Hello   World!", "hello, world"], add_special_tokens=False)
    >>> [[tok.id_to_token(i) for i in row] for row in ids]
    [['hello world', '!'], ['hello', ',', 'world']]
    """
    model = tok.model.inner if isinstance(tok.model, PhraseModel) else tok.model
    if not isinstance(model, WordPiece):
        raise ValueError(f"phrases are kept whole for WordPiece tokenizers; this one is {type(model).__name__}")
    phrases = list(dict.fromkeys(p.strip() for p in phrases if p.strip()))
    spec = tok.to_json()
    known = {t["content"]: t["id"] for t in spec["added_tokens"]}
    added = list(spec["added_tokens"])
    next_id = tok.vocab_size
    ids = {}
    for phrase in phrases:
        if phrase in known:
            ids[phrase] = known[phrase]
            continue
        ids[phrase] = model.vocab.get(phrase, next_id)
        added.append(AddedToken(ids[phrase], phrase, special=False).to_json())
        next_id += ids[phrase] == next_id
    spec["added_tokens"] = added
    out = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False), source="the tokenizer with phrases")
    out.pre_tokenizer = PhrasePreTokenizer(out.pre_tokenizer, phrases, normalizer=out.normalizer)
    out.model = PhraseModel(out.model, ids, normalizer=out.normalizer)
    return out


def train(files_or_iterator, phrases: Sequence[str], **options) -> Tokenizer:
    """:func:`gputok.train` (WordPiece), then every phrase one token (:func:`with_phrases`)."""
    from .training import train as train_tokenizer

    return with_phrases(train_tokenizer(files_or_iterator, **options), phrases)
