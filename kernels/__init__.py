"""Triton kernels, shipped as ``gputok.kernels``: the only package that imports triton.

Each file holds one op: a private ``@triton.jit`` kernel, its launcher ``<op>_triton`` and, in its
docstring, the name of the torch twin it must equal (tests/test_kernels.py compares them under
``TRITON_INTERPRET=1``).
"""
