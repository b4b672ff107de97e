"""Encoding with many added tokens: gputok against huggingface, the same tokenizer.json.

    python benchmarks/added_tokens.py [--counts 11 256 5000] [--lines 6000] [--json bench-results/added_tokens.json]

The BERT tokenizer.json of the tests (``gputok.assets``) plus K added tokens: the commonest words of
over three letters in the first 100,000 lines of the bench's English corpus, as
``tokenizer.add_tokens`` adds them (``normalized: true``: matched in the lowercased text) and with
``normalized: false`` (matched in the raw text). Both engines encode ``--lines`` later lines of
that corpus in batches of 1,024 without special tokens, gputok ragged (``padding=False``), each
engine's best of ``--passes`` passes after an untimed one, whose ids are compared row by row. Up to
``gputok.literals.REGEX_MAX_LITERALS`` literals in one pattern (BERT's 5 special tokens count
among the unnormalized) gputok finds them with a Python regex, past that by a walk of their trie
(``kernels/literal_match_numba.py``): 11 words stay a regex either way. Prints MB/s and the ratio,
writes JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

from _timing import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[11, 256, 5000])
    parser.add_argument("--lines", type=int, default=6000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--json", default="bench-results/added_tokens.json")
    args = parser.parse_args()

    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from gputok import Tokenizer, assets

    lines = [line for line in assets.english_corpus(20).read_text(encoding="utf-8").splitlines() if line]
    counts = collections.Counter(word.strip(".,;:!?\"'()").lower() for line in lines[:100_000] for word in line.split())
    common = [word for word, _ in counts.most_common() if len(word) > 3]
    sample = lines[200_000:200_000 + args.lines]
    batches = [sample[i:i + 1024] for i in range(0, len(sample), 1024)]
    megabytes = sum(len(line.encode()) for line in sample) / 1e6
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.counts:
            for normalized in (True, False):
                hf = HFTokenizer.from_file(str(assets.fetch("bert-tokenizer-json")))
                hf.add_tokens([AddedToken(word, normalized=normalized) for word in common[:count]])
                hf.no_padding()
                hf.no_truncation()
                path = Path(tmp) / f"added-{count}-{normalized}.json"
                hf.save(str(path))
                ours = Tokenizer.from_file(path)
                def hf_pass() -> list[list[int]]:
                    return [e.ids for batch in batches for e in hf.encode_batch(batch, add_special_tokens=False)]

                def gputok_pass() -> list[dict]:
                    return [ours(batch, padding=False, add_special_tokens=False) for batch in batches]

                want, outs = hf_pass(), gputok_pass()  # compared below; gputok's kernels compiled, its trie built
                hf_best = best_of(hf_pass, args.passes, warmup=False)
                gputok_best = best_of(gputok_pass, args.passes, warmup=False)
                got = []
                for out in outs:
                    ids, bounds = out["input_ids"].tolist(), out["row_offsets"].tolist()
                    got += [ids[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]
                rows.append({"added_tokens": count, "normalized": normalized, "huggingface_mb_s": megabytes / hf_best,
                             "gputok_mb_s": megabytes / gputok_best, "ratio": hf_best / gputok_best,
                             "rows_differing": sum(a != b for a, b in zip(got, want))})
    print(f"{args.lines} lines ({megabytes:.2f} MB) in batches of 1,024, best of {args.passes}")
    print(f"{'tokens':>7} {'normalized':>10} {'huggingface MB/s':>17} {'gputok MB/s':>12} {'ratio':>7} "
          f"{'rows differing':>15}")
    for row in rows:
        print(f"{row['added_tokens']:>7} {str(row['normalized']):>10} {row['huggingface_mb_s']:>17.2f} "
              f"{row['gputok_mb_s']:>12.2f} {row['ratio']:>6.2f}x {row['rows_differing']:>15}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"lines": args.lines, "megabytes": megabytes, "rows": rows}, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
