"""Long inputs: gputok vs the reference on one long line, per family; seconds, peak RSS, same ids.

    python benchmarks/long_inputs.py [--families cl100k gpt2 mistral bert] [--cases line10mb ...]

Each (family, case, engine) runs in its own process, so each peak RSS (``ru_maxrss``) is that
engine's alone; the loaded tokenizer's and the text's share is printed apart (``base MB``: the peak
before the encode), ``extra MB`` is what the encode added. Cases: ``line10mb`` (the English corpus's
lines joined by spaces, cut to 10,000,000 characters), ``word1mb`` (1,000,000 random ASCII
letters), ``ab1mb`` ("ab" * 500,000), ``a1mb`` ("a" * 10**6). References: tiktoken
``encode_ordinary`` (cl100k, gpt2), ``sentencepiece`` ``encode`` (Mistral's BPE model),
huggingface ``tokenizers`` (BERT, padding and truncation off). One encode per process, after a
warm-up encode of a short text with one long word (``WARM_UP``); ``--repeat N`` runs each engine N times, alternating, and keeps
the fastest (the machine is shared). ``cpu s``: the encode's user + system CPU seconds, all
threads (less sensitive than wall seconds to other processes on the machine). Writes
bench-results/long_inputs.json.
"""

import argparse
import hashlib
import json
import random
import resource
import string
import subprocess
import sys
import time
from pathlib import Path

FAMILIES = ("cl100k", "gpt2", "mistral", "bert")
CASES = ("line10mb", "word1mb", "ab1mb", "a1mb")
# Loads what a first call needs, for every engine: words of both kinds, short ones and one long
# enough for gputok's long-word kernel (whose first call imports numba: ~0.5 s once per process).
WARM_UP = "Hello, world! 12345 don't " + "ab" * 200


def make_text(case: str) -> str:
    if case == "line10mb":
        from gputok import assets

        path = assets.english_corpus(20)
        with open(path, encoding="utf-8") as f:
            text = " ".join(f.read().splitlines())
        return text[:10_000_000]
    n = 1_000_000
    if case == "word1mb":
        return "".join(random.Random(0).choices(string.ascii_letters, k=n))
    if case == "ab1mb":
        return "ab" * (n // 2)
    if case == "a1mb":
        return "a" * n
    raise ValueError(f"unknown case {case!r}; choose from {CASES}")


def load(family: str, engine: str):
    """An ``encode(text) -> list[int]`` for the family, by gputok or by the reference."""
    from gputok import Tokenizer, assets

    if family in ("cl100k", "gpt2"):
        path = assets.fetch(f"{family}-tiktoken")
        if engine == "gputok":
            return Tokenizer.from_tiktoken(path, pattern=family).encode
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from gputok.regex_split import PATTERNS

        reference = tiktoken.Encoding(family, pat_str=PATTERNS[family], special_tokens={},
                                      mergeable_ranks=load_tiktoken_bpe(str(path)))
        return reference.encode_ordinary
    if family == "mistral":
        path = str(assets.fetch("mistral-sp-model"))
        if engine == "gputok":
            return Tokenizer.from_sentencepiece(path).encode
        import sentencepiece

        return sentencepiece.SentencePieceProcessor(model_file=path).encode
    if family == "bert":
        path = str(assets.fetch("bert-tokenizer-json"))
        if engine == "gputok":
            return Tokenizer.from_file(path).encode
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_file(path)
        hf.no_padding()
        hf.no_truncation()
        return lambda text: hf.encode(text).ids
    raise ValueError(f"unknown family {family!r}; choose from {FAMILIES}")


def worker(family: str, case: str, engine: str) -> dict:
    encode = load(family, engine)
    text = make_text(case)
    encode(WARM_UP)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    ids = encode(text)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    base, peak = before.ru_maxrss / 1024, after.ru_maxrss / 1024
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    digest = hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()
    return dict(family=family, case=case, engine=engine, seconds=seconds, cpu_seconds=cpu, base_mb=base, peak_mb=peak,
                tokens=len(ids), digest=digest)


def run(family: str, case: str, engine: str, timeout: float) -> dict:
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", family, case, engine], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(family=family, case=case, engine=engine, error=f"over {timeout} s")
    if done.returncode:
        return dict(family=family, case=case, engine=engine, error=done.stderr.strip().splitlines()[-1:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--cases", nargs="+", default=["line10mb"], choices=CASES)
    parser.add_argument("--engines", nargs="+", default=["gputok", "reference"], choices=["gputok", "reference"])
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--repeat", type=int, default=1, help="runs per engine (alternating); the fastest is kept")
    parser.add_argument("--json", default="bench-results/long_inputs.json")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    rows = []
    print(f"{'family':<8} {'case':<9} {'engine':<9} {'seconds':>8} {'cpu s':>6} {'base MB':>8} {'extra MB':>9} {'tokens':>9} same ids")
    for family in args.families:
        for case in args.cases:
            runs = {engine: [] for engine in args.engines}
            for _ in range(args.repeat):  # alternating engines; the fastest run of each (a shared machine)
                for engine in args.engines:
                    runs[engine].append(run(family, case, engine, args.timeout))
            got = {engine: next((r for r in rs if "error" in r), None) or min(rs, key=lambda r: r["seconds"])
                   for engine, rs in runs.items()}
            digests = {r.get("digest") for r in got.values()}
            for engine, r in got.items():
                r["same_ids"] = len(digests) == 1 and None not in digests
                rows.append(r)
                if "error" in r:
                    print(f"{family:<8} {case:<9} {engine:<9} error: {r['error']}")
                    continue
                print(f"{family:<8} {case:<9} {engine:<9} {r['seconds']:>8.2f} {r['cpu_seconds']:>6.2f} {r['base_mb']:>8.0f} "
                      f"{r['peak_mb'] - r['base_mb']:>9.0f} {r['tokens']:>9} {r['same_ids']}", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
