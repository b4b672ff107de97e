"""BPE, byte-level or character-level: merge rounds over all unique words of a batch at once.

Follows tiktoken's rule (and huggingface ``tokenizers``' BPE with a merges list): a word starts as
its UTF-8 bytes, one token each (byte-level), or as its characters looked up in the vocabulary
(character-level: huggingface's ``BPE::merge_word`` with its continuing-subword prefix, end-of-word
suffix such as ``</w>``, byte fallback to ``<0xNN>`` tokens and ``<unk>``, see
:meth:`BPE.initial_symbols`); only that first stage differs. Then, repeatedly, the adjacent pair
with the lowest rank is merged, the leftmost first, until no adjacent pair has a rank. tiktoken
ranks a pair by the rank of its concatenated bytes; a merges list ranks it by its line. With
``ignore_merges`` (tiktoken's rule too), a word that is itself a token is that token.

Where it runs. On the CPU (:meth:`BPE.encode_words`), two numba kernels per call: the initial
symbols of every word (``gputok.kernels.bpe_symbols_numba``, ignore_merges included), then every
word's merges in ``gputok.kernels.bpe_heap``, one merge at a time with a priority queue (O(n log n)
per word at worst, in practice O(n): ~64 bytes of scratch per symbol of the longest word, 24 per
rank, only the ranks used touched), which also gives each token's last symbol, hence its end. On
CUDA, the Triton kernel ``gputok.kernels.bpe_merge`` (one program per word, O(n) per merge) for
words up to ``LONG_WORD`` symbols, and the numba kernel, over a copy on the CPU, for longer
words and for words that must merge one pair at a time (``tie_chars``).

The torch twin (``bpe_merge_torch``, CUDA tensors under ``GPUTOK_BACKEND=torch``): the unique
words' tokens are one flat tensor with a row per word.
Every adjacent pair is ranked once through a :class:`gputok.hashing.HashMap` (pair -> rank and
merged token; byte-level words' initial byte pairs through a dense 256 x 256 copy of
it); each round takes each word's minimum rank (a segment min) and merges *all*
occurrences of that pair in the word, left to right without overlap ("a a a" merges once), and
only the two pairs next to each merge are ranked again. That equals the one-merge-at-a-time
rule unless a merge creates, next to it, a pair ranked below the pair being merged; the round
checks exactly that for every merge, and a word where it happens stops this round after that
merge. Words leave the working set when no pair of theirs has a rank, so a round costs the
tokens of unfinished words only (a segment min, a compare and a compaction over them; the rest
is per merge). Memory: a few int64 tensors the size of the unique words' bytes; the pair map is
~4 slots of 16 bytes per mergeable pair.
"""

from __future__ import annotations

import functools
import heapq
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import _dispatch, bpe_dropout
from .._validate import FileFormatError
from ..dedup import span_hashes
from ..hashing import HashMap, lookup
from ..ingest import utf8_bytes
from ..ragged import Ragged, nonzero, offsets_from_lengths, positions_in_rows, row_ids, segment_sum, span_indices
from ..kernels.bpe_heap import bpe_merge_numba
from ..kernels.bpe_heap import merge_rows
from ..kernels.bpe_heap import rank_levels
from ..kernels.bpe_symbols_numba import bpe_symbols_numba
from ..kernels.bpe_symbols_numba import build_whole_table

NO_RANK = torch.iinfo(torch.int64).max
_NO_ENDS = np.zeros(0, np.int64)  # bpe_heap.merge_rows: no token ends wanted
# On CUDA, longer words merge in the numba kernel on the CPU: the Triton kernel costs a word's
# length per merge, and a merge round of the torch twin merges one rank per word, so a long
# word of varied text needs about as many rounds as it has bytes.
LONG_WORD = 256


def bpe_merge_torch(tokens: torch.Tensor, offsets: torch.Tensor, *, slot_keys: torch.Tensor,
                    slot_values: torch.Tensor, hash_mask: int, max_probes: int, vocab_size: int,
                    first_values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge rounds over ragged rows of token ids; returns the merged (tokens, offsets).

    The pair map sends ``left * vocab_size + right`` to ``rank << 32 | merged_id``.
    ``first_values``: the pair map's value of every pair ``(tokens[i], tokens[i + 1])``, if the
    caller has them (byte-level BPE reads them from a dense byte-pair table: one gather instead
    of hash probes); those that straddle two rows are ignored.

    Each position keeps the pair map's value for the pair it starts (``NO_RANK`` if none), so
    only the pairs next to a merge are looked up again; a round costs a segment min, a compare
    and a compaction over the unfinished tokens, everything else is per merge. Comparing the
    packed values compares ranks: pairs of equal rank merge into the same token (tiktoken) or
    are the same pair (a merges list).

    >>> m = HashMap(torch.tensor([0 * 9 + 1, 3 * 9 + 2]), torch.tensor([(0 << 32) | 3, (1 << 32) | 4]))
    >>> t, o = bpe_merge_torch(torch.tensor([0, 1, 2, 0, 1, 0, 1]), torch.tensor([0, 3, 7]), vocab_size=9,
    ...                        **dict(zip(["slot_keys", "slot_values"], m.tensors("cpu")), hash_mask=m.mask, max_probes=m.max_probes))
    >>> Ragged(t, o).tolist()
    [[4], [3, 3]]
    """
    device = tokens.device
    num_rows = offsets.numel() - 1
    tok = tokens.to(torch.int64, copy=True)  # merged in place below; the input stays intact
    row = row_ids(offsets, tok.numel())
    done_tok, done_row = [], []
    pair_map = dict(slot_keys=slot_keys, slot_values=slot_values, mask=hash_mask, max_probes=max_probes)

    def pair_value(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        # stored values (rank << 32 | id) are never negative: a missing pair reads as NO_RANK
        return lookup(query=left * vocab_size + right, default=NO_RANK, **pair_map)

    n = tok.numel()
    value = torch.full((n,), NO_RANK, dtype=torch.int64, device=device)  # of the pair (i, i + 1)
    if n > 1:
        first = pair_value(tok[:-1], tok[1:]) if first_values is None else first_values
        value[:-1] = torch.where(row[1:] == row[:-1], first, NO_RANK)
    while n:
        best = torch.full((num_rows,), NO_RANK, dtype=torch.int64, device=device)
        best.scatter_reduce_(0, row, value, reduce="amin")
        best_here = best.index_select(0, row)
        finished = best_here == NO_RANK
        cand = nonzero((value == best_here) & ~finished)
        # Non-overlapping, left to right: inside a run of consecutive candidates, every other one.
        # (Consecutive candidates share a row: a row's last position has no pair.)
        run_start = torch.ones_like(cand, dtype=torch.bool)
        run_start[1:] = cand[1:] != cand[:-1] + 1
        c = cand
        if not bool(run_start.all()):  # a repeated pair ("aaaa"): rare, so checked first
            k = torch.arange(cand.numel(), device=device)
            first_of_run = torch.cummax(torch.where(run_start, k, 0), 0).values
            c = cand.index_select(0, nonzero((k - first_of_run) % 2 == 0))
        # The pairs each merge makes with its neighbours, as the one-at-a-time rule sees them:
        # the left one after the merge two to the left (if chosen), the right one before the
        # merge two to the right. One at a time would merge a new pair ranked below the
        # merged one first: the word stops this round at its first merge that makes one.
        m = value.index_select(0, c)
        new_tok = m & 0xFFFFFFFF
        c_row = row.index_select(0, c)
        has_left = c > 0
        left_at = (c - 1).clamp(min=0)
        has_left &= row.index_select(0, left_at) == c_row
        chosen_before = torch.zeros_like(has_left)
        chosen_before[1:] = c[1:] == c[:-1] + 2
        before = torch.cat([new_tok[:1], new_tok[:-1]])
        left_tok = torch.where(chosen_before, before, tok.index_select(0, left_at))
        right_at = (c + 2).clamp(max=n - 1)
        has_right = (c + 2 < n) & (row.index_select(0, right_at) == c_row)
        both = pair_value(torch.cat([left_tok, new_tok]), torch.cat([new_tok, tok.index_select(0, right_at)]))
        left_value = torch.where(has_left, both[:c.numel()], NO_RANK)
        right_value = torch.where(has_right, both[c.numel():], NO_RANK)
        early = ((left_value >> 32) < (m >> 32)) | ((right_value >> 32) < (m >> 32))
        if bool(early.any()):
            first_early = torch.full((num_rows,), n, dtype=torch.int64, device=device)
            first_early.scatter_reduce_(0, c_row[early], c[early], reduce="amin")
            keep_c = nonzero(c <= first_early.index_select(0, c_row))
            c, new_tok, has_left, chosen_before, left_value, right_value = (
                t.index_select(0, keep_c) for t in (c, new_tok, has_left, chosen_before, left_value, right_value))
        # Apply: the merged token at c, its right part dropped; the pair values next to it.
        # (scatter_ and index_fill_ rather than indexed assignment: several times faster on the CPU)
        tok.scatter_(0, c, new_tok)
        value.scatter_(0, c, right_value)
        owner = nonzero(has_left)
        value.scatter_(0, c.index_select(0, owner) - 1 - chosen_before.index_select(0, owner).long(),
                       left_value.index_select(0, owner))
        drop = finished.clone().index_fill_(0, c + 1, True)
        out = nonzero(finished)
        if out.numel():
            done_tok.append(tok.index_select(0, out))
            done_row.append(row.index_select(0, out))
        keep = nonzero(~drop)
        tok, row, value = tok.index_select(0, keep), row.index_select(0, keep), value.index_select(0, keep)
        n = tok.numel()
    if not done_tok:
        return tokens.new_zeros(0).long(), torch.zeros(num_rows + 1, dtype=torch.int64, device=device)
    tok, row = torch.cat(done_tok), torch.cat(done_row)
    order = torch.sort(row, stable=True).indices
    counts = torch.bincount(row, minlength=num_rows)
    return tok[order], offsets_from_lengths(counts)


def bpe_merge(tokens: torch.Tensor, offsets: torch.Tensor, *, first_values: torch.Tensor | None = None,
              **pair_map: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Merged (tokens, offsets) of ragged rows, through the dispatch: the Triton kernel
    (``gputok.kernels.bpe_merge``, one program per word) on CUDA; on the CPU the numba kernel of
    :func:`bpe_merge_one_at_a_time`; the torch twin :func:`bpe_merge_torch` for CUDA tensors
    under ``GPUTOK_BACKEND=torch``. ``first_values`` go to the torch twin only (the kernels look
    every pair up themselves)."""
    backend = _dispatch.backend(tokens.device)
    if backend == "triton":
        from ..kernels.bpe_merge import bpe_merge_triton

        return bpe_merge_triton(tokens, offsets, **pair_map)
    if tokens.device.type == "cpu":
        return bpe_merge_one_at_a_time(tokens, offsets, **pair_map)
    return bpe_merge_torch(tokens, offsets, first_values=first_values, **pair_map)


def bpe_merge_one_at_a_time(tokens: torch.Tensor, offsets: torch.Tensor, *, slot_keys: torch.Tensor,
                            slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                            vocab_size: int,
                            level_start: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged rows merged by the reference rule itself, one pair at a time (lowest rank, leftmost
    first), in O(n log n) per row: the numba kernel ``gputok.kernels.bpe_heap`` on the CPU. Rows
    on a GPU are copied over and back (the words that need it are few: long ones and ties).
    ``slot_keys``/``slot_values``: the pair map's CPU arrays; ``level_start``: ``bpe_heap.rank_levels``
    of its values, if the caller keeps them (else a pass over the map per call)."""
    merged, merged_offsets = bpe_merge_numba(tokens.cpu(), offsets.cpu(), slot_keys=slot_keys,
                                             slot_values=slot_values, hash_mask=hash_mask,
                                             max_probes=max_probes, vocab_size=vocab_size, level_start=level_start)
    return merged.to(tokens.device), merged_offsets.to(tokens.device)


def bpe_merge_heap(tokens: list[int], pairs: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """One word, one merge at a time (lowest rank, leftmost first): O(n log n) with a heap.

    The reference rule itself, in Python: the twin the numba kernel (``gputok.kernels.bpe_heap``)
    is tested against. Stale heap entries are skipped when popped.

    >>> bpe_merge_heap([0, 1, 0, 1], {(0, 1): (1, 2), (1, 0): (3, 3), (2, 0): (0, 4), (0, 3): (0, 4)})
    [4, 1]
    """
    n = len(tokens)
    tokens = list(tokens)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    heap = [(pairs[(tokens[i], tokens[i + 1])][0], i, tokens[i], tokens[i + 1])
            for i in range(n - 1) if (tokens[i], tokens[i + 1]) in pairs]
    heapq.heapify(heap)
    while heap:
        rank, i, left, right = heapq.heappop(heap)
        j = nxt[i] if alive[i] else n
        if j >= n or tokens[i] != left or tokens[j] != right:
            continue
        tokens[i] = pairs[(left, right)][1]
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
        for a in (prv[i], i):
            b = nxt[a] if a >= 0 else n
            if a >= 0 and b < n and (tokens[a], tokens[b]) in pairs:
                heapq.heappush(heap, (pairs[(tokens[a], tokens[b])][0], a, tokens[a], tokens[b]))
    return [t for t, keep in zip(tokens, alive) if keep]


class BPE:
    """BPE over byte-level or character symbols; ``merges`` maps a pair of ids to ``(rank, merged id)``.

    Byte-level (``token_bytes``: each token's bytes, None for unused ids): a word starts as its
    UTF-8 bytes, one token each (GPT-2, tiktoken). Character-level (``tokens``: each token's
    string): a word starts as its characters looked up in the vocabulary, as huggingface's BPE
    model does: ``continuing_subword_prefix`` before every character but the first,
    ``end_of_word_suffix`` after the last (``</w>``); a character not in the vocabulary becomes its
    UTF-8 bytes as ``<0xNN>`` tokens with ``byte_fallback``, else ``unk_token`` (one for a run of
    them with ``fuse_unk``), else nothing. ``ignore_merges``: a word that is a token is that token
    (tiktoken's rule; huggingface's files leave it off). Words with 3 or more characters from
    ``tie_chars`` merge one pair at a time (the heap), because equal ranks of different pairs
    (SentencePiece scores) must be taken leftmost first, which a merge round does not promise.
    """

    type = "BPE"
    #: huggingface's BPE-dropout: each merge skipped with this probability (None: plain BPE); see
    #: :mod:`gputok.bpe_dropout` and :meth:`sampling`.
    dropout: float | None = None

    def __init__(self, token_bytes: list[bytes | None] | None, merges: dict[tuple[int, int], tuple[int, int]], *,
                 ignore_merges: bool = True, tokens: list[str | None] | None = None, unk_token: str | None = None,
                 fuse_unk: bool = False, byte_fallback: bool = False, continuing_subword_prefix: str | None = None,
                 end_of_word_suffix: str | None = None, tie_chars: str = "") -> None:
        self.byte_level = tokens is None
        if self.byte_level == (token_bytes is None):
            raise ValueError("pass exactly one of token_bytes (byte-level BPE) and tokens= (character-level BPE)")
        self.ignore_merges = ignore_merges
        self.unk_token, self.fuse_unk, self.byte_fallback = unk_token, fuse_unk, byte_fallback
        self.continuing_subword_prefix, self.end_of_word_suffix = continuing_subword_prefix, end_of_word_suffix
        self.tie_chars = tie_chars
        self.tokens = tokens
        self.token_bytes = token_bytes if self.byte_level else [None if t is None else t.encode() for t in tokens]
        self.vocab_size = len(self.token_bytes)
        self._pairs_dict = merges
        # A pair map can hold more than a saved file's one merge per token (tiktoken: every split
        # of a token; SentencePiece: shared ranks). The loader then sets a function deriving them,
        # run on save only (seconds of Python for tiktoken), and module-level so the model pickles.
        self._merges_to_save: Callable[[BPE], dict[tuple[int, int], tuple[int, int]]] | None = None
        keys = torch.tensor([a * self.vocab_size + b for a, b in merges], dtype=torch.int64)
        values = torch.tensor([(rank << 32) | merged for rank, merged in merges.values()], dtype=torch.int64)
        self.pairs = HashMap(keys, values)
        if self.byte_level:
            ids = self._id_of_bytes
            missing = [b for b in range(256) if bytes([b]) not in ids]
            if missing:
                raise ValueError(f"the BPE vocabulary lacks single-byte tokens for bytes {missing[:8]}..."
                                 " so some text cannot be encoded; byte-level BPE needs all 256: add the missing ones")
            self.byte_to_id = torch.tensor([ids[bytes([b])] for b in range(256)], dtype=torch.int64)
            # The pair map's value of every byte pair, dense (512 KB): a word's first merge round
            # ranks its byte pairs with one gather each.
            self._byte_of_id = torch.zeros(self.vocab_size, dtype=torch.int64)
            self._byte_of_id[self.byte_to_id] = torch.arange(256)
            pair_ids = self.byte_to_id[:, None] * self.vocab_size + self.byte_to_id[None, :]
            self._byte_pairs = self.pairs.get(pair_ids.flatten(), default=NO_RANK)
            # A token's "keys" are what a word is compared with for ignore_merges: bytes here,
            # codepoints for character-level BPE; its units are the initial symbols it covers.
            key_lists = [list(b or b"") for b in token_bytes]
        else:
            self._char_ids = _char_map(tokens, continuing_subword_prefix or "", end_of_word_suffix or "")
            self._fallback_ids = torch.tensor([self.vocab.get(f"<0x{b:02X}>", -1) for b in range(256)])
            key_lists = [[ord(c) for c in t or ""] for t in tokens]
        lengths = torch.tensor([len(k) for k in key_lists], dtype=torch.int64)
        self._token_keys = Ragged(torch.tensor([c for k in key_lists for c in k], dtype=torch.int64),
                                  offsets_from_lengths(lengths))
        self._units = lengths if self.byte_level else _symbol_units(self.vocab_size, merges)
        self.whole = None
        if ignore_merges:  # whole-word lookup
            hashes = span_hashes(self._token_keys.values, self._token_keys.offsets[:-1], self._token_keys.offsets[1:])
            real = torch.nonzero(lengths > 0).flatten()
            self.whole = HashMap(hashes[real], real)  # span_hashes are non-negative already
        self._tie_chars = torch.tensor(sorted(map(ord, set(tie_chars))), dtype=torch.int64)
        self._on_device: dict[torch.device, dict[str, Any]] = {}

    def _on(self, device: torch.device) -> dict[str, Any]:
        """The model's lookup tensors on ``device``, copied there once (a dict swap: thread-safe)."""
        device = torch.device(device)
        tensors = self._on_device.get(device)
        if tensors is None:
            names = {"token_keys": self._token_keys, "units": self._units, "tie_chars": self._tie_chars}
            if self.byte_level:
                names.update(byte_to_id=self.byte_to_id, byte_of_id=self._byte_of_id, byte_pairs=self._byte_pairs)
            else:
                names["fallback_ids"] = self._fallback_ids
            tensors = {name: t.to(device) for name, t in names.items()}
            self._on_device = {**self._on_device, device: tensors}
        return tensors

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike) -> BPE:
        """A ``.tiktoken`` file: one ``base64(token) rank`` line per token; ids are the ranks
        (checked as tiktoken checks them: :func:`gputok.formats.read_tiktoken`)."""
        from ..formats import read_tiktoken

        return cls.from_ranks(read_tiktoken(path), source=str(path))

    @classmethod
    def from_ranks(cls, ranks: dict[bytes, int], *, source: str = "ranks") -> BPE:
        """tiktoken's ``mergeable_ranks`` (``{token bytes: rank}``, checked by the caller); the ids
        are the ranks. ``source`` names the ranks in errors."""
        token_bytes: list[bytes | None] = [None] * (max(ranks.values()) + 1)
        for token, rank in ranks.items():
            token_bytes[rank] = token
        merges = {}
        for token, rank in ranks.items():
            for cut in range(1, len(token)):
                left, right = ranks.get(token[:cut]), ranks.get(token[cut:])
                if left is not None and right is not None:
                    merges[(left, right)] = (rank, rank)
        try:
            model = cls(token_bytes, merges, ignore_merges=True)
        except ValueError as e:  # the model's own checks (all 256 single bytes): name the file
            raise FileFormatError(f"{source}: {e}") from e
        model._merges_to_save = _tiktoken_merges
        return model

    def initial_symbols(self, words: Ragged) -> tuple[Ragged, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Each word's symbols before merging, as token ids; the index into ``words.values`` of
        the character each symbol comes from (its last, for a fused unknown run); with
        ``ignore_merges``, the id of each word that is a token (-1 if none); and which words must
        merge one pair at a time (``tie_chars``).

        >>> m = BPE(None, {}, tokens=["a", "b", "<unk>", "<0xC3>", "<0xA9>"], unk_token="<unk>", byte_fallback=True)
        >>> s, src, _, _ = m.initial_symbols(Ragged.from_lengths(torch.tensor([97, 233, 120, 98]), torch.tensor([2, 2])))
        >>> s.tolist(), src.tolist()
        ([[0, 3, 4], [2, 1]], [0, 1, 1, 2, 3])
        """
        device = words.device
        codes = words.values.long()
        if self.byte_level:
            data, source = utf8_bytes(words)
            symbols = Ragged(self._on(device)["byte_to_id"].index_select(0, data.values.long()), data.offsets)
            keys = Ragged(data.values.long(), data.offsets)
        else:
            symbols, source = self._char_symbols(words)
            keys = Ragged(codes, words.offsets)
        whole_ids = self._whole_word_ids(keys) if self.ignore_merges else None
        one_at_a_time = torch.zeros(len(words), dtype=torch.bool, device=device)
        if self._tie_chars.numel():
            tied = torch.isin(codes, self._on(device)["tie_chars"]).long()
            one_at_a_time = segment_sum(tied, words.offsets) >= 3
        return symbols, source, whole_ids, one_at_a_time

    def _byte_pair_values(self, tokens: torch.Tensor) -> torch.Tensor:
        """The pair map's value of each pair ``(tokens[i], tokens[i + 1])`` of byte tokens."""
        tables = self._on(tokens.device)
        code = tables["byte_of_id"].index_select(0, tokens)
        return tables["byte_pairs"].index_select(0, (code[:-1] << 8) | code[1:])

    def _char_symbols(self, words: Ragged) -> tuple[Ragged, torch.Tensor]:
        """Character-level initial symbols, following huggingface's ``BPE::merge_word``."""
        device = words.device
        codes = words.values.long()
        n = codes.numel()
        row = row_ids(words.offsets, n)
        pos = positions_in_rows(words.offsets, n)
        first, last = pos == 0, pos == words.lengths()[row] - 1
        variant = (~first).long() + 2 * last.long()  # which of prefix / suffix the symbol carries
        char_map = self._char_ids
        ids = lookup(*char_map.tensors(device), char_map.mask, char_map.max_probes, variant << 21 | codes)
        count = (ids >= 0).long()  # symbols per character
        unknown = torch.nonzero(ids < 0).flatten()
        fallback = torch.zeros(0, dtype=torch.int64, device=device)
        fallback_ok = torch.zeros(unknown.numel(), dtype=torch.bool, device=device)
        if self.byte_fallback and unknown.numel():
            # The bytes of the symbol's string, prefix and suffix included, as the reference does.
            fallback, fb_offsets = self._fallback_bytes(codes[unknown], variant[unknown])
            fallback = self._on(device)["fallback_ids"][fallback]
            fallback_ok = segment_sum((fallback < 0).long(), fb_offsets) == 0
            count[unknown[fallback_ok]] = fb_offsets[1:][fallback_ok] - fb_offsets[:-1][fallback_ok]
            fallback = fallback[_gather_rows(fb_offsets, torch.nonzero(fallback_ok).flatten())]
        is_unk = torch.zeros(n, dtype=torch.bool, device=device)
        if self.unk_token is not None:
            is_unk[unknown[~fallback_ok]] = True
            if bool(is_unk.any()) and self.unk_id is None:
                raise ValueError(f"unk_token {self.unk_token!r} is not in the vocabulary; add it or pass another")
            keep = is_unk.clone()
            if self.fuse_unk:  # a run of unknown characters is one unk, placed at the run's last character
                keep[:-1] &= ~(is_unk[1:] & ~last[:-1])
            count[keep] = 1
            ids = torch.where(keep, self.unk_id if self.unk_id is not None else -1, ids)
        offsets = offsets_from_lengths(count)
        values = torch.empty(int(offsets[-1]), dtype=torch.int64, device=device)
        single = count == 1
        if fallback.numel():
            multi_or_fb = torch.zeros(n, dtype=torch.bool, device=device)
            multi_or_fb[unknown[fallback_ok]] = True
            single &= ~multi_or_fb
            values[_gather_rows(offsets, unknown[fallback_ok])] = fallback
        values[offsets[:-1][single]] = ids[single]
        source = row_ids(offsets, values.numel())
        return Ragged(values, offsets_from_lengths(segment_sum(count, words.offsets))), source

    def _fallback_bytes(self, codes: torch.Tensor, variant: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """UTF-8 bytes of ``prefix? + char + suffix?`` for each character (ragged)."""
        prefix = torch.tensor([ord(c) for c in self.continuing_subword_prefix or ""], dtype=torch.int64,
                              device=codes.device)
        suffix = torch.tensor([ord(c) for c in self.end_of_word_suffix or ""], dtype=torch.int64, device=codes.device)
        p = (variant & 1) * prefix.numel()
        lengths = p + 1 + (variant >> 1) * suffix.numel()
        offsets = offsets_from_lengths(lengths)
        total = int(offsets[-1])
        which = row_ids(offsets, total)
        k = positions_in_rows(offsets, total) - p[which]  # < 0: prefix, 0: the character, > 0: suffix
        chars = torch.where(k == 0, codes[which], 0)
        if prefix.numel():
            chars = torch.where(k < 0, prefix[(k + prefix.numel()).clamp(0, prefix.numel() - 1)], chars)
        if suffix.numel():
            chars = torch.where(k > 0, suffix[(k - 1).clamp(0, suffix.numel() - 1)], chars)
        data, _ = utf8_bytes(Ragged(chars, offsets))
        return data.values.long(), data.offsets

    def _whole_word_ids(self, keys: Ragged) -> torch.Tensor:
        """The token id of each word whose keys (bytes or codepoints) are a token's, else -1."""
        device = keys.device
        lengths = keys.lengths()
        found = lookup(*self.whole.tensors(device), self.whole.mask, self.whole.max_probes,
                       span_hashes(keys.values, keys.offsets[:-1], keys.offsets[1:]))
        # Verify the keys (a 63-bit hash collision must not change a token).
        hit = nonzero(found >= 0)
        tk = self._on(device)["token_keys"]
        hit_ids, hit_lengths = found.index_select(0, hit), lengths.index_select(0, hit)
        ok = nonzero(tk.lengths().index_select(0, hit_ids) == hit_lengths)
        hit, ok_ids, hit_lengths = hit.index_select(0, ok), hit_ids.index_select(0, ok), hit_lengths.index_select(0, ok)
        same = nonzero(segment_sum((keys.values.index_select(0, _gather_rows(keys.offsets, hit))
                                    != tk.values.index_select(0, _gather_rows(tk.offsets, ok_ids))).long(),
                                   offsets_from_lengths(hit_lengths)) == 0)
        whole_ids = torch.full_like(lengths, -1)
        whole_ids[hit.index_select(0, same)] = ok_ids.index_select(0, same)
        return whole_ids

    def encode_word_bytes(self, word: bytes) -> list[int]:
        """One word's ids (byte-level BPE): the word's token if it is one (``ignore_merges``), else
        its bytes merged by the numba kernel of :func:`bpe_merge_one_at_a_time` (numpy in and out,
        a few microseconds a word). For callers that hold Python bytes."""
        if self.ignore_merges:
            whole = self._id_of_bytes.get(word)
            if whole is not None:
                return [whole]
        symbols = self._numba_tables["symbols"]["byte_to_id"][np.frombuffer(word, np.uint8)]
        offsets = merge_rows(symbols, np.array([0, symbols.size], np.int64), _NO_ENDS, **self._numba_tables["merges"])
        return symbols[:offsets[1]].tolist()

    @functools.cached_property
    def _id_of_bytes(self) -> dict[bytes, int]:
        """``{token bytes: id}`` (byte-level)."""
        return {b: i for i, b in enumerate(self.token_bytes) if b is not None}

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """Token ids of each word (ragged codepoints), and each token's end in characters.

        A token that ends inside a multi-byte character ends after that character.
        """
        if self.is_sampling:
            return bpe_dropout.encode_words(self, words)
        if _dispatch.on_cpu_kernels(words.device):
            return self._encode_numba(words)
        data, byte_char, whole_ids, one_at_a_time = self.initial_symbols(words)
        lengths = data.lengths()
        byte_ids = data.values  # the initial symbols: bytes, or characters, as token ids
        done = lengths <= 1
        if self.ignore_merges:
            done |= whole_ids >= 0
        # Long words and one-at-a-time words merge in the numba kernel, O(n log n) per word. (On the
        # CPU, bpe_merge runs that kernel for every word.)
        by_heap = ~done & ((lengths > LONG_WORD) | one_at_a_time)
        if data.device.type == "cpu" and _dispatch.backend(data.device) != "triton":
            by_heap = torch.zeros_like(done)
        long_words = nonzero(by_heap)
        done |= by_heap
        todo = nonzero(~done)
        sub_lengths = lengths.index_select(0, todo)
        sub = byte_ids.index_select(0, _gather_rows(data.offsets, todo))
        keys, values = self.pairs.tensors(data.device)
        pair_map = dict(hash_mask=self.pairs.mask, max_probes=self.pairs.max_probes, vocab_size=self.vocab_size)
        if todo.numel():
            first_values = (self._byte_pair_values(sub) if self.byte_level and _dispatch.backend(data.device) == "torch"
                            and data.device.type != "cpu" else None)
            merged, merged_offsets = bpe_merge(sub, offsets_from_lengths(sub_lengths), slot_keys=keys,
                                               slot_values=values, first_values=first_values, **pair_map)
        else:
            merged, merged_offsets = sub, offsets_from_lengths(sub_lengths)
        out_lengths = torch.where(done, torch.where(lengths == 0, 0, 1), 0)
        out_lengths[todo] = merged_offsets[1:] - merged_offsets[:-1]
        heap_ids, heap_offsets = bpe_merge_one_at_a_time(
            byte_ids.index_select(0, _gather_rows(data.offsets, long_words)),
            offsets_from_lengths(lengths.index_select(0, long_words)), slot_keys=self.pairs.slot_keys,
            slot_values=self.pairs.slot_values, level_start=self._numba_tables["merges"]["level_start"], **pair_map)
        out_lengths[long_words] = heap_offsets[1:] - heap_offsets[:-1]
        out_offsets = offsets_from_lengths(out_lengths)
        out = torch.empty(int(out_offsets[-1]), dtype=torch.int64, device=data.device)
        out[_gather_rows(out_offsets, long_words)] = heap_ids
        single = nonzero(done & (lengths > 0) & ~by_heap)
        first_ids = byte_ids[data.offsets[:-1][single]]
        if self.ignore_merges:
            first_ids = torch.where(whole_ids[single] >= 0, whole_ids[single], first_ids)
        out[out_offsets[:-1][single]] = first_ids
        out[_gather_rows(out_offsets, todo)] = merged
        ids = Ragged(out, out_offsets)
        # Byte end of each token within its word -> the character holding its last byte, + 1.
        token_len = self._on(out.device)["units"].index_select(0, out)  # initial symbols per token
        csum = torch.cumsum(token_len, 0)
        if not out.numel():
            return ids, Ragged(out.clone(), out_offsets)
        token_word = row_ids(out_offsets, out.numel())
        before = torch.cat([csum.new_zeros(1), csum]).index_select(0, out_offsets[:-1])
        # the word's first byte + the token's last byte within the word
        last_byte = (data.offsets[:-1] - before).index_select(0, token_word) + csum - 1
        ends = byte_char.index_select(0, last_byte) - words.offsets[:-1].index_select(0, token_word) + 1
        return ids, Ragged(ends, out_offsets)

    @property
    def is_sampling(self) -> bool:
        """True when encoding samples its merges: a ``dropout`` above 0, from the file or
        :meth:`sampling`."""
        return bpe_dropout.settings(self) is not None

    def sampling(self, dropout: float | None = None, generator: torch.Generator | None = None):
        """Within the block, encoding (in any thread) skips each merge with probability ``dropout``
        (default: the model's own), drawing from ``generator`` (a CPU ``torch.Generator``): the
        same seed, the same ids. ``dropout=0`` is plain BPE, 1 merges nothing.

        >>> m = BPE(None, {(0, 1): (0, 2)}, tokens=["a", "b", "ab"], ignore_merges=False)
        >>> word = Ragged.from_lengths(torch.tensor([97, 98] * 1000), torch.full((1000,), 2))
        >>> with m.sampling(0.3, torch.Generator().manual_seed(0)):
        ...     ids, _ = m.encode_words(word)
        >>> 600 < sum(row == [2] for row in ids.tolist()) < 800  # merged unless skipped: 1 - 0.3
        True
        """
        return bpe_dropout.sampling(self, dropout, generator)

    @property
    def encode_in_context(self):
        """While sampling, the tokenizer's word step: every word occurrence sampled on its own, no
        cache (None otherwise: words are deduplicated and cached as usual)."""
        if not self.is_sampling:
            return None
        return lambda values, words, cache=None: bpe_dropout.encode_in_context(self, values, words)

    def _encode_numba(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """:meth:`encode_words` of CPU words: the initial symbols in one numba kernel
        (``gputok.kernels.bpe_symbols_numba``), every word's merges in another
        (``gputok.kernels.bpe_heap``, which also gives each token's last symbol), and one gather
        from symbols to characters."""
        codes = words.values.numpy()
        if codes.dtype != np.int32:  # one compiled signature (codepoints fit int32)
            codes = codes.astype(np.int32)
        tables = self._numba_tables
        got = bpe_symbols_numba(codes, words.offsets.numpy(), **tables["symbols"])
        if got is None:
            raise ValueError(f"unk_token {self.unk_token!r} is not in the vocabulary; add it or pass another")
        symbols, offsets, source = got
        last = np.empty(symbols.size, np.int64)  # per merged token: 1 + its last symbol's index
        out_offsets = merge_rows(symbols, offsets, last, **tables["merges"])
        total = out_offsets[-1]
        ends = source[last[:total] - 1]
        ends += 1  # the character holding the token's last symbol, + 1
        out_offsets = torch.from_numpy(out_offsets)
        return Ragged(torch.from_numpy(symbols[:total]), out_offsets), Ragged(torch.from_numpy(ends), out_offsets)

    __getstate__ = _dispatch.state_without_kernel_tables  # pickled without the kernels' tables

    @functools.cached_property
    def _numba_tables(self) -> dict[str, dict[str, Any]]:
        """The model's tables and options as numpy arrays and scalars, for the CPU kernels, made on
        first use: options changed after a model has encoded on the CPU are not seen there."""
        none = np.zeros(0, np.int64)
        token_keys, token_offsets = self._token_keys.values.numpy(), self._token_keys.offsets.numpy()
        chars = self._char_ids if not self.byte_level else HashMap(torch.zeros(0, dtype=torch.int64),
                                                                  torch.zeros(0, dtype=torch.int64))
        unk_id = self.unk_id
        symbols = dict(
            byte_level=self.byte_level, byte_to_id=self.byte_to_id.numpy() if self.byte_level else none,
            char_keys=chars.slot_keys.numpy(), char_values=chars.slot_values.numpy(), char_mask=chars.mask,
            char_probes=chars.max_probes, byte_fallback=self.byte_fallback,
            fallback_ids=none if self.byte_level else self._fallback_ids.numpy(),
            prefix=np.array([ord(c) for c in self.continuing_subword_prefix or ""], np.int64),
            suffix=np.array([ord(c) for c in self.end_of_word_suffix or ""], np.int64),
            has_unk=self.unk_token is not None, unk_id=-1 if unk_id is None else unk_id, fuse_unk=self.fuse_unk,
            whole_slots=build_whole_table(token_keys, token_offsets) if self.ignore_merges else none,
            token_keys=token_keys, token_offsets=token_offsets)
        merges = dict(slot_keys=self.pairs.slot_keys.numpy(), slot_values=self.pairs.slot_values.numpy(),
                      hash_mask=self.pairs.mask, max_probes=self.pairs.max_probes, vocab_size=self.vocab_size,
                      level_start=rank_levels(self.pairs.slot_values.numpy()))
        return {"symbols": symbols, "merges": merges}

    @property
    def unk_id(self) -> int | None:
        return None if self.unk_token is None else self.vocab.get(self.unk_token)

    @classmethod
    def from_json(cls, spec: dict[str, Any], *, byte_level: bool = True) -> BPE:
        """The ``model`` of a huggingface tokenizer.json. ``byte_level``: the pipeline maps bytes to
        GPT-2's alphabet (a ByteLevel pre-tokenizer), so the tokens are spelled in it; otherwise
        the symbols are characters. Merges are "a b" strings or ["a", "b"] pairs; a pair listed
        twice takes its last rank, as huggingface does."""
        dropout = bpe_dropout.checked_dropout(spec.get("dropout"))
        if dropout is not None:  # sampled merges (gputok.bpe_dropout)
            model = cls.from_json({**spec, "dropout": None}, byte_level=byte_level)
            model.dropout = dropout
            return model
        vocab, merges = spec.get("vocab"), spec.get("merges")
        if not isinstance(vocab, dict) or not vocab or not isinstance(merges, list):
            raise ValueError("BPE model in tokenizer.json needs a non-empty 'vocab': {token: id} and 'merges': [...]")
        prefix, suffix = spec.get("continuing_subword_prefix") or None, spec.get("end_of_word_suffix") or None
        if byte_level and (prefix or suffix):
            raise ValueError(f"continuing_subword_prefix={prefix!r} / end_of_word_suffix={suffix!r} with a ByteLevel "
                             "pre-tokenizer is not supported; they are read for character-level BPE")
        tokens: list[str | None] = [None] * (max(vocab.values()) + 1)
        for token, i in vocab.items():
            tokens[i] = token
        pairs = {}
        for rank, merge in enumerate(merges):
            parts = merge.split(" ") if isinstance(merge, str) else merge
            if len(parts) != 2:
                raise ValueError(f"merge {rank} is not 'left right' or [left, right]: {merge!r}")
            left, right = parts
            merged = left + (right[len(prefix):] if prefix else right)  # the reference drops right's prefix
            ids = (vocab.get(left), vocab.get(right), vocab.get(merged))
            if None in ids:
                missing = [t for t, i in zip((left, right, merged), ids) if i is None]
                raise ValueError(f"merge {rank} ({left!r}, {right!r}) names tokens that are not in the "
                                 f"vocabulary: {missing}")
            pairs[(ids[0], ids[1])] = (rank, ids[2])
        options = dict(ignore_merges=bool(spec.get("ignore_merges", False)), unk_token=spec.get("unk_token"),
                       fuse_unk=bool(spec.get("fuse_unk", False)), byte_fallback=bool(spec.get("byte_fallback", False)))
        if not byte_level:
            return cls(None, pairs, tokens=tokens, continuing_subword_prefix=prefix, end_of_word_suffix=suffix,
                       **options)
        decode = byte_decoder()
        token_bytes: list[bytes | None] = [None] * len(tokens)
        for i, token in enumerate(tokens):
            try:
                token_bytes[i] = None if token is None else bytes(decode[ch] for ch in token)
            except KeyError:
                raise ValueError(f"BPE token {token!r} is not in the byte-level alphabet of the ByteLevel "
                                 "pre-tokenizer; without one, the tokens are read as characters") from None
        return cls(token_bytes, pairs, **options)

    def to_json(self) -> dict[str, Any]:
        """A huggingface BPE model: token strings (byte-level: in GPT-2's alphabet), merges in rank order."""
        if self.byte_level:
            encode = {b: ch for ch, b in byte_decoder().items()}
            names = ["".join(encode[b] for b in t) if t is not None else None for t in self.token_bytes]
        else:
            names = self.tokens
        merges = self._pairs_dict if self._merges_to_save is None else self._merges_to_save(self)
        by_rank = sorted((rank, a, b) for (a, b), (rank, _) in merges.items())
        return {"type": self.type, "dropout": self.dropout, "unk_token": self.unk_token,
                "continuing_subword_prefix": self.continuing_subword_prefix,
                "end_of_word_suffix": self.end_of_word_suffix, "fuse_unk": self.fuse_unk,
                "byte_fallback": self.byte_fallback, "ignore_merges": self.ignore_merges,
                "vocab": {name: i for i, name in enumerate(names) if name is not None},
                "merges": [[names[a], names[b]] for _, a, b in by_rank]}

    def id_to_token(self) -> list[str]:
        """Token strings (byte-level: their bytes as UTF-8, U+FFFD where not valid)."""
        if not self.byte_level:
            return [t or "" for t in self.tokens]
        return [(b or b"").decode("utf-8", errors="replace") for b in self.token_bytes]

    @functools.cached_property
    def vocab(self) -> dict[str, int]:
        """``{token: id}`` (byte-level: for the tokens whose bytes are valid UTF-8)."""
        if not self.byte_level:
            return {t: i for i, t in enumerate(self.tokens) if t is not None}
        vocab = {}
        for i, b in enumerate(self.token_bytes):
            try:
                vocab[(b or b"").decode("utf-8")] = i
            except UnicodeDecodeError:
                pass
        return vocab

    def decode_bytes(self, ids: list[int]) -> bytes:
        try:
            return b"".join(self.token_bytes[i] for i in ids)
        except (IndexError, TypeError) as e:
            raise ValueError(f"token id outside the vocabulary (size {self.vocab_size}): {e}") from e


def _char_map(tokens: list[str | None], prefix: str, suffix: str) -> HashMap:
    """Initial symbols of character-level BPE: ``variant << 21 | codepoint`` -> token id, where
    variant bit 0 is "not the word's first character" (the token carries ``prefix``) and bit 1 is
    "the word's last character" (it carries ``suffix``)."""
    keys, values = [], []
    for variant in range(4):
        p, q = prefix if variant & 1 else "", suffix if variant & 2 else ""
        size = len(p) + 1 + len(q)
        found = [(i, t[len(p)]) for i, t in enumerate(tokens)
                 if t is not None and len(t) == size and (size == 1 or (t.startswith(p) and t.endswith(q)))]
        keys += [variant << 21 | ord(c) for _, c in found]
        values += [i for i, _ in found]
    return HashMap(torch.tensor(keys, dtype=torch.int64), torch.tensor(values, dtype=torch.int64))


def _symbol_units(vocab_size: int, merges: dict[tuple[int, int], tuple[int, int]]) -> torch.Tensor:
    """Initial symbols each token covers: 1, or the sum over the parts of its lowest-ranked merge.

    Used only for the tokens' character offsets. Parts made by later-ranked merges are resolved
    by repeating until nothing changes (a pass per level of nesting, at load time).
    """
    units = [1] * vocab_size
    by_rank = sorted((rank, a, b, m) for (a, b), (rank, m) in merges.items())
    first = {}
    for rank, a, b, m in by_rank:
        first.setdefault(m, (a, b))
    for _ in range(64):  # deeper nesting (or a cycle, which no word can reach) keeps the last value
        changed = False
        for m, (a, b) in first.items():
            if units[m] != units[a] + units[b] and m not in (a, b):
                units[m] = units[a] + units[b]
                changed = True
        if not changed:
            break
    return torch.tensor(units, dtype=torch.int64)


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte.

    Printable Latin-1 bytes stand for themselves; the others map to U+0100 onwards, in order.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


def merges_from_ranks(ranks: dict[bytes, int]) -> dict[tuple[int, int], tuple[int, int]]:
    """The merge list equivalent to tiktoken ranks: for each token, the two parts BPE joins last.

    Running BPE on a token's bytes with only the ranks below its own leaves exactly two parts;
    that pair is its merge, ranked by the token's rank. Pure Python, run once per file.
    """
    merges = {}
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 62))
            if ranks.get(parts[best] + parts[best + 1], 1 << 62) >= rank:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) == 2 and parts[0] in ranks and parts[1] in ranks:
            merges[(ranks[parts[0]], ranks[parts[1]])] = (rank, rank)
    return merges


def _tiktoken_merges(model: BPE) -> dict[tuple[int, int], tuple[int, int]]:
    """:func:`merges_from_ranks` of a model read from a ``.tiktoken`` file (its ids are the ranks)."""
    return merges_from_ranks({token: rank for rank, token in enumerate(model.token_bytes) if token is not None})


def _gather_rows(offsets: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Flat indices of the values of ``rows`` (in order) of a ragged tensor with ``offsets``."""
    starts = offsets.index_select(0, rows)
    return span_indices(starts, offsets.index_select(0, rows + 1) - starts)[0]
