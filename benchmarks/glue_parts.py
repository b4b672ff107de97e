"""The serial Python glue of a batch encoded in parts (``Tokenizer._cells_in_parts``), without the encoding.

    python benchmarks/glue_parts.py [--tokenizer unigram mistral] [--batch 1024] [--threads 2] [--repeats 5]
                                    [--json bench-results/glue_parts.json]

Each part's ``encode_part`` is replaced by a lookup of its result, made once by the real kernel
(and the tensors checked against the real call's), so a ``tok(batch, padding=True)`` call times
what runs around the parts: the join, lengths and cuts, the hand-off to the part threads, and the
post-processing on the caller. 200 batches of the 20 MB English corpus, best of ``--repeats``
passes, in microseconds per call. Then the pieces the glue is made of, each alone. The figures
also go to ``--json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from _timing import best_of


def _stubbed(tok, batches):
    """``tok``'s whole kernel with ``encode_part`` a lookup of what it returned for these batches."""
    whole = tok._whole_pipeline_kernel
    real, made = whole.encode_part, {}

    def key(units, lengths):
        return units.size, lengths.size, int(lengths[0]), int(lengths[-1]), units[:8].tobytes(), units[-8:].tobytes()

    def record(units, lengths):
        made[key(units, lengths)] = got = real(units, lengths)
        return got

    whole.encode_part = record
    want = [tok(batch, padding=True) for batch in batches]
    whole.encode_part = lambda units, lengths: made[key(units, lengths)]
    for batch, expected in zip(batches, want):
        got = tok(batch, padding=True)
        assert all(torch.equal(got[name], expected[name]) for name in expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", nargs="+", default=["unigram", "mistral"])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default="bench-results/glue_parts.json")
    args = parser.parse_args()

    import gputok
    from gputok import _cpu_threads, assets, bench
    from gputok.tokenizer import _joined_part_starts

    gputok.set_num_threads(args.threads)
    lines = assets.english_corpus(20).read_text(encoding="utf-8").splitlines()
    batches = [lines[k:k + args.batch] for k in range(0, 200 * args.batch, args.batch)]

    def per_call(fn) -> float:
        return best_of(lambda: [fn(batch) for batch in batches], args.repeats) / len(batches) * 1e6

    glue_us = {}
    for name in args.tokenizer:
        tok = bench.make_tokenizer(name)
        _stubbed(tok, batches)
        glue_us[name] = per_call(lambda batch: tok(batch, padding=True))
        print(f"{name}: {glue_us[name]:.1f} us of glue per call")

    joined = ["\x00".join(batch) for batch in batches]
    pieces = {
        '"\\x00".join': lambda batch: "\x00".join(batch),
        "UTF-32 encode (first batch)": lambda batch: joined[0].encode("utf-32-le", "surrogatepass"),
        "part starts (first batch)": lambda batch: _joined_part_starts(joined[0], len(batches[0]), args.threads),
        "np.fromiter(map(len))": lambda batch: np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)),
        "map_chunks (no-op parts)": lambda batch: _cpu_threads.map_chunks(lambda part: part, [0, 1]),
    }
    piece_us = {}
    for label, fn in pieces.items():
        piece_us[label] = per_call(fn)
        print(f"{label:26s} {piece_us[label]:7.1f} us")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"batch": args.batch, "threads": args.threads, "repeats": args.repeats,
                               "glue_us_per_call": glue_us, "pieces_us_per_call": piece_us}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
