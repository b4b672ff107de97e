"""The one place that decides which kernels a stage runs: Triton, numba, or the torch-op twins.

CUDA tensors take the Triton kernels, CPU tensors the numba kernels (``gputok.kernels.*_numba``,
``@njit(nogil=True, cache=True)``). ``torch`` is the first design's torch-op twins, kept as the
reference the kernels are tested against. ``GPUTOK_BACKEND=triton|numba|torch`` (or
:func:`use_backend` in tests) forces one path; the tests force ``triton`` on CPU tensors under
``TRITON_INTERPRET=1`` to run exactly the CUDA code path. A stage with no numba kernel yet runs
its torch twin under ``numba``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

BACKENDS = ("triton", "numba", "torch")
_forced: list[str] = []
_environ = os.environ
# ``"GPUTOK_BACKEND" in os.environ`` as one lookup in the mapping behind os.environ (which
# setenv, monkeypatch and ``del os.environ[...]`` keep current): the public test encodes the key
# on every call, ~0.5 us of every stage of every encode call.
_environ_data = getattr(_environ, "_data", _environ)
_BACKEND_KEY = _environ.encodekey("GPUTOK_BACKEND") if _environ_data is not _environ else "GPUTOK_BACKEND"
CPU = torch.device("cpu")


def backend(device: torch.device) -> str:
    choice = _forced[-1] if _forced else _environ.get("GPUTOK_BACKEND")
    if choice:
        if choice not in BACKENDS:
            raise ValueError(f"GPUTOK_BACKEND={choice!r} is not one of {BACKENDS}")
        return choice
    kind = device.type if isinstance(device, torch.device) else torch.device(device).type  # ~1 us saved a call
    return "triton" if kind == "cuda" else "numba"


def on_cpu_kernels(device: torch.device) -> bool:
    """Whether ``device``'s tensors go to the numba kernels (CPU tensors, unless forced otherwise)."""
    # called by every stage of every encode call: the common case in a few attribute reads (the
    # shared CPU device first: reading a torch.device's type makes a new str, ~0.2 us)
    if not _forced and _BACKEND_KEY not in _environ_data and (device is CPU or getattr(device, "type", None) == "cpu"):
        return True
    return backend(device) == "numba"


def checked_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a ``torch.device`` (None: the CPU), with a clear error when it names a CUDA
    device this torch cannot use (a CPU build, or no GPU), instead of torch's assertion deep inside.

    >>> checked_device("cpu")
    device(type='cpu')
    """
    if device is None or device == "cpu":
        return CPU
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a torch device; pass 'cpu' or 'cuda'") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} but this torch has no usable CUDA device "
                         f"(torch {torch.__version__}); pass device='cpu' or install a CUDA build of torch")
    return device


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")
    _forced.append(name)
    try:
        yield
    finally:
        _forced.pop()


def state_without_kernel_tables(model) -> dict:
    """``__getstate__`` of a model whose CPU kernels' tables (the cached ``_numba_tables``: numpy
    views of the model's own tensors) stay behind when it is pickled (DataLoader workers): they
    would pickle those tensors twice; they are made again on first use. Use as
    ``__getstate__ = _dispatch.state_without_kernel_tables``."""
    state = dict(model.__dict__)
    state.pop("_numba_tables", None)
    return state
