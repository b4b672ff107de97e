"""``datasets.Dataset.map(batched=True)`` with gputok against huggingface, end to end.

Both tokenizers are loaded from the same file, the cl100k ``tokenizer.json`` that gputok writes
(from the tiktoken ranks), a fresh load in each pass (gputok's from its disk cache after the first
load: what a new process meets). Timed per pass: the load, then ``Dataset.map`` over 20 MB of
English lines (``gputok.assets.english_corpus``) in memory, default batch size (1,000), which
includes datasets' fingerprint of the function (hashing the pickled tokenizer). gputok's function
is ``tok.datasets_map_fn()``; huggingface's is ``lambda batch: hf(batch["text"])`` with
``PreTrainedTokenizerFast(tokenizer_file=...)``. Both give ``input_ids`` and ``attention_mask``
per line, unpadded; the ids are compared. The engines alternate pass by pass; the best pass of
each is reported.

    python benchmarks/datasets_map.py [--megabytes 20] [--passes 3] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=20, choices=[1, 5, 20, 100])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="gputok.set_num_threads (default: gputok's choice)")
    parser.add_argument("--out", default="bench-results/datasets_map.json")
    args = parser.parse_args(argv)

    import datasets
    import transformers

    import gputok
    from gputok import assets
    from gputok._cache import cache_dir

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    if args.threads is not None:
        gputok.set_num_threads(args.threads)
    path = cache_dir() / "bench" / "cl100k-tokenizer.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").save(path)
    lines = Path(assets.english_corpus(args.megabytes)).read_text(encoding="utf-8").splitlines()
    dataset = datasets.Dataset.from_dict({"text": lines})
    megabytes = sum(map(len, lines)) / 1e6

    def run_gputok():
        start = time.perf_counter()
        tok = gputok.Tokenizer.from_file(path)
        loaded = time.perf_counter()
        out = dataset.map(tok.datasets_map_fn(), batched=True)
        return loaded - start, time.perf_counter() - loaded, out

    def run_hf():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
        loaded = time.perf_counter()
        out = dataset.map(lambda batch: hf(batch["text"]), batched=True)
        return loaded - start, time.perf_counter() - loaded, out

    best = {"gputok": None, "huggingface": None}
    outputs = {}
    for _ in range(args.passes):
        for name, run in (("gputok", run_gputok), ("huggingface", run_hf)):
            load, mapped, out = run()
            outputs[name] = out
            if best[name] is None or load + mapped < sum(best[name]):
                best[name] = (load, mapped)
    same = outputs["gputok"]["input_ids"] == outputs["huggingface"]["input_ids"]
    ratio = sum(best["gputok"]) / sum(best["huggingface"])
    print(f"Dataset.map(batched=True), {len(lines):,} lines, {megabytes:.1f} MB, cl100k tokenizer.json "
          f"({path.stat().st_size / 1e6:.1f} MB), best of {args.passes} passes, torch threads "
          f"{__import__('torch').get_num_threads()}, {os.cpu_count()} CPUs (shared machine)")
    print("| engine | load s | map s (incl. fingerprint) | total s |\n|---|---:|---:|---:|")
    for name, (load, mapped) in best.items():
        print(f"| {name} | {load:.2f} | {mapped:.2f} | {load + mapped:.2f} |")
    print(f"gputok / huggingface time: {ratio:.2f}x; same input_ids: {same}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "lines": len(lines), "megabytes": megabytes, "passes": args.passes, "same_ids": same, "ratio": ratio,
        "best": {name: {"load_s": load, "map_s": mapped} for name, (load, mapped) in best.items()},
        "argv": sys.argv[1:]}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
