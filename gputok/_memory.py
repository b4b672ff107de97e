"""Handing freed heap memory back to the system, so that peak RSS follows live data."""

from __future__ import annotations


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    Training frees many tensors too small for their own mapping (count tables of chunks, seed
    and lattice arrays); glibc keeps those pages resident, which raised the peak RSS of later
    phases by tens to ~100 MB. It takes milliseconds.
    """
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError, TypeError):  # not glibc
        pass
