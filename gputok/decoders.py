"""Decoders: token strings back to text.

``WordPieceDecoder`` follows huggingface ``tokenizers``' WordPiece decoder: pieces after the first
lose their ``##`` prefix and join the previous piece, other tokens are separated by a space, and
``cleanup`` removes the spaces BERT's tokenization put before punctuation and contractions.
"""

from __future__ import annotations

from typing import Any

_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class WordPieceDecoder:
    """
    >>> WordPieceDecoder()(["hello", "##s", "world", "!"])
    'hellos world!'
    """

    type = "WordPiece"

    def __init__(self, *, prefix: str = "##", cleanup: bool = True) -> None:
        self.prefix, self.cleanup = prefix, cleanup

    def __call__(self, tokens: list[str]) -> str:
        pieces = []
        for i, token in enumerate(tokens):
            if i and token.startswith(self.prefix):
                token = token[len(self.prefix):]
            elif i:
                token = " " + token
            if self.cleanup:
                for dirty, clean in _CLEANUP:
                    token = token.replace(dirty, clean)
            pieces.append(token)
        return "".join(pieces)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "prefix": self.prefix, "cleanup": self.cleanup}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> WordPieceDecoder:
        return cls(prefix=spec.get("prefix", "##"), cleanup=spec.get("cleanup", True))


DECODERS = {cls.type: cls for cls in (WordPieceDecoder,)}


def from_json(spec: dict[str, Any] | None):
    if spec is None:
        return None
    kind = spec.get("type")
    if kind not in DECODERS:
        raise ValueError(f"unknown decoder type {kind!r}; known types: {sorted(DECODERS)}")
    return DECODERS[kind].from_json(spec)
