"""DataLoader integration: tokenize inside the training process, straight onto the model's device.

>>> import gputok, torch
>>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
>>> loader = torch.utils.data.DataLoader(["hello world", "hello"], batch_size=2,
...                                      collate_fn=gputok.data.Collate(tok, max_length=8))
>>> next(iter(loader))["input_ids"].tolist()
[[1, 5, 10, 2], [1, 5, 2, 0]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .tokenizer import Tokenizer


class Collate:
    """A ``collate_fn``: a list of texts (or of dicts with ``text_field``) -> a dict of tensors.

    Keyword options are passed to ``Tokenizer.__call__`` (``max_length`` turns truncation on).
    Other keys of dict samples that hold numbers are stacked into tensors too (labels, say).
    """

    def __init__(self, tokenizer: Tokenizer, *, text_field: str = "text", pair_field: str | None = None,
                 max_length: int | None = None, device: torch.device | str | None = None,
                 sample_alpha: float | None = None, generator: torch.Generator | None = None, **options: Any) -> None:
        """``sample_alpha``: a Unigram tokenizer samples a fresh segmentation of every word each
        time (subword regularization, as SentencePiece's ``enable_sampling``); ``generator``
        (on ``device``) makes the samples reproducible."""
        self.tokenizer, self.text_field, self.pair_field = tokenizer, text_field, pair_field
        self.device = device
        if sample_alpha is not None and not hasattr(tokenizer.model, "sampling"):
            raise ValueError(f"sample_alpha needs a Unigram tokenizer; this one has a {type(tokenizer.model).__name__} "
                             "model, which has a single segmentation")
        self.sample_alpha, self.generator = sample_alpha, generator
        self.options = dict(options)
        if max_length is not None:
            self.options.setdefault("truncation", True)
            self.options["max_length"] = max_length

    def __call__(self, samples: Sequence[str | bytes | Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if samples and isinstance(samples[0], Mapping):
            texts = [s[self.text_field] for s in samples]
            pairs = [s[self.pair_field] for s in samples] if self.pair_field else None
            extra = {k: torch.tensor([s[k] for s in samples], device=self.device)
                     for k, v in samples[0].items()
                     if k not in (self.text_field, self.pair_field) and isinstance(v, (int, float, bool))}
        else:
            texts, pairs, extra = list(samples), None, {}
        if self.sample_alpha is not None:
            with self.tokenizer.model.sampling(self.sample_alpha, self.generator):
                batch = self.tokenizer(texts, pairs, device=self.device, **self.options)
        else:
            batch = self.tokenizer(texts, pairs, device=self.device, **self.options)
        batch.update(extra)
        return batch


# From corpus to training batches (issue 19): streaming, packing, token shards.
from .packing import Packer, PackingCollate  # noqa: E402
from .shards import TokenShards  # noqa: E402
from .stream import TextStream  # noqa: E402
