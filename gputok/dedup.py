"""Unique words of a batch: hash every word, ``torch.unique`` the hashes, check, scatter back.

Real text has ~10x fewer unique words than words, so the model only ever sees unique words.
The batch hash (:func:`span_hashes`) is a polynomial hash of the codepoints modulo 2**64, taken
straight from the text with no per-word gather: one cumsum of ``codepoint * B**-i`` over
the whole batch, and per word a difference times ``B**start`` (B odd, so it is invertible).
That is two passes over the characters, where a per-character mix takes a dozen. Every word is
then checked exactly, character by character, against its representative. Polynomial hashes
modulo 2**64 have known colliding inputs (Thue-Morse strings of 2048 characters), so on a
collision the batch is hashed again with :func:`word_hashes`, where each character contributes
``mix64(codepoint | position_in_word << 21)`` (non-linear; a collision there re-hashes with
another seed). Memory: a few int64 tensors the size of the batch's characters, plus two cached
power tables (8 bytes per character each, kept for batches up to 2**22 characters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .hashing import mix64
from .pre_tokenizers import Words
from .ragged import Ragged, positions_in_rows, row_ids, span_indices
from .kernels.word_cache_numba import lookup_dedup


@dataclass(frozen=True)
class UniqueWords:
    representative: torch.Tensor  # [unique] index of one occurrence (a word index)
    inverse: torch.Tensor  # [words] index of each word's unique word
    keys: torch.Tensor | None = None  # [unique] non-negative 63-bit hash of each unique word


_BASE = 0x5851F42D4C957F2D  # odd: invertible modulo 2**64 (not the Fibonacci constant of the hash tables)
_BASE_INVERSE = pow(_BASE, -1, 1 << 64)
_LENGTH_WEIGHT = _BASE >> 1  # any large constant
_CACHED_POWERS = 1 << 22
_powers: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def _power_table(base: int, n: int, device: torch.device) -> torch.Tensor:
    """``base ** i`` modulo 2**64 (as int64) for i < n, by doubling: log2(n) multiplies."""
    table = torch.ones(max(n, 1), dtype=torch.int64, device=device)
    size = 1
    while size < n:
        step = min(size, n - size)
        torch.mul(table[:step], _signed(pow(base, size, 1 << 64)), out=table[size:size + step])
        size += step
    return table[:n]


def _powers_of(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(B**-i, B**i) for i < n; cached per device up to 2**22 entries (a dict swap: thread-safe)."""
    cached = _powers.get(device)
    if cached is not None and cached[0].numel() >= n:
        return cached[0][:n], cached[1][:n]
    size = max(1 << 16, 1 << (n - 1).bit_length())
    tables = (_power_table(_BASE_INVERSE, size, device), _power_table(_BASE, size, device))
    if size <= _CACHED_POWERS:
        _powers[device] = tables
    return tables[0][:n], tables[1][:n]


def span_hashes(values: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Non-negative 63-bit hash of each span ``values[starts[i]:ends[i]]`` (codepoints or bytes).

    A polynomial hash modulo 2**64, so equal spans hash equally wherever they are; finished
    with the length. Not collision-proof (see the module notes).

    >>> h = span_hashes(torch.tensor([97, 98, 120, 97, 98, 97]), torch.tensor([0, 3, 2, 5]), torch.tensor([2, 5, 3, 5]))
    >>> bool(h[0] == h[1]), bool(h[0] == h[2]), bool(h[3] == h[2])
    (True, False, False)
    """
    n = values.numel()
    down, up = _powers_of(n + 1, values.device)
    csum = torch.empty(n + 1, dtype=torch.int64, device=values.device)
    csum[0] = 0
    # v * B**-i, in place on one int64 copy (addcmul with int32 values costs a promotion pass more).
    # A zero codepoint adds nothing, but the length is mixed in below: equal hashes of equal
    # lengths still need equal polynomials.
    torch.cumsum(values.to(torch.int64, copy=True).mul_(down[:n]), 0, out=csum[1:])
    at_start = csum.index_select(0, starts)
    if starts.numel() and bool(torch.equal(ends[:-1], starts[1:])):  # the spans tile: each ends where the next starts
        at_end = torch.cat([at_start[1:], csum.index_select(0, ends[-1:])])
    else:
        at_end = csum.index_select(0, ends)
    poly = (at_end - at_start) * up.index_select(0, starts)
    return (poly + (ends - starts) * _LENGTH_WEIGHT) & ((1 << 63) - 1)


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
    mixed = mix64(values.long() | (position.long() << 21) | (seed << 42))
    csum = torch.zeros(total + 1, dtype=torch.int64, device=values.device)
    torch.cumsum(mixed, 0, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]] + mix64(offsets[1:] - offsets[:-1] + seed)


def unique_words(values: torch.Tensor, words: Words, *, seed: int | None = None) -> UniqueWords:
    """The unique words of a batch, found by hash and checked exactly.

    ``seed``: hash with :func:`word_hashes` and that seed instead of :func:`span_hashes`.

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
        return UniqueWords(empty, empty, empty)
    if seed is None:
        hashes = span_hashes(values, words.starts, words.ends)
    else:
        flat, word_offsets = span_indices(words.starts, lengths)
        positions = flat - words.starts.index_select(0, row_ids(word_offsets, flat.numel()))
        hashes = word_hashes(values[flat], word_offsets, seed=seed, positions=positions) & ((1 << 63) - 1)
    keys, inverse = torch.unique(hashes, return_inverse=True)
    representative = torch.empty(keys.numel(), dtype=torch.int64, device=device)
    representative.scatter_(0, inverse, torch.arange(num_words, device=device))
    rep_of_word = representative.index_select(0, inverse)
    # Exact check: every word has its representative's length and characters.
    same = bool(torch.equal(lengths.index_select(0, rep_of_word), lengths)) and spans_equal(
        values, words.starts, lengths, values, words.starts.index_select(0, rep_of_word))
    if not same:
        return unique_words(values, words, seed=0 if seed is None else seed + 1)
    return UniqueWords(representative, inverse, keys)


def spans_equal(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, other: torch.Tensor,
                other_starts: torch.Tensor) -> bool:
    """Whether every span ``values[starts[i]:][:lengths[i]]`` equals ``other[other_starts[i]:][:lengths[i]]``.

    Each character is compared with the one at the same place in its counterpart (one gather
    of each side). Spans that tile ``values`` in order (byte-level splits) need no gather of
    their own characters.

    >>> v = torch.tensor([1, 2, 9, 1, 2])
    >>> spans_equal(v, torch.tensor([3]), torch.tensor([2]), v, torch.tensor([0])), spans_equal(v, torch.tensor([1]), torch.tensor([2]), v, torch.tensor([3]))
    (True, False)
    """
    if values.numel() == 0 or starts.numel() == 0:
        return True
    # int32 indices where they fit: half the memory traffic of the per-character passes
    it = torch.int32 if max(values.numel(), other.numel()) < 2**31 else torch.int64
    theirs, offsets = span_indices(other_starts, lengths, dtype=it)
    if theirs.numel() == values.numel() and bool(torch.equal(starts, offsets[:-1])):  # the spans tile ``values``
        return bool(torch.equal(other.index_select(0, theirs), values))
    ours = span_indices(starts, lengths, dtype=it)[0]
    return bool(torch.equal(values.index_select(0, ours), other.index_select(0, theirs)))


def unique_spans(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor,
                 keys: torch.Tensor) -> UniqueWords:
    """:func:`unique_words` for non-overlapping spans whose hashes ``keys`` are known already."""
    uniq, inverse = torch.unique(keys, return_inverse=True)
    representative = torch.empty(uniq.numel(), dtype=torch.int64, device=values.device)
    representative.scatter_(0, inverse, torch.arange(keys.numel(), device=values.device))
    rep_of_word = representative.index_select(0, inverse)
    if bool(torch.equal(lengths.index_select(0, rep_of_word), lengths)) and spans_equal(
            values, starts, lengths, values, starts.index_select(0, rep_of_word)):
        return UniqueWords(representative, inverse, uniq)
    return unique_words(values, Words(starts, starts + lengths, torch.zeros(2, dtype=torch.int64)), seed=0)


def gather_words(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor) -> Ragged:
    """The words ``values[starts[i]:starts[i] + lengths[i]]`` as one contiguous ragged tensor."""
    index, offsets = span_indices(starts, lengths)
    return Ragged(values.index_select(0, index), offsets)


def padded_chars(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[len(starts), width] matrix of the words' codepoints, cut at ``width``, padded with 0."""
    if values.numel() == 0:  # only empty words: nothing to gather (index 0 would be out of bounds)
        return torch.zeros((starts.numel(), width), dtype=torch.int32, device=values.device)
    cols = torch.arange(width, device=values.device)
    inside = cols[None, :] < lengths[:, None]
    index = torch.where(inside, starts[:, None] + cols[None, :], 0)
    return torch.where(inside, values[index], 0).int()


_NO_TABLE = (np.full(16, -1, dtype=np.int64), np.full(16, -1, dtype=np.int64), np.zeros((1, 4), dtype=np.int64),
             np.zeros(1, dtype=np.int32))


def unique_gathered(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor) -> tuple[Ragged, torch.Tensor]:
    """The distinct words of a CPU batch, gathered (one row each, in order of first occurrence),
    and each word's row: :func:`unique_words` plus :func:`gather_words` in one numba kernel
    (``gputok.kernels.word_cache_numba.lookup_dedup`` over an empty cache: hash, then an exact
    compare, so colliding words stay apart).

    >>> rows, inverse = unique_gathered(torch.tensor([97, 98, 99, 97, 98]), torch.tensor([0, 2, 3]), torch.tensor([2, 1, 2]))
    >>> rows.tolist(), inverse.tolist()
    ([[97, 98], [99]], [0, 1, 0])
    """
    v = values.numpy()
    out = np.empty(v.size, v.dtype)
    slot_keys, slot_entry, entries, chars = _NO_TABLE
    _, inverse, _, _, offsets = lookup_dedup(v, starts.numpy(), lengths.numpy(), np.zeros(0, dtype=np.int64),
                                             slot_keys, slot_entry, 60, 15, 0, entries, chars, out)
    return Ragged(torch.from_numpy(out[:offsets[-1]]), torch.from_numpy(offsets)), torch.from_numpy(inverse)
