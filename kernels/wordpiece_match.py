"""Greedy longest-match WordPiece over a hash-map trie, one word per lane.

Torch twin: ``gputok.models.wordpiece.wordpiece_match_torch`` (same arguments, same outputs).

Each lane runs a small state machine over its word: walk the trie from the current piece start,
remember the last node that ends a token, and when the walk cannot go on, emit that token and
restart from where it ended (from root 1, the continuation root). Edges on ASCII codepoints come
from the trie's dense ``ascii_children`` table, the others from its hash map. A word with no match at some
position ends with ``num_pieces = -1`` (whole-word unk), or, with ``PARTIAL_UNK``, emits -2 for one
character and goes on. The trie edge lookup is the Fibonacci-hashed linear probing of ``gputok.hashing.HashMap``.
"""

import torch
import triton
import triton.language as tl

from .hash_lookup import probe

MAX_CODEPOINT = tl.constexpr(0x110000)  # a kernel reads only constexpr globals


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["num_words", "width"])
def _wordpiece_match_kernel(chars_ptr, lengths_ptr, slot_keys_ptr, slot_values_ptr, token_of_node_ptr,
                            ascii_row_ptr, ascii_children_ptr,
                            piece_ids_ptr, piece_ends_ptr, num_pieces_ptr, num_words, width,
                            hash_mask, hash_shift, max_probes, PARTIAL_UNK: tl.constexpr, BLOCK: tl.constexpr):
    word = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = word < num_words
    length = tl.load(lengths_ptr + word, mask=in_range, other=0).to(tl.int64)
    row = word * width
    start = tl.zeros([BLOCK], dtype=tl.int64)  # start of the piece being matched
    cur = tl.zeros([BLOCK], dtype=tl.int64)  # next character to walk
    node = tl.zeros([BLOCK], dtype=tl.int64)
    best_end = tl.full([BLOCK], -1, dtype=tl.int64)
    best_id = tl.full([BLOCK], -1, dtype=tl.int64)
    count = tl.zeros([BLOCK], dtype=tl.int64)
    alive = in_range & (length > 0)
    while tl.max(alive.to(tl.int32), 0) > 0:
        codepoint = tl.load(chars_ptr + row + cur, mask=alive, other=0).to(tl.int64)
        # ASCII edges come from the dense table, the others from the hash map.
        is_ascii = codepoint < 128
        dense_row = tl.load(ascii_row_ptr + node, mask=alive & is_ascii, other=-1).to(tl.int64)
        dense = alive & is_ascii & (dense_row >= 0)
        child = tl.load(ascii_children_ptr + dense_row * 128 + codepoint, mask=dense, other=-1).to(tl.int64)
        child = probe(node * MAX_CODEPOINT + codepoint, alive & ~is_ascii, child, slot_keys_ptr, slot_values_ptr,
                      hash_mask, hash_shift, max_probes)
        moved = alive & (child >= 0)
        node = tl.where(moved, child, node)
        cur = tl.where(moved, cur + 1, cur)
        token = tl.load(token_of_node_ptr + node, mask=moved, other=-1).to(tl.int64)
        ends_token = moved & (token >= 0)
        best_end = tl.where(ends_token, cur, best_end)
        best_id = tl.where(ends_token, token, best_id)
        # The walk of a lane stops when it cannot move or reaches the end of its word.
        stop = alive & (~moved | (cur >= length))
        failed = stop & (best_end < 0)
        if PARTIAL_UNK:
            best_id = tl.where(failed, -2, best_id)
            best_end = tl.where(failed, start + 1, best_end)
            emit = stop
        else:
            tl.store(num_pieces_ptr + word, tl.full([BLOCK], -1, dtype=tl.int32), mask=failed)
            alive = alive & ~failed
            emit = stop & ~failed
        tl.store(piece_ids_ptr + row + count, best_id.to(tl.int32), mask=emit)
        tl.store(piece_ends_ptr + row + count, best_end.to(tl.int32), mask=emit)
        count = tl.where(emit, count + 1, count)
        start = tl.where(emit, best_end, start)
        cur = tl.where(emit, best_end, cur)
        node = tl.where(emit, 1, node)
        best_end = tl.where(emit, -1, best_end)
        best_id = tl.where(emit, -1, best_id)
        finished = emit & (start >= length)
        tl.store(num_pieces_ptr + word, count.to(tl.int32), mask=finished)
        alive = alive & ~finished


def wordpiece_match_triton(chars: torch.Tensor, lengths: torch.Tensor, *, slot_keys: torch.Tensor,
                           slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                           token_of_node: torch.Tensor, ascii_row: torch.Tensor, ascii_children: torch.Tensor,
                           partial_unk: bool):
    num_words, width = chars.shape
    piece_ids = torch.full((num_words, width), -1, dtype=torch.int32, device=chars.device)
    piece_ends = torch.full_like(piece_ids, -1)
    num_pieces = torch.zeros(num_words, dtype=torch.int32, device=chars.device)
    if num_words == 0 or width == 0:
        return piece_ids, piece_ends, num_pieces
    # 128 lanes: words differ in length, so wider blocks mostly wait on their longest word.
    block = 128
    hash_shift = 64 - hash_mask.bit_length()  # gputok.hashing.home_slot's shift
    grid = (triton.cdiv(num_words, block),)
    _wordpiece_match_kernel[grid](chars.contiguous(), lengths.contiguous(), slot_keys, slot_values,
                                  token_of_node, ascii_row, ascii_children, piece_ids, piece_ends, num_pieces, num_words, width,
                                  hash_mask, hash_shift, max_probes, PARTIAL_UNK=partial_unk, BLOCK=block)
    return piece_ids, piece_ends, num_pieces
