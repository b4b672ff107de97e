"""gputok's default CPU threads against explicit counts, on a machine whose cores are busy.

Starts ``--busy`` processes that spin (``while True: pass``; default 2, one per core here), then
times, each in a fresh process and the configurations interleaved round by round: a
``Collate`` call at batch 32 (BERT tokenizer.json, ``max_length=128``, 200 batches of the
English corpus, ms per batch) and the word counting of ``gputok.train`` (byte-level BPE, vocab
8,000, on ``--megabytes`` of English; seconds). Configurations: gputok's default, and
``gputok.set_num_threads(n)`` for each ``--counts``. Prints the best round of each and the
default's ratio to the best explicit count; writes JSON.

    python benchmarks/threads_under_load.py [--busy 2] [--rounds 3] [--megabytes 5] [--counts 1 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def _worker(task: str, threads: int | None, megabytes: int) -> float:
    import gputok
    from gputok import assets

    if threads is not None:
        gputok.set_num_threads(threads)
    if task == "collate":
        sys.path.insert(0, str(Path(__file__).parent))
        from _timing import first_lines

        tok = gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
        lines = first_lines(32 * 200)
        collate = gputok.data.Collate(tok, max_length=128)
        collate(lines[:32])  # kernels loaded
        start = time.perf_counter()
        for i in range(0, len(lines), 32):
            collate(lines[i:i + 32])
        return (time.perf_counter() - start) / 200 * 1000
    from gputok.training import train_with_summary

    _, summary = train_with_summary([assets.english_corpus(megabytes)], preset="byte-level-bpe", vocab_size=8000,
                                    progress=False)
    return summary.seconds["counting"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="spinning processes started beside the runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=5, choices=[1, 5, 20])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", default="bench-results/threads_under_load.json")
    parser.add_argument("--worker", choices=["collate", "count"], help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(_worker(args.worker, args.threads, args.megabytes))
        return 0

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    configs = [None, *args.counts]
    results: dict[str, dict[str, list[float]]] = {"collate": {}, "count": {}}
    try:
        for round_ in range(args.rounds):
            order = configs[round_ % len(configs):] + configs[:round_ % len(configs)]  # each goes first in turn
            for task in results:
                for threads in order:
                    command = [sys.executable, __file__, "--worker", task, "--megabytes", str(args.megabytes)]
                    if threads is not None:
                        command += ["--threads", str(threads)]
                    value = float(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])
                    results[task].setdefault("default" if threads is None else str(threads), []).append(value)
    finally:
        for process in busy:
            process.kill()
    print(f"{args.busy} spinning processes beside each run (shared machine: other work may run too); "
          f"best of {args.rounds} interleaved rounds, each in a fresh process")
    names = ["default", *map(str, args.counts)]
    print("| task | " + " | ".join(f"threads {c}" for c in names) + " | default / best explicit |")
    print("|---|" + "---:|" * (len(configs) + 1))
    summary = {}
    for task, unit in (("collate", "ms/batch of 32"), ("count", f"s counting {args.megabytes} MB")):
        best = {name: min(results[task][name]) for name in names}
        ratio = best["default"] / min(v for k, v in best.items() if k != "default")
        summary[task] = {"best": best, "all": results[task], "default_over_best_explicit": ratio, "unit": unit}
        print(f"| {task} ({unit}) | " + " | ".join(f"{v:.2f}" for v in best.values()) + f" | {ratio:.2f}x |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"busy": args.busy, "rounds": args.rounds, "results": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
