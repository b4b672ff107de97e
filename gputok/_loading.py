"""Fast loading and small, deterministic pickles of tokenizers.

Loading a large vocabulary builds tables (hash maps of merges and tokens, byte tables) that take
seconds of Python; huggingface ``tokenizers`` loads the same file in a fraction of a second. So each
``Tokenizer.from_*`` loader is wrapped by :func:`cached_loader`: the tokenizer it builds is stored
in the disk cache (``gputok._cache.cache_dir() / "tokenizers"``) under the sha256 of what defines
it (the loader, the bytes of its files or its text, its options, and gputok's own source code and
library versions, so an edited gputok never reads a stale table), and the next load of the same
content, in any process, reads that instead of building again: a pickle whose arrays lie in the
file beside it and are memory-mapped (copy-on-write), so a load costs the small objects only
(BERT ~0.05 s, cl100k ~0.25 s against huggingface's 0.07 and 0.7 s: ``benchmarks/load_time.py``).
Files under 64 KB are not cached (they build in milliseconds); the 16 most recent are kept.

The tokenizer also remembers that recipe, and pickles as it: the loader's name, the bytes of its
source file (a tokenizer.json's text, a .tiktoken file...) and its options, plus the settings made
through the API (the word cache switched off, ``pad_token`` and the other special tokens,
``model_max_length``). So a pickle is the size of the source file plus a few hundred bytes and is
the same before and after the tokenizer is used (its word cache and tables are never in it): what
``datasets.Dataset.map`` needs to fingerprint a function quickly and find its cache again.
Unpickling calls the loader again, which finds its tables in the disk cache. A tokenizer without
a recipe (trained, or built from components), or whose components were replaced since it
loaded, pickles its state as before, caches left out.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import io
import json
import mmap
import os
import pickle
import struct
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import _cpu_threads
from ._cache import cache_dir

# Sources smaller than this load in milliseconds: not worth a file in the cache.
MIN_CACHED_BYTES = 1 << 16
# Tables kept on disk (each the size of the loaded tokenizer: ~40 MB for cl100k); the oldest go first.
MAX_CACHED_TOKENIZERS = 16
# The attributes whose reassignment makes a tokenizer differ from what its recipe loads.
_COMPONENTS = ("model", "normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens", "_extra")
# Settings made through the API after loading, carried in the pickle beside the recipe.
_SETTINGS = ("_user_special_tokens", "_model_max_length", "_file_sections_apply")


def cached_loader(*, files: tuple[str, ...] = (), texts: tuple[str, ...] = (), ignore: tuple[str, ...] = ()
                  ) -> Callable[[Callable], Callable]:
    """Wrap a ``Tokenizer.from_*`` classmethod body: ``files`` name its path arguments, ``texts``
    its text arguments; the other arguments (but ``ignore``: names for error messages) are its
    options. See the module docstring."""

    def wrap(loader: Callable) -> Callable:
        signature = inspect.signature(loader)

        @functools.wraps(loader)
        def load(cls, *args: Any, **kwargs: Any):
            bound = signature.bind(cls, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.pop(next(iter(signature.parameters)))  # cls
            try:
                contents = {name: Path(arguments[name]).read_bytes() for name in files}
            except (OSError, TypeError):
                return loader(cls, *args, **kwargs)  # the loader says what is wrong with the path
            if not all(isinstance(arguments[name], str) for name in texts):
                return loader(cls, *args, **kwargs)  # and with a text that is not one
            contents.update({name: arguments[name] for name in texts})
            options = {k: v for k, v in arguments.items() if k not in files and k not in texts and k not in ignore}
            key = _key(loader.__name__, contents, options)
            size = sum(len(c) for c in contents.values())
            tokenizer = _read_cached(cls, key) if key is not None and size >= MIN_CACHED_BYTES else None
            if tokenizer is None:
                with _cpu_threads.gputok_threads():  # its torch ops on one thread (see gputok._cpu_threads)
                    tokenizer = loader(cls, *args, **kwargs)
                if key is not None and size >= MIN_CACHED_BYTES:
                    _write_cached(tokenizer, key)
            remember_recipe(tokenizer, (loader.__name__, contents, options))
            return tokenizer

        return classmethod(load)

    return wrap


def remember_recipe(tokenizer, recipe: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
    tokenizer._recipe = recipe
    tokenizer._recipe_components = _components(tokenizer)


def reduce(tokenizer) -> tuple:
    """``Tokenizer.__reduce__``: the recipe and the API settings when the tokenizer still is what
    its recipe loads, else its state (caches left out). Pickled by the plain pickler whatever
    pickler asks: torch's multiprocessing pickler (a DataLoader sending its collate function to
    spawned workers) moves each CPU tensor it meets into shared memory in place, which would leave
    the numpy views of the tables that the CPU kernels keep pointing at freed memory here."""
    recipe = tokenizer.__dict__.get("_recipe")
    settings = {name: tokenizer.__dict__[name] for name in _SETTINGS if name in tokenizer.__dict__}
    settings["word_cache"] = tokenizer.word_cache is not None
    if recipe is not None and tokenizer.__dict__.get("_recipe_components") == _components(tokenizer):
        name, contents, options = recipe
        return _from_recipe, (type(tokenizer), name, contents, options, settings)
    return _from_state, (type(tokenizer), state_bytes(tokenizer))


def state_bytes(tokenizer, buffer_callback: Callable[[pickle.PickleBuffer], Any] | None = None) -> bytes:
    """The tokenizer's attributes pickled, without what is rebuilt on use (caches, patterns,
    tables, every ``functools.cached_property`` of its components) or only describes how it was
    loaded; large merge maps as arrays (:class:`_CompactPickler`). ``buffer_callback``: pickle's
    out-of-band buffers (protocol 5), for the disk cache's file layout."""
    state = _compact_strings({k: v for k, v in tokenizer.__dict__.items() if k not in _REBUILT})
    state["_patterns"] = {}
    buffer = io.BytesIO()
    _CompactPickler(buffer, protocol=5, buffer_callback=buffer_callback).dump(state)
    return buffer.getvalue()


class _CompactPickler(pickle.Pickler):
    """Pickles what loads fast: a component's ``functools.cached_property`` values are left out
    (made again on use: a BPE's ``vocab``, its ``{bytes: id}`` map), and a large
    ``{(int, int): (int, int)}`` dict (a BPE's merges) becomes four int64 arrays behind a
    read-only mapping that makes the dict on first use (unpickling the dict took ~140 ms of the
    ~300 ms a cached cl100k load took)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._storages: dict[int, torch.Tensor] = {}  # data pointer -> the tensor pickled with that storage

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu":
            # Raw bytes (torch.load's path is ~3x slower); a second tensor on the same storage as
            # a view of the first, so views stay views.
            base = self._storages.get(obj.untyped_storage().data_ptr()) if obj.numel() else None
            if base is not None and base is not obj and base.dtype == obj.dtype and not obj.requires_grad:
                return torch.as_strided, (base, tuple(obj.shape), obj.stride(), obj.storage_offset())
            if _whole_cpu_tensor(obj):
                if obj.numel():
                    self._storages[obj.untyped_storage().data_ptr()] = obj
                return torch.from_numpy, (obj.numpy(),)
        # (never called for exact dicts, lists...: their owners' states are rewritten instead)
        if (isinstance(obj, type) or not hasattr(obj, "__dict__") or type(obj).__reduce_ex__ is not object.__reduce_ex__
                or type(obj).__reduce__ is not object.__reduce__):  # pickled its own way
            return NotImplemented
        cached = _cached_properties(type(obj))
        large = [k for k, v in obj.__dict__.items() if type(v) is dict and len(v) >= 4096]
        if not (cached & obj.__dict__.keys()) and not large and not any(_many_strings(v) for v in obj.__dict__.values()):
            return NotImplemented
        state = obj.__getstate__()
        if not isinstance(state, dict):
            return NotImplemented
        state = {k: v for k, v in state.items() if k not in cached}
        for k in large:
            arrays = _pair_arrays(state[k]) if k in state else None
            if arrays is not None:
                state[k] = PairMap(*arrays)
        return _restore, (type(obj), _compact_strings(state))


def _whole_cpu_tensor(tensor: torch.Tensor) -> bool:
    """A plain CPU tensor that is its whole storage (so no other tensor's view is lost by
    pickling its values alone) and that numpy can hold."""
    return (tensor.device.type == "cpu" and not tensor.requires_grad and tensor.layout == torch.strided
            and tensor.is_contiguous() and tensor.storage_offset() == 0 and tensor.dtype not in _NOT_NUMPY
            and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size())


_NOT_NUMPY = frozenset({torch.bfloat16, torch.complex32, torch.float8_e4m3fn, torch.float8_e5m2})


def _many_strings(value: Any) -> bool:
    """A list of strings (or Nones), or a ``{str: int}`` dict, long enough to pickle as one text."""
    if type(value) is list and len(value) >= 4096:
        return all(v is None or type(v) is str for v in value)
    if type(value) is dict and len(value) >= 4096:
        return all(type(k) is str and type(v) is int for k, v in value.items())
    return False


def _compact_strings(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with its long lists of strings and ``{str: int}`` vocabularies as
    :class:`_Strings` (one text and its lengths: pickle spends ~1.5 us per memoized string,
    50 ms for BERT's 30k-token vocabulary, where slicing one text takes a few)."""
    return {k: _Strings(v) if _many_strings(v) else v for k, v in state.items()}


class _Strings:
    """A list of strings or a ``{str: int}`` dict while pickled: it unpickles as the list or dict."""

    def __init__(self, value: list | dict) -> None:
        self.value = value

    def __reduce__(self):
        if type(self.value) is list:
            items = ["" if v is None else v for v in self.value]
            missing = np.array([i for i, v in enumerate(self.value) if v is None], dtype=np.int64)
            return _strings_list, ("".join(items), np.array([len(v) for v in items], dtype=np.int64), missing)
        keys = list(self.value)
        return _strings_dict, ("".join(keys), np.array([len(k) for k in keys], dtype=np.int64),
                               np.array(list(self.value.values()), dtype=np.int64))


def _split(text: str, lengths: np.ndarray) -> list[str]:
    ends = np.cumsum(lengths).tolist()
    return [text[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def _strings_list(text: str, lengths: np.ndarray, missing: np.ndarray) -> list[str | None]:
    items: list[str | None] = _split(text, lengths)
    for i in missing.tolist():
        items[i] = None
    return items


def _strings_dict(text: str, lengths: np.ndarray, values: np.ndarray) -> dict[str, int]:
    return dict(zip(_split(text, lengths), values.tolist()))


@functools.lru_cache(maxsize=None)
def _cached_properties(cls: type) -> frozenset[str]:
    return frozenset(name for klass in cls.__mro__ for name, value in vars(klass).items()
                     if isinstance(value, functools.cached_property))


def _restore(cls: type, state: dict[str, Any]) -> Any:
    obj = cls.__new__(cls)
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None and type(obj).__setstate__ is not getattr(object, "__setstate__", None):
        setstate(state)
    else:
        obj.__dict__.update(state)
    return obj


def _pair_arrays(mapping: dict) -> tuple[np.ndarray, ...] | None:
    """``mapping``'s keys and values as four int64 arrays, if every key and value is a pair of ints."""
    try:
        if not all(type(k) is tuple and len(k) == 2 and type(v) is tuple and len(v) == 2 for k, v in mapping.items()):
            return None
        keys = np.array(list(mapping), dtype=np.int64)
        values = np.array(list(mapping.values()), dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    if keys.shape != (len(mapping), 2) or values.shape != (len(mapping), 2):
        return None
    return keys[:, 0].copy(), keys[:, 1].copy(), values[:, 0].copy(), values[:, 1].copy()


class PairMap(Mapping):
    """A read-only ``{(a, b): (c, d)}`` kept as four arrays; the dict is made on first use."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> None:
        self._arrays = (a, b, c, d)

    @functools.cached_property
    def _dict(self) -> dict[tuple[int, int], tuple[int, int]]:
        a, b, c, d = (x.tolist() for x in self._arrays)
        return dict(zip(zip(a, b), zip(c, d)))

    def __getitem__(self, key: tuple[int, int]) -> tuple[int, int]:
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._arrays[0])

    def __reduce__(self):
        return PairMap, self._arrays


# Attributes made on use (functools.cached_property) or describing the load: never pickled.
_REBUILT = frozenset({"_pad_id", "_decode_table", "_special_tokens", "_hf_id_to_token", "_hf_vocab", "_recipe",
                      "_recipe_components", "_whole_kernel", "_template_cache", "_padded_plans"})


def _components(tokenizer) -> tuple:
    return tuple(id(getattr(tokenizer, name, None)) for name in _COMPONENTS) + (len(tokenizer.added_tokens),)


def _from_state(cls: type, state: bytes):
    tokenizer = cls.__new__(cls)
    tokenizer.__dict__.update(pickle.loads(state))
    return tokenizer


def _from_recipe(cls: type, name: str, contents: dict[str, Any], options: dict[str, Any], settings: dict[str, Any]):
    arguments = dict(options)
    for argument, content in contents.items():
        arguments[argument] = _source_file(content) if isinstance(content, bytes) else content
    tokenizer = getattr(cls, name)(**arguments)
    if not settings.pop("word_cache"):
        tokenizer.word_cache = None
    tokenizer.__dict__.update(settings)
    if "_user_special_tokens" in settings:
        tokenizer.__dict__.pop("_special_tokens", None)
        for role, token in settings["_user_special_tokens"].items():
            setattr(tokenizer, role, token)
    return tokenizer


def _source_file(content: bytes) -> str:
    """A file holding ``content`` (a pickled tokenizer's source file, for its loader), kept in the
    cache under its sha256."""
    path = cache_dir() / "sources" / hashlib.sha256(content).hexdigest()
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_replace(path, content)
    return str(path)


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """A hash of gputok's own source files and the versions its pickled tables depend on."""
    import numpy
    import torch

    package = Path(__file__).parent
    digest = hashlib.sha256(f"{sys.version}|{torch.__version__}|{numpy.__version__}".encode())
    for path in sorted([*package.rglob("*.py"), *(package / "kernels").resolve().glob("*.py")]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _key(name: str, contents: dict[str, Any], options: dict[str, Any]) -> str | None:
    try:
        described = json.dumps(options, sort_keys=True, default=_plain)
    except TypeError:  # an option with no stable spelling: no disk cache
        return None
    digest = hashlib.sha256(f"{_code_version()}|{name}|{described}".encode())
    for argument, content in sorted(contents.items()):
        digest.update(argument.encode())
        digest.update(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(type(value).__name__)


def _cached_path(key: str) -> Path:
    return cache_dir() / "tokenizers" / f"{key}.pickle"


# A cached tokenizer's file: 8 bytes (the header's length), the header (pickled: the main pickle's
# length and each out-of-band buffer's offset and size), the main pickle, then the arrays, each at
# a multiple of 64 bytes. Read through a copy-on-write memory map, the arrays are not copied: the
# tables are paged in from the page cache as the kernels touch them.
_ALIGN = 64
_IN_BAND_BELOW = 1 << 16  # smaller arrays stay inside the pickle


def _read_cached(cls: type, key: str):
    try:
        with open(_cached_path(key), "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        (header_length,) = struct.unpack_from("<Q", mapped, 0)
        main_length, spans = pickle.loads(mapped[8:8 + header_length])
        start = 8 + header_length
        view = memoryview(mapped)
        state = pickle.loads(view[start:start + main_length], buffers=[view[a:a + n] for a, n in spans])
        tokenizer = cls.__new__(cls)
        tokenizer.__dict__.update(state)
        return tokenizer
    except FileNotFoundError:
        return None
    except Exception:  # a damaged or foreign file: build again (and overwrite it)
        return None


def _write_cached(tokenizer, key: str) -> None:
    path = _cached_path(key)
    buffers: list[pickle.PickleBuffer] = []
    main = state_bytes(tokenizer, lambda b: b.raw().nbytes < _IN_BAND_BELOW or buffers.append(b))
    spans, offset = [], 0
    for b in buffers:
        offset = -(-offset // _ALIGN) * _ALIGN
        spans.append((offset, b.raw().nbytes))
        offset += b.raw().nbytes
    header = pickle.dumps((len(main), []), protocol=5)
    for _ in range(2):  # the spans are absolute: they move with the header's own length
        base = -(-(8 + len(header) + len(main)) // _ALIGN) * _ALIGN
        header = pickle.dumps((len(main), [(base + a, n) for a, n in spans]), protocol=5)
    parts = [struct.pack("<Q", len(header)), header, main]
    position = 8 + len(header) + len(main)
    for (a, n), b in zip([(base + a, n) for a, n in spans], buffers):
        parts += [b"\0" * (a - position), b.raw()]
        position = a + n
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_replace(path, parts)
        kept = sorted(path.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-MAX_CACHED_TOKENIZERS]:
            old.unlink(missing_ok=True)
    except OSError:  # a read-only or full cache: loading still works, only slower next time
        pass


def _write_replace(path: Path, content: bytes | list) -> None:
    """Write ``content`` (bytes, or a list of byte-like parts) beside ``path`` and move it into
    place: readers in other processes see all or nothing."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for part in content if isinstance(content, list) else [content]:
                f.write(part)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
