"""A local model folder, read as huggingface ``transformers``' ``AutoTokenizer.from_pretrained`` reads it offline.

:func:`from_pretrained` (``gputok.Tokenizer.from_pretrained``) takes a folder saved by
``save_pretrained`` or downloaded from the hub (``huggingface-cli download NAME --local-dir DIR``),
or one tokenizer file. It never touches the network: a path that is not there is an error that
says so, with the files it looked for.

The tokenizer comes from the first of these files in the folder:

1. ``tokenizer.json`` (the fast tokenizer: everything in it, :meth:`Tokenizer.from_file`);
2. ``tokenizer.model``, or another single ``*.model`` (SentencePiece, :meth:`Tokenizer.from_sentencepiece`);
3. ``vocab.txt`` (BERT WordPiece, :meth:`Tokenizer.from_vocab`, with ``do_lower_case``,
   ``strip_accents``, ``tokenize_chinese_chars`` and the special tokens of ``tokenizer_config.json``);
4. ``vocab.json`` + ``merges.txt`` (GPT-2 byte-level BPE, :meth:`Tokenizer.from_gpt2_files`).

Then, as ``transformers`` does on top: the added tokens of ``tokenizer_config.json``
(``added_tokens_decoder``) and ``added_tokens.json`` that the tokenizer lacks, the special tokens of
``special_tokens_map.json`` / ``tokenizer_config.json`` (``bos_token``... and
``additional_special_tokens`` / ``extra_special_tokens``) as special added tokens (a token not in the vocabulary gets the
next free id, as ``transformers`` adds it), ``add_bos_token`` / ``add_eos_token`` where the config
sets them (Llama's template: ``<s> A``, ``<s> A </s>``...), and ``model_max_length`` as the
tokenizer's default ``max_length`` (``tok(texts, truncation=True)``), unless it is the
"no limit" placeholder ``transformers`` writes (``int(1e30)``).

Left out: the per-class conversions ``transformers`` applies to a folder without a
``tokenizer.json`` beyond those above (T5's appended ``</s>``, XLNet's, ...), ``padding_side``
and chat templates (a ``chat_template`` is kept in ``tok.chat_template`` as text, unused). As in
transformers, a tokenizer.json's ``truncation`` and ``padding`` sections do not apply to ``encode``
(only their directions to ``tok(...)``; ``Tokenizer.from_file`` applies them, as huggingface does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# transformers writes this as model_max_length when the model has no limit (VERY_LARGE_INTEGER).
_NO_LIMIT = int(1e29)
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
LOOKED_FOR = ("tokenizer.json", "tokenizer.model (or one *.model)", "vocab.txt", "vocab.json + merges.txt")


def from_pretrained(cls, path: str | os.PathLike):
    """``cls`` (:class:`gputok.Tokenizer`) from a local model folder or tokenizer file (module docstring).

    >>> import tempfile, gputok
    >>> from gputok import assets
    >>> folder = tempfile.mkdtemp()
    >>> _ = Path(folder, "tokenizer.json").write_bytes(assets.fetch("bert-tokenizer-json").read_bytes())
    >>> _ = Path(folder, "tokenizer_config.json").write_text('{"model_max_length": 8}')
    >>> tok = gputok.Tokenizer.from_pretrained(folder)
    >>> tok.model_max_length, tok(["a b c d e f g h i j"], truncation=True)["input_ids"].tolist()
    (8, [[101, 1037, 1038, 1039, 1040, 1041, 1042, 102]])
    """
    tok = _from_pretrained(cls, Path(path))
    tok._file_sections_apply = False  # transformers' encode does not pad or cut as tokenizer.json says
    return tok


def _from_pretrained(cls, path: Path):
    if not path.exists():
        hint = (" It looks like a hub model name: gputok reads local folders only (it never downloads); "
                f"download it first, e.g. `huggingface-cli download {path} --local-dir DIR`, and pass DIR."
                if len(path.parts) == 2 and not str(path).startswith((".", "/", "~")) else "")
        raise FileNotFoundError(f"{path}: no such file or folder.{hint}")
    if path.is_file():
        return _from_file(cls, path)
    config = _read_json(path / "tokenizer_config.json")
    specials = {**_read_json(path / "special_tokens_map.json"), **{k: v for k, v in config.items() if k in _SPECIAL_KEYS}}
    tok = _base(cls, path, config, specials)
    tok = _with_added_tokens(cls, tok, config, specials, _read_json(path / "added_tokens.json"))
    limit = config.get("model_max_length")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit < _NO_LIMIT:
        tok.model_max_length = int(limit)
    if isinstance(config.get("chat_template"), str):
        tok.chat_template = config["chat_template"]
    return tok


def _from_file(cls, path: Path):
    name = path.name
    if name.endswith(".json") and name not in ("vocab.json", "tokenizer_config.json", "special_tokens_map.json"):
        return cls.from_file(path)
    if name.endswith(".model"):
        return cls.from_sentencepiece(path)
    if name.endswith(".tiktoken"):
        return cls.from_tiktoken(path)
    if name.endswith(".txt") and name != "merges.txt":
        return cls.from_vocab(path)
    raise ValueError(f"{path}: from_pretrained reads a model folder, or one of tokenizer.json, *.model, *.tiktoken, "
                     f"vocab.txt; {name!r} is none of them (pass the folder that holds it)")


def _base(cls, folder: Path, config: dict[str, Any], specials: dict[str, Any]):
    """The tokenizer of the first file of :data:`LOOKED_FOR` in ``folder``."""
    if (folder / "tokenizer.json").is_file():
        return cls.from_file(folder / "tokenizer.json")
    models = sorted(folder.glob("*.model"))
    sentencepiece = folder / "tokenizer.model" if (folder / "tokenizer.model").is_file() else (
        models[0] if len(models) == 1 else None)
    if sentencepiece is not None:
        return cls.from_sentencepiece(sentencepiece)
    if (folder / "vocab.txt").is_file():
        tokens = {key: _content(specials[key]) for key in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
                  if _content(specials.get(key))}
        return cls.from_vocab(folder / "vocab.txt", lowercase=bool(config.get("do_lower_case", True)),
                              strip_accents=config.get("strip_accents"),
                              handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)), **tokens)
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return cls.from_gpt2_files(folder / "vocab.json", folder / "merges.txt")
    present = sorted(p.name for p in folder.iterdir())[:20]
    raise FileNotFoundError(f"{folder}: no tokenizer files; looked for {' / '.join(LOOKED_FOR)} (in that order) and "
                            f"found {present}. Save one with transformers' `tokenizer.save_pretrained(folder)` or "
                            "download the model's tokenizer files into the folder")


def _with_added_tokens(cls, tok, config: dict[str, Any], specials: dict[str, Any], added_json: dict[str, Any]):
    """``tok`` with the added and special tokens of the config files it lacks, and the config's
    BOS/EOS template; ``tok`` itself when there is nothing to add."""
    from .tokenizer import AddedToken

    known = {t.content for t in tok.added_tokens}
    new: list[AddedToken] = []
    next_id = max([tok.vocab_size] + [t.id + 1 for t in tok.added_tokens])

    def add(content: str, token_id: int | None, *, special: bool, flags: dict[str, Any]) -> None:
        nonlocal next_id
        if not content or content in known:
            return
        if token_id is None:
            token_id = tok.token_to_id(content)
        if token_id is None:
            token_id = next_id
        next_id = max(next_id, int(token_id) + 1)
        known.add(content)
        new.append(AddedToken(int(token_id), content, special=special,
                              **{k: bool(flags[k]) for k in ("single_word", "lstrip", "rstrip", "normalized") if k in flags}))

    for token_id, spec in sorted((config.get("added_tokens_decoder") or {}).items(), key=lambda kv: int(kv[0])):
        add(spec.get("content", ""), int(token_id), special=bool(spec.get("special", True)), flags=spec)
    for content, token_id in sorted(added_json.items(), key=lambda kv: kv[1]):
        add(content, int(token_id), special=False, flags={})
    for key in _SPECIAL_KEYS:
        add(_content(specials.get(key)), None, special=True, flags=specials.get(key) if isinstance(specials.get(key), dict) else {})
    for key in ("additional_special_tokens", "extra_special_tokens"):  # the name before / since transformers 5
        extras = specials.get(key) or config.get(key) or []
        for extra in extras.values() if isinstance(extras, dict) else extras:
            add(_content(extra), None, special=True, flags=extra if isinstance(extra, dict) else {})
    post_processor = tok.post_processor
    if "add_bos_token" in config or "add_eos_token" in config:
        post_processor = _bos_eos_template(tok, new, bool(config.get("add_bos_token")), bool(config.get("add_eos_token")),
                                           _content(specials.get("bos_token")), _content(specials.get("eos_token")))
    if not new and post_processor is tok.post_processor:
        return tok
    rebuilt = cls(tok.model, normalizer=tok.normalizer, pre_tokenizer=tok.pre_tokenizer, post_processor=post_processor,
                  decoder=tok.decoder, added_tokens=sorted(tok.added_tokens + new, key=lambda t: t.id), extra=tok._extra)
    return rebuilt


def _bos_eos_template(tok, new, add_bos: bool, add_eos: bool, bos: str, eos: str):
    """transformers' Llama template: ``bos? $A eos?`` and ``bos? $A eos? bos? $B eos?`` (B's type 1)."""
    from .processors import TemplateProcessing

    ids = {t.content: t.id for t in tok.added_tokens + new}

    def special(content: str, type_id: int) -> list[dict]:
        return [{"SpecialToken": {"id": content, "type_id": type_id}}]

    def sequence(name: str, type_id: int) -> list[dict]:
        return ((special(bos, type_id) if add_bos else []) + [{"Sequence": {"id": name, "type_id": type_id}}]
                + (special(eos, type_id) if add_eos else []))

    for flag, content in ((add_bos, bos), (add_eos, eos)):
        if flag and tok.token_to_id(content) is None and content not in ids:
            raise ValueError(f"tokenizer_config.json asks for add_bos_token/add_eos_token but {content!r} is not a token")
    used = {c for flag, c in ((add_bos, bos), (add_eos, eos)) if flag}
    spec = {"type": "TemplateProcessing", "single": sequence("A", 0), "pair": sequence("A", 0) + sequence("B", 1),
            "special_tokens": {c: {"id": c, "ids": [ids.get(c, tok.token_to_id(c))], "tokens": [c]} for c in used}}
    return TemplateProcessing.from_json(spec) if used else None


def _content(token: Any) -> str:
    """A special token as the config files write it: a string or ``{"content": ...}``."""
    if isinstance(token, dict):
        return str(token.get("content", ""))
    return token if isinstance(token, str) else ""


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
