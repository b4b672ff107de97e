"""SentencePiece Unigram (the tests' 8k model) against sentencepiece, interleaved in one process.

    python benchmarks/unigram_interleaved.py [--batch-sizes 1024 65536] [--threads 2] [--repeats 3]
        [--megabytes 20] [--json out.json]

``gputok bench --tokenizer unigram`` times each engine in its own process, one after the other; on a
shared machine the load moves between them. Here gputok's padded call (as ``gputok bench`` makes
it: ``tok(batch, padding=True)`` and the mask's tokens counted, the word cache empty at the start
of each pass) and ``SentencePieceProcessor.encode(batch, num_threads=N)`` alternate pass by pass
over the bench's corpus (its first ``--megabytes`` of English lines), with gputok's ragged call
(``tok(batch)``: ids and row offsets, ``gputok bench``'s ``gputok-ragged``, what sentencepiece's
lists of ids hold) beside them, each engine's fastest of
``--repeats`` passes counting. Prints each engine's wall MB/s and process CPU seconds per MB, and
gputok's speed against sentencepiece by both: on a loaded machine the wall ratio moves with the
load, the CPU ratio much less (it ignores how well each engine keeps its threads busy).
"""

from __future__ import annotations

import argparse
import json
import time


def engines(threads: int) -> dict:
    """One pass over a list of batches per engine: gputok's padded call (its word cache emptied
    first, as ``gputok bench`` does) and sentencepiece's batch encode, both on ``threads``."""
    import numpy as np
    import sentencepiece as spm
    import torch

    from gputok import bench, set_num_threads
    from gputok.word_cache import WordCache

    torch.set_num_threads(threads)
    set_num_threads(threads)
    tok = bench.make_tokenizer("unigram")
    sp = spm.SentencePieceProcessor(model_file=str(bench.model_path("unigram")))

    def gputok_pass(batches):
        tok.word_cache = WordCache()
        for batch in batches:
            np.count_nonzero(tok(batch, padding=True)["attention_mask"].numpy())

    def gputok_ragged_pass(batches):  # the ids and row offsets, as gputok bench's gputok-ragged
        tok.word_cache = WordCache()
        for batch in batches:
            tok(batch)["input_ids"].numel()

    def sentencepiece_pass(batches):
        for batch in batches:
            sp.encode(batch, num_threads=threads)

    return {"gputok": gputok_pass, "gputok-ragged": gputok_ragged_pass, "sentencepiece": sentencepiece_pass}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, kind, default in (("--threads", int, 2), ("--repeats", int, 3), ("--megabytes", float, 20),
                                ("--json", str, None)):
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024, 65536])
    args = parser.parse_args()

    from gputok import bench

    runs = engines(args.threads)
    lines, nbytes = bench._load_lines(args.megabytes, None)
    megabytes = nbytes / 1e6
    rows = []
    for batch_size in args.batch_sizes:
        batches = [lines[i:i + batch_size] for i in range(0, len(lines), batch_size)]
        for run in runs.values():  # warm up: kernels loaded, tables built
            run(batches[:2])
        wall = {name: float("inf") for name in runs}
        cpu = {name: float("inf") for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                start_wall, start_cpu = time.perf_counter(), time.process_time()
                run(batches)
                wall[name] = min(wall[name], time.perf_counter() - start_wall)
                cpu[name] = min(cpu[name], time.process_time() - start_cpu)
        row = dict(batch_size=batch_size, lines=len(lines), megabytes=megabytes,
                   **{f"{name}_mb_per_s": megabytes / wall[name] for name in runs},
                   **{f"{name}_cpu_s_per_mb": cpu[name] / megabytes for name in runs},
                   wall_ratio=wall["sentencepiece"] / wall["gputok"], cpu_ratio=cpu["sentencepiece"] / cpu["gputok"],
                   ragged_wall_ratio=wall["sentencepiece"] / wall["gputok-ragged"],
                   ragged_cpu_ratio=cpu["sentencepiece"] / cpu["gputok-ragged"])
        rows.append(row)
        print(f"batch {batch_size:>6}: " + "  ".join(
            f"{name} {row[f'{name}_mb_per_s']:6.2f} MB/s {row[f'{name}_cpu_s_per_mb']:.3f} CPU s/MB" for name in runs)
            + f"  gputok speed: {row['wall_ratio']:.2f}x wall, {row['cpu_ratio']:.2f}x CPU;"
            f" ragged {row['ragged_wall_ratio']:.2f}x wall, {row['ragged_cpu_ratio']:.2f}x CPU", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "repeats": args.repeats, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
