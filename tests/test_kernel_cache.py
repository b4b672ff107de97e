"""Two processes saving compiled kernels into one cache at once (``gputok compile``'s jobs,
DataLoader workers or ranks on a cold cache) leave entries that load the right code
(``kernels/_numba.py``: ``_one_writer``).

numba saves an entry by reading the function's index, writing it back with the new entry and a
free data file name, then writing the file. The test runs the interleaving that goes wrong
without a lock between two savers of one function, each with its own cache object as a second
process would have: A reads the index, B reads it, A writes the index, B writes the index and its
file, A writes its file. Unlocked, both pick the first file name and the index ends up naming B's
entry with A's code in its file; under the lock B waits for A and then reads A's index. A fresh
process then calls the kernel with both argument types."""

import json
import os
import subprocess
import sys
import textwrap

SAVE_BOTH = """
    import threading
    from numba.core import types
    from numba.core.caching import IndexDataCacheFile
    import racing_kernels as k

    save = IndexDataCacheFile.save
    IndexDataCacheFile.save = lambda self, key, data: None  # compile both types without saving
    assert k.double(1) == 2 and k.double(1.5) == 3.0
    IndexDataCacheFile.save = save
    a, b = k.double._cache, type(k.double._cache)(k.double.py_func)  # B: another process's cache object
    steps = {name: threading.Event() for name in ("a_read", "b_read", "a_indexed", "b_done")}
    load_index, save_index, save_data = (IndexDataCacheFile._load_index, IndexDataCacheFile._save_index,
                                         IndexDataCacheFile._save_data)

    def traced_load_index(self):
        got = load_index(self)
        if self is a._cache_file:
            steps["a_read"].set()
            steps["b_read"].wait(2)  # under the lock B never gets this far while A saves
        elif self is b._cache_file:
            steps["b_read"].set()
            steps["a_indexed"].wait(2)
        return got

    def traced_save_index(self, overloads):
        save_index(self, overloads)
        if self is a._cache_file:
            steps["a_indexed"].set()

    def traced_save_data(self, name, data):
        if self is a._cache_file:
            steps["b_done"].wait(2)
        save_data(self, name, data)
        if self is b._cache_file:
            steps["b_done"].set()

    IndexDataCacheFile._load_index = traced_load_index
    IndexDataCacheFile._save_index = traced_save_index
    IndexDataCacheFile._save_data = traced_save_data
    b_saves = threading.Thread(target=b.save_overload, args=((types.float64,), k.double.overloads[(types.float64,)]))
    a_saves = threading.Thread(target=a.save_overload, args=((types.int64,), k.double.overloads[(types.int64,)]))
    a_saves.start()
    steps["a_read"].wait(5)
    b_saves.start()
    a_saves.join()
    b_saves.join()
    print("saved")
"""

LOAD_BOTH = """
    import json
    from numba.core import event
    import racing_kernels as k

    compiled = []

    class Counter(event.Listener):
        def on_start(self, event_):
            compiled.append(1)

        def on_end(self, event_):
            pass

    with event.install_listener("numba:compile", Counter()):
        got = [k.double(1), k.double(1.5)]
    print(json.dumps([got, [type(x).__name__ for x in got], len(compiled)]))
"""


def test_savers_racing_on_one_kernel_leave_entries_that_load_their_own_code(tmp_path):
    (tmp_path / "racing_kernels.py").write_text(textwrap.dedent("""
        from gputok.kernels._numba import kernel

        @kernel
        def double(x):
            return x + x
    """))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    saved = subprocess.run([sys.executable, "-c", textwrap.dedent(SAVE_BOTH)], env=env, capture_output=True,
                           text=True, timeout=300)
    assert saved.returncode == 0 and saved.stdout.strip() == "saved", saved.stderr
    loaded = subprocess.run([sys.executable, "-c", textwrap.dedent(LOAD_BOTH)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    got, kinds, compiled = json.loads(loaded.stdout.splitlines()[-1])
    assert got == [2, 3.0] and kinds == ["int", "float"]
    assert compiled == 0  # both entries were saved, each with its own code
