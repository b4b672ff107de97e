"""Embeddings for an extended vocabulary: the rows of the new tokens, computed instead of random.

``extend_embeddings(old_tokenizer, new_tokenizer, weight)`` takes a model's input embedding matrix
for ``old_tokenizer`` ([old vocab, hidden]) and returns one for ``new_tokenizer`` (whose first ids
are the old ones, as :func:`gputok.extend` makes it): the old rows unchanged, and for each new
token one row by ``method``:

- ``"mean-of-pieces"``: the mean of the old rows of the pieces the old tokenizer gives for the
  token (fast vocabulary transfer, Gee et al. 2022). WordPiece: a word-initial token is encoded by
  the old tokenizer's whole pipeline (a phrase with spaces too), a ``##`` token by the old
  continuation pieces (greedy longest match over them); BPE: the base tokens the new merge joins,
  expanded through the merges down to base tokens. A token the old tokenizer gives no pieces for
  gets the mean of all old rows.
- ``"mean-resizing"``: sampled from a normal distribution with the old rows' mean and
  ``1e-9`` times their covariance (transformers' ``resize_token_embeddings(mean_resizing=True)``;
  the mean itself if that covariance is not positive definite).

Runs on ``weight``'s device (the piece lists are built on the CPU, once). Memory: the new matrix,
plus for mean-resizing the [hidden, hidden] covariance.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .models.bpe import BPE
from .models.wordpiece import WordPiece
from .tokenizer import Tokenizer

METHODS = ("mean-of-pieces", "mean-resizing")
COVARIANCE_SCALE = 1e-9  # transformers' factor for mean-resizing


class ExtendedEmbeddings(NamedTuple):
    weight: torch.Tensor  # [new vocab, hidden]
    added_rows: int
    parameters_added: int  # added_rows * hidden


def _continuation_model(model: WordPiece) -> WordPiece:
    """A WordPiece whose pieces, first or later, are the old continuation pieces (their ids)."""
    prefix = model.continuing_subword_prefix
    vocab = {piece: i for piece, i in model.continuations.items() if piece}
    vocab.update({prefix + piece: i for piece, i in vocab.items()})
    vocab.setdefault(model.unk_token, model.unk_id)
    return WordPiece(vocab, unk_token=model.unk_token, continuing_subword_prefix=prefix,
                     max_input_chars_per_word=model.max_input_chars_per_word)


def _wordpiece_pieces(old: Tokenizer, tokens: list[str]) -> list[list[int]]:
    from .ingest import codepoints
    from .ragged import Ragged

    prefix = old.model.continuing_subword_prefix
    later = [i for i, t in enumerate(tokens) if prefix and t.startswith(prefix) and len(t) > len(prefix)]
    pieces = [[] for _ in tokens]
    later_set = set(later)
    first = [i for i in range(len(tokens)) if i not in later_set]
    for i, ids in zip(first, old._encode_lists([tokens[i] for i in first], add_special_tokens=False)):
        pieces[i] = ids
    if later:
        text = codepoints([tokens[i][len(prefix):] for i in later])
        ids, _ = _continuation_model(old.model).encode_words(Ragged(text.values.int(), text.offsets))
        values, bounds = ids.values.tolist(), ids.offsets.tolist()
        for k, i in enumerate(later):
            pieces[i] = values[bounds[k]:bounds[k + 1]]
    unk = old.model.unk_id
    return [[p for p in ids if p != unk] for ids in pieces]


def _bpe_pieces(old: Tokenizer, new: Tokenizer, new_ids: list[int]) -> list[list[int]]:
    """The base tokens each new BPE token joins, through the new merges."""
    old_size = old.vocab_size
    model = new.to_json()["model"]
    vocab, prefix = model["vocab"], model.get("continuing_subword_prefix") or ""
    made_by = {}
    for left, right in model["merges"]:
        z = vocab[left + (right[len(prefix):] if prefix and right.startswith(prefix) else right)]
        if z >= old_size and z not in made_by:
            made_by[z] = (vocab[left], vocab[right])

    def leaves(token: int) -> list[int]:
        if token < old_size or token not in made_by:
            return [token] if token < old_size else []
        a, b = made_by[token]
        return leaves(a) + leaves(b)

    return [leaves(i) for i in new_ids]


def extend_embeddings(old_tokenizer: Tokenizer, new_tokenizer: Tokenizer, weight: torch.Tensor, *,
                      method: str = "mean-of-pieces", generator: torch.Generator | None = None) -> ExtendedEmbeddings:
    """The embedding matrix for ``new_tokenizer`` from ``weight`` (rows of ``old_tokenizer``'s ids).

    >>> import gputok
    >>> old = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    >>> new = gputok.extend(old, iter(["unaffable unaffable"] * 5), add=1, select="savings", min_frequency=2)
    >>> weight = torch.arange(2.0 * old.vocab_size).reshape(-1, 2)
    >>> out = extend_embeddings(old, new, weight)
    >>> new.id_to_token(12), out.weight[12].tolist(), out.parameters_added
    ('unaffable', [16.0, 17.0], 2)
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; choose one of {list(METHODS)}")
    old_size, new_size = old_tokenizer.vocab_size, new_tokenizer.vocab_size
    if weight.dim() != 2 or weight.shape[0] < old_size:
        raise ValueError(f"weight has shape {tuple(weight.shape)}; expected [rows >= {old_size} (the old vocabulary), "
                         "hidden]")
    for i in range(old_size):
        if old_tokenizer.id_to_token(i) != new_tokenizer.id_to_token(i):
            raise ValueError(f"id {i} is {old_tokenizer.id_to_token(i)!r} in the old tokenizer but "
                             f"{new_tokenizer.id_to_token(i)!r} in the new one; the new tokenizer must keep every "
                             "old id (gputok.extend makes such a tokenizer)")
    old_rows = weight[:old_size]
    new_ids = list(range(old_size, new_size))
    hidden = weight.shape[1]
    mean = old_rows.float().mean(0)
    if method == "mean-resizing":
        added = _sampled_rows(old_rows.float(), mean, len(new_ids), generator)
    else:
        if isinstance(old_tokenizer.model, BPE):
            pieces = _bpe_pieces(old_tokenizer, new_tokenizer, new_ids)
        else:
            pieces = _wordpiece_pieces(old_tokenizer, [new_tokenizer.id_to_token(i) for i in new_ids])
        flat = torch.tensor([p for ps in pieces for p in ps], dtype=torch.int64, device=weight.device)
        lengths = torch.tensor([len(ps) for ps in pieces], dtype=torch.int64, device=weight.device)
        row = torch.repeat_interleave(torch.arange(len(pieces), device=weight.device), lengths)
        sums = torch.zeros(len(pieces), hidden, dtype=torch.float32, device=weight.device)
        sums.index_add_(0, row, old_rows.float().index_select(0, flat))
        added = torch.where((lengths > 0)[:, None], sums / lengths.clamp(min=1)[:, None].float(), mean)
    out = torch.cat([old_rows, added.to(weight.dtype)])
    return ExtendedEmbeddings(out, len(new_ids), len(new_ids) * hidden)


def _sampled_rows(old_rows: torch.Tensor, mean: torch.Tensor, count: int,
                  generator: torch.Generator | None) -> torch.Tensor:
    centered = old_rows - mean
    covariance = centered.T @ centered / old_rows.shape[0]
    try:
        factor = torch.linalg.cholesky(COVARIANCE_SCALE * covariance.double()).float()
    except RuntimeError:  # not positive definite: the mean, as transformers does
        return mean.expand(count, -1).clone()
    noise = torch.randn(count, mean.numel(), generator=generator, device=mean.device, dtype=torch.float32)
    return mean + noise @ factor.T
