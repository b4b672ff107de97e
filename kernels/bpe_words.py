"""Byte-level BPE of whole words on CUDA, one word per lane: UTF-8 bytes, the whole-word rule, then the merges.

Numba twins: ``bpe_symbols_numba.bpe_symbols_numba`` (byte-level: a word's UTF-8 bytes as
``byte_to_id`` tokens, or, with ``ignore_merges``, the one token whose bytes the word is, found in
the same ``build_whole_table`` hash table by the same key hash and verified byte by byte), then
``bpe_heap.merge_rows`` (repeatedly merge the adjacent pair of lowest rank, the leftmost among
equal ranks, until no pair has a rank; the pair map is a ``gputok.hashing.HashMap``,
``left * vocab_size + right`` -> ``rank << 32 | merged id``, probed by
``hash_lookup.probe_until_found``). The result is the twins' per word. The merge loop is ``bpe_merge._bpe_merge_kernel``'s rule with the
lanes over words instead of over one word's positions, and each position's pair value kept
(``pair_values``), so a merge ranks two new pairs and scans the word once (the minimum rank and
its leftmost position), then shifts the rest of the word left by one. A word of ``n`` bytes costs
O(n) per merge, O(n^2) in all: fine for the words a regex split makes (a few to tens of bytes);
the heap of the twin is O(n log n) for the rare long run. The per-position work (bytes, their
tokens, the first pair values, each merge's scan and shift) reads ``[BLOCK, WIDTH]`` tiles: words
by positions, ``WIDTH`` positions of every word at a time.

Layout (no host sync): word ``w`` is ``values[word_starts[w]:word_ends[w]]`` (codepoints); the
packed words are the first ``total[0]`` places, the rest empty. Its tokens are written from
``4 * word_starts[w]`` in ``tokens`` (at most 4 UTF-8 bytes per character, so words never overlap)
and their number to ``counts[w]``; ``piece_starts[w]`` gets ``4 * word_starts[w]``, as
``postprocess.write_rows_triton`` reads pieces. Memory: 8 int64 per codepoint (tokens and pair
values).
"""

import torch
import triton
import triton.language as tl

from .hash_lookup import probe_until_found

NO_RANK = tl.constexpr((1 << 63) - 1)
FNV_PRIME = tl.constexpr(0x100000001B3)  # bpe_symbols_numba._MULT
MIX = tl.constexpr(0xBF58476D1CE4E5B9 - (1 << 64))  # bpe_symbols_numba._MIX
LOW33 = tl.constexpr(0x1FFFFFFFF)
LOW32 = tl.constexpr(0xFFFFFFFF)


@triton.jit
def _pair_value(tokens_ptr, at, ok, slot_keys_ptr, slot_values_ptr, vocab_size, hash_mask, hash_shift, max_probes):
    """The pair map's value of ``(tokens[at], tokens[at + 1])`` where ``ok``, else NO_RANK."""
    left = tl.load(tokens_ptr + at, mask=ok, other=0)
    right = tl.load(tokens_ptr + at + 1, mask=ok, other=0)
    return probe_until_found(left * vocab_size + right, ok, tl.zeros_like(left) + NO_RANK, slot_keys_ptr,
                             slot_values_ptr, hash_mask, hash_shift, max_probes)


@triton.jit
def word_lanes(word_starts_ptr, word_ends_ptr, total_ptr, places, BLOCK: tl.constexpr):
    """This program's words (a lane each), which of them are packed words (the first ``total[0]``
    places), their first characters and their lengths."""
    word = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = (word < places) & (word < tl.load(total_ptr))
    first = tl.load(word_starts_ptr + word, mask=inside, other=0)
    return word, inside, first, tl.load(word_ends_ptr + word, mask=inside, other=0) - first


@triton.jit
def merge_words(tokens, pairs, n, merging, slot_keys_ptr, slot_values_ptr, vocab_size, hash_mask, hash_shift,
                max_probes, BLOCK: tl.constexpr, WIDTH: tl.constexpr):
    """The merges of each ``merging`` lane's word (``n`` token ids from ``tokens``; ``pairs``: room
    for its pair values): rank each adjacent pair, then merge the leftmost pair of lowest rank until
    no pair has a rank (``bpe_heap.merge_rows``' rule). Returns the words' new lengths. Shared by
    the byte-level and the SentencePiece BPE kernels."""
    column = tl.arange(0, WIDTH).to(tl.int64)[None, :]
    tl.debug_barrier()
    for chunk in range(0, tl.max(tl.where(merging, n - 1, 0), 0), WIDTH):
        pos = chunk + column
        live = merging[:, None] & (pos < (n - 1)[:, None])
        left = tl.reshape(tl.load(tokens[:, None] + pos, mask=live, other=0), [BLOCK * WIDTH])
        right = tl.reshape(tl.load(tokens[:, None] + pos + 1, mask=live, other=0), [BLOCK * WIDTH])
        flat = tl.reshape(live, [BLOCK * WIDTH])
        value = probe_until_found(left * vocab_size + right, flat, tl.zeros_like(left) + NO_RANK, slot_keys_ptr,
                                  slot_values_ptr, hash_mask, hash_shift, max_probes)
        tl.store(pairs[:, None] + pos, tl.reshape(value, [BLOCK, WIDTH]), mask=live)

    # The merges: the leftmost pair of lowest rank, one per lane per step; a word's positions are
    # read WIDTH at a time, as a [BLOCK, WIDTH] tile.
    alive = merging & (n > 1)
    while tl.max(alive.to(tl.int32), 0) > 0:
        tl.debug_barrier()  # the last step's stores, before this step's tiles read them
        best = tl.full([BLOCK], NO_RANK, dtype=tl.int64)
        best_value = tl.zeros([BLOCK], dtype=tl.int64)
        at = tl.zeros([BLOCK], dtype=tl.int64)
        for chunk in range(0, tl.max(tl.where(alive, n - 1, 0), 0), WIDTH):
            pos = chunk + column
            live = alive[:, None] & (pos < (n - 1)[:, None])
            value = tl.load(pairs[:, None] + pos, mask=live, other=NO_RANK)
            rank = tl.where(value == NO_RANK, NO_RANK, value >> 32)
            chunk_best = tl.min(rank, 1)
            chunk_at = tl.min(tl.where(live & (rank == chunk_best[:, None]), pos, 1 << 62), 1)
            chunk_value = tl.max(tl.where(pos == chunk_at[:, None], value, 0), 1)
            better = chunk_best < best  # strictly: an earlier chunk keeps ties (the leftmost)
            best = tl.where(better, chunk_best, best)
            best_value = tl.where(better, chunk_value, best_value)
            at = tl.where(better, chunk_at, at)
        alive = alive & (best < NO_RANK)
        tl.store(tokens + at, best_value & LOW32, mask=alive)
        # The rest of the word moves left by one: a barrier between a tile's loads and its stores,
        # so that no thread overwrites what another has yet to read.
        lowest = tl.min(tl.where(alive, at + 1, 1 << 62), 0)
        for chunk in range(lowest, tl.max(tl.where(alive, n - 1, 0), 0), WIDTH):
            pos = chunk + column
            moving = alive[:, None] & (pos > at[:, None]) & (pos < (n - 1)[:, None])
            shifts = moving & (pos < (n - 2)[:, None])
            moved = tl.load(tokens[:, None] + pos + 1, mask=moving, other=0)
            moved_pairs = tl.load(pairs[:, None] + pos + 1, mask=shifts, other=0)
            tl.debug_barrier()
            tl.store(tokens[:, None] + pos, moved, mask=moving)
            tl.store(pairs[:, None] + pos, moved_pairs, mask=shifts)
            tl.debug_barrier()
        n = tl.where(alive, n - 1, n)
        tl.debug_barrier()
        left = alive & (at > 0)
        tl.store(pairs + at - 1, _pair_value(tokens, at - 1, left, slot_keys_ptr, slot_values_ptr, vocab_size,
                                             hash_mask, hash_shift, max_probes), mask=left)
        right = alive & (at < n - 1)
        tl.store(pairs + at, _pair_value(tokens, at, right, slot_keys_ptr, slot_values_ptr, vocab_size, hash_mask,
                                         hash_shift, max_probes), mask=right)
        alive = alive & (n > 1)
    return n


@triton.jit(do_not_specialize=["places", "vocab_size", "hash_mask", "hash_shift", "max_probes", "whole_mask",
                               "with_whole"])
def _byte_bpe_kernel(values_ptr, word_starts_ptr, word_ends_ptr, total_ptr, byte_to_id_ptr, whole_slots_ptr,
                     token_keys_ptr, token_offsets_ptr, slot_keys_ptr, slot_values_ptr, tokens_ptr, pair_values_ptr,
                     piece_starts_ptr, counts_ptr, places, vocab_size, hash_mask, hash_shift, max_probes, whole_mask,
                     with_whole, BLOCK: tl.constexpr, WIDTH: tl.constexpr):
    word, inside, first, chars = word_lanes(word_starts_ptr, word_ends_ptr, total_ptr, places, BLOCK)
    base = 4 * first
    tokens = tokens_ptr + base
    pairs = pair_values_ptr + base

    # The UTF-8 bytes (bpe_symbols_numba._utf8), WIDTH characters of each word at a time.
    column = tl.arange(0, WIDTH).to(tl.int64)[None, :]
    n = tl.zeros([BLOCK], dtype=tl.int64)
    for chunk in range(0, tl.max(chars, 0), WIDTH):
        j = chunk + column
        live = inside[:, None] & (j < chars[:, None])
        cp = tl.load(values_ptr + first[:, None] + j, mask=live, other=0).to(tl.int64)
        one = cp < 0x80
        two = cp < 0x800
        three = cp < 0x10000
        lead = tl.where(one, cp, tl.where(two, 0xC0 | (cp >> 6), tl.where(three, 0xE0 | (cp >> 12), 0xF0 | (cp >> 18))))
        size = tl.where(live, tl.where(one, 1, tl.where(two, 2, tl.where(three, 3, 4))), 0).to(tl.int64)
        at = tokens[:, None] + n[:, None] + tl.cumsum(size, 1) - size
        tl.store(at, lead, mask=live)
        for k in range(1, 4):  # continuation byte k: bits 6 * (size - 1 - k) of cp
            shift = 6 * (size - 1 - k)
            tl.store(at + k, 0x80 | ((cp >> tl.maximum(shift, 0)) & 0x3F), mask=live & (k < size))
        n += tl.sum(size, 1)
    tl.debug_barrier()  # the bytes are read below by other threads than wrote them

    # ignore_merges: the token whose bytes the word is (bpe_symbols_numba._whole). A lane flag, not a
    # constexpr: one compiled kernel serves both (a scalar compare is a Python bool under the interpreter).
    whole = tl.full([BLOCK], -1, dtype=tl.int64)
    use_whole = inside & ((tl.zeros([BLOCK], dtype=tl.int32) + with_whole) != 0)
    h = tl.zeros([BLOCK], dtype=tl.int64)
    for k in range(0, tl.max(tl.where(use_whole, n, 0), 0)):
        live = use_whole & (k < n)
        h = tl.where(live, (h ^ tl.load(tokens + k, mask=live, other=0)) * FNV_PRIME, h)
    h ^= n
    h *= MIX
    h ^= (h >> 31) & LOW33
    slot = h & whole_mask
    searching = use_whole & (n > 0)
    while tl.max(searching.to(tl.int32), 0) > 0:
        t = tl.load(whole_slots_ptr + slot, mask=searching, other=-1)
        filled = searching & (t != -1)
        a = tl.load(token_offsets_ptr + t, mask=filled, other=0)
        same = filled & (tl.load(token_offsets_ptr + t + 1, mask=filled, other=0) - a == n)
        for k in range(0, tl.max(tl.where(same, n, 0), 0)):
            check = same & (k < n)
            differs = tl.load(token_keys_ptr + a + k, mask=check, other=0) != tl.load(tokens + k, mask=check, other=0)
            same = same & ~(check & differs)
        whole = tl.where(same, t, whole)
        searching = filled & ~same
        slot = (slot + 1) & whole_mask
    is_whole = whole >= 0
    tl.store(tokens, whole, mask=is_whole)
    n = tl.where(is_whole, 1, n)
    tl.debug_barrier()

    # Bytes to their tokens, then each adjacent pair's value (a tile probed as one vector).
    merging = inside & ~is_whole
    for chunk in range(0, tl.max(tl.where(merging, n, 0), 0), WIDTH):
        pos = chunk + column
        live = merging[:, None] & (pos < n[:, None])
        byte = tl.load(tokens[:, None] + pos, mask=live, other=0)
        tl.store(tokens[:, None] + pos, tl.load(byte_to_id_ptr + byte, mask=live, other=0), mask=live)
    n = merge_words(tokens, pairs, n, merging, slot_keys_ptr, slot_values_ptr, vocab_size, hash_mask, hash_shift,
                    max_probes, BLOCK, WIDTH)
    tl.store(counts_ptr + word, tl.where(inside, n, 0), mask=word < places)
    tl.store(piece_starts_ptr + word, base, mask=word < places)


def word_token_buffers(values: torch.Tensor, places: int) -> tuple[torch.Tensor, ...]:
    """A word-per-lane BPE kernel's outputs and scratch: int64 tokens and pair values, four places
    per element of ``values``; int64 each word's first token's place and its number of tokens."""
    tokens = torch.empty(max(4 * values.numel(), 1), dtype=torch.int64, device=values.device)
    piece_starts = torch.empty(places, dtype=torch.int64, device=values.device)
    return tokens, torch.empty_like(tokens), piece_starts, torch.empty_like(piece_starts)


def byte_bpe_words_triton(values: torch.Tensor, word_starts: torch.Tensor, word_ends: torch.Tensor,
                          total: torch.Tensor, *, byte_to_id: torch.Tensor, whole_slots: torch.Tensor,
                          token_keys: torch.Tensor, token_offsets: torch.Tensor, slot_keys: torch.Tensor,
                          slot_values: torch.Tensor, hash_mask: int, max_probes: int, vocab_size: int
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int64 tokens, 4 places per element of ``values``; int64 each word's first token's place and
    its number of tokens) of the first ``total[0]`` words ``values[word_starts[w]:word_ends[w]]``
    (codepoints). ``whole_slots`` empty: no ``ignore_merges``; the tables are
    ``gputok.models.bpe.BPE._numba_tables``' on the device."""
    places = word_starts.numel()
    tokens, pair_values, piece_starts, counts = word_token_buffers(values, places)
    if places:
        # 128 words per program, as the WordPiece kernel (a block runs as long as its longest word's
        # merges); 16 positions per tile: most words of a regex split have fewer bytes.
        block, width = 128, 16
        _byte_bpe_kernel[(triton.cdiv(places, block),)](
            values, word_starts, word_ends, total, byte_to_id, whole_slots if whole_slots.numel() else byte_to_id,
            token_keys, token_offsets, slot_keys, slot_values, tokens, pair_values, piece_starts, counts, places,
            vocab_size, hash_mask, 64 - hash_mask.bit_length(), max_probes, max(whole_slots.numel() - 1, 0),
            int(whole_slots.numel() > 0), BLOCK=block, WIDTH=width)
    return tokens, piece_starts, counts
