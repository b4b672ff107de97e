"""WordLevel: each word is one token, its id in the vocabulary, or the unk token.

huggingface ``tokenizers``' WordLevel model. It runs as a WordPiece match with no continuation
pieces and no length limit (:class:`gputok.models.wordpiece.WordPiece`: the numba kernel on the
CPU, the Triton / torch matcher elsewhere): the longest vocabulary piece that starts a word is the
whole word exactly when the word is a token, and otherwise the match fails and the word becomes
the unk token.
"""

from __future__ import annotations

from typing import Any

from .wordpiece import WordPiece

# No word is longer than this many characters (a WordPiece limit that never applies).
_NO_LIMIT = 2**31 - 1


class WordLevel(WordPiece):
    """huggingface's WordLevel: a word is its token or the unk token (the WordPiece kernel).

    >>> import torch
    >>> from gputok.ragged import Ragged
    >>> model = WordLevel({"<unk>": 0, "hello": 1, "hell": 2}, unk_token="<unk>")
    >>> ids, ends = model.encode_words(Ragged.from_lengths(torch.tensor([ord(c) for c in "hellohelp"]), torch.tensor([5, 4])))
    >>> ids.tolist(), ends.tolist()
    ([[1], [0]], [[5], [4]])
    """

    type = "WordLevel"

    def __init__(self, vocab: dict[str, int], *, unk_token: str = "<unk>") -> None:
        if unk_token not in vocab:
            raise ValueError(f"the WordLevel unk token {unk_token!r} is not in the vocabulary ({len(vocab)} tokens); "
                             "huggingface fails on the first word outside the vocabulary: add it, or name one that is")
        super().__init__(vocab, unk_token=unk_token, continuing_subword_prefix="", max_input_chars_per_word=_NO_LIMIT,
                         continuations={})

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "vocab": self.vocab, "unk_token": self.unk_token}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> WordLevel:
        vocab = spec.get("vocab")
        if not isinstance(vocab, dict):
            raise ValueError("WordLevel model in tokenizer.json needs 'vocab': {token: id}")
        return cls(vocab, unk_token=spec.get("unk_token", "<unk>"))
