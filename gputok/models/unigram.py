"""Unigram language-model tokenization: the Viterbi best segmentation, for all words of a batch at once.

Follows SentencePiece's ``unigram_model.cc`` (``EncodeOptimized``) and huggingface ``tokenizers``'
Unigram model. A word (or sentence) is segmented into the vocabulary pieces whose scores (log
probabilities) sum highest. Candidates arrive at each end position in SentencePiece's order (by
start) and a later one wins only if strictly better. A character no usable single-character
piece covers gets an unk candidate scored ``min_score - 10`` (min over normal pieces);
consecutive unks become one unk token, or, with ``byte_fallback``, the UTF-8 bytes of the
character as ``<0xNN>`` pieces. User-defined pieces score ``bytes * max_score - 0.1`` (so they
win, as in SentencePiece's encoder); unused pieces never match.

Batched as three tensor passes: (1) the lattice: every (word, start) pair walks the vocabulary trie
(:class:`gputok.trie.Trie`) in lock-step, one step per character of the longest piece, emitting an
edge at each node that ends a piece; (2) the dynamic programme over the edges, one step per start
position for all words together (``unigram_viterbi_torch``, or the Triton kernel
``gputok.kernels.unigram_viterbi`` with one lane per word); (3) backtracking, one step per token.
Sampling (subword regularization) is forward filtering over the same lattice and backward
sampling per word occurrence; n-best lists keep the k best partial paths per position.

Exactness. huggingface runs the programme per Metaspace word in float64; SentencePiece runs it
over the whole sentence in float32 (each candidate score a float32 sum), so two segmentations of
a word whose scores differ by less than the float32 rounding of the running sentence score may
be ordered differently in the two. Words are independent in both because no piece holds ``▁``
after its first character (checked at load; otherwise whole sentences are the words). So
gputok segments each unique word in float64 and records its *margin*, the smallest gap between
the best and the runner-up candidate at any position; in SentencePiece mode, an occurrence whose
margin is not above the worst-case float32 rounding of its sentence's score is re-segmented
together with its whole sentence in SentencePiece's float32 arithmetic
(:meth:`Unigram.encode_in_context`; a few sentences per MB of text). Leaves out:
SentencePiece's user-defined-symbol bypass of the normalizer, and sampling from an n-best list
(``nbest_size > 1`` with sampling; the full lattice, ``nbest_size=-1``, is what is sampled).
Memory: the lattice (~2 edges per character, 24 bytes each) plus three float64 / int64 values
per position for the programme; sampling keeps one more float64 per position.
"""

from __future__ import annotations

import contextlib
import math
import struct
import threading
from typing import Any

import torch

from .. import _dispatch
from ..dedup import UniqueWords, gather_words
from ..ingest import utf8_bytes
from ..pre_tokenizers import Words, words_from_starts
from ..ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, segment_sum
from ..trie import Trie

UNK_PENALTY = 10.0
# SentencePiece piece types (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
ESCAPED_SPACE = "\u2581"
FLT_MIN = 1.1754943508222875e-38


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def unigram_viterbi_torch(edge_offsets: torch.Tensor, edge_len: torch.Tensor, edge_score: torch.Tensor,
                          row_offsets: torch.Tensor, init: torch.Tensor, *, float32_scores: bool
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Best path of every row's lattice: for each node, the edge of the best path ending there.

    The lattice of row ``r`` (characters ``row_offsets[r] .. row_offsets[r + 1]``) has nodes
    ``row_offsets[r] + r + e`` for end positions ``e = 0 .. length``; the edges starting at flat
    character ``p`` are ``edge_offsets[p] .. edge_offsets[p + 1]`` (any order: they reach
    distinct ends), ``edge_len`` characters long, scored ``edge_score`` (float64). ``init`` is each row's
    starting score. Candidates reach a node in order of start; a later one replaces
    the best only if strictly greater. ``float32_scores``: best scores are stored rounded to
    float32 (SentencePiece), else kept in float64 (huggingface).

    Returns ``choice`` (int64 [nodes]: the chosen edge, -1 at row starts) and ``margin``
    (float64 [rows]: the smallest gap between best and runner-up candidate at any node, inf if
    no node had two).

    >>> # "ab": a (-1), b (-1), ab (-1.5): the single edge ab wins.
    >>> choice, margin = unigram_viterbi_torch(torch.tensor([0, 2, 3]), torch.tensor([1, 2, 1]),
    ...     torch.tensor([-1.0, -1.5, -1.0], dtype=torch.float64), torch.tensor([0, 2]),
    ...     torch.zeros(1, dtype=torch.float64), float32_scores=False)
    >>> choice.tolist(), margin.tolist()
    ([-1, 0, 1], [0.5])
    """
    device = edge_len.device
    rows = row_offsets.numel() - 1
    n = int(row_offsets[-1])
    num_nodes = n + rows
    best = torch.full((num_nodes,), -math.inf, dtype=torch.float64, device=device)
    second = torch.full_like(best, -math.inf)
    choice = torch.full((num_nodes,), -1, dtype=torch.int64, device=device)
    starts = row_offsets[:-1] + torch.arange(rows, device=device)
    best[starts] = init.float().double() if float32_scores else init
    num_edges = edge_len.numel()
    if num_edges:
        edge_pos = row_ids(edge_offsets, num_edges)
        row_of_char = row_ids(row_offsets, n)
        edge_row = row_of_char[edge_pos]
        start = edge_pos - row_offsets[edge_row]
        source = edge_pos + edge_row
        # One step per start position; all rows' edges from that position update distinct nodes.
        # The edges are laid out in that order once, so each step reads contiguous slices.
        order = torch.argsort(start, stable=True)
        bounds = offsets_from_lengths(torch.bincount(start)).tolist()
        source = source[order]
        target_all = source + edge_len.long()[order]
        score_all = edge_score[order]
        for s in range(len(bounds) - 1):
            lo, hi = bounds[s], bounds[s + 1]
            src, target = source[lo:hi], target_all[lo:hi]
            cand = best[src] + score_all[lo:hi]
            if float32_scores:  # SentencePiece adds float32 scores in float32
                cand = cand.float().double()
            cur = best[target]
            # A node's first candidate always beats its -inf; later ones must be strictly greater.
            better = cand > cur
            second[target] = torch.where(better, cur, torch.maximum(second[target], cand))
            best[target] = torch.where(better, cand, cur)
            won = torch.nonzero(better).flatten()
            choice[target[won]] = order[lo + won]
    gap = best - second
    margin = torch.full((rows,), math.inf, dtype=torch.float64, device=device)
    if num_nodes:
        node_row = row_ids(row_offsets + torch.arange(rows + 1, device=device), num_nodes)
        margin.scatter_reduce_(0, node_row, gap, reduce="amin")
    return choice, margin


def unigram_viterbi(edge_offsets, edge_len, edge_score, row_offsets, init, *, float32_scores: bool):
    if _dispatch.backend(edge_len.device) == "triton":
        from ..kernels.unigram_viterbi import unigram_viterbi_triton

        return unigram_viterbi_triton(edge_offsets, edge_len, edge_score, row_offsets, init,
                                      float32_scores=float32_scores)
    return unigram_viterbi_torch(edge_offsets, edge_len, edge_score, row_offsets, init,
                                 float32_scores=float32_scores)


class Unigram:
    """A Unigram model: ``vocab`` is ``[(piece, score), ...]`` in id order.

    ``types``: SentencePiece piece types per id (default all normal); ``sentencepiece=True``
    follows SentencePiece (only normal and user-defined pieces match, float32 sentence scores),
    else huggingface (every piece matches, float64 per word).

    >>> m = Unigram([("<unk>", 0.0), ("▁a", -1.0), ("b", -2.0), ("▁", -3.0), ("a", -3.0)], unk_id=0)
    >>> ids, ends = m.encode_words(Ragged.from_lengths(torch.tensor([0x2581, 97, 98, 99]), torch.tensor([4])))
    >>> ids.tolist(), ends.tolist()
    ([[1, 2, 0]], [[2, 3, 4]])
    """

    type = "Unigram"

    def __init__(self, vocab: list[tuple[str, float]], *, unk_id: int | None = None, byte_fallback: bool = False,
                 types: list[int] | None = None, sentencepiece: bool = False) -> None:
        if not vocab:
            raise ValueError("a Unigram model needs at least one piece; the vocabulary is empty")
        self.pieces = [p for p, _ in vocab]
        self.scores = [float(s) for _, s in vocab]
        self.types = list(types) if types is not None else [NORMAL] * len(vocab)
        if unk_id is not None and not 0 <= unk_id < len(vocab):
            raise ValueError(f"unk_id={unk_id} is outside the vocabulary (size {len(vocab)})")
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.sentencepiece = sentencepiece
        self.vocab: dict[str, int] = {}
        for i, p in enumerate(self.pieces):
            self.vocab.setdefault(p, i)
        if sentencepiece:
            normal = [s for s, t in zip(self.scores, self.types) if t == NORMAL]
            min_score = _f32(min(normal)) if normal else 3.4028234663852886e38
            max_score = max([FLT_MIN] + normal)
            self.unk_score = _f32(min_score - UNK_PENALTY)
            matchable = {i for i, t in enumerate(self.types) if t in (NORMAL, USER_DEFINED)}
            score64 = [_f32(_f32(len(p.encode()) * _f32(max_score)) - 0.1) if t == USER_DEFINED else s
                       for p, s, t in zip(self.pieces, self.scores, self.types)]
        else:
            self.unk_score = min(self.scores) - UNK_PENALTY
            matchable = set(range(len(vocab)))
            score64 = self.scores
        self.score64 = torch.tensor(score64, dtype=torch.float64)
        self.trie = Trie([{p: i for i, p in enumerate(self.pieces) if i in matchable and p}])
        self.max_piece_length = max((len(self.pieces[i]) for i in matchable), default=1)
        # Words may be cut before each '▁' only if no matchable piece holds one after its start.
        self.splits_at_space = not any(ESCAPED_SPACE in self.pieces[i][1:] for i in matchable)
        byte_ids = [self.vocab.get(f"<0x{b:02X}>", -1) for b in range(256)]
        if byte_fallback and -1 in byte_ids:
            raise ValueError(f"byte_fallback=True needs the 256 pieces <0x00> .. <0xFF>; missing "
                             f"{[f'<0x{b:02X}>' for b in range(256) if byte_ids[b] < 0][:4]} ...")
        self.byte_ids = torch.tensor(byte_ids, dtype=torch.int64)
        self._on: dict = {}
        self._local = threading.local()  # the sampling settings of the calling thread

    def __getstate__(self) -> dict:  # pickled into DataLoader workers: the thread-local state stays behind
        state = dict(self.__dict__)
        state.pop("_local")
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    @contextlib.contextmanager
    def sampling(self, alpha: float, generator: torch.Generator | None = None):
        """Within the block, encoding *samples* a segmentation of every word occurrence,
        ``P(segmentation) ~ exp(alpha * score)`` over the whole lattice, as SentencePiece's
        ``encode(..., enable_sampling=True, alpha=alpha, nbest_size=-1)``; ``generator`` (on the
        encoding device) makes it reproducible.

        >>> m = Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -2.0)], unk_id=0)
        >>> word = Ragged.from_lengths(torch.tensor([97, 98] * 400), torch.full((400,), 2))
        >>> with m.sampling(1.0, torch.Generator().manual_seed(0)):
        ...     ids, _ = m.encode_words(word)
        >>> 150 < sum(row == [3] for row in ids.tolist()) < 250  # P(ab) = e^-2 / (2 e^-2) = 1/2
        True
        """
        if not alpha > 0:
            raise ValueError(f"alpha={alpha}: sampling needs alpha > 0 (the smoothing of the scores)")
        previous = getattr(self._local, "sampling", None)
        self._local.sampling = (float(alpha), generator)
        try:
            yield self
        finally:
            self._local.sampling = previous

    # ---- encoding -----------------------------------------------------------------------
    def _tensors(self, device: torch.device):
        if device not in self._on:
            self._on[device] = (self.score64.to(device), self.byte_ids.to(device))
        return self._on[device]

    def lattice(self, words: Ragged) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Edges of every word's lattice grouped by start character (CSR offsets), with their
        lengths, piece ids and float64 scores (the unk candidates scored ``unk_score``)."""
        device = words.device
        values = words.values.long()
        n = values.numel()
        score64, _ = self._tensors(device)
        token_of_node = self.trie.tensors(device)["token_of_node"]
        pos, rank, lens, ids = [], [], [], []
        count = torch.zeros(n, dtype=torch.int64, device=device)  # edges found so far per start
        active = torch.arange(n, device=device)
        remaining = words.offsets[1:][row_ids(words.offsets, n)] - active  # characters left in the row
        node = torch.zeros_like(active)
        for depth in range(self.max_piece_length):
            # One integer index per step (boolean masks cost a nonzero per tensor).
            child = self.trie.step(node, values[(active + depth).clamp(max=max(n - 1, 0))])
            keep = torch.nonzero((child >= 0) & (remaining > depth)).flatten()
            if not keep.numel():
                break
            active, node, remaining = active[keep], child[keep], remaining[keep]
            token = token_of_node[node].long()
            hit = torch.nonzero(token >= 0).flatten()
            found = active[hit]
            pos.append(found), ids.append(token[hit]), rank.append(count[found])
            lens.append(torch.full((found.numel(),), depth + 1, dtype=torch.int64, device=device))
            count[found] += 1
        # The unk candidate of every character no single-character piece covers.
        single = torch.zeros(n, dtype=torch.bool, device=device)
        if pos:
            single[pos[0]] = True
        unk = torch.nonzero(~single).flatten()
        if unk.numel() and self.unk_id is None:
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        pos.append(unk), ids.append(torch.full_like(unk, self.unk_id or 0)), rank.append(count[unk])
        lens.append(torch.ones_like(unk))
        count[unk] += 1
        num_unk = unk.numel()
        pos, rank, lens_, ids_ = torch.cat(pos), torch.cat(rank), torch.cat(lens), torch.cat(ids)
        # Place every edge in its start's group: no sort (order within a start does not matter,
        # its edges reach distinct ends).
        edge_offsets = offsets_from_lengths(count)
        dest = edge_offsets[:-1][pos] + rank
        total = pos.numel()
        lens = torch.empty(total, dtype=torch.int64, device=device)
        ids = torch.empty(total, dtype=torch.int64, device=device)
        scores = torch.empty(total, dtype=torch.float64, device=device)
        lens[dest], ids[dest] = lens_, ids_
        is_unk = torch.zeros(total, dtype=torch.bool, device=device)
        is_unk[dest[total - num_unk:]] = True
        scores[dest] = score64[ids_]
        scores[is_unk] = self.unk_score
        return edge_offsets, lens, ids, scores

    def _graph(self, words: Ragged):
        """The lattice of every row as one graph, for sampling and n-best: row ``r`` has nodes
        ``offsets[r] + r`` (its start) to ``offsets[r + 1] + r`` (its end). Returns each edge's
        length, piece id, score, source and target node; the number of nodes; each row's start
        node; and the edges ordered by start position within their row, with the bounds of each
        start position (one start's edges have distinct targets, so a step over them scatters
        without clashes)."""
        edge_offsets, lens, ids, scores = self.lattice(words)
        rows, n = len(words), words.values.numel()
        edge_pos = row_ids(edge_offsets, lens.numel())
        edge_row = row_ids(words.offsets, n)[edge_pos]
        source = edge_pos + edge_row
        start = edge_pos - words.offsets[edge_row]
        order = torch.argsort(start, stable=True)
        bounds = offsets_from_lengths(torch.bincount(start)).tolist() if lens.numel() else [0]
        node_start = words.offsets[:-1] + torch.arange(rows, device=words.device)
        return lens, ids, scores, source, source + lens, n + rows, node_start, order, bounds

    def segment(self, words: Ragged, init: torch.Tensor | None = None, *, float32_scores: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Best segmentation of each row: token ids, token ends (characters), tokens per row,
        each row's margin (see :func:`unigram_viterbi_torch`) and each token's score."""
        device = words.device
        rows = len(words)
        edge_offsets, lens, ids, scores = self.lattice(words)
        if init is None:
            init = torch.zeros(rows, dtype=torch.float64, device=device)
        choice, margin = unigram_viterbi(edge_offsets, lens.int(), scores, words.offsets, init,
                                         float32_scores=float32_scores)
        # Backtrack from every row's end, one token per step for all rows.
        ends_node = words.offsets[1:] + torch.arange(rows, device=device)
        start_node = words.offsets[:-1] + torch.arange(rows, device=device)
        cur = ends_node[ends_node > start_node]
        stops = start_node[ends_node > start_node]
        taken = []
        while cur.numel():
            taken.append(cur)
            cur = cur - lens[choice[cur]]
            keep = cur > stops
            cur, stops = cur[keep], stops[keep]
        nodes = torch.sort(torch.cat(taken)).values if taken else torch.zeros(0, dtype=torch.int64, device=device)
        edge = choice[nodes]
        node_row = torch.searchsorted(ends_node, nodes)
        token_end = nodes - start_node[node_row]
        counts = torch.bincount(node_row, minlength=rows)
        return ids[edge], token_end, counts, margin, scores[edge]

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """Token ids of each word (ragged codepoints) and each token's end, in characters."""
        settings = getattr(self._local, "sampling", None)
        if settings is not None:
            ids, ends, counts = self.sample(words, torch.arange(len(words), device=words.device), *settings)
            return self._finish(words, ids, ends, counts)
        ids, ends, counts, _, _ = self.segment(words)
        return self._finish(words, ids, ends, counts)

    def sample(self, words: Ragged, occurrence_row: torch.Tensor, alpha: float,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One sampled segmentation per occurrence (``occurrence_row``: its row of ``words``):
        forward filtering over each row's lattice (log-sum-exp of ``alpha * score``), then
        backward sampling per occurrence, every occurrence independently (Gumbel-max over the
        edges into its current node). Returns token ids, ends and tokens per occurrence."""
        device = words.device
        n = words.values.numel()
        lens, ids, scores, source, target, num_nodes, node_start, order, bounds = self._graph(words)
        logz = torch.full((num_nodes,), -math.inf, dtype=torch.float64, device=device)
        logz[node_start] = 0.0
        weight = alpha * scores
        for s in range(len(bounds) - 1):  # targets of one start position are distinct
            e = order[bounds[s]:bounds[s + 1]]
            logz[target[e]] = torch.logaddexp(logz[target[e]], logz[source[e]] + weight[e])
        # Edges into each node, for the backward pass.
        by_target = torch.argsort(target, stable=True)
        in_offsets = offsets_from_lengths(torch.bincount(target, minlength=num_nodes))
        max_in = int((in_offsets[1:] - in_offsets[:-1]).max()) if lens.numel() else 0
        cur = words.offsets[1:][occurrence_row] + occurrence_row  # end nodes
        stop = node_start[occurrence_row]
        occurrence = torch.arange(occurrence_row.numel(), device=device)
        alive = cur > stop
        cur, stop, occurrence = cur[alive], stop[alive], occurrence[alive]
        taken_edges, taken_occ = [], []
        columns = torch.arange(max(max_in, 1), device=device)
        while cur.numel():
            lo, hi = in_offsets[cur], in_offsets[cur + 1]
            slot = lo[:, None] + columns[None, :]
            valid = slot < hi[:, None]
            edge = by_target[slot.clamp(max=max(by_target.numel() - 1, 0))]
            logit = torch.where(valid, logz[source[edge]] + weight[edge], -math.inf)
            u = torch.rand(logit.shape, generator=generator, device=device, dtype=torch.float64)
            gumbel = -torch.log(-torch.log(u.clamp(min=1e-300)))
            pick = edge.gather(1, (logit + gumbel).argmax(1, keepdim=True)).squeeze(1)
            taken_edges.append(pick), taken_occ.append(occurrence)
            cur = cur - lens[pick]
            keep = cur > stop
            cur, stop, occurrence = cur[keep], stop[keep], occurrence[keep]
        if not taken_edges:
            empty = torch.zeros(0, dtype=torch.int64, device=device)
            return empty, empty, torch.zeros(occurrence_row.numel(), dtype=torch.int64, device=device)
        edge, occ = torch.cat(taken_edges), torch.cat(taken_occ)
        end = target[edge] - node_start[occurrence_row[occ]]
        order = torch.argsort(occ * (n + 1) + end)
        edge, occ, end = edge[order], occ[order], end[order]
        return ids[edge], end, torch.bincount(occ, minlength=occurrence_row.numel())

    def nbest(self, words: Ragged, nbest_size: int) -> list[list[tuple[list[int], float]]]:
        """The ``nbest_size`` best segmentations of each row with their scores, best first, as
        SentencePiece's ``nbest_encode`` (rows are whole normalized sentences there).

        Every node keeps its k best partial paths, merged from all incoming edges in one step
        per start position for all rows; paths are then read back per row.
        """
        if nbest_size < 1:
            raise ValueError(f"nbest_size={nbest_size}; pass a positive number of segmentations")
        k = min(nbest_size, 1024)
        device = words.device
        rows = len(words)
        lens, ids, scores, source, target, num_nodes, node_start, order, bounds = self._graph(words)
        best = torch.full((num_nodes, k), -math.inf, dtype=torch.float64, device=device)
        back_edge = torch.full((num_nodes, k), -1, dtype=torch.int64, device=device)
        back_rank = torch.full((num_nodes, k), -1, dtype=torch.int64, device=device)
        best[node_start, 0] = 0.0
        ranks = torch.arange(k, device=device)
        for s in range(len(bounds) - 1):
            e = order[bounds[s]:bounds[s + 1]]
            t = target[e]
            cand = best[source[e]] + scores[e][:, None]  # [edges, k]
            merged = torch.cat([best[t], cand], 1)
            merged_edge = torch.cat([back_edge[t], e[:, None].expand(-1, k)], 1)
            merged_rank = torch.cat([back_rank[t], ranks[None, :].expand(e.numel(), -1)], 1)
            # Stable: on equal scores the earlier candidate (the one already kept) stays first.
            top = torch.sort(merged, dim=1, descending=True, stable=True).indices[:, :k]
            best[t] = merged.gather(1, top)
            back_edge[t] = merged_edge.gather(1, top)
            back_rank[t] = merged_rank.gather(1, top)
        out: list[list[tuple[list[int], float]]] = []
        best_l, edge_l, rank_l = best.tolist(), back_edge.tolist(), back_rank.tolist()
        lens_l, ids_l = lens.tolist(), ids.tolist()
        ends, starts = (words.offsets[1:] + torch.arange(rows, device=device)).tolist(), node_start.tolist()
        for r in range(rows):  # reading k paths back: Python per path and token, off the hot path
            paths = []
            for j in range(k):
                if best_l[ends[r]][j] == -math.inf or (ends[r] == starts[r] and j):
                    break
                node, rank, tokens = ends[r], j, []
                while node != starts[r]:
                    e = edge_l[node][rank]
                    tokens.append(ids_l[e])
                    node, rank = node - lens_l[e], rank_l[node][rank]
                paths.append((tokens[::-1], best_l[ends[r]][j]))
            out.append(paths)
        return out

    def encode_in_context(self, values: torch.Tensor, words: Words, unique: UniqueWords
                          ) -> tuple[Ragged, Ragged, torch.Tensor]:
        """Segmentation of every word occurrence. SentencePiece mode: the unique words' own, except
        where the float32 rounding of the sentence score could reorder a near tie (see the module
        docstring): those sentences are segmented whole, in float32, and their words get rows of
        their own. huggingface mode: the unique words' own. Inside :meth:`sampling`: a sample per
        occurrence. Returns the rows' ids and ends and each occurrence's row.
        """
        device = values.device
        lengths = words.lengths()
        rep = unique.representative
        unique_words = gather_words(values, words.starts[rep], lengths[rep])
        settings = getattr(self._local, "sampling", None)
        if settings is not None:  # every occurrence draws its own segmentation
            ids, ends, counts = self.sample(unique_words, unique.inverse, *settings)
            piece_ids, piece_ends = self._finish(gather_words(values, words.starts, lengths), ids, ends, counts)
            return piece_ids, piece_ends, torch.arange(lengths.numel(), device=device)
        if not self.sentencepiece:  # huggingface: every word on its own, in float64
            ids, ends, counts, _, _ = self.segment(unique_words)
            piece_ids, piece_ends = self._finish(unique_words, ids, ends, counts)
            return piece_ids, piece_ends, unique.inverse
        if not self.splits_at_space:  # the words are whole sentences: segment them as SentencePiece does
            ids, ends, counts, _, _ = self.segment(unique_words, float32_scores=True)
            piece_ids, piece_ends = self._finish(unique_words, ids, ends, counts)
            return piece_ids, piece_ends, unique.inverse
        ids, ends, counts, margin, token_score = self.segment(unique_words)
        piece_ids, piece_ends = self._finish(unique_words, ids, ends, counts)
        if not lengths.numel():
            return piece_ids, piece_ends, unique.inverse
        word_score = segment_sum(token_score, offsets_from_lengths(counts))
        score64, _ = self._tensors(device)
        max_abs = max(float(score64.abs().max()), abs(self.unk_score))
        sentence = row_ids(words.text_offsets, lengths.numel())
        magnitude = segment_sum(word_score[unique.inverse].abs(), words.text_offsets)[sentence] + lengths * max_abs
        # float32 keeps 24 bits: each stored score is off by at most magnitude * 2**-24, and a
        # decision sees at most (length + 1) of them on each side.
        fragile = margin[unique.inverse] <= (2 * lengths + 4) * magnitude * 2.0 ** -23
        if not bool(fragile.any()):
            return piece_ids, piece_ends, unique.inverse
        texts = torch.unique(sentence[fragile])
        first, last = words.text_offsets[texts], words.text_offsets[texts + 1] - 1
        starts = words.starts[first]
        rows = gather_words(values, starts, words.ends[last] - starts)
        ids, ends, counts, _, _ = self.segment(rows, float32_scores=True)
        # Cut the sentences' tokens at their words (no token crosses a '▁' boundary).
        token_row = row_ids(offsets_from_lengths(counts), ids.numel())
        word = torch.searchsorted(words.starts, starts[token_row] + ends - 1, right=True) - 1
        sent_words = torch.repeat_interleave(first, last - first + 1)
        sent_words = sent_words + positions_in_rows(offsets_from_lengths(last - first + 1), sent_words.numel())
        word_counts = torch.bincount(word, minlength=lengths.numel())[sent_words]
        word_rows = Ragged.from_lengths(ends + (starts[token_row] - words.starts[word]), word_counts)
        new_words = gather_words(values, words.starts[sent_words], lengths[sent_words])
        new_ids, new_ends = self._finish(new_words, ids, word_rows.values, word_counts)
        inverse = unique.inverse.clone()
        inverse[sent_words] = len(piece_ids) + torch.arange(sent_words.numel(), device=device)
        return (Ragged(torch.cat([piece_ids.values, new_ids.values]),
                       torch.cat([piece_ids.offsets, new_ids.offsets[1:] + piece_ids.offsets[-1]])),
                Ragged(torch.cat([piece_ends.values, new_ends.values]),
                       torch.cat([piece_ends.offsets, new_ends.offsets[1:] + piece_ends.offsets[-1]])),
                inverse)

    def _finish(self, words: Ragged, ids: torch.Tensor, ends: torch.Tensor, counts: torch.Tensor
                ) -> tuple[Ragged, Ragged]:
        """Fuse runs of unk tokens into one, or with byte fallback expand each to its UTF-8 bytes."""
        device = ids.device
        if self.unk_id is None or not ids.numel():
            return Ragged.from_lengths(ids, counts), Ragged.from_lengths(ends, counts)
        offsets = offsets_from_lengths(counts)
        is_unk = ids == self.unk_id
        if not bool(is_unk.any()):
            return Ragged(ids, offsets), Ragged(ends, offsets)
        token_row = row_ids(offsets, ids.numel())
        if self.byte_fallback:
            _, byte_ids = self._tensors(device)
            char = words.offsets[token_row] + ends - 1  # an unk token is one character
            per_token = torch.where(is_unk, 1 + (words.values[char] >= 0x80).long() + (words.values[char] >= 0x800).long()
                                    + (words.values[char] >= 0x10000).long(), 1)
            out_offsets = offsets_from_lengths(per_token)
            total = int(out_offsets[-1])
            token_of = row_ids(out_offsets, total)
            unk_chars = words.values[char[is_unk]]
            b, _ = utf8_bytes(Ragged(unk_chars, torch.tensor([0, unk_chars.numel()], device=device)))
            out_ids = ids[token_of].clone()
            out_ids[is_unk[token_of]] = byte_ids[b.values.long()]
            return (Ragged(out_ids, offsets_from_lengths(segment_sum(per_token, offsets))),
                    Ragged(ends[token_of], offsets_from_lengths(segment_sum(per_token, offsets))))
        # Drop an unk token followed by another unk of the same word: the run becomes its last one.
        next_unk = torch.zeros_like(is_unk)
        next_unk[:-1] = is_unk[1:] & (token_row[1:] == token_row[:-1])
        keep = ~(is_unk & next_unk)
        new_counts = torch.bincount(token_row[keep], minlength=len(counts))
        return Ragged.from_lengths(ids[keep], new_counts), Ragged.from_lengths(ends[keep], new_counts)

    # ---- vocabulary and serialization ---------------------------------------------------
    def id_to_token(self) -> list[str]:
        return list(self.pieces)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "unk_id": self.unk_id,
                "vocab": [[p, s] for p, s in zip(self.pieces, self.scores)], "byte_fallback": self.byte_fallback}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Unigram:
        """A huggingface Unigram model; its scores read as huggingface reads them (see
        :func:`serde_json_f64`), so near ties resolve as in huggingface."""
        vocab = spec.get("vocab")
        if not isinstance(vocab, list) or not all(isinstance(v, (list, tuple)) and len(v) == 2 for v in vocab):
            raise ValueError("a Unigram model in tokenizer.json needs 'vocab': [[piece, score], ...]")
        return cls([(str(p), serde_json_f64(float(s))) for p, s in vocab], unk_id=spec.get("unk_id"),
                   byte_fallback=bool(spec.get("byte_fallback", False)))

    @classmethod
    def from_sentencepiece_model(cls, model) -> Unigram:
        """From a :class:`gputok.sentencepiece_model.SentencePieceModel` of Unigram type."""
        unknown = [i for i, p in enumerate(model.pieces) if p.type == UNKNOWN]
        if not unknown:
            raise ValueError("the SentencePiece model has no unknown piece (type UNKNOWN); SentencePiece itself "
                             "refuses such a model: retrain it with an unk piece")
        if model.treat_whitespace_as_suffix:
            raise ValueError("treat_whitespace_as_suffix=true SentencePiece models are not supported")
        return cls([(p.piece, p.score) for p in model.pieces], unk_id=unknown[0], byte_fallback=model.byte_fallback,
                   types=[p.type for p in model.pieces], sentencepiece=True)


def serde_json_f64(x: float) -> float:
    """The float huggingface ``tokenizers`` gets for the JSON number ``repr(x)``.

    Its JSON reader (serde_json without ``float_roundtrip``) takes the decimal digits as an
    integer, rounds that to a double and divides by a power of ten: two roundings, so a 17-digit
    score can land one ulp away from the correctly rounded value (1,796 of 8,000 scores of a
    SentencePiece model here), which flips near ties. Files written by huggingface and by Python
    hold the shortest repr, so ``repr(x)`` is the text that was read.

    >>> serde_json_f64(-3.2137553691864014), serde_json_f64(-0.5)
    (-3.213755369186402, -0.5)
    """
    if not math.isfinite(x) or x == 0:
        return x
    text = repr(abs(x))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    significand = int(whole + fraction)
    power = int(exponent or 0) - len(fraction)
    if significand >= 1 << 64 or not -308 <= power <= 308:
        return x  # serde's other paths; no score is written like this
    value = float(significand)
    value = value * float(f"1e{power}") if power >= 0 else value / float(f"1e{-power}")
    return math.copysign(value, x)


class MetaspaceSplit:
    """Words of SentencePiece-normalized text: a new word starts at each ``▁`` (``split=True``),
    or each text is one word; the words tile the text. huggingface's Metaspace pre-tokenizer with
    ``prepend_scheme="never"`` (the normalizer already put the ``▁`` in).

    >>> w = MetaspaceSplit()(Ragged.from_lengths(torch.tensor([0x2581, 97, 0x2581, 0x2581, 98]), torch.tensor([5])))
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 3], [2, 3, 5], [0, 3])
    """

    type = "Metaspace"

    def __init__(self, *, split: bool = True) -> None:
        self.split = split

    def __call__(self, text: Ragged) -> Words:
        n = text.values.numel()
        device = text.device
        first = torch.zeros(n + 1, dtype=torch.bool, device=device)
        first[text.offsets[:-1]] = True
        first = first[:n]
        starts_word = first | (text.values == ord(ESCAPED_SPACE)) if self.split else first
        return words_from_starts(text, starts_word)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "replacement": ESCAPED_SPACE, "prepend_scheme": "never", "split": self.split}


class SentencePieceDecoder:
    """Pieces back to text as SentencePiece decodes: ``<0xNN>`` pieces become bytes, ``▁`` a space,
    the dummy-prefix space is dropped, the unk piece is ``unk_surface`` and control pieces vanish.
    Saved as huggingface's Sequence[Replace, ByteFallback, Fuse, Strip].

    >>> SentencePieceDecoder()(["▁H", "<0x69>", "▁", "<0xE2>", "<0x82>", "<0xAC>"])
    'Hi €'
    """

    type = "SentencePiece"

    def __init__(self, *, add_dummy_prefix: bool = True, unk_piece: str | None = None, unk_surface: str = " \u2047 ",
                 control: frozenset[str] = frozenset()) -> None:
        self.add_dummy_prefix = add_dummy_prefix
        self.unk_piece, self.unk_surface, self.control = unk_piece, unk_surface, control

    def __call__(self, tokens: list[str]) -> str:
        out = bytearray()
        for token in tokens:
            if token in self.control:
                continue
            if token == self.unk_piece:
                out += self.unk_surface.encode()
                continue
            if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
                try:
                    out.append(int(token[3:5], 16))
                    continue
                except ValueError:
                    pass
            out += token.replace(ESCAPED_SPACE, " ").encode()
        text = out.decode("utf-8", errors="replace")
        return text[1:] if self.add_dummy_prefix and text.startswith(" ") else text

    def to_json(self) -> dict[str, Any]:
        steps = [{"type": "Replace", "pattern": {"String": ESCAPED_SPACE}, "content": " "},
                 {"type": "ByteFallback"}, {"type": "Fuse"}]
        if self.add_dummy_prefix:
            steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
        return {"type": "Sequence", "decoders": steps}


def sentencepiece_tokenizer(model, tokenizer_class):
    """A ``tokenizer_class`` (gputok.Tokenizer) for a Unigram SentencePieceModel: its normalizer,
    ``▁`` word split, Unigram model and decoder. No special tokens are added (SentencePiece's
    ``encode`` adds none); control pieces keep their ids."""
    from ..normalizers import SentencePieceNormalizer

    unigram = Unigram.from_sentencepiece_model(model)
    spec = model.normalizer
    normalizer = SentencePieceNormalizer(spec.precompiled_charsmap, add_dummy_prefix=spec.add_dummy_prefix,
                                         remove_extra_whitespaces=spec.remove_extra_whitespaces,
                                         escape_whitespaces=spec.escape_whitespaces)
    return tokenizer_class(unigram, normalizer=normalizer, pre_tokenizer=MetaspaceSplit(split=unigram.splits_at_space),
                           decoder=SentencePieceDecoder(add_dummy_prefix=spec.add_dummy_prefix,
                                                        unk_piece=unigram.pieces[unigram.unk_id],
                                                        unk_surface=model.unk_surface,
                                                        control=frozenset(p.piece for p in model.pieces if p.type == CONTROL)))


def nbest_encode(tokenizer, texts: list[str], nbest_size: int) -> list[list[list[int]]]:
    """The ``nbest_size`` best id sequences of each text, best first, as SentencePiece's
    ``nbest_encode_as_ids``: n-best over the whole normalized text, unks fused (or bytes).

    >>> import gputok
    >>> from gputok import assets
    >>> tok = gputok.Tokenizer.from_sentencepiece(assets.fetch("sp-test-model"))
    >>> nbest_encode(tok, ["hello world"], 3)
    [[[39, 88, 21, 887], [39, 31, 31, 21, 887], [4, 251, 88, 21, 887]]]
    """
    from ..ingest import as_texts, codepoints

    model = tokenizer.model
    norm, _ = tokenizer.normalizer(codepoints(as_texts(texts)))
    out = []
    for row, paths in zip(norm.tolist(), model.nbest(norm, nbest_size)):
        results = []
        for tokens, _ in paths:
            ids: list[int] = []
            for position, token in zip(_token_starts(model, tokens), tokens):
                if token == model.unk_id and model.byte_fallback:
                    ids += [int(model.byte_ids[b]) for b in chr(row[position]).encode()]
                elif token == model.unk_id and ids and ids[-1] == model.unk_id:
                    continue
                else:
                    ids.append(token)
            results.append(ids)
        out.append(results)
    return out


def _token_starts(model: Unigram, tokens: list[int]) -> list[int]:
    """Character start of each token of a path (an unk token covers one character)."""
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += 1 if token == model.unk_id else len(model.pieces[token])
    return starts
