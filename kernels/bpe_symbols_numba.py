"""BPE's initial symbols on the CPU: each word's codepoints -> the token ids merging starts from.

Contract: ``bpe_symbols_numba`` takes ragged codepoints (one row per word) and returns, as numpy,
the symbols (int64 token ids) of every word back to back, their int64 offsets (a row per word),
and for every symbol the index *within its word* of the character it comes from (int64). It is
the first half of ``gputok.models.bpe.BPE.encode_words`` on the CPU; the merges follow in
``bpe_heap.merge_rows``. Reference: ``BPE.initial_symbols`` (the torch path), which gives the same
symbols for every word but those that ``ignore_merges`` makes one token: here such a word is
already that single token (its source the word's last character), so the merge kernel passes it
through. ``tests/test_models_numba.py`` compares whole ``encode_words`` results.

How: one sequential loop per word.
- Byte-level: the word's UTF-8 bytes (surrogates as 3 bytes, as ``gputok.ingest.utf8_bytes``),
  each one token (``byte_to_id``), its source the character holding it.
- Character-level (huggingface's ``BPE::merge_word``): each character's token from the char map
  (a ``HashMap``: ``variant << 21 | codepoint``, variant bit 0 "not the word's first character"
  (``continuing_subword_prefix``), bit 1 "its last" (``end_of_word_suffix``)); else, with byte
  fallback, the UTF-8 bytes of prefix + character + suffix as ``<0xNN>`` tokens if all exist;
  else ``unk_id`` if there is an unk token (a run of them one ``unk_id`` at the run's last
  character with ``fuse_unk``), else nothing.
- ``ignore_merges`` (``whole_slots`` not empty): a word whose keys (bytes, or codepoints) are a
  token's is that token. The table (``build_whole_table``) holds token ids by a hash of their
  keys (open addressing, linear probing); a hit is verified key by key against ``token_keys``.
Output buffers are sized by the upper bound (``per_char`` symbols per character) and sliced. An
unknown character with an unk token that is not in the vocabulary makes the call return -1
(the caller raises).
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import probe

_MULT = np.int64(0x100000001B3)  # FNV-1a's 64-bit prime
_MIX = np.int64(0xBF58476D1CE4E5B9 - (1 << 64))  # splitmix64's first multiplier


@kernel
def _key_hash(h, n):
    """The home hash of a key sequence whose running FNV-style hash is ``h`` and length ``n``."""
    h ^= n
    h *= _MIX
    return h ^ ((h >> 31) & np.int64(0x1FFFFFFFF))


@kernel
def _step(h, key):
    return (h ^ np.int64(key)) * _MULT


@kernel
def _build(token_keys, token_offsets, slots, mask):
    for t in range(token_offsets.size - 1):
        n = token_offsets[t + 1] - token_offsets[t]
        if n == 0:
            continue
        h = np.int64(0)
        for k in range(token_offsets[t], token_offsets[t + 1]):
            h = _step(h, token_keys[k])
        slot = _key_hash(h, n) & mask
        while slots[slot] != -1:
            slot = (slot + 1) & mask
        slots[slot] = t


def build_whole_table(token_keys: np.ndarray, token_offsets: np.ndarray) -> np.ndarray:
    """The ``ignore_merges`` table: token ids (-1: empty) in ``4 * tokens`` slots (a power of 2),
    by the hash of their keys (int64 ``token_keys``, a row per token; empty rows left out)."""
    capacity = 1 << max(4, (4 * max(1, token_offsets.size - 1) - 1).bit_length())
    slots = np.full(capacity, -1, np.int64)
    _build(token_keys, token_offsets, slots, capacity - 1)
    return slots


@kernel
def _whole(keys, start, n, slots, token_keys, token_offsets):
    """The token whose keys are ``keys[start:start + n]``, or -1."""
    h = np.int64(0)
    for k in range(start, start + n):
        h = _step(h, keys[k])
    mask = slots.size - 1
    slot = _key_hash(h, n) & mask
    while True:
        t = slots[slot]
        if t == -1:
            return -1
        a = token_offsets[t]
        if token_offsets[t + 1] - a == n:
            same = True
            for k in range(n):
                if token_keys[a + k] != keys[start + k]:
                    same = False
                    break
            if same:
                return t
        slot = (slot + 1) & mask


@kernel
def _utf8(cp, out, at):
    """Write the UTF-8 bytes of ``cp`` at ``out[at:]``; returns the position after them."""
    if cp < 0x80:
        out[at] = cp
        return at + 1
    if cp < 0x800:
        out[at] = 0xC0 | (cp >> 6)
        out[at + 1] = 0x80 | (cp & 0x3F)
        return at + 2
    if cp < 0x10000:
        out[at] = 0xE0 | (cp >> 12)
        out[at + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[at + 2] = 0x80 | (cp & 0x3F)
        return at + 3
    out[at] = 0xF0 | (cp >> 18)
    out[at + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[at + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[at + 3] = 0x80 | (cp & 0x3F)
    return at + 4


@kernel
def _symbols(codes, offsets, byte_level, byte_to_id, char_keys, char_values, char_mask, char_shift, char_probes,
             byte_fallback, fallback_ids, prefix, suffix, has_unk, unk_id, fuse_unk, whole_slots, token_keys,
             token_offsets, symbols, source, counts):
    written = 0
    for w in range(offsets.size - 1):
        base = offsets[w]
        n = offsets[w + 1] - base
        first = written
        if byte_level:
            for i in range(n):
                end = _utf8(np.int64(codes[base + i]), symbols, written)
                for k in range(written, end):
                    source[k] = i
                written = end
            whole = -1
            if whole_slots.size and n:
                whole = _whole(symbols, first, written - first, whole_slots, token_keys, token_offsets)
            if whole >= 0:
                symbols[first] = whole
                source[first] = n - 1
                written = first + 1
            else:
                for k in range(first, written):
                    symbols[k] = byte_to_id[symbols[k]]
            counts[w] = written - first
            continue
        if whole_slots.size and n:
            whole = _whole(codes, base, n, whole_slots, token_keys, token_offsets)
            if whole >= 0:
                symbols[written] = whole
                source[written] = n - 1
                counts[w] = 1
                written += 1
                continue
        unk_before = False  # the character before was an unknown one, now an unk symbol
        for i in range(n):
            cp = np.int64(codes[base + i])
            variant = np.int64(0)
            if i > 0:
                variant |= 1
            if i == n - 1:
                variant |= 2
            token = probe((variant << 21) | cp, char_keys, char_values, char_mask, char_shift, char_probes, -1)
            if token >= 0:
                symbols[written] = token
                source[written] = i
                written += 1
                unk_before = False
                continue
            if byte_fallback:  # the bytes of the symbol's string, prefix and suffix included
                end = written
                if variant & 1:
                    for k in range(prefix.size):
                        end = _utf8(np.int64(prefix[k]), symbols, end)
                end = _utf8(cp, symbols, end)
                if variant & 2:
                    for k in range(suffix.size):
                        end = _utf8(np.int64(suffix[k]), symbols, end)
                ok = True
                for k in range(written, end):
                    symbols[k] = fallback_ids[symbols[k]]
                    ok = ok and symbols[k] >= 0
                if ok:
                    for k in range(written, end):
                        source[k] = i
                    written = end
                    unk_before = False
                    continue
            if has_unk:
                if unk_id < 0:
                    return -1
                if fuse_unk and unk_before:
                    source[written - 1] = i  # the run's one unk moves to its last character
                else:
                    symbols[written] = unk_id
                    source[written] = i
                    written += 1
                unk_before = True
        counts[w] = written - first
    return written


@kernel
def symbol_buffers(chars, words, byte_level, byte_fallback, prefix, suffix):
    """``_symbols``' outputs for ``words`` words of ``chars`` codepoints in all: symbols and
    source with room for the most symbols a character can become (4 bytes; with byte fallback,
    4 byte tokens each with the prefix and suffix), and the offsets, ``offsets[0] = 0``."""
    per_char = 4 if byte_level else (4 * (prefix.size + 1 + suffix.size) if byte_fallback else 1)
    bound = chars * per_char
    offsets = np.empty(words + 1, np.int64)
    offsets[0] = 0
    return np.empty(bound, np.int64), np.empty(bound, np.int64), offsets


def bpe_symbols_numba(codes: np.ndarray, offsets: np.ndarray, *, byte_level: bool, byte_to_id: np.ndarray,
                      char_keys: np.ndarray, char_values: np.ndarray, char_mask: int, char_probes: int,
                      byte_fallback: bool, fallback_ids: np.ndarray, prefix: np.ndarray, suffix: np.ndarray,
                      has_unk: bool, unk_id: int, fuse_unk: bool, whole_slots: np.ndarray, token_keys: np.ndarray,
                      token_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(symbols, offsets, source) of the words ``codes[offsets[i]:offsets[i + 1]]`` (int32
    codepoints), or None when an unknown character needs an unk token the vocabulary lacks.
    The tables are ``gputok.models.bpe.BPE._numba_tables``; ``whole_slots`` empty: no ``ignore_merges``.
    """
    symbols, source, out_offsets = symbol_buffers(codes.size, offsets.size - 1, byte_level, byte_fallback, prefix,
                                                  suffix)
    counts = out_offsets[1:]
    total = _symbols(codes, offsets, byte_level, byte_to_id, char_keys, char_values, char_mask,
                     64 - char_mask.bit_length(), char_probes, byte_fallback, fallback_ids, prefix, suffix, has_unk,
                     unk_id, fuse_unk, whole_slots, token_keys, token_offsets, symbols, source, counts)
    if total < 0:
        return None
    np.cumsum(counts, out=counts)
    return symbols[:total], out_offsets, source[:total]
