"""SentencePiece BPE models (``.model`` files of type BPE) as a character-level :class:`BPE`.

SentencePiece's BPE (``bpe_model.cc``) starts from the characters of the whole normalized text and
repeatedly merges the adjacent pair whose concatenation is a piece with the highest score, the
leftmost on ties; a character that is not a piece becomes its UTF-8 bytes as ``<0xNN>`` pieces
(byte fallback), or ``<unk>`` (a run of them one ``<unk>``). That is huggingface's BPE with one
merge per way of cutting each piece in two pieces, ranked by the piece's score: equal scores
share a rank, and the words where that could matter merge one pair at a time, leftmost first
(``tie_chars``). The normalizer (charsmap, whitespace rules, ``▁``) and decoder are the ones of the
Unigram reader (:mod:`gputok.models.unigram`).

Words. SentencePiece does not pre-tokenize, but no merge can cross a point where no piece does:
when no piece holds ``▁`` right after another character, the text is cut before each run of
``▁`` (:class:`MergeSafeSplit`), which gives the same ids as one word per text and lets the
batch deduplicate words. Otherwise each text is one word (correct, and slower).

User-defined pieces are matched whole before the merges (:mod:`gputok.models.user_pieces`: the
word split cuts each match out as a word, whose id is its piece's). ``UNUSED`` pieces merge as
normal ones and are split back into the pair that made them (:mod:`gputok.models.unused_pieces`).
Left out: pieces made of characters that are not pieces themselves (SentencePiece can still form
those); such models raise ValueError.
Memory: the merge table, ~4 hash slots of 16 bytes per (piece, cut) pair.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import _dispatch
from ..kernels import word_split_numba
from ..pre_tokenizers import Words, _words, whole_texts, words_from_starts
from ..ragged import Ragged
from ..sentencepiece_model import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, SentencePieceModel
from .bpe import BPE
from .user_pieces import UserPieces, UserPieceSplit

ESCAPED_SPACE = "\u2581"


def from_sentencepiece_model(model: SentencePieceModel, *, source: str = "<model>") -> BPE:
    """The :class:`BPE` of a SentencePiece BPE model (``sentencepiece_model.read_model``)."""
    kinds = {p.type for p in model.pieces} - {NORMAL, UNKNOWN, CONTROL, BYTE, USER_DEFINED, UNUSED}
    if kinds:
        raise ValueError(f"{source}: SentencePiece BPE models with piece types {sorted(kinds)} are not supported; "
                         "supported piece types: NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE")
    tokens = [p.piece for p in model.pieces]
    # unused pieces merge as normal ones and are resegmented after (gputok.models.unused_pieces)
    normal = {p.piece: i for i, p in enumerate(model.pieces) if p.type in (NORMAL, UNUSED)}
    stray = sorted({c for piece in normal for c in piece if c not in normal})
    if stray:
        raise ValueError(f"{source}: pieces use characters that are not pieces themselves ({stray[:8]}); "
                         "gputok's BPE needs every character of a piece in the vocabulary")
    # Higher score first; equal scores share a rank (SentencePiece takes the leftmost of those).
    scores = sorted({model.pieces[i].score for i in normal.values()}, reverse=True)
    rank_of = {s: r for r, s in enumerate(scores)}
    merges = {}
    for piece, merged in normal.items():
        rank = rank_of[model.pieces[merged].score]
        for cut in range(1, len(piece)):
            left, right = normal.get(piece[:cut]), normal.get(piece[cut:])
            if left is not None and right is not None:
                merges[(left, right)] = (rank, merged)
    by_score: dict[float, list[str]] = {}
    for piece, i in normal.items():
        by_score.setdefault(model.pieces[i].score, []).append(piece)
    tied = [p for group in by_score.values() if len(group) > 1 for p in group if len(p) > 1]
    unk = [p.piece for p in model.pieces if p.type == UNKNOWN]
    user = {p.piece: i for i, p in enumerate(model.pieces) if p.type == USER_DEFINED and p.piece}
    unused = {i for i, p in enumerate(model.pieces) if p.type == UNUSED}
    kind = UserPiecesBPE if user else BPE
    if unused:
        from .unused_pieces import UnusedPiecesBPE, UnusedUserPiecesBPE

        kind = UnusedUserPiecesBPE if user else UnusedPiecesBPE
    bpe = kind(None, merges, tokens=tokens, unk_token=unk[0] if unk else None, fuse_unk=True,
              byte_fallback=model.byte_fallback, ignore_merges=False, tie_chars="".join(sorted(set("".join(tied)))))
    bpe._merges_to_save = _huggingface_ranks  # only a saved file needs them
    if user:
        bpe.user_pieces = UserPieces(user)
    if unused:
        from .unused_pieces import UnusedPieces

        bpe.unused_pieces = UnusedPieces(bpe, unused)
    return bpe


class UserPiecesBPE(BPE):
    """A SentencePiece BPE with user-defined pieces: a word that is one (the word split made each
    match a word) is that piece, whatever the merges would make of it."""

    user_pieces: UserPieces

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        ids, ends = super().encode_words(words)
        starts, stops = words.offsets[:-1], words.offsets[1:]
        forced = self.user_pieces.ids_of(words.values, starts, stops)
        if not (forced >= 0).any():
            return ids, ends
        return UserPieces.force(ids, ends, forced, (stops - starts).cpu().numpy())


def _huggingface_ranks(bpe: BPE) -> dict[tuple[int, int], tuple[int, int]]:
    """The merges of a SentencePiece BPE ranked apart, as huggingface needs them: within a score,
    longer pieces first (that takes runs of "▁" from the left, as SentencePiece's leftmost rule
    does), then by id."""
    order = sorted(bpe._pairs_dict.items(), key=lambda kv: (kv[1][0], -len(bpe.tokens[kv[1][1]]), kv[1][1], kv[0]))
    return {pair: (rank, merged) for rank, (pair, (_, merged)) in enumerate(order)}


def sentencepiece_tokenizer(model: SentencePieceModel, tokenizer_class, *, source: str = "<model>"):
    """A ``tokenizer_class`` (gputok.Tokenizer) for a BPE SentencePieceModel: SentencePiece's
    normalizer, the merge-safe word split, the BPE above, SentencePiece's decoder. No special
    tokens are added, as SentencePiece's ``encode`` adds none; control pieces keep their ids."""
    from .sentencepiece_options import sentencepiece_normalizer
    from .unigram import SentencePieceDecoder

    bpe = from_sentencepiece_model(model, source=source)
    spec = model.normalizer
    normalizer = sentencepiece_normalizer(model)
    user = frozenset(bpe.user_pieces.pieces) if isinstance(bpe, UserPiecesBPE) else frozenset()
    pre_tokenizer = merge_safe_split(bpe, ESCAPED_SPACE if spec.escape_whitespaces else " ", matched_whole=user)
    if isinstance(bpe, UserPiecesBPE):
        pre_tokenizer = UserPieceSplit(pre_tokenizer, bpe.user_pieces)
    return tokenizer_class(bpe, normalizer=normalizer, pre_tokenizer=pre_tokenizer,
                           decoder=SentencePieceDecoder(add_dummy_prefix=spec.add_dummy_prefix,
                                                        remove_extra_whitespaces=spec.remove_extra_whitespaces,
                                                        unk_piece=bpe.unk_token, unk_surface=model.unk_surface,
                                                        control=frozenset(p.piece for p in model.pieces if p.type == CONTROL)))


def merge_safe_split(bpe: BPE, char: str = ESCAPED_SPACE, *, matched_whole: frozenset[str] = frozenset()) -> MergeSafeSplit:
    """The word split for a BPE that sees whole texts: before runs of ``char`` if no token of
    ``bpe`` holds ``char`` right after another character, else none (each text one word).
    Never with a ``continuing_subword_prefix`` or ``end_of_word_suffix`` (a cut makes the
    characters beside it a word's first or last, which take them), nor when ``fuse_unk`` joins
    an unknown ``char`` to the unknown character before it into one ``<unk>``. ``matched_whole``:
    tokens no merge forms (user-defined pieces, cut out before the merges)."""
    crossing = any(t is not None and t not in matched_whole and any(a != char and b == char for a, b in zip(t, t[1:]))
                   for t in bpe.tokens)
    edges_marked = bool(bpe.continuing_subword_prefix or bpe.end_of_word_suffix)
    unknown_fused = bpe.fuse_unk and char not in bpe.vocab
    return MergeSafeSplit(None if crossing or edges_marked or unknown_fused else char)


class MergeSafeSplit:
    """Words ``c*[^c]*`` (a run of ``char`` and what follows it), or each text one word (``char``
    None). Stands for *no* pre-tokenizer, so it is saved as none (``to_json`` gives None).

    >>> w = MergeSafeSplit("▁")(Ragged.from_lengths(torch.tensor([0x2581, 97, 0x2581, 0x2581, 98, 99]), torch.tensor([4, 2])))
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 4], [2, 4, 6], [0, 2, 3])
    """

    type = "MergeSafeSplit"

    def __init__(self, char: str | None) -> None:
        self.char = char

    def __call__(self, text: Ragged) -> Words:
        if _dispatch.on_cpu_kernels(text.device):
            if self.char is None:
                return whole_texts(text)
            return _words(*word_split_numba.split_before_runs(text.values.numpy(), text.offsets.numpy(),
                                                              ord(self.char)))
        n = text.values.numel()
        device = text.device
        starts_word = torch.zeros(n, dtype=torch.bool, device=device)
        nonempty = text.offsets[:-1] < text.offsets[1:]
        starts_word[text.offsets[:-1][nonempty]] = True
        if self.char is not None and n:
            is_char = text.values == ord(self.char)
            starts_word[1:] |= is_char[1:] & ~is_char[:-1]
        return words_from_starts(text, starts_word)

    def to_json(self) -> dict[str, Any] | None:
        return None
