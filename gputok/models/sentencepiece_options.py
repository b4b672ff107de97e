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

import numpy as np
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
    """A normalizer (``inner``), then ``char`` after each non-empty text, and after an emptied one
    where SentencePiece still writes it (``kernels/sentencepiece_whitespace.dummy_sources_when_empty``:
    a text of spaces with a user piece "  " in it, or of characters the charsmap deletes).

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
        from .user_pieces import UserPieceNormalizer, UserPieces

        inner = self.inner
        pieces = inner.pieces if isinstance(inner, UserPieceNormalizer) else UserPieces({})
        base = inner.inner if isinstance(inner, UserPieceNormalizer) else inner
        return with_dummy(base, pieces, text, *inner(text), self.char, after_nonempty=True)

    def to_json(self) -> dict[str, Any]:
        raise ValueError("a SentencePiece model with treat_whitespace_as_suffix=true cannot be saved as a "
                         "tokenizer.json: huggingface has no normalizer that appends the '▁'; keep the .model file")


def with_dummy(normalizer, pieces, text: Ragged, out: Ragged, source: torch.Tensor, char: str, *,
               after_nonempty: bool) -> tuple[Ragged, torch.Tensor]:
    """``out`` (with its ``source``), what SentencePiece's ``normalizer`` (a ``SentencePieceNormalizer``
    with user ``pieces``, a ``UserPieces``) kept of ``text``, with the dummy ``char`` after each
    non-empty text if ``after_nonempty`` (a dummy suffix), and as the whole of each text it kept
    nothing of but still writes the dummy to (``kernels/sentencepiece_whitespace.py``'s
    ``dummy_sources_when_empty``). Those texts (rare) are rewritten again, to tell."""
    from ..kernels.sentencepiece_whitespace import add_dummy, dummy_sources_when_empty
    from .user_pieces import rewrite

    kept_offsets = out.offsets.cpu().numpy()
    raw_offsets = text.offsets.cpu().numpy()
    raw_lengths = np.diff(raw_offsets)
    judged = (np.diff(kept_offsets) == 0) & (raw_lengths > 0)
    sources = np.full(raw_lengths.size, -1, np.int64)
    if judged.any():
        values = text.values.cpu().numpy()[np.repeat(judged, raw_lengths)]
        offsets = np.concatenate([[0], np.cumsum(raw_lengths[judged])]).astype(np.int64)
        rewritten, rewritten_offsets, unit = rewrite(normalizer, pieces, values, offsets)
        found = dummy_sources_when_empty(offsets, rewritten, rewritten_offsets, unit, np.zeros_like(offsets),
                                         normalizer.remove_extra_whitespaces)
        sources[judged] = np.where(found >= 0, found + raw_offsets[:-1][judged], -1)
    elif not after_nonempty:
        return out, source
    device = out.values.device
    values, offsets, source = add_dummy(out.values.cpu().numpy(), kept_offsets, source.cpu().numpy(), ord(char), sources,
                                        after_nonempty)
    return (Ragged(torch.from_numpy(values).to(device), torch.from_numpy(offsets).to(device)),
            torch.from_numpy(source).to(device))
