"""A bounded cache of encoded words that persists across batches: word -> token ids.

The model (BPE merges above all) only needs to run on words it has not seen before: real text
reuses a few hundred thousand words, so after the first batches nearly every unique word of a
batch is a cache hit. huggingface ``tokenizers`` keeps the same kind of cache (a hash map of
10,000 words in its BPE model); here it is tensors, looked up for a whole batch at once.

Layout: an open-addressing :mod:`gputok.hashing` table from the word's 63-bit hash
(:func:`gputok.dedup.span_hashes`) to an entry number, and per entry its codepoints, token ids
and token ends (the model's ``encode_words`` output) in flat buffers. A hit is checked exactly
against the stored codepoints, so a hash collision costs a miss, never a wrong token.

Bound and eviction: at most ``capacity`` words of at most ``max_word_length`` codepoints each
(longer words are encoded every time); when a batch brings more new words than there is room
for, the cache is emptied first and refilled from that batch (a generational reset: no
per-entry bookkeeping, and a batch never evicts its own words). A cache belongs to one model:
given another, it empties itself.

Two paths, one store: CPU tensors under the numba backend run :mod:`gputok.kernels.word_cache_numba`
(a lookup kernel that also deduplicates the misses and gathers their codepoints, an assemble
kernel, an insert kernel: a handful of Python calls per batch); CUDA tensors and
``GPUTOK_BACKEND=torch`` run the batched torch ops below. Both use the same keys (the kernel
computes :func:`gputok.dedup.span_hashes` itself), the same table layout and the same entries,
so a store filled by one path serves the other.

Thread safety: one table shared by all threads, with a lock around inserts, rather than one
table per thread: the chunks of one batch run on several threads at once and would otherwise
each encode (and store) the same common words, and a user's 8 threads would keep 8 copies.
A lookup takes a snapshot of the store under the lock (arrays and ``count``; the CPU kernels
take the one the last change under the lock left, without locking) and reads outside it, and the
model runs outside it too, so threads look up and encode in parallel. An insert
(under the lock) only fills empty slots and writes past ``count`` (a growing buffer moves to a
new array; a full cache gets a new store), so nothing a snapshot trusts changes under it, and
a slot being written reads as a miss (see the kernel file). Forked children get a fresh lock.
A small padded call (:meth:`WordCache.encode_inserting`: BPE's batch-1 call) instead runs its
whole kernel under the lock, when the lock is free, and the kernel inserts its own misses: the
store's sizes live in one ``state`` array the insert kernels update, so no Python bookkeeping
follows; a busy lock sends the call the lock-free way.

Memory: 16 bytes per table slot (2 to 4 slots per word of capacity), 32 bytes per entry, 4 bytes
per stored codepoint and 16 per stored token: about 30 MB when full at the default capacity
(2**18 words) on English text, per device it has served.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from . import _dispatch
from .dedup import gather_words, span_hashes, spans_equal, unique_spans
from .hashing import HashMap, insert, lookup
from .ragged import Ragged, nonzero, offsets_from_lengths, segment_sum, span_indices
from .kernels import word_cache_numba

_NO_KEYS = np.zeros(0, dtype=np.int64)
_CPU = torch.device("cpu")
Encoder = Callable[[torch.Tensor, torch.Tensor], tuple[Ragged, Ragged]]


class _Buffer:
    """A growable 1-D tensor (capacity doubles): append in amortized O(length). Its size is
    ``state[index]`` (its store's ``state``, which the insert kernels update)."""

    def __init__(self, dtype: torch.dtype, device: torch.device, state: np.ndarray, index: int) -> None:
        self._state, self._index = state, index
        self._use(_full((1024,), None, dtype, device))

    @property
    def size(self) -> int:
        return int(self._state[self._index])

    @size.setter
    def size(self, value: int) -> None:
        self._state[self._index] = value

    def _use(self, data: torch.Tensor) -> None:
        self.data = data
        self.capacity = data.numel()  # an int: a batch-1 insert checks it three times
        self.array = data.numpy() if data.device.type == "cpu" else None  # the kernels' view

    def append(self, values: torch.Tensor) -> int:
        start = self.size
        self.reserve(values.numel())
        self.data[start:start + values.numel()] = values
        self.size = start + values.numel()
        return start

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more values (a larger buffer is a new tensor: readers keep the old)."""
        end = self.size + extra
        if end > self.capacity:
            grown = _full((max(end, 2 * self.capacity),), None, self.data.dtype, self.data.device)
            if self.array is not None:
                grown.numpy()[:self.size] = self.array[:self.size]
            else:
                grown[:self.size] = self.data[:self.size]
            self._use(grown)


def _full(shape: tuple[int, ...], value: int | None, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of ``value`` (None: uninitialized); on the CPU made and filled by numpy: inserts run
    on the caller's thread outside ``_cpu_threads.gputok_threads`` (a batch-1 call does not pay
    for that setting), where torch's fill or copy would wake its OpenMP threads, which then spin on
    the cores the next calls need (measured: +20-40% CPU time at batch 1,024 with a cold cache)."""
    if device.type != "cpu":
        return (torch.empty(shape, dtype=dtype, device=device) if value is None
                else torch.full(shape, value, dtype=dtype, device=device))
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    if value == 0:  # pages zeroed by the system when first touched
        return torch.from_numpy(np.zeros(shape, numpy_dtype))
    array = np.empty(shape, numpy_dtype)
    if value is not None:
        array.fill(value)
    return torch.from_numpy(array)


def _state_field(index: int, doc: str) -> property:
    """A :class:`_Store` attribute kept in its ``state`` array, at ``index``."""

    def get(store: _Store) -> int:
        return int(store.state[index])

    def set(store: _Store, value: int) -> None:
        store.state[index] = value

    return property(get, set, doc=doc)


class _Store:
    """The cache's tensors on one device, and its sizes in one int64 array (``state``, laid out
    as ``word_cache_numba.STATE_*``: the insert kernels read and update it in place)."""

    def __init__(self, capacity: int, device: torch.device, max_word_length: int) -> None:
        slots = 1 << (2 * capacity - 1).bit_length()
        self.mask = slots - 1
        self.slot_keys = _full((slots,), HashMap.EMPTY, torch.int64, device)
        self.slot_entry = _full((slots,), HashMap.EMPTY, torch.int64, device)
        self.state = np.zeros(word_cache_numba.STATE_SIZE, np.int64)
        self.state[word_cache_numba.STATE_PROBES] = 1
        self.state[word_cache_numba.STATE_CAPACITY] = capacity
        self.state[word_cache_numba.STATE_MAX_LEN] = max_word_length
        # per entry: start and length of its codepoints and of its tokens
        self.entries = _full((capacity, 4), 0, torch.int64, device)
        self.chars = _Buffer(torch.int32, device, self.state, word_cache_numba.STATE_CHARS)
        self.ids = _Buffer(torch.int64, device, self.state, word_cache_numba.STATE_IDS)
        self.ends = _Buffer(torch.int64, device, self.state, word_cache_numba.STATE_ENDS)
        self.shift = 64 - self.mask.bit_length()
        if device.type == "cpu":  # the kernels' views of the same memory
            self.slot_keys_array, self.slot_entry_array = self.slot_keys.numpy(), self.slot_entry.numpy()
            self.entries_array = self.entries.numpy()

    count = _state_field(word_cache_numba.STATE_COUNT, "Entries held.")
    max_probes = _state_field(word_cache_numba.STATE_PROBES, "The longest probe sequence of the table, + 1.")

    def reserve(self, chars: int, tokens: int) -> None:
        """Room in the buffers for ``chars`` more codepoints and ``tokens`` more tokens."""
        self.chars.reserve(chars)
        self.ids.reserve(tokens)
        self.ends.reserve(tokens)

    def arrays(self) -> tuple:
        """The CPU store as the insert kernels take it: table, entries, buffers, ``state``."""
        return (self.slot_keys_array, self.slot_entry_array, self.entries_array, self.chars.array, self.ids.array,
                self.ends.array, self.state)

    def snapshot(self) -> _Snapshot:
        return _Snapshot(self.slot_keys, self.slot_entry, self.mask, self.max_probes, self.count, self.entries,
                         self.chars.data[:self.chars.size], self.ids.data, self.ends.data)


@dataclass(frozen=True)
class _Snapshot:
    """What a lookup reads: a store's tensors and sizes, taken under the cache's lock and read
    outside it. Later inserts only fill empty slots and write past ``count`` (a growing buffer
    moves to a new tensor; a full cache gets a new store), so nothing below ``count`` changes
    under a reader: an entry at or past it is a miss."""

    slot_keys: torch.Tensor
    slot_entry: torch.Tensor
    mask: int
    max_probes: int
    count: int
    entries: torch.Tensor
    chars: torch.Tensor
    ids: torch.Tensor
    ends: torch.Tensor

    def find(self, keys: torch.Tensor) -> torch.Tensor:
        """Entry of each key, or -1."""
        entry = lookup(self.slot_keys, self.slot_entry, self.mask, self.max_probes, keys)
        return torch.where(entry < self.count, entry, -1)


_caches: weakref.WeakSet[WordCache] = weakref.WeakSet()


class WordCache:
    """Words already encoded, shared by every batch a tokenizer encodes (see the module notes).

    >>> import gputok
    >>> from gputok import assets
    >>> enc = gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")
    >>> enc.word_cache = WordCache(capacity=1000)
    >>> enc.encode_batch(["a cached word", "a cached word again"]) == enc.encode_batch(["a cached word", "a cached word again"])
    True
    >>> len(enc.word_cache)  # "a", " cached", " word", " again"
    4
    """

    def __init__(self, capacity: int = 1 << 18, *, max_word_length: int = 64) -> None:
        if capacity < 1 or max_word_length < 1:
            raise ValueError(f"WordCache(capacity={capacity}, max_word_length={max_word_length}): both must be "
                             ">= 1; to turn the cache off, set the tokenizer's word_cache to None")
        self.capacity = capacity
        self.max_word_length = max_word_length
        self._stores: dict[torch.device, _Store] = {}
        self._owner: Callable[[], object] | None = None
        self._lock = threading.Lock()
        # (the owner's weak reference, :meth:`cpu_snapshot`'s tuple) of the CPU store as the last
        # change under the lock left it, or None: read in one step without the lock (a tuple is
        # replaced whole, never edited), the lock cost ~0.3 us of every batch-1 call
        self._cpu_view: tuple[Callable[[], object], tuple] | None = None
        # (the owner's weak reference, the CPU store's ``_Store.arrays``) as the last change under
        # the lock left them, or None: what :meth:`encode_inserting` hands its kernel
        self._cpu_arrays: tuple[Callable[[], object], tuple] | None = None
        _caches.add(self)

    def __len__(self) -> int:
        """Words held (in the store of each device)."""
        return sum(s.count for s in self._stores.values())

    def _take(self, owner: object) -> None:
        """Hold ``owner``'s words only (under the lock): another model empties the cache."""
        if self._owner is None or self._owner() is not owner:
            self._stores.clear()
            self._cpu_view = self._cpu_arrays = None
            self._owner = weakref.ref(owner)

    def _new_store(self, device: torch.device) -> _Store:
        return _Store(self.capacity, device, self.max_word_length)

    def __getstate__(self) -> dict:
        # A pickled tokenizer (DataLoader workers under spawn) starts with an empty cache.
        return {"capacity": self.capacity, "max_word_length": self.max_word_length}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def encode(self, owner: object, values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor,
               keys: torch.Tensor | None, encode: Encoder, *, with_ends: bool = True,
               gathered: bool = False) -> tuple[Ragged, Ragged | None]:
        """Token ids and token ends of every word ``values[starts[i]:starts[i] + lengths[i]]``.

        ``keys``: the words' hashes (:func:`gputok.dedup.span_hashes`; None: computed here); the
        words must not overlap. ``encode(starts, lengths)`` runs the model ``owner`` on distinct
        words and returns ``(ids, ends)`` as ragged tensors, one row per word; it sees only the
        distinct words that miss. ``gathered=True``: ``encode`` takes those words' codepoints
        instead, as one ragged tensor (``model.encode_words``). ``with_ends=False``: the token
        ends are not gathered (None is returned).
        """
        if values.device.type == "cpu" and _dispatch.on_cpu_kernels(values.device):
            return self._encode_kernels(owner, values, starts, lengths, keys, encode, with_ends, gathered)
        if keys is None:
            keys = span_hashes(values, starts, starts + lengths)
        if gathered:
            model = encode
            encode = lambda s, n: model(gather_words(values, s, n))  # noqa: E731
        device = values.device
        with self._lock:
            self._take(owner)
            store = self._stores.get(device)
            if store is None:
                store = self._stores[device] = self._new_store(device)
            stored = store.snapshot()
        # Read outside the lock, so that threads encoding chunks of one batch look up together.
        entry = stored.find(keys)
        hit = nonzero(entry >= 0)
        hit_entries = stored.entries.index_select(0, entry.index_select(0, hit))
        same = self._verified(stored.chars, hit_entries, values, starts.index_select(0, hit), lengths.index_select(0, hit))
        if same is not None:  # a hash collision (rare): those words miss
            hit, hit_entries = hit.index_select(0, same), hit_entries.index_select(0, same)
        stored_tokens, hit_offsets = span_indices(hit_entries[:, 2], hit_entries[:, 3])
        hit_ids = stored.ids.index_select(0, stored_tokens)
        hit_ends = stored.ends.index_select(0, stored_tokens) if with_ends else None
        if hit.numel() == keys.numel():  # every word hit: the tokens are in order already
            return Ragged(hit_ids, hit_offsets), Ragged(hit_ends, hit_offsets) if with_ends else None
        is_miss = torch.ones(keys.numel(), dtype=torch.bool, device=device)
        is_miss.index_fill_(0, hit, False)
        miss = nonzero(is_miss)
        miss_starts, miss_lengths, miss_keys = (t.index_select(0, miss) for t in (starts, lengths, keys))
        unique = unique_spans(values, miss_starts, miss_lengths, miss_keys)
        rep = unique.representative
        new_ids, new_ends = encode(miss_starts.index_select(0, rep), miss_lengths.index_select(0, rep))
        # Each word's tokens are a span of [hit tokens | new tokens]: one gather lays them out.
        # (scatter_ rather than indexed assignment: ~4x faster on the CPU)
        out_lengths = torch.empty_like(lengths)
        out_lengths.scatter_(0, hit, hit_entries[:, 3]).scatter_(0, miss, new_ids.lengths().index_select(0, unique.inverse))
        first = torch.empty_like(lengths)
        first.scatter_(0, hit, hit_offsets[:-1])
        first.scatter_(0, miss, new_ids.offsets.index_select(0, unique.inverse) + hit_ids.numel())
        source, out_offsets = span_indices(first, out_lengths)
        ids = torch.cat([hit_ids, new_ids.values.long()]).index_select(0, source)
        ends = torch.cat([hit_ends, new_ends.values.long()]).index_select(0, source) if with_ends else None
        self._insert(owner, device, miss_keys.index_select(0, rep), values, miss_starts.index_select(0, rep),
                     miss_lengths.index_select(0, rep), new_ids, new_ends)
        return Ragged(ids, out_offsets), Ragged(ends, out_offsets) if with_ends else None

    def _encode_kernels(self, owner: object, values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor,
                        keys: torch.Tensor | None, encode: Encoder, with_ends: bool,
                        gathered: bool) -> tuple[Ragged, Ragged | None]:
        """:meth:`encode` on the CPU: three kernels of ``gputok.kernels.word_cache_numba`` and the model."""
        device = values.device
        with self._lock:
            self._take(owner)
            store = self._stores.get(device)
            if store is None:
                store = self._stores[device] = self._new_store(device)
            count, chars, ids, ends = store.count, store.chars.array, store.ids.array, store.ends.array
        v = values.numpy()
        out_chars = np.empty(v.size, v.dtype)
        entry, uniq, reps, rep_keys, rep_offsets = word_cache_numba.lookup_dedup(
            v, starts.numpy(), lengths.numpy(), _NO_KEYS if keys is None else keys.numpy(), store.slot_keys_array,
            store.slot_entry_array, store.shift, store.mask, count, store.entries_array, chars, out_chars)
        if reps.size:
            rep_words = Ragged(torch.from_numpy(out_chars[:rep_offsets[-1]]), torch.from_numpy(rep_offsets))
            if gathered:
                new_ids, new_ends = encode(rep_words)
            else:
                rep = torch.from_numpy(reps)
                new_ids, new_ends = encode(starts.index_select(0, rep), lengths.index_select(0, rep))
            new_values, new_offsets = new_ids.values.long().numpy(), new_ids.offsets.numpy()
            new_end_values = new_ends.values.long().numpy()
        else:
            new_values = new_end_values = new_offsets = np.zeros(1, np.int64)
        out_ids, out_ends, offsets = word_cache_numba.assemble(entry, uniq, store.entries_array, ids, ends,
                                                new_values, new_end_values, new_offsets, with_ends)
        if reps.size:
            self._insert_kernels(owner, device, int(rep_offsets[-1]), new_values.size, functools.partial(
                word_cache_numba.insert, rep_keys, out_chars, rep_offsets, new_values, new_end_values, new_offsets))
        offsets = torch.from_numpy(offsets)
        return (Ragged(torch.from_numpy(out_ids), offsets),
                Ragged(torch.from_numpy(out_ends), offsets) if with_ends else None)

    def cpu_snapshot(self, owner: object) -> tuple:
        """What a whole-pipeline kernel reads (``gputok.kernels.bpe_texts_numba``): the CPU store's
        table (keys and entries; a power-of-2 size), its ``count``, entries and buffers, taken under the
        lock and read outside it (see :class:`_Snapshot` for why that is safe), or the same tuple
        as the last change under the lock left it (``_cpu_view``), without the lock."""
        view = self._cpu_view
        if view is not None and view[0]() is owner:
            return view[1]
        with self._lock:
            self._take(owner)
            store = self._stores.get(_CPU)
            if store is None:
                store = self._stores[_CPU] = self._new_store(_CPU)
            return self._viewed(store)

    def _viewed(self, store: _Store) -> tuple:
        """:meth:`cpu_snapshot`'s tuple of the CPU ``store``, kept as ``_cpu_view``, and its
        arrays as ``_cpu_arrays`` (under the lock)."""
        snapshot = (store.slot_keys_array, store.slot_entry_array, store.count, store.entries_array,
                    store.chars.array, store.ids.array, store.ends.array)
        self._cpu_view = (self._owner, snapshot)
        self._cpu_arrays = (self._owner, store.arrays())
        return snapshot

    def encode_inserting(self, owner: object, kernel: Callable[..., np.ndarray], data: bytes, lengths: np.ndarray,
                         model: np.ndarray, options: np.ndarray) -> np.ndarray | None:
        """``kernel(data, lengths, model, options, *the CPU store's arrays)`` (``_Store.arrays``;
        arguments by name, not ``*args``: ~0.1 us of a batch-1 call), a kernel that looks words
        up in the store and inserts its misses itself (``bpe_texts_numba.encode_padded_cells``), run
        under the lock: its answer, after a new store or larger buffers where it asked for them (it
        changed nothing then) and a call again. None where the lock is busy (another thread
        inserts: the caller takes the lock-free path, :meth:`cpu_snapshot` and
        :meth:`insert_misses`). At batch 1: the lock for the length of a kernel call (a few us),
        and no separate insert (that was ~2.5 us of a ~15 us call with new words)."""
        lock = self._lock
        if not lock.acquire(False):
            return None
        try:
            view = self._cpu_arrays
            if view is None or view[0]() is not owner:
                self._take(owner)
                self._viewed(self._stores.get(_CPU) or self._stores.setdefault(_CPU, self._new_store(_CPU)))
                view = self._cpu_arrays
            out = kernel(data, lengths, model, options, *view[1])
            while len(out) == 0 and out.shape[1] in (word_cache_numba.DECLINED_FULL, word_cache_numba.DECLINED_GROW):
                store = self._stores[_CPU]
                if out.shape[1] == word_cache_numba.DECLINED_FULL:
                    store = self._stores[_CPU] = self._new_store(_CPU)  # full: start anew (readers keep the old)
                else:
                    store.reserve(out.shape[2], out.shape[2])
                self._viewed(store)
                out = kernel(data, lengths, model, options, *self._cpu_arrays[1])
            # the count changed under the snapshot tuple: made afresh under the lock when next asked
            self._cpu_view = None
        finally:
            lock.release()
        return out

    def insert_misses(self, owner: object, misses: np.ndarray) -> None:
        """Store the distinct words a :meth:`cpu_snapshot` reader missed, packed in one array
        (``word_cache_numba.pack_misses``: keys, codepoints, tokens), under the lock: those that
        fit and are still absent."""
        self._insert_kernels(owner, _CPU, int(misses[1]), int(misses[2]),
                             functools.partial(word_cache_numba.insert_packed, misses))

    def _insert_kernels(self, owner: object, device: torch.device, chars_size: int, ids_size: int,
                        insert: Callable[..., int]) -> None:
        """``insert(truncate, *the store's arrays)``: a call of ``word_cache_numba.insert`` (or
        ``insert_packed``) on words of ``chars_size`` codepoints and ``ids_size`` tokens in all,
        under the lock; the buffers grown where they lack room, a full store replaced by a new one."""
        with self._lock:
            store = self._stores.get(device)
            if store is None or self._owner() is not owner:  # another model took the cache meanwhile
                return
            for truncate in (False, True):
                added = insert(truncate, *store.arrays())
                if added == -2:  # the buffers first
                    store.reserve(chars_size, ids_size)
                    added = insert(truncate, *store.arrays())
                if added >= 0:
                    break
                store = self._stores[device] = self._new_store(device)  # full: start anew
            if device == _CPU:
                self._viewed(store)

    def _verified(self, chars: torch.Tensor, stored: torch.Tensor, values: torch.Tensor, starts: torch.Tensor,
                  lengths: torch.Tensor) -> torch.Tensor | None:
        """None if every word equals its ``stored`` entry (rows of ``entries``; their characters
        in ``chars``) character for character (the common case: no collision at all), else the
        indices of the words that do."""
        if bool(torch.equal(stored[:, 1], lengths)) and spans_equal(values, starts, lengths, chars, stored[:, 0]):
            return None
        # A hash collision somewhere (rare): find the words, character by character.
        same = nonzero(stored[:, 1] == lengths)
        word_chars, offsets = span_indices(starts.index_select(0, same), lengths.index_select(0, same))
        stored_chars = span_indices(stored[:, 0].index_select(0, same), lengths.index_select(0, same))[0]
        differ = values.index_select(0, word_chars) != chars.index_select(0, stored_chars)
        return same.index_select(0, nonzero(segment_sum(differ.long(), offsets) == 0))

    def _insert(self, owner: object, device: torch.device, keys: torch.Tensor, values: torch.Tensor, starts: torch.Tensor,
                lengths: torch.Tensor, ids: Ragged, ends: Ragged) -> None:
        fits = nonzero(lengths <= self.max_word_length)
        with self._lock:
            store = self._stores.get(device)
            if store is None or self._owner() is not owner:  # another model took the cache meanwhile
                return
            # Another thread may have stored some of these words since the lookup.
            fits = fits[store.snapshot().find(keys.index_select(0, fits)) < 0][: self.capacity]
            if not fits.numel():
                return
            if store.count + fits.numel() > self.capacity:  # full: start anew (readers may hold the old store)
                store = self._stores[device] = self._new_store(device)
            n = fits.numel()
            word_lengths, token_lengths = lengths.index_select(0, fits), ids.lengths().index_select(0, fits)
            char_index = span_indices(starts.index_select(0, fits), word_lengths)[0]
            token_index = span_indices(ids.offsets.index_select(0, fits), token_lengths)[0]
            char_start = store.chars.append(values.index_select(0, char_index).int())
            token_start = store.ids.append(ids.values.index_select(0, token_index).long())
            store.ends.append(ends.values.index_select(0, token_index).long())
            entries = store.entries[store.count:store.count + n]
            entries[:, 0] = char_start + offsets_from_lengths(word_lengths)[:-1]
            entries[:, 1] = word_lengths
            entries[:, 2] = token_start + offsets_from_lengths(token_lengths)[:-1]
            entries[:, 3] = token_lengths
            numbers = torch.arange(store.count, store.count + n, device=device)
            probes = insert(store.slot_keys, store.slot_entry, store.mask, keys.index_select(0, fits), numbers)
            store.max_probes = max(store.max_probes, probes)
            store.count += n
            if device == _CPU:
                self._viewed(store)


def _after_fork() -> None:
    for cache in list(_caches):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
