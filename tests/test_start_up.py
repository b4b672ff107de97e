"""Start-up cost guards (issue 17: cold compile time, a warm process at its first batch quickly):
what ``import gputok`` leaves for later, one compile per argument types for kernels calling
kernels with constants, and kernels loaded from numba's cache in a fresh process without
numba's compiler set-up. No timings: ``benchmarks/cold_start.py`` measures them."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np


def test_a_kernel_called_with_constants_compiles_once_per_types(tmp_path):
    # In a fresh process with an empty cache: from a warm one the caller loads and nothing compiles.
    (tmp_path / "constants_kernels.py").write_text(textwrap.dedent("""
        from gputok.kernels._numba import kernel

        @kernel
        def add(x, k):
            return x + k

        @kernel
        def add_constants(x):
            return add(x, 1) + add(x, 2) + add(x, 3)
    """))
    got = _run("""
        import json
        import constants_kernels as k
        print(json.dumps([k.add_constants(10), len(k.add.overloads)]))
    """, dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")])))
    assert got == [36, 1]  # one overload, not one per constant (numba's Literal[int](1), (2), (3))


def _run(code: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True, timeout=600)
    return json.loads(done.stdout.splitlines()[-1])


def test_import_leaves_training_and_data_loading_for_later():
    env = dict(os.environ)
    got = _run("""
        import json, sys
        import gputok
        before = sorted(m for m in ("gputok.data", "gputok.training", "gputok.extending", "gputok.embeddings")
                        if m in sys.modules)
        import gputok.data  # imports the submodule gputok.encode_corpus: the function must stay gputok's
        print(json.dumps(dict(before=before, collate=gputok.data.Collate.__name__, train=gputok.train.__name__,
                              encode_corpus=type(gputok.encode_corpus).__name__)))
    """, env)
    assert got == dict(before=[], collate="Collate", train="train", encode_corpus="function")


def test_a_fresh_process_runs_cached_kernels_without_compiler_set_up(tmp_path):
    (tmp_path / "probe_kernels.py").write_text(textwrap.dedent("""
        import numpy as np
        from gputok.kernels._numba import kernel

        @kernel
        def _scaled(x, k):
            return x * k

        @kernel
        def doubled_plus_one(values):
            out = np.empty(values.size, np.int64)  # allocates: needs numba's runtime (NRT)
            for i in range(values.size):
                out[i] = _scaled(values[i], 2) + 1
            return out
    """))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    code = """
        import json, sys
        import numpy as np
        import probe_kernels
        out = probe_kernels.doubled_plus_one(np.arange(5, dtype=np.int64)).tolist()
        stats = probe_kernels.doubled_plus_one.stats
        print(json.dumps(dict(out=out, hits=sum(stats.cache_hits.values()), misses=sum(stats.cache_misses.values()),
                              compiler_set_up="numba.np.linalg" in sys.modules)))
    """
    first, second = _run(code, env), _run(code, env)
    assert first["out"] == second["out"] == (np.arange(5) * 2 + 1).tolist()
    assert (first["hits"], first["misses"]) == (0, 1)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert first["compiler_set_up"] and not second["compiler_set_up"]
