"""The decorator every numba kernel uses, and where their compiled code is cached.

``kernel`` is ``numba.njit(nogil=True, cache=True)``: nogil so that the chunks of a batch run on
ordinary Python threads at once (``gputok._cpu_threads``; no numba threading layer, which breaks
under fork or concurrent callers, see ``shared/NUMBA.md``), cache so that a process loads
compiled code from disk instead of compiling again.

The cache lives under gputok's cache dir (``$GPUTOK_CACHE/numba``, else ``~/.cache/gputok/numba``),
not beside the installed sources, which may be read-only, in a folder named by a hash of every
kernel file: numba checks only the file of the function it compiled, so a kernel that calls one
from another file (``bpe_heap.probe``, ``unigram_trie_numba.trie_child``) would keep running stale
code after that file changed. ``NUMBA_CACHE_DIR`` set by the user wins (and then that is theirs).

A kernel that calls another kernel with a constant (``_part(keys, 3)``, ``flag=False``) would by
numba's default compile that callee once per constant value, each a full compile (numba types a
constant argument as ``Literal[int](3)``): cl100k compiled one helper eleven times. Kernels are
therefore specialised on argument types only, never on argument values (``_KernelDispatcher``);
LLVM still propagates the constant where it inlines the callee. That is the whole difference from
plain ``numba.njit``, with one more: loading a kernel from the cache readies only numba's runtime
(the NRT, which loaded code calls), not the whole compiler (``_KernelCache``), so a warm process
reaches its first batch about half a second sooner. numba's global config, which the user's own
code sees, stays untouched.
"""

import hashlib
import os
from pathlib import Path

import numba
from numba.core import types
from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher
from numba.core.runtime.nrt import rtsys


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    _home = os.environ.get("GPUTOK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gputok")
    # Read when a cached function is defined: set before any kernel module is imported.
    numba.config.CACHE_DIR = os.path.join(_home, "numba", _sources_hash())


class _KernelCache(FunctionCache):
    """numba's on-disk cache of one kernel, minus two start-up costs.

    numba's ``load_overload`` first refreshes the target context: it imports and registers every
    typing and lowering module numba has (~0.5-1 s, once per process), which compiling needs but
    running compiled code does not; that only needs the NRT initialised. A kernel that does
    compile later goes through numba's compiler, which refreshes the context itself.

    And numba's set-up of a cache (finding and probing its folder) waits for the kernel's first
    call: every kernel module builds its dispatchers at import, and most never run in a process."""

    def __init__(self, py_func):
        self._py_func = py_func

    def __getattr__(self, name: str):
        if name.startswith("__") or "_impl" in self.__dict__:
            raise AttributeError(name)
        FunctionCache.__init__(self, self._py_func)
        return getattr(self, name)

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


_HAS_CACHE_HOOKS = all(hasattr(FunctionCache, name)
                       for name in ("_load_overload", "_guard_against_spurious_io_errors"))


class _KernelDispatcher(CPUDispatcher):
    """numba's CPU dispatcher, but a call from another kernel compiles for the argument types with
    their literal values dropped (one specialisation per types, not per constant)."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(arg) for arg in args),
                                         {name: types.unliteral(arg) for name, arg in kws.items()})

    def enable_caching(self):
        # _KernelCache leans on two private hooks of numba's FunctionCache (checked on 0.68): where a
        # numba lacks them, its own cache, which is only slower to load.
        self._cache = (_KernelCache(self.py_func) if _HAS_CACHE_HOOKS else FunctionCache(self.py_func))


def kernel(function):
    """``numba.njit(nogil=True, cache=True)`` with ``_KernelDispatcher``."""
    if numba.config.DISABLE_JIT:
        return function
    dispatcher = _KernelDispatcher(py_func=function, locals={}, targetoptions={"nopython": True, "nogil": True})
    dispatcher.enable_caching()
    return dispatcher
