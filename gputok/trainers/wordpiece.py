"""WordPiece training: huggingface's ``WordPieceTrainer``, which is its BPE trainer with the ``##`` prefix.

``score="frequency"`` is the reference: the BPE merge loop of ``gputok.trainers.bpe`` with
``continuing_subword_prefix`` on every character but a word's first, returning the vocabulary (the
tokens keep their prefix, ``##ing``). ``score="likelihood"`` is the other published WordPiece rule,
not in the reference: merge the pair with the highest ``count(ab) / (count(a) * count(b))``, the
counts being the current symbol counts of the words (weighted by word counts). Its ties go to the
higher pair count, then to the smaller ``(id_left, id_right)``; scores are compared as exact
fractions. Pairs counted below ``min_frequency`` (or 1) are never merged (a rare pair would otherwise
always score highest), and training stops when none is left. The likelihood score changes for every
pair of a merged token, so each likelihood merge rescans all pairs counted at least
``min_frequency``: slower than the frequency score on large corpora.

Token ids: the special tokens, the alphabet by code point, then the ``##`` forms sorted (the
reference numbers those in hash order), then the merges. Memory: as ``gputok.trainers.bpe``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..ragged import Ragged
from .bpe import TrainStats, _Trainer

SCORES = ("frequency", "likelihood")


def learn_wordpiece(words: Ragged, counts: torch.Tensor, *, vocab_size: int, min_frequency: int = 0,
                    special_tokens: Sequence[str] = (), limit_alphabet: int | None = None,
                    initial_alphabet: Sequence[str] = (), continuing_subword_prefix: str = "##",
                    score: str = "frequency", max_token_length: int | None = None, progress: bool = True,
                    stats: TrainStats | None = None) -> dict[str, int]:
    """Learn a WordPiece vocabulary (token -> id) from unique words and their int64 counts.

    Arguments as :func:`gputok.trainers.learn_bpe`; ``score``: ``"frequency"`` (huggingface's
    ``WordPieceTrainer``) or ``"likelihood"``.

    >>> text = ["hug", "pug", "pun", "bun", "hugs"]
    >>> words = Ragged.from_lengths(torch.tensor([ord(c) for w in text for c in w]),
    ...                             torch.tensor([len(w) for w in text]))
    >>> vocab = learn_wordpiece(words, torch.tensor([10, 5, 12, 4, 5]), vocab_size=14,
    ...                         score="likelihood", progress=False)
    >>> list(vocab)[-3:]
    ['##gs', 'pu', 'hu']
    """
    if score not in SCORES:
        raise ValueError(f"score={score!r} is not one of {SCORES}")
    trainer = _Trainer(words, counts, vocab_size=vocab_size, min_frequency=min_frequency,
                       special_tokens=special_tokens, limit_alphabet=limit_alphabet,
                       initial_alphabet=initial_alphabet, prefix=continuing_subword_prefix, suffix=None,
                       max_token_length=max_token_length, score=score, progress=progress, stats=stats)
    return trainer.run()[0]
