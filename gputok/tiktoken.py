"""A drop-in for tiktoken: ``gputok.tiktoken.Encoding`` has tiktoken's constructor, methods and
semantics, and encodes with gputok's kernels (the split rules of :mod:`gputok.regex_split`, the
byte-level BPE of :mod:`gputok.models.bpe`, the decode kernel), so switching is one import::

    import gputok.tiktoken as tiktoken
    enc = tiktoken.get_encoding("cl100k_base")

What follows tiktoken 0.14 exactly: the ids (any ``pat_str``; gpt2/r50k/p50k, cl100k and o200k
patterns run as exact kernels, any other regex through the ``regex`` module); special tokens
(``allowed_special`` / ``disallowed_special``, "all", a token in both sets raises); a ``str``
holding surrogate pairs is read as the codepoints they encode, lone surrogates as U+FFFD (in the
ingest kernel); ``_encode_bytes`` of bytes that are not UTF-8 (tiktoken's rule: the valid prefix
is encoded as text, its last piece re-encoded with the raw bytes after it as one BPE piece);
``decode(errors=...)``, the byte-level decodes and ``decode_with_offsets``; KeyError for ids and
tokens that are not in the vocabulary.

What differs: rank files are found offline only (:func:`get_encoding`, never a network call);
pickling is by value always (the ranks packed into a few arrays, no name lookup), and the
tokenizer is rebuilt on unpickling; special-token ids that are also ranks are refused at
construction (tiktoken decodes such an id as the rank's bytes); ``num_threads`` is accepted and
ignored: a batch is cut into one chunk per torch thread (``gputok._cpu_threads``);
``encode_with_unstable`` is not provided.

gputok's own additions: :meth:`Encoding.to_tokenizer` (the :class:`gputok.Tokenizer` behind it:
padded tensors on a device, DataLoader collate) and :meth:`Encoding.encode_batch_to_tensors`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
from collections.abc import Collection, Sequence, Set
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from . import regex_split
from ._cache import cache_dir
from .decoders import ByteLevelDecoder
from .ingest import codepoints
from .models.bpe import BPE
from .pre_tokenizers import Split
from .ragged import rows_as_lists
from .tokenizer import AddedToken, Encoded, Tokenizer, _checked_special_tokens

__all__ = ["Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model", "list_encoding_names"]

SpecialSet = Literal["all"] | Set[str]

# The original GPT-2 split regex; tiktoken's r50k pattern is its faster equivalent.
_GPT2_ORIGINAL = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@functools.lru_cache(maxsize=1)
def _known_patterns() -> dict[str, str]:
    """Spellings of the split regexes that run as exact kernels -> rule name."""
    known = {_GPT2_ORIGINAL: "gpt2"}
    for name, pattern in reversed(regex_split.PATTERNS.items()):  # the first name wins: gpt2
        known[pattern] = known[regex_split.hf_spelling(pattern)] = name
    return known


class Encoding:
    r"""tiktoken's ``Encoding`` over gputok's kernels.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"he": 256, b"ll": 257, b"hell": 258, b"hello": 259}
    >>> enc = Encoding("tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|end|>": 260})
    >>> enc.encode("hello  hell"), enc.encode("hi<|end|>", allowed_special="all")
    ([259, 32, 32, 258], [104, 105, 260])
    >>> enc.decode_with_offsets([259, 32, 258])
    ('hello hell', [0, 5, 6])
    """

    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int],
                 explicit_n_vocab: int | None = None) -> None:
        """``pat_str``: the split regex; ``mergeable_ranks``: ``{token bytes: rank}`` (the ids);
        ``special_tokens``: ``{text: id}``; ``explicit_n_vocab``: if given, the number of ranks
        plus special tokens, which must also be the largest id + 1 (else ValueError)."""
        self._setup(name, pat_str, mergeable_ranks, special_tokens, explicit_n_vocab, None)

    def _setup(self, name: str, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int],
               explicit_n_vocab: int | None, model: BPE | None) -> None:
        """The constructor's work; ``model``: a BPE already built from these ranks (the registry
        shares one between encodings of one rank file)."""
        _check_ranks(mergeable_ranks, name)
        self.name = name
        self._pat_str = pat_str
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = special_tokens
        self._explicit_n_vocab = explicit_n_vocab
        self.max_token_value = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0))
        if explicit_n_vocab and (len(mergeable_ranks) + len(special_tokens) != explicit_n_vocab
                                 or self.max_token_value != explicit_n_vocab - 1):
            raise ValueError(f"encoding {name!r}: explicit_n_vocab={explicit_n_vocab}, but it has {len(mergeable_ranks)} "
                             f"ranks + {len(special_tokens)} special tokens and ids up to {self.max_token_value}; "
                             "pass the matching count or leave explicit_n_vocab out")
        self._special_token_values = set(special_tokens.values())
        model = model if model is not None else BPE.from_ranks(mergeable_ranks, source=f"encoding {name!r}")
        specials = _checked_special_tokens(dict(special_tokens), model, f"encoding {name!r}")
        rule = _known_patterns().get(pat_str)
        tokenizer = Tokenizer(model, pre_tokenizer=Split.tiktoken(rule or pat_str), decoder=ByteLevelDecoder(),
                              added_tokens=[AddedToken(i, t) for t, i in sorted(specials.items(), key=lambda kv: kv[1])])
        tokenizer.join_surrogate_pairs = True  # tiktoken's reading of a str holding surrogates
        self._tokenizer = tokenizer

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ---- encoding ---------------------------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of ``text``, special tokens written in it encoded as plain text.

        Equal to ``encode(text, disallowed_special=())``."""
        return self._lists(self._encode([_checked_str(text)], frozenset()))[0]

    def encode(self, text: str, *, allowed_special: SpecialSet = set(),  # noqa: B006 (tiktoken's default)
               disallowed_special: Literal["all"] | Collection[str] = "all") -> list[int]:
        """Token ids of ``text``. A special token written in the text becomes its id if it is in
        ``allowed_special`` ("all": every one); if it is in ``disallowed_special`` ("all": every
        one not allowed) the call raises ValueError; else it is encoded as plain text. A token in
        both sets raises."""
        texts = [_checked_str(text)]
        return self._lists(self._encode(texts, self._allowed(texts, allowed_special, disallowed_special)))[0]

    def encode_to_numpy(self, text: str, *, allowed_special: SpecialSet = set(),  # noqa: B006
                        disallowed_special: Literal["all"] | Collection[str] = "all") -> np.ndarray:
        """:meth:`encode` as a uint32 numpy array."""
        texts = [_checked_str(text)]
        return self._encode(texts, self._allowed(texts, allowed_special, disallowed_special)).ids.values.numpy().astype(np.uint32)

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, the batch at once (``num_threads``: accepted and
        ignored; gputok runs one chunk per torch thread)."""
        return self._lists(self._encode(_checked_strs(text), frozenset()))

    def encode_batch(self, text: Sequence[str], *, num_threads: int = 8, allowed_special: SpecialSet = set(),  # noqa: B006
                     disallowed_special: Literal["all"] | Collection[str] = "all") -> list[list[int]]:
        """:meth:`encode` of each text, the batch at once."""
        texts = _checked_strs(text)
        return self._lists(self._encode(texts, self._allowed(texts, allowed_special, disallowed_special)))

    def encode_batch_to_tensors(self, text: Sequence[str], *, allowed_special: SpecialSet = set(),  # noqa: B006
                                disallowed_special: Literal["all"] | Collection[str] = "all", padding: bool = False,
                                device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """:meth:`encode_batch` as tensors on ``device``: ``input_ids`` flat with ``row_offsets``
        (``padding=False``), or padded ``[rows, longest]`` with ``attention_mask``."""
        texts = _checked_strs(text)
        allowed = self._allowed(texts, allowed_special, disallowed_special)
        return self._tokenizer(texts, padding=padding, device=device, allowed_special=allowed, disallowed_special=())

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of a text or bytes that is one token (special tokens included); KeyError if none."""
        data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        rank = self._mergeable_ranks.get(data)
        if rank is not None:
            return rank
        try:
            return self._special_tokens[data.decode("utf-8")]
        except (UnicodeDecodeError, KeyError):
            raise KeyError(data) from None

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Token ids of any bytes. Valid UTF-8 is encoded as text; otherwise, as tiktoken does, its
        valid prefix is encoded, and the prefix's last piece (with the whitespace-only tokens
        before it, if it starts with one) is encoded again together with the rest of the bytes,
        as one piece of BPE with no split."""
        data = bytes(text)
        try:
            return self.encode_ordinary(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            valid = e.start
        prefix = data[:valid].decode("utf-8")
        encoded = self._encode([prefix], frozenset(), with_spans=True)
        ids = encoded.ids.values.numpy()
        words = self._tokenizer.pre_tokenizer(codepoints([prefix]))
        keep = len(ids)
        if len(ids) and len(words.starts):  # the tokens of the last piece start in its first character
            keep = int(np.searchsorted(encoded.spans[:, 0].numpy(), int(words.starts[-1]), side="left"))
            if keep < len(ids) and self._all_space[ids[keep]]:
                while keep > 0 and self._all_space[ids[keep - 1]]:
                    keep -= 1
        rest = self._bytes_of_rows([ids[keep:]])[0] + data[valid:]
        return ids[:keep].tolist() + self._encode_single_piece(rest)

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """BPE of a text or bytes as one piece: no split, no special tokens."""
        data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        return self._tokenizer.model.encode_word_bytes(data) if data else []

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """:meth:`encode_ordinary` with the split done by the ``regex`` module on ``pat_str``
        (a slow reference)."""
        import regex

        return [i for piece in regex.findall(self._pat_str, text) for i in self._encode_single_piece(piece)]

    def _allowed(self, texts: list[str], allowed_special: SpecialSet,
                 disallowed_special: Literal["all"] | Collection[str]) -> frozenset[str]:
        """tiktoken's special-token rule: the allowed tokens, after checking that no text holds a
        disallowed one (ValueError)."""
        allowed = self.special_tokens_set if allowed_special == "all" else set(allowed_special)
        disallowed = self.special_tokens_set - allowed if disallowed_special == "all" else disallowed_special
        if disallowed:
            pattern = _special_pattern(frozenset(disallowed))
            if pattern.search("\0".join(texts)):  # a hit may span two texts: confirm within one
                found = next((m for m in map(pattern.search, texts) if m), None)
                if found:
                    token = found.group()
                    raise ValueError(
                        f"the text contains the special token {token!r}, which is disallowed. To encode it as that "
                        f"token, pass allowed_special={{{token!r}}} (or 'all'); to encode it as plain text, pass "
                        f"disallowed_special=(enc.special_tokens_set - {{{token!r}}}), or disallowed_special=() to "
                        "check no special token")
        return frozenset(allowed & self.special_tokens_set)

    def _encode(self, texts: list[str], allowed: frozenset[str], with_spans: bool = False) -> Encoded:
        return self._tokenizer.encode_ragged(texts, allowed=allowed, with_spans=with_spans)

    @staticmethod
    def _lists(encoded: Encoded) -> list[list[int]]:
        return rows_as_lists(encoded.ids.values.numpy(), encoded.ids.offsets)

    # ---- decoding ---------------------------------------------------------------------------
    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens`` (special tokens as their text); KeyError for an id that is no token."""
        return self._bytes_of_rows([tokens])[0]

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """The text of ``tokens``; ``errors`` for bytes that are not UTF-8, as ``bytes.decode``
        ("replace": U+FFFD, lossy; "strict" raises)."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens too); KeyError if ``token`` is none."""
        try:
            found = self._token_bytes[token] if token >= 0 else None
        except (IndexError, TypeError):
            found = None
        if found is None:
            raise KeyError(str(token))
        return found

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token."""
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` (strict UTF-8: invalid bytes raise UnicodeDecodeError) and the
        character where each token starts: a token that starts inside a character gets that
        character. Counted with numpy over the tokens' UTF-8 lead bytes, no loop per token."""
        data = self.decode_bytes(tokens)  # raises KeyError first for ids that are no token
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        leads, continues = self._utf8_counts
        before = np.zeros(ids.size, dtype=np.int64)
        np.cumsum(leads[ids[:-1]], out=before[1:])
        offsets = np.maximum(before - continues[ids], 0)
        return data.decode("utf-8", errors="strict"), offsets.tolist()

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int = 8) -> list[str]:
        """:meth:`decode` of each row, all rows in one kernel call."""
        return [row.decode("utf-8", errors=errors) for row in self._bytes_of_rows(batch)]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        """:meth:`decode_bytes` of each row, all rows in one kernel call."""
        return self._bytes_of_rows(batch)

    def _bytes_of_rows(self, batch: Sequence[Sequence[int]]) -> list[bytes]:
        rows = [row.tolist() if isinstance(row, (np.ndarray, torch.Tensor)) else row for row in batch]
        got = self._tokenizer._decode_rows(rows, False)
        if isinstance(got, int):
            bad = next((t for row in rows for t in row if self._bytes_or_none(t) is None), got)
            raise KeyError(f"Invalid token for decoding: {bad}")
        data, bounds = got
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def _bytes_or_none(self, token: Any) -> bytes | None:
        try:
            return self.decode_single_token_bytes(token)
        except KeyError:
            return None

    # ---- vocabulary -------------------------------------------------------------------------
    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ranked token (no special tokens), sorted."""
        return sorted(self._mergeable_ranks)

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """The largest id + 1 (tiktoken's name; ``max_token_value + 1``)."""
        return self.max_token_value + 1

    def to_tokenizer(self) -> Tokenizer:
        """The :class:`gputok.Tokenizer` that encodes for this encoding (shared, not a copy):
        ``tok(texts, device="cuda")`` gives padded tensors on a device, ``gputok.data.Collate(tok)``
        a DataLoader collate function. Its ``allowed_special`` default is "all" (huggingface's);
        pass ``allowed_special=set(), disallowed_special="all"`` for tiktoken's."""
        return self._tokenizer

    @functools.cached_property
    def _token_bytes(self) -> list[bytes | None]:
        """Each id's bytes (special tokens: their UTF-8), None where no token has the id."""
        table: list[bytes | None] = [None] * self.n_vocab
        for token, rank in self._mergeable_ranks.items():
            table[rank] = token
        for text, i in self._special_tokens.items():
            table[i] = text.encode("utf-8")
        return table

    @functools.cached_property
    def _all_space(self) -> np.ndarray:
        """Which ids are tokens of spaces, newlines and tabs only."""
        return np.fromiter((b is not None and len(b) > 0 and not b.strip(b" \n\t") for b in self._token_bytes),
                           dtype=bool, count=self.n_vocab)

    @functools.cached_property
    def _utf8_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per id: the characters its bytes start (bytes that are no UTF-8 continuation byte), and
        whether its first byte is a continuation byte."""
        values, offsets = self._tokenizer._decode_table[:2]
        starts = np.concatenate([[0], np.cumsum((values & 0xC0) != 0x80)])
        leads = (starts[offsets[1:]] - starts[offsets[:-1]]).astype(np.int64)
        first = np.where(offsets[1:] > offsets[:-1], values[np.minimum(offsets[:-1], max(len(values) - 1, 0))], 0)
        return leads, ((first & 0xC0) == 0x80).astype(np.int64)

    # ---- pickling ---------------------------------------------------------------------------
    def __reduce__(self):
        """By value: the ranks as three arrays (bytes, lengths, ranks unless they are 0..n-1),
        about the size of the .tiktoken file's decoded tokens; the tokenizer is rebuilt."""
        tokens = sorted(self._mergeable_ranks.items(), key=lambda kv: kv[1])
        lengths = np.fromiter((len(t) for t, _ in tokens), dtype=np.int64, count=len(tokens))
        ranks = np.fromiter((r for _, r in tokens), dtype=np.int64, count=len(tokens))
        dense = bool((ranks == np.arange(len(tokens))).all())
        packed = (b"".join(t for t, _ in tokens), lengths.astype(np.uint16 if lengths.max() >= 256 else np.uint8),
                  None if dense else ranks.astype(np.uint32))
        return _unpickled, (self.name, self._pat_str, packed, dict(self._special_tokens), self._explicit_n_vocab)


def _unpickled(name: str, pat_str: str, packed: tuple, special_tokens: dict[str, int],
               explicit_n_vocab: int | None) -> Encoding:
    blob, lengths, ranks = packed
    ends = np.cumsum(lengths.astype(np.int64)).tolist()
    tokens = [blob[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    rank_list = range(len(tokens)) if ranks is None else ranks.tolist()
    return Encoding(name, pat_str=pat_str, mergeable_ranks=dict(zip(tokens, rank_list)), special_tokens=special_tokens,
                    explicit_n_vocab=explicit_n_vocab)


@functools.lru_cache(maxsize=128)
def _special_pattern(tokens: frozenset[str]):
    import re

    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=lambda t: -len(t))))


def _checked_str(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}; for bytes use _encode_bytes or decode them first")
    return text


def _checked_strs(texts: Sequence[str]) -> list[str]:
    texts = list(texts)
    if not set(map(type, texts)) <= {str}:  # checked at C speed; name the first offender
        bad = next(i for i, t in enumerate(texts) if not isinstance(t, str))
        raise TypeError(f"text {bad} is a {type(texts[bad]).__name__}; expected str")
    return texts


def _check_ranks(ranks: Any, name: str) -> None:
    """``mergeable_ranks`` as tiktoken needs them: bytes to distinct non-negative integer ranks."""
    if not isinstance(ranks, dict) or not ranks:
        raise ValueError(f"encoding {name!r}: mergeable_ranks must be a non-empty dict {{token bytes: rank}}")
    if not set(map(type, ranks)) <= {bytes}:
        raise ValueError(f"encoding {name!r}: mergeable_ranks keys must be bytes")
    values = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
    if values.min() < 0 or values.max() >= 1 << 32:
        raise ValueError(f"encoding {name!r}: ranks must be in 0 .. 2**32 - 1")
    if np.unique(values).size != values.size:
        raise ValueError(f"encoding {name!r}: two tokens share a rank; each rank must name one token")


def load_tiktoken_bpe(path: str | os.PathLike, expected_hash: str | None = None) -> dict[bytes, int]:
    """``{token bytes: rank}`` of a local ``.tiktoken`` file (checked as
    :func:`gputok.formats.read_tiktoken` checks it, and against ``expected_hash``, a sha256, if given)."""
    from .formats import read_tiktoken

    if expected_hash is not None:
        actual = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        if actual != expected_hash:
            raise ValueError(f"{path} has sha256 {actual}, not the expected {expected_hash}: it is another file "
                             "or damaged; fetch it again")
    return read_tiktoken(path)


# ---- the registry of tiktoken's encodings -----------------------------------------------------
_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
_FIM = {"<|fim_prefix|>": 0, "<|fim_middle|>": 1, "<|fim_suffix|>": 2}
# rank file -> (sha256 of tiktoken's file, gputok asset that provides it, its file name there)
_RANK_FILES = {
    "r50k_base": ("306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", "gpt2-tiktoken", "gpt2.tiktoken"),
    "p50k_base": ("94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069", "p50k-tiktoken",
                  "p50k_base.tiktoken"),
    "cl100k_base": ("223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", "cl100k-tiktoken",
                    "cl100k_base.tiktoken"),
    "o200k_base": ("446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", "o200k-tiktoken",
                   "o200k_base.tiktoken"),
}
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"  # names tiktoken's cache files
_O200K_SPECIALS = {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}
_HARMONY = {"<|startoftext|>": 199998, "<|return|>": 200002, "<|constrain|>": 200003, "<|channel|>": 200005,
            "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012}
# name -> (rank file, split rule, special tokens, explicit_n_vocab)
_ENCODINGS: dict[str, tuple[str, str, dict[str, int], int | None]] = {
    "gpt2": ("r50k_base", "r50k", {_ENDOFTEXT: 50256}, 50257),  # GPT-2's merges are r50k's ranks
    "r50k_base": ("r50k_base", "r50k", {_ENDOFTEXT: 50256}, 50257),
    "p50k_base": ("p50k_base", "p50k", {_ENDOFTEXT: 50256}, 50281),
    "p50k_edit": ("p50k_base", "p50k", {_ENDOFTEXT: 50256, **{t: 50281 + k for t, k in _FIM.items()}}, None),
    "cl100k_base": ("cl100k_base", "cl100k", {_ENDOFTEXT: 100257, **{t: 100258 + k for t, k in _FIM.items()},
                                              _ENDOFPROMPT: 100276}, None),
    "o200k_base": ("o200k_base", "o200k", _O200K_SPECIALS, None),
    "o200k_harmony": ("o200k_base", "o200k", {**_O200K_SPECIALS, **_HARMONY,
                                              **{f"<|reserved_{i}|>": i for i in (200000, 200001, 200004, 200009,
                                                                                 200010, 200011)},
                                              **{f"<|reserved_{i}|>": i for i in range(200013, 201088)}}, None),
}
# Model names -> encoding, as tiktoken 0.14 maps them: exact names, then prefixes in this order.
_MODELS_BY_ENCODING = {
    "o200k_base": "o1 o3 o4-mini gpt-5 gpt-4.1 gpt-4o",
    "cl100k_base": "gpt-4 gpt-3.5-turbo gpt-3.5 gpt-35-turbo davinci-002 babbage-002 text-embedding-ada-002 "
                   "text-embedding-3-small text-embedding-3-large",
    "p50k_base": "text-davinci-003 text-davinci-002 code-davinci-002 code-davinci-001 code-cushman-002 "
                 "code-cushman-001 davinci-codex cushman-codex",
    "r50k_base": "text-davinci-001 text-curie-001 text-babbage-001 text-ada-001 davinci curie babbage ada "
                 + " ".join(f"text-similarity-{m}-001 text-search-{m}-doc-001" for m in ("davinci", "curie", "babbage", "ada"))
                 + " code-search-babbage-code-001 code-search-ada-code-001",
    "p50k_edit": "text-davinci-edit-001 code-davinci-edit-001",
    "gpt2": "gpt2 gpt-2",
}
_MODEL_TO_ENCODING = {model: enc for enc, models in _MODELS_BY_ENCODING.items() for model in models.split()}
_MODEL_PREFIXES = [("o1-", "o200k_base"), ("o3-", "o200k_base"), ("o4-mini-", "o200k_base"), ("gpt-5", "o200k_base"),
                   ("gpt-4.5-", "o200k_base"), ("gpt-4.1-", "o200k_base"), ("chatgpt-4o-", "o200k_base"),
                   ("gpt-4o-", "o200k_base"), ("gpt-4-", "cl100k_base"), ("gpt-3.5-turbo-", "cl100k_base"),
                   ("gpt-35-turbo-", "cl100k_base"), ("gpt-oss-", "o200k_harmony"), ("ft:gpt-4o", "o200k_base"),
                   ("ft:gpt-4", "cl100k_base"), ("ft:gpt-3.5-turbo", "cl100k_base"), ("ft:davinci-002", "cl100k_base"),
                   ("ft:babbage-002", "cl100k_base")]

_lock = threading.RLock()
_loaded: dict[tuple[str, str | None], Encoding] = {}
_models: dict[str, tuple[dict[bytes, int], BPE]] = {}  # by the rank file's path: one BPE per file


def list_encoding_names() -> list[str]:
    """The encodings :func:`get_encoding` knows (tiktoken 0.14's)."""
    return list(_ENCODINGS)


def encoding_name_for_model(model_name: str) -> str:
    """The encoding of an OpenAI model name (exact names first, then known prefixes); KeyError if unknown."""
    if model_name in _MODEL_TO_ENCODING:
        return _MODEL_TO_ENCODING[model_name]
    for prefix, name in _MODEL_PREFIXES:
        if model_name.startswith(prefix):
            return name
    raise KeyError(f"no encoding is known for model {model_name!r}; call get_encoding(name) with one of "
                   f"{list_encoding_names()}")


def encoding_for_model(model_name: str, rank_file: str | os.PathLike | None = None) -> Encoding:
    """:func:`get_encoding` of :func:`encoding_name_for_model`."""
    return get_encoding(encoding_name_for_model(model_name), rank_file)


def get_encoding(encoding_name: str, rank_file: str | os.PathLike | None = None) -> Encoding:
    """One of tiktoken's encodings (:func:`list_encoding_names`), its rank file found offline
    (never a network call), checked against the sha256 tiktoken pins for it. Looked for in order:
    ``rank_file`` (the file, or a directory holding it under tiktoken's file name, e.g.
    ``cl100k_base.tiktoken``); tiktoken's cache (``$TIKTOKEN_CACHE_DIR``, else
    ``$DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; files named by the sha1 of their URL);
    gputok's cache (``python -m gputok.assets cl100k-tiktoken`` puts it there). p50k's ranks are
    also made from r50k's file (the same ranks plus 24 runs of spaces). The same name gives the
    same object.
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"expected an encoding name (str), got {type(encoding_name).__name__}")
    if encoding_name not in _ENCODINGS:
        raise ValueError(f"unknown encoding {encoding_name!r}; known: {list_encoding_names()}")
    key = (encoding_name, None if rank_file is None else os.fspath(rank_file))
    with _lock:
        if key not in _loaded:
            file_name, rule, specials, n_vocab = _ENCODINGS[encoding_name]
            ranks, model = _ranks_and_model(file_name, rank_file)
            enc = Encoding.__new__(Encoding)
            enc._setup(encoding_name, regex_split.PATTERNS[rule], ranks, dict(specials), n_vocab, model)
            _loaded[key] = enc
        return _loaded[key]


def _ranks_and_model(file_name: str, rank_file: str | os.PathLike | None) -> tuple[dict[bytes, int], BPE]:
    path, data = _find_rank_file(file_name, rank_file)
    if path not in _models:
        ranks = _ranks_from_bytes(data, path)
        _models[path] = ranks, BPE.from_ranks(ranks, source=path)
    return _models[path]


def _ranks_from_bytes(data: bytes, source: str) -> dict[bytes, int]:
    """The ranks of a rank file's contents, read and checked by :func:`gputok.formats.read_tiktoken`."""
    from .formats import read_tiktoken

    if Path(source).is_file():
        return read_tiktoken(source)
    with tempfile.TemporaryDirectory(prefix="gputok-") as tmp:  # read_tiktoken reads and checks a file
        path = Path(tmp) / Path(source).name
        path.write_bytes(data)
        try:
            return read_tiktoken(path)
        except ValueError as e:
            raise ValueError(str(e).replace(str(path), source)) from None


def _find_rank_file(file_name: str, rank_file: str | os.PathLike | None) -> tuple[str, bytes]:
    """(where, contents) of the rank file ``file_name`` ("cl100k_base"), matching its sha256."""
    sha, asset, asset_file = _RANK_FILES[file_name]
    url = _TIKTOKEN_URL.format(file_name)
    candidates: list[Path] = []
    if rank_file is not None:
        given = Path(rank_file)
        candidates += [given / f"{file_name}.tiktoken", given / hashlib.sha1(url.encode()).hexdigest(),
                       given / asset_file] if given.is_dir() else [given]
    cache = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    tiktoken_cache = Path(cache if cache is not None else Path(tempfile.gettempdir()) / "data-gym-cache")
    candidates += [tiktoken_cache / hashlib.sha1(url.encode()).hexdigest(), cache_dir() / "vocab" / asset / asset_file]
    wrong = []
    for path in candidates:
        if path.is_file():
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() == sha:
                return str(path), data
            wrong.append(str(path))
    if file_name == "p50k_base":  # r50k's ranks plus one token per run of 2-25 spaces
        path, data = _find_rank_file("r50k_base", rank_file)
        import base64

        data += b"".join(base64.b64encode(b" " * n) + b" %d\n" % (50255 + n) for n in range(2, 26))
        if hashlib.sha256(data).hexdigest() == sha:
            return f"{path} + p50k's runs of spaces", data
    looked = "\n".join(f"  {p}{' (another file: its sha256 differs)' if str(p) in wrong else ''}" for p in candidates)
    raise FileNotFoundError(
        f"the rank file of {file_name} ({file_name}.tiktoken, sha256 {sha[:16]}...) was not found; gputok looked in:\n"
        f"{looked}\nProvide it (gputok makes no network call here): `python -m gputok.assets {asset}` fetches it "
        f"into gputok's cache; or download {url} and pass its path (or its folder) as rank_file=, or put it in "
        "$TIKTOKEN_CACHE_DIR under tiktoken's cache name (the sha1 of that URL)")
