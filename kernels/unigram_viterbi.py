"""Viterbi over Unigram lattices, one row (word or sentence) per lane.

Torch twin: ``gputok.models.unigram.unigram_viterbi_torch`` (same arguments, same outputs).

The rows are laid out column by column (``gputok.models.unigram.Lattice``): lane ``r``'s node
after ``e`` characters is ``node_offsets[e] + r``, so the lanes of a block read and write
neighbouring nodes at each step. Each lane walks its row's start positions in order; at each it
reads the best score of the path ending there and offers every edge starting there to the edge's
target node, which takes it if it has none yet or the candidate is strictly greater
(SentencePiece's order and tie rule), in float64. The lane also keeps the runner-up at each node,
for the margin. Lanes never share nodes, so there are no atomics; a lane's own stores and loads are
ordered. Memory: three values per node.
"""

import math

import torch
import triton
import triton.language as tl


# Sizes that change from call to call are not specialized on: one compile serves every call.
@triton.jit(do_not_specialize=["rows", "max_len", "max_edges"])
def _unigram_viterbi_kernel(edge_offsets_ptr, edge_target_ptr, edge_score_ptr, node_offsets_ptr, length_ptr,
                            best_ptr, second_ptr, choice_ptr, margin_ptr, rows, max_len, max_edges,
                            BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = row < rows
    length = tl.load(length_ptr + row, mask=in_range, other=0)
    for s in range(0, max_len):
        active = in_range & (s < length)
        node = tl.load(node_offsets_ptr + s) + row
        lo = tl.load(edge_offsets_ptr + node, mask=active, other=0)
        hi = tl.load(edge_offsets_ptr + node + 1, mask=active, other=0)
        base = tl.load(best_ptr + node, mask=active, other=0.0)
        for k in range(0, max_edges):
            e = lo + k
            ok = active & (e < hi)
            target = tl.load(edge_target_ptr + e, mask=ok, other=0)
            cand = base + tl.load(edge_score_ptr + e, mask=ok, other=0.0)
            cur = tl.load(best_ptr + target, mask=ok, other=0.0)
            sec = tl.load(second_ptr + target, mask=ok, other=0.0)
            chosen = tl.load(choice_ptr + target, mask=ok, other=-1)
            unset = chosen < 0
            better = unset | (cand > cur)
            sec = tl.where(better, tl.where(unset, sec, cur), tl.maximum(sec, cand))
            tl.store(second_ptr + target, sec, mask=ok)
            tl.store(best_ptr + target, tl.where(better, cand, cur), mask=ok)
            tl.store(choice_ptr + target, tl.where(better, e, chosen), mask=ok)
    margin = tl.full([BLOCK], float("inf"), dtype=tl.float64)
    for s in range(1, max_len + 1):
        here = in_range & (s <= length)
        node = tl.load(node_offsets_ptr + s) + row
        gap = (tl.load(best_ptr + node, mask=here, other=0.0)
               - tl.load(second_ptr + node, mask=here, other=float("-inf")))
        margin = tl.where(here, tl.minimum(margin, gap), margin)
    tl.store(margin_ptr + row, margin, mask=in_range)


def unigram_viterbi_triton(edge_offsets: torch.Tensor, edge_target: torch.Tensor, edge_score: torch.Tensor,
                           node_offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    device = edge_target.device
    num_nodes = edge_offsets.numel() - 1
    rows = int(node_offsets[1] - node_offsets[0]) if node_offsets.numel() > 1 else 0
    best = torch.full((num_nodes,), -math.inf, dtype=torch.float64, device=device)
    best[:rows] = 0.0
    second = torch.full_like(best, -math.inf)
    choice = torch.full((num_nodes,), -1, dtype=torch.int64, device=device)
    margin = torch.full((rows,), math.inf, dtype=torch.float64, device=device)
    if rows == 0:
        return choice, margin
    # Rows per column, non-increasing: lane r is as long as the number of columns after the
    # first that hold more than r rows.
    at_least = node_offsets[2:] - node_offsets[1:-1]
    lengths = torch.searchsorted(-at_least, -torch.arange(rows, device=device))
    max_len = node_offsets.numel() - 2
    max_edges = int((edge_offsets[1:] - edge_offsets[:-1]).max()) if num_nodes else 0
    # 64 lanes: rows of a block differ in length, so a wider block idles more lanes (a guess:
    # no GPU was at hand to measure on).
    block = 64
    _unigram_viterbi_kernel[(triton.cdiv(rows, block),)](
        edge_offsets.contiguous(), edge_target.contiguous(), edge_score.double().contiguous(),
        node_offsets.contiguous(), lengths.contiguous(), best, second, choice, margin, rows, max_len, max_edges,
        BLOCK=block)
    return choice, margin
