"""Tokenizer load time and pickle size: gputok against huggingface ``tokenizers`` on the same files.

Each load runs in a fresh process (a cold process; gputok's disk cache warm: one load of each
file first fills it, as any earlier process on the machine would have), engines and files
interleaved round by round; the best round is reported. Timed: ``Tokenizer.from_file(path)``
alone (the imports are reported apart), and gputok's first ``encode`` after it (loading the
compiled kernels from numba's cache). Pickle sizes are ``len(pickle.dumps(tokenizer))``.

Files: BERT's tokenizer.json (the ``bert-tokenizer-json`` asset), the cl100k tokenizer.json that
gputok writes from the tiktoken ranks, and a Llama-3-size byte-level BPE: the first 128,000 ranks
of o200k (Llama 3 has 128,000 BPE tokens), written as tokenizer.json by gputok, when the o200k
ranks are in the cache (``o200k-tiktoken``); else a 128,000-token stand-in made from cl100k's ranks
by adding merged pairs of its tokens.

    python benchmarks/load_time.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

LLAMA3_TOKENS = 128_000

_PROBE = r"""
import json, pickle, sys, time
engine, path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if engine == "gputok":
    import gputok
    imported = time.perf_counter()
    tok = gputok.Tokenizer.from_file(path)
    loaded = time.perf_counter()
    tok.encode("Hello, world! How are you?")
    first = time.perf_counter() - loaded
else:
    from tokenizers import Tokenizer
    imported = time.perf_counter()
    tok = Tokenizer.from_file(path)
    loaded = time.perf_counter()
    tok.encode("Hello, world! How are you?")
    first = time.perf_counter() - loaded
print(json.dumps({"import_s": imported - start, "load_s": loaded - imported, "first_encode_s": first,
                  "pickle_bytes": len(pickle.dumps(tok))}))
"""


def _files() -> dict[str, Path]:
    import gputok
    from gputok import assets
    from gputok._cache import cache_dir

    folder = cache_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    cl100k = folder / "cl100k-tokenizer.json"
    if not cl100k.is_file():
        gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").save(cl100k)
    llama = folder / "llama3-size-bpe-tokenizer.json"
    if not llama.is_file():
        ranks = folder / "llama3-size.tiktoken"
        try:
            o200k = Path(assets.fetch("o200k-tiktoken"))
        except (KeyError, ValueError):
            o200k = cache_dir() / "vocab" / "o200k-tiktoken" / "o200k_base.tiktoken"
        if o200k.is_file():
            lines = o200k.read_bytes().splitlines()[:LLAMA3_TOKENS]
            pattern = "o200k"
        else:
            lines = _cl100k_extended(Path(assets.fetch("cl100k-tiktoken")))
            pattern = "cl100k"
        ranks.write_bytes(b"\n".join(lines) + b"\n")
        gputok.Tokenizer.from_tiktoken(ranks, pattern=pattern).save(llama)
    return {"bert": Path(assets.fetch("bert-tokenizer-json")), "cl100k": cl100k, "llama3-size": llama}


def _cl100k_extended(path: Path) -> list[bytes]:
    """cl100k's ranks plus merged pairs of its tokens (each a new token of the next rank) up to
    128,000 tokens: a byte-level BPE of Llama 3's size when o200k is not at hand."""
    import base64

    lines = path.read_bytes().splitlines()
    tokens = [base64.b64decode(line.split()[0]) for line in lines]
    known = set(tokens)
    left = 1000
    while len(lines) < LLAMA3_TOKENS:
        for right in range(1000, 100_000, 7):
            merged = tokens[left] + tokens[right]
            if merged not in known:
                known.add(merged)
                lines.append(base64.b64encode(merged) + b" %d" % len(lines))
                if len(lines) == LLAMA3_TOKENS:
                    break
        left += 1
    return lines


def _probe(engine: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, engine, str(path)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="bench-results/load_time.json")
    args = parser.parse_args(argv)
    files = _files()
    for path in files.values():
        _probe("gputok", path)  # fills gputok's disk cache, as an earlier process would have
    best: dict[tuple[str, str], dict] = {}
    for _ in range(args.rounds):
        for name, path in files.items():
            for engine in ("gputok", "huggingface"):
                result = _probe(engine, path)
                if (name, engine) not in best or result["load_s"] < best[name, engine]["load_s"]:
                    best[name, engine] = result
    print(f"Tokenizer.from_file in a fresh process, gputok's disk cache warm; best of {args.rounds} interleaved "
          "rounds (shared 2-core machine)")
    print("| file | size MB | gputok load s | hf load s | gputok / hf | gputok first encode s | gputok pickle MB "
          "| hf pickle MB | gputok / hf import s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    rows = {}
    for name, path in files.items():
        ours, theirs = best[name, "gputok"], best[name, "huggingface"]
        rows[name] = {"file": str(path), "bytes": path.stat().st_size, "gputok": ours, "huggingface": theirs}
        print(f"| {name} | {path.stat().st_size / 1e6:.1f} | {ours['load_s']:.3f} | {theirs['load_s']:.3f} | "
              f"{ours['load_s'] / theirs['load_s']:.2f}x | {ours['first_encode_s']:.3f} | "
              f"{ours['pickle_bytes'] / 1e6:.2f} | {theirs['pickle_bytes'] / 1e6:.2f} | "
              f"{ours['import_s']:.2f} / {theirs['import_s']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rounds": args.rounds, "files": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
