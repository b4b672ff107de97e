"""gputok.tiktoken against tiktoken, lists out: the same calls on the same lines, in one process.

Times ``encode_ordinary_batch`` and ``encode_batch`` (tiktoken's defaults: no special token
allowed, all disallowed, so the texts are checked for them) on the English corpus's lines (20 MB
by default) in batches of 65,536 lines, each call returning ``list[list[int]]`` (gputok's list
conversion included). tiktoken runs each call with ``num_threads`` 2 and 8 (its default) and
``encode_ordinary`` of each batch joined into one string (not lists per line: a reference);
its best per-line call is the anchor. gputok's word cache starts empty at each pass, so every
pass is cold; the engines alternate pass by pass, and each keeps its best of ``--repeats``. The
first pass of each call is untimed (gputok: kernels loaded; tiktoken: only the ids counted, to
check both give the same number of tokens). tiktoken's batch calls submit one task per line to a
thread pool, so on a busy 2-core machine a pass takes minutes: ``--repeats 2`` keeps it short.

    python benchmarks/tiktoken_dropin.py [--encoding cl100k_base] [--megabytes 20] [--batch 65536]

Prints a table (MB/s and the ratio to tiktoken's best) and writes ``bench-results/tiktoken_dropin.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoding", default="cl100k_base", help="a gputok.tiktoken encoding name")
    parser.add_argument("--megabytes", type=float, default=20)
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="bench-results/tiktoken_dropin.json")
    args = parser.parse_args()

    import tiktoken

    from gputok import assets
    from gputok import tiktoken as gtiktoken
    from gputok.word_cache import WordCache

    file_name = gtiktoken._ENCODINGS[args.encoding][0]
    assets.fetch(gtiktoken._RANK_FILES[file_name][1])
    ours = gtiktoken.get_encoding(args.encoding)
    theirs = tiktoken.Encoding(args.encoding, pat_str=ours._pat_str, mergeable_ranks=ours._mergeable_ranks,
                               special_tokens=ours._special_tokens)
    text = assets.english_corpus(20).read_text(encoding="utf-8")[:int(args.megabytes * 1_000_000)]
    lines = text.splitlines()
    size = len("\n".join(lines).encode("utf-8"))
    batches = [lines[i:i + args.batch] for i in range(0, len(lines), args.batch)]

    def gputok_pass(method):
        ours.to_tokenizer().word_cache = WordCache()  # cold: every pass starts with an empty cache
        return [getattr(ours, method)(b) for b in batches]

    calls = {"gputok encode_ordinary_batch": lambda: gputok_pass("encode_ordinary_batch"),
             "gputok encode_batch": lambda: gputok_pass("encode_batch")}
    for threads in (2, 8):
        calls[f"tiktoken encode_ordinary_batch(num_threads={threads})"] = \
            lambda t=threads: [theirs.encode_ordinary_batch(b, num_threads=t) for b in batches]
        calls[f"tiktoken encode_batch(num_threads={threads})"] = \
            lambda t=threads: [theirs.encode_batch(b, num_threads=t) for b in batches]
    calls["tiktoken encode_ordinary(one string per batch)"] = lambda: [theirs.encode_ordinary("\n".join(b)) for b in batches]

    results = {name: float("inf") for name in calls}
    tokens = {}
    for name in ("gputok encode_ordinary_batch", "gputok encode_batch", "tiktoken encode_ordinary_batch(num_threads=8)"):
        tokens[name] = sum(len(ids) for batch in calls[name]() for ids in batch)  # untimed: warm-up and count
    reference = tokens["tiktoken encode_ordinary_batch(num_threads=8)"]
    for name in ("gputok encode_ordinary_batch", "gputok encode_batch"):
        assert tokens[name] == reference, (name, tokens[name], reference)
    for _ in range(args.repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            results[name] = min(results[name], time.perf_counter() - start)

    rows = []
    for kind in ("encode_ordinary_batch", "encode_batch"):
        anchor_name = min((n for n in results if n.startswith(f"tiktoken {kind}(")), key=results.get)
        ours_s, anchor_s = results[f"gputok {kind}"], results[anchor_name]
        rows.append({"call": kind, "gputok_s": ours_s, "gputok_mb_s": size / 1e6 / ours_s,
                     "tiktoken_best": anchor_name, "tiktoken_s": anchor_s, "tiktoken_mb_s": size / 1e6 / anchor_s,
                     "ratio": anchor_s / ours_s})
    one_string = results["tiktoken encode_ordinary(one string per batch)"]
    print(f"{args.encoding}, {size / 1e6:.1f} MB in {len(lines):,} lines, batch {args.batch:,}, "
          f"{reference:,} tokens, torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs (best of {args.repeats})")
    print("| call | gputok MB/s | tiktoken best MB/s | tiktoken's best call | ratio |")
    print("|---|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['call']} | {r['gputok_mb_s']:.2f} | {r['tiktoken_mb_s']:.2f} | {r['tiktoken_best']} | "
              f"{r['ratio']:.2f}x |")
    print("all calls, MB/s: " + ", ".join(f"{n} {size / 1e6 / s:.2f}" for n, s in results.items()))
    print(f"(tiktoken encode_ordinary of each batch as one string, no lists per line: {size / 1e6 / one_string:.2f} MB/s)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "encoding": args.encoding, "megabytes": size / 1e6, "lines": len(lines), "batch": args.batch,
        "tokens": reference, "repeats": args.repeats, "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(), "machine": platform.machine(), "tiktoken_version": tiktoken.__version__,
        "rows": rows, "seconds": results}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
