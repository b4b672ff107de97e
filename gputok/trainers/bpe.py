"""BPE training on tensors: the merge loop of huggingface ``tokenizers``' ``BpeTrainer``, same output.

The reference (``tokenizers/src/models/bpe/trainer.rs`` and ``word.rs``), rule by rule:

- ids: the special tokens first (in the given order, duplicates once), then the alphabet sorted by
  code point, then the prefixed / suffixed forms of alphabet characters that the words use, then one
  id per merge whose token is new.
- alphabet: every character of the words, weighted by the word counts, plus ``initial_alphabet``
  (the first character of each string, always kept first); with ``limit_alphabet`` only the
  ``limit_alphabet`` heaviest stay, and characters outside the alphabet are dropped from the words
  (their neighbours become adjacent; a word keeps its prefix / suffix positions of the original text).
- a word is split into characters, ``continuing_subword_prefix`` on every character but the first,
  ``end_of_word_suffix`` on the last.
- pair counts: every window counts (``a a a a`` holds ``(a, a)`` three times), weighted by the word
  count; the best pair is the highest count, ties to the smallest ``(id_left, id_right)``.
- a merge joins its left token and its right token less its ``continuing_subword_prefix``; it is
  applied in every word left to right without overlap (``a a a a`` -> ``aa aa``).
- the loop stops when the vocabulary reaches ``vocab_size`` or the best count is below
  ``min_frequency`` (or 1). With ``max_token_length`` a pair whose merge would be ``max_token_length``
  characters or longer is never chosen (the reference's rule, ``<`` included, except that pairs of
  two characters always count).

Deliberate differences: the reference numbers the prefixed / suffixed alphabet (``##a``, ``a</w>``) in
hash order, and so orders tied merges differently from run to run; here they are sorted by string,
and ties in ``limit_alphabet`` keep the smaller code point (the reference's unstable sort picks any).
Counts are int64 everywhere (the reference's pair counts are i32 and wrap above 2**31). When a merge
produces a token that already exists (``ab + c`` after ``a + bc``), the reference re-queues the new
neighbour pairs with the word positions of that merge only, which can repeat a pair later in its
merge list; here every merge applies to all words. Real corpora seldom produce such a merge (none in
the first 10 MB of the English set); ``tests/test_train_bpe.py`` checks the merges on real text.

Algorithm: the symbols of all words with two or more sit in one flat int32 array linked by ``nxt`` /
``prv``; ``pslot`` holds, at every position, the pair-table slot of the window it starts. Each pair
owns the run of a position buffer where its windows were written when it was born (a pair is born
only in the merge that creates its newer token, so its windows arrive together). A merge reads its
pair's run, keeps the windows still its own (``pslot`` unchanged), drops every second window of a
run of ``(a, a)``, rewrites the words with ``gputok.trainers.pair_ops.apply_merge``, subtracts
the counts of the windows it destroys and adds the windows it creates: vectorized numpy, work in
proportion to the merge's occurrences, never a recount (numpy rather than torch: its per-op cost on
these small arrays is a fraction of torch's). The best pair comes from a candidate set sorted by
pair, holding every pair counted at least ``threshold``; it is rebuilt with a lower threshold when it
runs dry. Words on a CUDA device get their corpus-wide first pair count there (the Triton kernel
``gputok.kernels.pair_count``) and then train with this same host loop: a merge is a few dozen
small dependent steps, and a loop kept in GPU memory paid ~2 ms of launches and syncs per merge,
~10x slower than this loop on the same H100 machine (20 MB, byte-level BPE: 58 s against 5.6 s of
merges), so it was removed.

On CPU words (``gputok._dispatch.on_cpu_kernels``) the frequency-score loop above runs instead as
one numba kernel, ``gputok.kernels.train_bpe_numba`` (a pair hash table, per-pair position runs,
a lazy max-heap of counts; same merges, tested against this loop in ``tests/test_train_numba.py``):
the numpy loop stays as its reference (``_dispatch.use_backend("torch")``), for CUDA words and
for the likelihood score. The kernel reports no progress while it runs.

Memory: per symbol of the unique words five int32 arrays (symbols, links, slots, word ids) and up to
three int32 entries of the position buffer; per pair ever seen an int64 key, count and buffer offset;
during setup a few corpus-sized temporaries and code-point tables (1.1M entries). On the ~100 MB
English set (302k unique bert-wordpiece words, 2.4M characters) training peaks at ~440 MB, of which
~225 MB is importing torch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from .. import _dispatch
from ..ragged import Ragged
from .pair_ops import apply_merge, pair_count

_LOW = (1 << 32) - 1
_CODEPOINTS = 0x110000
_CANDIDATES = 2048  # pairs kept in the candidate set after a rebuild (a rebuild scans all pairs)


@dataclass
class TrainStats:
    """What a training run did, for a summary: pass ``stats=TrainStats()`` and read it afterwards.

    ``words``: unique words given; ``symbols``: their characters kept; ``pairs``: distinct pairs
    counted at the start; ``merges``: merges learned; ``setup_seconds``: alphabet, words to symbols
    and the first pair count; ``merge_seconds``: the merge loop; ``stopped_by``: ``"vocab_size"``,
    ``"min_frequency"`` or ``"no pairs"``.
    """

    words: int = 0
    symbols: int = 0
    pairs: int = 0
    merges: int = 0
    setup_seconds: float = 0.0
    merge_seconds: float = 0.0
    stopped_by: str = ""


def learn_bpe(words: Ragged, counts: torch.Tensor, *, vocab_size: int, min_frequency: int = 0,
              special_tokens: Sequence[str] = (), limit_alphabet: int | None = None,
              initial_alphabet: Sequence[str] = (), continuing_subword_prefix: str | None = None,
              end_of_word_suffix: str | None = None, max_token_length: int | None = None,
              progress: bool = True, stats: TrainStats | None = None
              ) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Learn BPE merges from unique words and their counts, as huggingface's ``BpeTrainer`` does.

    ``words``: the unique words as ragged code points (already normalized and pre-tokenized; for
    byte-level BPE already mapped to the GPT-2 byte characters); ``counts``: int64 count of each word
    (any size up to 2**63). Returns the vocabulary (token -> id) and the merges in order.
    ``stats``: a :class:`TrainStats` to fill in. Raises ``ValueError`` when ``vocab_size`` is smaller
    than the special tokens plus the alphabet (the reference returns the larger vocabulary then).

    >>> words = Ragged.from_lengths(torch.tensor([ord(c) for c in "hughugspun"]), torch.tensor([3, 4, 3]))
    >>> vocab, merges = learn_bpe(words, torch.tensor([10, 5, 12]), vocab_size=8, progress=False)
    >>> merges  # (h, u) and (u, g) both count 15: the smaller pair of ids, (1, 5) < (5, 0), wins
    [('h', 'u'), ('hu', 'g')]
    >>> vocab
    {'g': 0, 'h': 1, 'n': 2, 'p': 3, 's': 4, 'u': 5, 'hu': 6, 'hug': 7}
    """
    trainer = _Trainer(words, counts, vocab_size=vocab_size, min_frequency=min_frequency,
                       special_tokens=special_tokens, limit_alphabet=limit_alphabet,
                       initial_alphabet=initial_alphabet, prefix=continuing_subword_prefix,
                       suffix=end_of_word_suffix, max_token_length=max_token_length, score="frequency",
                       progress=progress, stats=stats)
    return trainer.run()


def _check_int(name: str, value, low: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}")


def _grow(array: np.ndarray, size: int) -> np.ndarray:
    if size <= array.size:
        return array
    bigger = np.zeros(max(size, 2 * array.size), dtype=array.dtype)
    bigger[:array.size] = array
    return bigger


class _Trainer:
    def __init__(self, words, counts, *, vocab_size, min_frequency, special_tokens, limit_alphabet,
                 initial_alphabet, prefix, suffix, max_token_length, score, progress, stats):
        _check_int("vocab_size", vocab_size, 0)
        _check_int("min_frequency", min_frequency, 0)
        _check_int("limit_alphabet", limit_alphabet, 0, allow_none=True)
        _check_int("max_token_length", max_token_length, 1, allow_none=True)
        if not isinstance(words, Ragged):
            raise TypeError(f"words must be a gputok.ragged.Ragged of code points, not {type(words).__name__}")
        if counts.numel() != len(words):
            raise ValueError(f"counts has {counts.numel()} entries for {len(words)} words; give one count per word")
        if counts.numel() and int(counts.min()) < 0:
            raise ValueError(f"word counts must be >= 0, got {int(counts.min())}")
        self.started = time.perf_counter()
        self.device = words.device
        self.vocab_size = vocab_size
        self.floor = max(1, min_frequency)
        self.prefix, self.suffix = prefix or None, suffix or None
        self.max_len = max_token_length
        self.score = score
        self.progress = progress
        self.stats = stats if stats is not None else TrainStats()
        self.stats.words = len(words)
        self.tokens: list[str] = []
        self.ids: dict[str, int] = {}
        for token in special_tokens:
            self._add(token)
        if words.values.dtype.is_floating_point or words.values.dtype == torch.bool:
            raise TypeError(f"words hold {words.values.dtype} values; give integer code points")
        values = words.values.cpu().numpy()  # int32 or int64 as given: no wide copy of the corpus
        offsets = words.offsets.cpu().numpy().astype(np.int64, copy=False)
        self.word_counts = counts.cpu().numpy().astype(np.int64)
        if values.size and (values.min() < 0 or values.max() >= _CODEPOINTS):
            raise ValueError(f"words hold values outside Unicode ({int(values.min())}..{int(values.max())}); "
                             "give code points 0..0x10FFFF")
        lengths = np.diff(offsets)
        row = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
        alphabet = self._alphabet(values, self.word_counts[row], limit_alphabet, initial_alphabet)
        for cp in alphabet.tolist():
            self._add(chr(cp))
        self._words_to_symbols(values, row, offsets, lengths, alphabet)
        if len(self.tokens) > vocab_size:
            raise ValueError(
                f"vocab_size={vocab_size} is smaller than the {len(self.tokens)} tokens training starts from "
                f"({len(special_tokens)} special tokens, {alphabet.size} alphabet characters and their "
                f"prefixed/suffixed forms); raise vocab_size or set limit_alphabet")

    def _add(self, token: str) -> int:
        if token not in self.ids:
            self.ids[token] = len(self.tokens)
            self.tokens.append(token)
        return self.ids[token]

    def _alphabet(self, values, weights, limit, initial) -> np.ndarray:
        """The kept code points, sorted: the heaviest ``limit`` of the word characters and ``initial``.

        Per-code-point tables (a bincount, no sort): 1.1M entries, 9 MB each."""
        seen = np.bincount(values, minlength=_CODEPOINTS) > 0
        weight = np.zeros(_CODEPOINTS, dtype=np.int64)
        np.add.at(weight, values, weights)
        forced = [ord(s[0]) for s in initial if s]
        seen[forced] = True
        weight[forced] = np.iinfo(np.int64).max  # always kept first
        cps = np.flatnonzero(seen)
        if limit is not None and cps.size > limit:
            # lexsort's last key is the primary: heaviest first, the smaller code point on ties
            order = np.lexsort((cps, -weight[cps]))
            cps = np.sort(cps[order[:limit]])
        return cps

    def _words_to_symbols(self, values, row, offsets, lengths, alphabet) -> None:
        # int32 temporaries: setup memory is a few arrays the size of the characters
        index = np.full(_CODEPOINTS, -1, dtype=np.int32)
        index[alphabet] = np.arange(alphabet.size, dtype=np.int32)
        # a form is a character with its prefix / suffix flags: code = alphabet index * 4 + flags
        code = index[values] * 4
        del index
        if (self.prefix or self.suffix) and values.size:
            starts = np.zeros(values.size, dtype=bool)
            starts[offsets[:-1][lengths > 0]] = True
            if self.prefix:
                code += ~starts
            if self.suffix:
                ends = np.roll(starts, -1)
                ends[-1] = True
                code += ends.astype(np.int32) << 1
            del starts
        keep = code >= 0
        row = row[keep]
        code = code[keep]
        forms = np.flatnonzero(np.bincount(code, minlength=4 * alphabet.size))
        form_ids = np.zeros(4 * alphabet.size, dtype=np.int32)
        cps, kinds = alphabet[forms // 4].tolist(), (forms % 4).tolist()
        variants = []
        for form, cp, k in zip(forms.tolist(), cps, kinds):
            if k:
                variants.append(((self.prefix if k & 1 else "") + chr(cp) + (self.suffix if k & 2 else ""), form))
            else:
                form_ids[form] = self.ids[chr(cp)]
        for string, form in sorted(variants):
            form_ids[form] = self._add(string)
        symbols = form_ids[code]
        if self.score == "likelihood":  # symbol counts include the words of one symbol
            self.freq = np.zeros(len(self.tokens) + self.vocab_size + 1, dtype=np.int64)
            np.add.at(self.freq, symbols, self.word_counts[row])
        # words left with fewer than two symbols hold no pair and never change
        kept_lengths = np.bincount(row, minlength=lengths.size)
        busy = kept_lengths[row] >= 2
        self.symbols = symbols[busy]
        self.wid = row[busy]
        self.stats.symbols = int(keep.sum())

    def run(self) -> tuple[dict[str, int], list[tuple[str, str]]]:
        if self.score == "frequency" and _dispatch.on_cpu_kernels(self.device):
            return self._run_kernel()
        self._setup_pairs()
        self.stats.setup_seconds = time.perf_counter() - self.started
        started = time.perf_counter()
        merges: list[tuple[str, str]] = []
        next_report = started + 0.5
        while True:
            if len(self.tokens) >= self.vocab_size:
                self.stats.stopped_by = "vocab_size"
                break
            best = self._best()
            if best < 0:
                break
            merges.append(self._merge(best))
            if self.progress and len(merges) % 64 == 0 and time.perf_counter() > next_report:
                now = time.perf_counter()
                next_report = now + 0.5
                print(f"\rmerges {len(merges)} ({len(self.tokens)}/{self.vocab_size} tokens), "
                      f"{len(merges) / (now - started):.0f}/s", end="", file=sys.stderr, flush=True)
        if self.progress and merges:
            print(file=sys.stderr)
        self.stats.merges = len(merges)
        self.stats.merge_seconds = time.perf_counter() - started
        return dict(self.ids), merges

    def _run_kernel(self) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """The whole merge loop in one numba kernel (``gputok.kernels.train_bpe_numba``), then the
        merges' strings here; the kernel finds merges onto existing tokens itself, by string."""
        from ..kernels.train_bpe_numba import train_bpe_numba

        strings = [np.array([ord(c) for c in t], dtype=np.int32) for t in self.tokens]
        tok_off = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum([s.size for s in strings], out=tok_off[1:])
        tok_chars = np.concatenate(strings) if strings else np.zeros(0, dtype=np.int32)
        prefix = np.array([ord(c) for c in self.prefix or ""], dtype=np.int32)
        self.tlen = np.ones(len(self.tokens) + self.vocab_size + 1, dtype=np.int64)
        self.stats.setup_seconds = time.perf_counter() - self.started
        started = time.perf_counter()
        triples, status, self.stats.pairs = train_bpe_numba(
            self.symbols.astype(np.int32), self.wid.astype(np.int32), self.word_counts, len(self.tokens),
            self.vocab_size, self.floor, self.max_len or 0, tok_off, tok_chars, prefix)
        merges: list[tuple[str, str]] = []
        for a, b, z in triples.tolist():
            left, right, mine, _ = self._merged_token(a, b)
            if mine != z:
                raise AssertionError(f"BPE merge kernel gave id {z} to {left + right!r}, expected {mine}")
            merges.append((left, right))
        self.stats.stopped_by = ("vocab_size", "min_frequency", "no pairs")[status]
        if self.progress and merges:
            print(f"merges {len(merges)} ({len(self.tokens)}/{self.vocab_size} tokens)", file=sys.stderr)
        self.stats.merges = len(merges)
        self.stats.merge_seconds = time.perf_counter() - started
        return dict(self.ids), merges

    # -- state ----------------------------------------------------------------------------------
    def _setup_pairs(self) -> None:
        sym = self.symbols
        n = sym.size
        wid = self.wid
        self.nxt = np.arange(1, n + 1, dtype=np.int32)
        self.prv = np.arange(-1, n - 1, dtype=np.int32)
        if n:
            last = np.flatnonzero(np.append(wid[1:] != wid[:-1], True))
            self.nxt[last] = -1
            self.prv[np.append(0, last[:-1] + 1)] = -1
        on = self.device  # CUDA words: the one corpus-wide count runs there, on the kernel
        keys, totals, slot = (t.cpu().numpy() for t in pair_count(
            torch.from_numpy(sym).to(on), torch.from_numpy(wid).to(on), torch.from_numpy(self.word_counts).to(on),
            num_symbols=len(self.tokens)))
        self.num_pairs = keys.size
        self.stats.pairs = keys.size
        capacity = max(16, 2 * keys.size)
        self.pkey = _grow(keys.astype(np.int64), capacity)
        self.pcnt = _grow(totals.astype(np.int64), capacity)
        self.eligible = np.ones(capacity, dtype=bool)  # every first pair is two characters
        self.pslot = slot
        self.tlen = np.ones(len(self.tokens) + self.vocab_size + 1, dtype=np.int64)
        # window positions grouped by pair: pair i owns posbuf[pstart[i]:pstart[i] + plen[i]]
        windows = np.flatnonzero(self.pslot >= 0).astype(np.int32)
        group = self.pslot[windows]
        order = np.argsort(group.astype(np.uint16) if keys.size <= 1 << 16 else group, kind="stable")
        self.posbuf = windows[order]
        self.posbuf_used = self.posbuf.size
        self.plen = _grow(np.bincount(group, minlength=keys.size).astype(np.int64), capacity)
        self.pstart = np.zeros(capacity, dtype=np.int64)
        np.cumsum(self.plen[:keys.size - 1], out=self.pstart[1:keys.size])
        self.more: dict[int, list[np.ndarray]] = {}  # positions of a pair born again (see _count_new_windows)
        self.marks = np.zeros(n, dtype=bool)
        self._rebuild()

    def _rebuild(self) -> None:
        """Candidates: every eligible pair counted at least ``threshold`` (all, for likelihood).

        ``cand`` is sorted by pair, so the first maximum of its counts is the reference's best
        (highest count, then smallest pair); pairs born since (``extra``) are few and unsorted.
        """
        used = np.flatnonzero(self.eligible[:self.num_pairs] & (self.pcnt[:self.num_pairs] >= self.floor))
        self.threshold = self.floor
        if self.score == "frequency" and used.size > _CANDIDATES:
            cut = used.size - _CANDIDATES
            self.threshold = int(np.partition(self.pcnt[used], cut)[cut])
            used = used[self.pcnt[used] >= self.threshold]
        self.cand = used[np.argsort(self.pkey[used], kind="stable")]
        self.extra = used[:0]
        self.start, self.at_threshold = 0, False

    def _best(self) -> int:
        """The slot of the pair to merge next, or -1 (and ``stats.stopped_by`` set) when none is left."""
        if self.score == "likelihood":
            return self._best_likelihood()
        while True:
            if self.extra.size > 256:
                cand = np.concatenate((self.cand[self.start:], self.extra))
                counts = self.pcnt[cand]
                if cand.size > 2 * _CANDIDATES:
                    # every pair counted >= threshold is here, so this is the global K-th count
                    cut = cand.size - _CANDIDATES
                    self.threshold = max(self.threshold, int(np.partition(counts, cut)[cut]))
                cand = cand[counts >= self.threshold]
                self.cand = cand[np.argsort(self.pkey[cand], kind="stable")]
                self.extra = cand[:0]
                self.start, self.at_threshold = 0, False  # the extras may count above the threshold
            best, top = self._best_in_cand()
            if self.extra.size:
                counts = self.pcnt[self.extra]
                i = int(counts.argmax())
                if counts[i] >= top:
                    tied = self.extra[counts == counts[i]]
                    other = int(tied[np.argmin(self.pkey[tied])])
                    if counts[i] > top or self.pkey[other] < self.pkey[best]:
                        best, top = other, int(counts[i])
            if top >= self.threshold:
                return best
            if self.threshold <= self.floor:
                self.stats.stopped_by = "min_frequency" if self._any_pair() else "no pairs"
                return -1
            self._rebuild()

    def _best_in_cand(self) -> tuple[int, int]:
        """Best of ``cand``: its first maximum. Once that maximum is the threshold, no count in
        ``cand`` rises again (new pairs go to ``extra``), so the best is the first entry still at the
        threshold: a short scan from ``start``, past entries that fell below for good."""
        cand, counts = self.cand, self.pcnt
        if not self.at_threshold:
            if cand.size == 0:
                return -1, -1
            values = counts[cand]
            i = int(values.argmax())
            if values[i] > self.threshold:
                return int(cand[i]), int(values[i])
            self.at_threshold, self.start = True, i
        while self.start < cand.size:
            hit = np.flatnonzero(counts[cand[self.start:self.start + 512]] >= self.threshold)
            if hit.size:
                self.start += int(hit[0])
                return int(cand[self.start]), int(counts[cand[self.start]])
            self.start += 512
        return -1, -1

    def _any_pair(self) -> bool:
        return bool((self.pcnt[:self.num_pairs][self.eligible[:self.num_pairs]] > 0).any())

    def _best_likelihood(self) -> int:
        """Highest count / (freq(left) * freq(right)); ties: the higher count, then the smaller pair."""
        cand = self.cand = self.cand[self.pcnt[self.cand] >= self.floor]
        if cand.size == 0:
            self.stats.stopped_by = "min_frequency" if self._any_pair() else "no pairs"
            return -1
        counts = self.pcnt[cand]
        keys = self.pkey[cand]
        score = counts / (self.freq[keys >> 32].astype(np.float64) * self.freq[keys & _LOW])
        close = np.flatnonzero(score >= score.max() * (1 - 1e-9))
        if close.size == 1:
            return int(cand[close[0]])
        # float scores only shortlist; the exact rational order decides
        exact = [(Fraction(c, int(self.freq[k >> 32]) * int(self.freq[k & _LOW])), c, -k, s) for c, k, s in
                 zip(counts[close].tolist(), keys[close].tolist(), cand[close].tolist())]
        return max(exact)[3]

    # -- one merge ------------------------------------------------------------------------------
    def _occurrences(self, slot: int) -> np.ndarray:
        """Start positions of the live windows of pair ``slot``: every window it was ever given, less
        those a merge has since rewritten (their ``pslot`` moved on)."""
        start = int(self.pstart[slot])
        positions = self.posbuf[start:start + int(self.plen[slot])]
        if slot in self.more:
            positions = np.unique(np.concatenate([positions] + self.more.pop(slot)))
        return positions[self.pslot[positions] == slot]

    def _merge(self, slot: int) -> tuple[str, str]:
        key = int(self.pkey[slot])
        a, b = key >> 32, key & _LOW
        left, right, z, fresh = self._merged_token(a, b)
        starts = self._occurrences(slot)
        if a == b:
            starts = self._without_overlaps(np.sort(starts), slot)
        nxt, prv, pslot, marks = self.nxt, self.prv, self.pslot, self.marks
        q = nxt[starts]
        r = nxt[q]
        old_left = prv[starts]
        # the window left of an occurrence is the one right of the previous occurrence when they touch
        marks[q] = True
        touching = marks[old_left]
        marks[q] = False
        lone_left = (old_left >= 0) & ~touching
        has_right = r >= 0
        # windows that disappear: (l, p) and (q, r); (p, q) is the merged pair, zeroed below
        gone = np.concatenate((old_left[lone_left], q[has_right]))
        np.subtract.at(self.pcnt, pslot[gone], self.word_counts[self.wid[gone]])
        self.pcnt[slot] = 0
        apply_merge(self.symbols, self.nxt, self.prv, starts, z)
        pslot[q] = -1
        pslot[starts[~has_right]] = -1
        born = np.concatenate((prv[starts[lone_left]], starts[has_right]))
        self._count_new_windows(born, int(lone_left.sum()), z, fresh)
        if self.score == "likelihood":
            moved = int(self.word_counts[self.wid[starts]].sum())
            self.freq[a] -= moved
            self.freq[b] -= moved
            self.freq[z] += moved
        return left, right

    def _merged_token(self, a: int, b: int) -> tuple[str, str, int, bool]:
        """The tokens of ids ``a`` and ``b``, the id of their merge, and whether it is a new token."""
        left, right = self.tokens[a], self.tokens[b]
        joined = right[len(self.prefix):] if self.prefix and right.startswith(self.prefix) else right
        fresh = left + joined not in self.ids
        z = self._add(left + joined)
        if fresh:
            self.tlen[z] = self.tlen[a] + self.tlen[b]
        return left, right, z, fresh

    def _without_overlaps(self, starts: np.ndarray, slot: int) -> np.ndarray:
        """For a pair ``(a, a)``: in each run of windows keep the 1st, 3rd, ... (left to right merging)."""
        before = self.prv[starts]
        chained = (before >= 0) & (self.pslot[np.maximum(before, 0)] == slot)
        index = np.arange(starts.size)
        run_start = np.maximum.accumulate(np.where(chained, 0, index))
        return starts[(index - run_start) % 2 == 0]

    def _count_new_windows(self, born: np.ndarray, lefts: int, z: int, fresh: bool) -> None:
        """Give the windows starting at ``born`` their pair slots, counts and index entries.

        ``born[:lefts]`` start windows ``(x, z)``, the rest windows ``(z, y)``.

        A pair's windows are born together, in the merge that creates its newer token, so a new
        pair's positions are one contiguous run of ``posbuf``. Only a merge whose token already
        existed (``fresh`` false) can give an existing pair more windows: those go to ``more``.
        """
        if born.size == 0:
            return
        if fresh and 2 * len(self.tokens) <= 1 << 16:
            # every new pair holds z: group by (other symbol, side), a radix sort on 16 bits
            other = np.concatenate((self.symbols[born[:lefts]], self.symbols[self.nxt[born[lefts:]]]))
            code = other.astype(np.int64) * 2
            code[lefts:] += 1
            order = np.argsort(code.astype(np.uint16), kind="stable")
            code, born = code[order], born[order]
            first = np.flatnonzero(np.concatenate(([True], code[1:] != code[:-1])))
            other, right = code[first] >> 1, (code[first] & 1).astype(bool)
            unique = np.where(right, (z << 32) | other, (other << 32) | z)
        else:
            keys = (self.symbols[born].astype(np.int64) << 32) | self.symbols[self.nxt[born]]
            order = np.argsort(keys)
            keys, born = keys[order], born[order]
            first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            unique = keys[first]
        sums = np.add.reduceat(self.word_counts[self.wid[born]], first)
        sizes = np.diff(np.append(first, born.size))
        slots = np.empty(unique.size, dtype=np.int64)
        is_new = np.ones(unique.size, dtype=bool)
        if not fresh:
            # the merged token existed, so some of its pairs may too: look them up
            used = self.pkey[:self.num_pairs]
            mine = np.flatnonzero(((used >> 32) == z) | ((used & _LOW) == z))
            if mine.size:
                known = used[mine]
                order = np.argsort(known)
                at = np.minimum(np.searchsorted(known, unique, sorter=order), mine.size - 1)
                found = known[order[at]] == unique
                slots[found] = mine[order[at[found]]]
                is_new = ~found
                self.pcnt[slots[found]] += sums[found]
                for i in np.flatnonzero(found).tolist():
                    self.more.setdefault(int(slots[i]), []).append(born[first[i]:first[i] + sizes[i]])
        added = int(is_new.sum())
        start = self.num_pairs
        self.num_pairs += added
        if self.num_pairs > self.pkey.size:
            for name in ("pkey", "pcnt", "eligible", "pstart", "plen"):
                setattr(self, name, _grow(getattr(self, name), self.num_pairs))
        new_slots = np.arange(start, self.num_pairs)
        slots[is_new] = new_slots
        self.pkey[new_slots] = unique[is_new]
        self.pcnt[new_slots] = sums[is_new]
        if self.posbuf_used + born.size > self.posbuf.size:
            self.posbuf = _grow(self.posbuf, self.posbuf_used + born.size)
        self.posbuf[self.posbuf_used:self.posbuf_used + born.size] = born
        self.pstart[new_slots] = self.posbuf_used + first[is_new]
        self.plen[new_slots] = sizes[is_new]
        self.posbuf_used += born.size
        if self.max_len is not None:
            lengths = self.tlen[unique >> 32] + self.tlen[unique & _LOW]
            self.eligible[slots] = lengths < self.max_len
        else:
            self.eligible[new_slots] = True
        self.pslot[born] = np.repeat(slots, sizes)
        rising = slots[self.eligible[slots] & (self.pcnt[slots] >= self.threshold)]
        if self.score == "likelihood":
            rising = rising[~np.isin(rising, self.cand)] if not fresh else rising
            self.cand = np.concatenate((self.cand, rising))
        elif rising.size:
            if not fresh:
                rising = rising[~np.isin(rising, self.cand) & ~np.isin(rising, self.extra)]
                self.at_threshold, self.start = False, 0  # an existing pair's count rose
            self.extra = np.concatenate((self.extra, rising))
