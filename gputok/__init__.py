"""gputok: a GPU-batched tensor tokenizer with huggingface tokenizers parity.

>>> import gputok
>>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
>>> batch = tok(["hello world", "hello"], device="cpu")
>>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
([[1, 5, 10, 2], [1, 5, 2, 0]], [[1, 1, 1, 1], [1, 1, 1, 0]])
"""

import importlib

from ._cpu_threads import num_threads as get_num_threads, set_num_threads
from ._recycled import release as release_memory
from .encode_corpus import encode_corpus
from .tokenizer import AddedToken, Tokenizer

# Imported on first use, so that a program that only encodes does not load training and DataLoader
# code at start-up (issue 17: a warm process at its first batch in under 1 s). ``encode_corpus``
# (~15 ms) is not among them: a lazy name that is also a submodule's is replaced by that module
# as soon as anything imports the submodule (``gputok.data`` does).
_LAZY = {"data": ("data", None), "extend_embeddings": ("embeddings", "extend_embeddings"),
         "extend": ("extending", "extend"),
         "extend_with_report": ("extending", "extend_with_report"), "train": ("training", "train"),
         "train_from_counts": ("training", "train_from_counts"),
         "compile_kernels": ("precompile", "compile_kernels")}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(f"{__name__}.{module_name}")
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Tokenizer", "AddedToken", "data", "train", "train_from_counts", "extend", "extend_with_report",
           "extend_embeddings", "encode_corpus", "set_num_threads", "get_num_threads", "release_memory",
           "compile_kernels"]
__version__ = "0.1.0"
