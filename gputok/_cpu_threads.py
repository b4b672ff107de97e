"""A large CPU batch is encoded as one chunk of texts per torch thread, the chunks in parallel.

Why: most of the encode pipeline is many small torch and numpy ops (gathers, cumsums, unique,
hash probes), and few of them use more than one core: torch splits an op across its threads
only above ~32k elements, and cumsum, sort-based unique and numpy's nonzero run on one. Chunks
in worker threads, each running its ops single-threaded, keep the cores busier. On the 2-core
CI machine (fastest of 3 passes, several processes each): Unigram on 5 MB of the parity corpus
~0.45 s per pass instead of ~0.65 s; cl100k on 150k lines of English in batches of 65,536,
cold word cache, ~0.41 s instead of ~0.53 s (both ways in one process, two runs).
That machine caps the gain: two processes encoding one half each took ~1.5x as long as one
alone. The ops release the GIL, but every op hands it over between the threads,
and on small chunks the hand-overs cost more than the second core brings (batches of 1,024
lines ran 2.5x slower split): hence ``MIN_CHUNK_CHARS``.

Each worker thread sets its own torch thread count to 1 (a per-thread setting under OpenMP);
the caller's is restored after each map, as ``torch.set_num_threads`` also updates the default
that threads started later take.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import torch

# Characters a chunk needs to be worth a thread (see the module notes), cl100k on English, cold
# cache, 2 threads: batches of 16,384 lines (~0.5 M characters) ran slower in two chunks than in
# one; batches of 32,768 lines (~1 M) ran ~5% faster, of 65,536 lines ~20-25% faster.
MIN_CHUNK_CHARS = 1 << 19

T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()
_local = threading.local()


def chunks(texts: Sequence[str]) -> list[Sequence[str]] | None:
    """``texts`` cut into consecutive chunks of about equal characters, one per torch thread of
    the calling thread; None when one chunk is best (one thread, a small batch, or the caller is
    a chunk's worker already)."""
    threads = torch.get_num_threads()
    if threads < 2 or getattr(_local, "worker", False) or len(texts) < 2:
        return None
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    total = int(ends[-1])
    parts = min(threads, len(texts), total // MIN_CHUNK_CHARS)
    if parts < 2:
        return None
    cuts = np.searchsorted(ends, total * np.arange(1, parts) / parts, side="left") + 1
    bounds = [0, *sorted(set(int(c) for c in cuts if 0 < c < len(texts))), len(texts)]
    if len(bounds) < 3:  # one text holds nearly all the characters
        return None
    return [texts[a:b] for a, b in zip(bounds, bounds[1:])]


def _as_worker(fn: Callable[[Sequence[str]], T], part: Sequence[str]) -> T:
    if not getattr(_local, "worker", False):
        _local.worker = True
        torch.set_num_threads(1)
    return fn(part)


def map_chunks(fn: Callable[[Sequence[str]], T], parts: list[Sequence[str]]) -> list[T]:
    """``[fn(part) for part in parts]``, run in parallel on a shared pool of worker threads."""
    global _pool, _pool_size
    threads = torch.get_num_threads()
    with _pool_lock:
        if _pool is None or _pool_size < len(parts):
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = max(len(parts), threads)
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="gputok")
        pool = _pool
    try:
        return list(pool.map(_as_worker, [fn] * len(parts), parts))
    finally:
        torch.set_num_threads(threads)


def _after_fork() -> None:  # a forked child (DataLoader worker) has no pool threads: start anew
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
