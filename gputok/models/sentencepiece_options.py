"""SentencePiece options read around the model: the normalizer of a ``.model`` file, with
``treat_whitespace_as_suffix`` (the dummy ``▁`` goes after the text instead of before it).

SentencePiece's normalizer (``normalizer.cc``) appends the dummy whitespace when its trainer spec
says ``treat_whitespace_as_suffix`` (and ``add_dummy_prefix`` is on), after the whitespace rules;
its decode then keeps that space (it drops the leading one of a prefix). Pieces then end with ``▁``
(``"the▁"``), so the models see whole texts (no piece starts at a ``▁``): correct, and slower.
The other trainer options (``split_digits``, ``split_by_unicode_script``, ``split_by_number``,
``split_by_whitespace``, ``allow_whitespace_only_pieces``) only shape the vocabulary; the models
encode with whatever pieces it holds. Such a tokenizer cannot be saved as a tokenizer.json
(huggingface has no normalizer that appends).
"""

from __future__ import annotations

from typing import Any

import torch

from ..ragged import Ragged
from ..sentencepiece_model import SentencePieceModel

ESCAPED_SPACE = "\u2581"


def sentencepiece_normalizer(model: SentencePieceModel):
    """The normalizer SentencePiece runs for ``model``: charsmap, whitespace rules, dummy ``▁``;
    user pieces written in the text copied as they are where the normalizer would change one
    (:class:`gputok.models.user_pieces.UserPieceNormalizer`)."""
    from ..normalizers import SentencePieceNormalizer
    from ..sentencepiece_model import USER_DEFINED
    from .user_pieces import UserPieceNormalizer, UserPieces, keeps_user_pieces

    spec = model.normalizer
    suffix = model.treat_whitespace_as_suffix and spec.add_dummy_prefix
    normalizer = SentencePieceNormalizer(spec.precompiled_charsmap, add_dummy_prefix=spec.add_dummy_prefix and not suffix,
                                         remove_extra_whitespaces=spec.remove_extra_whitespaces,
                                         escape_whitespaces=spec.escape_whitespaces)
    user = {p.piece: i for i, p in enumerate(model.pieces) if p.type == USER_DEFINED and p.piece}
    if user and not keeps_user_pieces(normalizer, user):  # SentencePiece copies them as written
        normalizer = UserPieceNormalizer(normalizer, UserPieces(user))
    return DummySuffix(normalizer, ESCAPED_SPACE if spec.escape_whitespaces else " ") if suffix else normalizer


class DummySuffix:
    """A normalizer (``inner``), then ``char`` after each non-empty text.

    >>> from gputok.normalizers import SentencePieceNormalizer
    >>> out, src = DummySuffix(SentencePieceNormalizer(b"", add_dummy_prefix=False), "▁")(
    ...     Ragged.from_lengths(torch.tensor([97, 32, 98, 32]), torch.tensor([4])))
    >>> "".join(map(chr, out.values.tolist())), src.tolist()
    ('a▁b▁', [0, 1, 2, 2])
    """

    type = "SentencePieceSuffix"

    def __init__(self, inner, char: str) -> None:
        self.inner, self.char = inner, char

    def __call__(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        from ..kernels.sentencepiece_whitespace import append_to_nonempty

        out, source = self.inner(text)
        device = out.values.device
        values, offsets, source = append_to_nonempty(out.values.cpu().numpy(), out.offsets.cpu().numpy(),
                                                     source.cpu().numpy(), ord(self.char))
        return (Ragged(torch.from_numpy(values).to(device), torch.from_numpy(offsets).to(device)),
                torch.from_numpy(source).to(device))

    def to_json(self) -> dict[str, Any]:
        raise ValueError("a SentencePiece model with treat_whitespace_as_suffix=true cannot be saved as a "
                         "tokenizer.json: huggingface has no normalizer that appends the '▁'; keep the .model file")
