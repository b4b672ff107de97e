"""The names and rank files of the stand-in ``tiktoken``: gputok's registry, its rank files
fetched into gputok's cache on first use."""

from gputok import assets
from gputok import tiktoken as _gputok_tiktoken
from gputok.tiktoken import Encoding, list_encoding_names

__all__ = ["ENCODINGS", "get_encoding", "list_encoding_names"]
ENCODINGS: dict[str, Encoding] = {}


def get_encoding(encoding_name: str) -> Encoding:
    if encoding_name in _gputok_tiktoken._ENCODINGS:
        file_name = _gputok_tiktoken._ENCODINGS[encoding_name][0]
        assets.fetch(_gputok_tiktoken._RANK_FILES[file_name][1])
    encoding = _gputok_tiktoken.get_encoding(encoding_name)
    ENCODINGS[encoding_name] = encoding
    return encoding
