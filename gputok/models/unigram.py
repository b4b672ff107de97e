"""Unigram language-model tokenization: the Viterbi best segmentation, for all words of a batch at once.

Follows SentencePiece's ``unigram_model.cc`` (``EncodeOptimized``) and huggingface ``tokenizers``'
Unigram model. A word (or sentence) is segmented into the vocabulary pieces whose scores (log
probabilities) sum highest. Candidates arrive at each end position in SentencePiece's order (by
start) and a later one wins only if strictly better. A character no usable single-character
piece covers gets an unk candidate scored ``min_score - 10`` (min over normal pieces);
consecutive unks become one unk token, or, with ``byte_fallback``, the UTF-8 bytes of the
character as ``<0xNN>`` pieces. User-defined pieces score ``float32(0.1 * (bytes - 1))`` (as in
sentencepiece 0.2.3's encoder; characters in its n-best and sampling lattice: :func:`user_defined_score`);
unused pieces never match.

Batched as three tensor passes over the unique words, laid out *column by column* (words sorted
longest first; the nodes after ``e`` characters of all words at least ``e`` long are one run, see
:class:`Lattice`), so that the edges of one start position are contiguous without a sort:
(1) the lattice: every (word, start) pair walks the vocabulary trie (:class:`PieceTrie`, over
alphabet codes: one gather per step) in lock-step, one step per character of the longest match,
emitting an edge at each node that ends a piece; (2) the dynamic programme over the edges, one
step per start position for all words together (``unigram_viterbi_torch``, or the Triton kernel
``gputok.kernels.unigram_viterbi`` with one lane per word); (3) backtracking, one step per token.
With a :class:`gputok.word_cache.WordCache` only words unseen in earlier batches run these passes.
Sampling (subword regularization) is forward filtering over the same lattice and backward
sampling per word occurrence; n-best lists keep the k best partial paths per position.

Exactness. huggingface runs the programme per Metaspace word in float64; SentencePiece runs it
over the whole sentence in float32 (each candidate score a float32 sum, the running score
re-centred on 0 whenever it passes +-1e5), so two segmentations of a word whose scores differ by
less than the float32 rounding of the running sentence score may be ordered differently in the
two. Words are independent in both because no piece holds ``▁`` after its first character
(checked at load; otherwise whole sentences are the words). So gputok segments each unique word
in float64 and records its *margin*, the smallest gap between the best and the runner-up candidate
at any position; in SentencePiece mode, an occurrence whose margin is not above the worst-case
float32 rounding of its sentence's score is re-segmented together with its whole sentence by
SentencePiece's own encoder (:meth:`Unigram.segment_sentences`, the numba kernel
``gputok.kernels.unigram_sentence``, on the CPU; a few sentences per MB of text), and a text over
:data:`WHOLE_SENTENCE_CHARS` characters goes there directly, without the per-word pass
(:meth:`Unigram.encode_in_context`).

CPU tensors (``gputok._dispatch.on_cpu_kernels``) take numba kernels instead of the lattice's
torch ops, one pass over the batch: in SentencePiece mode every text is segmented whole by
SentencePiece's own float32 encoder (``unigram_sentence.unigram_sentences_encode``: exactly its
ids by construction, no margin check) and its tokens are cut at its words; in huggingface mode
every word occurrence by the float64 Viterbi (``kernels/unigram_words_numba.py``); then unks are
fused or spelled as bytes (``kernels/unigram_finish_numba.py``). Neither deduplicates words nor
uses the word cache: the kernels walk the trie at tens of MB/s, where hashing every word to find
it again costs about as much. (A ``Tokenizer.from_sentencepiece`` pipeline does not come here on
the CPU: ``gputok._whole_unigram`` runs it as one kernel call with a word cache of its own, under
this float32 rule: warm, it halves the segmentation's time; a first pass over 4 MB of English, a
fifth of whose words are new, costs about what the sentence walk does.) Sampling runs ``kernels/unigram_sample_numba.py`` per occurrence
(same distribution as the torch path, other draws from the same generator), n-best lists
``kernels/unigram_nbest_numba.py`` (SentencePiece's own A* search, whose order of equal-score paths
the torch path does not keep), and sampling from an n-best list (``nbest_size > 1``) draws among
the A* search's paths of each whole text there.
Memory: the trie's tables (~40 MB; see :class:`PieceTrie`), the lattice of the unique words (~2
edges per character, ~48 bytes each while it is built) plus three float64 / int64 values per
position for the programme; a text segmented whole takes 12 bytes per character in the kernel
and ~50 bytes per character of the whole encode (a 10 MB line: ~0.5 GB over the warmed-up
process); sampling keeps one more float64 per position. The CPU kernels need no lattice: 12-24
bytes per character of the longest row of scratch plus their outputs (n-best: 32 bytes per
position and path kept).
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import _dispatch
from ..dedup import gather_words, unique_words
from ..ingest import utf8_bytes
from ..pre_tokenizers import Metaspace, Words
from ..ragged import Ragged, nonzero, offsets_from_lengths, positions_in_rows, row_ids, segment_sum
from ..word_cache import WordCache
from ..unicode import MAX_CODEPOINT
from ..kernels.unigram_finish_numba import unigram_finish_numba
from ..kernels.unigram_sample_numba import unigram_sample_numba
from ..kernels.unigram_sentence import unigram_sentence_viterbi
from ..kernels.unigram_trie_numba import double_array
from ..kernels.unigram_words_numba import unigram_words_numba

UNK_PENALTY = 10.0
# SentencePiece piece types (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
ESCAPED_SPACE = "\u2581"
# SentencePiece re-centres its running float32 sentence score whenever it passes +-1e5 (its encoder's
# score_reset_threshold): see gputok/kernels/unigram_sentence.py.
SCORE_RESET_THRESHOLD = 1e5
# Texts longer than this (normalized characters) are segmented whole by SentencePiece's encoder
# (Unigram.segment_sentences) without the per-word pass: over a few thousand characters the
# sentence score is large enough that most near ties need the sentence anyway.
WHOLE_SENTENCE_CHARS = 4096
# The alphabet codes (the commonest following characters first) the CPU walk's double array holds
# below the root (PieceTrie.walk_arrays): a node's children along them span at most this many rows,
# which keeps its build fast and its rows dense on any alphabet; rarer ones are a binary search.
ARRAYED_CODES = 256


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def user_defined_score(piece: str, *, in_characters: bool = False) -> float:
    """The score sentencepiece 0.2.3 gives a user-defined piece in the lattice:
    ``float32(0.1 * (length - 1))``, length in UTF-8 bytes in its encoder (``EncodeOptimized`` in
    ``unigram_model.cc``, which walks the text's bytes), in characters (``in_characters``) in the
    lattice its n-best lists and sampling build (``PopulateNodes``, which inserts each node with
    its length in characters; :meth:`Unigram.nbest`, :meth:`Unigram.sampling`). Positive where
    every normal score is a log probability, so a user piece usually wins, but not always:
    ``"▁the▁"`` (0.8; 0.4 in the n-best lattice) loses to ``"▁the" "▁work"`` where the rest of the
    word would cost ``"w" "or" "k"``.

    >>> user_defined_score("12"), user_defined_score("▁the▁"), user_defined_score("▁the▁", in_characters=True)
    (0.10000000149011612, 0.800000011920929, 0.4000000059604645)
    """
    return _f32(0.1 * ((len(piece) if in_characters else len(piece.encode())) - 1))


def unigram_viterbi_torch(edge_offsets: torch.Tensor, edge_target: torch.Tensor, edge_score: torch.Tensor,
                          node_offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Best path of every row's lattice: for each node, the edge of the best path ending there.

    Rows are laid out column by column (:class:`Lattice`): row ``r`` of the rows sorted longest
    first has nodes ``node_offsets[e] + r`` for ``e = 0 .. length`` (characters read), so column
    ``e`` is the run of rows at least ``e`` long. The edges leaving node ``t`` are
    ``edge_offsets[t] .. edge_offsets[t + 1]`` (any order: they reach distinct nodes), reaching
    ``edge_target``, scored ``edge_score`` (float64). Every path starts at 0. Candidates reach a
    node in order of start; a later one replaces the best only if strictly greater.

    Returns ``choice`` (int64 [nodes]: the chosen edge, -1 at row starts) and ``margin``
    (float64 [rows], sorted order: the smallest gap between best and runner-up candidate at any
    node, inf if no node had two).

    >>> # One row "ab": a (-1), b (-1), ab (-1.5); nodes 0 (start), 1 (after a), 2 (after ab).
    >>> choice, margin = unigram_viterbi_torch(torch.tensor([0, 2, 3, 3]), torch.tensor([1, 2, 2]),
    ...     torch.tensor([-1.0, -1.5, -1.0], dtype=torch.float64), torch.tensor([0, 1, 2, 3]))
    >>> choice.tolist(), margin.tolist()
    ([-1, 0, 1], [0.5])
    """
    device = edge_target.device
    num_nodes = edge_offsets.numel() - 1
    rows = int(node_offsets[1] - node_offsets[0]) if node_offsets.numel() > 1 else 0
    best = torch.full((num_nodes,), -math.inf, dtype=torch.float64, device=device)
    best[:rows] = 0.0
    second = torch.full_like(best, -math.inf)
    choice = torch.full((num_nodes,), -1, dtype=torch.int64, device=device)
    # One step per column: the edges leaving it reach distinct nodes, so each step is a few
    # gathers and scatters (index_select / index_copy_: half the time of [] indexing on CPU).
    # The edges are cut into their columns once: small batches of long words take many steps,
    # where the per-step cost is the number of tensor calls.
    sizes = torch.diff(edge_offsets.index_select(0, node_offsets)).tolist()
    columns = zip(row_ids(edge_offsets, edge_target.numel()).split(sizes), edge_target.split(sizes),
                  edge_score.split(sizes), torch.arange(edge_target.numel(), device=device).split(sizes))
    for source, target, score, edge in columns:
        if not edge.numel():
            continue
        cand = best.index_select(0, source) + score
        cur = best.index_select(0, target)
        # A node's first candidate always beats its -inf; later ones must be strictly greater.
        better = cand > cur
        second.index_copy_(0, target, torch.maximum(second.index_select(0, target), torch.minimum(cand, cur)))
        best.index_copy_(0, target, torch.maximum(cand, cur))
        choice.index_copy_(0, target, torch.where(better, edge, choice.index_select(0, target)))
    margin = torch.full((rows,), math.inf, dtype=torch.float64, device=device)
    if rows:
        lane = positions_in_rows(node_offsets, num_nodes)
        margin.scatter_reduce_(0, lane, best - second, reduce="amin")
    return choice, margin


def unigram_viterbi(edge_offsets, edge_target, edge_score, node_offsets):
    if _dispatch.backend(edge_target.device) == "triton":
        from ..kernels.unigram_viterbi import unigram_viterbi_triton

        return unigram_viterbi_triton(edge_offsets, edge_target, edge_score, node_offsets)
    return unigram_viterbi_torch(edge_offsets, edge_target, edge_score, node_offsets)


class PieceTrie:
    """The matchable pieces as a trie over *alphabet codes*, for the lock-step lattice walk.

    Each character of the pieces gets a code: ``1 ..`` for those that follow another character in
    some piece, by falling frequency there, then those that only start pieces (0: in no piece,
    so it matches nothing, and ends every word as its sentinel). A step from the root is one
    gather of ``root_child[code]``; any other step, for the first ``dense - 1`` codes, is one
    gather of ``table[row_base[node] + code]`` (column ``dense``, all -1, is read by the other
    codes), and only for the rarer following characters a binary search in the sorted
    ``(node, code)`` keys of the remaining edges. Memory: the table, 4 bytes per entry: 32 MB
    (``dense`` is chosen to fit 2**23 entries), more only where over 2**15 nodes have a
    common-code child (``dense`` stays at least 256: ~1 kB per such node); 4.4 MB for the
    codepoint-to-code table.

    The CPU kernels and the Triton twin walk the same trie as a double array instead
    (:attr:`walk_arrays`, built from the edges by ``unigram_trie_numba.double_array``):
    a step along one of the commonest following characters is two loads from one table of 16 bytes
    per node, one along a rarer character a binary search in the node's sorted rare edges.

    >>> t = PieceTrie({"ab": 7, "a": 3, "b": 5})
    >>> a = t.root_child[t.code_of[ord("a")]]
    >>> t.token_of_node[a].item(), t.token_of_node[t.table[t.row_base[a] + t.code_of[ord("b")]]].item()
    (3, 7)
    """

    def __init__(self, pieces: dict[str, int], *, dense: int | None = None, arrayed: int | None = None) -> None:
        """``dense``: the number of codes in the table (default: as many as fit in 32 MB, at least 256);
        ``arrayed``: the codes the double array holds below the root (default ``ARRAYED_CODES``)."""
        # Only characters after a piece's first one are ever read by a non-root step: they take
        # the small codes, most frequent first; characters that only start pieces come after.
        inner: dict[str, int] = {}
        for piece in pieces:
            for ch in piece[1:]:
                inner[ch] = inner.get(ch, 0) + 1
        first_only = {ch for piece in pieces for ch in piece[:1]} - set(inner)
        alphabet = sorted(inner, key=lambda c: (-inner[c], c)) + sorted(first_only)
        code = {c: i + 1 for i, c in enumerate(alphabet)}
        self.codes = codes = len(alphabet) + 1
        self.inner = len(inner)  # codes dense .. inner need the binary search
        children: dict[tuple[int, int], int] = {}
        tokens = [-1]
        for piece, token_id in pieces.items():
            node = 0
            for ch in piece:
                key = (node, code[ch])
                child = children.get(key)
                if child is None:
                    child = children[key] = len(tokens)
                    tokens.append(-1)
                node = child
            tokens[node] = token_id
        self.code_of = torch.zeros(MAX_CODEPOINT, dtype=torch.int32)
        if alphabet:
            self.code_of[torch.tensor([ord(c) for c in alphabet])] = torch.arange(1, codes, dtype=torch.int32)
        self.token_of_node = torch.tensor(tokens, dtype=torch.int64)
        parent, label, child = (torch.tensor(v, dtype=torch.int64).reshape(-1) for v in
                                (list(k[0] for k in children), list(k[1] for k in children), list(children.values())))
        self.root_child = torch.full((codes,), -1, dtype=torch.int64)
        at_root = parent == 0
        self.root_child[label[at_root]] = child[at_root]
        # Rows of the dense table for nodes with a common-code child; row 0 is all -1s. As many
        # codes as keep the table within 2**23 entries (32 MB): all 579 following characters of
        # the 8k English + Chinese test model, so its English batches never take the binary search
        # (2**22 entries left 299 codes, and the search cost 9% of the lattice).
        parents = int(torch.unique(parent[~at_root]).numel())
        if dense is None:
            dense = min(self.inner + 1, max(256, (1 << 23) // max(parents, 1)))
        self.dense = dense
        common = ~at_root & (label < dense)
        has_row = torch.zeros(len(tokens), dtype=torch.bool)
        has_row[parent[common]] = True
        width = dense + 1
        self.row_base = torch.where(has_row, torch.cumsum(has_row, 0) * width, 0)
        self.table = torch.full(((int(has_row.sum()) + 1) * width,), -1, dtype=torch.int32)
        self.table[self.row_base[parent[common]] + label[common]] = child[common].int()
        # The other edges, sorted by (node, code) for a binary search.
        rare = ~at_root & (label >= dense)
        self.rare_keys, by_key = torch.sort(parent[rare] * codes + label[rare])
        self.rare_child = child[rare][by_key]
        # The double array (see walk_arrays), from every edge (the root's too) as sorted child lists
        # per node; built here, so that it is pickled, and disk-cached, with the tokenizer.
        by_parent = torch.argsort(parent * codes + label)
        edge_offsets = offsets_from_lengths(torch.bincount(parent, minlength=len(tokens))).numpy()
        children = np.diff(edge_offsets)
        most_children_first = np.argsort(-children, kind="stable")[:np.count_nonzero(children)]
        self.arrayed = ARRAYED_CODES if arrayed is None else arrayed
        check, base, token, *rare = double_array(edge_offsets, label[by_parent].numpy(), child[by_parent].numpy(),
                                                 self.token_of_node.numpy(), codes, self.arrayed, most_children_first)
        rows = np.zeros((check.size, 4), np.int32)  # the fourth column pads a row to 16 bytes
        rows[:, 0], rows[:, 1], rows[:, 2] = check, base, token
        self.rows = torch.from_numpy(rows)
        self.rare_offsets, self.rare_codes, self.rare_rows = (torch.from_numpy(a) for a in rare)
        self._on: dict = {}
        self._rare_on: dict = {}

    def __getstate__(self) -> dict:  # the kernels' numpy views are remade from the tensors
        state = dict(self.__dict__)
        state.pop("_walk_arrays", None)
        return state

    @property
    def walk_arrays(self) -> tuple:
        """What the numba kernels and their Triton twin walk the trie with, as numpy views:
        ``(code_of, trie, dense, rare_offsets, rare_codes, rare_rows)``, the codepoint-to-code
        table, the double array's int32 ``[rows, 4]`` rows, the codes it holds below the root
        (``arrayed``), and the other edges by row (see ``gputok.kernels.unigram_trie_numba``)."""
        arrays = self.__dict__.get("_walk_arrays")
        if arrays is None:
            arrays = self.__dict__["_walk_arrays"] = (
                self.code_of.numpy(), self.rows.numpy(), self.arrayed, self.rare_offsets.numpy(),
                self.rare_codes.numpy(), self.rare_rows.numpy())
        return arrays

    def tensors(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        if device not in self._on:
            self._on[device] = tuple(t.to(device) for t in (self.code_of, self.root_child, self.row_base,
                                                             self.table, self.token_of_node))
        return self._on[device]

    def rare_step(self, node: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
        """Children of non-root ``node`` along rare ``code`` (-1 where there is none)."""
        if node.device not in self._rare_on:  # copied to a device once, not once per lattice step
            self._rare_on[node.device] = (self.rare_keys.to(node.device), self.rare_child.to(node.device))
        keys, children = self._rare_on[node.device]
        if not keys.numel():
            return torch.full_like(node, -1)
        query = node.long() * self.codes + code
        at = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
        return torch.where(keys.index_select(0, at) == query, children.index_select(0, at), -1)


@dataclass(frozen=True)
class Lattice:
    """Every row's lattice, rows laid out column by column (see :func:`unigram_viterbi_torch`).

    ``order``: the rows sorted longest first (lane ``r`` is row ``order[r]``); node ``(r, e)`` is
    ``node_offsets[e] + r``. Edges grouped by their source node (``edge_offsets``, so also by
    column, i.e. by start position), with their target node, float64 score and piece
    (``len(pieces)`` for an unk candidate). Lengths and sources are derived on demand (most
    callers need them for a few edges only): ``found_order`` is each edge's index in the order
    the trie walk found them, one depth (= length) after another, ending at ``depth_ends``; the
    unk candidates, of length 1, come last.
    """

    order: torch.Tensor
    node_offsets: torch.Tensor
    edge_offsets: torch.Tensor
    target: torch.Tensor
    scores: torch.Tensor
    piece: torch.Tensor
    found_order: torch.Tensor
    found_source: torch.Tensor
    depth_ends: torch.Tensor
    unk_piece: int
    unk_id: int

    def source(self, edges: torch.Tensor | None = None) -> torch.Tensor:
        """Source node of each of ``edges`` (default: of every edge)."""
        found = self.found_order if edges is None else self.found_order.index_select(0, edges)
        return self.found_source.index_select(0, found)

    def length(self, edges: torch.Tensor | None = None) -> torch.Tensor:
        """Characters covered by each of ``edges`` (default: by every edge)."""
        found = self.found_order if edges is None else self.found_order.index_select(0, edges)
        depth = torch.searchsorted(self.depth_ends, found, right=True) + 1
        return torch.where(depth >= self.depth_ends.numel(), 1, depth)

    def ids(self, edges: torch.Tensor | None = None) -> torch.Tensor:
        """Piece id of each of ``edges`` (default: of every edge; the unk id for unk candidates)."""
        piece = self.piece if edges is None else self.piece.index_select(0, edges)
        return torch.where(piece == self.unk_piece, self.unk_id, piece)


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
            self.unk_score = _f32(min_score - UNK_PENALTY)
            matchable = {i for i, t in enumerate(self.types) if t in (NORMAL, USER_DEFINED)}
            score64 = [user_defined_score(p) if t == USER_DEFINED else s
                       for p, s, t in zip(self.pieces, self.scores, self.types)]
        else:
            self.unk_score = min(self.scores) - UNK_PENALTY
            matchable = set(range(len(vocab)))
            score64 = self.scores
        self.score64 = torch.tensor(score64, dtype=torch.float64)
        # n-best lists (of more than one) and sampling score user pieces by characters, as
        # SentencePiece's lattice does (user_defined_score); the best path by bytes, as its encoder
        self.lattice_score64 = np.array([user_defined_score(p, in_characters=True) if t == USER_DEFINED else s
                                         for p, s, t in zip(self.pieces, score64, self.types)]
                                        if sentencepiece else score64, dtype=np.float64)
        self.score32 = self.score64.float().numpy()  # SentencePiece's own arithmetic (segment_sentences)
        self.trie = PieceTrie({p: i for i, p in enumerate(self.pieces) if i in matchable and p})
        # Words may be cut before each '▁' only if no matchable piece holds one after its start.
        self.splits_at_space = not any(ESCAPED_SPACE in self.pieces[i][1:] for i in matchable)
        byte_ids = [self.vocab.get(f"<0x{b:02X}>", -1) for b in range(256)]
        if byte_fallback and -1 in byte_ids:
            raise ValueError(f"byte_fallback=True needs the 256 pieces <0x00> .. <0xFF>; missing "
                             f"{[f'<0x{b:02X}>' for b in range(256) if byte_ids[b] < 0][:4]} ...")
        self.byte_ids = torch.tensor(byte_ids, dtype=torch.int64)
        self._score64_np, self._byte_ids_np = self.score64.numpy(), self.byte_ids.numpy()  # for the numba kernels
        self._on: dict = {}
        self._local = threading.local()  # the sampling settings of the calling thread

    def __getstate__(self) -> dict:  # pickled into DataLoader workers: the thread-local state stays behind
        state = dict(self.__dict__)
        for name in ("_local", "_score64_np", "_byte_ids_np"):  # views of tensors, remade from them
            state.pop(name)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        self._score64_np, self._byte_ids_np = self.score64.numpy(), self.byte_ids.numpy()

    @property
    def is_sampling(self) -> bool:
        """True inside :meth:`sampling` (in this thread)."""
        return getattr(self._local, "sampling", None) is not None

    @contextlib.contextmanager
    def sampling(self, alpha: float, generator: torch.Generator | None = None, *, nbest_size: int = -1):
        """Within the block, encoding *samples* a segmentation of every word occurrence,
        ``P(segmentation) ~ exp(alpha * score)`` over the whole lattice, as SentencePiece's
        ``encode(..., enable_sampling=True, alpha=alpha, nbest_size=-1)``; ``generator`` (on the
        encoding device) makes it reproducible. ``nbest_size > 1``: a segmentation of every text
        drawn from its ``nbest_size`` best (:meth:`nbest`), ``P ~ exp(alpha * score)`` among them, as
        SentencePiece's ``nbest_size`` does (``alpha = 0``: uniform among them); on the CPU kernels
        (texts on another device are copied), one uniform per text from ``generator``.

        >>> m = Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -2.0)], unk_id=0)
        >>> word = Ragged.from_lengths(torch.tensor([97, 98] * 400), torch.full((400,), 2))
        >>> with m.sampling(1.0, torch.Generator().manual_seed(0)):
        ...     ids, _ = m.encode_words(word)
        >>> 150 < sum(row == [3] for row in ids.tolist()) < 250  # P(ab) = e^-2 / (2 e^-2) = 1/2
        True
        """
        if nbest_size in (0, 1):
            raise ValueError(f"nbest_size={nbest_size}: sampling draws from the whole lattice (nbest_size < 0) or "
                             "from the nbest_size > 1 best segmentations; one segmentation is the plain encode")
        if not (alpha > 0 or (nbest_size > 1 and alpha == 0)):
            raise ValueError(f"alpha={alpha}: sampling needs alpha > 0 (the smoothing of the scores; 0 only with "
                             "nbest_size > 1)")
        previous = getattr(self._local, "sampling", None), getattr(self._local, "nbest_size", -1)
        self._local.sampling, self._local.nbest_size = (float(alpha), generator), nbest_size
        try:
            yield self
        finally:
            self._local.sampling, self._local.nbest_size = previous

    # ---- encoding -----------------------------------------------------------------------
    def _tensors(self, device: torch.device):
        if device not in self._on:
            # The unk candidate's score goes last: edges of unk candidates read it as piece len(pieces).
            unk = torch.tensor([self.unk_score], dtype=torch.float64)
            self._on[device] = (torch.cat([self.score64, unk]).to(device), self.byte_ids.to(device))
        return self._on[device]

    def lattice(self, words: Ragged) -> Lattice:
        """Every vocabulary match at every position of every row (word or sentence), plus the unk
        candidate (scored ``unk_score``) of every character no single-character piece covers.

        The rows are laid out column by column (:class:`Lattice`), each character at its node,
        a code-0 sentinel at each row's end node. The trie is walked from every node at once, one
        step per character of the longest match (a step reads the next character of each walk
        at its node's successor, ``node + rows at least that long``); each step's matches are
        edges. Edges are then placed by source node with a running count per node (no sort).
        """
        device = words.device
        values = words.values
        n, rows = values.numel(), len(words)
        code_of, root_child, row_base, table, token_of_node = self.trie.tensors(device)
        score_ext, _ = self._tensors(device)
        lengths = words.lengths()
        order = torch.argsort(lengths, descending=True, stable=True)
        max_len = int(lengths.max()) if rows else 0
        at_least = rows - offsets_from_lengths(torch.bincount(lengths, minlength=max_len + 1))[:-1]
        node_offsets = offsets_from_lengths(at_least)
        num_nodes = n + rows
        rank = torch.empty_like(order).index_copy_(0, order, torch.arange(rows, device=device))
        position = positions_in_rows(words.offsets, n)
        char_node = node_offsets.index_select(0, position) + torch.repeat_interleave(rank, lengths, output_size=n)
        codes = torch.zeros(num_nodes, dtype=torch.int64, device=device)
        codes.index_copy_(0, char_node, code_of.index_select(0, values.long()).long())
        following = torch.empty(num_nodes, dtype=torch.int64, device=device)
        following.index_copy_(0, char_node, char_node + at_least.index_select(0, position))
        # Only codes dense .. inner label non-root edges outside the table; the codes after inner
        # only start pieces, so a non-root step on one has no child and reads the -1 column.
        searched = (codes >= self.trie.dense) & (codes <= self.trie.inner)
        rare = bool(self.trie.rare_keys.numel()) and bool(searched.any())
        common_codes = codes.clamp(max=self.trie.dense)  # the rarer codes read the -1 column

        child = root_child.index_select(0, codes)
        start = nonzero(child >= 0)
        node, cur = child.index_select(0, start), start
        count = torch.zeros(num_nodes, dtype=torch.int64, device=device)  # edges found so far per node
        sources, ranks, targets, pieces, found_by_depth = [], [], [], [], [0]
        while True:
            after = following.index_select(0, cur)
            token = token_of_node.index_select(0, node)
            hit = nonzero(token >= 0)
            found = start.index_select(0, hit)
            sources.append(found), pieces.append(token.index_select(0, hit)), targets.append(after.index_select(0, hit))
            found_by_depth.append(found_by_depth[-1] + found.numel())
            if len(sources) == 1:  # the first matches of their nodes
                ranks.append(torch.zeros_like(found))
                count.index_fill_(0, found, 1)
            else:
                ranks.append(count.index_select(0, found))
                count.index_add_(0, found, torch.ones_like(found))
            child = table.index_select(0, row_base.index_select(0, node) + common_codes.index_select(0, after))
            if rare:
                other = nonzero(searched.index_select(0, after))
                child.index_copy_(0, other, self.trie.rare_step(node.index_select(0, other), codes.index_select(
                    0, after.index_select(0, other))).to(child.dtype))
            keep = nonzero(child >= 0)
            if not keep.numel():
                break
            start, cur, node = start.index_select(0, keep), after.index_select(0, keep), child.index_select(0, keep)
        # The unk candidate of every character (not end node) with no single-character piece.
        single = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        single[sources[0]] = True
        single[node_offsets.index_select(0, lengths) + rank] = True  # end nodes
        unk = nonzero(~single)
        if unk.numel() and self.unk_id is None:
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        sources.append(unk), pieces.append(torch.full_like(unk, len(self.pieces)))
        ranks.append(count.index_select(0, unk))
        targets.append(following.index_select(0, unk))
        count.index_add_(0, unk, torch.ones_like(unk))
        # Place every edge in its source's group (order within a node does not matter: its edges
        # reach distinct nodes): one scatter of the found order, then gathers through it.
        found = torch.cat(sources)
        edge_offsets = offsets_from_lengths(count)
        dest = edge_offsets.index_select(0, found) + torch.cat(ranks)
        found_order = torch.empty_like(dest).index_copy_(0, dest, torch.arange(dest.numel(), device=device))
        piece = torch.cat(pieces).index_select(0, found_order)
        return Lattice(order, node_offsets, edge_offsets, torch.cat(targets).index_select(0, found_order),
                       score_ext.index_select(0, piece), piece, found_order, found,
                       torch.tensor(found_by_depth[1:] + [dest.numel()], device=device), len(self.pieces),
                       self.unk_id or 0)

    def _graph(self, words: Ragged, *, in_lattice: bool = False):
        """The lattice of every row as one graph in row order, for sampling and n-best: row ``r``
        has nodes ``offsets[r] + r`` (its start) to ``offsets[r + 1] + r`` (its end). Returns each
        edge's length, piece id, score, source and target node; the number of nodes; each row's
        start node; and the bounds of each start position's edges (the lattice groups its edges
        by source node, column by column, so by start position already; one start's edges have
        distinct targets, so a step over them scatters without clashes). ``in_lattice``: scored
        as SentencePiece's n-best and sampling lattice scores (``lattice_score64``)."""
        lat = self.lattice(words)
        scores = lat.scores
        if in_lattice:
            unk = torch.tensor([self.unk_score], dtype=torch.float64)
            scores = torch.cat([torch.from_numpy(self.lattice_score64), unk]).to(lat.piece.device)[lat.piece]
        rows, n, device = len(words), words.values.numel(), words.device
        column = row_ids(lat.node_offsets, n + rows)
        lane = torch.arange(n + rows, device=device) - lat.node_offsets.index_select(0, column)
        row = lat.order.index_select(0, lane)
        in_rows = words.offsets.index_select(0, row) + row + column  # each node's number in row order
        bounds = lat.edge_offsets.index_select(0, lat.node_offsets).tolist()
        node_start = words.offsets[:-1] + torch.arange(rows, device=device)
        return (lat.length(), lat.ids(), scores, in_rows.index_select(0, lat.source()),
                in_rows.index_select(0, lat.target), n + rows, node_start, bounds)

    def segment(self, words: Ragged) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Best segmentation of each row in float64 (huggingface's arithmetic, per word): token
        ids, token ends (characters), tokens per row, each row's margin (see
        :func:`unigram_viterbi_torch`) and each token's score."""
        device = words.device
        lat = self.lattice(words)
        choice, margin = unigram_viterbi(lat.edge_offsets, lat.target, lat.scores, lat.node_offsets)
        # Backtrack every row at once by pointer doubling: each node's predecessor on its best
        # path (row starts point at themselves); a row's tokens end at the ancestors of its end
        # node, found in log2(longest row) rounds (a round per token costs a long row hundreds).
        jump = torch.arange(choice.numel(), device=device)
        chosen = nonzero(choice >= 0)  # every node but the row starts
        jump.index_copy_(0, chosen, lat.source(choice.index_select(0, chosen)))
        length = words.lengths().index_select(0, lat.order)
        live = int((length > 0).sum())  # the rows are sorted longest first
        path = lat.node_offsets.index_select(0, length[:live]) + torch.arange(live, device=device)  # end nodes
        reach = 1  # path holds the ancestors of the end nodes at distances below reach
        while reach < lat.node_offsets.numel() - 2:
            more = jump.index_select(0, path)
            path = torch.cat([path, more.index_select(0, nonzero(choice.index_select(0, more) >= 0))])
            jump = jump.index_select(0, jump)
            reach *= 2
        # Mark each token at its last character (in row order): the marks read in order are
        # the tokens in order.
        end = torch.searchsorted(lat.node_offsets, path, right=True) - 1
        lane = path - lat.node_offsets.index_select(0, end)
        token_at = torch.full((words.values.numel(),), -1, dtype=torch.int64, device=device)
        token_at.index_copy_(0, words.offsets.index_select(0, lat.order.index_select(0, lane)) + end - 1,
                             choice.index_select(0, path))
        marked = token_at >= 0
        last = nonzero(marked)
        edge = token_at.index_select(0, last)
        counts = segment_sum(marked.long(), words.offsets)
        token_row = row_ids(offsets_from_lengths(counts), last.numel())
        margin = torch.empty_like(margin).index_copy_(0, lat.order, margin)
        return (lat.ids(edge), last + 1 - words.offsets.index_select(0, token_row), counts, margin,
                lat.scores.index_select(0, edge))

    def segment_sentences(self, rows: Ragged) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SentencePiece's segmentation of whole rows (sentences), in its float32 arithmetic
        (``gputok.kernels.unigram_sentence``): token ids, token ends (characters) and tokens per
        row. Runs on the CPU (a sequential pass per row, linear in its length); the results go
        back to the rows' device."""
        ids, ends, counts = unigram_sentence_viterbi(
            rows.values.cpu().int().numpy(), rows.offsets.cpu().numpy(), *self.trie.walk_arrays,
            self.score32, self.unk_score, -1 if self.unk_id is None else self.unk_id, SCORE_RESET_THRESHOLD)
        if self.unk_id is None and bool((ids < 0).any()):
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        device = rows.device
        return torch.from_numpy(ids).to(device), torch.from_numpy(ends).to(device), torch.from_numpy(counts).to(device)

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """Token ids of each word (ragged codepoints) and each token's end, in characters."""
        settings = getattr(self._local, "sampling", None)
        if settings is not None and getattr(self._local, "nbest_size", -1) > 1:  # each word its own sentence
            return self._sample_nbest(words.values, words.offsets[:-1], words.offsets[1:],
                                      torch.arange(len(words) + 1))
        if _dispatch.on_cpu_kernels(words.device):
            return self._encode_spans_numba(words.values, words.offsets[:-1], words.lengths(), settings)
        if settings is not None:
            ids, ends, counts = self.sample(words, torch.arange(len(words), device=words.device), *settings)
            return self._finish(words, ids, ends, counts)
        ids, ends, counts, _, _ = self.segment(words)
        return self._finish(words, ids, ends, counts)

    def _encode_spans_numba(self, values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor,
                            sampling: tuple[float, torch.Generator | None] | None = None) -> tuple[Ragged, Ragged]:
        """:meth:`encode_words` of the words ``values[starts[i]:][:lengths[i]]`` (CPU tensors) by the
        numba kernels: each word's float64 Viterbi (or, with ``sampling`` = ``(alpha, generator)``,
        a sample: ``kernels/unigram_sample_numba.py``, one uniform per character drawn from the
        generator), then the unk fusion or byte fallback."""
        values, starts = values.int().numpy(), starts.numpy()
        unk_id = -1 if self.unk_id is None else self.unk_id
        if sampling is None:
            ids, ends, offsets, _, missing = unigram_words_numba(
                values, starts, lengths.numpy(), *self.trie.walk_arrays, self._score64_np, self.unk_score, unk_id)
        else:
            alpha, generator = sampling
            uniforms = torch.rand(int(lengths.sum()), generator=generator, dtype=torch.float64)
            ids, ends, offsets, missing = unigram_sample_numba(
                values, starts, lengths.numpy(), *self.trie.walk_arrays, self.lattice_score64, self.unk_score, unk_id,
                alpha, uniforms.numpy())
        if missing:
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        ids, ends, offsets = unigram_finish_numba(ids, ends, offsets, values, starts, unk_id, self._byte_ids_np,
                                                  self.byte_fallback)
        offsets = torch.from_numpy(offsets)
        return Ragged(torch.from_numpy(ids), offsets), Ragged(torch.from_numpy(ends), offsets)

    @functools.cached_property
    def _token_chars(self) -> np.ndarray:
        """Characters each token of a lattice path covers: its piece's, one for the unk candidate."""
        chars = np.array([len(p) for p in self.pieces], np.int64)
        if self.unk_id is not None:
            chars[self.unk_id] = 1
        return chars

    def _sample_nbest(self, values: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor,
                      sentence_words: torch.Tensor) -> tuple[Ragged, Ragged]:
        """Inside :meth:`sampling` with ``nbest_size > 1``: each sentence (words
        ``sentence_words[k] .. sentence_words[k + 1]`` of ``values[starts[w]:ends[w]]``, in order)
        gets the n best paths of its whole text (``unigram_nbest_astar``) and one drawn among them
        (``sample_nbest_at_words``), cut at its words; unks fused or as bytes. Rows per word."""
        from ..kernels.unigram_nbest_numba import sample_nbest_at_words, unigram_nbest_astar

        alpha, generator = self._local.sampling
        device = values.device
        values, starts, ends = values.cpu(), starts.cpu().numpy(), ends.cpu().numpy()
        sentence_words = sentence_words.cpu().numpy()
        first, last = sentence_words[:-1], sentence_words[1:] - 1
        spoken = last >= first  # sentences with words
        row_starts, row_lengths = np.zeros(first.size, np.int64), np.zeros(first.size, np.int64)
        row_starts[spoken] = starts[first[spoken]]
        row_lengths[spoken] = ends[last[spoken]] - row_starts[spoken]
        rows = gather_words(values, torch.from_numpy(row_starts), torch.from_numpy(row_lengths))
        unk_id = -1 if self.unk_id is None else self.unk_id
        tokens, path_offsets, scores, row_paths, missing = unigram_nbest_astar(
            rows.values.int().numpy(), rows.offsets.numpy(), *self.trie.walk_arrays, self.lattice_score64,
            self.unk_score, unk_id, min(self._local.nbest_size, 1024))
        if missing:
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        where = "cpu" if generator is None else generator.device
        uniforms = torch.rand(row_starts.size, generator=generator, dtype=torch.float64, device=where).cpu().numpy()
        ids, token_ends, offsets = sample_nbest_at_words(tokens, path_offsets, scores, row_paths, uniforms, alpha,
                                                         self._token_chars, starts, ends, sentence_words)
        ids, token_ends, offsets = unigram_finish_numba(ids, token_ends, offsets, values.int().numpy(), starts, unk_id,
                                                        self._byte_ids_np, self.byte_fallback)
        offsets = torch.from_numpy(offsets).to(device)
        return Ragged(torch.from_numpy(ids).to(device), offsets), Ragged(torch.from_numpy(token_ends).to(device), offsets)

    def _encode_sentences_numba(self, values: torch.Tensor, words: Words) -> tuple[Ragged, Ragged, torch.Tensor]:
        """:meth:`encode_in_context` in SentencePiece mode on CPU tensors: every text segmented whole
        by SentencePiece's float32 Viterbi (each word a sentence where the words are whole
        sentences), its tokens cut at its words, unks fused or as bytes; one row per word."""
        from ..kernels.unigram_sentence import unigram_sentences_encode

        values, starts = values.int().numpy(), words.starts.numpy()
        num_words = starts.size
        sentences = words.text_offsets if self.splits_at_space else torch.arange(num_words + 1)
        unk_id = -1 if self.unk_id is None else self.unk_id
        ids, ends, offsets = unigram_sentences_encode(values, starts, words.ends.numpy(), sentences.numpy(),
                                                      *self.trie.walk_arrays, self.score32, self.unk_score, unk_id,
                                                      SCORE_RESET_THRESHOLD)
        if unk_id < 0 and ids.size and ids.min() < 0:
            raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                             "give the model an unk piece")
        ids, ends, offsets = unigram_finish_numba(ids, ends, offsets, values, starts, unk_id, self._byte_ids_np,
                                                  self.byte_fallback)
        offsets = torch.from_numpy(offsets)
        return Ragged(torch.from_numpy(ids), offsets), Ragged(torch.from_numpy(ends), offsets), torch.arange(num_words)

    def sample(self, words: Ragged, occurrence_row: torch.Tensor, alpha: float,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One sampled segmentation per occurrence (``occurrence_row``: its row of ``words``):
        forward filtering over each row's lattice (log-sum-exp of ``alpha * score``), then
        backward sampling per occurrence, every occurrence independently (Gumbel-max over the
        edges into its current node). Returns token ids, ends and tokens per occurrence."""
        device = words.device
        n = words.values.numel()
        lens, ids, scores, source, target, num_nodes, node_start, bounds = self._graph(words, in_lattice=True)
        logz = torch.full((num_nodes,), -math.inf, dtype=torch.float64, device=device)
        logz[node_start] = 0.0
        weight = alpha * scores
        for lo, hi in zip(bounds[:-1], bounds[1:]):  # targets of one start position are distinct
            t = target[lo:hi]
            logz[t] = torch.logaddexp(logz[t], logz[source[lo:hi]] + weight[lo:hi])
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

        On the CPU kernels, lists of more than one come from SentencePiece's own A* search
        (``kernels/unigram_nbest_numba.unigram_nbest_astar``): its float32 scores, and paths of
        equal score in its order. The torch path: every node keeps its k best partial paths
        (float64), merged from all incoming edges in one step per start position for all rows;
        paths are then read back per row: the same paths, equal-score ones in another order.
        """
        if nbest_size < 1:
            raise ValueError(f"nbest_size={nbest_size}; pass a positive number of segmentations")
        k = min(nbest_size, 1024)
        device = words.device
        rows = len(words)
        if _dispatch.on_cpu_kernels(device):
            from ..kernels.unigram_nbest_numba import unigram_nbest_astar, unigram_nbest_numba

            search = unigram_nbest_astar if k > 1 else unigram_nbest_numba  # (one: SentencePiece's encoder)
            tokens, path_offsets, path_scores, row_paths, missing = search(
                words.values.int().numpy(), words.offsets.numpy(), *self.trie.walk_arrays,
                self.lattice_score64 if k > 1 else self._score64_np,
                self.unk_score, -1 if self.unk_id is None else self.unk_id, k)
            if missing:
                raise ValueError("the text has characters no piece covers and this Unigram model has no unk_id; "
                                 "give the model an unk piece")
            tokens_l, bounds, scores_l = tokens.tolist(), path_offsets.tolist(), path_scores.tolist()
            row_l = row_paths.tolist()
            return [[(tokens_l[bounds[p]:bounds[p + 1]], scores_l[p]) for p in range(row_l[r], row_l[r + 1])]
                    for r in range(rows)]
        lens, ids, scores, source, target, num_nodes, node_start, bounds = self._graph(words, in_lattice=k > 1)
        best = torch.full((num_nodes, k), -math.inf, dtype=torch.float64, device=device)
        back_edge = torch.full((num_nodes, k), -1, dtype=torch.int64, device=device)
        back_rank = torch.full((num_nodes, k), -1, dtype=torch.int64, device=device)
        best[node_start, 0] = 0.0
        ranks = torch.arange(k, device=device)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            e = torch.arange(lo, hi, device=device)
            t = target[lo:hi]
            cand = best[source[lo:hi]] + scores[lo:hi][:, None]  # [edges, k]
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

    def encode_in_context(self, values: torch.Tensor, words: Words, *,
                          cache: WordCache | None = None) -> tuple[Ragged, Ragged, torch.Tensor]:
        """Segmentation of every word occurrence (``words`` of the normalized ``values``). Returns
        the rows' ids and ends and each occurrence's row.

        SentencePiece mode: a text over :data:`WHOLE_SENTENCE_CHARS` characters is segmented whole
        by SentencePiece's own encoder (:meth:`segment_sentences`), its words never deduplicated;
        the other texts' unique words are segmented on their own, except where the float32
        rounding of the sentence score could reorder a near tie (see the module docstring): those
        texts are segmented whole too. The words of texts segmented whole get rows of their own.
        huggingface mode: the unique words' own. Inside :meth:`sampling`: a sample per occurrence.

        ``cache`` (:class:`gputok.word_cache.WordCache`): unique words seen in earlier batches
        are not segmented again. In SentencePiece mode it stores each word's ids and ends after one
        extra entry each, the bit patterns of the word's float64 margin and score, which the
        float32 check needs; in huggingface mode just the ids and ends.

        On CPU tensors (the numba kernels; see the module notes) every word occurrence gets a row
        of its own (``inverse`` is ``arange``), texts are segmented whole in SentencePiece mode, and
        ``cache`` is not used.
        """
        device = values.device
        lengths = words.lengths()
        num_words = lengths.numel()
        settings = getattr(self._local, "sampling", None)
        if settings is not None and getattr(self._local, "nbest_size", -1) > 1:  # a sample per text, from its n best
            sentences = words.text_offsets if self.sentencepiece and self.splits_at_space else torch.arange(num_words + 1)
            piece_ids, piece_ends = self._sample_nbest(values, words.starts, words.ends, sentences)
            return piece_ids, piece_ends, torch.arange(num_words, device=device)
        if settings is not None and _dispatch.on_cpu_kernels(device):  # a sample per occurrence
            piece_ids, piece_ends = self._encode_spans_numba(values, words.starts, lengths, settings)
            return piece_ids, piece_ends, torch.arange(num_words)
        if settings is not None:  # every occurrence draws its own segmentation
            unique = unique_words(values, words)
            rep = unique.representative
            uniques = gather_words(values, words.starts[rep], lengths[rep])
            ids, ends, counts = self.sample(uniques, unique.inverse, *settings)
            piece_ids, piece_ends = self._finish(gather_words(values, words.starts, lengths), ids, ends, counts)
            return piece_ids, piece_ends, torch.arange(num_words, device=device)
        if _dispatch.on_cpu_kernels(device):  # one kernel pass over the batch, no dedup or cache: see the notes
            if self.sentencepiece:
                return self._encode_sentences_numba(values, words)
            piece_ids, piece_ends = self._encode_spans_numba(values, words.starts, lengths)
            return piece_ids, piece_ends, torch.arange(num_words)
        if self.sentencepiece and not self.splits_at_space:  # the words are whole sentences: as SentencePiece does
            unique = unique_words(values, words)
            rep = unique.representative
            uniques = gather_words(values, words.starts[rep], lengths[rep])
            ids, ends, counts = self.segment_sentences(uniques)
            piece_ids, piece_ends = self._finish(uniques, ids, ends, counts)
            return piece_ids, piece_ends, unique.inverse
        if not self.sentencepiece:  # huggingface: every word on its own, in float64
            unique = unique_words(values, words)
            starts, sizes = words.starts.index_select(0, unique.representative), lengths.index_select(0, unique.representative)
            if cache is None or unique.keys is None:
                piece_ids, piece_ends, _, _ = self._segment_words(values, starts, sizes)
            else:
                piece_ids, piece_ends = cache.encode(self, values, starts, sizes, unique.keys,
                                                     lambda s, n: self._segment_words(values, s, n)[:2])
            return piece_ids, piece_ends, unique.inverse
        # SentencePiece: long texts whole; the words of the others on their own, then the check.
        sentence = row_ids(words.text_offsets, num_words)
        whole = torch.zeros(len(words.text_offsets) - 1, dtype=torch.bool, device=device)
        if num_words:
            first, last = words.text_offsets[:-1], words.text_offsets[1:] - 1
            has_words = last >= first
            text_chars = (words.ends.index_select(0, last.clamp(min=0))
                          - words.starts.index_select(0, first.clamp(max=num_words - 1)))
            whole = has_words & (text_chars > WHOLE_SENTENCE_CHARS)
        short = nonzero(~whole.index_select(0, sentence))
        piece_ids, piece_ends, inverse, margin, word_score = self._segment_short_words(values, words, short, cache)
        fragile = torch.zeros(0, dtype=torch.int64, device=device)
        if short.numel():
            score64, _ = self._tensors(device)
            max_abs = float(score64.abs().max())  # the unk score is the last entry
            short_sentence = sentence.index_select(0, short)
            score_of = torch.zeros(num_words, dtype=torch.float64, device=device)
            score_of.index_copy_(0, short, word_score.abs().index_select(0, inverse.index_select(0, short)))
            magnitude = segment_sum(score_of, words.text_offsets)
            size = lengths.index_select(0, short)
            # float32 keeps 24 bits: each stored score is off by at most magnitude * 2**-24, and a
            # decision sees at most (length + 1) of them on each side (SentencePiece's re-centring
            # only makes the stored scores smaller).
            bound = (2 * size + 4) * (magnitude.index_select(0, short_sentence) + size * max_abs) * 2.0 ** -23
            fragile = short_sentence.index_select(0, nonzero(margin.index_select(0, inverse.index_select(0, short))
                                                              <= bound))
        texts = torch.unique(torch.cat([nonzero(whole), fragile]))
        if not texts.numel():
            return piece_ids, piece_ends, inverse
        return self._segment_whole_texts(values, words, texts, piece_ids, piece_ends, inverse)

    def _segment_short_words(self, values: torch.Tensor, words: Words, chosen: torch.Tensor,
                             cache: WordCache | None) -> tuple[Ragged, Ragged, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The unique words among ``words[chosen]``, each segmented on its own in float64 (with
        ``cache``): their ids and ends, each word's row (-1 for words not chosen), and each row's
        margin and float64 score."""
        device = values.device
        lengths = words.lengths()
        subset = Words(words.starts.index_select(0, chosen), words.ends.index_select(0, chosen),
                       torch.tensor([0, chosen.numel()], device=device))
        unique = unique_words(values, subset)
        starts = subset.starts.index_select(0, unique.representative)
        sizes = subset.lengths().index_select(0, unique.representative)
        if cache is None or unique.keys is None:
            piece_ids, piece_ends, margin, word_score = self._segment_words(values, starts, sizes)
        else:
            def encode(s: torch.Tensor, n: torch.Tensor) -> tuple[Ragged, Ragged]:
                ids, ends, margin, score = self._segment_words(values, s, n)
                return _append(ids, margin.view(torch.int64)), _append(ends, score.view(torch.int64))

            with_ids, with_ends = cache.encode(self, values, starts, sizes, unique.keys, encode)
            (piece_ids, margin), (piece_ends, word_score) = _split_last(with_ids), _split_last(with_ends)
            margin, word_score = margin.view(torch.float64), word_score.view(torch.float64)
        inverse = torch.full((lengths.numel(),), -1, dtype=torch.int64, device=device)
        inverse.index_copy_(0, chosen, unique.inverse)
        return piece_ids, piece_ends, inverse, margin, word_score

    def _segment_whole_texts(self, values: torch.Tensor, words: Words, texts: torch.Tensor, piece_ids: Ragged,
                             piece_ends: Ragged, inverse: torch.Tensor) -> tuple[Ragged, Ragged, torch.Tensor]:
        """``texts`` (sorted, each with words) segmented whole by :meth:`segment_sentences`, their
        tokens cut at their words (no token crosses a '▁' boundary), each of their words given a
        row of its own after the rows of ``piece_ids`` / ``piece_ends``."""
        from ..kernels.unigram_sentence import cut_at_words

        device = values.device
        lengths = words.lengths()
        first, last = words.text_offsets[texts], words.text_offsets[texts + 1] - 1
        starts = words.starts[first]
        rows = gather_words(values, starts, words.ends[last] - starts)
        ids, ends, counts = self.segment_sentences(rows)
        del rows
        token_end = starts.index_select(0, row_ids(offsets_from_lengths(counts), ids.numel())) + ends  # in values
        sent_words = torch.repeat_interleave(first, last - first + 1)
        sent_words = sent_words + positions_in_rows(offsets_from_lengths(last - first + 1), sent_words.numel())
        word_starts = words.starts.index_select(0, sent_words)
        word_counts, word_ends = (torch.from_numpy(t).to(device) for t in cut_at_words(
            token_end.cpu().numpy(), word_starts.cpu().numpy(), words.ends.index_select(0, sent_words).cpu().numpy()))
        del token_end
        # Only byte fallback reads the words' characters.
        new_words = gather_words(values, word_starts, lengths.index_select(0, sent_words)) if self.byte_fallback else None
        new_ids, new_ends = self._finish(new_words, ids, word_ends, word_counts)
        inverse = inverse.clone()
        inverse.index_copy_(0, sent_words, len(piece_ids) + torch.arange(sent_words.numel(), device=device))
        return (Ragged(torch.cat([piece_ids.values, new_ids.values]),
                       torch.cat([piece_ids.offsets, new_ids.offsets[1:] + piece_ids.offsets[-1]])),
                Ragged(torch.cat([piece_ends.values, new_ends.values]),
                       torch.cat([piece_ends.offsets, new_ends.offsets[1:] + piece_ends.offsets[-1]])),
                inverse)

    def _segment_words(self, values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor
                       ) -> tuple[Ragged, Ragged, torch.Tensor, torch.Tensor]:
        """Ids and ends (unks fused or as bytes) of the words ``values[starts[i]:][:lengths[i]]``, with
        each word's margin and float64 score."""
        words = gather_words(values, starts, lengths)
        ids, ends, counts, margin, token_score = self.segment(words)
        piece_ids, piece_ends = self._finish(words, ids, ends, counts)
        return piece_ids, piece_ends, margin, segment_sum(token_score, offsets_from_lengths(counts))

    def _finish(self, words: Ragged | None, ids: torch.Tensor, ends: torch.Tensor, counts: torch.Tensor
                ) -> tuple[Ragged, Ragged]:
        """Fuse runs of unk tokens into one, or with byte fallback expand each to its UTF-8 bytes
        (the characters of ``words``, which only byte fallback reads)."""
        device = ids.device
        if self.unk_id is None or not ids.numel():
            return Ragged.from_lengths(ids, counts), Ragged.from_lengths(ends, counts)
        offsets = offsets_from_lengths(counts)
        is_unk = ids == self.unk_id
        if not bool(is_unk.any()):
            return Ragged(ids, offsets), Ragged(ends, offsets)
        token_row = row_ids(offsets, ids.numel())
        next_unk = torch.zeros_like(is_unk)  # the token after is an unk of the same word
        next_unk[:-1] = is_unk[1:] & (token_row[1:] == token_row[:-1])
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
            # each unk's bytes end where its run of unks ends (huggingface spells the run fused)
            place = torch.arange(ids.numel(), device=device)
            run_last = torch.where(is_unk & ~next_unk, place, ids.numel()).flip(0).cummin(0).values.flip(0)
            run_ends = torch.where(is_unk, ends[run_last.clamp(max=ids.numel() - 1)], ends)
            return (Ragged(out_ids, offsets_from_lengths(segment_sum(per_token, offsets))),
                    Ragged(run_ends[token_of], offsets_from_lengths(segment_sum(per_token, offsets))))
        # Drop an unk token followed by another unk of the same word: the run becomes its last one.
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
        return cls([(p.piece, p.score) for p in model.pieces], unk_id=unknown[0], byte_fallback=model.byte_fallback,
                   types=[p.type for p in model.pieces], sentencepiece=True)


def _append(rows: Ragged, last: torch.Tensor) -> Ragged:
    """Each row of ``rows`` (int64) followed by one more value from ``last``.

    >>> _append(Ragged.from_lengths(torch.tensor([1, 2, 3]), torch.tensor([2, 0, 1])), torch.tensor([7, 8, 9])).tolist()
    [[1, 2, 7], [8], [3, 9]]
    """
    count = rows.values.numel()
    offsets = rows.offsets + torch.arange(len(rows) + 1, device=rows.device)
    out = torch.empty(count + len(rows), dtype=torch.int64, device=rows.device)
    out.index_copy_(0, offsets[1:] - 1, last)
    out.index_copy_(0, torch.arange(count, device=rows.device) + row_ids(rows.offsets, count), rows.values.long())
    return Ragged(out, offsets)


def _split_last(rows: Ragged) -> tuple[Ragged, torch.Tensor]:
    """The rows without their last value (every row has one), and those last values.

    >>> r, last = _split_last(Ragged.from_lengths(torch.tensor([1, 2, 7, 8, 3, 9]), torch.tensor([3, 1, 2])))
    >>> r.tolist(), last.tolist()
    ([[1, 2], [], [3]], [7, 8, 9])
    """
    offsets = rows.offsets - torch.arange(len(rows) + 1, device=rows.device)
    count = int(offsets[-1])
    keep = torch.arange(count, device=rows.device) + row_ids(offsets, count)
    return Ragged(rows.values.index_select(0, keep), offsets), rows.values.index_select(0, rows.offsets[1:] - 1)


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


class MetaspaceSplit(Metaspace):
    """Words of SentencePiece-normalized text: huggingface's Metaspace split (a new word at each
    ``▁`` with ``split=True``, else each text one word), saved as Metaspace with
    ``prepend_scheme="never"``, but *without* Metaspace's rewrite. Metaspace also turns spaces
    into ``▁`` before it splits; here the SentencePiece normalizer has already written the exact
    text, spaces included when the model does not escape them (``escape_whitespaces=false``),
    where that rewrite would change the ids. (It would also cost a pass over the batch.)

    >>> w = MetaspaceSplit()(Ragged.from_lengths(torch.tensor([0x2581, 97, 0x2581, 0x2581, 98]), torch.tensor([5])))
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 3], [2, 3, 5], [0, 3])
    """

    rewrite = None  # the Tokenizer skips a pre-tokenizer's rewrite when it has none

    def __init__(self, *, split: bool = True) -> None:
        super().__init__(replacement=ESCAPED_SPACE, prepend_scheme="never", split=split)


class SentencePieceDecoder:
    """Pieces back to text as SentencePiece decodes: ``<0xNN>`` pieces become bytes, ``▁`` a space,
    the unk piece is ``unk_surface`` and control pieces vanish. The dummy-prefix space is dropped
    as ``SentencePieceProcessor::Decode`` drops it (with ``add_dummy_prefix`` or
    ``remove_extra_whitespaces``): the leading ``▁`` of the first piece; with
    ``remove_extra_whitespaces``, of every piece until one gives text (``"▁" "▁the▁"`` is
    ``"the "``: a user piece copied from the text can follow the dummy prefix).
    Saved as huggingface's Sequence[Replace, ByteFallback, Fuse, Strip].

    >>> SentencePieceDecoder()(["▁H", "<0x69>", "▁", "<0xE2>", "<0x82>", "<0xAC>"])
    'Hi €'
    >>> SentencePieceDecoder(remove_extra_whitespaces=True)(["▁", "▁the▁", "x"])
    'the x'
    """

    type = "SentencePiece"

    def __init__(self, *, add_dummy_prefix: bool = True, unk_piece: str | None = None, unk_surface: str = " \u2047 ",
                 control: frozenset[str] = frozenset(), remove_extra_whitespaces: bool = False) -> None:
        self.add_dummy_prefix = add_dummy_prefix
        self.unk_piece, self.unk_surface, self.control = unk_piece, unk_surface, control
        self.remove_extra_whitespaces = remove_extra_whitespaces

    def __call__(self, tokens: list[str]) -> str:
        out = bytearray()
        at_start = self.add_dummy_prefix or self.remove_extra_whitespaces  # a leading '▁' still to drop
        for token in tokens:
            if token in self.control:
                continue
            if token == self.unk_piece:
                out += self.unk_surface.encode()
                at_start = False
                continue
            if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
                try:
                    out.append(int(token[3:5], 16))
                    at_start = False
                    continue
                except ValueError:
                    pass
            if at_start and token.startswith(ESCAPED_SPACE):
                token = token[1:]
                at_start = not token and self.remove_extra_whitespaces
            elif at_start and token:
                at_start = False
            out += token.replace(ESCAPED_SPACE, " ").encode()
        return out.decode("utf-8", errors="replace")

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
    from .sentencepiece_options import sentencepiece_normalizer

    unigram = Unigram.from_sentencepiece_model(model)
    spec = model.normalizer
    normalizer = sentencepiece_normalizer(model)
    return tokenizer_class(unigram, normalizer=normalizer, pre_tokenizer=MetaspaceSplit(split=unigram.splits_at_space),
                           decoder=SentencePieceDecoder(add_dummy_prefix=spec.add_dummy_prefix,
                                                        remove_extra_whitespaces=spec.remove_extra_whitespaces,
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
