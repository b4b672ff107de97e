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
    """huggingface's WordPiece decoder: ``##`` pieces join the one before, others follow a space; ``cleanup``.

    >>> WordPieceDecoder()(["hello", "##s", "world", "!"])
    'hellos world!'
    """

    type = "WordPiece"

    def __init__(self, *, prefix: str = "##", cleanup: bool = True) -> None:
        self.prefix, self.cleanup = prefix, cleanup

    def __call__(self, tokens: list[str]) -> str:
        return "".join(self.decode_chain(tokens))

    def decode_chain(self, tokens: list[str]) -> list[str]:
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
        return pieces

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
        # a token with a character outside the byte alphabet (an added token) stands for its UTF-8
        data = b"".join(bytes(table[ch] for ch in token) if all(ch in table for ch in token) else token.encode()
                        for token in tokens)
        return data.decode("utf-8", errors="replace")

    def to_json(self) -> dict[str, Any]:
        return self._spec

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ByteLevelDecoder:
        return cls(spec)


class _Chain:
    """A decoder step as huggingface chains them: ``decode_chain`` maps token strings to strings;
    calling it decodes (the chain's strings joined)."""

    type: str

    def __call__(self, tokens: list[str]) -> str:
        return "".join(self.decode_chain(tokens))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]):
        return cls()


class MetaspaceDecoder(_Chain):
    """huggingface's Metaspace decoder: ``▁`` back to spaces; in the first token, with a prepend
    scheme other than "never", every ``▁`` is dropped.

    >>> MetaspaceDecoder()(["▁Hello", "▁world"])
    'Hello world'
    """

    type = "Metaspace"

    def __init__(self, *, replacement: str = "\u2581", prepend_scheme: str = "always", split: bool = True) -> None:
        self.replacement, self.prepend_scheme, self.split = replacement, prepend_scheme, split

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [t.replace(self.replacement, "" if i == 0 and self.prepend_scheme != "never" else " ")
                for i, t in enumerate(tokens)]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "replacement": self.replacement, "prepend_scheme": self.prepend_scheme,
                "split": self.split}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> MetaspaceDecoder:
        scheme = spec.get("prepend_scheme") or ("always" if spec.get("add_prefix_space", True) else "never")
        return cls(replacement=spec.get("replacement", spec.get("str_rep", "\u2581")), prepend_scheme=scheme,
                   split=spec.get("split", True))


class BPEDecoder(_Chain):
    """huggingface's BPEDecoder: the end-of-word ``suffix`` becomes a space (nothing in the last token).

    >>> BPEDecoder()(["hel", "lo</w>", "world</w>"])
    'hello world'
    """

    type = "BPEDecoder"

    def __init__(self, *, suffix: str = "</w>") -> None:
        self.suffix = suffix

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [t.replace(self.suffix, "" if i == len(tokens) - 1 else " ") for i, t in enumerate(tokens)]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "suffix": self.suffix}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> BPEDecoder:
        return cls(suffix=spec.get("suffix", "</w>"))


class ByteFallback(_Chain):
    """huggingface's ByteFallback: runs of ``<0xNN>`` tokens become their bytes as UTF-8; a run that
    is not valid UTF-8 becomes one U+FFFD per token.

    >>> ByteFallback().decode_chain(["a", "<0xE2>", "<0x82>", "<0xAC>", "b", "<0xE2>", "<0x82>"])
    ['a', '€', 'b', '�', '�']
    """

    type = "ByteFallback"

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run = bytearray()

        def flush() -> None:
            if run:
                try:
                    out.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend("\ufffd" * len(run))
                run.clear()

        for token in tokens:
            byte = _byte_token(token)
            if byte is None:
                flush()
                out.append(token)
            else:
                run.append(byte)
        flush()
        return out


def _byte_token(token: str) -> int | None:
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return int(token[3:5], 16)
        except ValueError:
            return None
    return None


class Fuse(_Chain):
    """huggingface's Fuse: all tokens become one string."""

    type = "Fuse"

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


class StripDecoder(_Chain):
    """huggingface's Strip decoder: up to ``start`` leading and ``stop`` trailing ``content``
    characters off each token.

    >>> StripDecoder(content=" ", start=1, stop=0).decode_chain(["  a ", "b"])
    [' a ', 'b']
    """

    type = "Strip"

    def __init__(self, *, content: str = " ", start: int = 0, stop: int = 0) -> None:
        self.content, self.start, self.stop = content, start, stop

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            begin = 0
            while begin < min(self.start, len(token)) and token[begin] == self.content:
                begin += 1
            end = len(token)
            while len(token) - end < self.stop and end > begin and token[end - 1] == self.content:
                end -= 1
            out.append(token[begin:end])
        return out

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "content": self.content, "start": self.start, "stop": self.stop}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> StripDecoder:
        return cls(content=spec.get("content", " "), start=spec.get("start", 0), stop=spec.get("stop", 0))


class ReplaceDecoder(_Chain):
    """huggingface's Replace decoder: ``pattern`` ({"String": s} or {"Regex": r}) -> ``content`` in each token."""

    type = "Replace"

    def __init__(self, pattern: dict[str, str], content: str) -> None:
        import regex

        from . import regex_split

        if not isinstance(pattern, dict) or len(pattern) != 1 or not set(pattern) <= {"String", "Regex"}:
            raise ValueError(f"Replace pattern {pattern!r}: expected {{'String': ...}} or {{'Regex': ...}}")
        self.pattern, self.content = pattern, content
        try:
            self._regex = (regex.compile(regex.escape(pattern["String"])) if "String" in pattern
                           else regex_split.compile_pattern(pattern["Regex"]))
        except regex.error as e:
            raise ValueError(f"Replace decoder: pattern {pattern['Regex']!r} is not a valid regex ({e})") from None

    def decode_chain(self, tokens: list[str]) -> list[str]:
        from . import regex_split

        # an empty token stays empty, as huggingface leaves it ('$' matches in it)
        return [regex_split.replace_matches(self._regex, t, self.content) if t else t for t in tokens]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "pattern": self.pattern, "content": self.content}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ReplaceDecoder:
        return cls(spec["pattern"], spec["content"])


class CTC(_Chain):
    """huggingface's CTC decoder: repeated tokens collapse to one, ``pad_token`` is dropped, and
    with ``cleanup`` the WordPiece cleanup runs and ``word_delimiter_token`` becomes a space.

    >>> CTC()(["<pad>", "h", "h", "e", "|", "|", "y", "<pad>"])
    'he y'
    """

    type = "CTC"

    def __init__(self, *, pad_token: str = "<pad>", word_delimiter_token: str = "|", cleanup: bool = True) -> None:
        self.pad_token, self.word_delimiter_token, self.cleanup = pad_token, word_delimiter_token, cleanup

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i and token == tokens[i - 1]:
                continue
            token = token.replace(self.pad_token, "")
            if self.cleanup:
                for dirty, clean in _CLEANUP:
                    token = token.replace(dirty, clean)
                token = token.replace(self.word_delimiter_token, " ")
            if token:
                out.append(token)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "pad_token": self.pad_token, "word_delimiter_token": self.word_delimiter_token,
                "cleanup": self.cleanup}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> CTC:
        return cls(pad_token=spec.get("pad_token", "<pad>"), word_delimiter_token=spec.get("word_delimiter_token", "|"),
                   cleanup=spec.get("cleanup", True))


class SequenceDecoder(_Chain):
    """huggingface's Sequence decoder: each decoder's chain step in turn.

    >>> SequenceDecoder([ReplaceDecoder({"String": "▁"}, " "), ByteFallback(), Fuse(),
    ...                  StripDecoder(content=" ", start=1)])(["▁Hi", "<0x21>"])
    'Hi!'
    """

    type = "Sequence"

    def __init__(self, decoders: list[Any]) -> None:
        self.decoders = decoders

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for step in self.decoders:
            chain = getattr(step, "decode_chain", None)
            tokens = chain(tokens) if chain is not None else [step(tokens)]
        return tokens

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "decoders": [d.to_json() for d in self.decoders]}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> SequenceDecoder:
        return cls([from_json(d) for d in spec.get("decoders") or []])


DECODERS = {cls.type: cls for cls in (WordPieceDecoder, ByteLevelDecoder, MetaspaceDecoder, BPEDecoder, ByteFallback,
                                      Fuse, StripDecoder, ReplaceDecoder, SequenceDecoder, CTC)}


def from_json(spec: dict[str, Any] | None):
    return _components.from_json(spec, DECODERS, "decoder")
