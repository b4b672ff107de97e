"""Keeping peak RSS near live data: glibc's heap holds freed memory back unless told otherwise."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
_GLIBC_MAX_DYNAMIC_THRESHOLD = 32 << 20  # where glibc's own threshold ends up on 64-bit
# The free memory a heap keeps at its top where the mmap threshold is set: glibc's own rule (twice
# the mmap threshold) at that threshold's largest. Setting the mmap threshold stops glibc from
# raising the trim threshold with it, and at its 128 KB default every free of the heap's top gave
# pages back that the next batch faulted in again: Unigram training's E-steps took 4.0-4.5 s
# against 2.8-3.0 without the setting (20 MB of English), 2.8-3.0 with this.
_TRIM_THRESHOLD = 2 * _GLIBC_MAX_DYNAMIC_THRESHOLD


def _libc():
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except (AttributeError, OSError, TypeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    Training frees many tensors too small for their own mapping (count tables of chunks, seed
    and lattice arrays); glibc keeps those pages resident, which raised the peak RSS of later
    phases by tens to ~100 MB. It takes milliseconds.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def big_blocks_unmapped_when_freed(threshold: int = 4 << 20) -> Iterator[None]:
    """Within: glibc gives every allocation of ``threshold`` bytes or more its own mapping, which
    goes back to the system the moment the tensor is freed.

    glibc's default threshold rises with the largest block freed, up to 32 MB, so a training run's
    transient 4-32 MB tensors (a chunk's codepoints, hashes, sort keys) would be carved from the
    heap, and the heap stays as large as its busiest moment. On the ~100 MB English set this
    lowers bert-wordpiece training's peak RSS by ~30 MB at no measurable cost in time. Afterwards
    the threshold is left fixed at 32 MB (glibc's own stops adjusting once set), where it ends up
    in a long-running process, and the trim threshold at 64 MB (``_TRIM_THRESHOLD``: glibc would
    raise it with the mmap threshold, but not once that is set). The settings are process-wide:
    other threads see them meanwhile. Nothing happens where ``MALLOC_MMAP_THRESHOLD_`` or the
    ``glibc.malloc.mmap_threshold`` tunable is set (the caller's choice) or off glibc; the trim
    threshold is left alone where ``MALLOC_TRIM_THRESHOLD_`` or its tunable is set.
    """
    libc = _libc()
    if (libc is None or "MALLOC_MMAP_THRESHOLD_" in os.environ
            or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", "")):
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, threshold)
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ and "trim_threshold" not in os.environ.get("GLIBC_TUNABLES", ""):
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _GLIBC_MAX_DYNAMIC_THRESHOLD)
