"""Encoding throughput: gputok against the anchors on the same real text, one run.

WordPiece (``--tokenizer bert``) runs against huggingface ``BertWordPieceTokenizer.encode_batch``;
byte-level BPE (``--tokenizer gpt2|cl100k``) against tiktoken's ``encode_ordinary_batch``, against
tiktoken on the batch joined into one long string, and against huggingface
``Tokenizer.encode_batch_fast`` (no offsets, as tiktoken) on the tokenizer.json gputok writes for
those ranks (the same ids: ``tests/test_bpe_tokenizer_json.py``). Each engine runs in its own subprocess
(so peak RSS is its own) with the same number of threads (``torch.set_num_threads`` for gputok:
its intra-op threads, and as many chunk threads for a large batch, see ``gputok._cpu_threads``;
``RAYON_NUM_THREADS`` for huggingface, ``num_threads`` for tiktoken). gputok is timed end to end:
Python strings in, padded ``input_ids``/``attention_mask`` tensors out (``gputok``) or the flat
ids with their row offsets (``gputok-ragged``, ``padding=False``: what tiktoken's lists of ids
hold); its word cache (``gputok.word_cache``) starts empty at each pass, so every pass is cold.
``--passes N`` times each batch size N times (every engine alike) and reports the fastest pass:
gputok's first pass in a fresh process also pays for growing its heap (~0.7 s of page faults on
20 MB of cl100k), which a long-running dataloader pays once. Small batch sizes run on a prefix of the corpus (the
table says how many MB) so that the whole benchmark stays within minutes.

    python benchmarks/encode_wordpiece.py            # or: gputok bench
    gputok bench --megabytes 5 --batch-sizes 1024 65536 --json out.json
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

# Bytes of corpus each batch size runs on, at most: small batches cost a call per few texts.
_PREFIX_BYTES = {1: 1_000_000, 32: 5_000_000}


def _load_lines(megabytes: float | None, limit_bytes: int | None) -> tuple[list[str], int]:
    from . import assets

    text = assets.english_corpus(20).read_text(encoding="utf-8")
    for limit in (None if megabytes is None else int(megabytes * 1_000_000), limit_bytes):
        if limit is not None:
            text = text[:limit]
    lines = text.splitlines()
    return lines, len("\n".join(lines).encode("utf-8"))


def _runner(engine: str, tokenizer: str, threads: int, device: str, hf_json: str | None = None):
    """A function batch -> number of tokens, for one engine and tokenizer."""
    import torch

    from . import assets

    if engine.startswith("gputok"):
        from .tokenizer import CUDA_FROM_CHARS, Tokenizer
        from .word_cache import WordCache

        if tokenizer == "bert":
            tok = Tokenizer.from_vocab(assets.fetch("bert-vocab"))
        else:
            tok = Tokenizer.from_tiktoken(assets.fetch(f"{tokenizer}-tiktoken"), pattern=tokenizer)
        # Long enough to reach the GPU (smaller batches for it are encoded on the CPU).
        tok(["warm up the tables " * (CUDA_FROM_CHARS // 19 + 1)], device=device)
        padded = engine == "gputok"

        def run(batch):
            if batch is None:  # a new pass over the corpus: start from an empty word cache
                tok.word_cache = WordCache()
                return 0
            out = tok(batch, device=device, add_special_tokens=tokenizer == "bert", padding=padded)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return int(out["attention_mask"].sum()) if padded else out["input_ids"].numel()
        return run
    if engine == "huggingface" and tokenizer != "bert":
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_file(hf_json)
        encode = getattr(hf, "encode_batch_fast", hf.encode_batch)  # newer tokenizers: no offsets computed
        encode(["warm up"], add_special_tokens=False)
        return lambda batch: sum(len(e.ids) for e in encode(batch, add_special_tokens=False))
    if engine == "huggingface":
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer(str(assets.fetch("bert-vocab")), lowercase=True)
        hf.encode_batch(["warm up"])
        return lambda batch: sum(len(e.ids) for e in hf.encode_batch(batch))
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from .regex_split import PATTERNS

    enc = tiktoken.Encoding(tokenizer, pat_str=PATTERNS[tokenizer], special_tokens={},
                            mergeable_ranks=load_tiktoken_bpe(str(assets.fetch(f"{tokenizer}-tiktoken"))))
    if engine == "tiktoken-batch":
        return lambda batch: sum(map(len, enc.encode_ordinary_batch(batch, num_threads=threads)))
    return lambda batch: len(enc.encode_ordinary("\n".join(batch)))  # tiktoken-string


def _worker(engine: str, tokenizer: str, megabytes: float | None, batch_sizes: list[int], threads: int,
            device: str, passes: int = 1, hf_json: str | None = None) -> dict:
    """Runs in the subprocess: time one engine over the corpus at each batch size, the fastest of
    ``passes`` passes."""
    import torch

    torch.set_num_threads(threads)
    run = _runner(engine, tokenizer, threads, device, hf_json)
    results = []
    for batch_size in batch_sizes:
        lines, nbytes = _load_lines(megabytes, _PREFIX_BYTES.get(batch_size))
        times = []
        for _ in range(passes):
            if engine.startswith("gputok"):
                run(None)  # every pass is cold: no words cached by an earlier one
            tokens = 0
            start = time.perf_counter()
            for i in range(0, len(lines), batch_size):
                tokens += run(lines[i : i + batch_size])
            times.append(time.perf_counter() - start)
        seconds = min(times)
        results.append(dict(engine=engine, batch_size=batch_size, lines=len(lines), megabytes=nbytes / 1e6,
                            seconds=seconds, pass_seconds=times, mb_per_s=nbytes / 1e6 / seconds, tokens=tokens,
                            tokens_per_s=tokens / seconds))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for r in results:
        r["peak_rss_mb"] = peak_mb
    return {"results": results}


ANCHORS = {"bert": ("huggingface",), "gpt2": ("tiktoken-batch", "tiktoken-string", "huggingface"),
           "cl100k": ("tiktoken-batch", "tiktoken-string", "huggingface")}


def run_benchmark(*, tokenizer: str = "bert", megabytes: float | None = None, batch_sizes=(1, 32, 1024, 65536),
                  threads: int | None = None, device: str = "cpu", passes: int = 1,
                  json_path: str | None = None) -> list[dict]:
    threads = threads or min(os.cpu_count() or 1, 2)
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true",
               OMP_NUM_THREADS=str(threads))
    from . import assets

    assets.english_corpus(20)  # fetch once, outside the timed subprocesses
    assets.fetch("bert-vocab" if tokenizer == "bert" else f"{tokenizer}-tiktoken")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        hf_json = None
        if tokenizer != "bert":  # huggingface reads the ranks as the tokenizer.json gputok writes
            from .tokenizer import Tokenizer

            hf_json = str(Path(tmp) / "tokenizer.json")
            Tokenizer.from_tiktoken(assets.fetch(f"{tokenizer}-tiktoken"), pattern=tokenizer).save(hf_json)
        for engine in ("gputok", "gputok-ragged") + ANCHORS[tokenizer]:
            cmd = [sys.executable, "-m", "gputok.bench", "--worker", engine, "--tokenizer", tokenizer,
                   "--threads", str(threads), "--passes", str(passes),
                   "--device", device, "--batch-sizes", *map(str, batch_sizes)]
            if megabytes is not None:
                cmd += ["--megabytes", str(megabytes)]
            if hf_json is not None:
                cmd += ["--hf-json", hf_json]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"benchmark worker {engine} failed:\n{done.stderr}")
            rows += json.loads(done.stdout.strip().splitlines()[-1])["results"]
    # Two ratios: against the fastest anchor at the same batch size, and against the fastest
    # anchor row of all (an anchor may be fastest at another batch size).
    anchors = [a for a in rows if not a["engine"].startswith("gputok")]
    fastest = max(a["mb_per_s"] for a in anchors)
    for r in rows:
        if r["engine"].startswith("gputok"):
            best = max(a["mb_per_s"] for a in anchors if a["batch_size"] == r["batch_size"])
            r["speedup_vs_best_anchor"] = r["mb_per_s"] / best
            r["speedup_vs_fastest_anchor_row"] = r["mb_per_s"] / fastest
    _print_table(rows, tokenizer, threads, device)
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic({json_path: json.dumps({"tokenizer": tokenizer, "device": device, "threads": threads,
                                             "passes": passes, "rows": rows}, indent=2)})
        print(f"wrote {json_path}")
    return rows


def _print_table(rows: list[dict], tokenizer: str, threads: int, device: str) -> None:
    passes = max(len(r["pass_seconds"]) for r in rows)
    print(f"encode, {tokenizer} tokenizer, device={device}, threads={threads}, fastest of {passes} pass(es); "
          "ratio = gputok / fastest anchor at that batch size; vs-all = gputok / fastest anchor row")
    header = (f"{'engine':<16} {'batch':>6} {'MB':>6} {'lines':>8} {'s':>7} {'MB/s':>7} {'Mtok/s':>7} {'peakMB':>7} "
              f"{'ratio':>6} {'vs-all':>6}")
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['speedup_vs_best_anchor']:.2f}x" if "speedup_vs_best_anchor" in r else ""
        vs_all = f"{r['speedup_vs_fastest_anchor_row']:.2f}x" if "speedup_vs_fastest_anchor_row" in r else ""
        print(f"{r['engine']:<16} {r['batch_size']:>6} {r['megabytes']:>6.1f} {r['lines']:>8} {r['seconds']:>7.2f} "
              f"{r['mb_per_s']:>7.2f} {r['tokens_per_s'] / 1e6:>7.2f} {r['peak_rss_mb']:>7.0f} {ratio:>6} {vs_all:>6}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--train" in argv:  # training speed: gputok/bench_train.py
        from .bench_train import main as train_main

        return train_main([a for a in argv if a != "--train"])
    parser = argparse.ArgumentParser(prog="gputok bench", description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", choices=sorted(ANCHORS), default="bert",
                        help="bert (vs huggingface WordPiece) or gpt2/cl100k (vs tiktoken and huggingface); default bert")
    parser.add_argument("--megabytes", type=float, default=None, help="corpus size (default: the 20 MB English set)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 1024, 65536])
    parser.add_argument("--threads", type=int, default=None, help="threads for both engines (default: min(cores, 2))")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--passes", type=int, default=1,
                        help="time each batch size this many times, every engine alike, and keep the fastest (default 1)")
    parser.add_argument("--json", default=None, help="where to write the JSON (default bench-results/encode_<tokenizer>.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--hf-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.tokenizer, args.megabytes, args.batch_sizes, args.threads,
                                 args.device, args.passes, args.hf_json)))
        return 0
    if args.passes < 1:
        parser.error(f"--passes {args.passes}: give 1 or more")
    run_benchmark(tokenizer=args.tokenizer, megabytes=args.megabytes, batch_sizes=args.batch_sizes,
                  threads=args.threads, device=args.device, passes=args.passes,
                  json_path=args.json or f"bench-results/encode_{args.tokenizer}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
