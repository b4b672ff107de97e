"""Post-processing on tensors: truncation, special-token templates, padding.

Rows of the output are described by ranges into the flat token arrays of the batch
(``a_start``, ``a_len`` and optionally ``b_start``, ``b_len``), so truncation with stride can
emit several rows per sample without copying tokens, and assembling a template is one scatter
per template item, vectorized over the batch.

Semantics follow huggingface ``tokenizers``: truncation first (max_length less the special
tokens the template adds; ``longest_first`` splits the budget as the reference does, ``only_first``
/ ``only_second`` cut one sequence; stride windows step by ``max_length - stride``), then the
template (``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]`` with token type ids), then padding.

The functions here are the torch path (CUDA tensors, and the reference); on the CPU,
``Tokenizer.__call__`` runs ``gputok.kernels.postprocess_numba`` instead: ``truncate_rows`` (this
module's :func:`truncate`, same checks and errors) and one kernel writing the padded (or ragged)
output arrays directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .ragged import offsets_from_lengths, row_ids

TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


@dataclass(frozen=True)
class TemplateItem:
    sequence: int | None  # 0 for A, 1 for B, None for a special token
    token: str | None
    token_id: int | None
    type_id: int


class TemplateProcessing:
    """huggingface's TemplateProcessing: special tokens around one or two sequences, with type ids.

    ``single`` and ``pair`` are lists of :class:`TemplateItem`. ``BertProcessing`` files are read
    into the same class and written back with their own type.
    """

    type = "TemplateProcessing"

    def __init__(self, single: list[TemplateItem], pair: list[TemplateItem], *, spec: dict | None = None):
        self.single, self.pair = single, pair
        self._spec = spec

    @classmethod
    def bert(cls, cls_token: tuple[str, int], sep_token: tuple[str, int]) -> TemplateProcessing:
        """huggingface's BertProcessing: ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``, B's type id 1."""
        c = TemplateItem(None, cls_token[0], cls_token[1], 0)
        single = [c, TemplateItem(0, None, None, 0), TemplateItem(None, sep_token[0], sep_token[1], 0)]
        pair = single + [TemplateItem(1, None, None, 1), TemplateItem(None, sep_token[0], sep_token[1], 1)]
        spec = {"type": "BertProcessing", "sep": list(sep_token), "cls": list(cls_token)}
        return cls(single, pair, spec=spec)

    @classmethod
    def roberta(cls, spec: dict[str, Any]) -> TemplateProcessing:
        """huggingface's RobertaProcessing: ``<s> A </s>`` and ``<s> A </s> </s> B </s>``, every
        type id 0 (its offset trimming is :class:`OffsetTrim`)."""
        (cls_token, cls_id), (sep_token, sep_id) = spec["cls"], spec["sep"]
        c, s = TemplateItem(None, cls_token, cls_id, 0), TemplateItem(None, sep_token, sep_id, 0)
        single = [c, TemplateItem(0, None, None, 0), s]
        return cls(single, single + [s, TemplateItem(1, None, None, 0), s], spec=spec)

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> TemplateProcessing:
        if spec["type"] == "BertProcessing":
            return cls.bert(tuple(spec["cls"]), tuple(spec["sep"]))
        if spec["type"] == "RobertaProcessing":
            return cls.roberta(spec)
        special = spec.get("special_tokens", {})

        def items(template: list[dict]) -> list[TemplateItem]:
            out = []
            for entry in template:
                if "Sequence" in entry:
                    seq = entry["Sequence"]
                    out.append(TemplateItem({"A": 0, "B": 1}[seq["id"]], None, None, seq["type_id"]))
                else:
                    tok = entry["SpecialToken"]
                    for token, token_id in zip(special[tok["id"]]["tokens"], special[tok["id"]]["ids"]):
                        out.append(TemplateItem(None, token, token_id, tok["type_id"]))
            return out

        return cls(items(spec["single"]), items(spec["pair"]), spec=spec)

    def to_json(self) -> dict[str, Any]:
        return self._spec

    def num_added(self, pair: bool) -> int:
        return sum(item.sequence is None for item in (self.pair if pair else self.single))


@dataclass(frozen=True)
class OffsetTrim:
    """The offset trimming of huggingface's ByteLevel post-processor (and RobertaProcessing's
    ``trim_offsets``): a token's span loses the spaces (``Ġ`` or whitespace) its text starts and
    ends with, except the one prefix space of a text's first token when ``add_prefix_space``.
    Applied to every token's span at once (:meth:`apply`); ids are unchanged."""

    add_prefix_space: bool

    def apply(self, spans: torch.Tensor, ids: torch.Tensor, first_of_text: torch.Tensor,
              leading: torch.Tensor, trailing: torch.Tensor) -> torch.Tensor:
        """``spans`` [tokens, 2] trimmed; ``leading`` / ``trailing``: each id's count of space
        characters at either end of its token; ``first_of_text``: the token is its text's first."""
        if not spans.numel():
            return spans
        start, end = spans[:, 0], spans[:, 1]
        lead, trail = leading[ids], trailing[ids]
        if self.add_prefix_space:
            lead = torch.where((first_of_text | (start == 0)) & (lead == 1), 0, lead)
        start = torch.where(lead > 0, torch.minimum(start + lead, end), start)
        end = torch.where((trail > 0) & (end >= trail), torch.maximum(end - trail, start), end)
        return torch.stack([start, end], 1)


def from_json(spec: dict[str, Any] | None) -> tuple[TemplateProcessing | None, OffsetTrim | None]:
    """A tokenizer.json post-processor as the template that adds special tokens (None: none) and
    the offset trimming (None: none). huggingface's Sequence applies its processors in turn: at most one of
    them adds special tokens, and at most one trims offsets (trimming twice would move offsets
    twice; no published file does that)."""
    if spec is None:
        return None, None
    kind = spec.get("type")
    if kind not in POST_PROCESSORS:
        raise ValueError(f"unknown post_processor type {kind!r}; known types: {sorted(POST_PROCESSORS)}")
    if kind == "Sequence":
        return _sequence(spec)
    trim = None
    if kind in ("ByteLevel", "RobertaProcessing") and spec.get("trim_offsets", True):
        trim = OffsetTrim(bool(spec.get("add_prefix_space", True)))
    return (None if kind == "ByteLevel" else TemplateProcessing.from_json(spec)), trim


def _sequence(spec: dict[str, Any]) -> tuple[TemplateProcessing | None, OffsetTrim | None]:
    """huggingface's Sequence: its processors in turn; at most one of them adds special tokens and
    at most one trims offsets."""
    parts = [from_json(p) for p in spec.get("processors") or []]
    templates = [t for t, _ in parts if t is not None]
    trims = [t for _, t in parts if t is not None]
    if len(templates) > 1 or len(trims) > 1:
        raise ValueError("post_processor Sequence: gputok supports at most one processor that adds special tokens "
                         "(TemplateProcessing, BertProcessing, RobertaProcessing) and at most one that trims "
                         f"offsets (ByteLevel, RobertaProcessing with trim_offsets); this one has {len(templates)} "
                         f"and {len(trims)}")
    return (templates[0] if templates else None), (trims[0] if trims else None)


# The post-processor types of tokenizer.json, and the code that reads each (its docstring says how).
POST_PROCESSORS = {"TemplateProcessing": TemplateProcessing, "BertProcessing": TemplateProcessing.bert,
                   "RobertaProcessing": TemplateProcessing.roberta, "ByteLevel": OffsetTrim, "Sequence": _sequence}


@dataclass
class Rows:
    """Output rows as token ranges: row r holds A[a_start:a_start+a_len] (and B likewise)."""

    sample: torch.Tensor  # [rows] the input sample of each row (overflow rows repeat it)
    a_start: torch.Tensor
    a_len: torch.Tensor
    b_start: torch.Tensor | None = None
    b_len: torch.Tensor | None = None


def _windows(length: torch.Tensor, keep: torch.Tensor, stride: int, overflow: bool):
    """Windows of ``keep`` tokens stepping by ``keep - stride`` until one reaches the end.

    Returns (row's sample index, window start, window length). Without overflow: the first window.
    """
    if not overflow:
        return torch.arange(length.numel(), device=length.device), torch.zeros_like(length), torch.minimum(length, keep)
    if bool((stride >= keep[length > keep]).any()):
        raise_truncation_error(1, None, stride)
    step = (keep - stride).clamp(min=1)
    count = torch.where(length > keep, (length - keep + step - 1) // step + 1, 1)
    sample = torch.repeat_interleave(torch.arange(length.numel(), device=length.device), count)
    index = torch.arange(sample.numel(), device=length.device) - offsets_from_lengths(count)[:-1][sample]
    start = index * step[sample]
    return sample, start, torch.minimum(keep[sample], length[sample] - start)


def check_truncation(max_length: int, strategy: str, pairs: bool, overflow: bool) -> None:
    """The errors :func:`truncate` raises before looking at any lengths."""
    if max_length < 0:
        raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
    if not pairs and strategy == "only_second":
        raise ValueError("truncation='only_second' needs pairs of texts (text_pair=...)")
    if pairs and strategy == "longest_first" and overflow:
        raise ValueError("overflowing rows are not defined for pairs with truncation='longest_first' "
                         "(as in transformers); choose 'only_first' or 'only_second'")


def raise_truncation_error(error: int, strategy: str | None, stride: int) -> None:
    """The errors of the lengths (the truncation kernel's codes): 1 a stride too long, 2 a pair
    that cannot fit."""
    if error == 2:
        raise ValueError(f"truncation={strategy!r} cannot fit a pair into max_length: the other "
                         "sequence alone is too long; use 'longest_first' or a larger max_length")
    raise ValueError(f"stride={stride} must be smaller than the tokens left per row after truncation")


def truncate(a_lengths: torch.Tensor, b_lengths: torch.Tensor | None, *, max_length: int | None,
             strategy: str = "longest_first", stride: int = 0, overflow: bool = False) -> Rows:
    """Rows after truncation to ``max_length`` tokens (special tokens already subtracted).

    >>> r = truncate(torch.tensor([5, 2]), None, max_length=3, stride=1, overflow=True)
    >>> r.sample.tolist(), r.a_start.tolist(), r.a_len.tolist()
    ([0, 0, 1], [0, 2, 0], [3, 3, 2])
    """
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"unknown truncation strategy {strategy!r}; choose one of {TRUNCATION_STRATEGIES}")
    n = a_lengths.numel()
    zeros = torch.zeros_like(a_lengths)
    if max_length is None:
        return Rows(torch.arange(n, device=a_lengths.device), zeros, a_lengths,
                    None if b_lengths is None else zeros, b_lengths)
    check_truncation(max_length, strategy, b_lengths is not None, overflow)
    if b_lengths is None:
        sample, start, length = _windows(a_lengths, torch.full_like(a_lengths, max_length), stride, overflow)
        return Rows(sample, start, length)
    over = (a_lengths + b_lengths) > max_length
    if strategy == "longest_first":
        n1, n2 = torch.minimum(a_lengths, b_lengths), torch.maximum(a_lengths, b_lengths)
        n2 = torch.where(n1 > max_length, n1, torch.maximum(n1, max_length - n1))
        both = (n1 + n2) > max_length
        n1 = torch.where(both, max_length // 2, n1)
        n2 = torch.where(both, max_length // 2 + max_length % 2, n2)
        swap = a_lengths > b_lengths
        keep_a, keep_b = torch.where(swap, n2, n1), torch.where(swap, n1, n2)
        keep_a = torch.where(over, torch.minimum(keep_a, a_lengths), a_lengths)
        keep_b = torch.where(over, torch.minimum(keep_b, b_lengths), b_lengths)
        return Rows(torch.arange(n, device=a_lengths.device), zeros, keep_a, zeros.clone(), keep_b)
    target, other = (a_lengths, b_lengths) if strategy == "only_first" else (b_lengths, a_lengths)
    budget = max_length - other
    if bool((over & (budget <= 0)).any()):
        raise_truncation_error(2, strategy, stride)
    keep = torch.where(over, budget, target)
    sample, start, length = _windows(target, keep, stride, overflow)
    other_len = other[sample]
    if strategy == "only_first":
        return Rows(sample, start, length, torch.zeros_like(start), other_len)
    return Rows(sample, torch.zeros_like(start), other_len, start, length)


def assemble(template: list[TemplateItem], rows: Rows, a_offsets: torch.Tensor,
             b_offsets: torch.Tensor | None, a_count: int):
    """Lay out each row as the template says.

    Returns ``(row_offsets, source, special_ids, type_ids)``: ``source`` indexes the concatenation
    of A's and B's flat tokens (B's shifted by ``a_count``), -1 for special tokens, whose ids are
    in ``special_ids``.
    """
    device = rows.a_len.device
    num_rows = rows.a_len.numel()
    item_lengths = []
    for item in template:
        if item.sequence is None:
            item_lengths.append(torch.ones(num_rows, dtype=torch.int64, device=device))
        else:
            item_lengths.append(rows.a_len if item.sequence == 0 else rows.b_len)
    lengths = torch.stack(item_lengths, 1) if item_lengths else torch.zeros(num_rows, 0, dtype=torch.int64, device=device)
    row_offsets = offsets_from_lengths(lengths.sum(1))
    total = int(row_offsets[-1])
    item_starts = row_offsets[:-1, None] + torch.cumsum(lengths, 1) - lengths
    source = torch.full((total,), -1, dtype=torch.int64, device=device)
    special_ids = torch.zeros(total, dtype=torch.int64, device=device)
    type_ids = torch.zeros(total, dtype=torch.int64, device=device)
    for k, item in enumerate(template):
        if item.sequence is None:
            special_ids[item_starts[:, k]] = item.token_id
            type_ids[item_starts[:, k]] = item.type_id
            continue
        seq_len = lengths[:, k]
        offsets = offsets_from_lengths(seq_len)
        count = int(offsets[-1])
        row = row_ids(offsets, count)
        within = torch.arange(count, device=device) - offsets[:-1][row]
        if item.sequence == 0:
            src = a_offsets[rows.sample[row]] + rows.a_start[row] + within
        else:
            src = a_count + b_offsets[rows.sample[row]] + rows.b_start[row] + within
        position = item_starts[row, k] + within
        source[position] = src
        type_ids[position] = item.type_id
    return row_offsets, source, special_ids, type_ids


def filled_cells(lengths: torch.Tensor, width: int, *, left: bool = False) -> torch.Tensor:
    """[rows, width] bool: the cells that hold a token when rows of ``lengths`` are padded to
    ``width`` on the right (or the left): the attention mask, and :func:`pad`'s layout."""
    cols = torch.arange(width, device=lengths.device)
    return cols >= (width - lengths)[:, None] if left else cols < lengths[:, None]


def pad(values: torch.Tensor, filled: torch.Tensor, *, pad_value: int) -> torch.Tensor:
    """[rows, width] tensor of ragged rows (``values`` flat, in row order) laid into the ``filled``
    cells (:func:`filled_cells`), ``pad_value`` elsewhere.

    >>> pad(torch.tensor([1, 2, 3]), filled_cells(torch.tensor([2, 1]), 3), pad_value=0).tolist()
    [[1, 2, 0], [3, 0, 0]]
    """
    # One masked_scatter (row-major order is the ragged order): ~2.5x faster than scattering to
    # (row, col) pairs on CPU.
    return torch.full(filled.shape, pad_value, dtype=values.dtype, device=values.device).masked_scatter_(filled, values)
