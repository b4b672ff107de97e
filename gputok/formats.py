"""Plain vocabulary files: BERT ``vocab.txt`` (one token per line; the line number is the id) and
tiktoken ``.tiktoken`` (``base64(token) rank`` per line).

huggingface ``tokenizer.json`` reading and writing lives in :mod:`gputok.tokenizer`
(``Tokenizer.from_file`` / ``Tokenizer.save``), since it is the whole pipeline.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

from ._validate import U32, FileFormatError, check_id_space


# Rust's char::is_whitespace (Unicode White_Space), which huggingface's trim_end strips; Python's
# str.rstrip() would also strip U+001C..U+001F.
_WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def read_vocab_txt(path: str | os.PathLike) -> dict[str, int]:
    """``{token: line number}`` as huggingface reads a vocab.txt (``WordPiece::read_file``): lines
    end at "\\n" only (a "\\r" alone ends no line: a file of old-Mac line endings is one long
    token, and the special tokens are then missing), trailing whitespace stripped. Bytes, not
    text mode, which would take "\\r" as a line end too."""
    try:
        lines = Path(path).read_bytes().decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read vocabulary {path}: {e}") from e
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(f"vocabulary {path} is empty")
    return {line.rstrip(_WHITE_SPACE): i for i, line in enumerate(lines)}


def read_tiktoken(path: str | os.PathLike) -> dict[bytes, int]:
    """``{token bytes: rank}`` of a ``.tiktoken`` file (``base64(token) rank`` per line), checked
    as tiktoken checks it: two fields a line, ranks integers in 0 .. 2**32 - 1 and unique (tiktoken's
    CoreBPE refuses repeats: "Encoder and decoder must be of equal length"). Stricter than tiktoken:
    the base64 must be valid (tiktoken drops stray characters) and a token may appear once (tiktoken
    keeps its last rank). Ranks far past the token count are refused before any table is made
    (:func:`gputok._validate.check_id_space`).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise FileFormatError(f"cannot read tiktoken file {path}: {e}") from e
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    line_of_token: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        where = f"{path}:{number}"
        parts = line.split()
        if len(parts) != 2:
            raise FileFormatError(f"{where}: not a 'base64-token rank' line: {line[:60]!r}; the file is damaged "
                                  "or not a .tiktoken file: download it again")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except binascii.Error as e:
            raise FileFormatError(f"{where}: token {parts[0][:40]!r} is not valid base64 ({e}); the file is "
                                  "damaged: download it again") from None
        if not re.fullmatch(rb"-?[0-9]+", parts[1]):
            raise FileFormatError(f"{where}: rank {parts[1][:20]!r} is not an integer; the file is damaged: "
                                  "download it again")
        rank = int(parts[1])
        if not 0 <= rank < U32:
            raise FileFormatError(f"{where}: rank {rank} is outside 0 .. {U32 - 1} (tiktoken reads ranks as u32); "
                                  "the file is damaged: download it again")
        if rank in line_of_rank:
            raise FileFormatError(f"{where}: rank {rank} is also the rank of line {line_of_rank[rank]} (tiktoken "
                                  "refuses repeated ranks; a truncated last line does this); download the file again")
        if token in line_of_token:
            raise FileFormatError(f"{where}: token {token!r} is also on line {line_of_token[token]}; each token has "
                                  "one rank: the file is damaged, download it again")
        ranks[token] = rank
        line_of_rank[rank] = line_of_token[token] = number
    if not ranks:
        raise FileFormatError(f"tiktoken file {path} holds no tokens")
    largest = max(line_of_rank)
    check_id_space(largest, len(ranks), str(path), f"line {line_of_rank[largest]}: rank")
    return ranks
