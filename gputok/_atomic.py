"""Writing output files all-or-nothing: the one way the package writes the files it is asked for.

:func:`write_atomic` writes every file to a temporary file beside it, and only once all are
written moves them into place (``os.replace``); if a move fails, the files already moved are put
back as they were (an existing file is kept under a hard link until the end, so it comes back
with its bytes, inode and mtime; a new one is removed). Temporaries are removed on any failure.
:func:`check_output_paths` says, before any long work, whether the paths can be written at all.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

#: What a file is written from: text (UTF-8, ``\n`` line ends), bytes, or a function that writes
#: the file at the temporary path it is given (for outputs streamed while they are computed).
Content = str | bytes | Callable[[Path], None]


def check_output_paths(paths: Mapping[str, str | os.PathLike | None] | Iterable[tuple[str, str | os.PathLike | None]]
                       ) -> None:
    """Raise ValueError, naming the option and the path, unless every ``(option, path)`` (path
    None: not asked for) can be written: not a directory, not twice the same file, in a folder
    that exists and takes a new file (tried: a temporary file is made and removed there)."""
    seen: dict[Path, str] = {}
    for option, path in paths.items() if isinstance(paths, Mapping) else paths:
        if path is None:
            continue
        path = Path(path)
        where = f"{option} {path}"
        if path.is_dir():
            raise ValueError(f"{where} is a directory; give a file path, e.g. {path / 'out'}")
        resolved = path.resolve()
        if resolved in seen:
            raise ValueError(f"{where}: {seen[resolved]} writes the same file; give each output its own path")
        seen[resolved] = option
        folder = path.parent
        if not folder.is_dir():
            raise ValueError(f"{where}: folder {folder} does not exist; create it first")
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as e:
            raise ValueError(f"{where}: cannot write in folder {folder} ({e.strerror})") from e
        os.close(fd)
        os.unlink(probe)


def write_atomic(files: Mapping[str | os.PathLike, Content]) -> None:
    """Write every ``{path: content}`` or none (see the module doc); :func:`check_output_paths`
    first, so a bad path fails before anything is written."""
    check_output_paths([("output", path) for path in files])
    temps: dict[Path, str] = {}
    try:
        for path, content in files.items():
            temps[Path(path)] = _write_temporary(Path(path), content)
        _move_all_or_none(temps)
    finally:
        for tmp in temps.values():
            if os.path.lexists(tmp):
                os.unlink(tmp)


def _write_temporary(path: Path, content: Content) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the outputs are ordinary files
        if callable(content):
            os.close(fd)
            content(Path(tmp))
        elif isinstance(content, str):
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(content)
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        _sync(tmp)  # on disk before it is renamed: a crash leaves the old file or the new one
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_all_or_none(temps: dict[Path, str]) -> None:
    """``os.replace`` each temporary onto its path; on a failure, undo the moves already done."""
    backups: dict[Path, str | None] = {}  # the file each path held before (None: none)
    try:
        for path, tmp in temps.items():
            backups[path] = _keep_aside(path)
            os.replace(tmp, path)
    except BaseException:
        for path, backup in reversed(list(backups.items())):
            if backup is not None:
                os.replace(backup, path)
            elif path in temps and not os.path.lexists(temps[path]) and os.path.lexists(path):
                os.unlink(path)  # it was moved into place: no such file before
        raise
    finally:
        for backup in backups.values():
            if backup is not None and os.path.lexists(backup):
                os.unlink(backup)


def _keep_aside(path: Path) -> str | None:
    """A second name (a hard link, else a copy) for the file at ``path``, so that it can be put
    back; None if there is no file there."""
    if not os.path.lexists(path):
        return None
    fd, backup = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old")
    os.close(fd)
    os.unlink(backup)
    try:
        os.link(path, backup, follow_symlinks=False)  # a symlink comes back as the symlink
    except OSError:  # a file system without hard links
        shutil.copy2(path, backup, follow_symlinks=False)
    return backup
