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


@triton.jit
def _walk_step(word_ptr, alive, node, cur, best_end, best_id, slot_keys_ptr, slot_values_ptr, token_of_node_ptr,
               ascii_row_ptr, ascii_children_ptr, hash_mask, hash_shift, max_probes):
    """One step of each ``alive`` lane's walk down the trie along ``word_ptr[cur]``: the new
    (node, cur, best_end, best_id) and whether the lane moved (an edge existed)."""
    codepoint = tl.load(word_ptr + cur, mask=alive, other=0).to(tl.int64)
    # ASCII edges come from the dense table, the others from the hash map.
    is_ascii = codepoint < 128
    dense_row = tl.load(ascii_row_ptr + node, mask=alive & is_ascii, other=-1).to(tl.int64)
    dense = alive & is_ascii & (dense_row >= 0)
    child = tl.load(ascii_children_ptr + dense_row * 128 + codepoint, mask=dense, other=-1).to(tl.int64)
    hashed = alive & ~is_ascii
    if tl.max(hashed.to(tl.int32), 0) > 0:  # most steps of most text walk ASCII edges only
        child = probe(node * MAX_CODEPOINT + codepoint, hashed, child, slot_keys_ptr, slot_values_ptr,
                      hash_mask, hash_shift, max_probes)
    moved = alive & (child >= 0)
    node = tl.where(moved, child, node)
    cur = tl.where(moved, cur + 1, cur)
    token = tl.load(token_of_node_ptr + node, mask=moved, other=-1).to(tl.int64)
    ends_token = moved & (token >= 0)
    best_end = tl.where(ends_token, cur, best_end)
    best_id = tl.where(ends_token, token, best_id)
    return node, cur, best_end, best_id, moved


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
        node, cur, best_end, best_id, moved = _walk_step(
            chars_ptr + row, alive, node, cur, best_end, best_id, slot_keys_ptr, slot_values_ptr, token_of_node_ptr,
            ascii_row_ptr, ascii_children_ptr, hash_mask, hash_shift, max_probes)
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


# ---- whole WordPiece rules, one word per lane (the CUDA path's model stage) ---------------------
# Numba twin: ``wordpiece_match_numba.wordpiece_encode_numba`` (the same per-word algorithm and unk
# rules: a word longer than ``max_chars`` is ``unk_id``; no token at some position makes the whole
# word ``unk_id``, or with PARTIAL_UNK one ``unk_id`` per run of unmatched characters). Layout: word
# ``w`` is ``chars[word_starts[w]:word_ends[w]]`` (empty slots are empty words); its pieces go to
# ``piece_ids``/``piece_ends`` from ``word_starts[w]`` on (a word has at most one piece per
# character, so words never overlap there), their number to ``counts[w]``.
@triton.jit(do_not_specialize=["num_words", "max_chars", "unk_id"])
def _wordpiece_encode_kernel(chars_ptr, word_starts_ptr, word_ends_ptr, slot_keys_ptr, slot_values_ptr,
                             token_of_node_ptr, ascii_row_ptr, ascii_children_ptr, piece_ids_ptr, piece_ends_ptr,
                             counts_ptr, num_words, max_chars, unk_id, hash_mask, hash_shift, max_probes,
                             PARTIAL_UNK: tl.constexpr, BLOCK: tl.constexpr):
    word = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = word < num_words
    base = tl.load(word_starts_ptr + word, mask=inside, other=0)
    length = tl.load(word_ends_ptr + word, mask=inside, other=0) - base
    too_long = inside & (length > max_chars)
    tl.store(piece_ids_ptr + base, tl.full([BLOCK], unk_id, dtype=tl.int32), mask=too_long)
    tl.store(piece_ends_ptr + base, length.to(tl.int32), mask=too_long)
    count = too_long.to(tl.int64)
    start = tl.zeros([BLOCK], dtype=tl.int64)  # start of the piece being matched
    cur = tl.zeros([BLOCK], dtype=tl.int64)
    node = tl.zeros([BLOCK], dtype=tl.int64)  # root 0 for a word's first piece, 1 for continuations
    best_end = tl.full([BLOCK], -1, dtype=tl.int64)
    best_id = tl.full([BLOCK], -1, dtype=tl.int64)
    unmatched_before = tl.zeros([BLOCK], dtype=tl.int1)  # the last piece is a run of unmatched characters
    alive = inside & (length > 0) & ~too_long
    while tl.max(alive.to(tl.int32), 0) > 0:
        node, cur, best_end, best_id, moved = _walk_step(
            chars_ptr + base, alive, node, cur, best_end, best_id, slot_keys_ptr, slot_values_ptr, token_of_node_ptr,
            ascii_row_ptr, ascii_children_ptr, hash_mask, hash_shift, max_probes)
        stop = alive & (~moved | (cur >= length))
        matched = stop & (best_end >= 0)
        tl.store(piece_ids_ptr + base + count, best_id.to(tl.int32), mask=matched)
        tl.store(piece_ends_ptr + base + count, best_end.to(tl.int32), mask=matched)
        count = tl.where(matched, count + 1, count)
        start = tl.where(matched, best_end, start)
        unmatched_before = unmatched_before & ~matched
        failed = stop & (best_end < 0)
        if PARTIAL_UNK:
            grows = failed & unmatched_before  # the run goes on: its unk ends one character later
            tl.store(piece_ends_ptr + base + count - 1, (start + 1).to(tl.int32), mask=grows)
            opens = failed & ~unmatched_before
            tl.store(piece_ids_ptr + base + count, tl.full([BLOCK], unk_id, dtype=tl.int32), mask=opens)
            tl.store(piece_ends_ptr + base + count, (start + 1).to(tl.int32), mask=opens)
            count = tl.where(opens, count + 1, count)
            unmatched_before = unmatched_before | opens
            start = tl.where(failed, start + 1, start)
        else:  # the whole word is unk
            tl.store(piece_ids_ptr + base, tl.full([BLOCK], unk_id, dtype=tl.int32), mask=failed)
            tl.store(piece_ends_ptr + base, length.to(tl.int32), mask=failed)
            count = tl.where(failed, 1, count)
            alive = alive & ~failed
        restart = stop & alive
        cur = tl.where(restart, start, cur)
        node = tl.where(restart, 1, node)
        best_end = tl.where(restart, -1, best_end)
        best_id = tl.where(restart, -1, best_id)
        alive = alive & ~(restart & (start >= length))
    tl.store(counts_ptr + word, count, mask=inside)


def wordpiece_encode_triton(chars: torch.Tensor, word_starts: torch.Tensor, word_ends: torch.Tensor, *,
                            slot_keys: torch.Tensor, slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                            token_of_node: torch.Tensor, ascii_row: torch.Tensor, ascii_children: torch.Tensor,
                            max_chars: int, unk_id: int, partial_unk: bool
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int32 piece ids, int32 piece ends: one slot per element of ``chars``; int64 pieces per word)
    of the words ``chars[word_starts[w]:word_ends[w]]``; the trie arrays are ``gputok.trie.Trie``'s."""
    num_words = word_starts.numel()
    piece_ids = torch.empty(max(chars.numel(), 1), dtype=torch.int32, device=chars.device)
    piece_ends = torch.empty_like(piece_ids)
    counts = torch.empty(num_words, dtype=torch.int64, device=chars.device)
    if num_words:
        # 128 lanes, as the padded kernel above: words differ in length, a block waits on its longest.
        block = 128
        _wordpiece_encode_kernel[(triton.cdiv(num_words, block),)](
            chars, word_starts, word_ends, slot_keys, slot_values, token_of_node, ascii_row, ascii_children,
            piece_ids, piece_ends, counts, num_words, max_chars, unk_id, hash_mask, 64 - hash_mask.bit_length(),
            max_probes, PARTIAL_UNK=partial_unk, BLOCK=block)
    return piece_ids, piece_ends, counts
