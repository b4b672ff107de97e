"""NFC / NFD / NFKC / NFKD on the CPU: the numba kernel against the Python path (the normalizers'
off the CPU kernels: ``unicode_forms.aligned`` per text not already in the form), one process,
interleaved.

Inputs: consecutive lines of the parity corpus (English, Chinese, Shakespeare, GO terms: the
English and Shakespeare parts are mostly in every form already, which the Python path skips at
C speed) and the same lines in NFD (every accent decomposed: the Python path then rewrites them
a character at a time), in batches of 32, 1,024 and 16,384 lines; codepoints made once, outside the timing; best
of ``--repeats``. Both paths run on the calling thread, so the time reported is that thread's CPU
time (``time.thread_time``): on a shared, oversubscribed machine wall time mostly measured the
preemptions of calls longer than a scheduler slice. Prints a table and writes JSON.

    PYTHONPATH=. python benchmarks/bench_nf_forms.py [--repeats 5] [--json bench-results/nf_forms.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import unicodedata
from pathlib import Path

from _timing import best_of

from gputok import _dispatch, assets, ingest
from gputok import normalizers as N


def python_path(form: str):
    """The normalizer off the CPU kernels (``_dispatch.use_backend("torch")``)."""
    normalizer = getattr(N, form)()

    def call(text):
        with _dispatch.use_backend("torch"):
            return normalizer(text)
    return call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default="bench-results/nf_forms.json")
    args = parser.parse_args()
    lines = assets.parity_corpus().read_text(encoding="utf-8").splitlines()
    step = max(1, len(lines) // 16384)
    sample = lines[::step][:16384]
    inputs = {"parity": sample, "parity-NFD": [unicodedata.normalize("NFD", s) for s in sample]}
    rows = []
    print("NF forms on the CPU, thread CPU ms per call (best of %d)" % args.repeats)
    print(f"{'input':<12}{'form':<6}{'batch':>7}{'chars':>9}{'kernel ms':>11}{'python ms':>11}{'speedup':>9}")
    for name, texts in inputs.items():
        for batch in (32, 1024, 16384):
            text = ingest.codepoints(texts[:batch])
            for form in ("NFC", "NFD", "NFKC", "NFKD"):
                with _dispatch.use_backend("numba"):
                    kernel = getattr(N, form)()
                    python = python_path(form)
                    ours = best_of(lambda: kernel(text), args.repeats, clock=time.thread_time)
                    theirs = best_of(lambda: python(text), args.repeats, clock=time.thread_time)
                rows.append({"input": name, "form": form, "batch": batch, "chars": text.values.numel(),
                             "kernel_s": ours, "python_s": theirs, "speedup": theirs / ours})
                print(f"{name:<12}{form:<6}{batch:>7}{text.values.numel():>9}{ours * 1e3:>11.2f}{theirs * 1e3:>11.2f}{theirs / ours:>8.1f}x",
                      flush=True)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": "cpu", "cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
