"""Training speed: gputok against huggingface ``tokenizers`` for the three presets, one run.

For each corpus size (the first N MB of the ~100 MB English set of ASSETS.md) and each preset,
gputok's ``train`` and huggingface's class (``ByteLevelBPETokenizer``, ``CharBPETokenizer``,
``BertWordPieceTokenizer(lowercase=True)``) train on the same file with the same vocab_size and
min_frequency, each engine in its own subprocess (so peak RSS is its own) with the same number of
threads (torch intra-op threads for gputok, ``RAYON_NUM_THREADS`` for huggingface). gputok's time
is split into counting (file to word counts) and merging; the table also says whether the
vocabularies agree (byte-level: vocabulary and merge list identical; char-bpe: same vocabulary and
merge set; bert-wordpiece: how many tokens differ, since huggingface breaks ties in hash order).

    python benchmarks/train.py                          # or: gputok bench --train
    gputok bench --train --megabytes 10 50 100 --presets byte-level-bpe bert-wordpiece
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._atomic import write_atomic

PRESETS = ("byte-level-bpe", "char-bpe", "bert-wordpiece")
# The acceptance settings of the training issue: 32000 / 2 for BPE, 30000 / 3 for WordPiece.
DEFAULTS = {"byte-level-bpe": (32000, 2), "char-bpe": (32000, 2), "bert-wordpiece": (30000, 3)}
HF_CLASSES = {"byte-level-bpe": "ByteLevelBPETokenizer", "char-bpe": "CharBPETokenizer",
              "bert-wordpiece": "BertWordPieceTokenizer"}


def _worker(engine: str, preset: str, megabytes: int | None, vocab_size: int, min_frequency: int, threads: int,
            device: str, out: str) -> dict:
    """Runs in the subprocess: train once, write the tokenizer.json to ``out``, report times."""
    from . import assets

    path = assets.english_corpus(megabytes)
    row = dict(engine=engine, preset=preset, megabytes=path.stat().st_size / 1e6, vocab_size=vocab_size,
               min_frequency=min_frequency)
    start = time.perf_counter()
    if engine == "gputok":
        import torch

        from .training import train_with_summary

        torch.set_num_threads(threads)
        start = time.perf_counter()
        tok, summary = train_with_summary(path, preset=preset, vocab_size=vocab_size, min_frequency=min_frequency,
                                          device=device, progress=False)
        row.update(seconds=time.perf_counter() - start, counting_s=summary.seconds["counting"],
                   merging_s=summary.seconds["merging"], words=summary.words, unique_words=summary.unique_words)
        spec = tok.to_json()
    else:
        import tokenizers

        hf = getattr(tokenizers, HF_CLASSES[preset])(**({"lowercase": True} if preset == "bert-wordpiece" else {}))
        hf.train([str(path)], vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False)
        row["seconds"] = time.perf_counter() - start
        spec = json.loads(hf.to_str())
    write_atomic({out: json.dumps(spec["model"])})
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def _agreement(preset: str, ours: dict, theirs: dict) -> str:
    """How far the two vocabularies agree, in the terms the issue's acceptance uses."""
    if ours["vocab"] == theirs["vocab"] and ours.get("merges") == theirs.get("merges"):
        return "identical"
    same_set = set(ours["vocab"]) == set(theirs["vocab"])
    if preset == "char-bpe":
        same_merges = {tuple(m) for m in ours["merges"]} == {tuple(m) for m in theirs["merges"]}
        if same_set and same_merges:
            return "same vocab and merge set"
    if same_set:
        return "same token set"
    return f"{len(set(ours['vocab']) - set(theirs['vocab']))} of {len(theirs['vocab'])} tokens differ"


def run_benchmark(*, presets=PRESETS, megabytes=(10,), vocab_size: int | None = None,
                  min_frequency: int | None = None, threads: int | None = None, device: str = "cpu",
                  json_path: str | None = None) -> list[dict]:
    threads = threads or min(os.cpu_count() or 1, 2)
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true",
               OMP_NUM_THREADS=str(threads))
    from . import assets

    for mb in megabytes:
        assets.english_corpus(mb)  # fetch and cut once, outside the timed subprocesses
    rows = []
    with tempfile.TemporaryDirectory(prefix="gputok-bench-train-") as tmp:
        for mb in megabytes:
            for preset in presets:
                vs, mf = DEFAULTS[preset]
                vs, mf = vocab_size or vs, mf if min_frequency is None else min_frequency
                models = {}
                for engine in ("gputok", "huggingface"):
                    out = os.path.join(tmp, f"{engine}.json")
                    cmd = [sys.executable, "-m", "gputok.bench_train", "--worker", engine, "--presets", preset,
                           "--vocab-size", str(vs), "--min-frequency", str(mf), "--threads", str(threads),
                           "--device", device, "--out", out]
                    cmd += ["--megabytes", "all" if mb is None else str(mb)]
                    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                    if done.returncode:
                        raise RuntimeError(f"benchmark worker {engine} {preset} failed:\n{done.stderr}")
                    rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                    models[engine] = json.loads(Path(out).read_text(encoding="utf-8"))
                ours, theirs = rows[-2], rows[-1]
                ours["speedup"] = theirs["seconds"] / ours["seconds"]
                ours["rss_ratio"] = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
                ours["agreement"] = _agreement(preset, models["gputok"], models["huggingface"])
                _print_rows(rows[-2:], header=len(rows) == 2, threads=threads, device=device)
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic({json_path: json.dumps({"device": device, "threads": threads, "rows": rows}, indent=2)})
        print(f"wrote {json_path}")
    return rows


def _print_rows(rows: list[dict], *, header: bool, threads: int, device: str) -> None:
    if header:
        print(f"train, device={device}, threads={threads}; speedup = huggingface s / gputok s, "
              "rss = gputok peak / huggingface peak")
        line = (f"{'preset':<15} {'MB':>6} {'engine':<12} {'s':>7} {'count s':>7} {'merge s':>7} "
                f"{'peakMB':>7} {'speedup':>7} {'rss':>5}  vocab agreement")
        print(line)
        print("-" * len(line))
    for r in rows:
        extra = ""
        if "speedup" in r:
            extra = f"{r['speedup']:>6.2f}x {r['rss_ratio']:>4.2f}x  {r['agreement']}"
        split = (f"{r['counting_s']:>7.2f} {r['merging_s']:>7.2f}" if "counting_s" in r else f"{'':>7} {'':>7}")
        print(f"{r['preset']:<15} {r['megabytes']:>6.1f} {r['engine']:<12} {r['seconds']:>7.2f} {split} "
              f"{r['peak_rss_mb']:>7.0f} {extra}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gputok bench --train", description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", choices=PRESETS, default=list(PRESETS))
    parser.add_argument("--megabytes", type=lambda s: None if s == "all" else int(s), nargs="+", default=[10],
                        help="corpus sizes: the first N MB of the English set, or 'all' (~103 MB); "
                             "default 10; try 10 50 all")
    parser.add_argument("--vocab-size", type=int, default=None, help="default 32000 for BPE, 30000 for WordPiece")
    parser.add_argument("--min-frequency", type=int, default=None, help="default 2 for BPE, 3 for WordPiece")
    parser.add_argument("--threads", type=int, default=None, help="threads for both engines (default: min(cores, 2))")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default="bench-results/train.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.presets[0], args.megabytes[0], args.vocab_size,
                                 args.min_frequency, args.threads, args.device, args.out)))
        return 0
    run_benchmark(presets=args.presets, megabytes=args.megabytes, vocab_size=args.vocab_size,
                  min_frequency=args.min_frequency, threads=args.threads, device=args.device, json_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
