"""Padded calls of large batches with their outputs in reused memory (``gputok._recycled``) and in
fresh memory, alternating in one process, as a training loop calls: each batch's tensors are
dropped when the next call returns.

    python benchmarks/padded_memory.py [--tokenizer bert] [--batch-size 65536] [--rounds 4]
                                       [--json bench-results/padded_memory.json]

Per call: wall ms, minor page faults and system CPU ms (the kernel's time, mostly page faults);
the ragged call (``padding=False``) of the same batches beside them, which has no large outputs.
Fresh memory is ``_recycled.FROM_BYTES`` raised past every output, which makes them numpy's own.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default="bert", choices=("bert", "cl100k", "unigram", "mistral"))
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default="bench-results/padded_memory.json")
    args = parser.parse_args(argv)

    from gputok import _recycled, bench

    torch.set_num_threads(args.threads)
    tok = bench.make_tokenizer(args.tokenizer)
    lines, _ = bench._load_lines(None, None)
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    special = bench.special_tokens(args.tokenizer)
    reuse_from = _recycled.FROM_BYTES

    def run(memory: str) -> tuple[float, float, float]:
        _recycled.FROM_BYTES = reuse_from if memory == "reused" else 1 << 62
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        out = None
        for batch in batches:
            # kept until the next call returns, as a loop that assigns each batch keeps it
            out = tok(batch, add_special_tokens=special, padding=memory != "ragged")  # noqa: F841
        seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
        calls = len(batches)
        return (seconds * 1e3 / calls, (after.ru_minflt - before.ru_minflt) / calls,
                (after.ru_stime - before.ru_stime) * 1e3 / calls)

    kinds = ("reused", "fresh", "ragged")
    for kind in kinds:  # warm-up: kernels loaded, word cache filled, the pool stocked
        run(kind)
    rows = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            rows[kind].append(run(kind))
    print(f"{args.tokenizer}, {len(batches)} calls of {args.batch_size} lines, {args.threads} threads, "
          f"{args.rounds} rounds (median; min-max wall)")
    print(f"{'outputs':<8} {'ms/call':>8} {'min-max':>13} {'faults/call':>11} {'sys ms/call':>11}")
    result = {}
    for kind in kinds:
        walls, faults, system = zip(*rows[kind])
        median = sorted(walls)[len(walls) // 2]
        result[kind] = {"ms_per_call": walls, "faults_per_call": faults, "system_ms_per_call": system}
        print(f"{kind:<8} {median:8.1f} {min(walls):6.1f}-{max(walls):<6.1f} {sorted(faults)[len(faults) // 2]:11.0f} "
              f"{sorted(system)[len(system) // 2]:11.1f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"tokenizer": args.tokenizer, "batch_size": args.batch_size,
                                           "threads": args.threads, "calls": len(batches), **result}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
