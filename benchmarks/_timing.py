"""What the stage benchmarks share (``bench_models_numba.py``, ``unigram_stage.py``,
``train_stages.py``; run as scripts, so they import it as ``_timing``): best-of timing and the
English corpus's first lines."""

from __future__ import annotations

import time


def best_of(fn, repeats: int, warmup: bool = True, clock=time.perf_counter) -> float:
    """The fastest of ``repeats`` calls of ``fn`` in wall seconds (or ``clock``'s, e.g.
    ``time.thread_time``), after one untimed call (compile or load kernels, fill caches) unless
    ``warmup`` is False."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def first_lines(count: int) -> list[str]:
    """The first ``count`` non-blank lines of the 20 MB English corpus, without their newlines."""
    from gputok import assets

    lines = []
    if count <= 0:
        return lines
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) == count:
                    break
    return lines
