"""Corpus to word counts: stream text through a normalizer and pre-tokenizer on tensors.

What the reference trainers (huggingface ``tokenizers``' ``BpeTrainer`` / ``WordPieceTrainer``)
count first: every line of every file (a file is read line by line, each line *with* its ``\\n``,
as ``Tokenizer.train(files)`` reads it; an iterator's items are sequences as given) goes through
the tokenizer's normalizer and pre-tokenizer, and each resulting word is counted.
:class:`WordCounter` does that a chunk of 512 kB at a time, all on tensors:

1. a chunk of whole lines is decoded once (invalid UTF-8 becomes U+FFFD: the reference refuses
   such a file, we replace), viewed as codepoints, and cut into rows at its ``\\n`` (a tensor
   ``nonzero``, not a Python split), so the pre-tokenizer never matches across lines;
2. normalize, pre-tokenize, :func:`gputok.dedup.unique_words`, ``bincount``: the chunk's unique
   words and int64 counts; byte-level pipelines then map each word's UTF-8 bytes to the GPT-2
   byte characters (the words a byte-level trainer sees);
3. chunk tables are merged by 64-bit hash (``torch.unique`` over the concatenated hashes, counts
   summed with ``index_add_``), every merged word checked against its representative by length
   and a second 64-bit hash (an exact check per character costs ~5 int64 temporaries per
   character at every merge; undetected, two different words would need both hashes to collide,
   ~n^2 / 2^128); a collision of the first hash re-hashes everything with a new seed.
   Tables wait in a pending list until they hold as many words as the merged table, so each word
   is merged O(log chunks) times, and memory stays within ~2x the unique words' characters plus
   the working tensors of one chunk (~100 bytes per character): it follows the number of unique
   words, not the corpus size.

On the CPU (``gputok._dispatch.on_cpu_kernels``) steps 2 (from the dedup on) and 3 are one numba
kernel instead, ``gputok.kernels.count_words_numba``: every word of a chunk goes straight into a
running hash table of the words seen (compared character by character: no collisions), the
byte-level mapping done on the way; ``_dispatch.use_backend("torch")`` keeps the path above, its
reference (``tests/test_train_numba.py``).

Special tokens written in the text are counted as plain text, as the reference does when training
(it matches added tokens only when encoding).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import _dispatch
from .._memory import release_free_memory
from ..dedup import gather_words, unique_words, word_hashes
from ..ingest import codepoints, strings, utf8_bytes
from ..ragged import Ragged, offsets_from_lengths, segment_sum

# Text per chunk. Peak memory grows ~150 bytes per character of a chunk (normalizer, split and dedup
# temporaries): counting 20 MB for bert-wordpiece peaked at 487 MB RSS with 1 MB chunks and 397 MB
# with 512 kB ones, which keeps training under huggingface's peak; smaller chunks cost per-call overhead.
CHUNK_BYTES = 1 << 19


@dataclass
class WordCounts:
    """Unique words (ragged codepoints) and how often each occurred (int64).

    ``hashes``: two 64-bit hashes of each word (:func:`gputok.dedup.word_hashes` with seeds
    ``2 * seed`` and ``2 * seed + 1``) as ``[words, 2]``, or None until computed. ``counts`` may
    be ``[words, k]``: k counts per word, each summed on its own when tables merge.
    """

    words: Ragged
    counts: torch.Tensor
    hashes: torch.Tensor | None = None
    seed: int = 0

    def __len__(self) -> int:
        return self.counts.shape[0]

    def to_dict(self) -> dict[str, int]:
        """``{word: count}`` (slow: a Python string per word; for tests and small tables)."""
        return dict(zip(strings(self.words), self.counts.tolist()))

    def hashed(self, seed: int) -> torch.Tensor:
        if self.hashes is None or self.seed != seed:
            self.hashes = torch.stack([word_hashes(self.words.values, self.words.offsets, seed=2 * seed + k)
                                       for k in (0, 1)], 1)
            self.seed = seed
        return self.hashes


@functools.lru_cache(maxsize=8)
def byte_level_table(device: torch.device) -> torch.Tensor:
    """The GPT-2 byte character (a codepoint) standing for each of the 256 bytes."""
    from ..models.bpe import byte_decoder

    table = torch.empty(256, dtype=torch.int64)
    for ch, b in byte_decoder().items():
        table[b] = ord(ch)
    return table.to(device)


def to_byte_level(words: Ragged) -> Ragged:
    """Each word's UTF-8 bytes as GPT-2 byte characters: ``" é"`` -> ``"ĠÃ©"``.

    >>> "".join(map(chr, to_byte_level(Ragged(torch.tensor([32, 233]), torch.tensor([0, 2]))).values.tolist()))
    'ĠÃ©'
    """
    data, _ = utf8_bytes(words)
    return Ragged(byte_level_table(words.device)[data.values.long()], data.offsets)


def merge_tables(tables: list[WordCounts], *, seed: int = 0) -> tuple[WordCounts, int]:
    """One table holding every word of ``tables`` once, counts summed; returns it and the seed used.

    Words are matched by their first hash and checked by the second (and their length), so the
    check is per word, not per character: two different words pass only if both 64-bit hashes
    collide (~n^2 / 2^128). A first-hash collision between different words re-hashes with the next
    seed. Words come out in order of first appearance, so the first table (the running total) is
    copied as one block and only the other tables' new words are gathered: no per-character index
    over the whole table.

    >>> a = WordCounts(Ragged(torch.tensor([97, 98, 99]), torch.tensor([0, 2, 3])), torch.tensor([2, 1]))
    >>> b = WordCounts(Ragged(torch.tensor([99, 97, 98]), torch.tensor([0, 1, 3])), torch.tensor([5, 1]))
    >>> merge_tables([a, b])[0].to_dict()
    {'ab': 3, 'c': 6}
    """
    device = tables[0].counts.device
    lengths = torch.cat([t.words.lengths() for t in tables])
    n = lengths.numel()
    while True:
        hashes = torch.cat([t.hashed(seed) for t in tables])
        keys, inverse = torch.unique(hashes[:, 0], return_inverse=True)
        first = torch.full((keys.numel(),), n, dtype=torch.int64, device=device)
        first.scatter_reduce_(0, inverse, torch.arange(n, device=device), reduce="amin")
        first_of = first.index_select(0, inverse)
        if bool(torch.equal(lengths.index_select(0, first_of), lengths)) and bool(
                torch.equal(hashes[:, 1].index_select(0, first_of), hashes[:, 1])):
            break
        seed += 1
    firsts, by_first = torch.sort(first)
    place = torch.empty_like(by_first)
    place[by_first] = torch.arange(by_first.numel(), device=device)
    counts = torch.cat([t.counts for t in tables])
    summed = torch.zeros((keys.numel(), *counts.shape[1:]), dtype=torch.int64, device=device)
    summed.index_add_(0, place.index_select(0, inverse), counts)
    head = tables[0].words
    if not (0 < len(head) <= firsts.numel() and int(firsts[len(head) - 1]) == len(head) - 1):
        head = Ragged(head.values[:0], head.offsets[:1])  # the first table repeats a word: gather all
    new = firsts[len(head):] - len(head)  # each new word's index among the words after ``head``
    rest_lengths = lengths[len(head):]
    rest_values = torch.cat([t.words.values for t in tables[1 if len(head) else 0:]] + [head.values[:0]])
    added = gather_words(rest_values, offsets_from_lengths(rest_lengths)[:-1].index_select(0, new),
                         rest_lengths.index_select(0, new))
    words = Ragged(torch.cat([head.values, added.values.to(head.values.dtype)]),
                   torch.cat([head.offsets, added.offsets[1:] + head.offsets[-1]]))
    return WordCounts(words, summed, hashes.index_select(0, firsts), seed), seed


class WordCounter:
    """Accumulates unique words and counts over chunks of text.

    ``normalizer`` and ``pre_tokenizer`` are gputok pipeline components (None: no normalizer);
    ``byte_level``: words are mapped to GPT-2 byte characters after pre-tokenization.

    >>> from gputok.pre_tokenizers import BertPreTokenizer
    >>> c = WordCounter(None, BertPreTokenizer())
    >>> c.add_texts(["a b a", "b!"])
    >>> sorted(c.result().to_dict().items()), c.words_seen
    ([('!', 1), ('a', 2), ('b', 2)], 5)
    """

    def __init__(self, normalizer, pre_tokenizer, *, byte_level: bool = False,
                 device: torch.device | str = "cpu") -> None:
        self.normalizer, self.pre_tokenizer = normalizer, pre_tokenizer
        self.byte_level = byte_level
        self.device = torch.device(device)
        self.words_seen = 0
        self._merged: WordCounts | None = None
        self._pending: list[WordCounts] = []
        self._seed = 0
        self._table: _WordTable | None = None  # the numba path's running table

    def add_texts(self, texts: list[str]) -> None:
        """Count the words of ``texts``, each text one sequence (as an iterator's items)."""
        self._add(codepoints(texts, self.device))

    def add_lines(self, chunk: str) -> None:
        """Count the words of ``chunk``, every line (ending at ``\\n``, kept) one sequence."""
        text = codepoints([chunk], self.device)
        n = text.values.numel()
        cuts = torch.nonzero(text.values == 10).flatten() + 1
        cuts = cuts[cuts < n]
        bounds = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), n)])
        self._add(Ragged(text.values, bounds))

    def _add(self, text: Ragged) -> None:
        if self.normalizer is not None:
            text, _ = self.normalizer(text)
        words = self.pre_tokenizer(text)
        if _dispatch.on_cpu_kernels(self.device):
            if self._table is None:
                self._table = _WordTable(self.byte_level)
            self.words_seen += self._table.add(text.values.numpy(), words.starts.numpy(), words.ends.numpy())
            return
        lengths = words.lengths()
        keep = lengths > 0
        if not bool(keep.all()):  # no word is empty; should a pre-tokenizer make one, it is not a word
            lengths = lengths[keep]
            per_text = segment_sum(keep.long(), words.text_offsets)
            words = type(words)(words.starts[keep], words.ends[keep], offsets_from_lengths(per_text))
        if not lengths.numel():
            return
        self.words_seen += lengths.numel()
        unique = unique_words(text.values, words)
        rep = unique.representative
        counts = torch.bincount(unique.inverse, minlength=rep.numel())
        found = gather_words(text.values, words.starts[rep], lengths[rep])
        if self.byte_level:
            found = to_byte_level(found)
        self.add_table(WordCounts(Ragged(found.values.int(), found.offsets), counts))

    def add_table(self, table: WordCounts) -> None:
        """Add words counted elsewhere (unique within ``table``; int32 codepoints keep the merges small)."""
        self._pending.append(table)
        if sum(len(t) for t in self._pending) >= (len(self._merged) if self._merged is not None else 0):
            self._flush()

    def _flush(self) -> None:
        tables = ([self._merged] if self._merged is not None else []) + self._pending
        if not tables:
            return
        self._pending = []
        if len(tables) > 1:
            self._merged, self._seed = merge_tables(tables, seed=self._seed)
            release_free_memory()  # the merge's temporaries, so the next chunks reuse no stale pages
        else:
            self._merged = tables[0]

    def result(self) -> WordCounts:
        """The unique words (ragged int32 codepoints: the table's own, no copy) and their int64
        counts so far."""
        if self._table is not None and self._table.state[0]:
            self._pending.append(self._table.result())  # a table of its own: merged with any other
            self._table = None
        self._flush()
        if self._merged is None:
            return WordCounts(Ragged(torch.zeros(0, dtype=torch.int32, device=self.device),
                                     torch.zeros(1, dtype=torch.int64, device=self.device)),
                              torch.zeros(0, dtype=torch.int64, device=self.device))
        return WordCounts(self._merged.words, self._merged.counts)


class _WordTable:
    """The running word table of the numba path: ``gputok.kernels.count_words_numba``'s arrays,
    grown here before each chunk so that the chunk fits (every word new, every character 4 bytes)."""

    def __init__(self, byte_level: bool) -> None:
        self.byte_chars = (byte_level_table(torch.device("cpu")).numpy().astype(np.int32) if byte_level
                           else np.zeros(0, dtype=np.int32))
        self.table = np.full(1 << 16, -1, dtype=np.int64)
        self.whash = np.zeros(1 << 14, dtype=np.int64)
        self.wcount = np.zeros(1 << 14, dtype=np.int64)
        self.woff = np.zeros((1 << 14) + 1, dtype=np.int64)
        self.chars = np.zeros(1 << 20, dtype=np.int32)
        self.state = np.zeros(3, dtype=np.int64)  # words, characters used, words seen

    def add(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
        """Count the words ``values[starts[i]:ends[i]]``; returns how many were not empty."""
        from ..kernels.count_words_numba import count_words_numba, rehash_numba

        words, used, seen = (int(x) for x in self.state)
        need = words + starts.size
        if need > self.whash.size:
            size = max(need, 2 * self.whash.size)
            self.whash, self.wcount = (np.resize(a, size) for a in (self.whash, self.wcount))
            self.woff = np.resize(self.woff, size + 1)
        if 2 * need > self.table.size:
            self.table = np.full(1 << (4 * need - 1).bit_length(), -1, dtype=np.int64)
            rehash_numba(self.table, self.whash, words)
        chars = used + values.size * (4 if self.byte_chars.size else 1)
        if chars > self.chars.size:
            self.chars = np.resize(self.chars, max(chars, 2 * self.chars.size))
        count_words_numba(values, starts, ends, self.byte_chars, self.table, self.whash, self.woff, self.chars,
                          self.wcount, self.state)
        return int(self.state[2]) - seen

    def result(self) -> WordCounts:
        words, used = int(self.state[0]), int(self.state[1])
        return WordCounts(Ragged(torch.from_numpy(self.chars[:used].copy()), torch.from_numpy(self.woff[:words + 1].copy())),
                          torch.from_numpy(self.wcount[:words].copy()))


def check_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The paths, after checking that each is a readable file (before any work starts)."""
    from ..corpus import check_readable

    out = [check_readable(p, "training file", files="text files",
                          missing_hint=" (to train on texts in memory, pass an iterator of them: iter(texts))")
           for p in paths]
    if not out:
        raise ValueError("no training files given; pass at least one text file")
    return out


def file_chunks(paths: list[Path], *, chunk_bytes: int = CHUNK_BYTES,
                on_bytes: Callable[[int], None] | None = None) -> Iterator[str]:
    """Whole lines of the files, ~``chunk_bytes`` at a time, decoded with U+FFFD replacement;
    ``on_bytes(n)`` is called once the caller is done with a chunk of ``n`` bytes.

    Chunks are cut after a ``\\n`` (a byte that never occurs inside a UTF-8 character), so
    decoding a chunk on its own is exact. A file not ending in ``\\n`` ends its last line there.
    """
    from ..corpus import byte_blocks

    for path in paths:
        with open(path, "rb") as f:
            for block in byte_blocks(f, chunk_bytes):
                yield block.decode("utf-8", errors="replace")
                if on_bytes is not None:  # after the caller has counted the chunk
                    on_bytes(len(block))


def text_chunks(texts: Iterable, *, chunk_chars: int = CHUNK_BYTES) -> Iterator[list[str]]:
    """Lists of texts of ~``chunk_chars`` characters from an iterable of ``str`` (or UTF-8 ``bytes``)."""
    batch: list[str] = []
    size = 0
    for i, text in enumerate(texts):
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        elif not isinstance(text, str):
            raise TypeError(f"training text {i} is a {type(text).__name__}; pass str (or UTF-8 bytes) items")
        batch.append(text)
        size += len(text)
        if size >= chunk_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class RankShare:
    """Under ``torch.distributed`` (torchrun), this rank's share of a stream of chunks: chunk ``i``
    is counted by rank ``i % world_size``, so the ranks split the corpus without talking, and
    :func:`all_ranks_counts` sums what they counted. Without a process group: every chunk.

    >>> share = RankShare(rank=1, world_size=2)
    >>> seen = []; add = share.wrap(seen.append)
    >>> for chunk in "abcde": add(chunk)
    >>> seen
    ['b', 'd']
    """

    def __init__(self, *, rank: int | None = None, world_size: int | None = None) -> None:
        if rank is None:
            rank, world_size = _rank_and_world()
        self.rank, self.world_size, self._next = rank, world_size, 0

    def wrap(self, add: Callable) -> Callable:
        """``add``, called only for this rank's chunks (one count of chunks across every wrapped callback)."""
        def share(chunk) -> None:
            mine = self._next % self.world_size == self.rank
            self._next += 1
            if mine:
                add(chunk)
        return share


def _rank_and_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def all_ranks_counts(table: WordCounts, words_seen: int) -> tuple[WordCounts, int]:
    """Every rank's word table merged, and the words seen summed, the same on every rank (a
    ``torch.distributed`` all-gather of the tables as numpy arrays, merged in rank order by
    :func:`merge_tables`); without a process group, the arguments as they are."""
    rank, world = _rank_and_world()
    if world == 1:
        return table, words_seen
    mine = (table.words.values.cpu().numpy(), table.words.offsets.cpu().numpy(), table.counts.cpu().numpy(),
            words_seen)
    gathered: list = [None] * world
    torch.distributed.all_gather_object(gathered, mine)
    device = table.counts.device
    tables = [WordCounts(Ragged(torch.from_numpy(v).to(device), torch.from_numpy(o).to(device)),
                         torch.from_numpy(c).to(device)) for v, o, c, _ in gathered if c.size]
    if not tables:
        return table, 0
    merged = merge_tables(tables)[0] if len(tables) > 1 else tables[0]
    return WordCounts(merged.words, merged.counts), sum(seen for *_, seen in gathered)
