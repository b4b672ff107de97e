"""Compile and start-up time per family: each family in a fresh process, first with an empty numba
cache (cold: every kernel it needs compiles), then again with that cache filled (warm). Prints a
table and writes JSON (issue 17: cold compile under 30 s in all; a warm process at its first
batch in under 1 s).

    python benchmarks/cold_start.py [--repeats 3] [--json bench-results/cold_start.json]

The cold families share one cache, in order, as one user of all four would: a kernel the first
family compiled (post-processing, say) loads from the cache for the next ones. A shared machine
makes wall times swing, so each child's CPU time is reported beside them: ``first cpu`` is the
process CPU time of the first call (all of it compilation when cold), ``process cpu`` the whole
child's (from ``getrusage(RUSAGE_CHILDREN)``). Warm rows are the best of ``--repeats`` fresh
processes (the wall columns from the fastest, each CPU column its least). ``to batch`` is the
time from the child's first line to its first encoded batch (imports, tokenizer load, first
call); ``- torch`` subtracts ``import torch`` alone, measured in fresh processes of the same run:
what gputok adds to a program that uses torch anyway. The same in CPU time, which a loaded
machine inflates less, closes the output: a warm child's process CPU minus that of a process that
imports torch alone. The children may write Python's bytecode (``__pycache__``, as an installed
package has it): under ``PYTHONDONTWRITEBYTECODE`` every warm child would compile gputok's
sources again.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAMILIES = ("bert", "cl100k", "unigram", "mistral")
# one fresh process: import, load the bench's tokenizer, then one padded call of two lines
CHILD = r"""
import sys, time
start = time.perf_counter()
from gputok.bench import make_tokenizer
imported = time.perf_counter()
tok = make_tokenizer(sys.argv[1])
loaded = time.perf_counter()
cpu = time.process_time()
tok(["Hello world, this is a first batch.", "中文 and é"], padding=True)
print(imported - start, loaded - imported, time.perf_counter() - loaded, time.process_time() - cpu)
"""
TORCH = "import time; start = time.perf_counter(); import torch; print(time.perf_counter() - start)"


def _child(code: str, args: list[str], env: dict) -> tuple[list[float], float, float]:
    """(numbers the child printed, its wall time, its CPU time) for one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return [float(x) for x in done.stdout.split()], wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per warm row and torch baseline")
    parser.add_argument("--json", default="bench-results/cold_start.json")
    parser.add_argument("--phases", default="cold,warm", help="cold, warm or both (warm alone: with --numba-cache)")
    parser.add_argument("--numba-cache", help="numba cache folder (default: a new empty one)")
    args = parser.parse_args()
    env = dict(os.environ, NUMBA_CACHE_DIR=args.numba_cache or tempfile.mkdtemp(prefix="gputok-numba-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    torch_runs = [_child(TORCH, [], env) for _ in range(args.repeats)]
    torch_import, torch_cpu = min(run[0][0] for run in torch_runs), min(run[2] for run in torch_runs)
    print(f"import torch alone: {torch_import:.2f} s, its process {torch_cpu:.2f} s CPU (best of {args.repeats} "
          f"fresh processes)")
    rows = []
    print(f"{'phase':5s} {'family':8s} {'process s':>9s} {'process cpu':>11s} {'import s':>8s} {'load s':>6s} "
          f"{'first call s':>12s} {'first cpu':>9s} {'to batch s':>10s} {'- torch':>7s}")
    for phase in args.phases.split(","):
        for family in FAMILIES:
            runs = [_child(CHILD, [family], env) for _ in range(1 if phase == "cold" else args.repeats)]
            (imported, load, first, _), process, _ = min(runs, key=lambda run: sum(run[0][:3]))
            first_cpu, process_cpu = min(run[0][3] for run in runs), min(run[2] for run in runs)
            to_batch = imported + load + first
            rows.append(dict(phase=phase, family=family, process_s=process, process_cpu_s=process_cpu,
                             import_s=imported, load_s=load, first_call_s=first, first_call_cpu_s=first_cpu,
                             to_first_batch_s=to_batch, beyond_torch_s=to_batch - torch_import))
            print(f"{phase:5s} {family:8s} {process:9.2f} {process_cpu:11.2f} {imported:8.2f} {load:6.2f} "
                  f"{first:12.2f} {first_cpu:9.2f} {to_batch:10.2f} {to_batch - torch_import:7.2f}", flush=True)
    cold = [r for r in rows if r["phase"] == "cold"]
    cold_wall, cold_cpu = sum(r["first_call_s"] for r in cold), sum(r["first_call_cpu_s"] for r in cold)
    if cold:
        print(f"cold first calls, all families: {cold_wall:.1f} s wall, {cold_cpu:.1f} s CPU")
    for r in rows:
        if r["phase"] == "warm":
            print(f"warm {r['family']}: process CPU beyond a process that imports torch alone: "
                  f"{r['process_cpu_s'] - torch_cpu:.2f} s")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(rows=rows, import_torch_s=torch_import, import_torch_process_cpu_s=torch_cpu,
                                               cold_first_calls_s=cold_wall,
                                               cold_first_calls_cpu_s=cold_cpu), indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
