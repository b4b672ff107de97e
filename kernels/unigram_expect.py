"""Expected piece counts of unigram lattices (forward-backward), one word per lane.

Torch twin: ``gputok.trainers.unigram.unigram_expect_torch`` (same arguments, same results up to
float64 rounding: the kernel adds into ``expected`` with atomics, in no fixed order).

The lattices of all words come in one step-major layout (see ``gputok.trainers.unigram``): words
are sorted by length, longest first; the row of (word ``w``, end position ``e``) is
``step_base[e] + w``, its edges are ``row_ptr[row] .. row_ptr[row + 1]``, and each edge gives the
forward-table index of its start (``edge_src``) and its piece (an index into ``scores``; a removed
piece scores -inf). Forward table index of (w, e): ``w`` for e = 0, else
``num_words + step_base[e] + w``.

Each lane runs its word's forward pass (log-sum-exp online over the edges that end at each
position), then a backward pass in the linear domain: ``post[e]`` is ``count * P(a piece boundary
at e)``, every edge's expected count is ``exp(alpha[start] + score - alpha[end]) * post[end]`` (a
ratio in [0, 1], so nothing overflows), and it is pushed to ``post[start]`` and ``expected[piece]``.
Scratch: two float64 arrays of ``num_words + rows`` entries.
"""

import torch
import triton
import triton.language as tl


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["num_words"])
def _unigram_expect_kernel(lengths_ptr, counts_ptr, step_base_ptr, row_ptr_ptr, edge_src_ptr, edge_piece_ptr,
                           scores_ptr, alpha_ptr, post_ptr, expected_ptr, log_z_ptr, num_words,
                           MAX_EDGES: tl.constexpr, BLOCK: tl.constexpr):
    word = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = word < num_words
    length = tl.load(lengths_ptr + word, mask=inside, other=0)
    longest = tl.max(length, 0)
    tl.store(alpha_ptr + word, tl.zeros([BLOCK], dtype=tl.float64), mask=inside)
    for e in range(1, longest + 1):
        live = inside & (e <= length)
        row = tl.load(step_base_ptr + e) + word
        lo = tl.load(row_ptr_ptr + row, mask=live, other=0)
        hi = tl.load(row_ptr_ptr + row + 1, mask=live, other=0)
        best = tl.full([BLOCK], float("-inf"), dtype=tl.float64)
        total = tl.zeros([BLOCK], dtype=tl.float64)
        for j in range(MAX_EDGES):
            has = live & (lo + j < hi)
            src = tl.load(edge_src_ptr + lo + j, mask=has, other=0).to(tl.int64)
            piece = tl.load(edge_piece_ptr + lo + j, mask=has, other=0).to(tl.int64)
            score = tl.load(scores_ptr + piece, mask=has, other=0.0)
            v = tl.load(alpha_ptr + src, mask=has, other=0.0) + score
            v = tl.where(has, v, float("-inf"))
            new_best = tl.maximum(best, v)
            # Online log-sum-exp, shifted by a finite value so no lane ever computes -inf - -inf.
            shift = tl.where(new_best == float("-inf"), 0.0, new_best)
            total = total * tl.exp(best - shift) + tl.exp(v - shift)
            best = new_best
        tl.store(alpha_ptr + num_words + row, best + tl.log(tl.where(live, total, 1.0)), mask=live)
    last = num_words + tl.load(step_base_ptr + length, mask=inside, other=0) + word
    log_z = tl.load(alpha_ptr + last, mask=inside & (length > 0), other=0.0)
    tl.store(log_z_ptr + word, log_z, mask=inside)
    count = tl.load(counts_ptr + word, mask=inside, other=0.0)
    tl.store(post_ptr + last, count, mask=inside & (length > 0))
    for k in range(0, longest):
        e = longest - k
        live = inside & (e <= length)
        row = tl.load(step_base_ptr + e) + word
        lo = tl.load(row_ptr_ptr + row, mask=live, other=0)
        hi = tl.load(row_ptr_ptr + row + 1, mask=live, other=0)
        alpha_end = tl.load(alpha_ptr + num_words + row, mask=live, other=0.0)
        post_end = tl.load(post_ptr + num_words + row, mask=live, other=0.0)
        for j in range(MAX_EDGES):
            has = live & (lo + j < hi)
            src = tl.load(edge_src_ptr + lo + j, mask=has, other=0).to(tl.int64)
            piece = tl.load(edge_piece_ptr + lo + j, mask=has, other=0).to(tl.int64)
            score = tl.load(scores_ptr + piece, mask=has, other=0.0)
            ratio = tl.exp(tl.load(alpha_ptr + src, mask=has, other=0.0) + score - alpha_end)
            mass = tl.where(has, ratio * post_end, 0.0)
            # Only this lane touches its word's entries of ``post``: a plain read-modify-write.
            tl.store(post_ptr + src, tl.load(post_ptr + src, mask=has, other=0.0) + mass, mask=has)
            tl.atomic_add(expected_ptr + piece, mass, mask=has)


def unigram_expect_triton(lengths: torch.Tensor, counts: torch.Tensor, step_base: torch.Tensor,
                          row_ptr: torch.Tensor, edge_src: torch.Tensor, edge_word: torch.Tensor,
                          edge_piece: torch.Tensor, scores: torch.Tensor, max_edges: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``edge_word`` is part of the shared contract; the kernel knows each lane's word and ignores it."""
    num_words = lengths.numel()
    device = lengths.device
    expected = torch.zeros(scores.numel(), dtype=torch.float64, device=device)
    log_z = torch.zeros(num_words, dtype=torch.float64, device=device)
    if num_words == 0:
        return expected, log_z
    table = num_words + row_ptr.numel() - 1
    alpha = torch.zeros(table, dtype=torch.float64, device=device)
    post = torch.zeros(table, dtype=torch.float64, device=device)
    # 64 lanes: neighbouring words have similar lengths (sorted), so a block seldom waits on one long word.
    block = 64
    _unigram_expect_kernel[(triton.cdiv(num_words, block),)](
        lengths.contiguous(), counts.double().contiguous(), step_base.contiguous(), row_ptr.contiguous(),
        edge_src.contiguous(), edge_piece.contiguous(), scores.double().contiguous(), alpha, post, expected,
        log_z, num_words, MAX_EDGES=max(1, int(max_edges)), BLOCK=block)
    return expected, log_z
