"""Tokenizer: the pipeline, from Python strings to padded id tensors on the device, and back.

Data flows one way: texts -> ragged codepoints (ingest) -> normalized codepoints -> words
(pre-tokenizer) -> unique words -> token ids of unique words (model) -> token ids of every word ->
rows with special tokens, truncated and padded (processors). On CPU tensors each stage is a numba
kernel (``gputok.kernels``; between the stages: the word cache's lookup / assemble / insert
kernels, ``scatter_numba`` back to word occurrences with character spans, ``postprocess_numba``
for truncation, template and padding in one pass, ``decode_numba``), so a call costs a handful
of Python calls plus kernels; on CUDA tensors, and under ``GPUTOK_BACKEND=torch`` (the
reference), batched torch ops. ``__call__`` encodes a batch for a GPU under ``CUDA_FROM_CHARS``
characters on the CPU and copies the outputs over (``encode_ragged`` itself runs where it is
told); the only Python loops are per text (measuring lengths, building ``list[list[int]]``
output) or per special-token match.

Added tokens (``[CLS]``, ``[MASK]`` ...) written literally in the text are matched first, on the raw
text, longest first, and become their own tokens, as in huggingface ``tokenizers``.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import regex
import torch

from . import (_cpu_threads, _dispatch, _loading, _recycled, _validate, decoders, file_defaults, normalized_added,
               normalizers, pre_tokenizers, processors)
from ._atomic import write_atomic
from ._loading import cached_loader
from ._transformers_api import TransformersAPI
from ._whole_bpe import whole_bpe_kernel
from ._whole_hf_unigram import whole_hf_unigram_kernel
from ._whole_sp_bpe import whole_sentencepiece_bpe_kernel
from ._whole_unigram import whole_unigram_kernel
from ._validate import FileFormatError
from .dedup import gather_words, span_hashes, unique_gathered, unique_words
from .ingest import ByteBuffer, TextInput, as_texts, codepoints, row_chunks, rows_with, utf8_rows, utf32_units
from .literals import LiteralPattern, literal_pattern, match_spans
from .models.bpe import BPE
from .models.unigram import Unigram
from .models.wordlevel import WordLevel
from .models.wordpiece import WordPiece, piece_starts
from .processors import (TRUNCATION_STRATEGIES, TemplateItem, TemplateProcessing, assemble, check_truncation, filled_cells,
                         pad, raise_truncation_error, truncate)
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids, rows_as_lists
from .word_cache import WordCache
from .kernels import postprocess_numba
from .kernels.decode_numba import decode_rows
from .kernels.ingest_numba import codepoints_numba, codepoints_pairs_numba, splice_rows, utf8_units_numba
from .kernels.scatter_numba import scatter_tokens, splice_added_tokens
from .kernels import cells_numba, ingest_numba, wordpiece_texts_numba

MODELS = {cls.type: cls for cls in (WordPiece, BPE, Unigram, WordLevel)}
# (tokenizer, normalizer, pre_tokenizer, model) -> a whole-pipeline CPU kernel, or None
_WHOLE_PIPELINE_FACTORIES = (whole_bpe_kernel, whole_unigram_kernel, whole_sentencepiece_bpe_kernel,
                              whole_hf_unigram_kernel)
# A call on a GPU costs ~5-20 ms of kernel launches (about a thousand small ops) whatever its
# size; below this many characters a batch for a CUDA device is encoded on the CPU, where small
# batches take ~1-5 ms, and only the output tensors are copied to the device.
CUDA_FROM_CHARS = 16384
# The most added-token patterns a tokenizer keeps (Tokenizer._bound_patterns).
MAX_PATTERNS = 64
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")
_PADDING_NAMES = {True: "longest", False: "do_not_pad"}
_TRUNCATION_NAMES = {True: "longest_first", False: None}
# Tokens from which a padded batch is written in row ranges on the CPU threads into numpy-allocated
# arrays (``_padded_in_ranges``): below, one kernel call that allocates its own is cheaper.
PADDED_IN_RANGES_FROM = 1 << 15


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool = True
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "single_word": self.single_word,
                "lstrip": self.lstrip, "rstrip": self.rstrip, "normalized": self.normalized,
                "special": self.special}


@dataclass
class Encoded:
    """Token ids of a batch of texts (no special tokens): ragged, plus character spans if asked."""

    ids: Ragged
    spans: torch.Tensor | None  # [tokens, 2] start/end character offsets into each text


class Tokenizer(TransformersAPI):
    """A WordPiece, BPE or Unigram tokenizer that encodes whole batches with compiled kernels.

    Loaded from a huggingface ``tokenizer.json`` (:meth:`from_file`), a BERT ``vocab.txt``, a
    tiktoken file, GPT-2 files or a SentencePiece model; ``tok(texts)`` gives padded tensors with
    transformers' options and names (:class:`gputok._transformers_api.TransformersAPI`: special
    token attributes, ``get_vocab``, ``tokenize``, ``batch_decode`` ...).

    >>> tok = Tokenizer.from_vocab(gputok_example_vocab())
    >>> tok.encode_batch(["Hello, unaffable world!"])
    [[1, 5, 6, 7, 8, 9, 10, 11, 2]]
    >>> tok.decode([1, 5, 6, 7, 8, 9, 10, 11, 2])
    'hello, unaffable world!'
    """

    #: A model folder's chat template (Jinja text), kept for the caller; gputok does not render it.
    chat_template: str | None = None
    # A surrogate pair in a str input is the codepoint it encodes (tiktoken's reading; gputok.tiktoken
    # sets it); False: every surrogate is U+FFFD. Character offsets then count the pair as one.
    join_surrogate_pairs: bool = False

    def __init__(self, model: WordPiece, *, normalizer: normalizers.Normalizer | None = None,
                 pre_tokenizer: pre_tokenizers.BertPreTokenizer | None = None,
                 post_processor: TemplateProcessing | None = None, decoder: Any = None,
                 added_tokens: Sequence[AddedToken] = (), extra: dict[str, Any] | None = None) -> None:
        self.model = model
        # Encoded words kept across batches (bounded; None turns it off): see gputok.word_cache.
        self.word_cache: WordCache | None = WordCache()
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self.post_processor = post_processor
        self.decoder = decoder
        self.added_tokens = list(added_tokens)
        self._extra = extra or {}  # truncation/padding settings of a loaded file, written back on save
        # _pattern's by contents, and _normalized_pattern's by ("normalized", contents)
        self._patterns: dict[Any, re.Pattern | LiteralPattern | None] = {}
        self._added_ids = {t.content: t.id for t in self.added_tokens}
        self._special_ids = {t.id for t in self.added_tokens if t.special}
        self._id_to_token = model.id_to_token()
        for t in self.added_tokens:
            if t.id >= len(self._id_to_token):
                self._id_to_token += [""] * (t.id + 1 - len(self._id_to_token))
            self._id_to_token[t.id] = t.content
        if normalizer is not None and any(t.normalized for t in self.added_tokens):
            self._spell_normalized_added_tokens()

    def __reduce__(self):
        """Pickled as its source file and options, or its state (see :mod:`gputok._loading`)."""
        return _loading.reduce(self)

    # ---- loading and saving -------------------------------------------------------------
    @cached_loader(files=("path",))
    def from_vocab(cls, path: str | os.PathLike, *, lowercase: bool = True, strip_accents: bool | None = None,
                   clean_text: bool = True, handle_chinese_chars: bool = True, unk_token: str = "[UNK]",
                   cls_token: str = "[CLS]", sep_token: str = "[SEP]", pad_token: str = "[PAD]",
                   mask_token: str = "[MASK]", wordpieces_prefix: str = "##", partial_unk: bool = False) -> Tokenizer:
        """A BERT tokenizer from a ``vocab.txt``, as huggingface's ``BertWordPieceTokenizer(path)``.

        ``partial_unk=True``: only each unmatched run of a word becomes ``[UNK]`` (the reference
        turns the whole word into ``[UNK]``).
        """
        from .formats import read_vocab_txt

        vocab = read_vocab_txt(path)
        for name, token in (("cls_token", cls_token), ("sep_token", sep_token)):
            if token not in vocab:
                hint = ("; it ends lines with '\\r' alone, which huggingface (and gputok) does not take as a line end: "
                        "convert its line endings to '\\n'" if any("\r" in t for t in vocab) else "")
                raise ValueError(f"{name}={token!r} is not in {path}{hint}; pass the vocabulary's own {name}")
        try:
            model = WordPiece(vocab, unk_token=unk_token, continuing_subword_prefix=wordpieces_prefix,
                              partial_unk=partial_unk)
        except ValueError as e:  # say which file lacks the unk token
            raise ValueError(f"{path}: {e}") from e
        specials = [t for t in (pad_token, unk_token, cls_token, sep_token, mask_token) if t in vocab]
        return cls(model,
                   normalizer=normalizers.BertNormalizer(clean_text=clean_text, handle_chinese_chars=handle_chinese_chars,
                                                         strip_accents=strip_accents, lowercase=lowercase),
                   pre_tokenizer=pre_tokenizers.BertPreTokenizer(),
                   post_processor=TemplateProcessing.bert((cls_token, vocab[cls_token]), (sep_token, vocab[sep_token])),
                   decoder=decoders.WordPieceDecoder(prefix=wordpieces_prefix),
                   added_tokens=sorted((AddedToken(vocab[t], t) for t in specials), key=lambda t: t.id))

    @cached_loader(files=("path",))
    def from_tiktoken(cls, path: str | os.PathLike, *, pattern: str = "cl100k",
                      special_tokens: dict[str, int] | None = None) -> Tokenizer:
        """A tiktoken ``.tiktoken`` file with its split ``pattern``: a rule name ("gpt2", "r50k",
        "p50k", "cl100k", "o200k"), tiktoken's encoding name ("cl100k_base", "o200k_base",
        "r50k_base", "p50k_base", ...) or a regex. ``special_tokens`` ({"<|endoftext|>": 100257})
        are matched in the text first, as huggingface matches added tokens.
        """
        model = BPE.from_tiktoken(path)
        specials = [AddedToken(i, t) for t, i in sorted(_checked_special_tokens(special_tokens, model, path).items(),
                                                        key=lambda kv: kv[1])]
        return cls(model, pre_tokenizer=pre_tokenizers.Split.tiktoken(pattern), decoder=decoders.ByteLevelDecoder(),
                   added_tokens=specials)

    @cached_loader(files=("vocab_json", "merges_txt"))
    def from_gpt2_files(cls, vocab_json: str | os.PathLike, merges_txt: str | os.PathLike) -> Tokenizer:
        """GPT-2 style ``vocab.json`` + ``merges.txt``, as huggingface's ``ByteLevelBPETokenizer``."""
        try:
            vocab_text = Path(vocab_json).read_text(encoding="utf-8")
            lines = Path(merges_txt).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise FileFormatError(f"cannot read GPT-2 files {vocab_json}, {merges_txt}: {e}") from e
        vocab = _validate.check_vocab(_validate.load_json(vocab_text, str(vocab_json)), str(vocab_json), "vocab")
        merges = [line for line in lines if line and not line.startswith("#version")]
        for number, line in enumerate(merges, 1):
            if len(line.split(" ")) != 2:
                raise FileFormatError(f"{merges_txt}: merge {number} is not 'left right': {line[:60]!r}")
        try:
            model = BPE.from_json({"vocab": vocab, "merges": merges, "ignore_merges": False})
        except ValueError as e:
            raise FileFormatError(f"{vocab_json}, {merges_txt}: {e}") from e
        return cls(model, pre_tokenizer=pre_tokenizers.ByteLevel(), decoder=decoders.ByteLevelDecoder())

    @cached_loader(files=("path",))
    def from_sentencepiece(cls, path: str | os.PathLike) -> Tokenizer:
        """A SentencePiece ``.model`` file: ids equal to ``SentencePieceProcessor.encode`` (no BOS/EOS).

        Unigram models: normalizer (precompiled charsmap, whitespace rules), ``▁`` word split,
        Viterbi with SentencePiece's float32 tie rule, byte fallback (:mod:`gputok.models.unigram`).
        BPE models: the same normalizer, merges ranked by piece score, byte fallback
        (:mod:`gputok.models.bpe_sentencepiece`).
        """
        from .sentencepiece_model import BPE as BPE_TYPE, MODEL_TYPE_NAMES, UNIGRAM, read_model

        model = read_model(path)
        try:
            if model.model_type == UNIGRAM:
                from .models.unigram import sentencepiece_tokenizer

                return sentencepiece_tokenizer(model, cls)
            if model.model_type == BPE_TYPE:
                from .models import bpe_sentencepiece

                return bpe_sentencepiece.sentencepiece_tokenizer(model, cls, source=str(path))
        except FileFormatError:
            raise
        except ValueError as e:  # a component's own check (the charsmap's rules): name the file
            raise FileFormatError(f"{path}: {e}") from e
        raise ValueError(f"{path}: SentencePiece model type {MODEL_TYPE_NAMES[model.model_type]!r} is not "
                         "supported; supported: ['unigram', 'bpe']")

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike) -> Tokenizer:
        """A local model folder (or one tokenizer file) as ``transformers.AutoTokenizer`` reads it
        offline: tokenizer.json, else tokenizer.model, vocab.txt or vocab.json + merges.txt, with
        the added tokens, special tokens and ``model_max_length`` of its config files; never a
        network call (:mod:`gputok.pretrained`)."""
        from .pretrained import from_pretrained

        return from_pretrained(cls, path)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Tokenizer:
        """Load a huggingface ``tokenizer.json``."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read tokenizer file {path}: {e}") from e
        return cls.from_str(text, source=str(path))

    @cached_loader(texts=("text",), ignore=("source",))
    def from_str(cls, text: str, *, source: str = "<string>") -> Tokenizer:
        """Load a huggingface ``tokenizer.json`` from its text; ``source`` names it in errors.

        Every field is checked first (:func:`gputok._validate.check_tokenizer_json`): a bad file
        raises :class:`gputok._validate.FileFormatError` (a ValueError) naming the file, the field
        and the fix, before anything is built.
        """
        spec = _validate.load_json(text, source)
        _validate.check_tokenizer_json(spec, source)
        model_type = spec["model"].get("type", "WordPiece" if "vocab" in spec["model"] and "merges" not in spec["model"] else None)
        if model_type not in MODELS:
            raise FileFormatError(f"{source}: model type {model_type!r} is not supported; supported: {sorted(MODELS)}")
        try:
            # huggingface ignores an added token with empty content (it would match everywhere)
            added = [AddedToken(**{k: t[k] for k in ("id", "content", "special", "single_word", "lstrip",
                                                      "rstrip", "normalized") if k in t})
                     for t in spec.get("added_tokens") or [] if t["content"]]
            post = spec.get("post_processor")
            template, offset_trim = processors.from_json(post)
            # a post-processor that is more than a template is written back as the file has it
            extra_post = post if post is not None and post.get("type") not in ("TemplateProcessing", "BertProcessing") \
                else None
            pre_tokenizer = pre_tokenizers.from_json(spec.get("pre_tokenizer"))
            if model_type == "BPE":
                # Byte-level BPE spells its tokens in the alphabet of the ByteLevel pre-tokenizer,
                # whose byte mapping the model does itself; any other BPE works on characters.
                byte_level = (isinstance(pre_tokenizer, pre_tokenizers.ByteLevel)
                              or getattr(pre_tokenizer, "byte_level", False))
                model = BPE.from_json(spec["model"], byte_level=byte_level)
                if pre_tokenizer is None:  # whole texts are the words: cut them where no merge can cross
                    from .models.bpe_sentencepiece import merge_safe_split

                    pre_tokenizer = merge_safe_split(model)
            else:
                model = MODELS[model_type].from_json(spec["model"])
            if offset_trim is not None and model_type == "Unigram":
                raise ValueError("post_processor: offset trimming (ByteLevel, RobertaProcessing with trim_offsets) with a "
                                 "Unigram model is not supported (huggingface trims an unknown piece by the text it "
                                 "covers); set trim_offsets to false")
            return cls(model,
                       normalizer=normalizers.from_json(spec.get("normalizer")),
                       pre_tokenizer=pre_tokenizer,
                       post_processor=template,
                       decoder=decoders.from_json(spec.get("decoder")), added_tokens=added,
                       extra={"truncation": spec.get("truncation"), "padding": spec.get("padding"),
                              "post_processor": extra_post, "offset_trim": offset_trim})
        except FileFormatError:
            raise
        except ValueError as e:  # a component's own check: name the file
            raise FileFormatError(f"{source}: {e}") from e
        except (KeyError, TypeError, AttributeError) as e:
            raise FileFormatError(f"{source}: malformed tokenizer.json ({type(e).__name__}: {e})") from e

    def to_json(self) -> dict[str, Any]:
        part = lambda c: None if c is None else c.to_json()  # noqa: E731
        return {"version": "1.0", "truncation": self._extra.get("truncation"),
                "padding": self._extra.get("padding"),
                "added_tokens": [t.to_json() for t in self.added_tokens],
                "normalizer": part(self.normalizer), "pre_tokenizer": part(self.pre_tokenizer),
                "post_processor": self._extra.get("post_processor") or part(self.post_processor),
                "decoder": part(self.decoder),
                "model": self.model.to_json()}

    def save(self, path: str | os.PathLike) -> None:
        """Write a huggingface ``tokenizer.json`` (atomically: a crash never leaves half a file)."""
        write_atomic({path: json.dumps(self.to_json(), ensure_ascii=False, indent=2)})

    # ---- vocabulary ---------------------------------------------------------------------
    @property
    def uses_token_types(self) -> bool:
        """Whether the post-processor gives a pair's second sequence its own token type (BERT's
        template does; GPT-2, cl100k and SentencePiece models have none): ``tok(...)`` returns
        ``token_type_ids`` by default only then, so ``model(**batch)`` never gets ones it would
        misuse (GPT-2's model adds their embeddings when given)."""
        return self.post_processor is not None and any(item.type_id for item in self.post_processor.pair)

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    def token_to_id(self, token: str) -> int | None:
        return self._added_ids.get(token, self.model.vocab.get(token))

    def id_to_token(self, token_id: int) -> str | None:
        return self._id_to_token[token_id] if 0 <= token_id < len(self._id_to_token) else None

    # ---- encoding -----------------------------------------------------------------------
    def encode_ragged(self, texts: Sequence[str], *, device: torch.device | str = "cpu",
                      with_spans: bool = False, allowed: frozenset[str] | None = None) -> Encoded:
        """Token ids of each text, without special tokens, as a ragged tensor on ``device``.

        Added tokens written in the text become their ids; ``allowed`` limits that to some of them.
        """
        if _dispatch.on_cpu_kernels(device) and torch.device(device).type == "cpu":
            ids, offsets, spans = self._encode_arrays(texts, with_spans, allowed)
            return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                           None if spans is None else torch.from_numpy(spans))
        pattern = self._pattern(allowed) if allowed != frozenset() else None
        if (pattern is not None and pattern.search("".join(texts))) or self._every_text_in_pieces(allowed):
            return self._encode_with_added_tokens(texts, pattern, device, with_spans, allowed)
        parts = (_cpu_threads.chunks(texts) if torch.device(device).type == "cpu"
                 and not getattr(self.model, "is_sampling", False) else None)  # a sample's draws stay in order
        if parts is None:
            return self._encode_plain(texts, device, with_spans)
        done = _cpu_threads.map_chunks(lambda part: self._encode_plain(part, device, with_spans), parts)
        offsets = _joined_offsets([d.ids.offsets.numpy() for d in done])
        ids = Ragged(torch.from_numpy(np.concatenate([d.ids.values.numpy() for d in done])), torch.from_numpy(offsets))
        return Encoded(ids, torch.from_numpy(np.concatenate([d.spans.numpy() for d in done])) if with_spans else None)

    def _encode_arrays(self, texts: Sequence[str], with_spans: bool, allowed: frozenset[str] | None,
                       in_parts: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """:meth:`encode_ragged` on the CPU kernels as numpy arrays (ids, offsets per text, spans or
        None): the torch wrapping of each array costs ~2 us, which a small call feels. A batch of a
        few thousand lines without spans is encoded in parts (:meth:`_ids_in_parts`, unless
        ``in_parts`` is False: a chunk of a larger call already on a CPU thread), any other large
        batch in chunks on the CPU threads (:mod:`gputok._cpu_threads`)."""
        pattern = self._pattern(allowed) if allowed != frozenset() else None
        if (pattern is not None and pattern.search("".join(texts))) or self._every_text_in_pieces(allowed):
            return _as_arrays(self._encode_with_added_tokens(texts, pattern, _CPU, with_spans, allowed))
        if in_parts and not with_spans:
            got = self._ids_in_parts(texts)
            if got is not None:
                return *got, None
        parts = None if getattr(self.model, "is_sampling", False) else _cpu_threads.chunks(texts)  # draws stay in order
        if parts is None:
            return _as_arrays(self._encode_plain(texts, _CPU, with_spans))
        done = _cpu_threads.map_chunks(lambda part: _as_arrays(self._encode_plain(part, _CPU, with_spans)), parts)
        return (np.concatenate([d[0] for d in done]), _joined_offsets([d[1] for d in done]),
                np.concatenate([d[2] for d in done]) if with_spans else None)

    def _encode_plain(self, texts: Sequence[str], device: torch.device | str, with_spans: bool) -> Encoded:
        """:meth:`encode_ragged` of texts with no added token in them, in the calling thread."""
        if _dispatch.on_cpu_kernels(device):
            return self._encode_units(*utf32_units(texts), with_spans)
        return self._encode_codepoints(codepoints(texts, device, join_surrogate_pairs=self.join_surrogate_pairs),
                                       with_spans)

    def _encode_units(self, units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        """The CPU kernels' encode of texts given as UTF-32 code units back to back and each text's
        length in units (what :func:`gputok.ingest.utf32_units` makes): one call of the whole
        pipeline's kernel where this pipeline has one, else the stages one kernel each."""
        whole = self._whole_pipeline_kernel
        if whole is not None and not self.join_surrogate_pairs and not getattr(self.model, "is_sampling", False):
            return whole(units, lengths, with_spans)
        values, offsets = (codepoints_pairs_numba if self.join_surrogate_pairs else codepoints_numba)(units, lengths)
        return self._encode_codepoints(Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), with_spans)

    def _encode_codepoints(self, text: Ragged, with_spans: bool) -> Encoded:
        """The stages after ingest, one kernel (CPU) or a few tensor ops (other devices) each."""
        if self.normalizer is not None:
            norm, source = self.normalizer(text)
        else:
            norm, source = text, None  # each character is its own source (made only if spans are asked for)
        rewrite = getattr(self.pre_tokenizer, "rewrite", None)
        split_rewrite = getattr(self.pre_tokenizer, "split_rewrite", None)
        if split_rewrite is not None:  # a Metaspace after a split: each word rewritten, then split
            norm, moved, words = split_rewrite(norm)
            source = moved if source is None else source.index_select(0, moved)
        else:
            if rewrite is not None:  # Metaspace: spaces become "▁" and a "▁" goes first, before the split
                norm, moved = rewrite(norm)
                source = moved if source is None else source.index_select(0, moved)
            # no pre-tokenizer: each normalized text is one word, as in huggingface
            words = pre_tokenizers.whole_texts(norm) if self.pre_tokenizer is None else self.pre_tokenizer(norm)
        kernels = text.values.device.type == "cpu" and _dispatch.on_cpu_kernels(text.values.device)
        # (on the CPU one numpy subtraction: a torch op costs several times its microsecond)
        lengths = torch.from_numpy(words.ends.numpy() - words.starts.numpy()) if kernels else words.lengths()
        in_context = getattr(self.model, "encode_in_context", None)  # Unigram: float32 ties, sampling
        if in_context is not None:
            piece_ids, piece_ends, inverse = in_context(norm.values, words, cache=self.word_cache)
        elif self.word_cache is not None:  # one row per word: the model runs on unseen words only
            keys = None if kernels else span_hashes(norm.values, words.starts, words.ends)
            piece_ids, piece_ends = self.word_cache.encode(self.model, norm.values, words.starts, lengths, keys,
                                                           self.model.encode_words, with_ends=with_spans,
                                                           gathered=True)
            inverse = None
        elif kernels:
            rows, inverse = unique_gathered(norm.values, words.starts, lengths)
            piece_ids, piece_ends = self.model.encode_words(rows)
        else:
            unique = unique_words(norm.values, words)
            rep = unique.representative
            piece_ids, piece_ends = self.model.encode_words(gather_words(norm.values, words.starts[rep], lengths[rep]))
            inverse = unique.inverse

        if kernels:
            empty = _EMPTY_INDEX
            ids, token_offsets, spans = scatter_tokens(
                piece_ids.values.numpy(), piece_ends.values.numpy() if with_spans else empty,
                piece_ids.offsets.numpy(), empty if inverse is None else inverse.numpy(), words.starts.numpy(),
                words.text_offsets.numpy(), empty if source is None or not with_spans else source.numpy(),
                text.offsets.numpy(), with_spans, isinstance(self.model, Unigram))
            return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(token_offsets)),
                           torch.from_numpy(spans) if with_spans else None)
        # Every word occurrence takes the pieces of its unique word.
        if inverse is None:
            word_token_offsets, total = piece_ids.offsets, piece_ids.values.numel()
            word_of_token = row_ids(word_token_offsets, total) if with_spans else None
            piece = torch.arange(total, device=text.device) if with_spans else None
            ids = piece_ids.values.long()
        else:
            per_word = piece_ids.lengths()[inverse]
            word_token_offsets = offsets_from_lengths(per_word)
            total = int(word_token_offsets[-1])
            word_of_token = row_ids(word_token_offsets, total)
            piece = piece_ids.offsets[inverse][word_of_token] + (
                torch.arange(total, device=text.device) - word_token_offsets[:-1][word_of_token])
            ids = piece_ids.values[piece].long()
        token_offsets = word_token_offsets.index_select(0, words.text_offsets)
        spans = None
        if with_spans:
            first = words.starts[word_of_token]
            last = piece_ends.values[piece].long() - 1
            # Byte tokens of one character (byte fallback, byte-level BPE) each span that character;
            # Unigram's of a run of unks (all ending at the run's end) the run (scatter_numba).
            if source is None:
                source = torch.arange(text.values.numel(), device=text.device)
            lo = torch.minimum(piece_starts(piece_ends), piece_ends.values - 1)
            if isinstance(self.model, Unigram):
                lo = lo[_first_of_equal_ends(piece_ends)]
            start = source[first + lo[piece]]
            end = source[first + last] + 1
            text_start = text.offsets[:-1][row_ids(token_offsets, total)]
            spans = torch.stack([start - text_start, end - text_start], 1)
        return Encoded(Ragged(ids, token_offsets), spans)

    @property
    def _whole_pipeline_kernel(self) -> Callable[[np.ndarray, np.ndarray, bool], Encoded] | None:
        """The stages of :meth:`_encode_units` as one CPU kernel call, where one exists for this
        pipeline (BERT-style WordPiece: ``gputok.kernels.wordpiece_texts_numba``; BPE with a named
        split: ``gputok._whole_bpe``; SentencePiece Unigram: ``gputok._whole_unigram``; SentencePiece
        BPE: ``gputok._whole_sp_bpe``); None otherwise. Made on first use and dropped when a stage
        is replaced."""
        made = self.__dict__.get("_whole_kernel")
        # compared one by one: a generator over the stages cost ~0.5 us of every batch-1 call
        if made is None or (made[0][0] is not self.normalizer or made[0][1] is not self.pre_tokenizer
                            or made[0][2] is not self.model):
            stages = (self.normalizer, self.pre_tokenizer, self.model)
            made = self._whole_kernel = (stages, _whole_wordpiece_kernel(*stages) or next(
                (kernel for factory in _WHOLE_PIPELINE_FACTORIES if (kernel := factory(self, *stages))), None))
        return made[1]

    def encode_utf8(self, data: ByteBuffer, offsets: np.ndarray | torch.Tensor | Sequence[int], *,
                    device: torch.device | str = "cpu", with_spans: bool = False,
                    allowed: frozenset[str] | None = None) -> Encoded:
        """:meth:`encode_ragged` of texts given as ragged UTF-8 bytes: ``data`` (a uint8 array or
        tensor, or bytes) and ``offsets`` (n + 1 byte offsets; text ``t`` is
        ``data[offsets[t]:offsets[t + 1]]``). The ids (and character spans) equal
        ``encode_ragged([row.decode("utf-8", errors="replace") for row in rows])``: invalid UTF-8
        becomes U+FFFD as Python's ``"replace"`` makes it.

        On the CPU kernels no Python string is made for a text: a numba kernel turns the bytes into
        the UTF-32 units the pipeline reads (``gputok.kernels.ingest_numba.utf8_units_numba``), in
        chunks of rows over gputok's threads. Only texts in which an added token's text occurs (one
        search over the bytes) are decoded and encoded as strings, then put back in their place;
        on other devices every text is.
        """
        with _cpu_threads.gputok_threads():
            data, offsets = utf8_rows(data, offsets)
            rows = offsets.size - 1
            pattern = self._pattern(allowed) if allowed != frozenset() else None
            as_text = np.zeros(rows, dtype=bool) if pattern is None else rows_with(pattern, data, offsets)
            if pattern is not None and "\ufffd" in pattern.pattern:  # such a token can match a replaced byte
                as_text |= utf8_units_numba(data, offsets[:-1], offsets[1:])[2]
            if not _dispatch.on_cpu_kernels(torch.device(device)) or self._every_text_in_pieces(allowed):
                as_text[:] = True
            texts = [data[offsets[t]:offsets[t + 1]].tobytes().decode("utf-8", errors="replace")
                     for t in np.flatnonzero(as_text).tolist()]
            if len(texts) == rows:
                return self.encode_ragged(texts, device=device, with_spans=with_spans, allowed=allowed)
            starts, ends = offsets[:-1], np.where(as_text, offsets[:-1], offsets[1:])  # text rows left empty here

            def encode(part: tuple[int, int]) -> Encoded:
                units, lengths, _ = utf8_units_numba(data, starts[part[0]:part[1]], ends[part[0]:part[1]])
                return self._encode_units(units, lengths, with_spans)

            one_chunk = getattr(self.model, "is_sampling", False) or getattr(_cpu_threads._local, "worker", False)
            parts = row_chunks(offsets, 1 if one_chunk else _cpu_threads.num_threads(), _cpu_threads.MIN_CHUNK_CHARS)
            done = [encode(parts[0])] if len(parts) == 1 else _cpu_threads.map_chunks(encode, parts)
            ids = np.concatenate([d.ids.values.numpy() for d in done])
            token_offsets = np.zeros(rows + 1, dtype=np.int64)
            np.cumsum(np.concatenate([np.diff(d.ids.offsets.numpy()) for d in done]), out=token_offsets[1:])
            spans = np.concatenate([d.spans.numpy() for d in done]) if with_spans else _NO_SPANS
            if texts:
                other = self.encode_ragged(texts, device=device, with_spans=with_spans, allowed=allowed)
                ids, token_offsets, spans = splice_rows(
                    ids, token_offsets, spans, other.ids.values.numpy(), other.ids.offsets.numpy(),
                    other.spans.numpy() if with_spans else _NO_SPANS, as_text, with_spans)
            return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(token_offsets)),
                           torch.from_numpy(spans) if with_spans else None)

    def _pattern(self, contents: frozenset[str] | None) -> re.Pattern | LiteralPattern | None:
        """What finds the added tokens in ``contents`` (None: all) in the raw text, longest first
        (:func:`gputok.literals.literal_pattern`: a regex, or a trie walk for many), so not those
        matched after the normalizer (:mod:`gputok.normalized_added`)."""
        if contents not in self._patterns:
            self._bound_patterns()
            after_normalizer = self.normalizer is not None
            chosen = [t.content for t in self.added_tokens
                      if (contents is None or t.content in contents) and not (after_normalizer and t.normalized)]
            plain = not any(content in self._added_options for content in chosen)  # each match is its token
            self._patterns[contents] = literal_pattern(
                chosen, {content: self._added_ids[content] for content in chosen} if plain else None)
        return self._patterns[contents]

    def _bound_patterns(self) -> None:
        """Empty the patterns made so far once there are ``MAX_PATTERNS``: one is made per set of
        allowed special tokens a caller passes, and a trie's can hold a 256 KB table."""
        if len(self._patterns) >= MAX_PATTERNS:
            self._patterns.clear()

    def _normalized_pattern(self, contents: frozenset[str] | None) -> re.Pattern | LiteralPattern | None:
        """What finds the normalized contents of the added tokens in ``contents`` (None: all) that
        are matched after the normalizer (:func:`gputok.normalized_added.pattern`), made once."""
        key = ("normalized", contents)
        if key not in self._patterns:
            self._bound_patterns()
            self._patterns[key] = normalized_added.pattern(self._normalized_added_tokens, contents)
        return self._patterns[key]

    def _matched_added_tokens(self, texts: list[str], pattern: re.Pattern | LiteralPattern,
                              tokens: dict[str, AddedToken] | None = None) -> tuple[np.ndarray, ...]:
        """:meth:`_added_matches` of every text as int64 arrays (starts, ends, ids, match_offsets:
        text ``t``'s from ``match_offsets[t]`` to ``match_offsets[t + 1]``): from one kernel call
        where ``pattern`` is a :class:`LiteralPattern` whose every match is its token's (it has
        ``values``: no token of it has ``single_word``, ``lstrip`` or ``rstrip``)."""
        if isinstance(pattern, LiteralPattern) and pattern.values is not None:
            starts, ends, literals, match_offsets = pattern.matches(texts)
            return starts, ends, pattern.values[literals], match_offsets
        found = [self._added_matches(text, spans, tokens) for text, spans in zip(texts, match_spans(pattern, texts))]
        match_offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, found), np.int64, len(found)), out=match_offsets[1:])
        flat = np.array([m for matches in found for m in matches], np.int64).reshape(-1, 3)
        return flat[:, 0], flat[:, 1], flat[:, 2], match_offsets

    def _added_matches(self, text: str, spans: list[tuple[int, int]],
                       tokens: dict[str, AddedToken] | None = None) -> list[tuple[int, int, int]]:
        """``(start, end, id)`` of the added tokens in ``text`` as huggingface takes them, from the
        leftmost-longest matches of their pattern (``spans``, :func:`gputok.literals.match_spans`):
        less those of a ``single_word`` token with a word character (``\\w``) right before or
        after; an ``lstrip`` / ``rstrip`` token takes the whitespace before / after it (not what
        an earlier token took). ``tokens``: the token of each text the pattern matches, where that
        is not its content (normalized contents)."""
        options = self._added_options if tokens is None else tokens
        matches, position = [], 0
        for start, end in spans:
            matched = text[start:end]
            token = options.get(matched)
            if token is None:
                matches.append((start, end, self._added_ids[matched]))
                position = end
                continue
            if token.single_word and (_WORD_CHAR.match(text[start - 1:start]) or _WORD_CHAR.match(text[end:end + 1])):
                continue
            if token.lstrip:
                start = max(len(text[:start].rstrip(_WHITE_SPACE)), position)
            if token.rstrip:
                end = len(text) - len(text[end:].lstrip(_WHITE_SPACE))
            matches.append((start, end, token.id))
            position = end
        return matches

    @functools.cached_property
    def _normalized_added_tokens(self) -> dict[str, AddedToken]:
        """The added tokens matched after the normalizer, by normalized content."""
        return normalized_added.normalized_contents(self)

    def _spell_normalized_added_tokens(self) -> None:
        """huggingface's token of a normalized added token is its normalized content, and whether
        decode skips it as special is asked of that text (``"<M>"`` under Lowercase: ``"<m>"``,
        kept unless ``"<m>"`` is itself a special token)."""
        specials = {t.content for t in self.added_tokens if t.special}
        for form, token in self._normalized_added_tokens.items():
            self._id_to_token[token.id] = form
            if form not in specials:
                self._special_ids.discard(token.id)

    @functools.cached_property
    def _without_normalizer(self) -> Tokenizer:
        """This pipeline less its normalizer and added tokens: what encodes text already normalized."""
        twin = Tokenizer(self.model, pre_tokenizer=self.pre_tokenizer)
        twin.join_surrogate_pairs = self.join_surrogate_pairs
        return twin

    def _metaspace_twin(self, scheme: str, normalizer: normalizers.Normalizer | None) -> Tokenizer:
        """This pipeline's model with ``normalizer``, no added tokens, and its pre-tokenizer with the
        Metaspace that starts it prepending by ``scheme``."""
        pre = self.pre_tokenizer
        steps = pre.pretokenizers if isinstance(pre, pre_tokenizers.Sequence) else [pre]
        first = pre_tokenizers.Metaspace(replacement=steps[0].replacement, prepend_scheme=scheme, split=steps[0].split)
        twin_pre = pre_tokenizers.Sequence([first, *steps[1:]]) if isinstance(pre, pre_tokenizers.Sequence) else first
        twin = Tokenizer(self.model, normalizer=normalizer, pre_tokenizer=twin_pre)
        twin.join_surrogate_pairs = self.join_surrogate_pairs
        return twin

    @functools.cached_property
    def _not_first(self) -> tuple[Tokenizer, Tokenizer] | None:
        """Where the pre-tokenizer is (or starts with) a Metaspace with ``prepend_scheme`` "first":
        this pipeline and :attr:`_without_normalizer`, less their added tokens, with that Metaspace
        prepending never. huggingface prepends '▁' only to a split that starts the text (whose first
        character is the text's first), so not to the text after an added token, which gputok
        encodes as a text of its own (:meth:`_encode_pieces`). None for any other pre-tokenizer."""
        pre = self.pre_tokenizer
        steps = pre.pretokenizers if isinstance(pre, pre_tokenizers.Sequence) else [pre]
        if not (steps and isinstance(steps[0], pre_tokenizers.Metaspace) and steps[0].prepend_scheme == "first"):
            return None
        return self._metaspace_twin("never", self.normalizer), self._metaspace_twin("never", None)

    @functools.cached_property
    def _first_reads_source(self) -> bool:
        """Whether a Metaspace with ``prepend_scheme`` "first" must see where the normalizer starts
        each text: huggingface prepends '▁' only to a split whose raw offset is 0, so not to a text
        whose normalizer removed its first characters (``normalizers.may_remove_leading``). Then
        every text takes :meth:`_encode_with_added_tokens`, which finds those texts
        (:meth:`_keeps_first`) and encodes them with the twin that prepends never."""
        return self._not_first is not None and normalizers.may_remove_leading(self.normalizer)

    def _every_text_in_pieces(self, allowed: frozenset[str] | None) -> bool:
        """Whether every text of a call takes :meth:`_encode_with_added_tokens`, whatever it holds:
        added tokens show only after the normalizer, or a "first" Metaspace reads where the
        normalizer starts each text (:attr:`_first_reads_source`)."""
        return (allowed != frozenset() and bool(self._normalized_added_tokens)) or self._first_reads_source

    @functools.cached_property
    def _prepending(self) -> Tokenizer:
        """This pipeline less its added tokens, its "first" Metaspace prepending always: what encodes
        the pieces that start their text once :meth:`_keeps_first` has picked them (``self`` would
        pick again)."""
        return self._metaspace_twin("always", self.normalizer)

    def _keeps_first(self, pieces: list[str]) -> np.ndarray:
        """Whether the normalizer keeps each piece's first character (or leaves nothing of it)."""
        raw = codepoints(pieces, "cpu", join_surrogate_pairs=self.join_surrogate_pairs)
        norm, source = self.normalizer(raw)
        starts, source = norm.offsets.numpy(), source.numpy()
        empty = starts[1:] == starts[:-1]
        return empty | (source[np.minimum(starts[:-1], max(source.size - 1, 0))] == raw.offsets.numpy()[:-1])

    def _encode_pieces(self, pipeline: Tokenizer, twin: Tokenizer | None, pieces: list[str], at_start: np.ndarray,
                       device: torch.device | str, with_spans: bool) -> Encoded:
        """``pipeline.encode_ragged(pieces)`` (pieces of texts cut at added tokens), where the pieces
        not ``at_start`` of their text are encoded by ``twin`` (:attr:`_not_first`'s: its Metaspace
        prepends nothing to them) if given."""
        if twin is None or at_start.all():
            return pipeline.encode_ragged(pieces, device=device, with_spans=with_spans, allowed=frozenset())
        first = pipeline.encode_ragged([piece if start else "" for piece, start in zip(pieces, at_start.tolist())],
                                       device=_CPU, with_spans=with_spans, allowed=frozenset())
        later = twin.encode_ragged([piece for piece, start in zip(pieces, at_start.tolist()) if not start],
                                   device=_CPU, with_spans=with_spans, allowed=frozenset())
        ids, offsets, spans = splice_rows(
            first.ids.values.numpy(), first.ids.offsets.numpy(), first.spans.numpy() if with_spans else _NO_SPANS,
            later.ids.values.numpy(), later.ids.offsets.numpy(), later.spans.numpy() if with_spans else _NO_SPANS,
            ~at_start, with_spans)
        return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)).to(device),
                       torch.from_numpy(spans).to(device) if with_spans else None)

    @functools.cached_property
    def _added_options(self) -> dict[str, AddedToken]:
        """The added tokens with single_word, lstrip or rstrip, by content."""
        return {t.content: t for t in self.added_tokens if t.single_word or t.lstrip or t.rstrip}

    def _encode_with_added_tokens(self, texts: Sequence[str], pattern: re.Pattern | LiteralPattern | None,
                                  device: torch.device | str, with_spans: bool,
                                  allowed: frozenset[str] | None = None) -> Encoded:
        """Cut each text at the added tokens written in it, as huggingface does, encode the pieces
        between them as texts of their own, and lay pieces and added tokens back in order.

        The cut is numpy over the matches (:func:`cut_at_matches`), and the pieces are encoded as
        one batch: Python work per piece (its ``str``), and per match only where a token has
        options or the pattern is a regex (:meth:`_matched_added_tokens`).
        """
        texts = list(texts)
        matched = (self._matched_added_tokens(texts, pattern) if pattern is not None
                   else (_EMPTY_INDEX, _EMPTY_INDEX, _EMPTY_INDEX, np.zeros(len(texts) + 1, np.int64)))
        item_piece, item_id, item_text, item_start, item_end = cut_at_matches(
            np.fromiter(map(len, texts), np.int64, len(texts)), *matched)
        is_piece = item_piece >= 0
        pieces = [texts[row][start:end] for row, start, end in
                  zip(item_text[is_piece].tolist(), item_start[is_piece].tolist(), item_end[is_piece].tolist())]
        at_start = item_start[is_piece] == 0  # (Metaspace's prepend_scheme "first" reads it: _not_first)
        if self._normalized_added_tokens:  # matched in each piece after the normalizer
            plain = normalized_added.encode_pieces(self, pieces, at_start, allowed, device, with_spans)
        elif self._first_reads_source:
            if at_start.any():
                at_start &= self._keeps_first(pieces)
            plain = self._encode_pieces(self._prepending, self._not_first[0], pieces, at_start, device, with_spans)
        else:
            plain = self._encode_pieces(self, self._not_first and self._not_first[0], pieces, at_start, device,
                                        with_spans)
        if torch.device(device).type == "cpu" and _dispatch.on_cpu_kernels(torch.device(device)):
            ids, token_offsets, spans = splice_added_tokens(
                item_piece, item_id, item_text, item_start, item_end, plain.ids.values.numpy(),
                plain.ids.offsets.numpy(),
                plain.spans.numpy() if with_spans else _NO_SPANS, len(texts), with_spans)
            return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(token_offsets)),
                           torch.from_numpy(spans) if with_spans else None)
        item_piece, item_id, item_text, item_start, item_end = (
            torch.from_numpy(v).to(device) for v in (item_piece, item_id, item_text, item_start, item_end))
        is_piece = item_piece >= 0
        piece_lengths = plain.ids.lengths()
        lengths = torch.where(is_piece, piece_lengths[item_piece.clamp(min=0)] if pieces else 0, 1)
        item_offsets = offsets_from_lengths(lengths)
        total = int(item_offsets[-1])
        item_of = row_ids(item_offsets, total)
        within = positions_in_rows(item_offsets, total)
        source = plain.ids.offsets[item_piece.clamp(min=0)][item_of] + within if pieces else within
        from_piece = is_piece[item_of]
        ids = torch.where(from_piece, plain.ids.values[source.clamp(max=max(plain.ids.values.numel() - 1, 0))]
                          if plain.ids.values.numel() else 0, item_id[item_of])
        spans = None
        if with_spans:
            piece_spans = plain.spans[source.clamp(max=max(plain.ids.values.numel() - 1, 0))] if plain.ids.values.numel() \
                else torch.zeros(total, 2, dtype=torch.int64, device=device)
            spans = torch.where(from_piece[:, None], piece_spans + item_start[item_of][:, None],
                                torch.stack([item_start[item_of], item_end[item_of]], 1))
        per_text = torch.bincount(item_text, weights=lengths.double(), minlength=len(texts)).long() if total else \
            torch.zeros(len(texts), dtype=torch.int64, device=device)
        return Encoded(Ragged(ids, offsets_from_lengths(per_text)), spans)

    def encode_batch(self, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None = None, *,
                     add_special_tokens: bool = True, allowed_special: str | Set[str] = "all",
                     disallowed_special: str | Set[str] = ()) -> list[list[int]]:
        """Token ids of each text (or pair).

        Equal to ``[e.ids for e in hf.encode_batch(...)]`` for the same huggingface tokenizer;
        with ``allowed_special=set(), disallowed_special="all"``, to tiktoken's ``encode_batch``.
        A loaded file's ``truncation`` and ``padding`` sections apply, as in huggingface
        (:mod:`gputok.file_defaults`; :meth:`no_padding` and :meth:`no_truncation` turn them off).
        """
        if (self._extra.get("truncation") is not None or self._extra.get("padding") is not None) and \
                self.__dict__.get("_file_sections_apply", True):  # off in from_pretrained, as in transformers
            return file_defaults.encode_batch(self, texts, pair_texts, add_special_tokens=add_special_tokens,
                                              allowed_special=allowed_special, disallowed_special=disallowed_special)
        return self._encode_lists(texts, pair_texts, add_special_tokens=add_special_tokens,
                                  allowed_special=allowed_special, disallowed_special=disallowed_special)

    def encode_batch_fields(self, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None = None, *,
                            add_special_tokens: bool = True, allowed_special: str | Set[str] = "all",
                            disallowed_special: str | Set[str] = ()) -> dict[str, list[list[int]]]:
        """:meth:`encode_batch` with the token type ids and attention mask of each row:
        ``{"ids", "type_ids", "attention_mask"}``, each a list of rows, equal to huggingface's
        ``[e.ids for e in ...]``, ``e.type_ids`` and ``e.attention_mask``. Padding from the file's
        section has type ``pad_type_id`` and mask 0.

        >>> tok = Tokenizer.from_vocab(gputok_example_vocab())
        >>> tok.enable_padding(pad_type_id=1)
        >>> fields = tok.encode_batch_fields(["hello world", "hello"], ["world", "world"])
        >>> fields["type_ids"], fields["attention_mask"]
        ([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1]], [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
        """
        apply = self.__dict__.get("_file_sections_apply", True)  # off in from_pretrained, as in encode_batch
        return file_defaults.encode_fields(self, texts, pair_texts, add_special_tokens=add_special_tokens,
                                           allowed_special=allowed_special, disallowed_special=disallowed_special,
                                           sections=apply)

    def _encode_lists(self, texts: Sequence[TextInput], pair_texts: Sequence[TextInput] | None = None, *,
                      add_special_tokens: bool = True, allowed_special: str | Set[str] = "all",
                      disallowed_special: str | Set[str] = ()) -> list[list[int]]:
        """:meth:`encode_batch` with no padding or truncation, whatever the file says."""
        out = self(texts, pair_texts, add_special_tokens=add_special_tokens, padding=False,
                   allowed_special=allowed_special, disallowed_special=disallowed_special)
        return rows_as_lists(out["input_ids"], out["row_offsets"])

    @property
    def truncation(self) -> dict[str, Any] | None:
        """The ``truncation`` section :meth:`encode_batch` follows (huggingface's spelling), or None."""
        return self._extra.get("truncation")

    @property
    def padding(self) -> dict[str, Any] | None:
        """The ``padding`` section :meth:`encode_batch` follows (huggingface's spelling), or None."""
        return self._extra.get("padding")

    def enable_truncation(self, max_length: int, *, stride: int = 0, strategy: str = "longest_first",
                          direction: str = "right") -> None:
        """Truncate in :meth:`encode_batch` (and save it), with huggingface's options and names."""
        single = self.post_processor.single if self.post_processor is not None else []
        self._extra = dict(self._extra, truncation=file_defaults.truncation_section(
            max_length=max_length, stride=stride, strategy=strategy, direction=direction,
            special_tokens=sum(item.sequence is None for item in single)))

    def no_truncation(self) -> None:
        self._extra = dict(self._extra, truncation=None)

    def enable_padding(self, *, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0,
                       pad_token: str = "[PAD]", length: int | None = None, pad_to_multiple_of: int | None = None) -> None:
        """Pad in :meth:`encode_batch` (and save it), with huggingface's options and names."""
        self._extra = dict(self._extra, padding=file_defaults.padding_section(
            direction=direction, pad_id=pad_id, pad_type_id=pad_type_id, pad_token=pad_token, length=length,
            pad_to_multiple_of=pad_to_multiple_of))
        self.__dict__.pop("_pad_id", None)

    def no_padding(self) -> None:
        self._extra = dict(self._extra, padding=None)
        self.__dict__.pop("_pad_id", None)

    def encode(self, text: TextInput, pair: TextInput | None = None, *, add_special_tokens: bool = True,
               allowed_special: str | Set[str] = "all", disallowed_special: str | Set[str] = ()) -> list[int]:
        return self.encode_batch([text], None if pair is None else [pair], add_special_tokens=add_special_tokens,
                                 allowed_special=allowed_special, disallowed_special=disallowed_special)[0]

    def _encode_tensors(self, texts: TextInput | Sequence[TextInput], text_pair: TextInput | Sequence[TextInput] | None = None, *,
                 add_special_tokens: bool = True, padding: bool | str = True, truncation: bool | str = False,
                 max_length: int | None = None, stride: int = 0, pad_to_multiple_of: int | None = None,
                 padding_side: str = "right", return_offsets: bool = False,
                 return_overflowing_tokens: bool = False, return_token_type_ids: bool | None = None,
                 device: torch.device | str | None = None,
                 allowed_special: str | Set[str] = "all", disallowed_special: str | Set[str] = (),
                 truncation_side: str = "right", texts_checked: bool = False) -> dict[str, torch.Tensor]:
        """:meth:`__call__` (in :class:`gputok._transformers_api.TransformersAPI`, which documents
        the options) after transformers' defaults are resolved: a dict of tensors.
        ``texts_checked``: ``texts`` is already ``as_texts``' list (the caller's own)."""
        texts = texts if texts_checked else as_texts(texts)
        pairs = None if text_pair is None else as_texts(text_pair)
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} text_pair entries; they pair up one to one")
        padding = _PADDING_NAMES.get(padding, padding)
        if padding not in PADDING_STRATEGIES:
            raise ValueError(f"padding={padding!r}; choose True, False or one of {PADDING_STRATEGIES}")
        truncation = _TRUNCATION_NAMES.get(truncation, truncation)
        if truncation is not None and truncation not in TRUNCATION_STRATEGIES:
            raise ValueError(f"truncation={truncation!r}; choose True, False or one of {TRUNCATION_STRATEGIES}")
        if (truncation or padding == "max_length") and max_length is None:
            raise ValueError(f"truncation={truncation!r} / padding={padding!r} need max_length=")
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side={padding_side!r}; choose 'left' or 'right'")
        templates = self._templates()
        if return_token_type_ids is None:
            return_token_type_ids = templates[2]  # uses_token_types, without its scan of the template
        device = _dispatch.checked_device(device)
        allowed = (None if allowed_special == "all" and disallowed_special == () else  # the defaults: nothing to check
                   self._check_special(texts + (pairs or []), allowed_special, disallowed_special))
        device, out_device = self._work_device(device, texts, pairs), device
        left_cut = truncation is not None and truncation_side == "left"  # a file's "Left" truncation
        if device.type == "cpu" and _dispatch.on_cpu_kernels(device) and not left_cut:  # the common case, first
            out = self._encode_rows_cpu(texts, pairs, allowed, templates, add_special_tokens=add_special_tokens,
                                        truncation=truncation, max_length=max_length, stride=stride,
                                        overflow=return_overflowing_tokens, padding=padding,
                                        pad_to_multiple_of=pad_to_multiple_of, left=padding_side == "left",
                                        with_types=return_token_type_ids, with_offsets=return_offsets)
            if out_device is not device:  # _work_device returns the device itself where it keeps it
                out = {name: tensor.to(out_device) for name, tensor in out.items()}
            return out
        if _dispatch.backend(device) == "triton" and not left_cut:  # the whole call as a few Triton kernels, where they cover it
            out = self._encode_cuda_pipeline(texts, pairs, allowed, add_special_tokens, truncation, max_length,
                                             return_overflowing_tokens, return_offsets, padding, pad_to_multiple_of,
                                             padding_side == "left", return_token_type_ids, device)
            if out is not None:
                return {name: tensor.to(out_device) for name, tensor in out.items()}

        first = self.encode_ragged(texts, device=device, with_spans=return_offsets, allowed=allowed)
        second = (self.encode_ragged(pairs, device=device, with_spans=return_offsets, allowed=allowed)
                  if pairs is not None else None)
        if return_offsets and self._extra.get("offset_trim") is not None:
            first, second = (None if e is None else self._trim_offsets(e) for e in (first, second))
        template = []
        if add_special_tokens and self.post_processor is not None:
            template = self.post_processor.pair if second is not None else self.post_processor.single
        added = sum(item.sequence is None for item in template)
        budget = None if truncation is None else max_length - added
        if left_cut:  # cut before the post-processor, as huggingface
            if return_overflowing_tokens:
                raise ValueError("return_overflowing_tokens with left truncation (a tokenizer.json truncation "
                                 "direction \"Left\") is not supported; truncate on the right")
            check_truncation(budget, truncation, second is not None, False)
            first, second = file_defaults.cut_left(first, second, max_length=budget, strategy=truncation)
            truncation, budget = None, None
        rows = truncate(first.ids.lengths(), None if second is None else second.ids.lengths(),
                        max_length=budget, strategy=truncation or "longest_first", stride=stride,
                        overflow=return_overflowing_tokens)
        if not template and second is None and truncation is None:
            # One sequence, no special tokens, nothing cut: the rows are the encoded texts as they are.
            row_offsets, input_ids = first.ids.offsets, first.ids.values
            type_ids = torch.zeros_like(input_ids) if return_token_type_ids else None
            offsets = first.spans
        else:
            if not template:
                template = [_A] if second is None else [_A, _B]
            row_offsets, source, special_ids, type_ids = assemble(
                template, rows, first.ids.offsets, None if second is None else second.ids.offsets,
                first.ids.values.numel())
            all_ids = first.ids.values if second is None else torch.cat([first.ids.values, second.ids.values])
            is_token = source >= 0
            input_ids = torch.where(is_token, all_ids[source.clamp(min=0)] if all_ids.numel() else 0, special_ids)
            if return_offsets:
                spans = first.spans if second is None else torch.cat([first.spans, second.spans])
                offsets = torch.where(is_token[:, None], spans[source.clamp(min=0)] if spans.numel() else spans.new_zeros(1, 2), 0)
        out = {}
        if padding == "do_not_pad":
            out.update(input_ids=input_ids, row_offsets=row_offsets)
            if return_token_type_ids:
                out["token_type_ids"] = type_ids
            if return_offsets:
                out["offsets"] = offsets
        else:
            lengths = row_offsets[1:] - row_offsets[:-1]
            width = int(lengths.max()) if lengths.numel() else 0
            if padding == "max_length":
                width = max(width, max_length)
            if pad_to_multiple_of:
                width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
            filled = filled_cells(lengths, width, left=padding_side == "left")
            out["input_ids"] = pad(input_ids, filled, pad_value=self._pad_id)
            out["attention_mask"] = filled.long()
            if return_token_type_ids:
                out["token_type_ids"] = (pad(type_ids, filled, pad_value=0) if bool(type_ids.any())
                                         else torch.zeros_like(out["attention_mask"]))
            if return_offsets:
                out["offsets"] = pad(offsets, filled[:, :, None].expand(-1, -1, 2), pad_value=0)
        if return_overflowing_tokens:
            out["overflow_to_sample_mapping"] = rows.sample
        if out_device != device:
            out = {name: tensor.to(out_device) for name, tensor in out.items()}
        return out

    def _encode_cuda_pipeline(self, texts: list[str], pairs: list[str] | None, allowed: frozenset[str] | None,
                              add_special_tokens: bool, truncation: str | None, max_length: int | None, overflow: bool,
                              with_offsets: bool, padding: str, pad_to_multiple_of: int | None, left: bool,
                              with_types: bool, device: torch.device) -> dict[str, torch.Tensor] | None:
        """:meth:`__call__`'s outputs from :mod:`gputok.cuda_pipeline` (a few Triton kernels, one host
        sync), or None where it does not cover the tokenizer, the options or added tokens in the text."""
        from . import cuda_pipeline

        if not cuda_pipeline.supports(self, pairs=pairs, return_offsets=with_offsets, overflow=overflow,
                                      truncation=truncation):
            return None
        if self._every_text_in_pieces(allowed):
            return None
        pattern = self._pattern(allowed) if allowed != frozenset() else None
        if pattern is not None and pattern.search("".join(texts)):
            return None
        template = self.post_processor.single if add_special_tokens and self.post_processor is not None else []
        budget = None if truncation is None else max_length - sum(item.sequence is None for item in template)
        return cuda_pipeline.encode(self, texts, device, template=template or [_A], truncation=truncation,
                                    budget=budget, padding=padding, max_length=max_length,
                                    pad_to_multiple_of=pad_to_multiple_of, left=left, with_types=with_types)

    def _templates(self) -> tuple[tuple, tuple, bool]:
        """The post-processor's templates as the kernels read them (:func:`_template_arrays`, with
        the number of special tokens each adds), single then pair, and whether the pair template
        gives B its own type id (:attr:`uses_token_types`); made once per post-processor (its
        ``single`` and ``pair`` lists are replaced, never edited, where they change)."""
        post = self.post_processor
        made = self.__dict__.get("_template_cache")
        if made is None or made[0] is not post or (post is not None and (made[1] is not post.single
                                                                         or made[2] is not post.pair)):
            def arrays(template: list[TemplateItem], is_pair: bool) -> tuple:
                if not template:  # the sequences alone
                    return _NO_TEMPLATE[is_pair]
                return (*_template_arrays(tuple(template)), sum(item.sequence is None for item in template))

            single = arrays(post.single if post is not None else [], False)
            pair = arrays(post.pair if post is not None else [], True)
            made = self._template_cache = (post, None if post is None else post.single,
                                           None if post is None else post.pair,
                                           (single, pair, post is not None and any(item.type_id for item in post.pair)))
        return made[3]

    def _encode_rows_cpu(self, texts: list[str], pairs: list[str] | None, allowed: frozenset[str] | None,
                         templates: tuple[tuple, tuple, bool], *,
                         add_special_tokens: bool, truncation: str | None, max_length: int | None, stride: int,
                         overflow: bool, padding: str, pad_to_multiple_of: int | None, left: bool, with_types: bool,
                         with_offsets: bool) -> dict[str, torch.Tensor]:
        """:meth:`__call__`'s outputs on the CPU kernels. A small batch of single texts without
        offsets or overflow, whose pipeline is one kernel (``_whole_pipeline_kernel`` with
        ``padded_cells`` / ``ragged_cells`` twins that also post-process, see
        ``kernels/wordpiece_texts_numba.py``) and with no added token in its text is one kernel
        call; any other batch is encoded (:meth:`_encode_arrays`) and then post-processed
        (:meth:`_post_process_kernels`). Numpy arrays throughout, torch tensors only at the end:
        no torch op on the way. ``templates``: :meth:`_templates`."""
        single, pair, _ = templates
        if add_special_tokens and self.post_processor is not None:
            item_seq, item_id, item_type, added = pair if pairs is not None else single
        else:
            item_seq, item_id, item_type, added = _NO_TEMPLATE[pairs is not None]
        budget = 0 if truncation is None else max_length - added
        strategy = None  # not truncated: the post-processing kernels' compile without truncation (cells_numba)
        if truncation is not None:
            check_truncation(budget, truncation, pairs is not None, overflow)
            strategy = TRUNCATION_STRATEGIES.index(truncation)
        padded = padding != "do_not_pad"
        post_padded = (max_length if padding == "max_length" else 0, pad_to_multiple_of or 0, left, self._pad_id)
        whole = (None if pairs is not None or with_offsets or overflow or self.join_surrogate_pairs
                 else self._whole_pipeline_kernel)
        fused = getattr(whole, "padded_cells" if padded else "ragged_cells", None)
        if fused is not None:
            options = ((budget, strategy, stride, item_seq, item_id, item_type, *post_padded, with_types) if padded
                       else (budget, strategy, stride, item_seq, item_id, item_type, with_types))
            out = (None if self._every_text_in_pieces(allowed)
                   else self._cells_in_one_call(texts, self._pattern(allowed) if allowed != frozenset() else None,
                                                fused, options, padded, truncation, stride, with_types))
            if out is not None:
                return out
        post = (budget, strategy, stride, overflow, item_seq, item_id, item_type)
        with _cpu_threads.gputok_threads():  # chunk threads, and whatever torch ops the stages run
            if (padded and pairs is None and not overflow and not getattr(self.model, "is_sampling", False)
                    and not (with_offsets and self._extra.get("offset_trim") is not None)):
                parts = _cpu_threads.chunks(texts)
                if parts is not None:
                    return self._padded_in_chunks(parts, allowed, post, post_padded, truncation=truncation,
                                                  stride=stride, with_types=with_types, with_offsets=with_offsets)
            first = self._encode_arrays(texts, with_offsets, allowed)
            second = None if pairs is None else self._encode_arrays(pairs, with_offsets, allowed)
            if with_offsets and self._extra.get("offset_trim") is not None:
                first, second = (None if e is None else _as_arrays(self._trim_offsets(Encoded(
                    Ragged(torch.from_numpy(e[0]), torch.from_numpy(e[1])), torch.from_numpy(e[2]))))
                                 for e in (first, second))
            return self._post_process_kernels(first, second, post, post_padded if padded else None,
                                              truncation=truncation, stride=stride, overflow=overflow,
                                              with_types=with_types, with_offsets=with_offsets)

    def _cells_in_one_call(self, texts: list[str], pattern: re.Pattern | LiteralPattern | None, fused: tuple,
                           options: tuple, padded: bool, truncation: str | None, stride: int, with_types: bool,
                           joined: str | None = None) -> dict[str, torch.Tensor] | None:
        """:meth:`__call__`'s tensors from one call of a whole-pipeline kernel's ``padded_cells`` or
        ``ragged_cells`` (``fused``: (kernel, tables)) with the post-processing ``options`` after
        the tables, or for a batch more than one chunk's worth (see ``gputok._cpu_threads.chunks``)
        from :meth:`_cells_in_parts`; None where neither takes the batch or it holds a match of
        ``pattern`` (the added tokens to find: those texts take the other path). ``joined``:
        ``"\x00".join(texts)`` where the caller made it (its join checked the texts' types).

        The kernel reads the texts joined by NUL (``ingest_numba.JOINED_LENGTHS``: it finds their
        lengths itself, where a Python call per text would cost ~40 ns each); a text that holds a
        NUL comes out as two rows, and the batch goes again with the lengths from Python (so such a
        batch is encoded twice, and a model that samples draws for both calls: counting the NULs
        first would cost every call ~14 us at 1,024 lines, ``str.count``). A match
        of ``pattern`` in that join is one in a text, or one across a separator (an added token
        holding a NUL), which only sends the batch down the other path, as one across two texts
        in a plain join would."""
        # A batch of that many texts is as many characters unless texts are empty, and either path
        # gives the same outputs: decided without joining them (~0.4 ms at 65,536 lines, twice a call).
        count = len(texts)
        if count >= 2 * _cpu_threads.MIN_CHUNK_CHARS:
            return None
        if joined is None:
            joined = "\x00".join(texts)
        if pattern is not None and pattern.search(joined):
            return None
        chars = len(joined) - max(count - 1, 0)
        if chars >= 2 * _cpu_threads.MIN_CHUNK_CHARS:
            return self._cells_in_parts(texts, joined, options, padded, truncation, stride, with_types)
        # dtype objects passed by position: numpy parses dtype=np.int32 at each call (~0.2 us)
        units = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), _INT32)
        # one text (or none): its length, 0.3 us less than fromiter
        lengths = ingest_numba.JOINED_LENGTHS if count > 1 else np.array((len(joined),) * count, _INT64)
        kernel, tables = fused
        got = kernel(units, lengths, *tables, *options)
        if count > 1 and not got[-1] and (got[0].shape[1] if padded else got[1].size - 1) != count:
            got = kernel(*_units_and_lengths(texts), *tables, *options)  # a text held a NUL
        if got[-1] == cells_numba.REFUSED:  # the kernel leaves this batch to the stages
            return None
        return _cell_outputs(got, padded, truncation, stride, with_types)

    def _cells_in_parts(self, texts: list[str], joined: str, options: tuple, padded: bool,
                        truncation: str | None, stride: int, with_types: bool) -> dict[str, torch.Tensor] | None:
        """:meth:`_cells_in_one_call` of a batch :meth:`_ids_in_parts` encodes (``joined``: the texts
        joined by NUL), then every row post-processed in one more kernel call (``cells_numba``) on
        the calling thread; None where that does not apply. Against
        :meth:`_padded_in_chunks` it saves each chunk's Python glue (a third of the CPU time of a
        2-thread call of 1,024 lines) and the second hand-off: at that size, filling every row on
        one thread takes less time than waking the others for it."""
        got = self._ids_in_parts(texts, joined)
        if got is None:
            return None
        ids, offsets = got
        if not padded:
            return _cell_outputs(cells_numba.ragged_cells(ids, offsets, *options), False, truncation, stride,
                                 with_types)
        kernel = cells_numba.padded_cells_packed if len(options) == 1 else cells_numba.padded_cells
        return _cell_outputs(kernel(ids, offsets, *options), True, truncation, stride, with_types)

    def _ids_in_parts(self, texts: Sequence[str], joined: str | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """The ids and token offsets of a batch of two chunks' worth up to ``PARTS_MAX_CHARS``
        characters where the whole-pipeline kernel encodes parts of one (``encode_part``): the texts
        joined by NUL and UTF-32 encoded once, cut into a part per CPU thread at separators
        (:func:`_joined_part_starts`), each part's ids made on its thread in one kernel call, which
        finds its texts' lengths (``ingest_numba.JOINED_LENGTHS``); None where that does not apply
        (no such kernel, a model that samples, whose draws stay in one thread's order, joined
        surrogate pairs, a batch out of that range, one thread, or one part best). ``joined``: the
        texts joined by NUL, where the caller made it; else joined here, once the checks that need
        no join have passed (a batch of as many texts as two chunks' characters is past the range
        without one)."""
        encode_part = getattr(self._whole_pipeline_kernel, "encode_part", None)
        if (encode_part is None or getattr(self.model, "is_sampling", False) or self.join_surrogate_pairs
                or not 2 <= len(texts) < 2 * _cpu_threads.MIN_CHUNK_CHARS):
            return None
        if joined is None:
            joined = "\x00".join(texts)
        if not 2 * _cpu_threads.MIN_CHUNK_CHARS <= len(joined) - len(texts) + 1 <= PARTS_MAX_CHARS:
            return None
        threads = _cpu_threads.part_threads(len(texts))
        if threads < 2:
            return None
        starts = _joined_part_starts(joined, len(texts), threads)
        if starts is None:  # one part is best
            return None
        units = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), _INT32)

        def encode(part: int) -> tuple[np.ndarray, np.ndarray]:  # (the part's units end before its separator)
            return encode_part(units[starts[part]:starts[part + 1] - 1], ingest_numba.JOINED_LENGTHS)

        done = _cpu_threads.map_chunks(encode, list(range(len(starts) - 1)))
        if any(d is None for d in done):  # a part the kernel leaves to the stages
            return None
        if sum(d[1].size - 1 for d in done) != len(texts):  # a text held a NUL: cut by the lengths from Python
            units, lengths = _units_and_lengths(texts)
            ends = np.cumsum(lengths)
            bounds = _cpu_threads.part_bounds(ends) or [0, len(texts)]
            starts = [0, *(int(ends[b - 1]) for b in bounds[1:])]

            def encode(part: int) -> tuple[np.ndarray, np.ndarray]:
                return encode_part(units[starts[part]:starts[part + 1]], lengths[bounds[part]:bounds[part + 1]])

            done = _cpu_threads.map_chunks(encode, list(range(len(bounds) - 1)))
            if any(d is None for d in done):
                return None
        return np.concatenate([d[0] for d in done]), _joined_offsets([d[1] for d in done])

    def _padded_call(self, texts: list[str], add_special_tokens: bool, with_types: bool | None,
                     joined: str | None = None) -> dict[str, torch.Tensor] | None:
        """:meth:`__call__` with every option at its default but ``add_special_tokens`` and
        ``return_token_type_ids`` (rows padded to the longest, tensors on the CPU), ``texts``
        already ``as_texts``' list: a training loop's call, and at batch 1 mostly glue, so it skips
        :meth:`_encode_tensors`' checks and option plumbing, with what it needs made once
        (:meth:`_padded_plan`). One text goes to the plan's one-text kernel where the pipeline has
        one (BPE's: its misses inserted by the kernel), a small batch to
        :meth:`_cells_in_one_call`. None where that does not cover the call (no one-call kernel
        for this pipeline, or a batch it does not take). ``joined``: ``"\x00".join(texts)``, where
        made."""
        if not _dispatch.on_cpu_kernels(_dispatch.CPU):  # GPUTOK_BACKEND is read at each call, as on every path
            return None
        plan = self._padded_plan(add_special_tokens, with_types)
        if plan is None:
            return None
        whole, options, with_types, pattern, fused, one_text = plan
        if one_text is not None and len(texts) == 1:
            text = texts[0]
            if len(text) < 2 * _cpu_threads.MIN_CHUNK_CHARS and (pattern is None or pattern.search(text) is None):
                out = one_text(text)
                if out is not None:
                    return out
        if fused is None:
            # Read at each call, not planned: Unigram's and SP-BPE's tables hold the calling thread's
            # word store for the word cache of the moment, and are None while the model samples.
            fused = whole.padded_cells
            if fused is None:
                return None
        return self._cells_in_one_call(texts, pattern, fused, options, True, None, 0, with_types, joined)

    def _padded_plan(self, add_special_tokens: bool, with_types: bool | None) -> tuple | None:
        """What :meth:`_padded_call` passes to :meth:`_cells_in_one_call` for these two options:
        (the whole-pipeline kernel, whose ``padded_cells`` the call reads, the post-processing
        options, whether token types come out, the added-token pattern to look for, the
        ``(kernel, tables)`` to call where it is fixed: a kernel taking the options packed, else
        None, and the one-text kernel with these options, or None), or None where no one-call
        kernel covers the pipeline.

        Made once and kept until a setting it reads changes, which the check below sees: a stage
        (the whole-pipeline kernel), the post-processor or its templates (replaced, never edited),
        the file's sections (``_extra``, replaced by ``enable_padding`` and the like, never edited:
        the padding side and pad id), the pad token (``tok.pad_token = ...`` drops the cached
        ``_pad_id``) and ``join_surrogate_pairs``. Building the options at each call was ~2 us of
        a ~15 us batch-1 call."""
        post = self.post_processor
        settings = self.__dict__
        made = settings.get("_padded_plans")
        if (made is None or made[0] is not self.normalizer or made[1] is not self.pre_tokenizer
                or made[2] is not self.model or made[3] is not post or made[4] is not self._extra
                or made[5] is not settings.get("_pad_id") or made[6] is not self.join_surrogate_pairs
                or (post is not None and (made[7] is not post.single or made[8] is not post.pair))):
            pad_id = self._pad_id  # evaluated (and cached) before the key that holds it is taken
            made = self._padded_plans = (self.normalizer, self.pre_tokenizer, self.model, post, self._extra, pad_id,
                                         self.join_surrogate_pairs, post and post.single, post and post.pair, {})
        plan = made[9].get((add_special_tokens, with_types), made)  # (made: no plan yet; a plan may be None)
        if plan is made:
            plan = made[9][add_special_tokens, with_types] = self._make_padded_plan(add_special_tokens, with_types)
        return plan

    def _make_padded_plan(self, add_special_tokens: bool, with_types: bool | None) -> tuple | None:
        """:meth:`_padded_plan`'s plan, made from the settings as they are."""
        whole = self._whole_pipeline_kernel
        if not hasattr(whole, "padded_cells") or self.join_surrogate_pairs or self._normalized_added_tokens:
            return None
        single, _, uses_types = self._templates()
        item_seq, item_id, item_type, _ = (single if add_special_tokens and self.post_processor is not None
                                           else _NO_TEMPLATE[False])
        with_types = uses_types if with_types is None else with_types
        options = (0, None, 0, item_seq, item_id, item_type, 0, 0, file_defaults.padding_side(self._extra) == "left",
                   self._pad_id, with_types)
        # A kernel that takes the options packed in one array (BPE's: a numba call pays per argument)
        # is called with them packed here, once.
        packed = getattr(whole, "padded_packed", None)
        if packed is not None:
            post = packed[1](*options)
            one_text = getattr(whole, "padded_text", None)
            return (whole, (post,), with_types, self._pattern(None), (packed[0], ()),
                    None if one_text is None else one_text(post, with_types))
        return whole, options, with_types, self._pattern(None), None, None

    def _padded_in_chunks(self, parts: list[Sequence[str]], allowed: frozenset[str] | None, post: tuple,
                          post_padded: tuple, *, truncation: str | None, stride: int, with_types: bool,
                          with_offsets: bool) -> dict[str, torch.Tensor]:
        """:meth:`__call__`'s padded outputs of single texts in ``parts`` (consecutive chunks of the
        batch, :func:`gputok._cpu_threads.chunks`), each chunk on its own CPU thread twice: its
        texts encoded and its rows planned (``postprocess_numba.plan_padded``), then, once the
        width of the batch is known, its rows filled (``fill_padded``) into its block of the
        outputs, straight from its own encoded arrays. Nothing runs on one thread but the
        allocation: joining the chunks' ids and post-processing them in one pass (the way of
        :meth:`_post_process_kernels`) kept one core idle for a third of a call at batch 1,024."""
        budget, strategy, stride, _, item_seq, item_id, item_type = post
        min_width, multiple, left, pad_id = post_padded

        def encode(part: Sequence[str]) -> tuple:
            ids, offsets, spans = self._encode_arrays(part, with_offsets, allowed, in_parts=False)
            return ids, offsets, spans, postprocess_numba.plan_padded(offsets, _EMPTY_INDEX, budget, strategy, stride,
                                                                      False, item_seq, min_width, multiple)

        done = _cpu_threads.map_chunks(encode, parts)
        error = next((plan[7] for *_, plan in done if plan[7]), 0)
        if error:
            raise_truncation_error(error, truncation, stride)
        width = max(plan[6] for *_, plan in done)
        ends = np.cumsum([plan[0].size for *_, plan in done])
        rows = int(ends[-1])
        ids, mask, types, offsets, write_types = _padded_outputs(rows, width, item_type, with_types, with_offsets)

        def fill(chunk: int) -> None:
            a_ids, a_offsets, a_spans, plan = done[chunk]
            sample, a_start, a_len, b_start, b_len, lengths = plan[:6]
            block = slice(int(ends[chunk]) - sample.size, int(ends[chunk]))
            postprocess_numba.fill_padded(
                0, sample.size, width, left, pad_id, item_seq, item_id, item_type, sample, a_start, a_len, b_start,
                b_len, a_ids, a_offsets, _EMPTY_INDEX, _EMPTY_INDEX, a_spans if with_offsets else _NO_SPANS, _NO_SPANS,
                lengths, ids[block], mask[block], types[block] if write_types else types,
                offsets[block] if with_offsets else offsets, write_types, with_offsets)

        _cpu_threads.map_chunks(fill, list(range(len(done))))
        return _outputs((ids, mask, types, offsets, None, 0), True, truncation, stride, with_types, with_offsets, False)

    def _post_process_kernels(self, first: tuple, second: tuple | None, post: tuple, post_padded: tuple | None, *,
                              truncation: str | None, stride: int, overflow: bool, with_types: bool,
                              with_offsets: bool) -> dict[str, torch.Tensor]:
        """:meth:`__call__`'s outputs from the encoded texts (numpy ids, offsets, spans) in one
        kernel call of ``gputok.kernels.postprocess_numba``: the rows after truncation
        (``truncate_rows``), then every output array (``padded_rows``, or ``ragged_rows`` where
        ``post_padded`` is None); a large padded batch in row ranges on the CPU threads into arrays
        allocated outside the kernel (:func:`_padded_in_ranges`). The torch reference is :func:`truncate`,
        :func:`assemble` and :func:`pad`."""
        a_ids, a_offsets, a_spans = first
        b_ids, b_offsets, b_spans = _EMPTY_INDEX, _EMPTY_INDEX, _NO_SPANS  # single sequences: the kernel reads A
        if second is not None:
            b_ids, b_offsets, b_spans = second
        if not with_offsets:
            a_spans = b_spans = _NO_SPANS
        budget, strategy, stride, overflow, item_seq, item_id, item_type = post
        args = (a_offsets, b_offsets, budget, strategy, stride, overflow, item_seq, item_id, item_type, a_ids, b_ids,
                a_spans, b_spans)
        if post_padded is None:
            got = postprocess_numba.ragged_rows(*args, with_types, with_offsets)
        elif a_ids.size + b_ids.size >= PADDED_IN_RANGES_FROM:
            got = _padded_in_ranges(args, post_padded, with_types, with_offsets)
        else:
            got = postprocess_numba.padded_rows(*args, *post_padded, with_types, with_offsets)
        return _outputs(got, post_padded is not None, truncation, stride, with_types, with_offsets, overflow)

    def _work_device(self, device: torch.device, texts: list[str], pairs: list[str] | None) -> torch.device:
        """Where a batch for ``device`` is encoded: the CPU for a small batch bound for a GPU (see
        ``CUDA_FROM_CHARS``), unless the model is sampling (a sample draws on the caller's generator,
        which lives on the device)."""
        if device.type != "cuda" or getattr(self.model, "is_sampling", False):
            return device
        if _dispatch.backend(torch.device("cpu")) == "triton":  # kernels forced everywhere: keep them on the GPU
            return device
        chars = sum(map(len, texts)) + sum(map(len, pairs or ()))
        return torch.device("cpu") if chars < CUDA_FROM_CHARS else device

    def _check_special(self, texts: list[str], allowed_special, disallowed_special) -> frozenset[str] | None:
        """The allowed added tokens (None: all); raises if a text holds a disallowed one."""
        if allowed_special == "all" and isinstance(disallowed_special, tuple) and not disallowed_special:
            return None  # the defaults: nothing to check (every call pays for this method)
        known = {t.content for t in self.added_tokens}
        sets = {}
        for name, value in (("allowed_special", allowed_special), ("disallowed_special", disallowed_special)):
            if value == "all":
                sets[name] = known
            elif isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{name}={value!r}; pass 'all' or a set of token strings")
            else:
                sets[name] = set(value)
                if sets[name] - known:
                    raise ValueError(f"{name} names {sorted(sets[name] - known)}, which are not added tokens "
                                     f"of this tokenizer; known: {sorted(known)}")
        # tiktoken's rule: "all" disallows every token not allowed; a token named in both sets is
        # disallowed (a text holding it raises).
        disallowed = frozenset(sets["disallowed_special"] - sets["allowed_special"] if disallowed_special == "all"
                               else sets["disallowed_special"])
        pattern = self._pattern(disallowed) if disallowed else None
        found = None
        if pattern is not None and pattern.search("".join(texts)):
            found = next((m for m in map(pattern.search, texts) if m), None)  # within one text
        if found:
            raise ValueError(f"the text contains the special token {found.group()!r}, which is disallowed; pass "
                             f"allowed_special={{{found.group()!r}}} to encode it as that token, or "
                             "disallowed_special=() to encode it as plain text")
        return None if allowed_special == "all" else frozenset(sets["allowed_special"])

    def _trim_offsets(self, encoded: Encoded) -> Encoded:
        """The spans of ``encoded`` trimmed as the file's ByteLevel / RobertaProcessing post-processor
        trims them (:class:`gputok.processors.OffsetTrim`)."""
        leading, trailing = self._token_spaces
        ids, offsets = encoded.ids.values.long(), encoded.ids.offsets
        first = torch.zeros(ids.numel() + 1, dtype=torch.bool, device=ids.device)
        first[offsets[:-1]] = True
        spans = self._extra["offset_trim"].apply(encoded.spans, ids, first[:-1], leading.to(ids.device),
                                                 trailing.to(ids.device))
        return Encoded(encoded.ids, spans)

    @functools.cached_property
    def _token_spaces(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each id's count of leading and of trailing spaces (``Ġ`` or whitespace) in its token."""
        def spaces(token: str) -> int:
            return len(token) - len(token.lstrip(_SPACE_CHARS))

        tokens = [t or "" for t in self._file_spelling]
        leading = torch.tensor([spaces(t) for t in tokens], dtype=torch.int64)
        trailing = torch.tensor([spaces(t[::-1]) for t in tokens], dtype=torch.int64)
        return leading, trailing

    @functools.cached_property
    def _pad_id(self) -> int:
        if self.__dict__.get("_user_special_tokens", {}).get("pad_token") is not None:  # tok.pad_token = ...
            return self.pad_token_id
        padding = self._extra.get("padding") or {}
        if "pad_id" in padding:
            return int(padding["pad_id"])
        pad_id = self.token_to_id("[PAD]")
        return 0 if pad_id is None else pad_id

    # ---- decoding -----------------------------------------------------------------------
    def decode(self, ids: Sequence[int] | torch.Tensor | np.ndarray, *, skip_special_tokens: bool = True,
               errors: str | None = None) -> str | list[str]:
        """The text of token ids: a 1-D list, tensor or numpy array (or one id) gives a string, a
        2-D one a list of strings (as :meth:`batch_decode`). ``errors``: how bytes that are not
        UTF-8 decode (byte-level BPE: "replace" by default, as tiktoken; "strict", "ignore", ... as
        ``bytes.decode``)."""
        many = self._decode_any(ids, skip_special_tokens) if errors is None else None
        if many is not None:
            return many
        if isinstance(ids, (torch.Tensor, np.ndarray)):
            ids = ids.tolist()
        if _dispatch.on_cpu_kernels(torch.device("cpu")) and self._decode_table is not None:
            decoded = self._decode_kernel([ids], skip_special_tokens, errors)
            if decoded is not None:
                return decoded[0]
        if errors is not None:
            return self.decode_bytes(ids, skip_special_tokens=skip_special_tokens).decode("utf-8", errors=errors)
        return self._decode_python(ids, skip_special_tokens)

    def decode_bytes(self, ids: Sequence[int] | torch.Tensor, *, skip_special_tokens: bool = False) -> bytes:
        """The bytes of ``ids`` before any UTF-8 decoding (byte-level BPE: each token's bytes, an
        added token's UTF-8, as tiktoken's ``decode_bytes``). An id that is no token: ValueError."""
        return self.decode_bytes_batch([ids.tolist() if isinstance(ids, torch.Tensor) else ids],
                                       skip_special_tokens=skip_special_tokens)[0]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]] | torch.Tensor, *,
                           skip_special_tokens: bool = False) -> list[bytes]:
        """:meth:`decode_bytes` of each row, all rows in one kernel call."""
        if self._decode_table is None:  # a decoder the kernel does not cover: its text, as UTF-8
            return [self._decode_python(row.tolist() if isinstance(row, torch.Tensor) else row,
                                        skip_special_tokens).encode("utf-8", "surrogatepass") for row in batch]
        got = self._decode_rows(batch, skip_special_tokens)
        if isinstance(got, int):
            raise ValueError(f"token id {got} is outside the vocabulary (size {self.vocab_size})")
        data, bounds = got
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def _decode_python(self, ids: Sequence[int], skip_special_tokens: bool) -> str:
        """:meth:`decode` token by token: the reference of the decode kernel, and the path of
        decoders it does not cover."""
        if self._decodes_bytes:  # bytes, then UTF-8 with replacement, as tiktoken decodes
            specials = {t.id: self._id_to_token[t.id].encode() for t in self.added_tokens}
            return b"".join(b"" if skip_special_tokens and i in self._special_ids else
                            specials.get(i) or self.model.decode_bytes([i]) for i in ids).decode("utf-8", errors="replace")
        tokens = []
        spelled = self._spelled_tokens
        for i in ids:
            token = self.id_to_token(i) if spelled is None or not 0 <= i < len(spelled) else spelled[i]
            if token is None:
                raise ValueError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
            if skip_special_tokens and i in self._special_ids:
                continue
            tokens.append(token)
        return self.decoder(tokens) if self.decoder is not None else " ".join(tokens)

    def decode_batch(self, batch: Sequence[Sequence[int]] | torch.Tensor, *, skip_special_tokens: bool = True,
                     errors: str | None = None) -> list[str]:
        if _dispatch.on_cpu_kernels(torch.device("cpu")) and self._decode_table is not None:
            decoded = self._decode_kernel(batch, skip_special_tokens, errors)
            if decoded is not None:
                return decoded
        return [self.decode(ids, skip_special_tokens=skip_special_tokens, errors=errors) for ids in batch]

    def _decode_kernel(self, batch: Sequence[Sequence[int]] | torch.Tensor, skip_special_tokens: bool,
                       errors: str | None = None) -> list[str] | None:
        """:meth:`decode_batch` by ``gputok.kernels.decode_numba`` (one call for all rows); None
        when an id is not a token (the Python path then raises its error)."""
        got = self._decode_rows(batch, skip_special_tokens)
        if isinstance(got, int):
            return None
        data, bounds = got
        errors = errors or self._decode_table[-1]
        return [data[a:b].decode("utf-8", errors=errors) for a, b in zip(bounds, bounds[1:])]

    def _decode_rows(self, batch: Sequence[Sequence[int]] | torch.Tensor,
                     skip_special_tokens: bool) -> tuple[bytes, list[int]] | int:
        """The decoded bytes of all rows and each row's bounds in them (``decode_rows``), or the
        first id that is not a token (or not an integer: -1)."""
        if isinstance(batch, torch.Tensor):
            rows = batch.reshape(-1, batch.shape[-1]) if batch.dim() else batch.reshape(1, 1)
            flat = rows.to("cpu", torch.int64).contiguous().numpy().reshape(-1)
            offsets = np.arange(rows.shape[0] + 1, dtype=np.int64) * rows.shape[1]
        else:
            rows = [row.tolist() if isinstance(row, torch.Tensor) else row for row in batch]
            lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
            try:
                flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
            except (OverflowError, TypeError, ValueError):
                return -1
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
        first, first_offsets, later, later_offsets, skip, missing, _ = self._decode_table
        out, out_offsets, bad = decode_rows(flat, offsets, first, first_offsets, later, later_offsets, skip, missing,
                                            skip_special_tokens)
        if bad >= 0:
            return int(flat[bad])
        return out.tobytes(), out_offsets.tolist()

    @property
    def _decodes_bytes(self) -> bool:
        """Byte-level BPE decoded by the ByteLevel decoder: each token is its bytes."""
        return isinstance(self.model, BPE) and self.model.byte_level and type(self.decoder) is decoders.ByteLevelDecoder

    @functools.cached_property
    def _spelled_tokens(self) -> list[str | None] | None:
        """Byte-level BPE under another decoder: each id's token as the file spells it (GPT-2's
        byte alphabet), which that decoder reads, added tokens as they are; None otherwise."""
        if not (isinstance(self.model, BPE) and self.model.byte_level) or self._decodes_bytes:
            return None
        return self._file_spelling

    @functools.cached_property
    def _file_spelling(self) -> list[str | None]:
        """Each id's token as tokenizer.json spells it (byte-level BPE: in GPT-2's byte alphabet),
        added tokens as they are."""
        if not (isinstance(self.model, BPE) and self.model.byte_level):
            return [self.id_to_token(i) for i in range(self.vocab_size)]
        spelled = {i: t for t, i in self.model.to_json()["vocab"].items()}
        spelled.update({t.id: t.content for t in self.added_tokens})
        return [spelled.get(i) for i in range(max(spelled, default=-1) + 1)]

    @functools.cached_property
    def _decode_table(self) -> tuple | None:
        """Each id's bytes as the decode kernel reads them (CSR): the first form and the later
        form (byte-level BPE: the token's bytes, both; WordPiece: the decoder's output for the
        token first, and its addition after another token), the special ids, the ids that are
        no token; None for the decoders the kernel does not cover (their per-token Python path
        stays). The WordPiece decoder cleans up each token's piece on its own, so a row's text
        is the concatenation of those forms."""
        size = max(self.vocab_size, max((t.id + 1 for t in self.added_tokens), default=0))
        if self._decodes_bytes:
            specials = {t.id: self._id_to_token[t.id].encode() for t in self.added_tokens}
            tokens = [specials.get(i) or (self.model.token_bytes[i] if i < self.model.vocab_size else None)
                      for i in range(size)]
            first = later = tokens
            errors = "replace"
        elif type(self.decoder) is decoders.WordPieceDecoder:
            tokens = [self.id_to_token(i) for i in range(size)]
            first = [None if t is None else self.decoder([t]).encode() for t in tokens]
            later = [None if t is None else self.decoder(["", t]).encode() for t in tokens]
            errors = "strict"
        else:
            return None

        def csr(forms: list[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
            lengths = np.fromiter((len(f or b"") for f in forms), dtype=np.int64, count=len(forms))
            offsets = np.zeros(len(forms) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            return np.frombuffer(b"".join(f or b"" for f in forms), dtype=np.uint8).copy(), offsets

        skip = np.zeros(size, dtype=np.uint8)
        skip[np.array([i for i in self._special_ids if i < size], dtype=np.int64)] = 1
        missing = np.fromiter((f is None for f in first), dtype=np.uint8, count=size)
        first_values, first_offsets = csr(first)
        later_values, later_offsets = (first_values, first_offsets) if later is first else csr(later)
        return first_values, first_offsets, later_values, later_offsets, skip, missing, errors


def _whole_wordpiece_kernel(normalizer, pre_tokenizer, model) -> Callable[[np.ndarray, np.ndarray, bool], Encoded] | None:
    """``Tokenizer._whole_pipeline_kernel`` for these stages, or None."""
    table_normalizer = normalizer is None or type(normalizer).__call__ is normalizers.Normalizer.__call__
    if not (table_normalizer and type(pre_tokenizer) is pre_tokenizers.BertPreTokenizer and type(model) is WordPiece):
        return None
    if normalizer is None:
        table = (np.zeros(0, np.int32), np.zeros(0, np.int64))
    else:
        table = (normalizer.table.values.numpy(), normalizer.table.offsets.numpy())
    classes = pre_tokenizers._bert_classes(torch.device("cpu")).numpy()
    trie = model._numba_tables
    tables = (*table, classes, trie["slot_keys"], trie["slot_values"], trie["hash_mask"],
              64 - trie["hash_mask"].bit_length(), trie["max_probes"], trie["token_of_node"], trie["ascii_row"],
              trie["ascii_children"], model.max_input_chars_per_word, model.unk_id, model.partial_unk)

    def encode(units: np.ndarray, lengths: np.ndarray, with_spans: bool) -> Encoded:
        ids, offsets, spans = wordpiece_texts_numba.encode_texts(units, lengths, *tables, with_spans)
        return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(offsets)),
                       torch.from_numpy(spans) if with_spans else None)

    # The encode and the post-processing of a small batch in one kernel call, as (kernel, tables): the
    # caller (Tokenizer._encode_rows_cpu) calls kernel(units, lengths, *tables, *options).
    encode.padded_cells = (wordpiece_texts_numba.encode_padded_cells, tables)
    encode.ragged_cells = (wordpiece_texts_numba.encode_ragged_cells, tables)

    def encode_part(units: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A part of a batch :meth:`Tokenizer._ids_in_parts` cuts: its ids and token offsets."""
        ids, offsets, _ = wordpiece_texts_numba.encode_texts(units, lengths, *tables, False)
        return ids, offsets

    encode.encode_part = encode_part
    return encode


def cut_at_matches(lengths: np.ndarray, starts: np.ndarray, ends: np.ndarray, ids: np.ndarray,
                   match_offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """Texts of ``lengths`` characters cut at their added tokens (text ``t``'s matches from
    ``match_offsets[t]`` to ``match_offsets[t + 1]`` of ``starts`` / ``ends`` / ``ids``, none empty,
    their starts rising; an ``rstrip`` token's end may pass the next one's start, as
    :meth:`Tokenizer._added_matches` makes them): the items in order, as int64 arrays (piece, id, text, start,
    end), an item the text between two matches (or a text's end), where not empty (``piece`` its
    number among the pieces, ``id`` -1), or a match (``piece`` -1). Numpy, no loop per match."""
    counts = np.diff(match_offsets)
    match_text = np.repeat(np.arange(lengths.size), counts)
    before = np.empty_like(starts)  # where the text before each match starts: the previous match's end
    before[1:] = ends[:-1]
    before[match_offsets[:-1][counts > 0]] = 0
    last_end = np.zeros(lengths.size, np.int64)
    last_end[counts > 0] = ends[match_offsets[1:][counts > 0] - 1]
    gap, tail = starts > before, lengths > last_end
    text = np.concatenate([match_text[gap], match_text, np.flatnonzero(tail)])
    start = np.concatenate([before[gap], starts, last_end[tail]])
    order = np.lexsort((start, text))  # (a piece starts at the previous match's end: no two items start alike)
    end = np.concatenate([starts[gap], ends, lengths[tail]])[order]
    no_id = np.full(int(gap.sum() + tail.sum()), -1, np.int64)
    item_id = np.concatenate([no_id[:int(gap.sum())], ids, no_id[int(gap.sum()):]])[order]
    is_piece = item_id < 0
    item_piece = np.where(is_piece, np.cumsum(is_piece) - 1, -1)
    return item_piece, item_id, text[order], start[order], end


def _joined_offsets(parts: list[np.ndarray]) -> np.ndarray:
    """The token offsets of consecutive chunks' texts (each chunk's offsets from 0) as one batch's.
    Numpy, not torch: torch's cat would wake its OpenMP threads, which then spin on the cores the
    next call's chunk threads need. Each later part shifted and all joined in one concatenate: 2.0 us
    for two parts of 512 texts against 3.7 us for slices of a zeroed array (best of 5 x 2,000)."""
    shifted = [parts[0]]
    base = parts[0][-1]
    for part in parts[1:]:
        shifted.append(part[1:] + base)
        base = base + part[-1]
    return np.concatenate(shifted)


def _first_of_equal_ends(ends: Ragged) -> torch.Tensor:
    """For each piece of ``ends`` (per word), the index of the first piece of its word that ends where
    it ends (itself, unless pieces before it share its end)."""
    values = ends.values
    place = torch.arange(values.numel(), device=values.device)
    same = torch.zeros_like(values, dtype=torch.bool)
    same[1:] = values[1:] == values[:-1]
    same &= positions_in_rows(ends.offsets, values.numel()) > 0
    return torch.where(same, 0, place).cummax(0).values


def _joined_part_starts(joined: str, count: int, threads: int) -> list[int] | None:
    """Where each part of ``count`` texts joined by NUL (``joined``) starts, as an index into it,
    then ``len(joined) + 1``: a part per thread of about equal characters, the caller's (the first)
    ``PART_CALLER_CHARS`` shorter, by ``_cpu_threads._bounds``' rule on the joined string (each
    text's end its separator's index: a part ends at the first separator at or past its target);
    None where one part is best. A ``str.find`` per cut, where cutting by the texts' lengths
    needed them all."""
    size = len(joined)
    parts = min(threads, count, size // _cpu_threads.MIN_CHUNK_CHARS)
    if parts < 2:
        return None
    caller = min(_cpu_threads.PART_CALLER_CHARS, size / (2 * parts))
    starts = [0]
    for part in range(1, parts):
        separator = joined.find("\x00", max(math.ceil((size + caller) * part / parts - caller), 0))
        if separator < 0:
            break
        if separator + 1 > starts[-1]:
            starts.append(separator + 1)
    if len(starts) < 2:  # one text holds nearly all the characters
        return None
    starts.append(size + 1)
    return starts


def _units_and_lengths(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-32 units back to back and their lengths, from Python: for a batch whose
    texts hold a NUL, which the joined form (``ingest_numba.JOINED_LENGTHS``) takes for a separator."""
    units = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), _INT32)
    return units, np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def _as_arrays(encoded: Encoded) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """An :class:`Encoded` on the CPU as numpy arrays: ids, offsets, spans (or None)."""
    return (encoded.ids.values.numpy(), encoded.ids.offsets.numpy(),
            None if encoded.spans is None else encoded.spans.numpy())


def _outputs(got: tuple, padded: bool, truncation: str | None, stride: int, with_types: bool, with_offsets: bool,
             overflow: bool) -> dict[str, torch.Tensor]:
    """The post-processing kernels' (ids, mask or row offsets, types, offsets, sample, error) as
    ``__call__``'s tensors, or their truncation error raised."""
    ids, second, types, offsets, sample, error = got
    if error:
        raise_truncation_error(error, truncation, stride)
    out = {"input_ids": torch.from_numpy(ids), "attention_mask" if padded else "row_offsets": torch.from_numpy(second)}
    if with_types:
        out["token_type_ids"] = torch.from_numpy(types)
    if with_offsets:
        out["offsets"] = torch.from_numpy(offsets)
    if overflow:
        out["overflow_to_sample_mapping"] = torch.from_numpy(sample)
    return out


def _cell_outputs(got: tuple, padded: bool, truncation: str | None, stride: int,
                  with_types: bool) -> dict[str, torch.Tensor]:
    """``__call__``'s tensors from a whole-pipeline kernel's ``padded_cells`` (cells [ids, mask,
    types], error) or ``ragged_cells`` (cells [ids, types], row offsets, error): the tensors are
    views of the one array the kernel returned (a numba call pays ~1 us per array it returns)."""
    if got[-1]:
        raise_truncation_error(got[-1], truncation, stride)
    cells = got[0]
    if padded:
        out = {"input_ids": torch.from_numpy(cells[0]), "attention_mask": torch.from_numpy(cells[1])}
        if with_types:
            out["token_type_ids"] = torch.from_numpy(cells[2])
        return out
    out = {"input_ids": torch.from_numpy(cells[0]), "row_offsets": torch.from_numpy(got[1])}
    if with_types:
        out["token_type_ids"] = torch.from_numpy(cells[1])
    return out


def _padded_outputs(rows: int, width: int, item_type: np.ndarray, with_types: bool,
                    with_offsets: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The [rows, width] outputs ``postprocess_numba.fill_padded`` fills, pad cells too (ids, mask,
    types, offsets [rows, width, 2] or empty), in memory that earlier outputs gave back where they
    are large (:mod:`gputok._recycled`: fresh pages cost more to fill than the batch to encode);
    and whether the kernel writes the types. Token types all zero (a single-sequence template) are
    ``np.zeros``' fresh pages, which nobody writes."""
    write_types = with_types and bool(item_type.any())
    types = (_recycled.empty((rows, width), np.int64) if write_types
             else np.zeros((rows if with_types else 0, width), np.int64))
    return (_recycled.empty((rows, width), np.int64), _recycled.empty((rows, width), np.int64), types,
            _recycled.empty((rows if with_offsets else 0, width, 2), np.int64), write_types)


def _padded_in_ranges(args: tuple, post_padded: tuple, with_types: bool, with_offsets: bool) -> tuple:
    """``postprocess_numba.padded_rows`` of a large batch: the rows planned in one kernel call,
    the outputs allocated (:func:`_padded_outputs`), then filled in row ranges, one per
    CPU thread."""
    a_offsets, b_offsets, budget, strategy, stride, overflow, item_seq, item_id, item_type = args[:9]
    min_width, multiple, left, pad_id = post_padded
    sample, a_start, a_len, b_start, b_len, lengths, width, error = postprocess_numba.plan_padded(
        a_offsets, b_offsets, budget, strategy, stride, overflow, item_seq, min_width, multiple)
    rows = sample.size
    if error:
        return _EMPTY_INDEX, _EMPTY_INDEX, _EMPTY_INDEX, _EMPTY_INDEX, sample, error
    ids, mask, types, offsets, write_types = _padded_outputs(rows, width, item_type, with_types, with_offsets)
    tail = (item_seq, item_id, item_type, sample, a_start, a_len, b_start, b_len, args[9], a_offsets, args[10],
            b_offsets, args[11], args[12], lengths, ids, mask, types, offsets, write_types, with_offsets)
    parts = min(_cpu_threads.num_threads(), rows)
    bounds = [rows * k // parts for k in range(parts + 1)]
    ranges = list(zip(bounds, bounds[1:]))

    def fill(rows_range: tuple[int, int]) -> None:
        postprocess_numba.fill_padded(*rows_range, width, left, pad_id, *tail)

    if len(ranges) > 1:
        _cpu_threads.map_chunks(fill, ranges)
    else:
        fill((0, rows))
    return ids, mask, types, offsets, sample, error


def _checked_special_tokens(special_tokens: Any, model: BPE, path: str | os.PathLike) -> dict[str, int]:
    """``from_tiktoken``'s ``special_tokens``: non-empty strings to ids that no rank of the file
    uses (tiktoken would decode such an id as the rank's bytes), within the file's id space."""
    special_tokens = special_tokens or {}
    if not isinstance(special_tokens, dict):
        raise ValueError(f"special_tokens={special_tokens!r}; pass a dict {{token: id}}, e.g. {{'<|endoftext|>': 100257}}")
    for token, i in special_tokens.items():
        if not isinstance(token, str) or not token:
            raise ValueError(f"special_tokens key {token!r} is not a non-empty string")
        if not _validate.ID[1](i):
            raise ValueError(f"special_tokens[{token!r}] = {i!r}; expected {_validate.ID[0]}")
        if i < model.vocab_size and model.token_bytes[i] is not None:
            raise ValueError(f"special_tokens[{token!r}] = {i} is the rank of {model.token_bytes[i]!r} in {path}; "
                             f"give it an id no rank uses (ranks end at {model.vocab_size - 1})")
    if special_tokens:
        token, largest = max(special_tokens.items(), key=lambda kv: kv[1])
        _validate.check_id_space(largest, model.vocab_size + len(special_tokens), str(path),
                                 _validate.key_path("special_tokens", token))
    return special_tokens


# Rust's char::is_whitespace (Unicode White_Space): what an lstrip / rstrip added token takes.
_WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# A word character next to a single_word added token keeps it from matching: huggingface's \w (Rust
# regex: letters, marks, Nd digits, connectors), the regex module's; Python's re takes "①" too.
_WORD_CHAR = regex.compile(r"\w")
# Rust's char::is_whitespace and byte-level BPE's space "Ġ": the spaces huggingface trims off offsets.
_SPACE_CHARS = _WHITE_SPACE + "\u0120"
_EMPTY_INDEX = np.zeros(0, dtype=np.int64)
_NO_SPANS = np.zeros((0, 2), dtype=np.int64)
_CPU = torch.device("cpu")
_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)
# The most characters a batch encoded in parts (Tokenizer._ids_in_parts) holds: its rows are
# post-processed on one thread, which a larger batch does in row ranges on every thread instead.
PARTS_MAX_CHARS = 1 << 18


@functools.lru_cache(maxsize=64)
def _template_arrays(template: tuple[TemplateItem, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A template as the post-processing kernel reads it: per item its sequence (-1: a special
    token), the special token's id and the item's type id."""
    seq = np.array([-1 if t.sequence is None else t.sequence for t in template], dtype=np.int64)
    ids = np.array([t.token_id or 0 for t in template], dtype=np.int64)
    return seq, ids, np.array([t.type_id for t in template], dtype=np.int64)
_A = TemplateItem(sequence=0, token=None, token_id=None, type_id=0)
_B = TemplateItem(sequence=1, token=None, token_id=None, type_id=1)
# No special tokens (add_special_tokens=False or no post-processor): the sequences alone, as the
# kernels read a template (see Tokenizer._templates), for single texts and for pairs.
_NO_TEMPLATE = ((*_template_arrays((_A,)), 0), (*_template_arrays((_A, _B)), 0))


def gputok_example_vocab() -> str:
    """Write a tiny BERT vocab.txt for examples and doctests; returns its path."""
    path = Path(tempfile.gettempdir()) / "gputok-example-vocab.txt"
    tokens = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "hello", ",", "una", "##ff", "##able", "world", "!"]
    write_atomic({path: "\n".join(tokens) + "\n"})
    return str(path)
