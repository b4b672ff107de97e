"""Compile and start-up time per family: each family in a fresh process, first with an empty numba
cache (cold: every kernel it needs compiles), then again with that cache filled (warm). Prints a
table and writes JSON (issue 17: cold compile under 30 s in all; a warm process at its first
batch in under 1 s).

    python benchmarks/cold_start.py [--json bench-results/cold_start.json]
"""
from __future__ import annotations

import argparse
import json
import os
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
tok = make_tokenizer(sys.argv[1])
loaded = time.perf_counter()
tok(["Hello world, this is a first batch.", "中文 and é"], padding=True)
print(loaded - start, time.perf_counter() - loaded)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="bench-results/cold_start.json")
    args = parser.parse_args()
    env = dict(os.environ, NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="gputok-numba-"))
    rows = []
    print(f"{'phase':5s} {'family':8s} {'process s':>9s} {'import+load s':>13s} {'first call s':>12s}")
    for phase in ("cold", "warm"):
        for family in FAMILIES:
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", CHILD, family], env=env, capture_output=True, text=True,
                                  check=True)
            process = time.perf_counter() - start
            load, first = map(float, done.stdout.split())
            rows.append(dict(phase=phase, family=family, process_s=process, import_load_s=load, first_call_s=first))
            print(f"{phase:5s} {family:8s} {process:9.2f} {load:13.2f} {first:12.2f}", flush=True)
    cold = sum(r["first_call_s"] for r in rows if r["phase"] == "cold")
    print(f"cold first calls, all families: {cold:.1f} s")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(rows=rows, cold_first_calls_s=cold), indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
