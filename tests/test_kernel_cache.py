"""Two processes saving compiled kernels into one cache at once (``gputok compile``'s jobs,
DataLoader workers or ranks on a cold cache) leave entries that load their own code, and lose
none (``kernels/_numba.py``: ``_SharedCacheFile``).

The test runs two savers of one kernel, each with its own cache object as a second process would
have, in the order that goes wrong: A reads the index, B reads it, A writes the index, B writes
the index and its data file, A writes its data file. With numba's own save both took the first
data-file name, and the index named B's entry (float64) over A's code (int64): ``double(1.5)``
returned 2 (checked). With unique file names but no lock, B's index write dropped A's entry
(checked). Under the lock B reads the index only after A wrote it. A fresh process then calls the
kernel with both argument types, and must load both."""

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

    a = k.double._cache
    cache_file = type(a._cache_file)
    save = cache_file.save
    cache_file.save = lambda self, key, data: None  # compile both types without saving
    assert k.double(1) == 2 and k.double(1.5) == 3.0
    cache_file.save = save
    b = type(a)(k.double.py_func)  # another process's cache object for the same kernel
    steps = {name: threading.Event() for name in ("a_read", "b_read", "a_indexed", "b_wrote")}
    load_index, save_index, save_data = (IndexDataCacheFile._load_index, IndexDataCacheFile._save_index,
                                         IndexDataCacheFile._save_data)

    # Each wait gives up after 2 s: where saves take turns, the other saver cannot get there.
    def traced_load_index(self):
        got = load_index(self)
        if self is a._cache_file:
            steps["a_read"].set()
            steps["b_read"].wait(2)
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
            steps["b_wrote"].wait(2)
        save_data(self, name, data)
        if self is b._cache_file:
            steps["b_wrote"].set()

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
    assert compiled == 0  # both entries were kept


def test_a_save_goes_on_unlocked_where_the_file_system_has_no_flock(tmp_path, monkeypatch):
    import errno
    import fcntl

    from gputok.kernels import _numba

    def no_flock(fd, operation):
        raise OSError(errno.ENOSYS, "flock not supported")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    before = len(os.listdir("/proc/self/fd"))
    ran = []
    with _numba._write_lock(str(tmp_path)):  # an existing folder: the lock file opens, flock fails
        ran.append(True)
    assert ran == [True]
    assert len(os.listdir("/proc/self/fd")) == before  # the lock file's descriptor closed
