"""Adversarial inputs for byte-level BPE: gputok vs tiktoken on 1 MB strings, one run.

    python benchmarks/adversarial_bpe.py [--tokenizer cl100k|gpt2] [--megabytes 1]

A megabyte without spaces (random letters), of one repeated letter, and of random digits. Prints
the seconds of each engine and whether the ids agree; writes bench-results/adversarial_bpe.json.
"""

import argparse
import json
import random
import string
import time
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from gputok import Tokenizer, assets
from gputok.regex_split import PATTERNS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", choices=["gpt2", "cl100k"], default="cl100k")
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--json", default="bench-results/adversarial_bpe.json")
    args = parser.parse_args()
    path = assets.fetch(f"{args.tokenizer}-tiktoken")
    reference = tiktoken.Encoding(args.tokenizer, pat_str=PATTERNS[args.tokenizer], special_tokens={},
                                  mergeable_ranks=load_tiktoken_bpe(str(path)))
    ours = Tokenizer.from_tiktoken(path, pattern=args.tokenizer)
    n = int(args.megabytes * 1_000_000)
    rng = random.Random(0)
    cases = {"no spaces": "".join(rng.choices(string.ascii_letters, k=n)), "one letter": "a" * n,
             "digits": "".join(rng.choices(string.digits, k=n))}
    rows = []
    print(f"{args.tokenizer}, {args.megabytes} MB strings, CPU")
    print(f"{'input':<12} {'gputok s':>9} {'tiktoken s':>11} {'same ids':>9}")
    for name, text in cases.items():
        start = time.perf_counter()
        ids = ours.encode(text)
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        expected = reference.encode_ordinary(text)
        tiktoken_s = time.perf_counter() - start
        rows.append(dict(input=name, gputok_s=ours_s, tiktoken_s=tiktoken_s, same_ids=ids == expected))
        print(f"{name:<12} {ours_s:>9.2f} {tiktoken_s:>11.2f} {str(ids == expected):>9}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"tokenizer": args.tokenizer, "megabytes": args.megabytes, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
