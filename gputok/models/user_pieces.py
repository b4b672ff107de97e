"""SentencePiece BPE's ``USER_DEFINED`` pieces: matched whole in the normalized text before the merges.

SentencePiece's BPE (``bpe_model.cc``) takes, from the start of the normalized text, the longest
user-defined piece at each position (its ``PrefixMatcher``) as one frozen symbol that never
merges, and merges the text between. :class:`UserPieces` holds the pieces as a table for the
numba kernels of ``kernels/user_pieces_numba.py``; :class:`UserPieceSplit` wraps a pre-tokenizer
so that every match is a word of its own (and no other word crosses one); the model then gives
each such word its piece's id (:meth:`UserPieces.force`). (SentencePiece's Unigram instead puts
user pieces in its lattice, scored 0.1 per UTF-8 byte after the first: :mod:`gputok.models.unigram`.)

A word that equals a user piece is always a match (the scan would have taken it at its start),
so the model finds the matches again from the words' characters (:meth:`UserPieces.ids_of`).

SentencePiece's normalizer also copies a user piece written in the *raw* text as it is (its
``NormalizePrefix`` looks user pieces up before the charsmap): :class:`UserPieceNormalizer` does
the same where some piece is one the normalizer would change (:func:`keeps_user_pieces`: a space,
or a character the charsmap rewrites, such as ``▁`` -> space, ``ＡＢ`` -> ``AB`` or ``ﬁ`` -> ``fi``
under nmt_nfkc). Where none is (``<tool>``, ``12``) the normalizer alone gives the same text and
the whole-text kernels keep running.
Memory: the table, 4 bytes per codepoint of the pieces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from ..pre_tokenizers import Words
from ..ragged import Ragged


class UserPieces:
    """The user-defined pieces (``{piece: id}``) as a table sorted by first codepoint, longer first.

    >>> u = UserPieces({"<a>": 7, "<ab>": 8})
    >>> u.ids_of(torch.tensor([ord(c) for c in "<ab>x<a>"]), torch.tensor([0, 4, 5]), torch.tensor([4, 5, 8])).tolist()
    [8, -1, 7]
    """

    def __init__(self, pieces: dict[str, int]) -> None:
        order = sorted(pieces, key=lambda p: (ord(p[0]), -len(p), p))
        self.pieces = {p: pieces[p] for p in order}
        codes = [np.array([ord(c) for c in p], dtype=np.int64) for p in order]
        self.firsts = np.array([c[0] for c in codes], dtype=np.int64)
        self.piece_offsets = np.cumsum([0] + [len(c) for c in codes]).astype(np.int64)
        self.piece_values = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
        self.piece_ids = np.array([pieces[p] for p in order], dtype=np.int64)

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.firsts, self.piece_offsets, self.piece_values

    def cut(self, text: Ragged, words: Words) -> Words:
        """``words`` of ``text`` with every user-piece match a word of its own."""
        from ..kernels.user_pieces_numba import cut_at_user_pieces

        device = text.values.device
        starts, ends, offsets = cut_at_user_pieces(
            text.values.cpu().numpy().astype(np.int64), text.offsets.cpu().numpy(), words.starts.cpu().numpy(),
            words.ends.cpu().numpy(), words.text_offsets.cpu().numpy(), *self._table())
        return Words(*(torch.from_numpy(a).to(device) for a in (starts, ends, offsets)))

    def ids_of(self, values: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> np.ndarray:
        """The id of the user piece each word ``values[starts[i]:ends[i]]`` is, else -1 (int64 numpy)."""
        from ..kernels.user_pieces_numba import user_piece_ids

        return user_piece_ids(values.cpu().numpy().astype(np.int64), starts.cpu().numpy(), ends.cpu().numpy(),
                              *self._table(), self.piece_ids)

    @staticmethod
    def force(piece_ids: Ragged, piece_ends: Ragged, forced: np.ndarray, lengths: np.ndarray) -> tuple[Ragged, Ragged]:
        """Rows of tokens with every row whose ``forced`` id is >= 0 replaced by that one token."""
        from ..kernels.user_pieces_numba import force_rows

        device = piece_ids.values.device
        ids, ends, offsets = force_rows(piece_ids.values.cpu().numpy(), piece_ends.values.cpu().numpy(),
                                        piece_ids.offsets.cpu().numpy(), forced, lengths)
        offsets_t = torch.from_numpy(offsets).to(device)
        return Ragged(torch.from_numpy(ids).to(device), offsets_t), Ragged(torch.from_numpy(ends).to(device), offsets_t)


def keeps_user_pieces(normalizer, pieces: Iterable[str]) -> bool:
    """Whether SentencePiece's ``normalizer`` (a ``SentencePieceNormalizer``) leaves each of
    ``pieces`` as it is wherever it stands, so that copying it unchanged (SentencePiece's rule)
    changes nothing: no space in it (the whitespace rules act on spaces), each character its own
    one-codepoint charsmap rewrite, and no longer rule can start at one of its characters and go
    on past it (into the next character of the piece, or, from its last, into the text after it:
    under nmt_nfkc a piece ending in a letter, which a combining mark after it would compose with).

    >>> from gputok.normalizers import SentencePieceNormalizer
    >>> keeps_user_pieces(SentencePieceNormalizer(b""), ["<tool>", "▁the▁"]), keeps_user_pieces(SentencePieceNormalizer(b""), ["x y"])
    (True, False)
    """
    from ..kernels.charsmap_numba import CODEPOINT, CONTINUE, SEVERAL, START

    precompiled = normalizer.precompiled
    direct = None if precompiled is None else precompiled.charsmap.direct.numpy()
    for piece in pieces:
        if " " in piece:
            return False
        if direct is None:
            continue
        rules = [int(direct[ord(c)]) for c in piece] + [CONTINUE]  # (any character may follow)
        for c, rule, following in zip(piece, rules, rules[1:]):
            if rule & SEVERAL or rule & CODEPOINT != ord(c) or (rule & START and following & CONTINUE):
                return False
    return True


class UserPieceNormalizer:
    """SentencePiece's normalizer (``inner``, a ``SentencePieceNormalizer``) that copies the user
    pieces written in the raw text as they are, as SentencePiece does: the charsmap's walk with
    user pieces first (``kernels/charsmap_numba.rewrite_walk``), then the whitespace rules (a
    copied piece is one unit: spaces inside it are kept, those it starts with go after a space). Runs
    on the CPU (a copy of text on another device; the CUDA pipeline does not take such a
    tokenizer); saved as ``inner``.

    >>> from gputok.normalizers import SentencePieceNormalizer
    >>> n = UserPieceNormalizer(SentencePieceNormalizer(b""), UserPieces({"x  y": 3}))
    >>> out, _ = n(Ragged.from_lengths(torch.tensor([ord(c) for c in " x  y  x  y"]), torch.tensor([11])))
    >>> "".join(map(chr, out.values.tolist()))
    '▁x▁▁y▁x▁▁y'
    """

    def __init__(self, inner, pieces: UserPieces) -> None:
        self.inner, self.pieces = inner, pieces

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        from ..kernels.sentencepiece_whitespace import whitespace_rules_numba

        inner, device = self.inner, text.values.device
        out, out_offsets, unit = rewrite(inner, self.pieces, text.values.cpu().numpy(), text.offsets.cpu().numpy())
        values, offsets, source = whitespace_rules_numba(out, out_offsets, unit, inner.add_dummy_prefix,
                                                         inner.remove_extra_whitespaces, inner.escape_whitespaces)
        kept = (Ragged(torch.from_numpy(values).to(device), torch.from_numpy(offsets).to(device)),
                torch.from_numpy(source).to(device))
        return inner.with_emptied_prefix(text, *kept, self.pieces)

    def __getattr__(self, name: str) -> Any:  # add_dummy_prefix, precompiled, ...: the inner normalizer's
        if name in ("inner", "pieces"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def to_json(self) -> dict[str, Any]:
        return self.inner.to_json()


def rewrite(normalizer, pieces: UserPieces, values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """The charsmap rewrite of SentencePiece's ``normalizer`` (a ``SentencePieceNormalizer``) with
    ``pieces`` copied whole (none: an empty table), before the whitespace rules: the rewritten
    codepoints, their offsets and each one's unit start (``kernels/charsmap_numba.rewrite_walk``)."""
    from .._whole_cells import NO_CHARSMAP
    from ..kernels.charsmap_numba import rewrite_walk

    charsmap = None if normalizer.precompiled is None else normalizer.precompiled.charsmap
    rules = NO_CHARSMAP if charsmap is None else charsmap.numpy_rules()
    return rewrite_walk(values, offsets, charsmap is not None, *rules, *pieces._table())


class UserPieceSplit:
    """A pre-tokenizer (``inner``) whose words are cut at the user-piece matches, each match a
    word; saved as ``inner`` (huggingface matches such pieces as added tokens instead)."""

    def __init__(self, inner, pieces: UserPieces) -> None:
        self.inner, self.pieces = inner, pieces
        self.rewrite = getattr(inner, "rewrite", None)

    def __call__(self, text: Ragged) -> Words:
        return self.pieces.cut(text, self.inner(text))

    def __getattr__(self, name: str) -> Any:  # split, char, ...: the inner pre-tokenizer's
        if name in ("inner", "pieces"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def to_json(self) -> dict[str, Any] | None:
        return self.inner.to_json()
