"""The decorator every numba kernel uses, and where their compiled code is cached.

``kernel`` is ``numba.njit(nogil=True, cache=True)``: nogil so that the chunks of a batch run on
ordinary Python threads at once (``gputok._cpu_threads``; no numba threading layer, which breaks
under fork or concurrent callers, see ``shared/NUMBA.md``), cache so that a process loads
compiled code from disk instead of compiling again.

The cache lives under gputok's cache dir (``$GPUTOK_CACHE/numba``, else ``~/.cache/gputok/numba``),
not beside the installed sources, which may be read-only, in a folder named by a hash of every
kernel file: numba checks only the file of the function it compiled, so a kernel that calls one
from another file (``bpe_heap.probe``, ``unigram_trie_numba.first_at_least``) would keep running stale
code after that file changed. ``NUMBA_CACHE_DIR`` set by the user wins (and then that is theirs).

A kernel that calls another kernel with a constant (``_part(keys, 3)``, ``flag=False``) would by
numba's default compile that callee once per constant value, each a full compile (numba types a
constant argument as ``Literal[int](3)``): cl100k compiled one helper eleven times. Kernels are
therefore specialised on argument types only, never on argument values (``_KernelDispatcher``);
LLVM still propagates the constant where it inlines the callee.

A kernel that another kernel calls is compiled for that caller only as far as its caller needs:
its LLVM IR, linked into the caller, which optimises the whole tree once (``_LinkOnlyLibrary``);
numba's default optimised and emitted machine code for every callee once per kernel above it, most
of a cold compile. Such a kernel compiles again, in full, if Python calls it.

Loading a kernel from the cache readies only numba's runtime (the NRT, which loaded code calls),
not the whole compiler (``_KernelCache``), so a warm process reaches its first batch about half a
second sooner. numba's global config, which the user's own code sees, stays untouched.
"""

import contextlib
import hashlib
import os
import secrets
import threading
from pathlib import Path

import llvmlite.binding as llvm
import numba
from llvmlite import ir
from numba.core import cgutils, compiler, types
from numba.core.caching import CompileResultCacheImpl, FunctionCache, IndexDataCacheFile
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler_lock import global_compiler_lock, require_global_compiler_lock
from numba.core.registry import CPUDispatcher
from numba.core.runtime.nrt import rtsys
from numba.extending import intrinsic


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# The folder this process caches its kernels in, where it is gputok's own (None: the user's
# NUMBA_CACHE_DIR). Its siblings hold other kernel sources' code (other versions or checkouts of
# gputok), which ``gputok compile --prune`` removes.
OWN_CACHE_DIR: str | None = None
if not os.environ.get("NUMBA_CACHE_DIR"):
    _home = os.environ.get("GPUTOK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gputok")
    # Read when a cached function is defined: set before any kernel module is imported.
    numba.config.CACHE_DIR = OWN_CACHE_DIR = os.path.join(_home, "numba", _sources_hash())


class _LinkOnlyLibrary(JITCodeLibrary):
    """The code of a kernel compiled only to be linked into the kernel that calls it: its LLVM IR
    after numba's per-function passes, with the kernels it calls linked in, and nothing more.

    numba compiles every kernel a kernel calls as a library of its own, runs the module optimiser
    (-O3) over it, emits its machine code, and then links its IR into each caller, whose library
    runs -O3 over the whole tree again and emits it again: a kernel three calls deep was optimised
    and emitted four times, and cold compiling was mostly that. Here the module optimiser and the
    machine code wait for the library that Python calls, which optimises its whole tree once (LLVM
    inlines and optimises the callees first there, as in any one-module build). The library never
    enters numba's JIT engine: it has no entry point (``_KernelDispatcher`` keeps it from Python).
    ``_KernelCache`` stores it as its IR under a key of its own, which only callers look up."""

    @classmethod
    def from_bitcode(cls, codegen, name: str, bitcode: bytes) -> "_LinkOnlyLibrary":
        library = cls(codegen, name)
        library._final_module = llvm.parse_bitcode(bitcode)
        library._finalized = True
        return library

    def serialize_using_object_code(self):
        return self.name, _LINK_ONLY, self._final_module.as_bitcode()

    def _optimize_functions(self, ll_module):
        # numba runs the -O3 function pipeline over each function as it is lowered; the caller's
        # -O3 module pipeline runs it again over the whole tree (callees first, before the inliner
        # weighs them), so here -O2's (NRT refcount pruning too) is enough: cl100k's cold compile
        # spent 1.4 s of CPU in these passes, 0.3 s at -O2, and the warm kernels run as fast
        # (-O1 made BERT's ~10% slower)
        ll_module.data_layout = self._codegen._data_layout
        for function in ll_module.functions:
            passes, builder = self._codegen._function_pass_manager(opt=min(2, numba.config.OPT))
            passes.run(function, builder)

    def finalize(self):
        require_global_compiler_lock()
        self._raise_if_finalized()
        linked = set()
        for library in self._linking_libraries:
            if library not in linked:
                linked.add(library)
                self._reload_init.update(library._reload_init)
                self._final_module.link_in(library._get_module_for_linking(), preserve=True)
        self._finalize_dynamic_globals()
        self._finalized = True

    def get_pointer_to_function(self, name: str) -> int:
        self._ensure_finalized()
        return 0  # no machine code: numba's wrapper for Python gets a null pointer, never called

    @property
    def codegen(self):
        return _NoEnvironment(self._codegen)


class _NoEnvironment:
    """numba's codegen as a link-only library hands it out: ``set_env`` (which writes the
    kernel's environment into its JIT global, absent here) does nothing; the library that links
    the kernel sets it (``_KernelDispatcher.add_overload``)."""

    def __init__(self, codegen):
        self._codegen = codegen

    def set_env(self, env_name, env):
        pass

    def __getattr__(self, name: str):
        return getattr(self._codegen, name)


# The link-only build leans on numba's private codegen and compiler classes, as numba 0.68 has them:
# another numba compiles every kernel its own way (slower to compile cold, the same code).
_LINK_ONLY_BUILDS = tuple(int(part) for part in numba.__version__.split(".")[:2]) == (0, 68)


class _KernelCompiler(compiler.Compiler):
    """numba's pipeline, with a ``_LinkOnlyLibrary`` where the kernel is compiled for a caller."""

    def compile_extra(self, func):
        if self.state.library is None and _LINK_ONLY_BUILDS and getattr(_compiling, "link_only", False):
            self.state.library = _LinkOnlyLibrary(self.state.targetctx.codegen(), func.__qualname__)
            # nor the wrappers that let Python and C call it (a tenth of a cold compile)
            self.state.flags.no_cpython_wrapper = self.state.flags.no_cfunc_wrapper = True
        return super().compile_extra(func)


_LINK_ONLY = "link-only"  # the kind of a link-only library's serialised form, and its cache keys' mark

# for_caller: a kernel is being typed inside a caller's body; link_only: the kernel being compiled
# now is compiled for that (per thread; numba compiles under one global lock anyway)
_compiling = threading.local()


@contextlib.contextmanager
def _write_lock(folder: str):
    """The cache folder's write lock: an exclusive ``flock`` on a file in it, which other
    processes' saves wait for (on NFS, those of the same host only where the mount locks
    locally). Where it cannot be had (no ``fcntl``, a folder that cannot be written, a file
    system without ``flock``) the caller goes on unlocked. The folder exists: numba made it before
    the save, which wrote its data file there first."""
    fd = None
    try:
        import fcntl

        fd = os.open(os.path.join(folder, "gputok-save.lock"), os.O_RDONLY | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        if fd is not None:
            os.close(fd)
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # which releases the lock


class _SharedCacheFile(IndexDataCacheFile):
    """numba's index and data files of one kernel, saved so that processes writing one cache at
    once (``gputok compile``'s jobs, DataLoader workers or ranks on a cold cache) cannot mix its
    entries up.

    numba saves an entry by reading the kernel's index, writing it back with the entry and the
    first data-file name the index does not list, then writing that file. Two processes saving
    entries of one kernel at once (its full and link-only compiles are two, as are two argument
    types) could both take the same name: the index then held one's entry and the file the
    other's code, which a later process ran for the wrong argument types. numba also numbers the
    files from 1 again after an index goes stale (a source file's time stamp changed), over files
    that processes started before may still load.

    Here a save writes the data file first, under a name no save used before (a random number),
    then the index, read and written back under the folder's write lock (:func:`_write_lock`):
    a file never changes under its name, an index lists only whole files, and no save drops
    another's entry. Loads take no lock (numba replaces both files whole, through a temporary
    file renamed into place). A file that an entry no longer names is removed; a process that
    read the older index then misses and compiles."""

    def save(self, key, data):
        name = self._data_name(secrets.randbits(48))
        self._save_data(name, data)
        with _write_lock(self._cache_path):
            overloads = self._load_index()
            replaced = overloads.get(key)
            overloads[key] = name
            self._save_index(overloads)
        if replaced is not None and replaced != name:
            with contextlib.suppress(OSError):
                os.unlink(self._data_path(replaced))


def _shared(cache) -> None:
    """Make ``cache`` (a numba ``FunctionCache``, set up) save through :class:`_SharedCacheFile`."""
    cache._cache_file.__class__ = _SharedCacheFile  # the same fields; only ``save`` differs


class _FullOnlyCache(FunctionCache):
    """numba's on-disk cache, which does not store link-only compiles."""

    def __init__(self, py_func):
        super().__init__(py_func)
        _shared(self)

    def save_overload(self, sig, data):
        if not isinstance(data.library, _LinkOnlyLibrary):
            super().save_overload(sig, data)


class _LinkOnlyEntries(CompileResultCacheImpl):
    """numba's (de)serialisation of a compiled kernel in the disk cache, which also rebuilds a
    link-only one (``_LinkOnlyLibrary``) from its IR."""

    def rebuild(self, target_context, payload):
        libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init, referenced_envs = payload
        if libdata[1] != _LINK_ONLY:
            return super().rebuild(target_context, payload)
        for function in reload_init:
            function()
        library = _LinkOnlyLibrary.from_bitcode(target_context.codegen(), libdata[0], libdata[2])
        return compiler.CompileResult(
            target_context=target_context, typing_context=target_context.typing_context, library=library,
            environment=env, entry_point=target_context.get_executable(library, fndesc, env), fndesc=fndesc,
            type_annotation=typeann, signature=signature, objectmode=objectmode, lifted=lifted, typing_error=None,
            call_helper=None, metadata=None, reload_init=reload_init, referenced_envs=referenced_envs)


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
        _shared(self)
        return getattr(self, name)

    _impl_class = _LinkOnlyEntries
    _link_only_key = False  # _index_key of a link-only entry

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            loaded = self._load_overload(sig, target_context)
            if loaded is None and getattr(_compiling, "link_only", False):
                self._link_only_key = True
                try:
                    loaded = self._load_overload(sig, target_context)
                finally:
                    self._link_only_key = False
            return loaded

    def save_overload(self, sig, data):
        self._link_only_key = isinstance(data.library, _LinkOnlyLibrary)
        try:
            super().save_overload(sig, data)
        finally:
            self._link_only_key = False

    def _index_key(self, sig, codegen):
        key = super()._index_key(sig, codegen)
        return (key[0], key[1] + (_LINK_ONLY,), *key[2:]) if self._link_only_key else key


_HAS_CACHE_HOOKS = all(hasattr(FunctionCache, name)
                       for name in ("_load_overload", "_guard_against_spurious_io_errors", "_index_key"))


class _KernelDispatcher(CPUDispatcher):
    """numba's CPU dispatcher, but a call from another kernel compiles for the argument types with
    their literal values dropped (one specialisation per types, not per constant), and as a
    ``_LinkOnlyLibrary`` unless the disk cache has it: a specialisation that Python then calls
    compiles again, in full."""

    def get_call_template(self, args, kws):
        outer = getattr(_compiling, "for_caller", False)
        _compiling.for_caller = True
        try:
            return super().get_call_template(tuple(types.unliteral(arg) for arg in args),
                                             {name: types.unliteral(arg) for name, arg in kws.items()})
        finally:
            _compiling.for_caller = outer

    def compile(self, sig):
        with global_compiler_lock:
            args, _ = numba.core.sigutils.normalize_signature(sig)
            existing = self.overloads.get(tuple(args))
            for_caller = getattr(_compiling, "for_caller", False)
            if existing is not None and not for_caller and isinstance(existing.library, _LinkOnlyLibrary):
                del self.overloads[tuple(args)]  # Python calls it: compile it in full
            link_only = getattr(_compiling, "link_only", False)
            _compiling.link_only, _compiling.for_caller = for_caller, False  # its callees set for_caller again
            try:
                return super().compile(sig)
            finally:
                _compiling.link_only, _compiling.for_caller = link_only, for_caller

    def add_overload(self, cres):
        if isinstance(cres.library, _LinkOnlyLibrary):
            self.overloads[tuple(cres.signature.args)] = cres  # for callers only, never for Python
            return
        super().add_overload(cres)
        # the environments of link-only kernels linked in (numba reads one where a kernel raises
        # an exception built at run time), which their own libraries could not set
        for environment in cres._find_referenced_environments():
            if cres.library.codegen._engine.get_global_value_address(environment.env_name):
                cres.library.codegen.set_env(environment.env_name, environment)

    def enable_caching(self):
        # _KernelCache leans on two private hooks of numba's FunctionCache (checked on 0.68): where a
        # numba lacks them, its own cache, which is only slower to load.
        self._cache = (_KernelCache(self.py_func) if _HAS_CACHE_HOOKS else _FullOnlyCache(self.py_func))


# A kernel step that numba inlines into each kernel calling it, at typing: for steps called per
# word or per merge, whose call (its array arguments passed one by one) cost more than their work:
# bpe_heap's merge steps, unigram_words_numba.word_viterbi (one call per word the Unigram cache
# misses: ~35 ns a call of its ~20 arrays, measured on English words).
inlined = numba.njit(nogil=True, cache=True, inline="always")


def kernel(function, **options):
    """``numba.njit(nogil=True, cache=True, **options)`` with ``_KernelDispatcher``."""
    if numba.config.DISABLE_JIT:
        return function
    dispatcher = _KernelDispatcher(py_func=function, locals={},
                                   targetoptions={"nopython": True, "nogil": True, **options},
                                   pipeline_class=_KernelCompiler)
    dispatcher.enable_caching()
    return dispatcher


def uncounted(function):
    """A kernel step that allocates nothing, compiled without numba's reference counts: numba
    counts the references to a function's array arguments on its entry and exit, atomically, and
    where the step has a loop or branches its pruning leaves those counts in place, inlined or
    not (see ``unigram_trie_numba``)."""
    return kernel(function, _nrt=False)


@intrinsic
def prefetch(typingctx, array, index):
    """``prefetch(array, i)`` in a kernel: ask the CPU to bring the cache line of the ``i``-th item
    of a C-contiguous ``array`` (counted over all its items, row after row) in, without waiting for
    it and without faulting on any address. Where a kernel knows many independent lookups ahead (a
    batch's words in a hash table), issuing them all first lets their memory reads overlap; a plain
    load would hold the core's reorder window until it arrives, so only a few overlapped."""
    if not (isinstance(array, types.Array) and array.layout == "C" and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.gep(data, [args[1]])
        int32, byte_pointer = ir.IntType(32), ir.IntType(8).as_pointer()
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0")
        # a read, kept in every cache level, of data
        builder.call(function, [builder.bitcast(pointer, byte_pointer), int32(0), int32(3), int32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen
