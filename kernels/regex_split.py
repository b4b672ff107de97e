"""The cl100k / llama3 / qwen2 regex splits on CUDA, one text per lane: a left-to-right matcher per text.

Numba twin: ``regex_split_numba.regex_split_numba`` with rule CL100K, LLAMA3 or QWEN2 (the same
matches, read through the same per-rule kind and contraction-letter tables of
:mod:`gputok.regex_split`). The twin runs ``_cl100k_end`` at each match start, its alternatives as
nested loops; a lane here runs the same alternatives as one state machine whose steps the lanes
of a block take together:

- at a match start (START) the lane reads the kinds at ``i`` and ``i + 1`` (and the contraction
  letters at ``i + 1``, ``i + 2``) and picks the alternative the twin takes: a contraction (the match
  ends at once), a letter run (from ``i + 1``, or ``i + 2`` after one prefix character), a digit
  group (at most ``max_digits``), an other-character run and then a newline run, or whitespace;
- then, in the same step and in each later one, the run reads the kinds of the ``WIDTH``
  characters from ``p`` (a ``[BLOCK, WIDTH]`` tile) and extends to the first that does not
  extend it; if all do, it goes on from ``p + WIDTH`` on the next step, else the match ends there
  (an other-character run goes on as a newline run first). Whitespace keeps the run's last newline
  and ends as the twin's ``_whitespace_end`` does (``\\s++$`` first with ``end_first``, then to
  the last newline, ``\\s+(?!\\S)``, ``\\s``).

A match of ``m`` characters takes ``1 + m // WIDTH`` steps (two for an other-character run that
goes on as newlines), so a text takes about one step per word.

Layout (no host sync), as ``word_split.split_by_class_triton`` (its ``pack_words``): a lane writes
its text's matches into the text's own slots (``offsets[t] + k``: at most one match per character),
then takes the next ``counts[t]`` places of the packed arrays with one atomic add (``word_base[t]``)
and copies them there as ``word_starts``/``word_ends`` (int64 indices into ``values``); places past the total
hold empty words (0, 0). Memory: four int64 per codepoint.
"""

import torch
import triton
import triton.language as tl

from .word_split import pack_words, word_buffers

# kinds (gputok.regex_split.K_*) and contraction letter codes (regex_split_numba.L_*); a kernel
# reads only constexpr globals
K_L = tl.constexpr(0)
K_N = tl.constexpr(1)
K_O = tl.constexpr(2)
K_APOS = tl.constexpr(3)
K_SP = tl.constexpr(4)
K_OWS = tl.constexpr(5)
K_NL = tl.constexpr(6)
L_S = tl.constexpr(1)
L_D = tl.constexpr(2)
L_M = tl.constexpr(3)
L_T = tl.constexpr(4)
L_L = tl.constexpr(5)
L_V = tl.constexpr(6)
L_R = tl.constexpr(7)
L_E = tl.constexpr(8)
REPLACEMENT = tl.constexpr(0xFFFD)
# the lane's state
START = tl.constexpr(0)
LETTERS = tl.constexpr(1)
DIGITS_RUN = tl.constexpr(2)
OTHERS = tl.constexpr(3)
NEWLINES = tl.constexpr(4)
SPACES = tl.constexpr(5)
NOWHERE = tl.constexpr(1 << 62)


@triton.jit
def _table_at(values_ptr, table_ptr, p, ok, limit):
    """``table[values[p]]`` where ``ok`` (U+FFFD's entry for a value that is no codepoint), else -1."""
    c = tl.load(values_ptr + p, mask=ok, other=0).to(tl.int64)
    c = tl.where((c < 0) | (c >= limit), REPLACEMENT, c)
    return tl.where(ok, tl.load(table_ptr + c, mask=ok, other=0).to(tl.int32), -1)


@triton.jit(do_not_specialize=["texts", "limit", "max_digits", "end_first"])
def _cl100k_split_kernel(values_ptr, offsets_ptr, kinds_ptr, letters_ptr, slot_starts_ptr, slot_ends_ptr, total_ptr,
                         word_base_ptr, word_starts_ptr, word_ends_ptr, counts_ptr, texts, limit, max_digits, end_first,
                         BLOCK: tl.constexpr, WIDTH: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    first = tl.load(offsets_ptr + text, mask=inside, other=0)
    e = tl.load(offsets_ptr + text + 1, mask=inside, other=0)
    w = first  # the next slot
    i = first  # the match start
    p = first  # the next character to read
    state = tl.zeros([BLOCK], dtype=tl.int32) + START
    last_nl = first - 1  # whitespace: the run's last newline
    # lane flags, not constexprs: one compiled kernel serves the three rules
    ends_first = (tl.zeros([BLOCK], dtype=tl.int32) + end_first) != 0
    column = tl.arange(0, WIDTH).to(tl.int64)[None, :]
    alive = inside & (i < e)
    while tl.max(alive.to(tl.int32), 0) > 0:
        # A match starts: pick the alternative (_cl100k_end's order).
        starting = alive & (state == START)
        k = _table_at(values_ptr, kinds_ptr, i, starting, limit)
        nk = _table_at(values_ptr, kinds_ptr, i + 1, starting & (i + 1 < e), limit)
        is_apos = starting & (k == K_APOS)
        c1 = _table_at(values_ptr, letters_ptr, i + 1, is_apos & (i + 1 < e), limit)
        c2 = _table_at(values_ptr, letters_ptr, i + 2, is_apos & (i + 2 < e), limit)
        two = (c1 == L_S) | (c1 == L_D) | (c1 == L_M) | (c1 == L_T)
        three = ((c1 == L_L) & (c2 == L_L)) | ((c1 == L_V) & (c2 == L_E)) | ((c1 == L_R) & (c2 == L_E))
        contraction = tl.where(is_apos & two, 2, tl.where(is_apos & three, 3, 0))
        ends_now = contraction > 0
        undecided = starting & ~ends_now
        letters = undecided & (k == K_L)
        state = tl.where(letters, LETTERS, state)
        p = tl.where(letters, i + 1, p)
        undecided = undecided & ~letters
        prefixed = undecided & (k != K_N) & (k != K_NL) & (nk == K_L)
        state = tl.where(prefixed, LETTERS, state)
        p = tl.where(prefixed, i + 2, p)
        undecided = undecided & ~prefixed
        numbers = undecided & (k == K_N)
        state = tl.where(numbers, DIGITS_RUN, state)
        p = tl.where(numbers, i + 1, p)
        undecided = undecided & ~numbers
        others = undecided & ((k == K_O) | (k == K_APOS))
        state = tl.where(others, OTHERS, state)
        p = tl.where(others, i + 1, p)
        undecided = undecided & ~others
        spaced = undecided & (k == K_SP) & ((nk == K_O) | (nk == K_APOS))
        state = tl.where(spaced, OTHERS, state)
        p = tl.where(spaced, i + 2, p)
        undecided = undecided & ~spaced
        state = tl.where(undecided, SPACES, state)
        p = tl.where(undecided, i, p)
        last_nl = tl.where(undecided, i - 1, last_nl)
        end = tl.where(ends_now, i + contraction, -1)

        # The running alternative reads WIDTH characters from p at once: the run extends to the
        # first character that does not extend it (or past the tile, read on the next step).
        scanning = alive & ~ends_now & (state != START)
        pos = p[:, None] + column
        readable = scanning[:, None] & (pos < e[:, None])
        kp = _table_at(values_ptr, kinds_ptr, pos, readable, limit)
        run = state[:, None]
        extends = (((run == LETTERS) & (kp == K_L))
                   | ((run == DIGITS_RUN) & (kp == K_N) & (pos < (i + max_digits)[:, None]))
                   | ((run == OTHERS) & ((kp == K_O) | (kp == K_APOS))) | ((run == NEWLINES) & (kp == K_NL))
                   | ((run == SPACES) & ((kp == K_SP) | (kp == K_OWS) | (kp == K_NL))))
        extends = readable & extends
        stop_at = tl.min(tl.where(extends, NOWHERE, pos), 1)  # NOWHERE: the whole tile extends
        newline = extends & (kp == K_NL) & (run == SPACES) & (pos < stop_at[:, None])
        last_nl = tl.maximum(last_nl, tl.max(tl.where(newline, pos, -1), 1))
        beyond = scanning & (stop_at == NOWHERE)
        stop_kind = tl.max(tl.where(pos == stop_at[:, None], kp, -1), 1)
        to_newlines = scanning & ~beyond & (state == OTHERS) & (stop_kind == K_NL)
        state = tl.where(to_newlines, NEWLINES, state)
        p = tl.where(beyond, p + WIDTH, tl.where(to_newlines, stop_at + 1, tl.where(scanning, stop_at, p)))
        stops = scanning & ~beyond & ~to_newlines
        at_end = p == e
        space_end = tl.where(last_nl >= i, last_nl + 1, tl.where(at_end, e, tl.where(p - i >= 2, p - 1, p)))
        space_end = tl.where(ends_first & at_end, e, space_end)
        end = tl.where(stops, tl.where(state == SPACES, space_end, p), end)

        # A match ended: its slot, and the next match starts where it ends.
        done = ends_now | stops
        tl.store(slot_starts_ptr + w, i, mask=done)
        tl.store(slot_ends_ptr + w, end, mask=done)
        w = tl.where(done, w + 1, w)
        i = tl.where(done, end, i)
        state = tl.where(done, START, state)
        alive = alive & ~(done & (end >= e))
    pack_words(inside, text, first, w - first, slot_starts_ptr, slot_ends_ptr, total_ptr, word_base_ptr,
               word_starts_ptr, word_ends_ptr, counts_ptr, BLOCK)


def cl100k_split_triton(values: torch.Tensor, offsets: torch.Tensor, kinds: torch.Tensor, letters: torch.Tensor, *,
                        digits: int = 3, end_first: bool = True
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int64 word starts and ends, packed, one place per element of ``values``; int64 each text's
    first word and its number of words; the number of words, a one-element int64 tensor) of the texts ``values[offsets[t]:offsets[t + 1]]``.
    cl100k: ``digits=3, end_first=True``; llama3: ``digits=3, end_first=False``; qwen2: ``digits=1,
    end_first=False``. ``kinds``/``letters``: the rule's tables (``gputok.regex_split._numba_tables``)."""
    texts = offsets.numel() - 1
    slot_starts, slot_ends, word_starts, word_ends, total, word_base, counts = word_buffers(values, texts)
    if texts:
        # 64 lanes, as the other per-text kernels (a block runs as long as its longest text); runs
        # read 16 characters a step: most words are shorter, so a word costs about one step.
        block, width = 64, 16
        _cl100k_split_kernel[(triton.cdiv(texts, block),)](
            values, offsets, kinds, letters, slot_starts, slot_ends, total, word_base, word_starts, word_ends, counts,
            texts, kinds.numel(), digits, int(end_first), BLOCK=block, WIDTH=width)
    return word_starts, word_ends, word_base, counts, total
