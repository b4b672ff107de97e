"""The serial Python glue of a batch encoded in parts (``Tokenizer._cells_in_parts``), without the encoding.

    python benchmarks/glue_parts.py [--tokenizer unigram mistral] [--batch 1024] [--threads 2] [--repeats 5]

Each part's ``encode_part`` is replaced by a lookup of its result, made once by the real kernel
(and the tensors checked against the real call's), so a ``tok(batch, padding=True)`` call times
what runs around the parts: the join, lengths and cuts, the hand-off to the part threads, and the
post-processing on the caller. 200 batches of the 20 MB English corpus, best of ``--repeats``
passes, in microseconds per call. Then the pieces the glue is made of, each alone.
"""

from __future__ import annotations

import argparse

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
    args = parser.parse_args()

    import gputok
    from gputok import _cpu_threads, assets, bench
    from gputok.kernels import joined_texts_numba

    gputok.set_num_threads(args.threads)
    lines = assets.english_corpus(20).read_text(encoding="utf-8").splitlines()
    batches = [lines[k:k + args.batch] for k in range(0, 200 * args.batch, args.batch)]

    def per_call(fn) -> float:
        return best_of(lambda: [fn(batch) for batch in batches], args.repeats) / len(batches) * 1e6

    for name in args.tokenizer:
        tok = bench.make_tokenizer(name)
        _stubbed(tok, batches)
        print(f"{name}: {per_call(lambda batch: tok(batch, padding=True)):.1f} us of glue per call")

    units = [np.frombuffer("\x00".join(batch).encode("utf-32-le", "surrogatepass"), np.int32) for batch in batches]
    pieces = {
        '"\\x00".join': lambda batch: "\x00".join(batch),
        "np.fromiter(map(len))": lambda batch: np.fromiter(map(len, batch), dtype=np.int64, count=len(batch)),
        "split_joined (first batch)": lambda batch: joined_texts_numba.split_joined(
            units[0], len(batches[0]), args.threads, _cpu_threads.MIN_CHUNK_CHARS, _cpu_threads.PART_CALLER_CHARS),
        "map_chunks (no-op parts)": lambda batch: _cpu_threads.map_chunks(lambda part: part, [0, 1]),
    }
    for label, fn in pieces.items():
        print(f"{label:26s} {per_call(fn):7.1f} us")


if __name__ == "__main__":
    main()
