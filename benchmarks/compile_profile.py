"""Where a cold compile spends its time: each kernel's own compile (its callees' compiles left
out), split into numba's stages (typing, lowering with LLVM's per-function passes, the module
optimiser, machine code), for the first padded call of one family in this process with an empty
numba cache. Prints the kernels by their own CPU time and the totals per stage; ``--json`` writes
them. Issue 17's cold-compile target is the sum over the four families (``cold_start.py``).

    python benchmarks/compile_profile.py cl100k [--top 30] [--json out.json]

The numba cache is a new empty folder unless ``NUMBA_CACHE_DIR`` is set (then whatever it holds
loads instead of compiling: run the families one after the other on one folder to see what each
adds, as ``cold_start.py`` does). Times are process CPU time (a shared machine inflates them less
than wall time) and wall time; ``n`` counts a kernel's compiles, ``full+link-only`` where both.
The first compile of a process also pays numba's compiler set-up (``other``). With
``COMPILE_PROFILE_LABELS=1`` it also prints the costliest (kernel, numba pass) pairs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict

if not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="gputok-numba-")

import numba.core.event as numba_event
from numba.core import codegen

STAGES = ("typing", "lowering", "function passes", "module passes", "machine code", "other")
# numba pass names -> our stage (LLVM's per-function passes, which lowering runs, are timed apart)
_PASS_STAGE = {"nopython_type_inference": "typing", "native_lowering": "lowering", "link_only_lowering": "lowering"}


class _Profile:
    """Exclusive (self) CPU and wall time per compiled kernel and stage, and CPU time per label
    (numba's pass name, or the stage outside passes)."""

    def __init__(self):
        self.stack = []  # [(kernel, stage, label)] innermost last
        self.marks = []  # (cpu, wall) at which the innermost frame last resumed
        self.own = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
        self.labels = defaultdict(float)
        self.kernel_labels = defaultdict(float)
        self.count = defaultdict(int)

    def _charge(self):
        if self.stack:
            cpu, wall = time.process_time(), time.perf_counter()
            name, stage, label = self.stack[-1]
            cell = self.own[name][stage]
            cell[0] += cpu - self.marks[-1][0]
            cell[1] += wall - self.marks[-1][1]
            self.labels[label] += cpu - self.marks[-1][0]
            self.kernel_labels[name, label] += cpu - self.marks[-1][0]

    def push(self, name, stage, label=None):
        self._charge()
        self.stack.append((name, stage, label or stage))
        self.marks.append((time.process_time(), time.perf_counter()))

    def pop(self):
        self._charge()
        self.stack.pop()
        self.marks.pop()
        if self.marks:
            self.marks[-1] = (time.process_time(), time.perf_counter())

    def kernel(self):
        return self.stack[-1][0] if self.stack else "(outside a compile)"


PROFILE = _Profile()


class _Compiles(numba_event.Listener):
    def on_start(self, event):
        dispatcher = event.data["dispatcher"]
        name = f"{dispatcher.py_func.__module__.rsplit('.', 1)[-1]}.{dispatcher.py_func.__qualname__}"
        link_only = type(dispatcher).__name__ == "_KernelDispatcher" and _link_only()
        PROFILE.count[name + (" [link-only]" if link_only else "")] += 1
        PROFILE.push(name, "other")

    def on_end(self, event):
        PROFILE.pop()


def _link_only() -> bool:
    from gputok.kernels import _numba

    return bool(getattr(_numba._compiling, "link_only", False))


class _Passes(numba_event.Listener):
    def on_start(self, event):
        name = event.data["name"].split(" ", 1)[0]
        PROFILE.push(PROFILE.kernel(), _PASS_STAGE.get(name, "other"), name)

    def on_end(self, event):
        PROFILE.pop()


def _timed(cls, method, stage, label=None):
    original = getattr(cls, method)

    def wrapper(self, *args, **kwargs):
        PROFILE.push(PROFILE.kernel(), stage, label)
        try:
            return original(self, *args, **kwargs)
        finally:
            PROFILE.pop()

    setattr(cls, method, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=("bert", "cl100k", "unigram", "mistral", "gpt2"))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    from gputok.bench import make_tokenizer
    from gputok.kernels import _numba

    _timed(codegen.CPUCodeLibrary, "_optimize_functions", "function passes")
    _timed(_numba._LinkOnlyLibrary, "_optimize_functions", "function passes")
    _timed(codegen.CPUCodeLibrary, "_optimize_final_module", "module passes")
    _timed(codegen.JITCodeLibrary, "_finalize_specific", "machine code")
    _timed(_numba._KernelCache, "save_overload", "other", "cache save")
    numba_event.register("numba:compile", _Compiles())
    numba_event.register("numba:run_pass", _Passes())
    tok = make_tokenizer(args.family)
    cpu, wall = time.process_time(), time.perf_counter()
    tok(["Hello world, this is a first batch.", "中文 and é"], padding=True)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rows = sorted(((sum(c[0] for c in stages.values()), sum(c[1] for c in stages.values()), name, stages)
                   for name, stages in PROFILE.own.items()), reverse=True)
    print(f"{args.family}: first call {wall:.2f} s wall, {cpu:.2f} s CPU; {len(rows)} kernels compiled, "
          f"{sum(r[0] for r in rows):.2f} s CPU inside compiles")
    print(f"{'own cpu':>7s} {'wall':>6s} " + " ".join(f"{s[:9]:>9s}" for s in STAGES) + "  n  kernel")
    for own_cpu, own_wall, name, stages in rows[:args.top]:
        times = " ".join(f"{stages[s][0]:9.2f}" if s in stages else f"{'':9s}" for s in STAGES)
        counts = "+".join(str(PROFILE.count[key]) for key in (name, name + " [link-only]") if PROFILE.count[key])
        print(f"{own_cpu:7.2f} {own_wall:6.2f} {times} {counts:>3s} {name}")
    totals = {s: sum(stages[s][0] for stages in PROFILE.own.values() if s in stages) for s in STAGES}
    print("stages (CPU s): " + ", ".join(f"{s} {t:.2f}" for s, t in totals.items()))
    labels = sorted(PROFILE.labels.items(), key=lambda item: -item[1])
    print("by numba pass (CPU s): " + ", ".join(f"{label} {t:.2f}" for label, t in labels[:16]))
    if os.environ.get("COMPILE_PROFILE_LABELS"):
        for (name, label), t in sorted(PROFILE.kernel_labels.items(), key=lambda item: -item[1])[:60]:
            print(f"{t:6.2f} {name} {label}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"family": args.family, "first_call_s": wall, "first_call_cpu_s": cpu, "stages_cpu_s": totals,
                       "kernels": {name: {s: c[0] for s, c in stages.items()} for _, _, name, stages in rows},
                       "compiles": dict(PROFILE.count)}, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
