"""Plain vocabulary files: BERT ``vocab.txt`` (one token per line; the line number is the id).

huggingface ``tokenizer.json`` reading and writing lives in :mod:`gputok.tokenizer`
(``Tokenizer.from_file`` / ``Tokenizer.save``), since it is the whole pipeline.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_vocab_txt(path: str | os.PathLike) -> dict[str, int]:
    """``{token: line number}``, trailing whitespace stripped, as the reference reads it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read vocabulary {path}: {e}") from e
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(f"vocabulary {path} is empty")
    return {line.rstrip(): i for i, line in enumerate(lines)}
