"""transformers' tokenizer names and semantics on :class:`gputok.Tokenizer` (a mixin).

What a ``PreTrainedTokenizerFast`` user calls, with its meaning: ``tok(texts, return_tensors=...)``
(``"pt"``, ``"np"`` or None for Python lists, a single text un-nested), ``max_length`` alone
truncating, ``return_special_tokens_mask``, ``return_length``, ``return_offsets_mapping``,
``return_attention_mask``; the special-token attributes (``pad_token``, ``pad_token_id``, ...),
``model_max_length``, ``get_vocab``, ``tokenize``, ``convert_ids_to_tokens``,
``convert_tokens_to_ids``, ``batch_decode``, and ``decode`` of 1-D or 2-D ids (lists, tensors,
numpy arrays). Token strings are huggingface's: byte-level BPE tokens in GPT-2's alphabet
(``"Ġworld"``), as ``get_vocab`` gives them.

Where gputok differs (each said in the README's mapping table): ``tok(...)`` returns tensors
padded to the longest row by default (``return_tensors="pt", padding=True``), where transformers
returns unpadded lists; ``decode`` skips special tokens by default; ``max_length`` without
``truncation`` truncates whatever the padding (transformers truncates only when not padding, and
warns that it ignores ``max_length`` with ``padding=True``: gputok warns there too, saying it
truncates). Special tokens are read from the file: its padding settings, the model's unk token,
and added special tokens with the usual names (``[CLS]``, ``<s>``, ``<|endoftext|>`` ...).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Sequence, Set
from typing import Any

import numpy as np
import torch

from . import _cpu_threads, _dispatch, file_defaults
from .ragged import rows_as_lists
from .ingest import TextInput, as_texts

#: transformers' ``model_max_length`` of a tokenizer that does not know its model's limit.
VERY_LARGE_INTEGER = int(1e30)
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# Added special tokens taken for each role when the file does not say (first match wins).
_USUAL_SPELLINGS = {
    "bos_token": ("<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", "[BOS]"),
    "eos_token": ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[EOS]"),
    "unk_token": ("[UNK]", "<unk>", "<|unk|>"),
    "sep_token": ("[SEP]", "</s>"),
    "pad_token": (),  # the token padding has always used: the file's padding settings, else [PAD]
    "cls_token": ("[CLS]", "<s>"),
    "mask_token": ("[MASK]", "<mask>", "<|mask|>"),
}
RETURN_TENSORS = ("pt", "np", None)
_NO_THREAD_SETTING = contextlib.nullcontext()


class BatchEncoding(dict):
    """``tok(...)``'s output: a dict of ``input_ids``, ``attention_mask``... with transformers'
    ``BatchEncoding`` conveniences: ``batch.input_ids`` and ``batch.to(device)``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no {name!r} in this batch; it has {sorted(self)}") from None

    def __reduce__(self):  # pickled as a dict subclass, never through __getattr__
        return BatchEncoding, (dict(self),)

    def to(self, device: torch.device | str) -> BatchEncoding:
        """Every tensor moved to ``device`` (other values kept)."""
        return BatchEncoding({k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.items()})


def _special_token_property(name: str) -> property:
    def get(self) -> str | None:
        return self._special_tokens.get(name)

    def set(self, token: str | None) -> None:
        if token is not None and self.token_to_id(token) is None:
            raise ValueError(f"{name}={token!r} is not a token of this tokenizer; choose one it has "
                             f"(e.g. {name}=tok.eos_token), gputok cannot add tokens to a loaded vocabulary")
        self._special_tokens[name] = token
        self.__dict__.setdefault("_user_special_tokens", {})[name] = token
        self.__dict__.pop("_pad_id", None)  # padding reads a pad_token set here

    return property(get, set, doc=f"transformers' ``{name}`` (None when the tokenizer has none); settable.")


def _special_id_property(name: str) -> property:
    def get(self) -> int | None:
        token = getattr(self, name)
        return None if token is None else self.token_to_id(token)

    return property(get, doc=f"The id of ``{name}`` (None when the tokenizer has none).")


class TransformersAPI:
    """The methods and attributes of a transformers tokenizer; see the module docstring."""

    @functools.cached_property
    def _special_tokens(self) -> dict[str, str | None]:
        """Each role's token as the file tells it: padding settings, the model's unk token, then
        the added special tokens with the usual spellings."""
        specials = [t.content for t in self.added_tokens if t.special]
        found: dict[str, str | None] = {}
        for name, spellings in _USUAL_SPELLINGS.items():
            found[name] = next((s for s in spellings if s in specials), None)
        pad = (self._extra.get("padding") or {}).get("pad_token", "[PAD]")
        if pad is not None and self.token_to_id(pad) is not None:
            found["pad_token"] = pad
        unk = getattr(self.model, "unk_token", None)
        if unk is not None and self.token_to_id(unk) is not None:
            found["unk_token"] = unk
        return found

    @property
    def model_max_length(self) -> int:
        """The longest input the model takes: ``truncation=True`` without ``max_length`` cuts
        there; transformers' ``VERY_LARGE_INTEGER`` (no limit known) unless set."""
        return self.__dict__.get("_model_max_length", VERY_LARGE_INTEGER)

    @model_max_length.setter
    def model_max_length(self, value: int) -> None:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"model_max_length={value!r}; pass a positive int")
        self.__dict__["_model_max_length"] = value

    @property
    def all_special_tokens(self) -> list[str]:
        """The added tokens marked special, in id order."""
        return [t.content for t in sorted(self.added_tokens, key=lambda t: t.id) if t.special]

    @property
    def all_special_ids(self) -> list[int]:
        return [self.token_to_id(t) for t in self.all_special_tokens]

    def __len__(self) -> int:
        """The vocabulary with the added tokens, as ``len(tokenizer)`` in transformers."""
        return len(self._hf_id_to_token)

    # ---- tokens <-> ids -------------------------------------------------------------------
    @functools.cached_property
    def _hf_id_to_token(self) -> list[str | None]:
        """Each id's token string as huggingface spells it (byte-level BPE: GPT-2's alphabet)."""
        from .models.bpe import BPE, byte_decoder

        if isinstance(self.model, BPE) and self.model.byte_level:
            alphabet = {b: ch for ch, b in byte_decoder().items()}
            tokens = ["".join(alphabet[b] for b in t) if t is not None else None for t in self.model.token_bytes]
        else:
            tokens = list(self._id_to_token)
        for t in self.added_tokens:
            tokens += [None] * (t.id + 1 - len(tokens))
            tokens[t.id] = t.content
        return tokens

    @functools.cached_property
    def _hf_vocab(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self._hf_id_to_token) if t is not None}

    def get_vocab(self) -> dict[str, int]:
        """``{token: id}`` with the added tokens, byte-level tokens in GPT-2's alphabet (a copy)."""
        return dict(self._hf_vocab)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | None | list[int | None]:
        """Ids of token strings (``get_vocab``'s spelling); an unknown one gives ``unk_token_id``
        (None when there is no unk token), as transformers does."""
        if isinstance(tokens, str):
            return self._hf_vocab.get(tokens, self.unk_token_id)
        unk = self.unk_token_id
        return [self._hf_vocab.get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int] | torch.Tensor | np.ndarray, *,
                              skip_special_tokens: bool = False) -> str | None | list[str | None]:
        """Token strings of ids (``get_vocab``'s spelling; None for an id that is no token)."""
        table = self._hf_id_to_token
        if isinstance(ids, (int, np.integer)) or (isinstance(ids, (torch.Tensor, np.ndarray)) and ids.ndim == 0):
            i = int(ids)
            return table[i] if 0 <= i < len(table) else None
        ids = ids.tolist() if isinstance(ids, (torch.Tensor, np.ndarray)) else ids
        special = set(self.all_special_ids) if skip_special_tokens else ()
        return [table[i] if 0 <= i < len(table) else None for i in ids if i not in special]

    def tokenize(self, text: TextInput, pair: TextInput | None = None, *, add_special_tokens: bool = False) -> list[str]:
        """The token strings of one text (or pair): ``convert_ids_to_tokens(encode(...))``."""
        ids = self._encode_lists([text], None if pair is None else [pair], add_special_tokens=add_special_tokens)[0]
        return self.convert_ids_to_tokens(ids)

    def batch_decode(self, sequences: Any, *, skip_special_tokens: bool = True) -> list[str]:
        """``decode`` of each row of a 2-D tensor, numpy array or list of id lists."""
        return self.decode_batch(_as_rows(sequences), skip_special_tokens=skip_special_tokens)

    # ---- encoding -------------------------------------------------------------------------
    def __call__(self, texts: TextInput | Sequence[TextInput], text_pair: TextInput | Sequence[TextInput] | None = None, *,
                 add_special_tokens: bool = True, padding: bool | str = True, truncation: bool | str | None = None,
                 max_length: int | None = None, stride: int = 0, pad_to_multiple_of: int | None = None,
                 padding_side: str | None = None, return_tensors: str | None = "pt", return_offsets: bool = False,
                 return_offsets_mapping: bool = False, return_overflowing_tokens: bool = False,
                 return_token_type_ids: bool | None = None, return_attention_mask: bool = True,
                 return_special_tokens_mask: bool = False, return_length: bool = False,
                 device: torch.device | str | None = None,
                 allowed_special: str | Set[str] = "all", disallowed_special: str | Set[str] = ()) -> BatchEncoding:
        """Encode a batch (or one text) with transformers' options; returns a :class:`BatchEncoding`.

        ``input_ids`` and ``attention_mask`` ([rows, length], created on ``device``);
        ``token_type_ids`` with ``return_token_type_ids`` (default: :attr:`uses_token_types`, as
        transformers returns them for BERT and not for GPT-2); ``offsets`` ([rows, length, 2]
        character spans into each text, (0, 0) for special and pad tokens) with
        ``return_offsets`` (``offset_mapping`` with transformers' ``return_offsets_mapping``);
        ``overflow_to_sample_mapping`` with ``return_overflowing_tokens``; ``special_tokens_mask``
        (1 for the template's special tokens and padding) and ``length`` (tokens per row, padding
        included) when asked.

        ``return_tensors``: ``"pt"`` (the default: torch tensors), ``"np"`` (numpy arrays) or
        None (Python lists, one list per row; a single text gives un-nested lists).
        ``padding``: True/"longest" (default), "max_length", or False/"do_not_pad", which returns
        the rows as they are (tensors: the ids flat, with ``row_offsets``). ``truncation``:
        True/"longest_first", "only_first", "only_second" or False; not given, ``max_length``
        alone truncates (with a warning when padding to the longest row, where transformers
        would ignore ``max_length``), except with ``padding="max_length"``, as transformers.
        ``truncation=True`` without ``max_length`` cuts at ``model_max_length``. ``padding_side``
        (and the side truncation cuts) default to the directions of the file's ``padding`` and
        ``truncation`` sections, right where it has none, as transformers reads them.

        Added tokens written in the text: ``allowed_special`` ("all", the default, as huggingface
        does, or a set) become their ids; those in ``disallowed_special`` ("all": every added token
        not allowed) raise ValueError; any other is plain text. tiktoken's defaults are
        ``allowed_special=set(), disallowed_special="all"``.
        """
        batch = None  # the texts as a list of str (ingest.as_texts), where already made
        if (padding is True and text_pair is None and truncation is None and max_length is None
                and (device is None or device == "cpu") and padding_side is None and pad_to_multiple_of is None
                and return_tensors == "pt" and return_attention_mask
                and not (return_offsets or return_offsets_mapping or return_overflowing_tokens
                         or return_special_tokens_mask or return_length)
                and allowed_special == "all" and disallowed_special == ()):
            # the common call (a training loop's), which one kernel call may answer: its glue is
            # most of a batch-1 call, so the option handling below is skipped
            # A list is checked by the join the one-call path reads (a str subclass is a str to it, as
            # to as_texts): as_texts' copy and join of 1,024 lines were ~13 us, and a second join
            joined = None
            if type(texts) is list:
                try:
                    joined = "\x00".join(texts)
                except TypeError:  # bytes among them, or not a text: as_texts decodes or raises
                    pass
            checked = texts if joined is not None else as_texts(texts)
            out = self._padded_call(checked, add_special_tokens, return_token_type_ids, joined)
            if out is not None:
                return BatchEncoding(out)
            batch = checked  # the checked list goes on (only read): as_texts of 65,536 lines is ~1 ms
        if return_tensors not in RETURN_TENSORS:
            raise ValueError(f"return_tensors={return_tensors!r}; choose one of {RETURN_TENSORS}")
        if truncation is None and max_length is not None:
            truncation = padding != "max_length"
            if truncation and padding in (True, "longest"):
                warnings.warn(f"max_length={max_length} without truncation: gputok truncates the rows to it "
                              "(transformers would ignore max_length with padding=True); pass truncation=True to "
                              "silence this, or truncation=False to keep whole rows", stacklevel=2)
        if truncation not in (None, False) and max_length is None and self.model_max_length < VERY_LARGE_INTEGER:
            max_length = self.model_max_length
        if padding == "max_length" and max_length is None and self.model_max_length < VERY_LARGE_INTEGER:
            max_length = self.model_max_length
        with_offsets = return_offsets or return_offsets_mapping or return_special_tokens_mask
        # The torch ops of a call (the masks below, a copy to a GPU, the torch path's stages) run on
        # one intra-op thread (gputok._cpu_threads); a plain call on the CPU kernels has none (where
        # it runs chunk threads, _encode_tensors sets them up itself) and skips that setting.
        plain = (device is None and return_tensors == "pt" and not (return_special_tokens_mask or return_length)
                 and _dispatch.on_cpu_kernels(_dispatch.CPU))
        with _NO_THREAD_SETTING if plain else _cpu_threads.gputok_threads():
            out = self._encode_tensors(
                texts if batch is None else batch, text_pair, add_special_tokens=add_special_tokens, padding=padding,
                truncation=truncation or False, max_length=max_length, stride=stride,
                pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side or file_defaults.padding_side(self._extra),
                truncation_side=file_defaults.truncation_side(self._extra), return_offsets=with_offsets,
                return_overflowing_tokens=return_overflowing_tokens, return_token_type_ids=return_token_type_ids,
                device=device, allowed_special=allowed_special, disallowed_special=disallowed_special,
                texts_checked=batch is not None)
            if plain and return_attention_mask and not with_offsets:  # the tensors as they are
                return BatchEncoding(out)
            return self._call_outputs(
                texts, out, return_tensors=return_tensors, return_offsets=return_offsets,
                return_offsets_mapping=return_offsets_mapping, return_overflowing_tokens=return_overflowing_tokens,
                return_attention_mask=return_attention_mask, return_special_tokens_mask=return_special_tokens_mask,
                return_length=return_length)

    def _call_outputs(self, texts: TextInput | Sequence[TextInput], out: dict[str, torch.Tensor], *,
                      return_tensors: str | None, return_offsets: bool, return_offsets_mapping: bool,
                      return_overflowing_tokens: bool, return_attention_mask: bool, return_special_tokens_mask: bool,
                      return_length: bool) -> BatchEncoding:
        """:meth:`__call__`'s outputs from :meth:`_encode_tensors`'s: the masks and names asked for,
        as tensors, arrays or lists."""
        padded = "row_offsets" not in out
        if return_special_tokens_mask:  # no character span: a template token, or padding
            spans = out["offsets"]
            mask = (spans[..., 0] == 0) & (spans[..., 1] == 0)
            out["special_tokens_mask"] = (mask | (out["attention_mask"] == 0) if padded else mask).long()
        if not (return_offsets or return_offsets_mapping):
            out.pop("offsets", None)
        elif return_offsets_mapping:
            out["offset_mapping"] = out["offsets"] if return_offsets else out.pop("offsets")
        if return_length:
            out["length"] = (torch.full((out["input_ids"].shape[0],), out["input_ids"].shape[1],
                                        dtype=torch.int64, device=out["input_ids"].device) if padded
                             else out["row_offsets"].diff())
        if not return_attention_mask:
            out.pop("attention_mask", None)
        if return_tensors == "pt":
            return BatchEncoding(out)
        if return_tensors == "np":
            return BatchEncoding({k: v.cpu().numpy() for k, v in out.items()})
        if not padded and return_attention_mask:  # rows as lists: each with its mask of ones, as transformers
            out["attention_mask"] = torch.ones_like(out["input_ids"])
        one_text = isinstance(texts, (str, bytes, bytearray)) and not return_overflowing_tokens
        return BatchEncoding({k: _as_lists(v, None if padded or k in _PER_ROW else out["row_offsets"], one_text)
                              for k, v in out.items() if k != "row_offsets"})

    def datasets_map_fn(self, text_column: str = "text", pair_column: str | None = None, *, padding: bool | str = False,
                        **options: Any) -> DatasetsMapFunction:
        """A function for ``datasets.Dataset.map(fn, batched=True)``: each batch's ``text_column``
        (and ``pair_column``) encoded into the columns transformers' tokenizers give
        (``input_ids``, ``attention_mask``, ``token_type_ids`` where the tokenizer uses them, and
        whatever ``options`` ask: ``truncation``, ``max_length``, ``return_special_tokens_mask``...),
        one list per row (what datasets writes to Arrow fastest: one numpy array per row took ~4x
        longer); rows unpadded unless ``padding`` says otherwise.

        It pickles small and the same before and after use (the tokenizer pickles as its source
        file: :mod:`gputok._loading`), so datasets fingerprints it in milliseconds and a second
        identical ``map`` (in this process or another) loads the cached result.
        """
        return DatasetsMapFunction(self, text_column, pair_column, dict(options, padding=padding))

    def _decode_any(self, ids: Any, skip_special_tokens: bool) -> str | list[str] | None:
        """``decode`` of a 2-D input (a list of strings) or of one id (its text); None for a 1-D input."""
        if isinstance(ids, (torch.Tensor, np.ndarray)):
            if ids.ndim == 2:
                return self.batch_decode(ids, skip_special_tokens=skip_special_tokens)
            if ids.ndim == 0:
                return self.decode([int(ids)], skip_special_tokens=skip_special_tokens)
            return None
        if isinstance(ids, (int, np.integer)):
            return self.decode([int(ids)], skip_special_tokens=skip_special_tokens)
        if len(ids) and not isinstance(ids[0], (int, np.integer)):
            return self.batch_decode(ids, skip_special_tokens=skip_special_tokens)
        return None


for _name in SPECIAL_TOKEN_NAMES:  # bos_token, bos_token_id, eos_token, ...
    setattr(TransformersAPI, _name, _special_token_property(_name))
    setattr(TransformersAPI, _name + "_id", _special_id_property(_name))
del _name

class DatasetsMapFunction:
    """``Tokenizer.datasets_map_fn``'s function: a batch dict of columns -> a dict of list columns."""

    def __init__(self, tokenizer: TransformersAPI, text_column: str, pair_column: str | None, options: dict[str, Any]):
        self.tokenizer, self.text_column, self.pair_column, self.options = tokenizer, text_column, pair_column, options

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        try:
            texts = batch[self.text_column]
            pairs = None if self.pair_column is None else batch[self.pair_column]
        except KeyError as e:
            raise KeyError(f"column {e.args[0]!r} is not in the dataset; its columns: {sorted(batch)}; pass "
                           "datasets_map_fn(text_column=..., pair_column=...)") from None
        # Python lists: datasets writes them to Arrow ~4x faster than one numpy array per row.
        return dict(self.tokenizer(texts, pairs, return_tensors=None, **self.options))


_PER_ROW = frozenset({"overflow_to_sample_mapping", "length"})


def _as_rows(sequences: Any) -> Sequence[Sequence[int]] | torch.Tensor:
    if isinstance(sequences, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(sequences)).long()
    return [row.tolist() if isinstance(row, (torch.Tensor, np.ndarray)) else row for row in sequences]


def _as_lists(value: torch.Tensor, row_offsets: torch.Tensor | None, one_text: bool) -> list:
    """A padded tensor as nested lists, or flat values cut into rows at ``row_offsets``."""
    if row_offsets is None:
        rows = value.tolist()
    else:
        rows = rows_as_lists(value, row_offsets)
    if value.dim() == 3 or (row_offsets is not None and value.dim() == 2):  # offsets: (start, end) tuples
        rows = [[tuple(pair) for pair in row] for row in rows]
    return rows[0] if one_text and len(rows) == 1 else rows
