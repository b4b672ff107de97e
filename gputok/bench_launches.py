"""What one encode call dispatches on the CUDA code path: Triton launches, torch ops, host syncs.

``gputok bench --count-launches`` runs, for each family, one call of 32 and one of 1,024 English
lines under ``GPUTOK_BACKEND=triton`` with ``TRITON_INTERPRET=1`` on CPU tensors: exactly the code
a CUDA tensor runs (``gputok._dispatch``), countable without a GPU. Each family runs in its own
subprocess (the two variables must be set before Triton is imported). Per call it counts:

- Triton launches: every ``kernel[grid](...)`` of any ``@triton.jit`` kernel. Under the interpreter
  each launch goes through ``triton.runtime.interpreter.InterpretedFunction.run`` (Triton's own
  launch hook, ``triton.knobs.runtime.launch_enter_hook``, is not called by the interpreter), so
  that method is wrapped for the call; the counts are kept per kernel name. Device functions a
  kernel calls (``hash_lookup.probe``) are not launches and are not counted.
- torch ops: every ATen op the call dispatches, seen by a ``TorchDispatchMode``, in two groups:
  views and metadata ops (``func.is_view``: view, slice, select, expand, ...; plus detach, alias,
  lift_fresh) and the rest (each of those is a kernel launch on CUDA). Ops the Triton interpreter
  itself dispatches while it runs a kernel (copying arguments to numpy and back) are not counted.
- host syncs: ops that make the host wait for the device on CUDA: ``_local_scalar_dense``
  (``.item()``, ``int(t)``, ``bool(t)``, ``if t.any():``), ``nonzero`` (and boolean-mask indexing,
  ``masked_select``), ``unique`` and ``unique_consecutive``, ``repeat_interleave`` without
  ``output_size``, ``equal``; and the Python-level ``Tensor.tolist()`` and ``Tensor.cpu()``, which
  on CPU tensors dispatch nothing (wrapped for the call). A ``.tolist()`` or ``.cpu()`` on a tensor
  that is on the host anyway (built from Python lists) is counted too: an upper bound.

Every family's call runs as :mod:`gputok.cuda_pipeline`, with one sync: BERT five Triton kernels,
cl100k four, Unigram five, Mistral's SentencePiece BPE five. ``tests/test_cuda_budget.py`` holds
issue 17's budget (<= 40 launches, <= 3 syncs per call) with these counts. The counts are of one
steady call: the tokenizer first encodes the next batch of the corpus (tables built, word cache
warm as in a running loader), then the counted batch.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_VIEW_LIKE = {"detach", "alias", "lift_fresh", "_unsafe_view", "set_", "resize_"}
_SYNC_OPS = {"_local_scalar_dense", "nonzero", "nonzero_static", "masked_select", "unique", "_unique", "_unique2",
             "unique_dim", "unique_consecutive", "unique_dim_consecutive", "equal", "is_nonzero", "argwhere"}


class Counts:
    """What a counted region dispatched: Triton launches, torch ops (views apart), host syncs."""

    def __init__(self) -> None:
        self.launches: collections.Counter = collections.Counter()
        self.ops: collections.Counter = collections.Counter()
        self.views: collections.Counter = collections.Counter()
        self.syncs: collections.Counter = collections.Counter()
        self._paused = 0

    def as_dict(self) -> dict:
        top = lambda c: dict(c.most_common())  # noqa: E731
        # The budget's "launches": Triton kernels plus non-view torch ops (an upper bound: an empty or
        # empty_like allocates without a kernel).
        return {"launches": sum(self.launches.values()) + sum(self.ops.values()),
                "triton_launches": sum(self.launches.values()), "torch_ops": sum(self.ops.values()),
                "torch_view_ops": sum(self.views.values()), "host_syncs": sum(self.syncs.values()),
                "launches_by_kernel": top(self.launches), "syncs_by_op": top(self.syncs), "ops_by_name": top(self.ops)}


class _OpCounter(TorchDispatchMode):
    def __init__(self, counts: Counts) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        counts = self.counts
        if not counts._paused:
            name = func.overloadpacket.__name__
            if func.is_view or name in _VIEW_LIKE:
                counts.views[name] += 1
            else:
                counts.ops[name] += 1
                if name in _SYNC_OPS or _syncs(name, args, kwargs):
                    counts.syncs[name] += 1
        counts._paused += 1  # ops an op decomposes into are not counted twice
        try:
            return func(*args, **kwargs)
        finally:
            counts._paused -= 1


def _syncs(name: str, args, kwargs) -> bool:
    if name == "repeat_interleave":  # the Tensor-repeats form sizes its output from the data
        return isinstance(args[0], torch.Tensor) and kwargs.get("output_size") is None and (
            len(args) < 3 or args[2] is None) and (
            len(args) < 2 or isinstance(args[1], torch.Tensor) or args[0].dtype != torch.bool)
    if name in ("index", "index_put", "index_put_"):  # a boolean mask index is a nonzero first
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())
    return False


@contextlib.contextmanager
def count() -> Iterator[Counts]:
    """Count, in this thread's region, Triton launches (interpreter), torch ops and host syncs."""
    from triton.runtime.interpreter import InterpretedFunction

    counts = Counts()
    run = InterpretedFunction.run
    tolist, cpu = torch.Tensor.tolist, torch.Tensor.cpu

    def counted_run(self, *args, grid, warmup, **kwargs):
        if not warmup and not counts._paused:
            counts.launches[self.__name__] += 1
        counts._paused += 1
        try:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            counts._paused -= 1

    def counted(method, name):
        def wrapper(self, *args, **kwargs):
            if not counts._paused:
                counts.syncs[name] += 1
            counts._paused += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                counts._paused -= 1
        return wrapper

    InterpretedFunction.run = counted_run
    torch.Tensor.tolist, torch.Tensor.cpu = counted(tolist, "tolist"), counted(cpu, "cpu")
    try:
        with _OpCounter(counts):
            yield counts
    finally:
        InterpretedFunction.run = run
        torch.Tensor.tolist, torch.Tensor.cpu = tolist, cpu


def count_call(tok, batch: list[str], warm_up: list[str] | None = None, **encode_kwargs) -> dict:
    """Counts of one ``tok(batch)`` call on the Triton code path (after one call on ``warm_up``)."""
    from . import _dispatch

    with _dispatch.use_backend("triton"):
        if warm_up is not None:
            tok(warm_up, device="cpu", **encode_kwargs)
        with count() as counts:
            tok(batch, device="cpu", **encode_kwargs)
    return counts.as_dict()


def worker(family: str, batch_sizes: list[int]) -> dict:
    """In the subprocess: the counts for one family at each batch size."""
    from .bench import _load_lines, make_tokenizer, special_tokens

    torch.set_num_threads(1)  # one chunk of texts: the dispatch mode counts this thread's ops
    tok = make_tokenizer(family)
    lines, _ = _load_lines(None, 2_000_000)
    out = []
    for size in batch_sizes:
        row = count_call(tok, lines[:size], warm_up=lines[size : 2 * size], padding=True,
                         add_special_tokens=special_tokens(family))
        out.append(dict(tokenizer=family, batch_size=size, **row))
    return {"results": out}


def run_counts(families: list[str], batch_sizes=(32, 1024), json_path: str | None = None) -> list[dict]:
    """Each family in its own subprocess under TRITON_INTERPRET=1 and GPUTOK_BACKEND=triton."""
    env = dict(os.environ, TRITON_INTERPRET="1", GPUTOK_BACKEND="triton")
    rows = []
    for family in families:
        cmd = [sys.executable, "-m", "gputok.bench", "--count-worker", family, "--batch-sizes", *map(str, batch_sizes)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"launch count for {family} failed:\n{done.stderr}")
        rows += json.loads(done.stdout.strip().splitlines()[-1])["results"]
    print_counts(rows)
    if json_path:
        from pathlib import Path

        from ._atomic import write_atomic

        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic({json_path: json.dumps({"backend": "triton (TRITON_INTERPRET=1, CPU tensors)", "rows": rows},
                                            indent=2)})
        print(f"wrote {json_path}")
    return rows


def print_counts(rows: list[dict]) -> None:
    print("per encode call on the CUDA code path (GPUTOK_BACKEND=triton, TRITON_INTERPRET=1, CPU tensors); "
          "issue 17's budget: launches (triton + torch ops) <= 40, syncs <= 3")
    header = (f"{'tokenizer':<10} {'batch':>6} {'launches':>8} {'triton':>7} {'ops':>6} {'views':>6} {'syncs':>6}"
              "  syncs by op")
    print(header)
    print("-" * len(header))
    for r in rows:
        by_op = ", ".join(f"{k} {v}" for k, v in r["syncs_by_op"].items())
        print(f"{r['tokenizer']:<10} {r['batch_size']:>6} {r['launches']:>8} {r['triton_launches']:>7} "
              f"{r['torch_ops']:>6} "
              f"{r['torch_view_ops']:>6} {r['host_syncs']:>6}  {by_op}")
