"""WordPiece: greedy longest-match-first over a vocabulary trie, for all unique words at once.

Follows huggingface ``tokenizers``' WordPiece model (itself BERT's): a word longer than
``max_input_chars_per_word`` characters is the unk token; otherwise, from the start of the word,
take the longest vocabulary piece that matches (pieces after the first carry the
``continuing_subword_prefix``, "##"), and repeat from where it ended. If some position has no
match, the whole word becomes the unk token (the reference rule). ``partial_unk=True`` instead
turns only each unmatched run of characters into one unk token and keeps the other pieces.

Where it runs: on the CPU, the numba kernel ``gputok.kernels.wordpiece_match_numba``, one loop
per word over the ragged codepoints (no padding; output sized by a piece per character). On CUDA,
the Triton kernel ``gputok.kernels.wordpiece_match`` (one word per lane), and under the torch
backend its twin ``wordpiece_match_torch`` (all words in lock-step): both over the padded
[unique words, longest word] codepoint matrix plus two int32 matrices of the same shape for the
pieces. All three walk the same trie tables.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from .. import _dispatch
from ..dedup import padded_chars
from ..ragged import Ragged, positions_in_rows
from ..trie import Trie, trie_step
from ..kernels.wordpiece_match_numba import wordpiece_encode_numba

UNMATCHED = -2  # piece id the matcher emits for an unmatched character in partial-unk mode


def wordpiece_match_torch(chars: torch.Tensor, lengths: torch.Tensor, *, slot_keys: torch.Tensor,
                          slot_values: torch.Tensor, hash_mask: int, max_probes: int,
                          token_of_node: torch.Tensor, ascii_row: torch.Tensor, ascii_children: torch.Tensor,
                          partial_unk: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy longest-match of every row of ``chars`` (padded codepoints) against the trie.

    Returns ``piece_ids`` and ``piece_ends`` ([words, width] int32, -1 past the last piece) and
    ``num_pieces`` ([words] int32; -1 where the word has an unmatched position and partial_unk is
    off). Root 0 starts a word, root 1 continues it.

    Every word runs the same small state machine as the Triton kernel, all words in lock-step:
    each iteration either takes one trie edge or, when the walk cannot go on, emits the longest
    token seen and restarts after it. So the Python loop runs (longest word's steps) times, and
    words leave the working set as they finish.

    >>> t = Trie([{"un": 0, "a": 1}, {"aff": 2, "able": 3}])
    >>> chars = torch.tensor([[ord(c) for c in "unaffable"]])
    >>> ids, ends, n = wordpiece_match_torch(chars, torch.tensor([9]), partial_unk=False, **t.tensors("cpu"))
    >>> ids[0, :n[0]].tolist(), ends[0, :n[0]].tolist()
    ([0, 2, 3], [2, 5, 9])
    """
    num_words, width = chars.shape
    device = chars.device
    piece_ids = torch.full((num_words, width), -1, dtype=torch.int32, device=device)
    piece_ends = torch.full((num_words, width), -1, dtype=torch.int32, device=device)
    num_pieces = torch.zeros(num_words, dtype=torch.int32, device=device)
    flat_chars = chars.reshape(-1)
    word = torch.nonzero(lengths > 0).flatten()
    length = lengths[word].long()
    start = torch.zeros_like(word)  # where the piece being matched starts
    cur = torch.zeros_like(word)  # the next character to walk
    node = torch.zeros_like(word)
    best_end = torch.full_like(word, -1)
    best_id = torch.full_like(word, -1)
    count = torch.zeros_like(word)
    while word.numel():
        codepoint = flat_chars[word * width + cur].long()
        child = trie_step(node, codepoint, ascii_row, ascii_children, slot_keys, slot_values, hash_mask, max_probes)
        moved = child >= 0
        node = torch.where(moved, child, node)
        cur = cur + moved
        token = torch.where(moved, token_of_node[node].long(), -1)
        ends_token = token >= 0
        best_end = torch.where(ends_token, cur, best_end)
        best_id = torch.where(ends_token, token, best_id)
        stop = ~moved | (cur >= length)
        if not bool(stop.any()):
            continue
        failed = stop & (best_end < 0)
        if partial_unk:
            best_id = torch.where(failed, UNMATCHED, best_id)
            best_end = torch.where(failed, start + 1, best_end)
            emit = stop
        else:
            num_pieces[word[failed]] = -1
            emit = stop & ~failed
        piece_ids[word[emit], count[emit]] = best_id[emit].int()
        piece_ends[word[emit], count[emit]] = best_end[emit].int()
        count = count + emit
        start = torch.where(emit, best_end, start)
        cur = torch.where(emit, best_end, cur)
        node = torch.where(emit, 1, node)
        best_end = torch.where(emit, -1, best_end)
        best_id = torch.where(emit, -1, best_id)
        finished = emit & (start >= length)
        num_pieces[word[finished]] = count[finished].int()
        keep = ~(finished | (failed & ~emit))
        if not bool(keep.all()):
            word, length, start, cur, node, best_end, best_id, count = (
                t[keep] for t in (word, length, start, cur, node, best_end, best_id, count))
    return piece_ids, piece_ends, num_pieces


def wordpiece_match(chars: torch.Tensor, lengths: torch.Tensor, trie: Trie, partial_unk: bool):
    tensors = trie.tensors(chars.device)
    if _dispatch.backend(chars.device) == "triton":
        from ..kernels.wordpiece_match import wordpiece_match_triton

        return wordpiece_match_triton(chars, lengths, partial_unk=partial_unk, **tensors)
    return wordpiece_match_torch(chars, lengths, partial_unk=partial_unk, **tensors)


class WordPiece:
    """huggingface's WordPiece: greedy longest match first (a numba kernel on the CPU)."""

    type = "WordPiece"

    def __init__(self, vocab: dict[str, int], *, unk_token: str = "[UNK]",
                 continuing_subword_prefix: str = "##", max_input_chars_per_word: int = 100,
                 partial_unk: bool = False, continuations: dict[str, int] | None = None) -> None:
        """``continuations``: the pieces that may follow another (default: the tokens that carry
        ``continuing_subword_prefix``, without it; WordLevel passes none)."""
        if unk_token not in vocab:
            raise ValueError(f"the WordPiece unk token {unk_token!r} is not in the vocabulary "
                             f"({len(vocab)} tokens); add it or pass unk_token= one that is")
        self.vocab = vocab
        self.unk_token = unk_token
        self.unk_id = vocab[unk_token]
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self.partial_unk = partial_unk
        prefix = continuing_subword_prefix
        # huggingface looks a continuation up as prefix + piece: with prefix "", any token continues
        if continuations is None:
            continuations = ({p[len(prefix):]: i for p, i in vocab.items() if p.startswith(prefix)} if prefix
                             else dict(vocab))
        self.continuations = continuations
        self.trie = Trie([vocab, self.continuations])

    def encode_words(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """Token ids of each word (ragged codepoints), and each piece's end (in characters).

        The words are laid out as a padded matrix cut at ``max_input_chars_per_word + 1``
        columns: longer words become unk whatever they hold.
        """
        if _dispatch.on_cpu_kernels(words.device):
            return self._encode_numba(words)
        lengths = words.lengths()
        width = max(1, min(int(lengths.max()) if lengths.numel() else 0, self.max_input_chars_per_word + 1))
        chars = padded_chars(words.values, words.offsets[:-1], lengths, width)
        too_long = lengths > self.max_input_chars_per_word
        ids, ends, num = wordpiece_match(chars, torch.where(too_long, 0, lengths), self.trie,
                                         self.partial_unk)
        unk = too_long | (num < 0)
        num = torch.where(unk, 1, num).long()
        ids[unk, 0] = self.unk_id
        ends[unk, 0] = lengths[unk].int()
        keep = torch.arange(chars.shape[1], device=chars.device)[None, :] < num[:, None]
        if self.partial_unk:
            # Runs of unmatched characters become one unk: drop all but the last of each run.
            unmatched = ids == UNMATCHED
            next_unmatched = torch.zeros_like(unmatched)
            next_unmatched[:, :-1] = unmatched[:, 1:]
            keep &= ~(unmatched & next_unmatched)
            ids[unmatched] = self.unk_id
            num = keep.sum(1)
        return Ragged.from_lengths(ids[keep], num), Ragged.from_lengths(ends[keep], num)

    def _encode_numba(self, words: Ragged) -> tuple[Ragged, Ragged]:
        """:meth:`encode_words` of CPU words: one call of the numba kernel, the same pieces."""
        codes = words.values.numpy()
        if codes.dtype != np.int32:  # one compiled signature (codepoints fit int32)
            codes = codes.astype(np.int32)
        ids, ends, offsets = wordpiece_encode_numba(codes, words.offsets.numpy(),
                                                    max_chars=self.max_input_chars_per_word,
                                                    unk_id=self.unk_id, partial_unk=self.partial_unk,
                                                    **self._numba_tables)
        offsets = torch.from_numpy(offsets)
        return Ragged(torch.from_numpy(ids), offsets), Ragged(torch.from_numpy(ends), offsets)

    __getstate__ = _dispatch.state_without_kernel_tables  # pickled without the kernels' tables

    @functools.cached_property
    def _numba_tables(self) -> dict[str, Any]:
        """The trie's arrays as numpy (views of its CPU tensors), for the kernel."""
        return {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in self.trie.tensors("cpu").items()}

    def id_to_token(self) -> list[str]:
        tokens = [""] * (max(self.vocab.values()) + 1)
        for token, i in self.vocab.items():
            tokens[i] = token
        return tokens

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "unk_token": self.unk_token,
                "continuing_subword_prefix": self.continuing_subword_prefix,
                "max_input_chars_per_word": self.max_input_chars_per_word, "vocab": self.vocab}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> WordPiece:
        vocab = spec.get("vocab")
        if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
            raise ValueError("WordPiece model in tokenizer.json needs 'vocab': {token: id}")
        return cls(vocab, unk_token=spec.get("unk_token", "[UNK]"),
                   continuing_subword_prefix=spec.get("continuing_subword_prefix", "##"),
                   max_input_chars_per_word=spec.get("max_input_chars_per_word", 100))


def piece_starts(ends: Ragged) -> torch.Tensor:
    """Start of each piece within its word, from the ends: ``[[2, 5, 9]] -> [0, 2, 5]``."""
    starts = torch.zeros_like(ends.values)
    starts[1:] = ends.values[:-1]
    first = positions_in_rows(ends.offsets, ends.values.numel()) == 0
    starts[first] = 0
    return starts

