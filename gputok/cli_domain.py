"""``gputok extend`` and ``gputok fertility``: the command lines of :mod:`gputok.extending` and
:mod:`gputok.fertility` (registered by ``gputok.cli``).

    gputok extend --base tokenizer.json --corpus domain.txt --add 5000 --method vocab -o extended.json
    gputok fertility --tokenizer base.json --tokenizer extended.json heldout.txt general.txt --png fert.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    ex = sub.add_parser("extend", help="extend a pretrained vocabulary with the pieces of a domain corpus")
    ex.add_argument("--base", required=True, help="the base tokenizer.json (WordPiece or BPE) or BERT vocab.txt")
    ex.add_argument("--corpus", nargs="+", required=True, help="domain text files, read line by line")
    ex.add_argument("--add", type=int, default=5000, help="new pieces to add (default 5000)")
    ex.add_argument("--method", choices=["vocab", "added-tokens"], default="vocab",
                    help="vocab: into the model's vocabulary (no fragmentation); added-tokens: the common "
                         "practice, for comparison")
    ex.add_argument("--select", choices=["frequency", "savings"], default="frequency",
                    help="frequency: the most frequent domain-WordPiece pieces the base lacks; savings: greedy by "
                         "tokens saved on the corpus")
    ex.add_argument("--min-frequency", type=int, default=3, help="domain trainer's min_frequency and the fewest "
                                                                 "occurrences of a kept piece (default 3)")
    ex.add_argument("--phrases", default=None, help="a file of phrases, one a line, each kept as one word")
    ex.add_argument("-o", "--output", required=True, help="the extended tokenizer.json")
    ex.add_argument("--vocab-txt", default=None, help="also write vocab.txt (WordPiece)")
    ex.add_argument("--vocab-json", default=None, help="also write vocab.json (BPE, with --merges-txt)")
    ex.add_argument("--merges-txt", default=None, help="also write merges.txt (BPE, with --vocab-json)")
    ex.add_argument("--report", default=None, help="write what was added and why as JSON")

    fe = sub.add_parser("fertility", help="tokens per word and per line of tokenizers side by side, with a figure")
    fe.add_argument("--tokenizer", action="append", required=True,
                    help="a tokenizer.json or vocab.txt; repeat it (the first is the one compared against)")
    fe.add_argument("--name", action="append", default=None, help="a name per --tokenizer, in order")
    fe.add_argument("inputs", nargs="+", help="UTF-8 text files")
    fe.add_argument("--json", default=None, help="write the full report as JSON")
    fe.add_argument("--png", default=None, help="draw histograms of tokens per line")
    fe.add_argument("--top-words", type=int, default=30, help="words whose token count changed most (30)")


def run_extend(args: argparse.Namespace) -> int:
    from ._atomic import check_output_paths, write_atomic
    from .extending import extend_with_report
    from .phrases import read_phrases
    from .training import output_files

    options = {"-o": args.output, "--vocab-txt": args.vocab_txt, "--vocab-json": args.vocab_json,
               "--merges-txt": args.merges_txt, "--report": args.report}
    try:
        check_output_paths(options)
        phrases = read_phrases(args.phrases) if args.phrases else ()
        tok, report = extend_with_report(args.base, args.corpus, add=args.add, method=args.method,
                                         select=args.select, min_frequency=args.min_frequency, phrases=phrases)
        files: dict = output_files(tok, tokenizer_json_path=args.output, vocab_txt=args.vocab_txt,
                                   vocab_json=args.vocab_json, merges_txt=args.merges_txt)
        if args.report:
            files[Path(args.report)] = json.dumps(report.to_json(), ensure_ascii=False, indent=1)
        write_atomic(files)
    except (ValueError, TypeError, OSError) as e:
        raise SystemExit(f"gputok extend: {e}") from e
    saved = 1 - report.domain_tokens_extended / max(1, report.domain_tokens_base)
    print(f"gputok extend: {report.added:,} pieces added ({report.method}, {report.select}): ids "
          f"{report.base_size:,}..{report.new_size - 1:,}; the corpus's words take {report.domain_tokens_base:,} -> "
          f"{report.domain_tokens_extended:,} tokens as vocabulary pieces ({100 * saved:.1f}% fewer); wrote "
          f"{', '.join(p for p in options.values() if p)}", file=sys.stderr)
    return 0


def run_fertility(args: argparse.Namespace) -> int:
    from ._atomic import check_output_paths, write_atomic
    from .fertility import fertility, plot, table, without_lengths

    try:
        check_output_paths({"--json": args.json, "--png": args.png})
        for name in args.inputs:
            if not Path(name).is_file():
                raise ValueError(f"input file {name} does not exist")
        report = fertility(args.tokenizer, args.inputs, names=args.name, top_words=args.top_words)
    except (ValueError, OSError) as e:
        raise SystemExit(f"gputok fertility: {e}") from e
    print(table(report))
    for file, entry in report["files"].items():
        for name, words in entry["changed_words"].items():
            print(f"\n{Path(file).name}: words whose token count changed most, {report['tokenizers'][0]} -> {name}")
            for w in words[:10]:
                print(f"  {w['word']!r} x{w['count']}: {' '.join(w['before'])}  ->  {' '.join(w['after'])}")
            for sample in entry["samples"][name][:2]:
                print(f"  sample, {sample['tokens_before']} -> {sample['tokens_after']} tokens: {sample['line'][:100]!r}\n"
                      f"    {' '.join(sample['before'])[:160]}\n    {' '.join(sample['after'])[:160]}")
    files: dict = {}
    if args.json:
        files[Path(args.json)] = json.dumps(without_lengths(report), ensure_ascii=False, indent=1)
    if args.png:
        files[Path(args.png)] = lambda tmp: plot(report, tmp)
    write_atomic(files)
    return 0
