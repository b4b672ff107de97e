"""DataLoader integration: tokenize inside the training process, straight onto the model's device.

>>> import gputok, torch
>>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
>>> loader = torch.utils.data.DataLoader(["hello world", "hello"], batch_size=2,
...                                      collate_fn=gputok.data.Collate(tok, max_length=8))
>>> next(iter(loader))["input_ids"].tolist()
[[1, 5, 10, 2], [1, 5, 2, 0]]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .tokenizer import Tokenizer


class Collate:
    """A ``collate_fn``: a list of rows -> a dict of tensors, nothing dropped.

    Rows are texts (``str``/``bytes``), dicts (the text under ``text_field``, a pair's second text
    under ``pair_field``), or tuples/lists read by position with ``fields`` (names given once, e.g.
    ``("text", "label")``, the default for 2-tuples, or ``("text", "pair", "label")``; "pair" is
    the second text). Keyword options are passed to ``Tokenizer.__call__`` (``max_length`` turns
    truncation on).

    Every other field of the rows is kept: numbers, lists of numbers, numpy arrays and tensors
    become one tensor (stacked; 1-D rows of different lengths padded at the end with ``-100`` for
    labels, as transformers' ``DataCollatorForTokenClassification``, else 0); strings and any other
    objects are passed through as a list. ``rename`` maps field names to output keys: by default
    ``label`` and ``label_ids`` become ``labels``, as transformers' ``DataCollatorWithPadding``
    does (``rename={}`` keeps them).

    >>> import gputok
    >>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    >>> batch = Collate(tok)([("hello world", [1, 0]), ("hello", [0, 1])])
    >>> batch["input_ids"].tolist(), batch["labels"].tolist()
    ([[1, 5, 10, 2], [1, 5, 2, 0]], [[1, 0], [0, 1]])
    """

    def __init__(self, tokenizer: Tokenizer, *, text_field: str = "text", pair_field: str | None = None,
                 fields: Sequence[str] | None = None, rename: Mapping[str, str] | None = None,
                 max_length: int | None = None, device: torch.device | str | None = None,
                 sample_alpha: float | None = None, generator: torch.Generator | None = None,
                 sample_nbest_size: int = -1, **options: Any) -> None:
        """``sample_alpha``: a Unigram tokenizer samples a fresh segmentation of every word each
        time (subword regularization, as SentencePiece's ``enable_sampling``); ``generator``
        (on ``device``) makes the samples reproducible; ``sample_nbest_size > 1``: each text's
        segmentation drawn among its n best instead (SentencePiece's ``nbest_size``)."""
        self.tokenizer, self.text_field, self.pair_field = tokenizer, text_field, pair_field
        self.fields = None if fields is None else tuple(fields)
        if self.fields is not None and text_field not in self.fields:
            raise ValueError(f"fields={self.fields!r} names no {text_field!r}; name the text's position "
                             f"{text_field!r} (or pass text_field=)")
        if self.fields is not None and "pair" in self.fields and pair_field is None:
            self.pair_field = "pair"
        self.rename = dict(LABEL_NAMES if rename is None else rename)
        self.device = device
        if sample_alpha is not None and not hasattr(tokenizer.model, "sampling"):
            raise ValueError(f"sample_alpha needs a Unigram tokenizer; this one has a {type(tokenizer.model).__name__} "
                             "model, which has a single segmentation")
        self.sample_alpha, self.generator, self.sample_nbest_size = sample_alpha, generator, sample_nbest_size
        self.options = dict(options)
        if max_length is not None:
            self.options.setdefault("truncation", True)
            self.options["max_length"] = max_length

    def __call__(self, samples: Sequence[str | bytes | Mapping[str, Any] | Sequence[Any]]) -> dict[str, Any]:
        rows = [self._as_dict(s) for s in samples]
        texts = [r[self.text_field] for r in rows]
        pairs = [r[self.pair_field] for r in rows] if self.pair_field else None
        if self.sample_alpha is not None:
            with self.tokenizer.model.sampling(self.sample_alpha, self.generator, nbest_size=self.sample_nbest_size):
                batch: dict[str, Any] = self.tokenizer(texts, pairs, device=self.device, **self.options)
        else:
            batch = self.tokenizer(texts, pairs, device=self.device, **self.options)
        names = [k for k in rows[0] if k not in (self.text_field, self.pair_field)] if rows else []
        for name in names:
            key = self.rename.get(name, name)
            if key in batch:
                raise ValueError(f"field {name!r} would overwrite the tokenizer's {key!r}; rename it "
                                 f"(rename={{{name!r}: 'other_name'}})")
            try:
                values = [r[name] for r in rows]
            except KeyError:
                raise ValueError(f"field {name!r} is in the first row but not in every row; give every row "
                                 "the same fields") from None
            batch[key] = _field_batch(values, -100 if key in LABEL_KEYS else 0, self.device)
        return batch

    def _as_dict(self, sample: Any) -> Mapping[str, Any]:
        if isinstance(sample, (str, bytes)):
            return {self.text_field: sample}
        if isinstance(sample, Mapping):
            return sample
        if isinstance(sample, (tuple, list)):
            fields = self.fields or (_DEFAULT_FIELDS if len(sample) == 2 else None)
            if fields is None or len(fields) != len(sample):
                raise ValueError(f"a row of {len(sample)} items {_short(sample)}: pass Collate(..., fields=...) "
                                 "naming each position, e.g. fields=('text', 'label') or ('text', 'pair', 'label')")
            return dict(zip(fields, sample))
        raise TypeError(f"a row of type {type(sample).__name__}: rows are texts, dicts or tuples/lists")


# transformers' DataCollatorWithPadding renames these to the key its models read.
LABEL_NAMES = {"label": "labels", "label_ids": "labels"}
LABEL_KEYS = frozenset({"label", "labels", "label_ids"})
_DEFAULT_FIELDS = ("text", "label")


def _short(sample: Any) -> str:
    text = repr(sample)
    return text if len(text) <= 60 else text[:57] + "..."


def _field_batch(values: list[Any], pad_value: int, device: torch.device | str | None) -> torch.Tensor | list[Any]:
    """One field of every row as a tensor (numbers, lists of numbers, arrays, tensors: stacked,
    1-D rows of different lengths padded with ``pad_value``), else the values as a list."""
    if all(isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) for v in values):
        return torch.tensor(values, device=device)
    if not all(isinstance(v, (torch.Tensor, np.ndarray, list, tuple)) for v in values):
        return list(values)
    try:
        tensors = [v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v)) for v in values]
    except (TypeError, ValueError, RuntimeError):  # strings, ragged nesting, objects: kept as they are
        return list(values)
    if any(t.dtype not in _NUMERIC or t.dim() != tensors[0].dim() for t in tensors):
        return list(values)
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    tensors = [t.to(dtype) for t in tensors]
    if all(t.shape == tensors[0].shape for t in tensors):
        return torch.stack(tensors).to(device)
    if tensors[0].dim() == 1:
        return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=pad_value).to(device)
    return list(values)


_NUMERIC = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                      torch.bfloat16, torch.float32, torch.float64})



# From corpus to training batches (issue 19): streaming, packing, token shards.
from .packing import Packer, PackingCollate  # noqa: E402
from .shards import TokenShards  # noqa: E402
from .stream import TextStream  # noqa: E402

__all__ = ["Collate", "Packer", "PackingCollate", "TokenShards", "TextStream"]
