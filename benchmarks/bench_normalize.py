"""Per-call time of ingest and each normalizer, numba kernels vs the torch twins, on the CPU.

Same inputs for both paths in one process: the first lines of the 20 MB English corpus in
batches of 1, 32 and 1,024 lines (codepoints made once, outside the timing); best of
``--repeats`` repeats, each the mean of enough calls to last ~0.1 s.

    PYTHONPATH=. python benchmarks/bench_normalize.py [--repeats 5] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from gputok import _dispatch, assets, ingest
from gputok import normalizers as N
from gputok.sentencepiece_model import read_model


def per_call(fn, repeats: int) -> float:
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.02:
        fn()
        calls += 1
    number = max(1, int(calls * 0.1 / max(time.perf_counter() - start, 1e-9)))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(1024)]
    charsmap = read_model(str(assets.fetch("sp-test-model"))).normalizer.precompiled_charsmap
    stages = {
        "ingest.codepoints": lambda texts, text: ingest.codepoints(texts),
        "ingest.utf8_bytes": lambda texts, text: ingest.utf8_bytes(text),
    }
    for name, normalizer in [("BertNormalizer", N.BertNormalizer()), ("Lowercase", N.Lowercase()),
                             ("Precompiled (nmt_nfkc)", N.Precompiled(charsmap)),
                             ("SentencePiece (nmt_nfkc)", N.SentencePieceNormalizer(charsmap)),
                             ("Prepend", N.Prepend("▁")), ("Replace ' '", N.Replace({"String": " "}, "▁")),
                             ("Replace regex ' {2,}'", N.Replace({"Regex": " {2,}"}, " ")),
                             ("Replace regex '\\A +| +\\z'", N.Replace({"Regex": "\\A +| +\\z"}, "")),
                             ("Replace string 'th'", N.Replace({"String": "th"}, "TH")),
                             ("Replace regex '\\d'", N.Replace({"Regex": "\\d"}, "0")),
                             ("Replace regex '\\bth'", N.Replace({"Regex": "\\bth"}, "TH")),  # no kernel takes it
                             ("Strip", N.Strip()),
                             ("NFKC", N.NFKC()),
                             ("Sequence", N.Sequence([N.Strip(), N.Lowercase(), N.Prepend("▁"),
                                                      N.Replace({"String": " "}, "▁")]))]:
        stages[name] = lambda texts, text, n=normalizer: n(text)
    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; per call, best of {args.repeats}")
    print(f"{'stage':28} {'batch':>6} {'numba':>11} {'torch':>11} {'torch/numba':>11}")
    for name, stage in stages.items():
        for batch in (1, 32, 1024):
            texts = lines[:batch]
            text = ingest.codepoints(texts)
            numba_s = per_call(lambda: stage(texts, text), args.repeats)
            with _dispatch.use_backend("torch"):
                torch_text = ingest.codepoints(texts)
                torch_s = per_call(lambda: stage(texts, torch_text), args.repeats)
            rows.append({"stage": name, "batch": batch, "numba_s": numba_s, "torch_s": torch_s})
            print(f"{name:28} {batch:6} {numba_s * 1e6:9.1f}us {torch_s * 1e6:9.1f}us {torch_s / numba_s:10.1f}x",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
