"""SentencePiece's whitespace rules on CUDA, one text per lane.

Numba twin: ``sentencepiece_whitespace.whitespace_rules_numba`` (the same rules, ``normalizer.cc``):
with ``remove_extra_whitespaces`` the spaces a unit's rewrite starts with go where the unit
follows a space (or starts the text), and trailing spaces go (and a trailing '▁'
when escaping); with ``add_dummy_prefix`` a non-empty text gets a leading space ('▁' when
escaping), whose unit is its first kept character's; with ``escape_whitespaces`` spaces become '▁'.
The twin drops the trailing characters after its first pass; here the first pass finds where they
start (after the last character that is neither a space nor, when escaping, '▁': the only
characters the first rule drops are spaces), and the second writes.

Layout (no host sync): text ``t`` is read from ``in_expand * offsets[t] + in_gap * t`` (its length
``in_lengths[t]``; its units from ``units`` where ``with_units``, else each character is its own
unit), and written from ``out_expand * offsets[t] + 2 * t`` with its length in ``lengths[t]``: the
layout of ``charsmap.charsmap_rewrite_triton``'s output, which leaves room for the dummy prefix.
Compacting row ``t`` gives the twin's row. The twin's source units are not written (the CUDA path
reports no offsets yet).
Memory: the output (int32 per place).
"""

import torch
import triton
import triton.language as tl

SPACE = tl.constexpr(32)
ESCAPED_SPACE = tl.constexpr(0x2581)


@triton.jit(do_not_specialize=["texts", "in_expand", "in_gap", "out_expand", "with_units", "add_dummy_prefix",
                               "remove_extra_whitespaces", "escape_whitespaces"])
def _whitespace_rules_kernel(in_ptr, in_units_ptr, offsets_ptr, in_lengths_ptr, out_ptr, lengths_ptr,
                             texts, in_expand, in_gap, out_expand, with_units, add_dummy_prefix,
                             remove_extra_whitespaces, escape_whitespaces, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    start = tl.load(offsets_ptr + text, mask=inside, other=0)
    lo = in_expand * start + in_gap * text
    n = tl.load(in_lengths_ptr + text, mask=inside, other=0)
    # lane flags, not constexprs: one compiled kernel serves every normalizer spec
    zero = tl.zeros([BLOCK], dtype=tl.int32)
    units_given = (zero + with_units) != 0
    prefix = (zero + add_dummy_prefix) != 0
    squeeze = (zero + remove_extra_whitespaces) != 0
    escape = (zero + escape_whitespaces) != 0

    # Pass 1: where the trailing run starts (the end of the kept text).
    end = tl.zeros([BLOCK], dtype=tl.int64)
    longest = tl.max(n, 0)
    for i in range(0, longest):
        live = inside & (i < n)
        c = tl.load(in_ptr + lo + i, mask=live, other=SPACE)
        blank = (c == SPACE) | (escape & (c == ESCAPED_SPACE))
        end = tl.where(live & ~blank, i + 1, end)
    end = tl.where(squeeze, end, n)

    # Pass 2: the kept characters, escaped, after the dummy prefix.
    at = out_expand * start + 2 * text
    first = at
    written = tl.zeros([BLOCK], dtype=tl.int64)  # kept characters so far
    previous = tl.full([BLOCK], SPACE, dtype=tl.int32)
    previous_unit = tl.full([BLOCK], -1, dtype=tl.int64)
    non_space_in_unit = tl.zeros([BLOCK], dtype=tl.int1)
    unit_after_space = tl.zeros([BLOCK], dtype=tl.int1)  # whether the current unit follows a space
    dummy = tl.where(escape, ESCAPED_SPACE, SPACE)
    for i in range(0, longest):
        live = inside & (i < end)
        c = tl.load(in_ptr + lo + i, mask=live, other=0)
        unit = tl.where(units_given, tl.load(in_units_ptr + lo + i, mask=live & units_given, other=0), i)
        non_space_in_unit = non_space_in_unit & (unit == previous_unit)
        unit_after_space = tl.where(unit == previous_unit, unit_after_space, previous == SPACE)
        space = c == SPACE
        dropped = squeeze & space & unit_after_space & ~non_space_in_unit
        keep = live & ~dropped
        leading = keep & prefix & (written == 0)
        tl.store(out_ptr + at, dummy, mask=leading)
        at = tl.where(leading, at + 1, at)
        tl.store(out_ptr + at, tl.where(space & escape, ESCAPED_SPACE, c), mask=keep)
        at = tl.where(keep, at + 1, at)
        written = tl.where(keep, written + 1, written)
        non_space_in_unit = non_space_in_unit | (live & ~space)
        previous = tl.where(live, c, previous)
        previous_unit = tl.where(live, unit, previous_unit)
    # Without remove_extra_whitespaces SentencePiece writes the dummy prefix to every non-empty
    # text, one the charsmap rewrites to nothing too (the twin's caller adds it there:
    # ``SentencePieceNormalizer.with_emptied_prefix``).
    raw = tl.load(offsets_ptr + text + 1, mask=inside, other=0) - start
    emptied = inside & prefix & ~squeeze & (written == 0) & (raw > 0)
    tl.store(out_ptr + at, dummy, mask=emptied)
    at = tl.where(emptied, at + 1, at)
    tl.store(lengths_ptr + text, at - first, mask=inside)


def whitespace_rules_triton(values: torch.Tensor, units: torch.Tensor | None, offsets: torch.Tensor,
                            in_lengths: torch.Tensor, *, chars: int, in_expand: int, in_gap: int, out_expand: int,
                            add_dummy_prefix: bool, remove_extra_whitespaces: bool, escape_whitespaces: bool
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(int32 codepoints, ``out_expand`` places per text character plus two per text; int64 each
    text's length), text ``t`` read from ``values[in_expand * offsets[t] + in_gap * t:]``
    (``in_lengths[t]`` characters) and written from ``out_expand * offsets[t] + 2 * t``.
    ``units``: each character's unit (None: each its own); ``chars``: ``offsets[-1]``, the texts'
    characters before any rewrite (known to the caller: no sync); ``out_expand >= in_expand``."""
    texts = offsets.numel() - 1
    device = values.device
    out = torch.empty(max(out_expand * chars + 2 * texts, 1), dtype=torch.int32, device=device)
    lengths = torch.empty(texts, dtype=torch.int64, device=device)
    if texts:
        block = 64  # as the other per-text kernels
        _whitespace_rules_kernel[(triton.cdiv(texts, block),)](
            values, units if units is not None else in_lengths, offsets, in_lengths, out, lengths, texts,
            in_expand, in_gap, out_expand, int(units is not None), int(add_dummy_prefix),
            int(remove_extra_whitespaces), int(escape_whitespaces), BLOCK=block)
    return out, lengths
