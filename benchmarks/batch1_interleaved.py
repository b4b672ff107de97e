"""gputok against huggingface at batch 1 (or any batch size), as ``gputok bench`` times them, but in one
process and interleaved finely, for a machine shared with other work.

Both engines are ``gputok.bench``'s own runners (``_runner``: gputok ``tok(batch)`` to padded tensors,
its word cache emptied at each pass; huggingface ``encode_batch_fast`` on the tokenizer.json gputok
writes, loaded afresh at each pass), on the same lines (``gputok bench``'s prefix for the batch
size). Each pass walks the lines in segments of ``--segment`` calls and times each segment on one
engine then the other (the order alternating), so a burst of load on the shared cores falls on both;
an engine's pass time is the sum of its segments. Prints, per pass, each engine's MB/s (wall) and
the ratio, then the best pass of each and the median of the per-pass ratios, in wall time and in
process CPU time (the fairer figure on a loaded machine: wall time there includes waiting for a
core, and a thread hop to a worker waits longer); ``--json`` writes them.

    python benchmarks/batch1_interleaved.py --passes 5
    python benchmarks/batch1_interleaved.py --tokenizer gpt2 --batch-size 32 --passes 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="cl100k", choices=["cl100k", "gpt2"])
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--segment", type=int, default=500, help="calls per timed segment (default 500)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    import torch

    from gputok import bench

    torch.set_num_threads(args.threads)
    lines, nbytes = bench._load_lines(None, bench._PREFIX_BYTES.get(args.batch_size))
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    tmp = tempfile.TemporaryDirectory()  # huggingface's runner reloads the file at each pass
    hf_json = str(Path(tmp.name) / "tokenizer.json")
    bench.make_tokenizer(args.tokenizer).save(hf_json)
    runners = {"gputok": bench._runner("gputok", args.tokenizer, args.threads, "cpu"),
               "huggingface": bench._runner("huggingface", args.tokenizer, args.threads, "cpu", hf_json)}
    for run in runners.values():  # compile, load, warm
        run(None)
        for batch in batches[:2000]:
            run(batch)
    names = list(runners)
    passes = []
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    for p in range(args.passes):
        seconds = {(clock, name): 0.0 for clock in clocks for name in names}
        tokens = dict.fromkeys(names, 0)
        for run in runners.values():
            run(None)  # every pass cold, as gputok bench
        for s, at in enumerate(range(0, len(batches), args.segment)):
            segment = batches[at:at + args.segment]
            for name in (names if (s + p) % 2 == 0 else names[::-1]):
                run = runners[name]
                wall, cpu = time.perf_counter(), time.process_time()
                for batch in segment:
                    tokens[name] += run(batch)
                seconds["wall", name] += time.perf_counter() - wall
                seconds["cpu", name] += time.process_time() - cpu
        row = {f"{clock} {name}": nbytes / 1e6 / seconds[clock, name] for clock in clocks for name in names}
        for clock in clocks:
            row[f"{clock} ratio"] = row[f"{clock} gputok"] / row[f"{clock} huggingface"]
        row["tokens"] = tokens
        passes.append(row)
        print(f"pass {p}: " + ", ".join(f"{clock}: gputok {row[f'{clock} gputok']:.3f} MB/s, huggingface "
                                         f"{row[f'{clock} huggingface']:.3f} MB/s, ratio {row[f'{clock} ratio']:.3f}"
                                         for clock in clocks), flush=True)
    summary = dict(tokenizer=args.tokenizer, batch_size=args.batch_size, threads=args.threads, calls=len(batches),
                   megabytes=nbytes / 1e6, passes=passes)
    print(f"{args.tokenizer}, batch {args.batch_size}, {len(batches)} calls, {nbytes / 1e6:.2f} MB, "
          f"{args.threads} threads, {args.passes} passes:")
    for clock in clocks:
        best = {name: max(r[f"{clock} {name}"] for r in passes) for name in names}
        summary[clock] = dict(best_mb_per_s=best, best_ratio=best["gputok"] / best["huggingface"],
                              median_pass_ratio=statistics.median(r[f"{clock} ratio"] for r in passes))
        print(f"  {clock:4s} best pass gputok {best['gputok']:.3f} MB/s, huggingface {best['huggingface']:.3f} MB/s, "
              f"ratio of bests {summary[clock]['best_ratio']:.3f}x, median per-pass ratio "
              f"{summary[clock]['median_pass_ratio']:.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
