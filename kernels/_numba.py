"""The decorator every numba kernel uses, and where their compiled code is cached.

``kernel`` is ``numba.njit(nogil=True, cache=True)``: nogil so that the chunks of a batch run on
ordinary Python threads at once (``gputok._cpu_threads``; no numba threading layer, which breaks
under fork or concurrent callers, see ``shared/NUMBA.md``), cache so that a process loads
compiled code from disk instead of compiling again. The cache lives under gputok's cache dir
(``$GPUTOK_CACHE/numba``, else ``~/.cache/gputok/numba``), not beside the installed sources,
which may be read-only; ``NUMBA_CACHE_DIR`` set by the user wins.
"""

import os

import numba

if not os.environ.get("NUMBA_CACHE_DIR"):
    _home = os.environ.get("GPUTOK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gputok")
    # Read when a cached function is defined: set before any kernel module below is imported.
    numba.config.CACHE_DIR = os.path.join(_home, "numba")

kernel = numba.njit(nogil=True, cache=True)
