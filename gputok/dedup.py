"""Unique words of a batch: hash every word, ``torch.unique`` the hashes, check, scatter back.

Real text has ~10x fewer unique words than words, so the model only ever sees unique words.
Each character contributes ``mix64(codepoint | position_in_word << 21)`` and a word's hash
(``word_hashes``) is the sum of its characters' (a cumsum difference) plus a mix of its length, so the hash depends on every character and its
position, not linearly on the codepoints. Collisions are then checked exactly, character by
character against the representative word; a collision (never seen, ~n^2 / 2^64) re-hashes
with another seed. Memory: a few int64 tensors the size of the batch's characters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .hashing import mix64
from .pre_tokenizers import Words
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, span_indices


@dataclass(frozen=True)
class UniqueWords:
    representative: torch.Tensor  # [unique] index of one occurrence (a word index)
    inverse: torch.Tensor  # [words] index of each word's unique word


def word_hashes(values: torch.Tensor, offsets: torch.Tensor, *, seed: int = 0,
                positions: torch.Tensor | None = None) -> torch.Tensor:
    """64-bit hash of each row of a ragged tensor of small non-negative ints (codepoints, bytes).

    ``positions`` (each value's index in its row) may be passed when the caller has it already.

    >>> h = word_hashes(torch.tensor([97, 98, 98, 97, 97, 98]), torch.tensor([0, 2, 4, 6]))
    >>> h[0] == h[2], h[0] == h[1]
    (tensor(True), tensor(False))
    """
    total = values.numel()
    position = positions_in_rows(offsets, total) if positions is None else positions
    mixed = mix64(values.long() | (position << 21) | (seed << 42))
    csum = torch.zeros(total + 1, dtype=torch.int64, device=values.device)
    torch.cumsum(mixed, 0, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]] + mix64(offsets[1:] - offsets[:-1] + seed)


def unique_words(values: torch.Tensor, words: Words, *, seed: int = 0) -> UniqueWords:
    """
    >>> from gputok.pre_tokenizers import Words
    >>> vals = torch.tensor([97, 98, 99, 97, 98, 97, 98])  # "ab", "c", "ab", "ab"
    >>> u = unique_words(vals, Words(torch.tensor([0, 2, 3, 5]), torch.tensor([2, 3, 5, 7]), torch.tensor([0, 4])))
    >>> len(u.representative), u.inverse.tolist()[0] == u.inverse.tolist()[2] == u.inverse.tolist()[3]
    (2, True)
    """
    device = values.device
    lengths = words.lengths()
    num_words = lengths.numel()
    if num_words == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        return UniqueWords(empty, empty)
    word_offsets = offsets_from_lengths(lengths)
    total = int(word_offsets[-1])
    word_of_char = row_ids(word_offsets, total)
    char_index = torch.arange(total, device=device) - word_offsets[:-1][word_of_char]
    flat = words.starts[word_of_char] + char_index  # every word character, in word order
    hashes = word_hashes(values[flat], word_offsets, seed=seed, positions=char_index)
    uniq, inverse = torch.unique(hashes, return_inverse=True)
    representative = torch.empty(uniq.numel(), dtype=torch.int64, device=device)
    representative.scatter_(0, inverse, torch.arange(num_words, device=device))
    rep_of_word = representative[inverse]
    same = lengths[rep_of_word] == lengths
    same &= torch.all(values[flat] == values[words.starts[rep_of_word][word_of_char] + char_index]) if total else True
    if not bool(same.all()):
        return unique_words(values, words, seed=seed + 1)
    return UniqueWords(representative, inverse)


def gather_words(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor) -> Ragged:
    """The words ``values[starts[i]:starts[i] + lengths[i]]`` as one contiguous ragged tensor."""
    index, offsets = span_indices(starts, lengths)
    return Ragged(values[index], offsets)


def padded_chars(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[len(starts), width] matrix of the words' codepoints, cut at ``width``, padded with 0."""
    cols = torch.arange(width, device=values.device)
    inside = cols[None, :] < lengths[:, None]
    index = torch.where(inside, starts[:, None] + cols[None, :], 0)
    return torch.where(inside, values[index], 0).int()
