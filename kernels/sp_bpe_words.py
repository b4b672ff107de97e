"""SentencePiece BPE of whole words on CUDA, one word per lane: characters to symbols, then the merges.

Numba twins: ``bpe_symbols_numba._symbols`` (character-level, no ``ignore_merges``, no
continuing-subword prefix or end-of-word suffix: each character is the symbol of its
``(variant << 21) | codepoint`` key in the character table, a ``gputok.hashing.HashMap``; where it
has none, with byte fallback the ``<0xNN>`` pieces of its UTF-8 bytes, else the unk piece, a run
of unk characters one unk with ``fuse_unk``), then ``bpe_heap.merge_rows`` (the leftmost adjacent
pair of lowest rank merged first, until no pair has a rank), as ``sp_bpe_texts_numba`` runs them
per word. The merges are ``bpe_words.merge_words``, the byte-level kernel's.

Layout (no host sync), as ``bpe_words.byte_bpe_words_triton``: word ``w`` is
``values[word_starts[w]:word_ends[w]]``; the packed words are the first ``total[0]`` places. Its
tokens are written from ``4 * word_starts[w]`` (at most four byte pieces per character), their
number to ``counts[w]`` and that place to ``piece_starts[w]``. Memory: 8 int64 per codepoint.
"""

import torch
import triton
import triton.language as tl

from .bpe_words import merge_words, word_lanes, word_token_buffers
from .hash_lookup import probe_until_found


@triton.jit(do_not_specialize=["places", "char_mask", "char_shift", "char_probes", "byte_fallback", "unk_id",
                               "fuse_unk", "vocab_size", "hash_mask", "hash_shift", "max_probes"])
def _sp_bpe_words_kernel(values_ptr, word_starts_ptr, word_ends_ptr, total_ptr, char_keys_ptr, char_values_ptr,
                         fallback_ids_ptr, slot_keys_ptr, slot_values_ptr, tokens_ptr, pair_values_ptr,
                         piece_starts_ptr, counts_ptr, places, char_mask, char_shift, char_probes, byte_fallback,
                         unk_id, fuse_unk, vocab_size, hash_mask, hash_shift, max_probes, BLOCK: tl.constexpr,
                         WIDTH: tl.constexpr):
    word, inside, first, chars = word_lanes(word_starts_ptr, word_ends_ptr, total_ptr, places, BLOCK)
    base = 4 * first
    tokens = tokens_ptr + base
    # lane flags, not constexprs: one compiled kernel serves every model
    zero = tl.zeros([BLOCK], dtype=tl.int32)
    as_bytes = (zero + byte_fallback) != 0
    fuse = (zero + fuse_unk) != 0

    # The symbols (bpe_symbols_numba._symbols), one character of every word at a time.
    n = tl.zeros([BLOCK], dtype=tl.int64)
    unk_before = tl.zeros([BLOCK], dtype=tl.int1)  # the character before was an unk symbol
    for i in range(0, tl.max(chars, 0)):
        live = inside & (i < chars)
        cp = tl.load(values_ptr + first + i, mask=live, other=0).to(tl.int64)
        at = first * 0 + i
        variant = tl.where(at == chars - 1, 2, 0) + tl.where(at > 0, 1, 0)  # a continuation, the last
        symbol = probe_until_found((variant.to(tl.int64) << 21) | cp, live, tl.full([BLOCK], -1, dtype=tl.int64),
                                   char_keys_ptr, char_values_ptr, char_mask, char_shift, char_probes)
        known = live & (symbol >= 0)
        tl.store(tokens + n, symbol, mask=known)
        spelled = live & ~known & as_bytes  # the model's byte pieces are all there (the caller checks)
        size = 1 + (cp >= 0x80).to(tl.int64) + (cp >= 0x800).to(tl.int64) + (cp >= 0x10000).to(tl.int64)
        lead = tl.where(size == 1, cp,
                        tl.where(size == 2, 0xC0, tl.where(size == 3, 0xE0, 0xF0)) | (cp >> (6 * (size - 1))))
        tl.store(tokens + n, tl.load(fallback_ids_ptr + (lead & 0xFF), mask=spelled, other=0), mask=spelled)
        for k in range(1, 4):  # continuation byte k: bits 6 * (size - 1 - k) of cp
            more = spelled & (k < size)
            byte = 0x80 | ((cp >> tl.maximum(6 * (size - 1 - k), 0)) & 0x3F)
            tl.store(tokens + n + k, tl.load(fallback_ids_ptr + byte, mask=more, other=0), mask=more)
        unknown = live & ~known & ~as_bytes
        new_unk = unknown & ~(fuse & unk_before)
        tl.store(tokens + n, tl.zeros([BLOCK], dtype=tl.int64) + unk_id, mask=new_unk)
        n = tl.where(known | new_unk, n + 1, tl.where(spelled, n + size, n))
        unk_before = tl.where(live, unknown, unk_before)
    tl.debug_barrier()  # the symbols are read below by other threads than wrote them

    n = merge_words(tokens, pair_values_ptr + base, n, inside, slot_keys_ptr, slot_values_ptr, vocab_size, hash_mask,
                    hash_shift, max_probes, BLOCK, WIDTH)
    tl.store(counts_ptr + word, tl.where(inside, n, 0), mask=word < places)
    tl.store(piece_starts_ptr + word, base, mask=word < places)


def sp_bpe_words_triton(values: torch.Tensor, word_starts: torch.Tensor, word_ends: torch.Tensor, total: torch.Tensor,
                        *, char_keys: torch.Tensor, char_values: torch.Tensor, char_mask: int, char_probes: int,
                        byte_fallback: bool, fallback_ids: torch.Tensor, unk_id: int, fuse_unk: bool,
                        slot_keys: torch.Tensor, slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                        vocab_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int64 tokens, 4 places per element of ``values``; int64 each word's first token's place and
    its number of tokens) of the first ``total[0]`` words ``values[word_starts[w]:word_ends[w]]``
    (codepoints). The tables are ``gputok.models.bpe.BPE._numba_tables``' on the device; without
    byte fallback, ``unk_id >= 0``."""
    places = word_starts.numel()
    tokens, pair_values, piece_starts, counts = word_token_buffers(values, places)
    if places:
        # 128 words per program and 16 positions per tile, as the byte-level kernel.
        block, width = 128, 16
        _sp_bpe_words_kernel[(triton.cdiv(places, block),)](
            values, word_starts, word_ends, total, char_keys, char_values, fallback_ids, slot_keys, slot_values, tokens,
            pair_values, piece_starts, counts, places, char_mask, 64 - char_mask.bit_length(), char_probes,
            int(byte_fallback), unk_id, int(fuse_unk), vocab_size, hash_mask, 64 - hash_mask.bit_length(), max_probes,
            BLOCK=block, WIDTH=width)
    return tokens, piece_starts, counts
