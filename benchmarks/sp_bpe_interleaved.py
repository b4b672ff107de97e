"""SentencePiece BPE (Mistral's model) against sentencepiece, interleaved in one process.

``gputok bench`` times each engine in its own subprocess, one after the other; on a shared machine
the load moves between them. This script alternates the two on the same batches instead (gputok's
padded call as ``gputok bench`` makes it, then ``SentencePieceProcessor.encode(batch,
num_threads=N)``), several repeats, each engine's fastest, and prints the ratio. gputok's word
cache starts empty at each repeat, as in ``gputok bench``. With ``--chunks``, gputok also runs
with the parts path off (``Tokenizer._cells_in_parts``; a batch then takes the chunked encode):
the before and after of that path, interleaved. Each engine's wall time and process CPU time.

    python benchmarks/sp_bpe_interleaved.py --threads 2 --json out.json
"""

import argparse
import json
import time

import sentencepiece as spm
import torch

from gputok import assets, bench, set_num_threads
from gputok import tokenizer as tokenizer_module
from gputok.word_cache import WordCache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 1024, 65536])
    parser.add_argument("--json", default=None)
    parser.add_argument("--chunks", action="store_true", help="also gputok with the parts path off")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    set_num_threads(args.threads)
    tok = bench.make_tokenizer("mistral")
    sp = spm.SentencePieceProcessor(model_file=str(bench.model_path("mistral")))
    lines = assets.english_corpus(20).read_text(encoding="utf-8")[:8_000_000].splitlines()
    sizes = {1: 3_000, 32: 40_000, 1024: 131_072, 65536: 196_608}  # lines per batch size
    rows = []
    for batch_size in args.batch_sizes:
        count = sizes.get(batch_size, 131_072)
        batches = [lines[i:i + batch_size] for i in range(0, min(count, len(lines)), batch_size)]
        engines = {"gputok": lambda b: tok(b, add_special_tokens=False, padding=True),
                   "sentencepiece": lambda b: sp.encode(b, num_threads=args.threads)}
        if args.chunks:
            engines["gputok-chunks"] = lambda b: _without_parts(tok, b)
        best, cpu = {}, {}
        for _ in range(args.repeats):
            for name, run in engines.items():
                tok.word_cache = WordCache()
                start, start_cpu = time.perf_counter(), time.process_time()
                for b in batches:
                    run(b)
                cpu[name] = min(cpu.get(name, float("inf")), time.process_time() - start_cpu)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        ratio = best["sentencepiece"] / best["gputok"]
        rows.append({"batch_size": batch_size, "lines": sum(map(len, batches)), **best,
                     **{f"{name} cpu": value for name, value in cpu.items()}, "ratio": ratio})
        print(f"batch {batch_size:>6}: {rows[-1]['lines']:>7} lines  "
              + "  ".join(f"{name} {best[name]:.3f} s (cpu {cpu[name]:.3f} s)" for name in engines)
              + f"  gputok speed {ratio:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)


def _without_parts(tok, batch):
    """gputok's padded call with ``Tokenizer._cells_in_parts`` off (the chunked encode)."""
    parts_max = tokenizer_module.PARTS_MAX_CHARS
    tokenizer_module.PARTS_MAX_CHARS = 0
    try:
        return tok(batch, add_special_tokens=False, padding=True)
    finally:
        tokenizer_module.PARTS_MAX_CHARS = parts_max


if __name__ == "__main__":
    main()
