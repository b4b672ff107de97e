"""Encoding speed of tokenizer.json splits spelled otherwise than the named rules (issue 18, item 3).

    PYTHONPATH=. python benchmarks/split_rules.py [--batch 65536] [--repeats 3] [--threads N] [--json PATH]

One process, cl100k's ranks in every row, the first ``batch`` non-blank lines of the 20 MB English
corpus in one call (``tok(lines, padding=False)``: flat ids and row offsets), the word cache
emptied before every call. Rows, timed interleaved, best of ``repeats``:

- ``cl100k .tiktoken``: ``Tokenizer.from_tiktoken(cl100k_base.tiktoken, pattern="cl100k")``, the anchor;
- ``cl100k respelled``: a tokenizer.json whose Split regex is cl100k's without possessive
  quantifiers (recognised as cl100k by :func:`gputok.split_recognition.rule_for`);
- ``llama3``: Llama 3's regex (its own rule); ``qwen2``: Qwen2's (single digits);
- ``deepseek-v3``: DeepSeek-V3's Sequence of three Splits (:mod:`gputok.split_sequences`);
- ``regex module``: a regex no rule matches (Qwen2's with ``\\p{N}{1,2}``), through the ``regex``
  module, on the first 1/16 of the lines (it is ~5-10x slower).

Prints MB/s (UTF-8 bytes of the lines) and the ratio to the anchor; ``--json`` writes the table.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from _timing import first_lines
from gputok import Tokenizer, assets
from gputok.regex_split import PATTERNS
from gputok.split_sequences import DEEPSEEK_V3
from gputok.word_cache import WordCache

CL100K_RESPELLED = (PATTERNS["cl100k"].replace("++", "+").replace("?+", "?").replace("*+", "*")
                    .replace("{1,3}+", "{1,3}"))
NO_RULE = PATTERNS["qwen2"].replace(r"|\p{N}|", r"|\p{N}{1,2}|")


def with_split(anchor: Tokenizer, pattern: str | tuple[str, ...]) -> Tokenizer:
    """The anchor's tokenizer.json with its Split regex replaced by ``pattern`` (a tuple: a
    Sequence of Isolated Splits before its ByteLevel step)."""
    spec = anchor.to_json()
    steps = spec["pre_tokenizer"]["pretokenizers"]
    if isinstance(pattern, tuple):
        steps[:1] = [{**steps[0], "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False} for p in pattern]
    else:
        steps[0]["pattern"]["Regex"] = pattern
    return Tokenizer.from_str(json.dumps(spec))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    anchor = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    rows = {"cl100k .tiktoken": anchor}
    for name, pattern in (("cl100k respelled", CL100K_RESPELLED), ("llama3", PATTERNS["llama3"]),
                          ("qwen2", PATTERNS["qwen2"]), ("deepseek-v3", DEEPSEEK_V3), ("regex module", NO_RULE)):
        started = time.perf_counter()
        rows[name] = with_split(anchor, pattern)
        print(f"{name}: loaded in {time.perf_counter() - started:.2f} s, split rule {rows[name].pre_tokenizer.rule}")
    lines = first_lines(args.batch)
    batches = {name: lines[: max(1, len(lines) // 16)] if name == "regex module" else lines for name in rows}
    megabytes = {name: sum(len(t.encode()) for t in batch) / 1e6 for name, batch in batches.items()}

    best = dict.fromkeys(rows, float("inf"))
    for name, tok in rows.items():  # warm up: compile or load the kernels
        tok(batches[name][:256], padding=False)
    for _ in range(args.repeats):
        for name, tok in rows.items():
            tok.word_cache = WordCache()
            started = time.perf_counter()
            tok(batches[name], padding=False)
            best[name] = min(best[name], time.perf_counter() - started)

    anchor_speed = megabytes["cl100k .tiktoken"] / best["cl100k .tiktoken"]
    table = []
    print(f"\nbatch {args.batch} lines, {args.threads} threads, best of {args.repeats}")
    print(f"{'row':<20} {'split rule':<12} {'lines':>7} {'MB/s':>8} {'vs anchor':>10}")
    for name, tok in rows.items():
        speed = megabytes[name] / best[name]
        rule = tok.pre_tokenizer.rule or "(regex)"
        table.append({"row": name, "rule": rule, "lines": len(batches[name]), "mb_per_s": speed,
                      "ratio": speed / anchor_speed})
        print(f"{name:<20} {rule:<12} {len(batches[name]):>7} {speed:>8.2f} {speed / anchor_speed:>9.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": args.batch, "threads": args.threads, "repeats": args.repeats, "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
