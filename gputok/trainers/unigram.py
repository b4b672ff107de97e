"""Unigram language-model training on tensors, following SentencePiece's trainer.

The reference is SentencePiece's ``unigram_model_trainer.cc`` and ``trainer_interface.cc``;
:func:`learn_unigram` runs its recipe on the unique words of a corpus and their counts:

1. required characters: characters sorted by count (ties: smaller code point) are taken until
   ``character_coverage`` of all characters is covered; the others count as unknown.
2. seed pieces: every required character, then the substrings of 2..``max_piece_length``
   characters that are valid pieces (``▁`` only in front, one Unicode script, no unknown
   character; Hiragana and Katakana count as Han), occur at least twice and are right-branching
   (followed by two different characters somewhere), scored by frequency x length, the best
   ``seed_size``; initial scores are their log shares. The reference finds them with a suffix array
   over the whole corpus; here every substring of every unique word is hashed (a polynomial hash
   modulo 2**64, one length at a time) and counted with ``torch.unique``, weighted by the word counts,
   which gives the same frequencies. Only the candidates' occurrences are kept (their end
   positions, int32): they are the lattice's edges.
3. EM, ``num_sub_iterations`` times per round: the E-step computes every piece's expected count by
   forward-backward over each word's lattice (``unigram_expect``: a Triton kernel on CUDA, a numba
   kernel on CPU, both twins of :func:`unigram_expect_torch`); the M-step drops pieces expected less than 0.5 times
   and sets ``score = digamma(count) - digamma(total)`` (the reference's Bayesian EM).
4. pruning, until the vocabulary is at most 1.1 x ``vocab_size``: each piece's Viterbi frequency over
   all words, its best segmentation without itself (its alternative), and the loss in likelihood if
   it were replaced by that alternative; pieces that are not their own best segmentation or are
   never used go, the rest are kept by loss down to ``shrinking_factor`` of the vocabulary.
5. the final vocabulary: all required characters (missing ones get the lowest score), then the pieces
   by score, ``vocab_size`` in all with the special tokens and, with ``byte_fallback``, the 256
   ``<0xNN>`` pieces; ordered as the reference orders its ``.model``.

On CPU lattices (``gputok._dispatch.on_cpu_kernels``) the E-step, the pruning's Viterbi and its
per-piece alternatives run as numba kernels (``gputok.kernels.train_unigram_numba``), the same loops
as the torch code here, which stays their reference (``_dispatch.use_backend("torch")``;
``tests/test_train_numba.py``): the Viterbi's results identical, the E-step's equal to rounding.
The E-step's and the Viterbi's batches run on gputok's threads at once (:func:`_map_batches`).

Layout: words are sorted by length (longest first) and cut into batches of consecutive words of
about ``_BATCH_EDGES`` lattice edges; each batch's lattice is stored step-major, so the DP runs one
vectorized step per character position over all its words still that long: the row of (word w,
end position e) is ``step_base[e] + w``; its edges (pieces ending there, longest first) are
``row_ptr[row] .. row_ptr[row + 1]``. Every position has a one-character edge (the character's piece
or the unknown character, scored ``min score - 10`` as in the reference). The E-step and Viterbi
run batch by batch, so their scratch is bounded by the batch, not by the corpus.

Deliberate differences from the reference: right-branching is decided per word: the end of a word
counts as followed by ``▁`` and, for the occurrences that end a sentence (``sentence_final_counts``;
without them none), by the sentence boundary, as the reference sees it in its sentences; ties in
the seed ranking are broken by hash order, not suffix-array order; expected counts are float64 (the
reference sums float32); unknown-character nodes count for no piece. Hash collisions between two
substrings (probability ~n^2 / 2**64 for n distinct ones) are not checked.

Memory follows the unique words (positions: their characters, 4.2M for the 385k unique words of
20 MB of English), not the corpus: :class:`UnigramWordCounter` streams the text in chunks; the
seed search holds ~10 arrays (int32 or int64) of the positions for one length at a time and the
candidates' occurrences (8 bytes each); the lattice takes 13 bytes per edge and 4 per position (14M edges
there at the start: 200 MB), and an E-step ~16 bytes per edge of one batch. Freed heap pages go
back to the system between phases (:func:`gputok._memory.release_free_memory`). Peak RSS on that
set, vocab 8000, 2 threads: ~780-830 MB, of which ~230 MB is torch itself, in the first pruning
round (``benchmarks/train_unigram.py``, 2026-11-27; ~930 MB before :meth:`_Trainer._prune` kept
its temporaries short).

:func:`unigram_training_words` makes the unique words from text lines as SentencePiece sees them
(nmt_nfkc normalization, whitespace rules, words cut at spaces with a ``▁`` in front), and
:func:`write_sentencepiece_model` writes the result as a ``.model`` file that ``sentencepiece`` loads.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .. import _cpu_threads, _dispatch
from .._memory import release_free_memory
from ..dedup import gather_words, unique_words
from ..pre_tokenizers import Words
from ..ragged import Ragged, offsets_from_lengths, row_ids, span_indices

SPACE_MARK = 0x2581  # "▁": a space, and the start of a word
UNKNOWN_CHAR = 0x110000  # stands for a character outside the required set (past the last code point)
_BASE = 0x9E3779B97F4A7C15 - (1 << 64)  # odd multiplier of the substring hash
_UNK_PENALTY = 10.0  # the reference's kUnkPenalty
_MIN_EXPECTED = 0.5  # the reference's kExpectedFrequencyThreshold
_BATCH_EDGES = 1 << 20  # lattice edges per batch of words: bounds the E-step's float64 scratch (~16 bytes an edge)

# SentencePiece's nmt_nfkc rules on top of NFKC (builder.cc): control characters go, other breaks and
# invisible spaces become spaces; U+FF5E (fullwidth tilde) is kept as it is.
_NMT_REMOVE = [*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F]
_NMT_SPACE = [0x09, 0x0C, 0x0D, 0x1680, 0x200B, 0x200C, 0x200E, 0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD]
_NMT_TABLE = {**{c: None for c in _NMT_REMOVE}, **{c: " " for c in _NMT_SPACE}}
_LINE_BREAKS = re.compile(" *\n[ \n]*")
_SPACES = re.compile(" +")


@dataclass
class UnigramTrainStats:
    """What a run did: pass ``stats=UnigramTrainStats()`` to :func:`learn_unigram` and read it after.

    ``seconds`` maps each phase (``seeds``, ``lattice``, ``e_step``, ``m_step``, ``prune``,
    ``finalize``) to its wall time.
    """

    words: int = 0
    characters: int = 0
    required_chars: int = 0
    seed_pieces: int = 0
    lattice_edges: int = 0
    rounds: int = 0
    em_steps: int = 0
    seconds: dict | None = None


def nmt_nfkc(text: str) -> str:
    """SentencePiece's nmt_nfkc normalization with Python's NFKC (newlines are kept as line breaks).

    It differs from the reference's precompiled map only where that map was built from another
    Unicode version, or where NFKC composes across characters the map rewrites one at a time.

    >>> nmt_nfkc("ﬁ\\tⅣ\\x01～")
    'fi IV～'
    """
    text = text.translate(_NMT_TABLE)
    return "\uff5e".join(unicodedata.normalize("NFKC", part) for part in text.split("\uff5e"))


def drop_long_lines(lines: list[str], max_sentence_length: int | None) -> tuple[list[str], int, int]:
    """``lines`` without those over ``max_sentence_length`` UTF-8 bytes (None: no limit), the number
    dropped and the longest dropped one's length in bytes (0 if none), as SentencePiece's trainer
    skips them (it logs "Found too long line" and "Skipped N too long sentences").

    >>> drop_long_lines(["ab", "€" * 3, "abc"], 8)
    (['ab', 'abc'], 1, 9)
    """
    if max_sentence_length is None or max(map(len, lines), default=0) * 4 <= max_sentence_length:
        return lines, 0, 0  # a character is at most 4 bytes: no line can be too long
    kept, skipped, longest = [], 0, 0
    for line in lines:
        size = len(line) if len(line) * 4 <= max_sentence_length else len(line.encode("utf-8", "surrogatepass"))
        if size <= max_sentence_length:
            kept.append(line)
        else:
            skipped, longest = skipped + 1, max(longest, size)
    return kept, skipped, longest


def unigram_training_words(lines: Iterable[str], *, max_sentence_length: int | None = 4192,
                           return_sentence_final: bool = False):
    """The unique words SentencePiece trains on, as ragged code points, and their int64 counts.

    Each line is normalized (:func:`nmt_nfkc`), its runs of spaces collapse and its ends are
    stripped, and every word between spaces becomes ``▁word``. Lines longer than
    ``max_sentence_length`` UTF-8 bytes are skipped, as the reference skips them (None: none
    is; :func:`drop_long_lines`). With
    ``return_sentence_final`` a third tensor says how many occurrences of each word end their line
    (``learn_unigram``'s ``sentence_final_counts``).

    >>> words, counts, final = unigram_training_words(["a  b", " b"], return_sentence_final=True)
    >>> sorted(zip(["".join(map(chr, w)) for w in words.tolist()], counts.tolist(), final.tolist()))
    [('▁a', 1, 0), ('▁b', 2, 2)]
    """
    lines, _, _ = drop_long_lines(list(lines), max_sentence_length)
    # Line breaks stay (they end sentences); spaces around them, empty lines and runs of spaces go.
    text = _LINE_BREAKS.sub("\n", nmt_nfkc("\n".join(lines)))
    text = "\n" + _SPACES.sub(" ", text).strip(" \n")
    cp = _codepoints(text)
    separator = (cp == 32) | (cp == 10)
    starts = torch.nonzero(separator).squeeze(1)  # every word is its separator (soon "▁") and characters
    if cp.numel() <= 1:
        none = torch.zeros(0, dtype=torch.int64)
        empty = Ragged(torch.zeros(0, dtype=torch.int32), torch.zeros(1, dtype=torch.int64))
        return (empty, none, none) if return_sentence_final else (empty, none)
    ends = torch.cat([starts[1:], torch.tensor([cp.numel()])])
    values = torch.where(separator, SPACE_MARK, cp)
    unique = unique_words(values, Words(starts, ends, torch.tensor([0, starts.numel()])))
    counts = torch.bincount(unique.inverse, minlength=unique.representative.numel())
    rep = unique.representative
    words = gather_words(values, starts[rep], (ends - starts)[rep])
    if not return_sentence_final:
        return words, counts
    final = torch.ones(starts.numel(), dtype=torch.int64)  # a line break (or the end) follows the word
    final[:-1] = (cp[starts[1:]] == 10).long()
    return words, counts, torch.zeros_like(counts).index_add_(0, unique.inverse, final)


class UnigramWordCounter:
    """:func:`unigram_training_words` over a corpus streamed in chunks of lines: each chunk's table
    (words, counts, sentence-final counts) is merged by hash as :class:`gputok.trainers.counting.WordCounter`
    merges, so memory follows the unique words and one chunk, not the corpus.

    >>> counter = UnigramWordCounter()
    >>> counter.add_lines(["a b", "b"])
    >>> counter.add_lines(["b a"])
    >>> words, counts, final = counter.result()
    >>> sorted(zip(["".join(map(chr, w)) for w in words.tolist()], counts.tolist(), final.tolist()))
    [('▁a', 2, 1), ('▁b', 3, 2)]
    """

    def __init__(self, *, max_sentence_length: int | None = 4192) -> None:
        from .counting import WordCounter

        self.max_sentence_length = max_sentence_length
        self.skipped_lines = 0  # lines over max_sentence_length bytes, not trained on
        self.longest_skipped = 0  # the longest of them, in bytes
        self._counter = WordCounter(None, None)  # only its merging of tables is used

    def add_lines(self, lines: Iterable[str]) -> None:
        """Count the words of ``lines`` (each a sentence; a ``\\n`` inside one also ends a sentence)."""
        from .counting import WordCounts

        lines, skipped, longest = drop_long_lines(list(lines), self.max_sentence_length)
        self.skipped_lines += skipped
        self.longest_skipped = max(self.longest_skipped, longest)
        words, counts, final = unigram_training_words(lines, max_sentence_length=None, return_sentence_final=True)
        if counts.numel():
            self._counter.add_table(WordCounts(words, torch.stack([counts, final], 1)))

    def result(self) -> tuple[Ragged, torch.Tensor, torch.Tensor]:
        """The unique words (ragged int32 code points), their counts and sentence-final counts."""
        table = self._counter.result()
        if not len(table):
            return unigram_training_words([], return_sentence_final=True)
        words = table.words
        counts, final = table.counts[:, 0].contiguous(), table.counts[:, 1].contiguous()
        del table
        release_free_memory()  # the merges' temporaries, before training allocates
        return words, counts, final


def _codepoints(text: str) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(text.encode("utf-32-le"), dtype=np.int32).copy())


def learn_unigram(words: Ragged, counts: torch.Tensor, *, vocab_size: int = 8000,
                  character_coverage: float = 0.9995, max_piece_length: int = 16, byte_fallback: bool = False,
                  special_tokens: Sequence[str] = ("<unk>", "<s>", "</s>"), unk_token: str = "<unk>",
                  seed_size: int = 1_000_000, shrinking_factor: float = 0.75, num_sub_iterations: int = 2,
                  sentence_final_counts: torch.Tensor | None = None, progress: bool = True,
                  stats: UnigramTrainStats | None = None) -> list[tuple[str, float]]:
    """Train a Unigram vocabulary of exactly ``vocab_size`` pieces, as SentencePiece does.

    ``words``: unique words as ragged code points, already normalized with a ``▁`` in front of each
    (see :func:`unigram_training_words`); ``counts``: int64 count of each word. Returns the pieces
    with their scores (log probabilities) in SentencePiece's id order: the special tokens (score 0;
    ``unk_token`` must be one of them), the 256 byte pieces with ``byte_fallback``, then the pieces
    by score. ``sentence_final_counts`` (optional, per word): how many of its occurrences end a
    sentence; the reference's seed rule sees what follows a word in its sentence, so with these
    counts the seeds come out as its do (without them a word end counts as followed by a space).
    ``stats``: a :class:`UnigramTrainStats` to fill in.

    >>> words, counts, final = unigram_training_words(["hug hugs pug pun bun hugs"] * 5, return_sentence_final=True)
    >>> pieces = learn_unigram(words, counts, vocab_size=13, sentence_final_counts=final, progress=False)
    >>> [p for p, _ in pieces]  # sentencepiece 0.2.3 trains the same pieces, in this order, on these lines
    ['<unk>', '<s>', '</s>', 'n', '▁pu', '▁hugs', 's', 'p', 'u', '▁', 'b', 'g', 'h']
    >>> round(pieces[3][1], 3), round(pieces[-1][1], 3)
    (-1.746, -2.492)
    """
    _check_options(vocab_size, character_coverage, max_piece_length, seed_size, shrinking_factor,
                   num_sub_iterations, special_tokens, unk_token)
    counts = torch.as_tensor(counts).long().cpu()
    words = words.to("cpu")
    if counts.numel() != len(words):
        raise ValueError(f"counts has {counts.numel()} entries for {len(words)} words; give one count per word")
    final = torch.zeros_like(counts) if sentence_final_counts is None else torch.as_tensor(sentence_final_counts).long().cpu()
    if final.shape != counts.shape or bool((final > counts).any()) or bool((final < 0).any()):
        raise ValueError("sentence_final_counts must give, per word, a count between 0 and the word's count")
    trainer = _Trainer(words, counts, final, vocab_size=vocab_size, coverage=character_coverage,
                       max_len=max_piece_length, num_meta=len(special_tokens) + (256 if byte_fallback else 0),
                       seed_size=seed_size, shrinking=shrinking_factor, sub_iterations=num_sub_iterations,
                       progress=progress, stats=stats if stats is not None else UnigramTrainStats())
    pieces = trainer.run()
    meta = [(token, 0.0) for token in special_tokens]
    if byte_fallback:
        meta += [(f"<0x{b:02X}>", 0.0) for b in range(256)]
    return meta + pieces


def _check_options(vocab_size, coverage, max_len, seed_size, shrinking, sub_iterations, special_tokens, unk_token):
    for name, value, low in (("vocab_size", vocab_size, 1), ("max_piece_length", max_len, 1),
                             ("seed_size", seed_size, 1), ("num_sub_iterations", sub_iterations, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}={value!r}: give an integer >= {low}")
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"character_coverage={coverage!r}: give a fraction in (0, 1], e.g. 0.9995")
    if not 0.0 < shrinking < 1.0:
        raise ValueError(f"shrinking_factor={shrinking!r}: give a fraction in (0, 1), e.g. 0.75")
    if unk_token not in special_tokens:
        raise ValueError(f"unk_token {unk_token!r} is not among special_tokens {list(special_tokens)}; add it")
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens {list(special_tokens)} has duplicates")


def _scripts(chars: np.ndarray) -> np.ndarray:
    """Unicode script id of each code point (SentencePiece's rule: Hiragana, Katakana, U+30FC are Han)."""
    import regex
    from regex import _regex_core

    names = _regex_core.PROPERTY_NAMES[_regex_core.PROPERTIES["SCRIPT"][0]][1]
    text = "".join(map(chr, chars.tolist()))
    script = np.full(len(chars), -1, dtype=np.int64)  # not in any script table: Common, as in the reference
    for ident, name in names.items():
        for m in regex.finditer(rf"\p{{Script={name}}}+", text):
            script[m.start():m.end()] = ident
    common = _regex_core.PROPERTIES["SCRIPT"][1]["COMMON"]
    script[script <= 0] = common
    han = _regex_core.PROPERTIES["SCRIPT"][1]["HAN"]
    for kana in ("HIRAGANA", "KATAKANA"):
        script[script == _regex_core.PROPERTIES["SCRIPT"][1][kana]] = han
    script[chars == 0x30FC] = han
    return script


class _Lattice:
    """The edges of a batch of words' lattices, step-major (see the module docstring).

    ``row_ptr`` (int32): the edges of row r are ``row_ptr[r] .. row_ptr[r + 1]``, longest first;
    ``edge_word`` (int32, the word in the batch), ``edge_len`` (int8) and ``edge_piece`` (int32)
    per edge. The end of an edge is not stored: it follows from ``step_ptr``.
    """

    def __init__(self, lengths: torch.Tensor, row_ptr: torch.Tensor, edge_word: torch.Tensor,
                 edge_len: torch.Tensor, edge_piece: torch.Tensor) -> None:
        self.lengths = lengths  # int64 [W], non-increasing
        self.num_words = lengths.numel()
        self.max_len = int(lengths[0]) if self.num_words else 0
        base = _step_base(lengths)
        self.step_base = base  # row of (w, e) = base[e] + w, e >= 1
        self.rows = int(base[-1])
        self.row_ptr = row_ptr.int()  # a batch's edges fit int32
        self.edge_word, self.edge_len, self.edge_piece = edge_word, edge_len, edge_piece
        step_ptr = row_ptr[base[1:]]
        self.step_ptr = step_ptr.tolist()  # edges of step e: step_ptr[e-1] .. step_ptr[e]
        # int32 throughout: these temporaries are the largest of a batch
        end = torch.repeat_interleave(torch.arange(1, self.max_len + 1, dtype=torch.int32), step_ptr.diff(),
                                      output_size=self.num_edges)
        start = end.sub_(edge_len)
        src = (base + self.num_words).int()[start]
        self.edge_src = src.masked_fill_(start == 0, 0).add_(edge_word)

    @property
    def num_edges(self) -> int:
        return self.edge_piece.numel()

    def keep(self, edges: torch.Tensor) -> _Lattice:
        """The lattice of the edges where the bool mask ``edges`` is set."""
        kept = torch.zeros(self.num_edges + 1, dtype=torch.int64)
        torch.cumsum(edges, 0, out=kept[1:])
        return _Lattice(self.lengths, kept[self.row_ptr], self.edge_word[edges], self.edge_len[edges],
                        self.edge_piece[edges])

    @staticmethod
    def build(lengths: torch.Tensor, char_piece: torch.Tensor, multi: list) -> _Lattice:
        """The lattice of words of ``lengths`` (non-increasing) from the piece of each character position
        (``char_piece``, flat over the words) and, per piece length L >= 2, the positions (sorted, into
        ``char_piece``) where a piece of length L ends and that piece: ``multi = [(L, ends, pieces)]``.

        Within one length every row has at most one edge, so each length's edges go to their slots
        with one scatter, longest first, without sorting.
        """
        offsets = offsets_from_lengths(lengths)
        n = char_piece.numel()
        word = row_ids(offsets, n)
        row_of = _step_base(lengths)[torch.arange(1, n + 1) - offsets[:-1][word]].add_(word)  # row of each position
        count = torch.ones(n, dtype=torch.int64)  # rows and positions correspond one to one
        for _, ends, _ in multi:
            count[row_of[ends]] += 1
        row_ptr = offsets_from_lengths(count)
        del count
        fill = row_ptr[:-1].clone()
        total = int(row_ptr[-1])
        edge_word = torch.empty(total, dtype=torch.int32)
        edge_len = torch.empty(total, dtype=torch.int8)
        edge_piece = torch.empty(total, dtype=torch.int32)
        for length, ends, pieces in sorted(multi, key=lambda item: -item[0]):
            rows = row_of[ends]
            slot = fill[rows]
            fill[rows] += 1
            edge_word[slot] = word[ends].int()
            edge_len[slot] = length
            edge_piece[slot] = pieces
        del fill
        slot = row_ptr[1:][row_of] - 1  # the one-character edge ends every row
        edge_word[slot] = word.int()
        edge_len[slot] = 1
        edge_piece[slot] = char_piece
        return _Lattice(lengths, row_ptr, edge_word, edge_len, edge_piece)


def unigram_expect_torch(lengths: torch.Tensor, counts: torch.Tensor, step_base: torch.Tensor,
                         row_ptr: torch.Tensor, edge_src: torch.Tensor, edge_word: torch.Tensor,
                         edge_piece: torch.Tensor, scores: torch.Tensor, max_edges: int
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Expected count of every piece over all words' lattices, and each word's log-likelihood.

    The torch twin of ``gputok.kernels.unigram_expect`` (its docstring describes the layout and
    the backward pass in the linear domain). One vectorized step per end position ``e`` over all
    words at least ``e`` long; the forward sum is taken relative to ``alpha[w, e - 1]``, which bounds
    every exponent by the scores of at most ``max_edges`` characters (float64 keeps that finite).
    Returns float64 ``expected [len(scores)]`` (weighted by ``counts``) and ``log_z [words]``.

    >>> lengths, counts = torch.tensor([2]), torch.tensor([3.0])  # one word "ab"; pieces b, ab, a
    >>> step_base, row_ptr = torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 3])  # rows (ab, 1), (ab, 2)
    >>> src, word, piece = torch.tensor([0, 0, 1]), torch.tensor([0, 0, 0]), torch.tensor([2, 1, 0])
    >>> scores = torch.tensor([0.5, 0.25, 0.25]).log()
    >>> expected, log_z = unigram_expect_torch(lengths, counts, step_base, row_ptr, src, word, piece, scores, 2)
    >>> [round(x, 4) for x in expected.tolist()], round(log_z.exp().item(), 4)  # P(ab) = .25 / (.25 + .125)
    ([1.0, 2.0, 1.0], 0.375)
    """
    num_words = lengths.numel()
    device = lengths.device
    expected = torch.zeros(scores.numel(), dtype=torch.float64, device=device)
    if num_words == 0:
        return expected, torch.zeros(0, dtype=torch.float64, device=device)
    max_len = int(lengths[0])
    base = step_base.tolist()
    step_ptr = row_ptr[step_base[1:]].tolist()
    table = num_words + row_ptr.numel() - 1
    edge_score = scores.double().index_select(0, edge_piece)
    alpha = torch.zeros(table, dtype=torch.float64, device=device)
    total = torch.empty(table, dtype=torch.float64, device=device)  # sum of x per row
    x = edge_score  # reused in place: x = exp(alpha[start] + score - alpha[w, e - 1])

    def at(e: int) -> int:  # forward-table index of (word 0, position e)
        return 0 if e == 0 else num_words + base[e]

    for e in range(1, max_len + 1):
        lo, hi, n = step_ptr[e - 1], step_ptr[e], base[e + 1] - base[e]
        dst = edge_word[lo:hi]
        ref = alpha[at(e - 1): at(e - 1) + n]
        xe = x[lo:hi].add_(alpha.index_select(0, edge_src[lo:hi])).sub_(ref.index_select(0, dst)).exp_()
        here = total[at(e): at(e) + n].zero_().index_add_(0, dst, xe)
        torch.log(here, out=alpha[at(e): at(e) + n]).add_(ref)
    last = num_words + step_base[lengths] + torch.arange(num_words, device=device)
    log_z = alpha[last]
    # Backward in the linear domain: an edge's share of post[end] is exp(alpha[start] + score - alpha[end])
    # = x / total[end], so post[end] / total[end] scales all edges of a row at once.
    post = torch.zeros(table, dtype=torch.float64, device=device)
    post[last] = counts.double()
    for e in range(max_len, 0, -1):
        lo, hi, n = step_ptr[e - 1], step_ptr[e], base[e + 1] - base[e]
        scale = post[at(e): at(e) + n] / total[at(e): at(e) + n]
        m = x[lo:hi].mul_(scale.index_select(0, edge_word[lo:hi]))
        post.index_add_(0, edge_src[lo:hi], m)
    expected.index_add_(0, edge_piece, x)
    return expected, log_z


def unigram_expect(lattice: _Lattice, counts: torch.Tensor, scores: torch.Tensor, max_edges: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`unigram_expect_torch` through the dispatch: the Triton kernel on CUDA, the numba kernel
    on CPU lattices, the twin itself under ``_dispatch.use_backend("torch")``."""
    args = (lattice.lengths, counts, lattice.step_base, lattice.row_ptr, lattice.edge_src, lattice.edge_word,
            lattice.edge_piece, scores, max_edges)
    if _dispatch.backend(lattice.lengths.device) == "triton":
        from ..kernels.unigram_expect import unigram_expect_triton

        return unigram_expect_triton(*args)
    if _dispatch.on_cpu_kernels(lattice.lengths.device):
        from ..kernels.train_unigram_numba import unigram_expect_numba

        expected, log_z = unigram_expect_numba(*(t.numpy() for t in args[:-1]))
        return torch.from_numpy(expected), torch.from_numpy(log_z)
    return unigram_expect_torch(*args)


def _viterbi(lattice: _Lattice, edge_score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Best segmentation of every word: its edges' indices (ragged by word, in no order) and the word of each.

    Ties go to the longest last piece, as in the reference (edges in a row are longest first and
    the first best edge wins). CPU lattices: ``gputok.kernels.train_unigram_numba`` (same result).
    """
    if _dispatch.on_cpu_kernels(lattice.lengths.device):
        from ..kernels.train_unigram_numba import unigram_viterbi_numba

        edges, owner = unigram_viterbi_numba(
            lattice.lengths.numpy(), lattice.step_base.numpy(), lattice.row_ptr.numpy(), lattice.edge_src.numpy(),
            lattice.edge_word.numpy(), lattice.edge_len.numpy(), edge_score.double().numpy())
        return torch.from_numpy(edges), torch.from_numpy(owner)
    W = lattice.num_words
    best = torch.zeros(W + lattice.rows, dtype=torch.float64)
    back = torch.empty(lattice.rows, dtype=torch.int64)
    base = lattice.step_base.tolist()
    ptr = lattice.step_ptr
    row_len = lattice.row_ptr[1:] - lattice.row_ptr[:-1]
    for e in range(1, lattice.max_len + 1):
        lo, hi, n = ptr[e - 1], ptr[e], base[e + 1] - base[e]
        dst = lattice.edge_word[lo:hi]
        v = best.index_select(0, lattice.edge_src[lo:hi]).add_(edge_score[lo:hi])
        top = torch.segment_reduce(v, "max", lengths=row_len[base[e]: base[e + 1]])
        index = torch.where(v == top.index_select(0, dst), torch.arange(lo, hi), hi)
        back[base[e]: base[e] + n] = torch.full((n,), hi, dtype=torch.int64).scatter_reduce_(0, dst.long(), index, "amin")
        best[W + base[e]: W + base[e] + n] = top
    chosen, owner = [], []
    word = torch.arange(W)
    end = lattice.lengths.clone()
    while word.numel():
        edge = back[lattice.step_base[end] + word]
        chosen.append(edge)
        owner.append(word)
        end = end - lattice.edge_len[edge].long()
        more = end > 0
        word, end = word[more], end[more]
    if not chosen:
        return torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    return torch.cat(chosen), torch.cat(owner)


def _map_batches(fn, items: list) -> list:
    """``[fn(item) for item in items]``; with the numba kernels (which release the GIL) on several
    torch threads, the items run on that many Python threads at once (a pool per call: nothing
    outlives it, so forked workers inherit no threads). Results keep the items' order."""
    threads = _cpu_threads.num_threads()  # gputok's count: torch's own is 1 inside gputok's calls
    if threads < 2 or len(items) < 2 or not _dispatch.on_cpu_kernels(torch.device("cpu")):
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(fn, items))


def _step_base(lengths: torch.Tensor) -> torch.Tensor:
    """``base[e]``: the first row of end position ``e`` (``base[e + 1] - base[e]`` words are at least ``e`` long).

    >>> _step_base(torch.tensor([3, 1, 1])).tolist()
    [0, 0, 3, 4, 5]
    """
    max_len = int(lengths.max()) if lengths.numel() else 0
    at_least = torch.bincount(lengths, minlength=max_len + 1).flip(0).cumsum(0).flip(0)
    base = torch.zeros(max_len + 2, dtype=torch.int64)
    base[2:] = torch.cumsum(at_least[1:], 0)
    return base


class _Trainer:
    def __init__(self, words: Ragged, counts: torch.Tensor, final: torch.Tensor, *, vocab_size: int, coverage: float, max_len: int,
                 num_meta: int, seed_size: int, shrinking: float, sub_iterations: int, progress: bool,
                 stats: UnigramTrainStats) -> None:
        used = counts > 0
        lengths = words.lengths()
        used &= lengths > 0
        if not bool(used.any()):
            raise ValueError("no training text: every word is empty or has a zero count; give a non-empty corpus")
        # Longest words first: the DP's active words at each position are then a prefix.
        keep = torch.nonzero(used).squeeze(1)
        order = keep[torch.argsort(lengths[keep], descending=True, stable=True)]
        index, self.offsets = span_indices(words.offsets[order], lengths[order])
        self.values = words.values[index].int()
        self.counts = counts[order]
        self.final = final[order]
        self.lengths = lengths[order]
        self.vocab_size, self.coverage, self.max_len = vocab_size, coverage, max_len
        self.num_meta, self.seed_size, self.shrinking, self.sub_iterations = num_meta, seed_size, shrinking, sub_iterations
        self.progress, self.stats = progress, stats
        self.seconds = {k: 0.0 for k in ("seeds", "lattice", "e_step", "m_step", "prune", "finalize")}
        stats.seconds = self.seconds
        stats.words = self.counts.numel()
        stats.characters = self.values.numel()

    # -- characters and seeds ------------------------------------------------------------------
    def _required_chars(self) -> None:
        row = row_ids(self.offsets, self.values.numel())
        self.row = row.int()  # int32 (as the positions in _seeds): it halves the seed search's largest arrays
        chars, inverse = torch.unique(self.values, return_inverse=True)
        char_count = torch.zeros(chars.numel(), dtype=torch.int64).index_add_(0, inverse, self.counts[row])
        rank = torch.argsort(-char_count, stable=True)  # count desc, then code point asc
        sorted_count = char_count[rank]
        before = torch.cumsum(sorted_count, 0) - sorted_count
        limit = float(np.float32(self.coverage))  # the reference's spec field is a float
        take = (before.double() / float(sorted_count.sum())) < limit
        required = rank[take]
        available = self.vocab_size - self.num_meta
        if required.numel() >= available:
            raise ValueError(
                f"vocab_size={self.vocab_size} is too small: {required.numel()} required characters (character_coverage="
                f"{self.coverage}) plus {self.num_meta} special/byte pieces need a larger vocab_size; "
                f"increase vocab_size or decrease character_coverage")
        self.stats.required_chars = required.numel()
        seed_of_char = torch.full((chars.numel(),), -1, dtype=torch.int32)
        seed_of_char[required] = torch.arange(required.numel(), dtype=torch.int32)
        self.char_seed = seed_of_char[inverse]  # seed id of every position's character, -1: unknown
        self.values = torch.where(self.char_seed >= 0, self.values, UNKNOWN_CHAR)
        self.required_codepoints = chars[required]
        self.required_counts = char_count[required]
        script = torch.from_numpy(_scripts(chars.numpy()))[inverse]
        prev_mark = torch.zeros_like(self.values, dtype=torch.bool)
        prev_mark[1:] = self.values[:-1] == SPACE_MARK
        same = torch.ones_like(prev_mark)
        same[1:] = script[1:] == script[:-1]
        # A piece may not extend over a position holding "▁", an unknown character or a change of script.
        self.blocked = (self.values == SPACE_MARK) | (self.values == UNKNOWN_CHAR) | ~(same | prev_mark)

    def _seeds(self) -> None:
        N = self.values.numel()
        row = self.row
        # Positions whose substring of length L is still a valid piece (validity is prefix-closed).
        p = torch.nonzero(self.values != UNKNOWN_CHAR).squeeze(1).int()
        end_p = self.offsets[1:][row[p]].int()
        h = torch.zeros(p.numel(), dtype=torch.int64)
        # Per length L >= 2: (L, end positions of the candidates' occurrences, candidate index): only
        # candidates are kept, the lattice needs no other occurrence.
        occurrences = []
        cand_score, cand_len, cand_rep = [], [], []
        num_cand = 0
        for L in range(1, self.max_len + 1):
            if L > 1:
                q = p + (L - 1)
                keep = (q < end_p) & ~self.blocked[q.clamp(max=N - 1)]
                p, h, end_p = p[keep], h[keep], end_p[keep]
                del q, keep
            if not p.numel():
                break
            h = h * _BASE + (self.values[p + (L - 1)] + 1)
            if L == 1:
                continue
            uniq, inverse = torch.unique(h, sorted=False, return_inverse=True)
            n_uniq = uniq.numel()
            del uniq
            w_of = row[p]
            w, f = self.counts[w_of], self.final[w_of]
            del w_of
            freq = torch.zeros(n_uniq, dtype=torch.int64).index_add_(0, inverse, w)
            # What follows: the next character, or at a word's end the next word's "▁" (-1) and, for
            # occurrences that end a sentence, the sentence boundary (-2).
            inside = p + L < end_p
            at_end = ~inside & (f > 0)
            always_final = at_end & (f == w)
            del w, f
            follow = torch.where(inside, self.values[(p + L).clamp(max=N - 1)], -1)
            del inside
            first_follow = torch.where(always_final, -2, follow)
            del always_final
            low = torch.full((n_uniq,), UNKNOWN_CHAR + 1, dtype=torch.int32).scatter_reduce_(
                0, inverse, follow.masked_fill_(at_end, -2), "amin")
            del follow, at_end
            high = torch.full((n_uniq,), -3, dtype=torch.int32).scatter_reduce_(0, inverse, first_follow, "amax")
            del first_follow
            rep = torch.empty(n_uniq, dtype=torch.int32).scatter_(0, inverse, p)
            # Occurs twice and is followed by two different things somewhere.
            pick = torch.nonzero((freq >= 2) & (low != high)).squeeze(1)
            del low, high
            cand_score.append(freq[pick] * L)
            cand_len.append(torch.full((pick.numel(),), L, dtype=torch.int64))
            cand_rep.append(rep[pick])
            cand = torch.full((n_uniq,), -1, dtype=torch.int32)
            cand[pick] = torch.arange(num_cand, num_cand + pick.numel(), dtype=torch.int32)
            num_cand += pick.numel()
            occ = cand[inverse]
            del cand, inverse, freq, rep
            hit = occ >= 0
            occurrences.append((L, (p[hit] + (L - 1)).int(), occ[hit]))
            del occ, hit
            release_free_memory()  # before the next length's arrays: they go where this one's were
        del p, h, end_p
        empty = torch.zeros(0, dtype=torch.int64)
        score = torch.cat(cand_score) if cand_score else empty
        top = torch.argsort(-score, stable=True)[: self.seed_size]
        C = self.required_codepoints.numel()
        S = C + top.numel()
        self.num_seeds = S
        # Seed ids: required characters first (by count), then substrings by score.
        seed_score = torch.cat([self.required_counts, score[top]]).double()
        self.seed_len = torch.cat([torch.ones(C, dtype=torch.int64), (torch.cat(cand_len) if cand_len else empty)[top]])
        char_pos = torch.full((C,), -1, dtype=torch.int64)
        char_pos[self.char_seed[self.char_seed >= 0]] = torch.nonzero(self.char_seed >= 0).squeeze(1)
        self.seed_pos = torch.cat([char_pos, (torch.cat(cand_rep).long() if cand_rep else empty)[top]])
        self.scores = seed_score.log() - math.log(float(seed_score.sum().float()))
        self.stats.seed_pieces = S
        # The lattice's edges: every position's character (or the unknown character, id S), and every
        # occurrence of a seed substring, by the position where it ends.
        seed_of_cand = torch.full((num_cand,), -1, dtype=torch.int32)
        seed_of_cand[top] = torch.arange(C, S, dtype=torch.int32)
        self.multi = []
        while occurrences:
            L, ends, cand = occurrences.pop()
            seed = seed_of_cand[cand]
            hit = seed >= 0
            self.multi.append((L, ends[hit], seed[hit]))
        self.char_piece = torch.where(self.char_seed >= 0, self.char_seed, S).int()
        del self.char_seed, self.blocked, self.row

    def _build_lattice(self) -> None:
        """The words' lattices, in batches of consecutive words of about ``_BATCH_EDGES`` edges each."""
        edges_at = torch.ones(self.values.numel(), dtype=torch.int32)  # edges ending at each position
        for _, ends, _ in self.multi:
            edges_at[ends] += 1
        cum = torch.cumsum(edges_at, 0)
        del edges_at
        per_word_end = cum[self.offsets[1:] - 1]
        del cum
        total = int(per_word_end[-1])
        cuts = torch.searchsorted(per_word_end, torch.arange(_BATCH_EDGES, max(total, _BATCH_EDGES), _BATCH_EDGES))
        W = self.lengths.numel()
        bounds = torch.unique(torch.cat([torch.tensor([0, W]), cuts.clamp(min=1, max=W)])).tolist()
        self.batch_start = torch.tensor(bounds)
        self.lattices = []
        for w0, w1 in zip(bounds[:-1], bounds[1:]):
            p0, p1 = int(self.offsets[w0]), int(self.offsets[w1])
            multi = []
            for i, (L, ends, seeds) in enumerate(self.multi):
                hi = int(torch.searchsorted(ends, torch.tensor([p1], dtype=torch.int32)))
                multi.append((L, ends[:hi].long() - p0, seeds[:hi].clone()))
                self.multi[i] = (L, ends[hi:].clone(), seeds[hi:].clone())  # frees what this batch took
            self.lattices.append(_Lattice.build(self.lengths[w0:w1], self.char_piece[p0:p1], multi))
            del multi
            release_free_memory()
        del self.multi, self.char_piece
        self.stats.lattice_edges = self._num_edges()
        self._count_edges()

    def _num_edges(self) -> int:
        return sum(lat.num_edges for lat in self.lattices)

    # -- EM ----------------------------------------------------------------------------------------
    def _unk_score(self) -> float:
        return float(self.scores[self.order].min()) - _UNK_PENALTY

    def _piece_scores(self, unk: float) -> torch.Tensor:
        """Score of every seed id for the DP, and last the unknown character's: float32-rounded as in
        the reference; a removed piece scores -inf, a removed character as the unknown character
        (it stays a one-character edge)."""
        score = self.scores.float().double()
        removed = torch.where(self.seed_len == 1, unk, -math.inf).double()
        return torch.cat([torch.where(self.alive, score, removed), torch.tensor([unk], dtype=torch.float64)])

    def _compact(self) -> None:
        """Drop the edges of removed pieces once they are a quarter of the lattice (until then they
        only score -inf: rebuilding costs about as much as an E-step)."""
        removed = torch.cat([~self.alive, torch.tensor([False])])
        if int(self.edges_per_piece[removed].sum()) * 4 < self._num_edges():
            return
        for i, lat in enumerate(self.lattices):
            dead = removed[lat.edge_piece]
            single = lat.edge_len == 1
            lat.edge_piece = torch.where(dead & single, self.num_seeds, lat.edge_piece)
            self.lattices[i] = lat.keep(~dead | single)
            del lat
            release_free_memory()  # each batch's old arrays, before the next batch allocates its new ones
        self._count_edges()

    def _count_edges(self) -> None:
        self.edges_per_piece = sum(torch.bincount(lat.edge_piece, minlength=self.num_seeds + 1) for lat in self.lattices)

    def _expected(self, scores: torch.Tensor) -> torch.Tensor:
        """The E-step: every piece's expected count over all the lattices, given the DP's ``scores``
        (:meth:`_piece_scores`). The batches run on gputok's threads at once (numba kernels on the
        CPU), their counts summed in batch order, so the result does not depend on the threads."""
        counts = self.counts.double()
        bounds = self.batch_start.tolist()
        parts = _map_batches(lambda item: unigram_expect(item[0], counts[item[1]:item[2]], scores, self.max_len)[0],
                             list(zip(self.lattices, bounds[:-1], bounds[1:])))
        return sum(parts)

    def _em_step(self) -> None:
        t = time.perf_counter()
        unk = self._unk_score()
        scores = self._piece_scores(unk)
        expected = self._expected(scores)
        t2 = time.perf_counter()
        self.seconds["e_step"] += t2 - t
        freq = expected[self.order]
        kept = freq >= _MIN_EXPECTED
        self.order = self.order[kept]
        freq = freq[kept]
        total = freq.sum()
        self.alive[:] = False
        self.alive[self.order] = True
        self.scores[self.order] = torch.special.digamma(freq) - torch.special.digamma(total)
        self._compact()
        self.stats.em_steps += 1
        self.seconds["m_step"] += time.perf_counter() - t2

    def _prune(self) -> None:
        """One pruning round: the pieces ranked by the loss of segmenting their text with the others
        (:meth:`_pruned_order`), the lattices then compacted. Training's peak memory is here: the
        E-steps' freed scratch goes back to the system first, the ranking's before the compaction
        (~930 -> 780-830 MB on 20 MB of English with both and the round's temporaries kept short)."""
        t = time.perf_counter()
        release_free_memory()
        self.order = self._pruned_order()
        self.alive[:] = False
        self.alive[self.order] = True
        release_free_memory()
        self._compact()
        self.seconds["prune"] += time.perf_counter() - t

    def _viterbi_frequencies(self, score: torch.Tensor) -> torch.Tensor:
        """How often each seed piece is in the words' best segmentations under ``score`` (float64,
        counted by the words' counts; removed pieces none)."""
        alive = torch.cat([self.alive, torch.tensor([False])])
        freq = torch.zeros(self.num_seeds, dtype=torch.float64)
        table = score.numpy()
        # Each batch's edge scores are gathered on its pool thread (numpy: torch ops stay on this
        # thread) and freed with its Viterbi: one batch's at a time, not every batch's at once.
        paths = _map_batches(lambda lat: _viterbi(lat, torch.from_numpy(table[lat.edge_piece.numpy()])), self.lattices)
        for lat, w0, (edges, owner) in zip(self.lattices, self.batch_start.tolist(), paths):
            used = lat.edge_piece[edges].long()
            ok = alive[used]
            freq.index_add_(0, used[ok], self.counts[owner[ok] + w0].double())
        return freq

    def _pruned_order(self) -> torch.Tensor:
        """The pieces a pruning round keeps, in :attr:`order`'s sense (the reference's rule)."""
        unk = self._unk_score()
        score = self._piece_scores(unk)
        freq = self._viterbi_frequencies(score)
        vsum = float(self.counts.sum())
        total = float(freq.sum())
        order = self.order
        f = freq[order]
        length = self.seed_len[order]
        single = length == 1
        keep_first = order[single & (f > 0)]
        multi = torch.nonzero(~single & (f > 0)).squeeze(1)
        alt_score, alt_pieces, alt_owner = self._alternatives(order[multi], score)
        wins = score[order[multi]] >= alt_score
        # loss of replacing the piece by its alternative (the reference's formula)
        fi = f[multi]
        n_alt = torch.bincount(alt_owner, minlength=multi.numel()).double()
        logsum_alt = torch.log(total + fi * (n_alt - 1))
        alt_freq = freq[alt_pieces.clamp(min=0)] * (alt_pieces >= 0)
        terms = torch.log(alt_freq + fi[alt_owner]) - logsum_alt[alt_owner]
        logprob_alt = torch.zeros(multi.numel(), dtype=torch.float64).index_add_(0, alt_owner, terms)
        logprob_sp = torch.log(fi) - math.log(total)
        loss = (fi / vsum) * (logprob_sp - logprob_alt)
        candidates = multi[wins]
        ranked = candidates[torch.argsort(-loss[wins], stable=True)]
        size = order.numel()
        pruned_size = max(self.desired, int(np.float32(self.shrinking) * np.float32(size)))
        take = pruned_size - keep_first.numel() if keep_first.numel() <= pruned_size else ranked.numel()
        return torch.cat([keep_first, order[ranked[: max(take, 0)]]])

    def _by_batch(self, word: torch.Tensor, start: torch.Tensor) -> list:
        """Queries at character ``start`` of word ``word`` (global ids), grouped by lattice batch once
        for all the steps of :meth:`_alternatives`: per batch its lattice, its queries' indices
        (ascending, so the queries among the first ``a`` are a prefix), their words within the batch
        and their starts."""
        batch = torch.searchsorted(self.batch_start, word, right=True) - 1
        mine = torch.argsort(batch, stable=True)  # stable: each batch's indices stay ascending
        sizes = torch.bincount(batch, minlength=len(self.lattices)).tolist()
        return [(lat, idx, word[idx] - w0, start[idx])
                for lat, idx, w0 in zip(self.lattices, mine.split(sizes), self.batch_start.tolist())]

    @staticmethod
    def _edges_ending(groups: list, a: int, k: int) -> torch.Tensor:
        """``[a, k]`` pieces of the lattice edges of at most ``k`` characters that end ``k`` characters
        after each of the first ``a`` queries of ``groups`` (see :meth:`_by_batch`): column ``k - length``
        (-1: no such edge; ``num_seeds``: the unknown character)."""
        out = torch.full((a, k), -1, dtype=torch.int64)
        for lat, mine, word, start in groups:
            m = int(torch.searchsorted(mine, a))  # the group's queries among the first a
            if not m:
                continue
            row = lat.step_base[start[:m] + k] + word[:m]
            lo = lat.row_ptr[row]
            edges, offsets = span_indices(lo, lat.row_ptr[row + 1] - lo)
            owner = mine[:m][row_ids(offsets, edges.numel())]
            length = lat.edge_len[edges].long()
            short = length <= k
            out[owner[short], k - length[short]] = lat.edge_piece[edges[short]].long()
        return out

    def _alternatives(self, pieces: torch.Tensor, score: torch.Tensor):
        """Best segmentation of each piece's own string without the piece itself (dense DP over <= max_len steps).

        Returns each piece's best score, and the pieces of its best segmentation (flat, with owners).
        The segmentations come from the lattice at an occurrence of the piece, so only live pieces
        (and removed characters, as the unknown character) take part.
        """
        n = pieces.numel()
        if n == 0:
            empty = torch.zeros(0, dtype=torch.int64)
            return torch.zeros(0, dtype=torch.float64), empty, empty
        # Longest pieces first: the pieces at least k long are then a prefix.
        by_length = torch.argsort(self.seed_len[pieces], descending=True, stable=True)
        pieces = pieces[by_length]
        L0 = self.seed_len[pieces]
        start = self.seed_pos[pieces]
        word = torch.searchsorted(self.offsets, start, right=True) - 1
        in_word = start - self.offsets[word]  # characters before the piece in its word
        M = self.max_len
        groups = self._by_batch(word, in_word)  # once: each k reads a prefix of the same queries
        if _dispatch.on_cpu_kernels(L0.device):  # (before the tables below, which the kernel does not read)
            return self._alternatives_kernel(groups, by_length, L0, score)
        table = torch.cat([torch.tensor([-math.inf], dtype=torch.float64), score])  # id -1: no edge
        best = torch.full((n, M + 1), -math.inf, dtype=torch.float64)
        best[:, 0] = 0.0
        back_len = torch.zeros((n, M + 1), dtype=torch.int8)  # small types: n is up to the seed count
        back_piece = torch.full((n, M + 1), -1, dtype=torch.int32)
        at_least = torch.bincount(L0, minlength=M + 1).flip(0).cumsum(0).flip(0).tolist()
        for k in range(1, int(L0[0]) + 1):
            a = at_least[k]
            # Columns 0 .. k - 1 hold the pieces of length k .. 1 ending here; they start at
            # positions 0 .. k - 1 of the piece, whose best scores are best[:, :k].
            ids = self._edges_ending(groups, a, k)
            v = table[ids + 1].add_(best[:a, :k])
            whole = L0[:a] == k  # the piece itself is not its own alternative
            v[whole, 0] = -math.inf
            top, arg = v.max(1)
            best[:a, k] = top
            back_len[:a, k] = k - arg
            pick = ids.gather(1, arg[:, None]).squeeze(1)
            back_piece[:a, k] = torch.where(pick == self.num_seeds, -1, pick)
        alt_score = best[torch.arange(n), L0]
        owners, chosen = [], []
        who = torch.arange(n)
        pos = L0.clone()
        while who.numel():
            chosen.append(back_piece[who, pos])
            owners.append(who)
            pos = pos - back_len[who, pos]
            more = pos > 0
            who, pos = who[more], pos[more]
        unsort = torch.empty_like(by_length)
        unsort[by_length] = torch.arange(n)
        return alt_score[unsort], torch.cat(chosen), by_length[torch.cat(owners)]

    def _alternatives_kernel(self, groups: list, by_length: torch.Tensor, L0: torch.Tensor, score: torch.Tensor):
        """:meth:`_alternatives` on the CPU: the DP per piece in ``gputok.kernels.train_unigram_numba``,
        one call per lattice batch; the segmentations come out in the twin's order (round by round)."""
        from ..kernels.train_unigram_numba import unigram_alternatives_numba

        n = L0.numel()
        alt = np.full(n, -math.inf)
        chain_piece = np.full((n, self.max_len), -1, dtype=np.int64)
        chain_len = np.zeros(n, dtype=np.int64)
        lengths, table = L0.numpy(), score.double().numpy()
        for lat, mine, word, start in groups:
            if mine.numel():
                unigram_alternatives_numba(lat.step_base.numpy(), lat.row_ptr.numpy(), lat.edge_len.numpy(),
                                           lat.edge_piece.numpy(), mine.numpy(), word.numpy(), start.numpy(),
                                           lengths[mine.numpy()], table, self.num_seeds, alt, chain_piece, chain_len)
        rounds = [np.flatnonzero(chain_len > r) for r in range(int(chain_len.max()))]
        chosen = np.concatenate([chain_piece[who, r] for r, who in enumerate(rounds)])
        owners = np.concatenate(rounds)
        unsort = torch.empty_like(by_length)
        unsort[by_length] = torch.arange(n)
        return (torch.from_numpy(alt)[unsort], torch.from_numpy(chosen).to(torch.int32),
                by_length[torch.from_numpy(owners)])

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> list[tuple[str, float]]:
        t = time.perf_counter()
        self._required_chars()
        release_free_memory()
        self._seeds()
        release_free_memory()
        t2 = time.perf_counter()
        self.seconds["seeds"] = t2 - t
        self._build_lattice()
        release_free_memory()
        self.seconds["lattice"] = time.perf_counter() - t2
        self.order = torch.arange(self.num_seeds)
        self.alive = torch.ones(self.num_seeds, dtype=torch.bool)
        self.desired = int(self.vocab_size * 1.1)
        bar = _progress(self.progress)
        while True:
            for _ in range(self.sub_iterations):
                self._em_step()
            self.stats.rounds += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(pieces=self.order.numel(), edges=self._num_edges())
            if self.order.numel() <= self.desired:
                break
            self._prune()
            release_free_memory()
        if bar is not None:
            bar.close()
        t = time.perf_counter()
        pieces = self._finalize()
        self.seconds["finalize"] = time.perf_counter() - t
        if self.progress:
            phases = ", ".join(f"{k} {v:.2f}s" for k, v in self.seconds.items())
            print(f"unigram: {self.stats.words} words, {self.stats.seed_pieces} seeds, {self.stats.rounds} rounds, "
                  f"{len(pieces)} pieces; {phases}", file=sys.stderr)
        return pieces

    def _piece_string(self, seed: int) -> str:
        start = int(self.seed_pos[seed])
        return "".join(map(chr, self.values[start: start + int(self.seed_len[seed])].tolist()))

    def _finalize(self) -> list[tuple[str, float]]:
        score = self.scores.float()  # the reference keeps float32 scores
        C = self.required_codepoints.numel()
        min_score = float(score[self.order].min())
        final: dict[str, float] = {}
        alive = self.alive.tolist()
        penalty = 0.0
        for seed, cp in enumerate(self.required_codepoints.tolist()):
            if alive[seed]:
                final[chr(cp)] = float(score[seed])
            else:
                final[chr(cp)] = float(np.float32(min_score + penalty))
                penalty += 0.0001
        room = self.vocab_size - self.num_meta
        rest = self.order[self.order >= C].tolist()
        named = sorted(((-float(score[s]), self._piece_string(s)) for s in rest))
        for negative, piece in named:
            if len(final) >= room:
                break
            final.setdefault(piece, -negative)
        if len(final) < room:
            raise ValueError(f"vocab_size={self.vocab_size} is too large for this corpus: it yields at most "
                             f"{len(final) + self.num_meta} pieces; lower vocab_size or give more text")
        return sorted(final.items(), key=lambda item: (-item[1], item[0]))


def _progress(enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(desc="unigram EM", unit="round", file=sys.stderr)


def write_sentencepiece_model(pieces: Sequence[tuple[str, float]], path: str | os.PathLike, *,
                              byte_fallback: bool = False, unk_token: str = "<unk>",
                              special_tokens: Sequence[str] = ("<unk>", "<s>", "</s>"),
                              normalizer_name: str = "nmt_nfkc", precompiled_charsmap: bytes = b"",
                              add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = True) -> None:
    """Write :func:`learn_unigram`'s pieces as a SentencePiece Unigram ``.model`` file.

    Piece types: ``unk_token`` is the unknown piece, the other ``special_tokens`` are control pieces
    (``<s>`` / ``</s>`` / ``<pad>`` become bos / eos / pad), ``<0xNN>`` are byte pieces with
    ``byte_fallback``. SentencePiece normalizes with the compiled rules in the file
    (``precompiled_charsmap``; take them from any model trained with the same normalization rule),
    not with the rule's name; without them the file says ``identity``, and text must then be
    normalized before encoding (e.g. with :func:`nmt_nfkc`).
    """
    from ..sentencepiece_model import BYTE, CONTROL, NORMAL, UNKNOWN, NormalizerSpec, Piece, SentencePieceModel, write_model

    bytes_named = {f"<0x{b:02X}>" for b in range(256)} if byte_fallback else set()
    special = set(special_tokens)
    out = []
    for text, score in pieces:
        kind = UNKNOWN if text == unk_token else CONTROL if text in special else BYTE if text in bytes_named else NORMAL
        out.append(Piece(text, float(score), kind))
    index = {p.piece: i for i, p in enumerate(out)}
    if unk_token not in index:
        raise ValueError(f"unk_token {unk_token!r} is not among the pieces; SentencePiece needs an unknown piece")
    name = normalizer_name if precompiled_charsmap or normalizer_name == "identity" else "identity"
    model = SentencePieceModel(pieces=out, byte_fallback=byte_fallback, unk_id=index[unk_token],
                               bos_id=index.get("<s>", -1), eos_id=index.get("</s>", -1), pad_id=index.get("<pad>", -1),
                               normalizer=NormalizerSpec(name=name, precompiled_charsmap=precompiled_charsmap,
                                                         add_dummy_prefix=add_dummy_prefix,
                                                         remove_extra_whitespaces=remove_extra_whitespaces))
    write_model(model, path)
