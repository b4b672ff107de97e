"""Packing tokenized documents into ``[B, seq_len]`` blocks for variable-length attention.

:class:`Packer` takes ragged ids (flat ``ids`` + int64 ``offsets``, as ``tok(texts, padding=False)``
returns them as ``input_ids`` / ``row_offsets``) and returns the names of transformers'
``DataCollatorWithFlattening``, with the blocks as rows:

- ``input_ids`` ``[B, seq_len]``; the unused tail of a block is ``pad_id``;
- ``labels``: the ids, ``-100`` on padding and (``mask_boundaries=True``, the default) on the first
  token of every document piece, so that with the usual shift no token is predicted from another
  document (DataCollatorWithFlattening's ``separator_id``);
- ``position_ids``: restarting at 0 for every document piece (and for the padding);
- ``cu_seqlens`` (int32): the piece boundaries over the flattened ``B * seq_len`` tokens, padding
  runs included as pieces of their own, so ``flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens,
  max_seqlen, max_seqlen)`` attends within pieces only; ``max_seqlen`` (int);
- ``efficiency``: real tokens / (``B * seq_len``).

Modes: ``"concat"`` lays all documents end to end and cuts every ``seq_len`` tokens (documents cut
at block ends; nothing is lost: the pieces in order are the documents); ``"best_fit"`` cuts only
documents longer than ``seq_len`` (into ``seq_len`` pieces) and packs the pieces best-fit
decreasing (Ding et al., "Fewer Truncations Improve Language Modeling", 2024) so that no other
document is cut. The assignment of pieces to blocks needs only the lengths: it runs in the numba
kernel ``gputok.kernels.packing_numba`` on the host; every token-sized array is built by torch ops
on the ids' device (no loop per token or document in Python). Memory: a few int64 arrays of
``B * seq_len``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

IGNORE_INDEX = -100
MODES = ("concat", "best_fit")


class Packer:
    """Ragged ids -> packed blocks; see the module doc.

    >>> packer = Packer(4, pad_id=0)
    >>> out = packer(torch.tensor([5, 6, 7, 8, 9, 10]), torch.tensor([0, 3, 6]))
    >>> out["input_ids"].tolist(), out["labels"].tolist()
    ([[5, 6, 7, 8], [9, 10, 0, 0]], [[-100, 6, 7, -100], [9, 10, -100, -100]])
    >>> out["position_ids"].tolist(), out["cu_seqlens"].tolist(), out["max_seqlen"]
    ([[0, 1, 2, 0], [0, 1, 0, 1]], [0, 3, 4, 6, 8], 3)
    """

    def __init__(self, seq_len: int, *, mode: str = "concat", pad_id: int = 0, mask_boundaries: bool = True) -> None:
        if seq_len < 1:
            raise ValueError(f"seq_len={seq_len}; give a positive block length")
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; choose one of {MODES}")
        self.seq_len, self.mode, self.pad_id, self.mask_boundaries = seq_len, mode, pad_id, mask_boundaries
        self.tokens = self.slots = 0  # running totals for :attr:`efficiency`

    @property
    def efficiency(self) -> float:
        """Real tokens / block slots over every call so far."""
        return self.tokens / self.slots if self.slots else 0.0

    def __call__(self, ids: torch.Tensor, offsets: torch.Tensor) -> dict[str, Any]:
        device = ids.device
        offsets = offsets.to(device=device, dtype=torch.int64)
        if offsets.numel() and int(offsets[0]):  # a slice of a bigger batch: make it start at 0
            ids, offsets = ids[int(offsets[0]):int(offsets[-1])], offsets - offsets[0]
        lengths = offsets[1:] - offsets[:-1]
        piece_lengths, piece_starts = self._pieces(lengths, offsets)
        piece_lengths, piece_starts = piece_lengths[piece_lengths > 0], piece_starts[piece_lengths > 0]
        if self.mode == "concat":
            total = int(piece_lengths.sum())
            blocks = -(-total // self.seq_len)
            destination = torch.cumsum(piece_lengths, 0) - piece_lengths
        else:
            destination, blocks = self._best_fit(piece_lengths)
        return self._assemble(ids, piece_lengths, piece_starts, destination, blocks, offsets)

    def _pieces(self, lengths: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Lengths and source starts of the document pieces: concat cuts at the block ends of the
        whole concatenation, best-fit every ``seq_len`` tokens of a document."""
        S = self.seq_len
        if self.mode == "concat":
            # A piece ends at each document end and at each multiple of S of the concatenation.
            cuts = torch.arange(S, int(offsets[-1]), S, device=offsets.device)
            bounds = torch.unique(torch.cat([offsets, cuts]))  # sorted
            return bounds[1:] - bounds[:-1], bounds[:-1]
        per_doc = torch.clamp(-(-lengths // S), min=1)
        doc = torch.repeat_interleave(torch.arange(lengths.numel(), device=lengths.device), per_doc)
        first = torch.cumsum(per_doc, 0) - per_doc
        k = torch.arange(doc.numel(), device=doc.device) - first[doc]  # piece number inside its document
        return torch.clamp(lengths[doc] - k * S, max=S), offsets[:-1][doc] + k * S

    def _best_fit(self, piece_lengths: torch.Tensor) -> tuple[torch.Tensor, int]:
        from .kernels.packing_numba import best_fit_decreasing

        lengths = piece_lengths.cpu().numpy()
        order = np.argsort(-lengths, kind="stable")
        bins, blocks = best_fit_decreasing(lengths, order, self.seq_len)
        # Within a block the pieces go in document order: position = block start + the lengths
        # of the block's earlier pieces (a segmented exclusive cumsum after a stable sort by block).
        by_block = np.argsort(bins, kind="stable")
        sorted_lengths = lengths[by_block]
        running = np.cumsum(sorted_lengths) - sorted_lengths
        block_of = bins[by_block]
        first_in_block = np.searchsorted(block_of, np.arange(blocks))
        within = running - running[first_in_block][block_of]
        destination = np.empty_like(lengths)
        destination[by_block] = block_of * self.seq_len + within
        return torch.from_numpy(destination).to(piece_lengths.device), int(blocks)

    def _assemble(self, ids: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor, destination: torch.Tensor,
                  blocks: int, offsets: torch.Tensor) -> dict[str, Any]:
        # (index_select / index_copy_: several times faster than [] indexing on the CPU for 10^6+ ids)
        device, S = ids.device, self.seq_len
        slots, total = blocks * S, int(lengths.sum())
        input_ids = torch.full((slots,), self.pad_id, dtype=ids.dtype, device=device)
        if self.mode == "concat":  # the pieces are the ids in order: one copy
            input_ids[:total] = ids[:total]
            fill = torch.full((blocks,), S, dtype=torch.int64, device=device)
            if blocks:
                fill[-1] = total - (blocks - 1) * S
        else:
            piece = torch.repeat_interleave(torch.arange(lengths.numel(), device=device), lengths)
            inside = torch.arange(total, device=device) - (torch.cumsum(lengths, 0) - lengths).index_select(0, piece)
            source = starts.index_select(0, piece) + inside
            input_ids.index_copy_(0, destination.index_select(0, piece) + inside, ids.index_select(0, source))
            fill = torch.bincount(destination // S, weights=lengths.double(), minlength=blocks).long()
        # Every block is filled from its start: its first ``fill`` slots are used, the rest padding.
        column = torch.arange(S, device=device)
        used = (column[None, :] < fill[:, None]).flatten()
        # Piece starts, block starts, and the start of each block's padding run.
        is_start = torch.zeros(slots + 1, dtype=torch.bool, device=device)
        is_start[destination] = True
        is_start[torch.arange(0, slots, S, device=device)] = True
        padded = fill < S
        is_start[(torch.arange(blocks, device=device) * S + fill)[padded]] = True
        is_start[slots] = True
        cu_seqlens = torch.nonzero(is_start).flatten()
        segment = torch.cumsum(is_start[:slots].long(), 0) - 1
        position_ids = torch.arange(slots, device=device) - cu_seqlens.index_select(0, segment)
        labels = torch.where(used, input_ids.long(), IGNORE_INDEX)
        if self.mask_boundaries:
            if self.mode == "concat":  # a piece that begins a document begins at one of its offsets
                found = torch.searchsorted(offsets, starts).clamp(max=offsets.numel() - 1)
                begins_document = offsets.index_select(0, found) == starts
            else:
                begins_document = torch.ones_like(starts, dtype=torch.bool)
            labels[destination[begins_document]] = IGNORE_INDEX
        seq_lengths = cu_seqlens[1:] - cu_seqlens[:-1]
        self.tokens += total
        self.slots += slots
        shape = (blocks, S)
        return {"input_ids": input_ids.view(shape), "labels": labels.view(shape),
                "position_ids": position_ids.view(shape), "cu_seqlens": cu_seqlens.to(torch.int32),
                "max_seqlen": int(seq_lengths.max()) if seq_lengths.numel() else 0,
                "efficiency": total / slots if slots else 0.0}


class PackingCollate:
    """A ``collate_fn`` that tokenizes a batch of texts (or dicts with ``text_field``) on ``device``
    and packs it with ``packer`` in one call.

    >>> import gputok
    >>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    >>> collate = PackingCollate(tok, Packer(4, mode="best_fit"))
    >>> collate(["hello world", "hello", "world"])["input_ids"].tolist()
    [[1, 5, 10, 2], [1, 5, 2, 0], [1, 10, 2, 0]]
    """

    def __init__(self, tokenizer, packer: Packer, *, text_field: str = "text", add_special_tokens: bool = True,
                 device: torch.device | str | None = None) -> None:
        self.tokenizer, self.packer, self.text_field = tokenizer, packer, text_field
        self.add_special_tokens, self.device = add_special_tokens, device

    def __call__(self, samples: Sequence[str | Mapping[str, Any]]) -> dict[str, Any]:
        texts = [s[self.text_field] for s in samples] if samples and isinstance(samples[0], Mapping) else list(samples)
        out = self.tokenizer(texts, padding=False, add_special_tokens=self.add_special_tokens, device=self.device)
        return self.packer(out["input_ids"], out["row_offsets"])
