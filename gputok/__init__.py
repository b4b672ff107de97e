"""gputok: a GPU-batched tensor tokenizer with huggingface tokenizers parity.

>>> import gputok
>>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
>>> batch = tok(["hello world", "hello"], device="cpu")
>>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
([[1, 5, 10, 2], [1, 5, 2, 0]], [[1, 1, 1, 1], [1, 1, 1, 0]])
"""

from . import data
from ._cpu_threads import num_threads as get_num_threads, set_num_threads
from .embeddings import extend_embeddings
from .encode_corpus import encode_corpus
from .extending import extend, extend_with_report
from .tokenizer import AddedToken, Tokenizer
from .training import train, train_from_counts

__all__ = ["Tokenizer", "AddedToken", "data", "train", "train_from_counts", "extend", "extend_with_report",
           "extend_embeddings", "encode_corpus", "set_num_threads", "get_num_threads"]
__version__ = "0.1.0"
