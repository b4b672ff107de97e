"""Byte-level BPE: merge rounds over all unique words of a batch at once.

Follows tiktoken's rule (and huggingface ``tokenizers``' BPE with a merges list): a word starts as
its UTF-8 bytes, one token each; repeatedly, the adjacent pair with the lowest rank is merged,
the leftmost first, until no adjacent pair has a rank. tiktoken ranks a pair by the rank of its
concatenated bytes; a merges list ranks it by its line. With ``ignore_merges`` (tiktoken's rule
too), a word that is itself a token is that token.

Batched (``bpe_merge_torch``): the unique words' tokens are one flat tensor with a row per word.
Each round ranks every adjacent pair through a :class:`gputok.hashing.HashMap` (pair -> rank and
merged token), takes each word's minimum rank (a segment min), and merges *all* occurrences of
that pair in the word, left to right without overlap ("a a a" merges once). That equals the
one-merge-at-a-time rule unless a merge creates, next to it, a pair ranked below the pair being
merged; the round checks exactly that for every merge, and a word where it happens takes only
its leftmost merge this round. Words leave the working set when no pair of theirs has a rank,
so a round costs the tokens of unfinished words only. Memory: a few int64 tensors the size of
the unique words' bytes; the pair map is ~4 slots of 16 bytes per mergeable pair.
"""

from __future__ import annotations

import base64
import functools
import heapq
import os
from pathlib import Path
from typing import Any

import torch

from ..dedup import word_hashes
from ..hashing import HashMap, lookup
from ..ingest import utf8_bytes
from ..ragged import Ragged, offsets_from_lengths, row_ids, segment_sum, span_indices

NO_RANK = torch.iinfo(torch.int64).max
# Longer words merge one pair at a time with a heap (below): a merge round only merges one rank
# per word, so a long word of varied text needs about as many rounds as it has bytes.
LONG_WORD = 256


def bpe_merge_torch(tokens: torch.Tensor, offsets: torch.Tensor, *, slot_keys: torch.Tensor,
                    slot_values: torch.Tensor, hash_mask: int, max_probes: int, vocab_size: int
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge rounds over ragged rows of token ids; returns the merged (tokens, offsets).

    The pair map sends ``left * vocab_size + right`` to ``rank << 32 | merged_id``.

    >>> m = HashMap(torch.tensor([0 * 9 + 1, 3 * 9 + 2]), torch.tensor([(0 << 32) | 3, (1 << 32) | 4]))
    >>> t, o = bpe_merge_torch(torch.tensor([0, 1, 2, 0, 1, 0, 1]), torch.tensor([0, 3, 7]), vocab_size=9,
    ...                        **dict(zip(["slot_keys", "slot_values"], m.tensors("cpu")), hash_mask=m.mask, max_probes=m.max_probes))
    >>> Ragged(t, o).tolist()
    [[4], [3, 3]]
    """
    device = tokens.device
    num_rows = offsets.numel() - 1
    tok = tokens.long()
    row = row_ids(offsets, tok.numel())
    done_tok, done_row = [], []
    pair_map = dict(slot_keys=slot_keys, slot_values=slot_values, mask=hash_mask, max_probes=max_probes)

    def pair_info(left: torch.Tensor, right: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        found = lookup(query=left * vocab_size + right, default=-1, **pair_map)
        return torch.where(found >= 0, found >> 32, NO_RANK), found & 0xFFFFFFFF

    while tok.numel():
        n = tok.numel()
        same_row = row[1:] == row[:-1]
        rank = torch.full((n,), NO_RANK, dtype=torch.int64, device=device)  # rank of pair (i, i+1)
        merged = torch.zeros(n, dtype=torch.int64, device=device)
        at = torch.nonzero(same_row).flatten()
        rank[at], merged[at] = pair_info(tok[at], tok[at + 1])
        best = torch.full((num_rows,), NO_RANK, dtype=torch.int64, device=device)
        best.scatter_reduce_(0, row, rank, reduce="amin")
        finished = best[row] == NO_RANK
        if bool(finished.any()):
            done_tok.append(tok[finished])
            done_row.append(row[finished])
            keep = ~finished
            tok, row, rank, merged = tok[keep], row[keep], rank[keep], merged[keep]
            n = tok.numel()
            if not n:
                break
        candidate = rank == best[row]
        # Non-overlapping, left to right: inside a run of consecutive candidates, every other one.
        index = torch.arange(n, device=device)
        prev = torch.zeros_like(candidate)
        prev[1:] = candidate[:-1]
        run_start = torch.where(candidate & ~prev, index, -1)
        run_start = torch.cummax(run_start, 0).values
        chosen = candidate & ((index - run_start) % 2 == 0)
        # Would the one-at-a-time rule merge something else first? Check each merge's new pairs.
        left_of = index - 1
        has_left = left_of >= 0
        has_left[1:] &= row[1:] == row[:-1]
        prev_chosen = torch.zeros_like(chosen)
        prev_chosen[2:] = chosen[:-2]
        left_tok = torch.where(prev_chosen, merged[(index - 2).clamp(min=0)], tok[left_of.clamp(min=0)])
        has_right = torch.zeros_like(chosen)
        has_right[:-2] = row[2:] == row[:-2]
        right_tok = tok[(index + 2).clamp(max=n - 1)]
        c = torch.nonzero(chosen).flatten()
        r = best[row[c]]
        rank_left, _ = pair_info(left_tok[c], merged[c])
        rank_right, _ = pair_info(merged[c], right_tok[c])
        early = (has_left[c] & (rank_left < r)) | (has_right[c] & (rank_right < r))
        if bool(early.any()):
            # One at a time would merge this word's occurrences up to the first such merge, then
            # the new pair: so this round stops there.
            first_early = torch.full((num_rows,), n, dtype=torch.int64, device=device)
            first_early.scatter_reduce_(0, row[c[early]], c[early], reduce="amin")
            chosen[c] = c <= first_early[row[c]]
            c = torch.nonzero(chosen).flatten()
        tok[c] = merged[c]
        keep = torch.ones(n, dtype=torch.bool, device=device)
        keep[c + 1] = False
        tok, row = tok[keep], row[keep]
    if not done_tok:
        return tokens.new_zeros(0).long(), torch.zeros(num_rows + 1, dtype=torch.int64, device=device)
    tok, row = torch.cat(done_tok), torch.cat(done_row)
    order = torch.sort(row, stable=True).indices
    counts = torch.bincount(row, minlength=num_rows)
    return tok[order], offsets_from_lengths(counts)


def bpe_merge_heap(tokens: list[int], pairs: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """One word, one merge at a time (lowest rank, leftmost first): O(n log n) with a heap.

    The reference rule itself, for words too long for merge rounds (adversarial input: a megabyte
    without spaces). Stale heap entries are skipped when popped.

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
    """Byte-level BPE: ``token_bytes[id]`` is each token's bytes (None for unused ids), and
    ``merges`` maps a pair of ids to ``(rank, merged id)``. ``ignore_merges``: a word that is a
    token is that token (tiktoken's rule; huggingface's GPT-2 files leave it off).
    """

    type = "BPE"

    def __init__(self, token_bytes: list[bytes], merges: dict[tuple[int, int], tuple[int, int]], *,
                 ignore_merges: bool = True) -> None:
        self.token_bytes = token_bytes
        self.ignore_merges = ignore_merges
        self.vocab_size = len(token_bytes)
        ids = {b: i for i, b in enumerate(token_bytes) if b is not None}
        missing = [b for b in range(256) if bytes([b]) not in ids]
        if missing:
            raise ValueError(f"the BPE vocabulary lacks single-byte tokens for bytes {missing[:8]}..."
                             " so some text cannot be encoded; byte-level BPE needs all 256")
        self.byte_to_id = torch.tensor([ids[bytes([b])] for b in range(256)], dtype=torch.int64)
        self._merge_list = lambda: merges
        self._pairs_dict = merges
        keys = torch.tensor([a * self.vocab_size + b for a, b in merges], dtype=torch.int64)
        values = torch.tensor([(rank << 32) | merged for rank, merged in merges.values()], dtype=torch.int64)
        self.pairs = HashMap(keys, values)
        # Whole-word lookup (ignore_merges): hash of a token's bytes -> token id.
        lengths = torch.tensor([len(b) if b else 0 for b in token_bytes], dtype=torch.int64)
        flat = torch.frombuffer(bytearray(b"".join(b or b"" for b in token_bytes)), dtype=torch.uint8)
        self._token_bytes = Ragged(flat.long(), offsets_from_lengths(lengths))
        hashes = word_hashes(self._token_bytes.values, self._token_bytes.offsets)
        real = torch.nonzero(lengths > 0).flatten()
        self.whole = HashMap(hashes[real] & ((1 << 63) - 1), real)

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike) -> BPE:
        """A ``.tiktoken`` file: one ``base64(token) rank`` line per token; ids are the ranks."""
        ranks: dict[bytes, int] = {}
        for number, line in enumerate(Path(path).read_bytes().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
            except (IndexError, ValueError) as e:
                raise ValueError(f"{path}:{number}: not a 'base64-token rank' line: {line[:60]!r}") from e
            ranks[token] = rank
        token_bytes: list[bytes | None] = [None] * (max(ranks.values()) + 1)
        for token, rank in ranks.items():
            token_bytes[rank] = token
        merges = {}
        for token, rank in ranks.items():
            for cut in range(1, len(token)):
                left, right = ranks.get(token[:cut]), ranks.get(token[cut:])
                if left is not None and right is not None:
                    merges[(left, right)] = (rank, rank)
        model = cls(token_bytes, merges, ignore_merges=True)
        # A tiktoken pair map holds every split of every token; a saved file needs one merge per
        # token, which takes seconds of Python to derive, so only on save.
        model._merge_list = lambda: merges_from_ranks(ranks)
        return model

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """Token ids of each word (ragged codepoints), and each token's end in characters.

        A token that ends inside a multi-byte character ends after that character.
        """
        data, byte_char = utf8_bytes(words)
        lengths = data.lengths()
        byte_ids = self.byte_to_id.to(data.device)[data.values.long()]
        done = lengths <= 1
        if self.ignore_merges:
            found = lookup(*self.whole.tensors(data.device), self.whole.mask, self.whole.max_probes,
                                word_hashes(data.values.long(), data.offsets) & ((1 << 63) - 1))
            # Verify the bytes (a 63-bit hash collision must not change a token).
            hit = torch.nonzero(found >= 0).flatten()
            tb = self._token_bytes.to(data.device) if data.device.type != "cpu" else self._token_bytes
            ok = tb.lengths()[found[hit]] == lengths[hit]
            hit, ok_ids = hit[ok], found[hit][ok]
            same = segment_sum((data.values.long()[_gather_rows(data.offsets, hit)]
                                != tb.values[_gather_rows(tb.offsets, ok_ids)]).long(),
                               offsets_from_lengths(lengths[hit])) == 0
            whole_ids = torch.full_like(lengths, -1)
            whole_ids[hit[same]] = ok_ids[same]
            done |= whole_ids >= 0
        by_heap = ~done & (lengths > LONG_WORD)
        long_words = torch.nonzero(by_heap).flatten()
        done |= by_heap
        todo = torch.nonzero(~done).flatten()
        sub_lengths = lengths[todo]
        sub = byte_ids[_gather_rows(data.offsets, todo)]
        keys, values = self.pairs.tensors(data.device)
        merged, merged_offsets = bpe_merge_torch(sub, offsets_from_lengths(sub_lengths), slot_keys=keys, slot_values=values,
                                       hash_mask=self.pairs.mask, max_probes=self.pairs.max_probes,
                                       vocab_size=self.vocab_size)
        out_lengths = torch.where(done, torch.where(lengths == 0, 0, 1), 0)
        out_lengths[todo] = merged_offsets[1:] - merged_offsets[:-1]
        long_ids = [torch.tensor(bpe_merge_heap(byte_ids[data.offsets[w]:data.offsets[w + 1]].tolist(), self._pairs_dict),
                                 dtype=torch.int64, device=data.device) for w in long_words.tolist()]
        out_lengths[long_words] = torch.tensor([len(t) for t in long_ids], dtype=torch.int64, device=data.device)
        out_offsets = offsets_from_lengths(out_lengths)
        out = torch.empty(int(out_offsets[-1]), dtype=torch.int64, device=data.device)
        if long_ids:
            out[_gather_rows(out_offsets, long_words)] = torch.cat(long_ids)
        single = torch.nonzero(done & (lengths > 0) & ~by_heap).flatten()
        first_ids = byte_ids[data.offsets[:-1][single]]
        if self.ignore_merges:
            first_ids = torch.where(whole_ids[single] >= 0, whole_ids[single], first_ids)
        out[out_offsets[:-1][single]] = first_ids
        out[_gather_rows(out_offsets, todo)] = merged
        ids = Ragged(out, out_offsets)
        # Byte end of each token within its word -> the character holding its last byte, + 1.
        token_len = self._token_bytes.lengths().to(out.device)[out]
        csum = torch.cumsum(token_len, 0)
        word_start = torch.zeros(out.numel(), dtype=torch.int64, device=out.device)
        if out.numel():
            before = torch.cat([csum.new_zeros(1), csum])[out_offsets[:-1]]
            word_start = before[row_ids(out_offsets, out.numel())]
        last_byte = data.offsets[:-1][row_ids(out_offsets, out.numel())] + csum - word_start - 1
        char_first = words.offsets[:-1][row_ids(out_offsets, out.numel())]
        ends = byte_char[last_byte] - char_first + 1 if out.numel() else out.clone()
        return ids, Ragged(ends, out_offsets)

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> BPE:
        """The ``model`` of a huggingface tokenizer.json with byte-level BPE (GPT-2 style)."""
        unsupported = {k: spec.get(k) for k in ("continuing_subword_prefix", "end_of_word_suffix", "dropout")
                       if spec.get(k)}
        if spec.get("byte_fallback"):
            unsupported["byte_fallback"] = True
        if unsupported:
            raise ValueError(f"BPE options {unsupported} are not supported yet; gputok reads byte-level BPE "
                             "(GPT-2 style) tokenizer.json files")
        vocab, merges = spec.get("vocab"), spec.get("merges")
        if not isinstance(vocab, dict) or not vocab or not isinstance(merges, list):
            raise ValueError("BPE model in tokenizer.json needs a non-empty 'vocab': {token: id} and 'merges': [...]")
        decode = byte_decoder()
        token_bytes: list[bytes | None] = [None] * (max(vocab.values()) + 1)
        for token, i in vocab.items():
            try:
                token_bytes[i] = bytes(decode[ch] for ch in token)
            except KeyError:
                raise ValueError(f"BPE token {token!r} is not in the byte-level alphabet; only byte-level "
                                 "BPE tokenizer.json files are supported") from None
        pairs = {}
        for rank, merge in enumerate(merges):
            left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
            ids = (vocab.get(left), vocab.get(right), vocab.get(left + right))
            if None in ids:
                missing = [t for t, i in zip((left, right, left + right), ids) if i is None]
                raise ValueError(f"merge {rank} ({left!r}, {right!r}) names tokens that are not in the "
                                 f"vocabulary: {missing}")
            pairs.setdefault((ids[0], ids[1]), (rank, ids[2]))
        return cls(token_bytes, pairs, ignore_merges=bool(spec.get("ignore_merges", False)))

    def to_json(self) -> dict[str, Any]:
        """A huggingface BPE model: byte-level token strings, merges in rank order."""
        encode = {b: ch for ch, b in byte_decoder().items()}
        names = ["".join(encode[b] for b in t) if t is not None else "" for t in self.token_bytes]
        by_rank = sorted((rank, a, b) for (a, b), (rank, _) in self._merge_list().items())
        return {"type": self.type, "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                "ignore_merges": self.ignore_merges,
                "vocab": {name: i for i, name in enumerate(names) if self.token_bytes[i] is not None},
                "merges": [[names[a], names[b]] for _, a, b in by_rank]}

    def id_to_token(self) -> list[str]:
        """Token strings for display (bytes that are not valid UTF-8 show U+FFFD)."""
        return [(b or b"").decode("utf-8", errors="replace") for b in self.token_bytes]

    @functools.cached_property
    def vocab(self) -> dict[str, int]:
        """``{token: id}`` for the tokens whose bytes are valid UTF-8."""
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


def _gather_rows(offsets: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Flat indices of the values of ``rows`` (in order) of a ragged tensor with ``offsets``."""
    return span_indices(offsets[rows], offsets[rows + 1] - offsets[rows])[0]
