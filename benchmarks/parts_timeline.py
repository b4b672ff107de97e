"""Where a call on the parts path spends its time: the caller before its part, each part, and after both.

    python benchmarks/parts_timeline.py [--tokenizer unigram] [--batch 1024] [--threads 2] [--passes 2]
                                        [--json bench-results/parts_timeline.json]

``tok(batch, padding=True)`` over the bench's 20 MB of English lines in batches of ``--batch``, the
word cache empty at the start of each pass (as ``gputok bench``), with the whole-pipeline kernel's
``encode_part`` wrapped to record when each part starts and ends on which thread. Per call (calls
of two parts only), in microseconds from the call's start: when the caller starts its part and how
long it runs, the same for the other thread's part, how long the call runs after both parts are
done (concatenation, padding, tensors, and waking the caller where the other part ends last), the
whole call, and how much later the other part ends than the caller's. Medians with the 10th and
90th percentiles. For ``--threads 2``: with more, only the first worker's part is shown.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="unigram")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--json", default="bench-results/parts_timeline.json")
    args = parser.parse_args()

    from gputok import bench, set_num_threads
    from gputok.word_cache import WordCache

    set_num_threads(args.threads)
    tok = bench.make_tokenizer(args.tokenizer)
    lines = bench._load_lines(None, None)[0]
    batches = [lines[i:i + args.batch] for i in range(0, len(lines), args.batch)]
    for batch in batches[:10]:
        tok(batch, padding=True)
    whole = tok._whole_pipeline_kernel
    encode_part = whole.encode_part
    caller = threading.get_ident()
    parts: list[tuple[bool, float, float]] = []

    def timed(units, lengths):
        start = time.perf_counter()
        got = encode_part(units, lengths)
        parts.append((threading.get_ident() == caller, start, time.perf_counter()))
        return got

    whole.encode_part = timed
    rows = []
    for _ in range(args.passes):
        tok.word_cache = WordCache()
        for batch in batches:
            parts.clear()
            start = time.perf_counter()
            tok(batch, padding=True)
            end = time.perf_counter()
            mine = [p for p in parts if p[0]]
            other = [p for p in parts if not p[0]]
            if len(mine) != 1 or not other:
                continue
            (_, c0, c1), (_, w0, w1) = mine[0], other[0]
            rows.append((c0 - start, c1 - c0, w0 - start, w1 - w0, end - max(c1, w1), end - start, w1 - c1))
    whole.encode_part = encode_part
    if not rows:
        raise SystemExit(f"no call of {args.batch} lines took the parts path on {args.threads} threads")
    us = np.array(rows) * 1e6
    names = ("caller's part starts", "caller's part", "other part starts", "other part", "after both parts",
             "whole call", "other part ends later by")
    print(f"{args.tokenizer}, {args.batch} lines a call, {args.threads} threads, {len(rows)} calls of two parts; "
          "us: median (p10, p90)")
    figures = {}
    for k, name in enumerate(names):
        p10, median, p90 = np.percentile(us[:, k], [10, 50, 90])
        figures[name] = {"median": median, "p10": p10, "p90": p90}
        print(f"{name:26s} {median:7.0f} ({p10:.0f}, {p90:.0f})")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tokenizer": args.tokenizer, "batch": args.batch, "threads": args.threads,
                               "calls": len(rows), "us": figures}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
