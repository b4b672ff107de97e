"""Triton kernels, shipped as ``gputok.kernels``: the only package that imports triton.

Each file holds one op: a private ``@triton.jit`` kernel, its launcher ``<op>_triton`` and, in its
docstring, the name of the torch twin it must equal. The tests compare each kernel with its twin
under ``TRITON_INTERPRET=1``, compile the launches of small real workloads for sm_75, sm_80 and
sm_90 (``tests/test_kernels_compile.py``: the interpreter accepts code the compiler refuses, such as a
module global that is not a ``tl.constexpr``), and, on a CUDA machine, run them on the GPU
(``tests/test_cuda.py``).

CPU kernels are numba functions decorated with ``_numba.kernel`` (``@njit(nogil=True,
cache=True)``, cached under gputok's cache dir), in files of their own that import numba, not
triton: ``<op>_numba.py`` beside the Triton ``<op>.py`` of the same contract, each with its
contract and its reference in the docstring. A kernel is sequential over its rows; a batch's
chunks run on Python threads at once (``gputok._cpu_threads``), which nogil lets run in parallel.
``bpe_heap.py`` (BPE merges one pair at a time; twin ``gputok.models.bpe.bpe_merge_heap``).
"""
