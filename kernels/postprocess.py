"""Post-processing on CUDA: each text's tokens, template specials, padding, mask and type ids, one text per lane.

Numba twins: ``postprocess_numba.padded`` and ``postprocess_numba.ragged`` (with
``truncate_rows`` for single texts without overflow: row ``t`` keeps the first ``a_len[t]`` tokens of
text ``t``). The template is ``item_seq`` / ``item_id`` / ``item_type`` (:func:`gputok.tokenizer.
_template_arrays`): a special token where ``item_seq < 0``, the text's tokens where it is 0.

Layout of the tokens (what the word-level kernels leave, so no compaction is needed): text ``t``
owns the word slots ``slot_starts[t] + k``, ``k < slot_counts[t]``; slot ``s`` holds
``piece_counts[s]`` token ids at ``piece_ids[piece_starts[s]:]``. Text ``t``'s tokens are its slots'
pieces in order.

Two kernels: :func:`row_tokens_triton` counts each text's tokens (the caller sizes the output from
them: the one host sync of a call), :func:`write_rows_triton` writes every row, row ``r`` from
``row_base[r]`` in flat int64 outputs (padded: ``r * width`` plus the left padding; ragged: the row
offsets) that the caller has filled with the padding (``pad_id``, mask 0, type 0).
"""

import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["texts"])
def _row_tokens_kernel(slot_starts_ptr, slot_counts_ptr, piece_counts_ptr, tokens_ptr, texts, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    first = tl.load(slot_starts_ptr + text, mask=inside, other=0)
    slots = tl.load(slot_counts_ptr + text, mask=inside, other=0)
    total = tl.zeros([BLOCK], dtype=tl.int64)
    for k in range(0, tl.max(slots, 0)):
        total += tl.load(piece_counts_ptr + first + k, mask=inside & (k < slots), other=0)
    tl.store(tokens_ptr + text, total, mask=inside)


def row_tokens_triton(slot_starts: torch.Tensor, slot_counts: torch.Tensor, piece_counts: torch.Tensor) -> torch.Tensor:
    """The int64 number of tokens of each text."""
    texts = slot_starts.numel()
    tokens = torch.empty(texts, dtype=torch.int64, device=slot_starts.device)
    if texts:
        block = 128  # a few loads per word: wide blocks are cheap
        _row_tokens_kernel[(triton.cdiv(texts, block),)](slot_starts, slot_counts, piece_counts, tokens, texts,
                                                         BLOCK=block)
    return tokens


@triton.jit(do_not_specialize=["texts", "items", "with_mask", "with_types"])
def _write_rows_kernel(item_seq_ptr, item_id_ptr, item_type_ptr, slot_starts_ptr, slot_counts_ptr, piece_starts_ptr,
                       piece_counts_ptr, piece_ids_ptr, keep_ptr, row_base_ptr, ids_ptr, mask_ptr, types_ptr, texts,
                       items, with_mask, with_types, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    # lanes' flags (a scalar compare would be a Python bool under the interpreter)
    has_mask = (tl.zeros([BLOCK], dtype=tl.int32) + with_mask) != 0
    has_types = (tl.zeros([BLOCK], dtype=tl.int32) + with_types) != 0
    base = tl.load(row_base_ptr + text, mask=inside, other=0)
    first_slot = tl.load(slot_starts_ptr + text, mask=inside, other=0)
    slots = tl.load(slot_counts_ptr + text, mask=inside, other=0)
    keep = tl.load(keep_ptr + text, mask=inside, other=0)
    at = base
    for k in range(0, items):
        item = k + tl.zeros([BLOCK], dtype=tl.int64)  # every lane reads the item (a scalar mixes badly with masks)
        seq = tl.load(item_seq_ptr + item, mask=inside, other=0)
        kind = tl.load(item_type_ptr + item, mask=inside, other=0)
        special = inside & (seq < 0)
        tl.store(ids_ptr + at, tl.load(item_id_ptr + item, mask=special, other=0), mask=special)
        tl.store(mask_ptr + at, tl.full([BLOCK], 1, dtype=tl.int64), mask=special & has_mask)
        tl.store(types_ptr + at, kind, mask=special & has_types)
        at = tl.where(special, at + 1, at)
        # The text's tokens: one per step, walking its slots and their pieces.
        slot = tl.zeros([BLOCK], dtype=tl.int64)
        piece = tl.zeros([BLOCK], dtype=tl.int64)
        left = tl.where(inside & (seq == 0), keep, 0)
        alive = left > 0
        while tl.max(alive.to(tl.int32), 0) > 0:
            s = first_slot + slot
            count = tl.load(piece_counts_ptr + s, mask=alive, other=0)
            emit = alive & (piece < count)
            token = tl.load(piece_ids_ptr + tl.load(piece_starts_ptr + s, mask=emit, other=0) + piece, mask=emit,
                            other=0)
            tl.store(ids_ptr + at, token.to(tl.int64), mask=emit)
            tl.store(mask_ptr + at, tl.full([BLOCK], 1, dtype=tl.int64), mask=emit & has_mask)
            tl.store(types_ptr + at, kind, mask=emit & has_types)
            at = tl.where(emit, at + 1, at)
            left = tl.where(emit, left - 1, left)
            piece = tl.where(emit, piece + 1, 0)
            slot = tl.where(alive & ~emit, slot + 1, slot)
            alive = alive & (left > 0) & (slot < slots)


def write_rows_triton(item_seq: torch.Tensor, item_id: torch.Tensor, item_type: torch.Tensor, slot_starts: torch.Tensor,
                      slot_counts: torch.Tensor, piece_starts: torch.Tensor, piece_counts: torch.Tensor,
                      piece_ids: torch.Tensor, keep: torch.Tensor, row_base: torch.Tensor, ids: torch.Tensor,
                      mask: torch.Tensor | None, types: torch.Tensor | None) -> None:
    """Write into ``ids`` (and ``mask``, ``types`` unless None; flat int64) each text's row from
    ``row_base[t]``: the template's specials and the first ``keep[t]`` tokens of text ``t``. The
    other cells (padding) are left as they are: the caller fills them first."""
    texts = slot_starts.numel()
    if texts == 0:
        return
    # 64 lanes: a block runs as long as its longest row.
    block = 64
    _write_rows_kernel[(triton.cdiv(texts, block),)](
        item_seq, item_id, item_type, slot_starts, slot_counts, piece_starts, piece_counts, piece_ids, keep, row_base,
        ids, ids if mask is None else mask, ids if types is None else types, texts, item_seq.numel(),
        int(mask is not None), int(types is not None), BLOCK=block)
