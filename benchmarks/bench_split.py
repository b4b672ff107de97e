"""Pre-tokenizer stage alone, numba kernels vs the torch-op twins, on English lines (one process).

    PYTHONPATH=. python benchmarks/bench_split.py [--repeats 5] [--batches 1,32,1024] [--threads N]

Input: codepoint tensors of the first ``batch`` non-empty lines of ``gputok.assets.english_corpus(20)``
(ingest excluded); each pre-tokenizer's stage as the tokenizer runs it (Metaspace: rewrite, then
split). Per call: the best of ``repeats`` timings of a loop of calls; MB/s counts codepoints as
bytes of text. Prints a table (and, with --json PATH, writes it).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from gputok import _dispatch, assets
from gputok.ingest import codepoints
from gputok.pre_tokenizers import BertPreTokenizer, Metaspace, Split

PRE_TOKENIZERS = {"bert": BertPreTokenizer(), "cl100k": Split("cl100k"), "o200k": Split("o200k"),
                  "gpt2": Split("gpt2"), "metaspace": Metaspace()}


def stage(pre, text):
    rewrite = getattr(pre, "rewrite", None)
    if rewrite is not None:
        text = rewrite(text)[0]
    return pre(text)


def per_call(pre, text, backend: str, repeats: int) -> float:
    with _dispatch.use_backend(backend):
        stage(pre, text)  # warm: compile / load
        calls = 1
        while True:  # enough calls for ~20 ms per timing
            t0 = time.perf_counter()
            for _ in range(calls):
                stage(pre, text)
            if time.perf_counter() - t0 > 0.02:
                break
            calls *= 4
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                stage(pre, text)
            best = min(best, (time.perf_counter() - t0) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", default="1,32,1024")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (the torch twins' ops; the kernels use one)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    wanted = max(map(int, args.batches.split(",")))
    lines = []
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        for line in f:  # the first non-empty lines
            if line.strip() and len(lines) < wanted:
                lines.append(line.rstrip("\n"))
    rows = []
    print(f"torch threads {torch.get_num_threads()}; per call, best of {args.repeats}")
    print(f"{'pre-tokenizer':<12} {'batch':>6} {'chars':>8} {'numba us':>10} {'torch us':>10} {'speedup':>8} {'numba MB/s':>11}")
    for name, pre in PRE_TOKENIZERS.items():
        for batch in map(int, args.batches.split(",")):
            text = codepoints(lines[:batch])
            chars = text.values.numel()
            numba_s, torch_s = per_call(pre, text, "numba", args.repeats), per_call(pre, text, "torch", args.repeats)
            rows.append({"pre_tokenizer": name, "batch": batch, "chars": chars, "numba_s": numba_s, "torch_s": torch_s})
            print(f"{name:<12} {batch:>6} {chars:>8} {numba_s * 1e6:>10.1f} {torch_s * 1e6:>10.1f} "
                  f"{torch_s / numba_s:>7.1f}x {chars / numba_s / 1e6:>11.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
