"""Decoders: token strings back to text.

``WordPieceDecoder`` follows huggingface ``tokenizers``' WordPiece decoder: pieces after the first
lose their ``##`` prefix and join the previous piece, other tokens are separated by a space, and
``cleanup`` removes the spaces BERT's tokenization put before punctuation and contractions.
"""

from __future__ import annotations

from typing import Any

from . import _components

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


class ByteLevelDecoder:
    """huggingface's ByteLevel decoder: byte-level characters back to bytes, then UTF-8 (with U+FFFD)."""

    type = "ByteLevel"

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self._spec = spec or {"type": self.type, "add_prefix_space": True, "trim_offsets": True, "use_regex": True}

    def __call__(self, tokens: list[str]) -> str:
        from .models.bpe import byte_decoder

        table = byte_decoder()
        return bytes(table[ch] for ch in "".join(tokens)).decode("utf-8", errors="replace")

    def to_json(self) -> dict[str, Any]:
        return self._spec

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ByteLevelDecoder:
        return cls(spec)


DECODERS = {cls.type: cls for cls in (WordPieceDecoder, ByteLevelDecoder)}


def from_json(spec: dict[str, Any] | None):
    return _components.from_json(spec, DECODERS, "decoder")
