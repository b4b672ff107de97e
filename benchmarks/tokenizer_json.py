"""gputok on a tokenizer.json against huggingface on the same file, and gputok on the SentencePiece
``.model`` the file was written from, in one process.

    python benchmarks/tokenizer_json.py [--families mistral unigram] [--batch-sizes 1 32 1024]
                                        [--lines 16384] [--passes 3] [--threads 2]
                                        [--json bench-results/tokenizer_json.json]

The files are the ones ``Tokenizer.save`` writes for the bench's SentencePiece models (``mistral``: a
Llama-style BPE file, ``Prepend`` and ``Replace`` normalizers and no pre-tokenizer, as transformers
converts Llama and Mistral; ``unigram``: the tests' 8k Unigram, a ``Precompiled`` charsmap and the
whitespace ``Replace`` regexes, then ``Metaspace``), which is what ``from_pretrained`` reads from a
model folder that has one. Text: the first ``--lines`` of the 20 MB English set, in batches of each
size, padded tensors out for gputok (``encode_batch`` for huggingface, ``RAYON_NUM_THREADS`` and
torch's threads set to ``--threads``). The engines alternate within each pass, each pass from an
empty word cache (huggingface's file loaded again), as ``gputok bench`` runs them; each row is the
fastest of ``--passes``. Ids are checked equal between the JSON in gputok and in huggingface.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["mistral", "unigram"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 32, 1024])
    parser.add_argument("--lines", type=int, default=16384)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default="bench-results/tokenizer_json.json")
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before huggingface starts its pool
    import torch
    from tokenizers import Tokenizer as HFTokenizer

    from gputok import Tokenizer, assets
    from gputok.bench import make_tokenizer
    from gputok.word_cache import WordCache

    torch.set_num_threads(args.threads)
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(args.lines)]
    nbytes = sum(len(line.encode()) for line in lines)
    rows = []
    print(f"{args.lines} English lines ({nbytes / 1e6:.2f} MB), {args.threads} threads, fastest of {args.passes}")
    print(f"{'family':8} {'batch':>6} {'engine':>13} {'MB/s':>8} {'vs hf':>7}")
    for family in args.families:
        model = make_tokenizer(family)
        path = Path(tempfile.mkdtemp()) / "tokenizer.json"
        model.save(path)
        from_json, hf = Tokenizer.from_file(path), HFTokenizer.from_file(str(path))
        check = lines[:500]
        assert from_json.encode_batch(check) == [e.ids for e in hf.encode_batch(check, add_special_tokens=False)]

        def fresh(name: str):
            """The engine's encode with its word cache empty (huggingface's: the file loaded again)."""
            if name == "huggingface":
                return functools.partial(HFTokenizer.from_file(str(path)).encode_batch, add_special_tokens=False)
            tok = from_json if name == "gputok-json" else model
            tok.word_cache = WordCache()
            return functools.partial(tok, padding=True, add_special_tokens=False)

        engines = ("huggingface", "gputok-json", "gputok-model")
        for size in args.batch_sizes:
            batches = [lines[i:i + size] for i in range(0, len(lines), size)]
            best = dict.fromkeys(engines, float("inf"))
            for _ in range(args.passes):
                for name in engines:
                    run = fresh(name)
                    start = time.perf_counter()
                    for batch in batches:
                        run(batch)
                    best[name] = min(best[name], time.perf_counter() - start)
            for name, seconds in best.items():
                row = dict(family=family, batch_size=size, engine=name, seconds=seconds, mb_per_s=nbytes / 1e6 / seconds,
                           vs_huggingface=best["huggingface"] / seconds)
                rows.append(row)
                print(f"{family:8} {size:6} {name:>13} {row['mb_per_s']:8.2f} {row['vs_huggingface']:6.2f}x", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"threads": args.threads, "lines": args.lines, "rows": rows}, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
