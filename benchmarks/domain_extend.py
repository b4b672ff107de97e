"""Issue 20's acceptance experiment: extend BERT uncased with 5,000 Gene Ontology pieces, measure fertility.

Data (fetched and cached by ``gputok.assets``): the Gene Ontology ``term: definition`` lines,
every 10th line held out and the rest the domain corpus; general English: the first
``--general-lines`` lines of the Linux kernel docs. Then, with the command line:

    gputok extend --base BERT --corpus go-train.txt --add 5000 --method vocab -o vocab.json
    gputok extend --base BERT --corpus go-train.txt --add 5000 --method added-tokens -o added.json
    gputok extend --base BERT --corpus go-train.txt --add 5000 --method vocab --select savings -o savings.json
    gputok fertility --tokenizer BERT --tokenizer vocab.json --tokenizer savings.json --tokenizer added.json \\
        go-heldout.txt kernel-docs.txt --json fertility.json --png fertility.png

and a parity check of the three extended tokenizer.json files against huggingface ``tokenizers`` on the
parity corpus. Writes everything under ``--out`` (default ``bench-results/domain``).

    python benchmarks/domain_extend.py [--add 5000] [--general-lines 60000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from pathlib import Path

from gputok import assets
from gputok.cli import main as gputok_main


def run(args: list[str]) -> float:
    print("$ gputok " + " ".join(shlex.quote(a) for a in args), flush=True)
    start = time.perf_counter()
    gputok_main(args)
    return time.perf_counter() - start


def parity(tokenizer_json: Path, lines: list[str]) -> int:
    from tokenizers import Tokenizer as HFTokenizer

    import gputok

    hf = HFTokenizer.from_file(str(tokenizer_json))
    ours = gputok.Tokenizer.from_file(tokenizer_json)
    for tok in (hf, ours):  # the file's padding and truncation sections apply to both engines' encode_batch
        tok.no_padding()
        tok.no_truncation()
    return sum(a != [*b.ids] for a, b in zip(ours.encode_batch(lines), hf.encode_batch(lines)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--add", type=int, default=5000)
    parser.add_argument("--general-lines", type=int, default=60000, help="lines of the kernel docs (general English)")
    parser.add_argument("--out", default="bench-results/domain")
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    go = assets.corpus("go-terms").read_text(encoding="utf-8").splitlines(keepends=True)
    (out / "go-train.txt").write_text("".join(l for i, l in enumerate(go) if i % 10), encoding="utf-8")
    (out / "go-heldout.txt").write_text("".join(go[::10]), encoding="utf-8")
    with open(assets.corpus("kernel-docs"), encoding="utf-8") as f:
        general = [next(f) for _ in range(options.general_lines)]
    (out / "kernel-docs.txt").write_text("".join(general), encoding="utf-8")
    base = str(assets.fetch("bert-tokenizer-json"))
    seconds = {}
    for name, extra in (("vocab", []), ("added", ["--method", "added-tokens"]), ("savings", ["--select", "savings"])):
        seconds[name] = run(["extend", "--base", base, "--corpus", str(out / "go-train.txt"), "--add", str(options.add),
                             *extra, "-o", str(out / f"{name}.json"), "--report", str(out / f"{name}-report.json")])
    names = ["bert-base-uncased", "vocab (frequency)", "vocab (savings)", "added-tokens (frequency)"]
    tokenizers = [base] + [str(out / f"{n}.json") for n in ("vocab", "savings", "added")]
    seconds["fertility"] = run(["fertility", *[a for t, n in zip(tokenizers, names) for a in ("--tokenizer", t, "--name", n)],
                                str(out / "go-heldout.txt"), str(out / "kernel-docs.txt"),
                                "--json", str(out / "fertility.json"), "--png", str(out / "fertility.png")])
    lines = assets.parity_corpus().read_text(encoding="utf-8").splitlines()
    mismatches = {name: parity(out / f"{name}.json", lines) for name in ("vocab", "savings", "added")}
    print(f"parity with huggingface on the parity corpus ({len(lines):,} lines): mismatched lines {mismatches}")
    (out / "summary.json").write_text(json.dumps({"seconds": seconds, "parity_mismatches": mismatches}, indent=1))


if __name__ == "__main__":
    main()
