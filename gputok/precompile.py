"""Compile gputok's CPU kernels into the on-disk cache ahead of use: ``gputok compile``.

numba compiles a kernel the first time it is called with new argument types and keeps the machine
code under gputok's cache dir (``kernels/_numba.py``); a later process loads it in a fraction of a
second. The first process on a machine pays the compile instead: seconds per family at its first
call, and again at the first call of each other shape (ragged outputs, a batch large enough to be
cut into parts or chunks), each of which reaches kernels of its own.

``compile_kernels`` makes those first calls ahead of time (in a Docker build, or before the
DataLoader workers start, which would otherwise each compile the same kernels), one process per
tokenizer on up to ``jobs`` cores at once: numba compiles under a process-wide lock, so threads
would not overlap, and most of a tokenizer's kernels are its family's own, so a process per
tokenizer compiles little twice. Each job calls its tokenizer with ``WARM_BATCH_SIZES`` texts,
padded and not, with at least two gputok threads (the paths that cut a batch into parts need two),
on mixed-script text that reaches the Unicode paths too. Shapes it does not call (pairs, offsets,
truncation) compile at their first use, as before. Where there are at least two cores per
tokenizer, each tokenizer's batch sizes are split between two jobs (``SPLIT_BATCH_SIZES``: the
one-call kernels, and the parts and chunks paths), which compile the family's shared kernels
twice, on two cores at once: more CPU, less wall. cl100k on the 2-core machine, one process each
from an empty cache: all its sizes 28.9 s, the two halves 19.7 and 18.1 s.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

# The batch sizes each job encodes: one text, a small batch (one kernel call), one cut into a part
# per thread, and one cut into chunks whose padded rows are filled in ranges.
WARM_BATCH_SIZES = (1, 2, 1024, 40_000)
# Those sizes split between two jobs of one tokenizer, where the cores allow.
SPLIT_BATCH_SIZES = ((1, 2), (1024, 40_000))
# What the warm-up batches are made of: ASCII, accents, CJK, an emoji, a ligature and odd spaces.
WARM_TEXTS = ("Hello world, this is a first batch.", "中文 and é", "naïve café, 12,345.67 😀!",
              "  spaces\tand\u3000ideographic space  ", "ﬁne ½ ① Ünïcödé ÀÉÎ", "don't stop, it's 2024's",
              "日本語のテキストです。", "Привет, мир")
# ``gputok compile``'s default: ``gputok bench --tokenizer all``'s four, the longest to compile
# first (jobs take them in this order: the last to start are the shortest).
FAMILIES = ("cl100k", "unigram", "mistral", "bert")


@dataclass
class Compiled:
    """One tokenizer's warm-up: its wall and CPU seconds and how many kernels it compiled (the
    rest loaded from the cache), or why it failed (``error``; the other tokenizers go on)."""
    tokenizer: str
    seconds: float
    cpu_seconds: float
    kernels: int
    error: str | None = None


def warm_calls(tokenizer, device: str = "cpu", sizes: Sequence[int] | None = None) -> None:
    """Call ``tokenizer`` with every batch size of ``sizes`` (default ``WARM_BATCH_SIZES``), padded
    and not, on ``device`` (small batches for a GPU are encoded on the CPU, as in use)."""
    from . import _cpu_threads

    before = _cpu_threads._threads
    _cpu_threads.set_num_threads(max(2, _cpu_threads.num_threads()))
    try:
        for size in WARM_BATCH_SIZES if sizes is None else sizes:
            texts = [WARM_TEXTS[i % len(WARM_TEXTS)] for i in range(size)]
            for padding in (True, False):
                tokenizer(texts, padding=padding, device=device)
    finally:
        _cpu_threads.set_num_threads(before)


def load(name: str, pattern: str | None = None):
    """A tokenizer by ``gputok bench``'s name for it (``bench.ANCHORS``' keys) or from a file
    (``gputok encode``'s formats; ``pattern``: a .tiktoken file's split rule, where its name does
    not tell)."""
    from . import bench

    if name in bench.ANCHORS:
        return bench.make_tokenizer(name)
    from .cli import load_tokenizer

    return load_tokenizer(name, pattern=pattern)


@contextlib.contextmanager
def compiled_kernels() -> Iterator[list[Callable]]:
    """The Python function of every kernel numba compiles inside the block, in order (a list
    filled as they compile)."""
    from numba.core import event

    compiled: list[Callable] = []

    class Listener(event.Listener):
        def on_start(self, event_):
            compiled.append(event_.data["dispatcher"].py_func)

        def on_end(self, event_):
            pass

    with event.install_listener("numba:compile", Listener()):
        yield compiled


def _compile_one(job: tuple[str, str, str | None, tuple[int, ...] | None]) -> Compiled:
    """One job: load the tokenizer, then :func:`warm_calls` (of the job's batch sizes, None: all),
    counting numba's compiles."""
    name, device, pattern, sizes = job
    compiles: list[Callable] = []
    start, cpu = time.perf_counter(), time.process_time()
    error = None
    try:
        with compiled_kernels() as compiles:
            warm_calls(load(name, pattern), device, sizes)
    except SystemExit as e:  # load_tokenizer's message for a file it cannot read
        error = str(e)
    except Exception as e:  # reported; the other jobs go on
        error = f"{type(e).__name__}: {e}"
    return Compiled(name, time.perf_counter() - start, time.process_time() - cpu, len(compiles), error)


def prune_caches() -> tuple[int, int]:
    """Remove gputok's numba cache folders of other kernel sources (other versions or checkouts
    of gputok; each kernel change starts a new folder, ~80 MB once every family has compiled),
    keeping the one this process uses. Returns (folders removed, bytes freed). Raises ValueError
    where the cache is the user's ``NUMBA_CACHE_DIR``, whose folders gputok does not own."""
    import shutil
    from pathlib import Path

    from .kernels import _numba

    if _numba.OWN_CACHE_DIR is None:
        raise ValueError("NUMBA_CACHE_DIR is set: that cache is yours to prune")
    current = Path(_numba.OWN_CACHE_DIR)
    folders = [p for p in current.parent.iterdir() if p.is_dir() and p != current] if current.parent.is_dir() else []
    freed = 0
    for folder in folders:
        freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        shutil.rmtree(folder, ignore_errors=True)
    return len(folders), freed


def _start_method(device) -> str:
    """How ``compile_kernels`` starts its jobs' processes: forked where that is safe (Linux, a
    CPU compile, no other thread in this process, CUDA not initialised), so that each starts with
    this process's imports (torch's and gputok's: a spawned pair of jobs started compiling ~2.8 s
    later on the 2-core machine); else spawned, which imports them anew. A child forked beside
    other threads could inherit a lock one of them held, and CUDA does not run in a forked child
    of a process that initialised it."""
    import threading

    import torch

    if (sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
            and device.type == "cpu" and threading.active_count() == 1 and not torch.cuda.is_initialized()):
        return "fork"
    return "spawn"


def compile_kernels(tokenizers: Sequence[str] = FAMILIES, jobs: int | None = None, device: str = "cpu",
                    on_done: Callable[[Compiled], None] | None = None, pattern: str | None = None) -> list[Compiled]:
    """Compile the kernels each of ``tokenizers`` (``gputok bench``'s names or tokenizer files, each
    once) runs into the cache, up to ``jobs`` processes at once (forked or spawned:
    :func:`_start_method`; default: one per core this process may use; with two or more per
    tokenizer, each tokenizer's batch sizes are split between two jobs, see the module notes).
    With ``jobs=1`` they compile in this process, one after the other. ``on_done`` sees each
    tokenizer's result as it finishes (of a split tokenizer: the longer job's wall seconds, both
    jobs' CPU seconds and compiles, the first error); ``pattern``: the split rule of .tiktoken
    files whose names do not tell it. Returns the results in ``tokenizers``' order (a job whose
    process died reports it as its error). Spawned processes (where this one runs other threads)
    import the caller's main module: in a script, call this under ``if __name__ == "__main__":``."""
    import torch

    from . import bench

    if not tokenizers:
        raise ValueError("no tokenizers to compile")
    try:
        named = torch.device(device)
    except (RuntimeError, TypeError):  # not a device at all
        named = None
    if named is None or named.type != "cpu" and (named.type != "cuda" or not torch.cuda.is_available()
                                                 or (named.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"device={device!r}: pass 'cpu', or 'cuda' on a machine with a CUDA device")
    for name in tokenizers:
        if name not in bench.ANCHORS and not os.path.isfile(name):
            raise ValueError(f"{name!r} is neither a gputok bench tokenizer ({', '.join(bench.ANCHORS)}) nor a file")
    if isinstance(jobs, bool) or not (jobs is None or isinstance(jobs, int) and jobs >= 1):
        raise ValueError(f"jobs={jobs!r}; pass a positive int")
    names = list(dict.fromkeys(tokenizers))
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # each tokenizer's batch sizes, one job each (None: all of them)
    shares = SPLIT_BATCH_SIZES if jobs >= 2 * len(names) else (None,)
    work = [(name, str(device), pattern, sizes) for name in names for sizes in shares]
    done: dict[str, Compiled] = {}
    parts: dict[str, list[Compiled]] = {}

    def finished(result: Compiled) -> None:
        got = parts.setdefault(result.tokenizer, [])
        got.append(result)
        if len(got) < len(shares):
            return
        errors = [part.error for part in got if part.error is not None]
        done[result.tokenizer] = merged = Compiled(
            result.tokenizer, max(part.seconds for part in got), sum(part.cpu_seconds for part in got),
            sum(part.kernels for part in got), errors[0] if errors else None)
        if on_done is not None:
            on_done(merged)

    if jobs == 1:  # (one share per tokenizer: never split)
        for job in work:
            finished(_compile_one(job))
    else:
        context = multiprocessing.get_context(_start_method(named))
        with ProcessPoolExecutor(min(jobs, len(work)), mp_context=context) as pool:
            pending = {pool.submit(_compile_one, job): job[0] for job in work}
            for future in as_completed(pending):
                try:
                    finished(future.result())
                except BrokenProcessPool as e:  # a job's process died (killed for memory, a crash)
                    finished(Compiled(pending[future], 0.0, 0.0, 0, f"not compiled: a job's process died ({e})"))
    return [done[name] for name in tokenizers]
