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
"""

import hashlib
import os
from pathlib import Path

import numba


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    _home = os.environ.get("GPUTOK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gputok")
    # Read when a cached function is defined: set before any kernel module is imported.
    numba.config.CACHE_DIR = os.path.join(_home, "numba", _sources_hash())

kernel = numba.njit(nogil=True, cache=True)
