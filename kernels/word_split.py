"""Words by character class on CUDA (BertPreTokenizer, WhitespaceSplit), one text per lane.

(And :func:`split_before_marks_triton`: SentencePiece BPE's words, before each run of '▁'.)

Numba twin: ``word_split_numba.split_by_class`` (the same per-text state machine): runs of WORD
characters are words, each PUNCTUATION character is a word of its own, SPACE characters separate
words and are dropped; a value that is no codepoint reads as U+FFFD's class.

Layout (no host sync): text ``t`` is ``values[row_starts[t]:row_starts[t] + row_lengths[t]]``
(the texts may lie apart, as :func:`gputok.kernels.normalize.rewrite_table_triton` leaves them).
A lane writes its text's words into the text's own slots (``row_starts[t] + k``: a text has at most
one word per character, so the texts' slots never overlap), then takes the next ``counts[t]``
places of the packed word arrays with one atomic add on ``total`` (``word_base[t]``) and copies its
words there, as ``word_starts``/``word_ends`` (int64 indices into ``values``). The texts' ranges
follow one another in whatever order the lanes reach the counter; places past the total hold empty
words (start = end = 0), so the next kernel runs one lane per place of an upper-bound grid with the
real words packed into its first blocks. Words ``word_base[t] + k``, ``k < counts[t]``, are the
twin's words of text ``t`` in order.
Memory: four int64 per element of ``values``.
"""

import torch
import triton
import triton.language as tl

WORD = tl.constexpr(0)
PUNCTUATION = tl.constexpr(2)
REPLACEMENT = tl.constexpr(0xFFFD)


@triton.jit(do_not_specialize=["texts", "limit"])
def _split_by_class_kernel(values_ptr, row_starts_ptr, row_lengths_ptr, classes_ptr, slot_starts_ptr, slot_ends_ptr,
                           total_ptr, word_base_ptr, word_starts_ptr, word_ends_ptr, counts_ptr, texts, limit,
                           BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    start = tl.load(row_starts_ptr + text, mask=inside, other=0)
    size = tl.load(row_lengths_ptr + text, mask=inside, other=0)
    w = start  # the next slot
    open_at = tl.full([BLOCK], -1, dtype=tl.int64)  # start of the open WORD run, -1: none
    for i in range(0, tl.max(size, 0)):
        live = inside & (i < size)
        p = start + i
        c = tl.load(values_ptr + p, mask=live, other=0).to(tl.int64)
        c = tl.where((c < 0) | (c >= limit), REPLACEMENT, c)
        k = tl.load(classes_ptr + c, mask=live, other=0).to(tl.int32)
        is_word = live & (k == WORD)
        opens = is_word & (open_at < 0)
        open_at = tl.where(opens, p, open_at)
        closes = live & ~is_word & (open_at >= 0)
        tl.store(slot_starts_ptr + w, open_at, mask=closes)
        tl.store(slot_ends_ptr + w, p, mask=closes)
        w = tl.where(closes, w + 1, w)
        open_at = tl.where(closes, -1, open_at)
        punct = live & (k == PUNCTUATION)
        tl.store(slot_starts_ptr + w, p, mask=punct)
        tl.store(slot_ends_ptr + w, p + 1, mask=punct)
        w = tl.where(punct, w + 1, w)
    last = inside & (open_at >= 0)
    tl.store(slot_starts_ptr + w, open_at, mask=last)
    tl.store(slot_ends_ptr + w, start + size, mask=last)
    count = tl.where(last, w + 1, w) - start
    pack_words(inside, text, start, count, slot_starts_ptr, slot_ends_ptr, total_ptr, word_base_ptr, word_starts_ptr,
               word_ends_ptr, counts_ptr, BLOCK)


@triton.jit
def pack_words(inside, text, first, count, slot_starts_ptr, slot_ends_ptr, total_ptr, word_base_ptr, word_starts_ptr,
               word_ends_ptr, counts_ptr, BLOCK: tl.constexpr):
    """Each lane's ``count`` words, in its slots from ``first``, to the next places of the packed
    arrays (one atomic add on ``total``); their first place to ``word_base``, their number to ``counts``."""
    tl.store(counts_ptr + text, count, mask=inside)
    base = tl.atomic_add(total_ptr + tl.zeros([BLOCK], dtype=tl.int64), count, mask=inside)
    tl.store(word_base_ptr + text, base, mask=inside)
    for k in range(0, tl.max(count, 0)):
        move = inside & (k < count)
        tl.store(word_starts_ptr + base + k, tl.load(slot_starts_ptr + first + k, mask=move, other=0), mask=move)
        tl.store(word_ends_ptr + base + k, tl.load(slot_ends_ptr + first + k, mask=move, other=0), mask=move)


@triton.jit(do_not_specialize=["texts", "expand", "mark"])
def _split_before_marks_kernel(values_ptr, offsets_ptr, row_lengths_ptr, slot_starts_ptr, slot_ends_ptr, total_ptr,
                               word_base_ptr, word_starts_ptr, word_ends_ptr, counts_ptr, texts, expand, mark,
                               BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    start = expand * tl.load(offsets_ptr + text, mask=inside, other=0) + 2 * text
    size = tl.load(row_lengths_ptr + text, mask=inside, other=0)
    w = start  # the next slot
    open_at = start  # the open word's start
    previous = tl.load(values_ptr + start, mask=inside & (size > 0), other=0).to(tl.int64)
    for i in range(1, tl.max(size, 0)):
        live = inside & (i < size)
        c = tl.load(values_ptr + start + i, mask=live, other=0).to(tl.int64)
        cut = live & (c == mark) & (previous != mark)  # mark -1: never
        tl.store(slot_starts_ptr + w, open_at, mask=cut)
        tl.store(slot_ends_ptr + w, start + i, mask=cut)
        w = tl.where(cut, w + 1, w)
        open_at = tl.where(cut, start + i, open_at)
        previous = c
    last = inside & (size > 0)
    tl.store(slot_starts_ptr + w, open_at, mask=last)
    tl.store(slot_ends_ptr + w, start + size, mask=last)
    count = tl.where(last, w + 1, w) - start
    pack_words(inside, text, start, count, slot_starts_ptr, slot_ends_ptr, total_ptr, word_base_ptr, word_starts_ptr,
               word_ends_ptr, counts_ptr, BLOCK)


def word_buffers(values: torch.Tensor, texts: int) -> tuple[torch.Tensor, ...]:
    """A per-text split's buffers: (slot starts, slot ends, packed word starts and ends (zeros: the
    places past the total are empty words), the total (one int64), each text's first word and
    count); a slot and a place per element of ``values``."""
    slot_starts = torch.empty(values.numel(), dtype=torch.int64, device=values.device)
    word_base = torch.empty(texts, dtype=torch.int64, device=values.device)
    return (slot_starts, torch.empty_like(slot_starts), torch.zeros_like(slot_starts), torch.zeros_like(slot_starts),
            torch.zeros(1, dtype=torch.int64, device=values.device), word_base, torch.empty_like(word_base))


def split_by_class_triton(values: torch.Tensor, row_starts: torch.Tensor, row_lengths: torch.Tensor,
                          classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int64 word starts and ends, packed, one place per element of ``values``; int64 each text's
    first word and its number of words)."""
    texts = row_starts.numel()
    slot_starts, slot_ends, word_starts, word_ends, total, word_base, counts = word_buffers(values, texts)
    if texts:
        # 64 lanes, as the normalizer: a block runs as long as its longest text.
        block = 64
        _split_by_class_kernel[(triton.cdiv(texts, block),)](values, row_starts, row_lengths, classes, slot_starts,
                                                             slot_ends, total, word_base, word_starts, word_ends, counts,
                                                             texts, classes.numel(), BLOCK=block)
    return word_starts, word_ends, word_base, counts


def split_before_marks_triton(values: torch.Tensor, offsets: torch.Tensor, row_lengths: torch.Tensor, *, expand: int,
                              mark: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Words of SentencePiece-normalized texts, one text per lane (numba twins:
    ``word_split_numba.split_before_runs``, and ``whole_texts`` for ``mark`` -1): a word starts at
    a non-empty text's first character and at the first ``mark`` of each run of them. Text ``t``
    is ``values[expand * offsets[t] + 2 * t:]``, ``row_lengths[t]`` characters (the layout of
    ``whitespace_rules.whitespace_rules_triton``'s output). (int64 word starts and ends, packed as
    :func:`split_by_class_triton` packs them; int64 each text's first word and its number of
    words; the number of words, a one-element int64 tensor.)"""
    texts = offsets.numel() - 1
    slot_starts, slot_ends, word_starts, word_ends, total, word_base, counts = word_buffers(values, texts)
    if texts:
        block = 64  # as the other per-text kernels
        _split_before_marks_kernel[(triton.cdiv(texts, block),)](
            values, offsets, row_lengths, slot_starts, slot_ends, total, word_base, word_starts, word_ends, counts,
            texts, expand, mark, BLOCK=block)
    return word_starts, word_ends, word_base, counts, total
