"""cl100k per-call cost on the CPU at one batch size: gputok (padded and ragged tensors out, the word
cache emptied before each pass, as ``gputok bench`` runs it) against its anchors, interleaved in one
process, best of ``--repeats`` passes, in wall time and in process CPU time.

The CPU time is the figure to compare on a shared machine (wall time there includes waiting for a
core): huggingface ``encode_batch_fast`` (the tokenizer.json gputok writes) at batch 1, tiktoken
(``encode_ordinary`` of the joined batch and ``encode_ordinary_batch``) at larger batches. Prints a
table and writes JSON (``--json``).

    python benchmarks/bpe_call_cost.py --batch-size 1 --megabytes 1
    python benchmarks/bpe_call_cost.py --batch-size 1024 --megabytes 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    import torch

    from gputok import assets
    from gputok.bench import make_tokenizer
    from gputok.word_cache import WordCache

    torch.set_num_threads(args.threads)
    tok = make_tokenizer("cl100k")
    text = assets.english_corpus(20).read_text(encoding="utf-8")[:int(args.megabytes * 1e6)]
    lines = text.splitlines()
    nbytes = len(text.encode())
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]

    def gputok(padded: bool):
        def run() -> None:
            tok.word_cache = WordCache()  # every pass cold, as gputok bench
            for batch in batches:
                tok(batch, add_special_tokens=False, padding=padded)
        return run

    engines = {"gputok": gputok(True), "gputok-ragged": gputok(False)}
    if args.batch_size == 1:
        from tokenizers import Tokenizer as HFTokenizer

        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "tokenizer.json")
            tok.save(path)
            hf = HFTokenizer.from_file(path)
        engines["huggingface"] = lambda: [hf.encode_batch_fast(b, add_special_tokens=False) for b in batches]
    else:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from gputok.regex_split import PATTERNS

        enc = tiktoken.Encoding("cl100k", pat_str=PATTERNS["cl100k"], special_tokens={},
                                mergeable_ranks=load_tiktoken_bpe(str(assets.fetch("cl100k-tiktoken"))))
        engines["tiktoken-string"] = lambda: [enc.encode_ordinary("\n".join(b)) for b in batches]
        engines["tiktoken-batch"] = lambda: [enc.encode_ordinary_batch(b, num_threads=args.threads) for b in batches]
    for run in engines.values():
        run()  # compile, load, warm
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, run in engines.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    rows = []
    for name, pairs in times.items():
        wall, cpu = min(p[0] for p in pairs), min(p[1] for p in pairs)
        rows.append(dict(engine=name, batch_size=args.batch_size, threads=args.threads, megabytes=nbytes / 1e6,
                         wall_mb_per_s=nbytes / 1e6 / wall, cpu_s=cpu, cpu_us_per_call=cpu / len(batches) * 1e6))
    anchors = [r for r in rows if not r["engine"].startswith("gputok")]
    print(f"cl100k, batch {args.batch_size}, {args.threads} threads, {nbytes / 1e6:.1f} MB, {len(batches)} calls")
    print(f"{'engine':16s} {'wall MB/s':>10s} {'CPU s':>8s} {'CPU us/call':>12s} {'CPU-time x best anchor':>23s}")
    for r in rows:
        r["cpu_speedup_vs_best_anchor"] = min(a["cpu_s"] for a in anchors) / r["cpu_s"]
        print(f"{r['engine']:16s} {r['wall_mb_per_s']:10.2f} {r['cpu_s']:8.3f} {r['cpu_us_per_call']:12.1f} "
              f"{r['cpu_speedup_vs_best_anchor']:23.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
