"""SentencePiece BPE's ``UNUSED`` pieces: merged through, never produced.

SentencePiece (``bpe_model.cc``) keeps unused pieces among the pieces its merges may form, with
their scores, and when a merge forms one it remembers the pair that formed it; after the merges it
*resegments*: an unused piece in the result is replaced by that pair, each part again if it is
unused too. So the merges run as if the piece were normal, and the piece never comes out.

The pair: the merges inside a piece's characters never depend on the text around it (a pair
crossing the piece's edge never merges, or the piece would not be there), so the pair that forms
an unused piece is the last merge of BPE run on that piece's characters alone: computed once per
unused piece at load (:func:`resegment_table`, a short loop per piece), and resegmentation is one
table gather per batch (:meth:`UnusedPieces.resegment`, numpy). SentencePiece keeps the pair of the
*last* candidate it queued for that string anywhere in the sentence, which is the same pair except
in contrived vocabularies where two splits of one piece both become adjacent in one sentence.

Memory: each unused piece's expansion (the ids it comes out as, and their lengths in characters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..ragged import Ragged
from .bpe import BPE
from .bpe_sentencepiece import UserPiecesBPE


class UnusedPieces:
    """The expansion of every id: itself, or for an unused piece the pieces it resegments into."""

    def __init__(self, bpe: BPE, unused: set[int]) -> None:
        expansions = resegment_table(bpe, unused)
        size = bpe.vocab_size
        lengths = np.ones(size, np.int64)
        for i, parts in expansions.items():
            lengths[i] = len(parts)
        self.offsets = np.zeros(size + 1, np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        self.ids = np.arange(size, dtype=np.int64).repeat(lengths)  # itself where not unused
        self.chars = np.zeros(self.ids.size, np.int64)  # each part's length in characters (0: the whole id)
        for i, parts in expansions.items():
            at = self.offsets[i]
            self.ids[at:at + len(parts)] = [p for p, _ in parts]
            self.chars[at:at + len(parts)] = [c for _, c in parts]
        self.unused = np.zeros(size, bool)
        self.unused[list(expansions)] = True
        # an unused piece left whole comes out as an unknown character: one <unk> with its neighbours'
        self.fuse_unk = -1 if bpe.byte_fallback or bpe.unk_id is None else bpe.unk_id

    def resegment(self, ids: Ragged, ends: Ragged) -> tuple[Ragged, Ragged]:
        """Each word's tokens (and their ends in characters) with every unused piece replaced by
        its expansion."""
        flat = ids.values.cpu().numpy().astype(np.int64, copy=False)
        if not flat.size or not self.unused[flat].any():
            return ids, ends
        device = ids.values.device
        word_ends = ends.values.cpu().numpy()
        counts = self.offsets[flat + 1] - self.offsets[flat]
        starts = np.repeat(self.offsets[flat] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        new_ids = self.ids[starts]
        # a part ends where its token ends less the characters of the parts after it
        chars = self.chars[starts]
        whole = np.repeat(np.add.reduceat(chars, np.r_[0, np.cumsum(counts)[:-1]]), counts)
        new_ends = np.repeat(word_ends, counts) - whole + _running(chars, counts)
        per_token = np.zeros(flat.size + 1, np.int64)
        np.cumsum(counts, out=per_token[1:])
        word_offsets = per_token[ids.offsets.cpu().numpy()]
        if self.fuse_unk >= 0:  # a run of <unk> in a word is one, ending where the run ends
            unk = new_ids == self.fuse_unk
            last_in_word = np.zeros(new_ids.size, bool)
            last_in_word[word_offsets[1:][word_offsets[1:] > word_offsets[:-1]] - 1] = True
            keep = ~(unk & np.r_[unk[1:], False] & ~last_in_word)
            kept = np.zeros(new_ids.size + 1, np.int64)
            np.cumsum(keep, out=kept[1:])
            new_ids, new_ends, word_offsets = new_ids[keep], new_ends[keep], kept[word_offsets]
        offsets = torch.from_numpy(word_offsets).to(device)
        return (Ragged(torch.from_numpy(new_ids).to(ids.values.dtype).to(device), offsets),
                Ragged(torch.from_numpy(new_ends).to(ends.values.dtype).to(device), offsets))


def _running(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The running sum of ``values`` within each group of ``counts`` consecutive entries."""
    total = np.cumsum(values)
    group_start = np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    return total - (total[group_start] - values[group_start])


def resegment_table(bpe: BPE, unused: set[int]) -> dict[int, list[tuple[int, int]]]:
    """``{unused id: (id, characters) of each part it comes out as}``: the two pieces of the last
    merge of BPE on its characters alone (lowest rank first, leftmost among equals), each expanded
    again; one that no merge forms (a single character) comes out as an unknown character does:
    its UTF-8 bytes with byte fallback (the first carries the character), else ``<unk>``."""
    pairs = bpe._pairs_dict
    char_id = {bpe.tokens[i]: i for i in range(bpe.vocab_size) if bpe.tokens[i] and len(bpe.tokens[i]) == 1}
    last_pair: dict[int, tuple[int, int]] = {}
    for piece_id in unused:
        symbols = [char_id[c] for c in bpe.tokens[piece_id]]
        last = None
        while len(symbols) > 1:
            ranked = [(pairs[(a, b)][0], k) for k, (a, b) in enumerate(zip(symbols, symbols[1:])) if (a, b) in pairs]
            if not ranked:
                break
            _, k = min(ranked)
            last = (symbols[k], symbols[k + 1])
            symbols[k:k + 2] = [pairs[last][1]]
        if symbols == [piece_id] and last is not None:
            last_pair[piece_id] = last

    def expand(i: int) -> list[tuple[int, int]]:
        piece = bpe.tokens[i]
        if i in last_pair:
            left, right = last_pair[i]
            return expand(left) + expand(right)
        if i not in unused:
            return [(i, len(piece))]
        if bpe.byte_fallback:
            fallback = bpe._fallback_ids.tolist()
            return [(fallback[b], len(piece) if k == 0 else 0) for k, b in enumerate(piece.encode("utf-8"))]
        return [(bpe.unk_id if bpe.unk_id is not None else i, len(piece))]

    return {i: expand(i) for i in unused}


class ResegmentingBPE:
    """Mixed into a SentencePiece BPE class: encode, then resegment the unused pieces."""

    unused_pieces: UnusedPieces

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        ids, ends = super().encode_words(words)
        return self.unused_pieces.resegment(ids, ends)

    def to_json(self) -> dict[str, Any]:
        raise ValueError("a SentencePiece BPE model with UNUSED pieces cannot be written as a huggingface "
                         "tokenizer.json: huggingface's BPE would produce the unused pieces, which SentencePiece "
                         "never does; keep the .model file")


class UnusedPiecesBPE(ResegmentingBPE, BPE):
    """A SentencePiece BPE with unused pieces."""


class UnusedUserPiecesBPE(ResegmentingBPE, UserPiecesBPE):
    """A SentencePiece BPE with unused and user-defined pieces."""
