"""The one place that decides between a Triton kernel and its torch twin.

CUDA tensors take the kernel, CPU tensors the twin. ``GPUTOK_BACKEND=triton|torch`` (or
:func:`use_backend` in tests) forces one path; the tests force ``triton`` on CPU tensors under
``TRITON_INTERPRET=1`` to compare every kernel with its twin.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

BACKENDS = ("triton", "torch")
_forced: list[str] = []


def backend(device: torch.device) -> str:
    choice = _forced[-1] if _forced else os.environ.get("GPUTOK_BACKEND", "")
    if choice and choice not in BACKENDS:
        raise ValueError(f"GPUTOK_BACKEND={choice!r} is not one of {BACKENDS}")
    if choice:
        return choice
    return "triton" if torch.device(device).type == "cuda" else "torch"


def checked_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a ``torch.device`` (None: the CPU), with a clear error when it names a CUDA
    device this torch cannot use (a CPU build, or no GPU), instead of torch's assertion deep inside.

    >>> checked_device("cpu")
    device(type='cpu')
    """
    try:
        device = torch.device("cpu" if device is None else device)
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
