"""CPU time per call of BERT's padded ``tok(batch)`` against huggingface ``BertWordPieceTokenizer.encode_batch``.

Why: on a machine shared with other work, wall time measures the neighbours; the CPU time a process
spends per call (all its threads, user and system) does not, or much less. Each engine runs in its
own process (as ``gputok bench``), the engines taking turns ``--rounds`` times, each round the best
of ``--repeats`` passes over the batches; the table gives the best per engine, and gputok's ratio
(huggingface's time over gputok's: above 1 is faster). Counting the tokens is timed as ``gputok
bench`` times it. CPU time is not wall time: an engine whose threads sit idle waiting for each
other shows it only in the wall column, which is given too.

    python benchmarks/bert_call_cpu.py --batch-sizes 1 1024 65536 --threads 2 --json bert_call_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _worker(engine: str, batch_sizes: list[int], lines_per_size: dict[int, int], repeats: int, threads: int) -> dict:
    import numpy as np
    import torch

    from gputok import assets, bench

    torch.set_num_threads(threads)
    lines, _ = bench._load_lines(None, None)
    if engine == "huggingface":
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer(str(assets.fetch("bert-vocab")), lowercase=True)

        def run(batch):
            return sum(len(e.ids) for e in hf.encode_batch(batch))
    else:
        tok = bench.make_tokenizer("bert")

        def run(batch):
            out = tok(batch, device="cpu", add_special_tokens=True, padding=True)
            return int(np.count_nonzero(out["attention_mask"].numpy()))
    results = {}
    for size in batch_sizes:
        count = lines_per_size.get(size, 2 * size)
        batches = [lines[i:i + size] for i in range(0, min(count, len(lines)), size)]
        run(batches[0])
        best_cpu = best_wall = float("inf")
        for _ in range(repeats):
            before = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            for batch in batches:
                run(batch)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            best_cpu, best_wall = min(best_cpu, cpu / len(batches)), min(best_wall, wall / len(batches))
        results[size] = {"cpu_s": best_cpu, "wall_s": best_wall, "calls": len(batches)}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 1024, 65536])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    lines_per_size = {1: 3000, 32: 32 * 200, 1024: 40 * 1024}
    if args.worker:
        print(json.dumps(_worker(args.worker, args.batch_sizes, lines_per_size, args.repeats, args.threads)))
        return 0
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), TOKENIZERS_PARALLELISM="true",
               OMP_NUM_THREADS=str(args.threads))
    best: dict[str, dict[int, dict]] = {}
    for _ in range(args.rounds):
        for engine in ("gputok", "huggingface"):
            out = subprocess.run([sys.executable, __file__, "--worker", engine, "--threads", str(args.threads),
                                  "--repeats", str(args.repeats), "--batch-sizes", *map(str, args.batch_sizes)],
                                 env=env, check=True, capture_output=True, text=True).stdout
            for size, row in json.loads(out.splitlines()[-1]).items():
                kept = best.setdefault(engine, {}).setdefault(int(size), row)
                kept["cpu_s"], kept["wall_s"] = min(kept["cpu_s"], row["cpu_s"]), min(kept["wall_s"], row["wall_s"])
    load = os.getloadavg()[0]
    print(f"BERT padded tok(batch) vs huggingface encode_batch, {args.threads} threads, best of {args.rounds} rounds x "
          f"{args.repeats} passes; load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'batch':>7} {'gputok cpu':>12} {'hf cpu':>12} {'cpu ratio':>10} {'gputok wall':>12} {'hf wall':>12} "
          f"{'wall ratio':>10}")
    rows = []
    for size in args.batch_sizes:
        g, h = best["gputok"][size], best["huggingface"][size]
        rows.append(dict(batch_size=size, gputok=g, huggingface=h, cpu_ratio=h["cpu_s"] / g["cpu_s"],
                         wall_ratio=h["wall_s"] / g["wall_s"]))
        print(f"{size:>7} {g['cpu_s'] * 1e3:>10.3f}ms {h['cpu_s'] * 1e3:>10.3f}ms {rows[-1]['cpu_ratio']:>9.2f}x "
              f"{g['wall_s'] * 1e3:>10.3f}ms {h['wall_s'] * 1e3:>10.3f}ms {rows[-1]['wall_ratio']:>9.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "load_average": load, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
