"""Where gputok keeps what it fetches and builds: ``$GPUTOK_CACHE``, else ``~/.cache/gputok``."""

import os
import pathlib


def cache_dir() -> pathlib.Path:
    """``$GPUTOK_CACHE`` if set, else ``~/.cache/gputok`` (never inside the repository)."""
    env = os.environ.get("GPUTOK_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "gputok"
