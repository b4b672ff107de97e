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


def test_kernels_called_by_kernels_compile_once_for_their_caller(tmp_path):
    # A kernel typed inside another compiles link-only (IR for its caller, no machine code, no entry
    # point): its caller optimises the whole tree once. Python calling it later compiles it in full;
    # the disk cache keeps both kinds, and a new caller in a fresh process loads the link-only one.
    (tmp_path / "nested_kernels.py").write_text(textwrap.dedent("""
        import numpy as np
        from gputok.kernels._numba import kernel

        @kernel
        def leaf(values, i):
            if values[i] < 0:
                raise ValueError("a negative value")
            return values[i] * 2

        @kernel
        def middle(values):
            total = 0
            for i in range(values.size):
                total += leaf(values, i)
            return total

        @kernel
        def top(values):
            return middle(values) + leaf(values, 0)
    """))
    (tmp_path / "other_kernels.py").write_text(textwrap.dedent("""
        from gputok.kernels._numba import kernel
        from nested_kernels import leaf, middle

        @kernel
        def other(values):
            return middle(values) * 10 + leaf(values, 1)
    """))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    first = _run("""
        import json
        import numpy as np
        import nested_kernels as k
        values = np.arange(5, dtype=np.int64)
        out = [k.top(values)]
        kinds = [type(o.library).__name__ for f in (k.leaf, k.middle, k.top) for o in f.overloads.values()]
        try:
            k.top(np.array([1, -1], dtype=np.int64))
        except ValueError as error:
            out.append(str(error))
        out.append(k.middle(values))  # from Python: compiled again, in full
        kinds.append(type(k.middle.overloads[next(iter(k.middle.overloads))].library).__name__)
        print(json.dumps(dict(out=out, kinds=kinds)))
    """, env)
    assert first == dict(out=[20 + 0, "a negative value", 20],
                         kinds=["_LinkOnlyLibrary", "_LinkOnlyLibrary", "JITCodeLibrary", "JITCodeLibrary"])
    second = _run("""
        import json
        import numpy as np
        import nested_kernels as k, other_kernels
        values = np.arange(5, dtype=np.int64)
        out = [other_kernels.other(values), k.top(values), k.middle(values)]
        print(json.dumps(dict(out=out, leaf=[type(o.library).__name__ for o in k.leaf.overloads.values()],
                              hits=[sum(f.stats.cache_hits.values()) for f in (k.leaf, k.middle, k.top)],
                              misses=[sum(f.stats.cache_misses.values()) for f in (k.leaf, k.middle, k.top)])))
    """, env)
    # leaf, never called from Python, loads as link-only for other; middle and top load in full
    assert second == dict(out=[202, 20, 20], leaf=["_LinkOnlyLibrary"], hits=[1, 1, 1], misses=[0, 0, 0])
