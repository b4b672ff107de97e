"""Memory for large padded outputs, reused once the caller has dropped them.

A padded batch of 65,536 lines is three [65,536, width] int64 tensors, tens of MB each. Fresh
memory from the system arrives one page fault at a time (4 kB pages, or 2 MB ones the kernel may
first have to compact memory for), and on the 2-core machine filling fresh pages cost more than
encoding the batch's text: BERT's padded call of 65,536 English lines took 83 ms against 48 ms in
reused memory (``benchmarks/padded_memory.py``, medians), its ragged call 41 ms. glibc hands such
blocks straight back to the system when they are freed, so a training loop that drops each batch
before the next paid that on every call.

``empty`` leases a buffer that a dropped output gave back, else allocates one; a buffer goes back
when the last array or tensor viewing it is gone. That is known exactly: the arrays are views of a
``_Lease``, which every view keeps alive (numpy's chain of bases stops at an object that is not an
array), and whose death returns the buffer. torch's ``from_numpy`` keeps the array, so the tensors
and their views do too. At most ``KEEP_BYTES`` of free buffers are kept; ``release``
(``gputok.release_memory``) hands them back to the system.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref

import numpy as np

# Smaller outputs come from glibc's heap, which already reuses freed blocks of that size.
FROM_BYTES = 1 << 20
# The most free bytes kept for later calls: two calls of 65,536 padded lines (~60 MB each) and more.
KEEP_BYTES = 256 << 20
# A buffer serves a request of at least half its size, so a small output never holds a large buffer.
_MOST_SLACK = 2


class _Lease:
    """The owner of one leased buffer, as numpy sees it (``__array_interface__``)."""

    __slots__ = ("__array_interface__", "_buffer", "__weakref__")

    def __init__(self, buffer: np.ndarray, shape: tuple[int, ...], dtype: np.dtype):
        self._buffer = buffer
        self.__array_interface__ = {"data": (buffer.ctypes.data, False), "shape": shape, "typestr": dtype.str,
                                    "version": 3}


class _Pool:
    """Free buffers. A dropped output's finalizer may run in any thread, at any moment (in a garbage
    collection inside ``take`` too), so it only appends to ``_returned`` (atomic, no lock);
    ``take`` moves those into ``_free``, which it alone touches, under its lock."""

    def __init__(self):
        self._returned: collections.deque[np.ndarray] = collections.deque()
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            self._collect()
            fits = [(buffer.size, i) for i, buffer in enumerate(self._free)
                    if nbytes <= buffer.size <= _MOST_SLACK * nbytes]
            if fits:
                return self._free.pop(min(fits)[1])
        return np.empty(nbytes, np.uint8)

    def give_back(self, buffer: np.ndarray) -> None:
        self._returned.append(buffer)

    def release(self) -> None:
        with self._lock:
            self._collect()
            self._free.clear()

    def free_bytes(self) -> int:
        with self._lock:
            self._collect()
            return sum(buffer.size for buffer in self._free)

    def _collect(self) -> None:
        while self._returned:
            self._free.append(self._returned.popleft())
        total = sum(buffer.size for buffer in self._free)
        while total > KEEP_BYTES:  # the oldest first
            total -= self._free.pop(0).size


_pool = _Pool()


def empty(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """``np.empty(shape, dtype)``, in a reused buffer when it is ``FROM_BYTES`` or more."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < FROM_BYTES:
        return np.empty(shape, dtype)
    buffer = _pool.take(nbytes)
    lease = _Lease(buffer, tuple(shape), dtype)
    weakref.finalize(lease, _give_back, buffer).atexit = False
    return np.asarray(lease)


def _give_back(buffer: np.ndarray) -> None:
    _pool.give_back(buffer)  # the pool of now: a forked child has its own


def release() -> None:
    """Hand the free buffers kept for later padded outputs back to the system (``gputok.release_memory``).
    Outputs still in use are not touched; they return to the pool when dropped."""
    _pool.release()


def free_bytes() -> int:
    """Bytes of free buffers kept now."""
    return _pool.free_bytes()


def _after_fork_in_child() -> None:
    # a lock held by another thread at the fork stays held in the child: start over
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_after_fork_in_child)
