"""The whole-pipeline Unigram kernel against the stage path it replaced and sentencepiece, in one process.

    python benchmarks/unigram_whole.py [--batch-sizes 1 32 1024 65536] [--threads 2] [--repeats 3] [--json out.json]

``gputok bench --tokenizer unigram`` times each engine in its own process, one after the other: on
a shared machine the load changes between them. Here the three engines run interleaved in one
process, each pass once per engine in turn, and the fastest of ``--repeats`` passes counts: gputok
(padded tensors out, as ``gputok bench``; a fresh word cache each pass), the same tokenizer with
the whole kernel turned off (the stage path: a kernel and its Python glue per stage), and
sentencepiece's ``encode(lines, num_threads=N)``. The tokenizer and text are ``gputok bench``'s
(the tests' 8k model; the 20 MB English corpus's first lines: 3,000 at batch 1, 32,000 at batch
32, 131,072 at larger batches). Prints MB/s, each ratio to sentencepiece and the process CPU
seconds per MB (wall time on a loaded machine counts other processes' time; CPU time less so).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

LINES = {1: 3_000, 32: 32_000}
DEFAULT_LINES = 131_072


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 1024, 65536])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default="bench-results/unigram_whole.json")
    args = parser.parse_args()

    import sentencepiece as spm
    import torch

    from gputok import bench
    from gputok._atomic import write_atomic
    from gputok.word_cache import WordCache

    torch.set_num_threads(args.threads)
    tok = bench.make_tokenizer("unigram")
    sp = spm.SentencePieceProcessor(model_file=str(bench.model_path("unigram")))
    corpus, _ = bench._load_lines(None, None)
    stages = (tok.normalizer, tok.pre_tokenizer, tok.model)

    def gputok_run(whole: bool):
        def run(batches):
            tok.word_cache = WordCache()  # every pass starts cold
            tok._whole_kernel = (stages, tok._whole_pipeline_kernel if whole else None)
            for batch in batches:
                tok(batch, padding=True)
            tok.__dict__.pop("_whole_kernel")
        return run

    engines = {"gputok": gputok_run(True), "gputok-stages": gputok_run(False),
               "sentencepiece": lambda batches: [sp.encode(b, num_threads=args.threads) for b in batches]}
    rows = []
    for batch_size in args.batch_sizes:
        lines = corpus[:LINES.get(batch_size, DEFAULT_LINES)]
        megabytes = sum(len(line.encode()) for line in lines) / 1e6
        batches = [lines[i:i + batch_size] for i in range(0, len(lines), batch_size)]
        wall = {name: [] for name in engines}
        cpu = {name: [] for name in engines}
        for name, run in engines.items():  # warm up: kernels loaded, tables built
            run(batches[:2])
        for _ in range(args.repeats):
            for name, run in engines.items():
                start_wall, start_cpu = time.perf_counter(), time.process_time()
                run(batches)
                wall[name].append(time.perf_counter() - start_wall)
                cpu[name].append(time.process_time() - start_cpu)
        anchor = min(wall["sentencepiece"])
        for name in engines:
            rows.append(dict(batch_size=batch_size, engine=name, lines=len(lines), megabytes=megabytes,
                             seconds=min(wall[name]), mb_per_s=megabytes / min(wall[name]),
                             ratio_to_sentencepiece=anchor / min(wall[name]),
                             cpu_seconds_per_mb=min(cpu[name]) / megabytes))
    print(f"unigram (8k), {args.threads} threads, fastest of {args.repeats} interleaved passes")
    print(f"{'engine':15} {'batch':>6} {'MB':>6} {'MB/s':>7} {'vs sp':>6} {'CPU s/MB':>9}")
    for r in rows:
        print(f"{r['engine']:15} {r['batch_size']:>6} {r['megabytes']:6.2f} {r['mb_per_s']:7.2f} "
              f"{r['ratio_to_sentencepiece']:5.2f}x {r['cpu_seconds_per_mb']:9.3f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    write_atomic({args.json: json.dumps({"threads": args.threads, "repeats": args.repeats, "rows": rows}, indent=2)})
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
