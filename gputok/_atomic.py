"""Writing output files all-or-nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(files: dict[str | os.PathLike, str]) -> None:
    """Write every ``{path: text}`` (UTF-8) or none: all go to temporary files in their folders
    first, and only then are moved into place (``os.replace``), so an error never leaves a
    half-written file behind.
    """
    temps: list[tuple[str, Path]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for path, text in files.items():
            path = Path(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the outputs are ordinary files
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        for tmp, path in temps:
            os.replace(tmp, path)
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
