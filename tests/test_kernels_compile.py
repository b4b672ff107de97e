"""Every Triton kernel compiles for real GPUs, checked on a machine without one.

The interpreter (``TRITON_INTERPRET=1``, which every other kernel test runs under) accepts code
that the compiler refuses: a kernel that reads a plain module global, for one, runs there and
fails on a GPU. So this test records every kernel launch that small real workloads make under the
interpreter (each tokenizer family's encoding, with WordPiece's partial-unk rule and Unigram's
float32 scores too, BPE and Unigram training, all on the Triton path), checks that they launch
every kernel of ``gputok.kernels``, then, in a subprocess with the interpreter off, compiles each
distinct launch signature down to a cubin for sm_75, sm_80 and sm_90 (T4, A100, H100) through
``JITFunction.warmup`` with a stand-in driver (compiling needs no GPU; only loading a cubin does).
``tests/test_cuda.py`` runs the kernels on a GPU.
"""

import importlib
import json
import os
import pkgutil
import subprocess
import sys

import pytest
import torch

import gputok
from gputok import _dispatch
from gputok.hashing import HashMap, lookup

triton = pytest.importorskip("triton")
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

TARGETS = [("cuda", 75, 32), ("cuda", 80, 32), ("cuda", 90, 32)]


def _describe(value):
    """A launch argument as JSON: a tensor by its dtype (warmup takes dtypes for tensors)."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).removeprefix("torch.")}
    return value


def _int_class(value):
    """What Triton specializes an int on: 1, divisibility by 16, and 32- or 64-bit."""
    if isinstance(value, bool) or not isinstance(value, int):
        return repr(value)
    return (value == 1, value % 16 == 0, -2**31 <= value < 2**31)


@pytest.fixture(scope="module")
def launches():
    """Distinct launches (kernel, module, args, kwargs) the workloads below make."""
    seen, found = set(), []
    real_run = InterpretedFunction.run

    def recording_run(self, *args, grid, warmup, **kwargs):
        described = [_describe(a) for a in args]
        kw = {k: _describe(v) for k, v in kwargs.items()}
        key = (self.fn.__name__, json.dumps([d if isinstance(d, dict) else _int_class(d) for d in described]),
               json.dumps(kw, sort_keys=True))
        if key not in seen:
            seen.add(key)
            found.append(dict(module=self.fn.__module__, kernel=self.fn.__name__, args=described, kwargs=kw))
        return real_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording_run
    try:
        with _dispatch.use_backend("triton"):
            _workloads()
    finally:
        InterpretedFunction.run = real_run
    return found


def _kernels() -> set[str]:
    """Every kernel of ``gputok.kernels``: one ``_<op>_kernel`` per module."""
    import gputok.kernels

    modules = [importlib.import_module(f"gputok.kernels.{m.name}")
               for m in pkgutil.iter_modules(gputok.kernels.__path__)]
    return {name for module in modules for name in vars(module) if name.startswith("_") and name.endswith("_kernel")}


def _workloads():
    from test_unigram_kernels import random_lattice

    from gputok import assets
    from gputok.models.unigram import unigram_viterbi

    texts = ["Hello, wörld! 12345 tokens\n\n  spaced   out", "漢字 and ﬁ€ 😀", ""]
    for tok in (gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json")),
                gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"),
                gputok.Tokenizer.from_sentencepiece(assets.fetch("sp-test-model")),
                gputok.Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))):
        tok(texts * 2, padding=False)
        tok(texts, return_offsets=True)  # BERT: the stage-by-stage path (the padded WordPiece kernel)
    partial = gputok.Tokenizer.from_vocab(assets.fetch("bert-vocab"), partial_unk=True)
    partial(["unaffable ☃x"])
    partial(["unaffable ☃x"], return_offsets=True)
    unigram_viterbi(*random_lattice([3, 0, 5], seed=1, ties=False))
    keys = torch.arange(0, 300, 3)
    table = HashMap(keys, keys * 10)
    lookup(table.slot_keys, table.slot_values, table.mask, table.max_probes, torch.tensor([0, 3, 4]))
    words = ["hug hugs pug pun bun hugs " * 3, "the then there these the"]
    gputok.train(iter(words), preset="char-bpe", vocab_size=40, min_frequency=1, progress=False)
    gputok.train(iter(words * 3), model="unigram", vocab_size=15, progress=False)


def test_workloads_launch_every_kernel_and_branch(launches):
    kernels = _kernels()
    assert len(kernels) >= 6
    assert {launch["kernel"] for launch in launches} == kernels
    # Both sides of every boolean constexpr branch are compiled.
    flags = {(launch["kernel"], k, v) for launch in launches
             for k, v in launch["kwargs"].items() if isinstance(v, bool)}
    assert {(kernel, k) for kernel, k, v in flags if v} == {(kernel, k) for kernel, k, v in flags if not v}
    assert len(flags) >= 2  # PARTIAL_UNK both ways


def test_every_launch_compiles_for_gpus(launches, tmp_path):
    specs = tmp_path / "launches.json"
    specs.write_text(json.dumps(launches))
    env = dict(os.environ, TRITON_INTERPRET="0")
    env.pop("TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", None)  # that switch would let the bug this test looks for through
    done = subprocess.run([sys.executable, __file__, str(specs)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    compiled = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(compiled) == len(launches) * len(TARGETS)
    assert all(size > 0 for _, _, size in compiled)


def _compile_all(specs_path: str) -> None:
    """In a process with the interpreter off: compile each recorded launch for each target."""
    import importlib

    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    class CompileOnly:
        """Stands in for the CUDA driver: it names a target, and nothing is ever launched."""

        def __init__(self, target):
            self.target = target

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return self.target

    compiled = []
    for target in TARGETS:
        driver.set_active(CompileOnly(GPUTarget(*target)))
        for launch in json.loads(open(specs_path).read()):
            kernel = getattr(importlib.import_module(launch["module"]), launch["kernel"])
            kernel.device_caches.clear()  # binders hold the target they were made for
            undescribe = lambda v: getattr(torch, v["dtype"]) if isinstance(v, dict) else v  # noqa: E731
            binary = kernel.warmup(*map(undescribe, launch["args"]), grid=(1,),
                                   **{k: undescribe(v) for k, v in launch["kwargs"].items()})
            compiled.append((launch["kernel"], f"sm_{target[1]}", len(binary.asm["cubin"])))
    print(json.dumps(compiled))


if __name__ == "__main__":
    _compile_all(sys.argv[1])
