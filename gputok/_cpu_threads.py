"""A large CPU batch is encoded as one chunk of texts per torch thread, the chunks in parallel.

Why: the CPU stages are numba kernels compiled with ``nogil`` (``gputok.kernels``), so chunks of
texts on ordinary Python threads run them side by side; no numba threading layer is used (it
breaks under fork or concurrent callers, see ``shared/NUMBA.md``). Stages still made of torch and
numpy ops gain too: few of those ops use more than one core, and each chunk's thread runs them
single-threaded. The pool is shared by concurrent callers and recreated in a forked child
(``os.register_at_fork``), so DataLoader workers get threads of their own. A chunk must be worth
a thread hand-off: ``MIN_CHUNK_CHARS`` (measured below).

Each worker thread sets its own torch thread count to 1 (a per-thread setting under OpenMP);
the caller's is restored after each map, as ``torch.set_num_threads`` also updates the default
that threads started later take.

How many threads (:func:`num_threads`): ``gputok.set_num_threads(n)`` (or ``--threads`` on the
command line) if given, else torch's count in the calling thread (``torch.get_num_threads()``,
the cores by default). Those are chunk threads, which wait without spinning. The torch ops
between gputok's kernels run on one intra-op thread (:func:`gputok_threads`): torch's OpenMP
threads spin while they wait for each other, so on a machine whose cores are busy with other work
two of them made training's word counting 2-8x slower than one (measured: ``benchmarks/
threads_under_load.py``), and those ops are too small to gain from more.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import torch

# Characters a chunk needs to be worth a thread. With the stages as nogil numba kernels a chunk
# costs a thread hand-off (tens of microseconds) and no GIL ping-pong, so far smaller chunks pay.
# Measured on the 2-core machine under a load of ~12 (other processes), cl100k on English, warm
# cache, best of 15, one process (h4-glue branch: ingest, split and the model still torch ops):
# 1,024 lines (34k characters) took 188 ms in one chunk (torch's 2 OpenMP threads starved by the
# load) and 17 ms in two (each chunk's thread runs torch single-threaded); 4,096 lines: 85 ms at
# 2**19, 24 ms at 2**16, 11.6 ms at 2**14, 37 ms at 2**12; batches of 32 lines (1k characters)
# stay one chunk. With every BERT stage a kernel (2026-11-26), a chunk of 8k characters is ~0.25 ms
# of encoding against ~25 us for a hand-off (a no-op map of two parts: 55 us of CPU with both
# hand-offs), so 2**13: at 2**14, 46% of the bench's batches of 1,024 lines (under 32k characters)
# ran on one thread.
MIN_CHUNK_CHARS = 1 << 13
# What the calling thread runs besides its chunk (the call's Python glue on either side of the
# chunks: checks, cuts, output allocation), as characters of encoding (at most half a chunk's
# share) that its chunk counts besides its texts. Measured at batch 1,024 of English on 2 threads (thread CPU
# time over 2-4 MB, the machine shared): with equal chunks the caller took 25-40% more CPU than the
# worker (Mistral 0.25 s against 0.19-0.20, Unigram 0.20 against 0.15-0.17, BERT 0.11-0.12 against
# 0.07-0.09), and the worker waited for it at every call; at 4096, Mistral's 0.22-0.26 against
# 0.22. (Wall times on the shared machine moved more between runs than between settings.)
CALLER_CHARS = 4096
# The same for a batch encoded in parts (part_bounds), whose caller runs no glue while the parts
# run: negative, a longer part, by the time a worker takes to start (~60 us at 1,024 English lines
# on 2 threads, against ~400 us for each part: measured, the machine shared).
PART_CALLER_CHARS = -1024
# Texts whose lengths place the cuts between chunks: all of a batch up to twice this, else every
# (batch // SAMPLED_TEXTS)-th (chunks balanced to within a few texts' characters on real lines).
SAMPLED_TEXTS = 4096

T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()
_local = threading.local()
_threads: int | None = None  # gputok.set_num_threads


def set_num_threads(threads: int | None) -> None:
    """The threads gputok uses on the CPU (None: torch's count in the calling thread, the default)."""
    global _threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads={threads!r}; pass a positive int, or None for torch's thread count")
    _threads = threads


def num_threads() -> int:
    """The threads gputok uses now: :func:`set_num_threads`'s, else the calling thread's torch
    count (taken before :func:`gputok_threads` set it to one)."""
    if _threads is not None:
        return _threads
    return getattr(_local, "caller_threads", None) or torch.get_num_threads()


class _GputokThreads:
    """:func:`gputok_threads`'s context manager (a class: a generator-based one cost ~1 us of a
    batch-1 call)."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        if getattr(_local, "caller_threads", None) is not None:  # nested: already set
            self.before = None
            return
        self.before = before = torch.get_num_threads()
        _local.caller_threads = before
        if before != 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc_info) -> None:
        before = self.before
        if before is not None:
            _local.caller_threads = None
            if before != 1:
                torch.set_num_threads(before)


def gputok_threads() -> contextlib.AbstractContextManager[None]:
    """Run gputok's work: torch ops on one intra-op thread (see the module docstring), the
    caller's count restored after; :func:`num_threads` still reads the caller's."""
    return _GputokThreads()


def with_gputok_threads(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run under :func:`gputok_threads` (a decorator for gputok's entry points)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with gputok_threads():
            return fn(*args, **kwargs)

    return run


def chunks(texts: Sequence[str]) -> list[Sequence[str]] | None:
    """``texts`` cut into consecutive chunks of about equal characters (see ``SAMPLED_TEXTS``; the
    first, the caller's, counts ``CALLER_CHARS`` more), one per thread of :func:`num_threads`;
    None when one chunk is best (one thread, a small batch, or the caller is a chunk's worker
    already)."""
    threads = num_threads()
    if threads < 2 or getattr(_local, "worker", False) or len(texts) < 2:
        return None
    # The lengths of every step-th text stand for their runs of texts: a length costs ~40 ns of
    # Python, with the GIL held while the chunk threads wait (2.6 ms of a batch of 65,536 lines)
    step = max(1, len(texts) // SAMPLED_TEXTS)
    sample = texts[::step] if step > 1 else texts
    ends = np.cumsum(np.fromiter(map(len, sample), dtype=np.int64, count=len(sample)))
    bounds = _bounds(ends, step, len(texts), threads, CALLER_CHARS)
    return None if bounds is None else [texts[a:b] for a, b in zip(bounds, bounds[1:])]


def part_bounds(ends: np.ndarray) -> list[int] | None:
    """:func:`chunks`' cuts of texts whose running lengths are ``ends`` (every text's) as text
    indices, the first 0 and the last ``ends.size``, where the caller runs no glue while the parts
    run (the texts were encoded before, the outputs are made after: ``Tokenizer._cells_in_parts``;
    see ``PART_CALLER_CHARS``); None when one part is best."""
    threads = part_threads(ends.size)
    return None if threads < 2 else _bounds(ends, 1, ends.size, threads, PART_CALLER_CHARS)


def part_threads(texts: int) -> int:
    """The threads :func:`part_bounds` cuts a batch of ``texts`` texts for; 1 where it gives one
    part whatever their lengths (``tokenizer._joined_part_starts`` cuts for this count)."""
    threads = num_threads()
    return 1 if threads < 2 or getattr(_local, "worker", False) or texts < 2 else threads


def _bounds(ends: np.ndarray, step: int, count: int, threads: int, caller_chars: int) -> list[int] | None:
    """Cuts of ``count`` texts into one part per thread of about equal characters, the first
    (the caller's) ``caller_chars`` shorter; ``ends``: the running characters of every
    ``step``-th text. None when one part is best."""
    total = int(ends[-1])
    parts = min(threads, count, total * step // MIN_CHUNK_CHARS)
    if parts < 2:
        return None
    # The caller's part (the first, see map_chunks) is cut shorter by what the caller also runs
    # alone: the call's Python glue, as caller_chars characters of encoding.
    caller = min(caller_chars / step, total / (2 * parts))  # in the sample's units, at most half a share
    targets = np.maximum((total + caller) * np.arange(1, parts) / parts - caller, 0)
    cuts = (np.searchsorted(ends, targets, side="left") + 1) * step
    bounds = [0, *sorted(set(int(c) for c in cuts if 0 < c < count)), count]
    if len(bounds) < 3:  # one text holds nearly all the characters
        return None
    return bounds


def _as_worker(fn: Callable[[Sequence[str]], T], part: Sequence[str]) -> T:
    if not getattr(_local, "worker", False):
        _local.worker = True
        torch.set_num_threads(1)
    return fn(part)


def _in_caller(fn: Callable[[Sequence[str]], T], part: Sequence[str]) -> T:
    """``fn(part)`` in the calling thread as a worker runs it (no nested chunks, torch on one
    thread); the caller's flag is restored after (its torch count by :func:`map_chunks`)."""
    was_worker = getattr(_local, "worker", False)
    _local.worker = True
    torch.set_num_threads(1)
    try:
        return fn(part)
    finally:
        _local.worker = was_worker


def map_chunks(fn: Callable[[Sequence[str]], T], parts: list[Sequence[str]]) -> list[T]:
    """``[fn(part) for part in parts]``, run in parallel: the first part in the calling thread,
    the others on a shared pool of worker threads (the caller would only wait for them: a hand-off
    saved, ~25 us of a call's CPU on the 2-core machine); a part no worker has started by the time
    the caller is done runs in the caller next (Mistral at batch 1,024 on the shared 2-core
    machine: the same CPU, best wall 0.35-0.47 s against 0.41-0.56 s, interleaved)."""
    global _pool, _pool_size
    threads = torch.get_num_threads()  # the caller's, restored below
    others = len(parts) - 1
    with _pool_lock:
        if _pool is None or _pool_size < others:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = max(others, num_threads() - 1, 1)
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="gputok")
        pool = _pool
    try:
        pending = [pool.submit(_as_worker, fn, part) for part in parts[1:]]
        first = _in_caller(fn, parts[0])
        # A worker still asleep (the cores busy with other processes, or the pool's workers
        # with other callers' parts) would only start its part later than the caller can.
        return [first, *(_in_caller(fn, part) if future.cancel() else future.result()
                         for future, part in zip(pending, parts[1:]))]
    finally:
        torch.set_num_threads(threads)


def _after_fork() -> None:  # a forked child (DataLoader worker) has no pool threads: start anew
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
