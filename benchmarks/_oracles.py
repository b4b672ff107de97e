"""gputok and its reference library on the same tokenizer file: the families the fuzz campaign
(``benchmarks/fuzz.py``, ``tests/test_fuzz.py``) compares, built one way in one place.

Each family is a pair of functions ``texts -> list of id lists``: gputok's ``encode_batch`` and the
reference's batch call, with the settings the parity tests use (``tests/conftest.py``,
``tests/test_bpe_tiktoken.py``, ``tests/test_bpe_sentencepiece.py``, ``tests/test_unigram.py``):
huggingface with padding and truncation off, tiktoken's ``encode_ordinary_batch`` with no special
tokens, sentencepiece's ``encode`` (no BOS/EOS). The reference is given each text with lone
surrogates as U+FFFD, gputok's defined reading of them (README, Input rules), since huggingface and
sentencepiece cannot take a lone surrogate at all.

The loaders for one file format (``LOADERS``) serve the malformed-file fuzz: gputok's loader and the
reference's, both from a path.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

Encode = Callable[[list[str]], list[list[int]]]
_SURROGATE = re.compile("[\ud800-\udfff]")
REPO = Path(__file__).resolve().parent.parent


def as_reference_reads(text: str) -> str:
    """``text`` as gputok reads it: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


@dataclasses.dataclass
class Family:
    name: str
    kind: str  # the model family, for the report
    ours: Encode
    reference: Encode


def _references(encode: Encode) -> Encode:
    return lambda texts: encode([as_reference_reads(t) for t in texts])


# ---- reference loaders: path -> encode -------------------------------------------------

# tiktoken's encoding names, as the split rules of gputok.regex_split.PATTERNS.
TIKTOKEN_NAMES = {"gpt2": "gpt2", "r50k_base": "r50k", "p50k_base": "p50k", "p50k_edit": "p50k",
                  "cl100k_base": "cl100k", "o200k_base": "o200k"}


def tiktoken_reference(path: str | Path, pattern: str) -> Encode:
    """tiktoken's own Encoding for a ``.tiktoken`` file and a split pattern: one of gputok's rule
    names, a tiktoken encoding name (its pattern), or else the string taken as a regex."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from gputok.regex_split import PATTERNS

    # tiktoken caches what it reads under the path's name (in $TMP/data-gym-cache), so a file
    # rewritten at the same path would be read stale: "" turns that cache off.
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    pat_str = PATTERNS.get(TIKTOKEN_NAMES.get(pattern, pattern), pattern)
    encoding = tiktoken.Encoding("fuzz", pat_str=pat_str, special_tokens={},
                                 mergeable_ranks=load_tiktoken_bpe(str(path)))
    encode = lambda texts: encoding.encode_ordinary_batch(texts, num_threads=1)  # noqa: E731
    encode.decode = lambda ids: encoding.decode(ids)  # noqa: E731 (what the malformed-file probe compares)
    return encode


def huggingface_reference(path: str | Path) -> Encode:
    """huggingface ``tokenizers`` on a tokenizer.json, padding and truncation off (tests/conftest.py hf_bert)."""
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(path))
    hf.no_padding()
    hf.no_truncation()
    return lambda texts: [e.ids for e in hf.encode_batch(texts)]


def huggingface_vocab_reference(path: str | Path) -> Encode:
    """huggingface's ``BertWordPieceTokenizer`` on a vocab.txt (as gputok.bench runs it)."""
    from tokenizers import BertWordPieceTokenizer

    hf = BertWordPieceTokenizer(str(path), lowercase=True)
    return lambda texts: [e.ids for e in hf.encode_batch(texts)]


def sentencepiece_reference(path: str | Path) -> Encode:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    return lambda texts: sp.encode(texts)


# ---- gputok loaders: path -> encode ----------------------------------------------------

def _gputok(tok) -> Encode:
    encode = lambda texts: tok.encode_batch(texts)  # noqa: E731
    encode.decode = tok.decode
    encode.tokenizer = tok
    return encode


def gputok_tiktoken(path, rule: str) -> Encode:
    from gputok import Tokenizer

    return _gputok(Tokenizer.from_tiktoken(path, pattern=rule))


def gputok_json(path) -> Encode:
    """gputok on a tokenizer.json, padding and truncation off as in :func:`huggingface_reference`."""
    from gputok import Tokenizer

    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    return _gputok(tok)


def gputok_vocab(path) -> Encode:
    from gputok import Tokenizer

    return _gputok(Tokenizer.from_vocab(path))


def gputok_sentencepiece(path) -> Encode:
    from gputok import Tokenizer

    return _gputok(Tokenizer.from_sentencepiece(path))


# ---- files the families read -----------------------------------------------------------

def _fuzz_cache() -> Path:
    from gputok._cache import cache_dir

    path = cache_dir() / "fuzz"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _saved_json(name: str, load: Callable[[], object]) -> Path:
    """The tokenizer.json gputok saves for the tokenizer ``load()`` makes, cached as ``name``."""
    path = _fuzz_cache() / f"{name}-gputok.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        load().save(tmp)
        tmp.replace(path)
    return path


def gputok_written_json(name: str) -> Path:
    """The tokenizer.json gputok writes for tiktoken ranks (tests/test_bpe_tokenizer_json.py), cached."""
    from gputok import Tokenizer, assets

    return _saved_json(name, lambda: Tokenizer.from_tiktoken(assets.fetch(f"{name}-tiktoken"), pattern=name))


def sentencepiece_written_json(asset: str) -> Path:
    """The tokenizer.json gputok writes for a SentencePiece ``.model`` (a Precompiled charsmap and
    Metaspace for the tests' nmt_nfkc Unigram), cached."""
    from gputok import Tokenizer, assets

    return _saved_json(asset, lambda: Tokenizer.from_sentencepiece(assets.fetch(asset)))


def char_bpe_json() -> Path:
    """huggingface's CharBPETokenizer with its defaults, trained on 2 MB of English, vocab 5000
    (the tests/test_bpe_char_level.py fixture), cached."""
    from tokenizers import CharBPETokenizer

    from gputok import assets

    path = _fuzz_cache() / "char-bpe-5000.json"
    if not path.exists():
        trained = CharBPETokenizer()
        trained.train([str(assets.english_corpus(2))], vocab_size=5000, show_progress=False)
        tmp = path.with_suffix(".tmp")
        trained.save(str(tmp))
        tmp.replace(path)
    return path


def trained_unigram() -> str:
    """The Unigram model (vocab 8000, nmt_nfkc) sentencepiece trains for tests/test_unigram.py, cached there."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_unigram import trained_model

    return trained_model(8000)


# ---- the families ----------------------------------------------------------------------

def _tiktoken_family(name: str) -> Family:
    from gputok import assets

    path = assets.fetch(f"{name}-tiktoken")
    return Family(f"{name}-tiktoken", "byte-level BPE", gputok_tiktoken(path, name),
                  _references(tiktoken_reference(path, name)))


def _family_bert() -> Family:
    from gputok import assets

    path = assets.fetch("bert-tokenizer-json")
    return Family("bert-json", "WordPiece", gputok_json(path), _references(huggingface_reference(path)))


def _family_cl100k_json() -> Family:
    """gputok reading the tokenizer.json it wrote for cl100k, against tiktoken."""
    from gputok import assets

    return Family("cl100k-json", "byte-level BPE", gputok_json(gputok_written_json("cl100k")),
                  _references(tiktoken_reference(assets.fetch("cl100k-tiktoken"), "cl100k")))


def _family_cl100k_json_in_huggingface() -> Family:
    """huggingface reading the tokenizer.json gputok wrote for cl100k, against tiktoken: checks the writer."""
    from gputok import assets

    return Family("cl100k-json-hf", "byte-level BPE (writer)",
                  _references(huggingface_reference(gputok_written_json("cl100k"))),
                  _references(tiktoken_reference(assets.fetch("cl100k-tiktoken"), "cl100k")))


def _sentencepiece_family(name: str, kind: str, path: str | Path) -> Family:
    return Family(name, kind, gputok_sentencepiece(path), _references(sentencepiece_reference(path)))


def _family_sp_test_json() -> Family:
    """gputok reading the tokenizer.json it wrote for the tests' SentencePiece Unigram, against
    huggingface reading it: huggingface's grapheme-cluster reading of the charsmap."""
    path = sentencepiece_written_json("sp-test-model")
    return Family("sp-test-json", "Unigram (tokenizer.json, Precompiled)", gputok_json(path),
                  _references(huggingface_reference(path)))


def _family_char_bpe() -> Family:
    path = char_bpe_json()
    return Family("char-bpe-json", "char-level BPE", gputok_json(path), _references(huggingface_reference(path)))


def _asset(name: str) -> Path:
    from gputok import assets

    return assets.fetch(name)


FAMILIES: dict[str, Callable[[], Family]] = {
    "bert-json": _family_bert,
    "gpt2-tiktoken": lambda: _tiktoken_family("gpt2"),
    "cl100k-tiktoken": lambda: _tiktoken_family("cl100k"),
    "cl100k-json": _family_cl100k_json,
    "cl100k-json-hf": _family_cl100k_json_in_huggingface,
    "mistral-sp": lambda: _sentencepiece_family("mistral-sp", "SentencePiece BPE", _asset("mistral-sp-model")),
    "sp-test-unigram": lambda: _sentencepiece_family("sp-test-unigram", "Unigram", _asset("sp-test-model")),
    "unigram-8000": lambda: _sentencepiece_family("unigram-8000", "Unigram", trained_unigram()),
    "char-bpe-json": _family_char_bpe,
    "sp-test-json": _family_sp_test_json,
}

# Per file format of the malformed-file fuzz: (gputok loader, reference loader), both
# (path, options) -> Encode; the one option is the tiktoken split ``pattern``.
LOADERS: dict[str, tuple[Callable[..., Encode], Callable[..., Encode]]] = {
    "tiktoken": (lambda p, pattern="cl100k": gputok_tiktoken(p, pattern),
                 lambda p, pattern="cl100k": tiktoken_reference(p, pattern)),
    "tokenizer.json": (gputok_json, huggingface_reference),
    "vocab.txt": (gputok_vocab, huggingface_vocab_reference),
    "sentencepiece": (gputok_sentencepiece, sentencepiece_reference),
}
