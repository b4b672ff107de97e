"""The BPE / WordPiece merge loop resident on the device: every merge runs as torch ops on GPU tensors.

Same rules and same output as the host loop of :mod:`gputok.trainers.bpe` (its docstring lists the
reference's rules); only where the loop state lives differs. The host loop keeps its state in numpy
because numpy's per-op cost on small arrays is a fraction of torch's on a CPU; on a GPU the state
stays in device memory and the host only sees the merged pair, once per merge.

State, all on the device: the symbols of the words with two or more in one flat int32 array linked by
``nxt`` / ``prv``; ``pslot``, the pair-table slot of the window starting at each position; the pair
table (``pkey`` = ``left << 32 | right``, int64 ``pcnt``, ``eligible``); a position buffer where each
pair owns the run of windows it was born with (``pstart`` / ``plen``).

One merge:

1. best pair: one masked max over the pair table (highest count), then the smallest key among the
   pairs at that count; the key, count and position run come to the host in one transfer;
2. its occurrences: the pair's run of the position buffer, less the windows a merge has since
   rewritten (``pslot`` moved on). A pair that gained windows after birth (only when a merge makes
   a token that already existed) is found by a scan of ``pslot`` instead; for ``(a, a)`` every second
   window of a run is dropped (left-to-right merging);
3. counts of the destroyed neighbour windows go down (``index_add_``), the words are rewritten by
   ``apply_merge`` (the Triton kernel ``gputok.kernels.apply_merge`` on CUDA, its twin
   ``gputok.trainers.pair_ops.apply_merge_torch`` elsewhere), the new windows are grouped by pair
   (a sort of their keys), added to the table and given their own run of the position buffer.

A merge touches only the windows of its pair and their neighbours; nothing is recounted. Left out:
the host loop's candidate set (here the best pair is a full reduction over the pair table, which a
GPU does in one pass). Memory: as the host loop, in device memory: five int32 arrays per symbol and
the position buffer, an int64 key and count per pair ever seen.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from .bpe import _LOW, _Trainer
from .pair_ops import apply_merge, pair_count


def runs_on_device(device: torch.device) -> bool:
    """Whether the merge loop for words on ``device`` runs there (CUDA) rather than on the host."""
    return torch.device(device).type == "cuda"


def _grown(tensor: torch.Tensor, size: int, fill: int = 0) -> torch.Tensor:
    if size <= tensor.numel():
        return tensor
    bigger = torch.full((max(size, 2 * tensor.numel()),), fill, dtype=tensor.dtype, device=tensor.device)
    bigger[:tensor.numel()] = tensor
    return bigger


class DeviceTrainer(_Trainer):
    """``_Trainer`` with its pair state and merges on ``words.device``; setup (alphabet, symbols) is shared."""

    def _setup_pairs(self) -> None:
        dev = self.device
        n = self.symbols.size
        # the host arrays of the shared setup give way to their device copies, under the same names
        self.symbols = torch.from_numpy(self.symbols).to(dev)
        self.wid = torch.from_numpy(self.wid.astype(np.int64)).to(dev)
        self.word_counts = torch.from_numpy(self.word_counts).to(dev)
        ends = torch.ones(n, dtype=torch.bool, device=dev)
        ends[:-1] = self.wid[1:] != self.wid[:-1]
        heads = torch.ones(n, dtype=torch.bool, device=dev)
        heads[1:] = ends[:-1]
        positions = torch.arange(n, dtype=torch.int32, device=dev)
        self.nxt = torch.where(ends, -1, positions + 1).int()
        self.prv = torch.where(heads, -1, positions - 1).int()
        keys, totals, slot = pair_count(self.symbols, self.wid, self.word_counts, num_symbols=len(self.tokens))
        self.num_pairs = keys.numel()
        self.stats.pairs = keys.numel()
        capacity = max(16, 2 * keys.numel())
        self.pkey = _grown(keys.long(), capacity)
        self.pcnt = _grown(totals.long(), capacity)
        self.eligible = torch.ones(capacity, dtype=torch.bool, device=dev)  # every first pair is two characters
        self.pslot = slot.int()
        self.tlen = torch.ones(len(self.tokens) + self.vocab_size + 1, dtype=torch.int64, device=dev)
        windows = torch.nonzero(self.pslot >= 0).flatten()
        group = self.pslot[windows].long()
        order = torch.sort(group, stable=True).indices
        self.posbuf = windows[order].int()
        self.posbuf_used = self.posbuf.numel()
        self.plen = _grown(torch.bincount(group, minlength=keys.numel()), capacity)
        self.pstart = torch.zeros(capacity, dtype=torch.int64, device=dev)
        if keys.numel():
            self.pstart[1:keys.numel()] = torch.cumsum(self.plen[:keys.numel() - 1], 0)
        self.rescan: set[int] = set()  # pairs that gained windows after birth: found by a pslot scan
        self.marks = torch.zeros(n, dtype=torch.bool, device=dev)
        if self.score == "likelihood":
            self.freq = torch.from_numpy(self.freq).to(dev)
        self.picked: tuple[int, int, int] = (0, 0, 0)

    # -- choosing ---------------------------------------------------------------------------------
    def _usable(self) -> torch.Tensor:
        used = slice(0, self.num_pairs)
        return self.eligible[used] & (self.pcnt[used] >= self.floor)

    def _any_pair(self) -> bool:
        used = slice(0, self.num_pairs)
        return bool((self.eligible[used] & (self.pcnt[used] > 0)).any())

    def _stop(self) -> int:
        self.stats.stopped_by = "min_frequency" if self._any_pair() else "no pairs"
        return -1

    def _best(self) -> int:
        if self.num_pairs == 0:
            return self._stop()
        usable = self._usable()
        if self.score == "likelihood":
            return self._best_likelihood_on_device(usable)
        counts = torch.where(usable, self.pcnt[:self.num_pairs], -1)
        top = counts.max()
        keys = torch.where(counts == top, self.pkey[:self.num_pairs], torch.iinfo(torch.int64).max)
        slot = keys.argmin()
        picked = torch.stack((slot, top, self.pkey[slot], self.pstart[slot], self.plen[slot])).tolist()
        if picked[1] < self.floor:
            return self._stop()
        self.picked = tuple(picked[2:])
        return picked[0]

    def _best_likelihood_on_device(self, usable: torch.Tensor) -> int:
        """Highest count / (freq(left) * freq(right)); ties: the higher count, then the smaller pair."""
        cand = torch.nonzero(usable).flatten()
        if cand.numel() == 0:
            return self._stop()
        counts, keys = self.pcnt[cand], self.pkey[cand]
        score = counts / (self.freq[keys >> 32].double() * self.freq[keys & _LOW])
        close = torch.nonzero(score >= score.max() * (1 - 1e-9)).flatten()
        # float scores only shortlist; the exact rational order decides
        rows = torch.stack((counts[close], keys[close], self.freq[keys[close] >> 32],
                            self.freq[keys[close] & _LOW], cand[close]), 1).tolist()
        best = max((Fraction(c, fa * fb), c, -k, s) for c, k, fa, fb, s in rows)[3]
        self.picked = tuple(torch.stack((self.pkey[best], self.pstart[best], self.plen[best])).tolist())
        return best

    # -- one merge --------------------------------------------------------------------------------
    def _occurrences(self, slot: int) -> torch.Tensor:
        if slot in self.rescan:
            self.rescan.discard(slot)
            return torch.nonzero(self.pslot == slot).flatten()
        _, start, length = self.picked
        positions = self.posbuf[start:start + length].long()
        return positions[self.pslot[positions] == slot]

    def _merge(self, slot: int) -> tuple[str, str]:
        key = self.picked[0]
        a, b = key >> 32, key & _LOW
        left, right, z, fresh = self._merged_token(a, b)
        starts = self._occurrences(slot)
        if a == b:
            starts = self._without_overlaps(torch.sort(starts).values, slot)
        nxt, prv, pslot, marks = self.nxt, self.prv, self.pslot, self.marks
        q = nxt[starts].long()
        r = nxt[q].long()
        old_left = prv[starts].long()
        # the window left of an occurrence is the one right of the previous occurrence when they touch
        marks[q] = True
        touching = marks[old_left.clamp(min=0)]
        marks[q] = False
        lone_left = (old_left >= 0) & ~touching
        has_right = r >= 0
        # windows that disappear: (l, p) and (q, r); (p, q) is the merged pair, zeroed below
        gone = torch.cat((old_left[lone_left], q[has_right]))
        self.pcnt.index_add_(0, pslot[gone].long(), -self.word_counts[self.wid[gone]])
        self.pcnt[slot] = 0
        apply_merge(self.symbols, nxt, prv, starts.int(), z)
        pslot[q] = -1
        pslot[starts[~has_right]] = -1
        born = torch.cat((prv[starts[lone_left]].long(), starts[has_right]))
        self._count_new_windows(born, z, fresh)
        if self.score == "likelihood":
            moved = self.word_counts[self.wid[starts]].sum()
            self.freq[a] -= moved
            self.freq[b] -= moved
            self.freq[z] += moved
        return left, right

    def _without_overlaps(self, starts: torch.Tensor, slot: int) -> torch.Tensor:
        """For a pair ``(a, a)``: in each run of windows keep the 1st, 3rd, ... (left to right merging)."""
        before = self.prv[starts].long()
        chained = (before >= 0) & (self.pslot[before.clamp(min=0)] == slot)
        index = torch.arange(starts.numel(), device=starts.device)
        run_start = torch.cummax(torch.where(chained, 0, index), 0).values
        return starts[(index - run_start) % 2 == 0]

    def _count_new_windows(self, born: torch.Tensor, z: int, fresh: bool) -> None:
        """Give the windows starting at ``born`` their pair slots, counts and position-buffer run."""
        if born.numel() == 0:
            return
        dev = self.device
        keys = (self.symbols[born].long() << 32) | self.symbols[self.nxt[born].long()].long()
        keys, order = torch.sort(keys, stable=True)
        born = born[order]
        first = torch.ones(keys.numel(), dtype=torch.bool, device=dev)
        first[1:] = keys[1:] != keys[:-1]
        group = torch.cumsum(first, 0) - 1
        unique = keys[first]
        sums = torch.zeros(unique.numel(), dtype=torch.int64, device=dev)
        sums.index_add_(0, group, self.word_counts[self.wid[born]])
        sizes = torch.bincount(group, minlength=unique.numel())
        run_starts = torch.nonzero(first).flatten()
        slots = torch.empty(unique.numel(), dtype=torch.int64, device=dev)
        is_new = torch.ones(unique.numel(), dtype=torch.bool, device=dev)
        if not fresh:
            # the merged token existed, so some of its pairs may too: look them up
            used = self.pkey[:self.num_pairs]
            mine = torch.nonzero(((used >> 32) == z) | ((used & _LOW) == z)).flatten()
            if mine.numel():
                known, order = torch.sort(used[mine])
                at = torch.searchsorted(known, unique).clamp(max=mine.numel() - 1)
                found = known[at] == unique
                slots[found] = mine[order[at[found]]]
                is_new = ~found
                self.pcnt.index_add_(0, slots[found], sums[found])
                self.rescan.update(slots[found].tolist())
        added = int(is_new.sum())
        begin = self.num_pairs
        self.num_pairs += added
        if self.num_pairs > self.pkey.numel():
            for name in ("pkey", "pcnt", "eligible", "pstart", "plen"):
                setattr(self, name, _grown(getattr(self, name), self.num_pairs))
        new_slots = torch.arange(begin, self.num_pairs, device=dev)
        slots[is_new] = new_slots
        self.pkey[new_slots] = unique[is_new]
        self.pcnt[new_slots] = sums[is_new]
        if self.posbuf_used + born.numel() > self.posbuf.numel():
            self.posbuf = _grown(self.posbuf, self.posbuf_used + born.numel())
        self.posbuf[self.posbuf_used:self.posbuf_used + born.numel()] = born.int()
        self.pstart[new_slots] = self.posbuf_used + run_starts[is_new]
        self.plen[new_slots] = sizes[is_new]
        self.posbuf_used += born.numel()
        if self.max_len is not None:
            lengths = self.tlen[unique >> 32] + self.tlen[unique & _LOW]
            self.eligible[slots] = lengths < self.max_len
        else:
            self.eligible[new_slots] = True
        self.pslot[born] = slots[group].int()
