"""Extending a BPE vocabulary: continued training from the base's state (see :mod:`gputok.extending`).

Each unique domain word (the base's normalizer and pre-tokenizer) starts as the base's own pieces
of it (``BPE.encode_words``: every base merge already applied), and the BPE merge loop of
``gputok.trainers.bpe`` (its numba kernel ``train_bpe_numba``) continues from there, over the
base's tokens, until ``add`` new tokens exist or the best pair is seen fewer than
``min_frequency`` times. The new merges go after the base merges, the new tokens after the base
ids: encoding applies every base merge first, as before, so base ids keep their meaning. A merge
that rebuilds an existing token adds a merge but no token. ``method="added-tokens"`` instead adds
the new tokens' texts as added tokens (byte-level: those whose bytes are valid UTF-8).

Both selections are this loop: a merge of a pair counted ``c`` times saves ``c`` tokens, so the
most frequent pair is the one that saves most.
"""

from __future__ import annotations

import json
import time

import numpy as np

from .tokenizer import Tokenizer


def _continued_merges(base: Tokenizer, words, counts, *, add: int, min_frequency: int
                      ) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """The base token strings (tokenizer.json spelling), the new merges, the new tokens."""
    from .kernels.train_bpe_numba import train_bpe_numba

    spec = base.to_json()
    names: list[str] = [""] * base.vocab_size
    for token, i in spec["model"]["vocab"].items():
        names[i] = token
    for t in base.added_tokens:
        names[t.id] = t.content
    for i, name in enumerate(names):
        if not name:
            names[i] = f"\0unused {i}"  # an id no token holds: a string no merge can make
    prefix = spec["model"].get("continuing_subword_prefix") or ""
    ids, _ = base.model.encode_words(words)
    lengths = np.diff(ids.offsets.numpy())
    wid = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    busy = lengths[wid] >= 2  # words of one token hold no pair
    symbols = ids.values.numpy().astype(np.int32)[busy]
    wid = wid[busy]
    strings = [np.array([ord(c) for c in t], dtype=np.int32) for t in names]
    tok_off = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([s.size for s in strings], out=tok_off[1:])
    triples, _, _ = train_bpe_numba(symbols, wid, counts.numpy().astype(np.int64), len(names), len(names) + add,
                                    max(1, min_frequency), 0, tok_off, np.concatenate(strings),
                                    np.array([ord(c) for c in prefix], dtype=np.int32))
    tokens = list(names)
    known = {t: i for i, t in enumerate(tokens)}
    merges, new_tokens = [], []
    for a, b, z in triples.tolist():
        left, right = tokens[a], tokens[b]
        merged = left + (right[len(prefix):] if prefix and right.startswith(prefix) else right)
        if merged not in known:
            known[merged] = len(tokens)
            tokens.append(merged)
            new_tokens.append(merged)
        if known[merged] != z:
            raise AssertionError(f"BPE merge kernel gave id {z} to {merged!r}, expected {known[merged]}")
        merges.append((left, right))
    return names, merges, new_tokens


def extend_bpe(base: Tokenizer, corpus, *, add: int, method: str, select: str, min_frequency: int):
    """:func:`gputok.extend_with_report` for a BPE base."""
    from .extending import ExtendReport, count_domain_words

    started = time.perf_counter()
    table, seen = count_domain_words(base, corpus)
    words, counts = table.words, table.counts
    counted = time.perf_counter()
    _, merges, new_tokens = _continued_merges(base, words, counts, add=add, min_frequency=min_frequency)
    spec = base.to_json()
    first = base.vocab_size
    vocab_spec = json.loads(json.dumps(spec))
    vocab_spec["model"]["vocab"] = {**spec["model"]["vocab"], **{t: first + i for i, t in enumerate(new_tokens)}}
    vocab_spec["model"]["merges"] = list(spec["model"]["merges"]) + [list(m) for m in merges]
    extended = Tokenizer.from_str(json.dumps(vocab_spec, ensure_ascii=False), source="the extended tokenizer")
    if method == "vocab":
        tok = extended
    else:
        texts = [extended.id_to_token(first + i) for i in range(len(new_tokens))]
        spec["added_tokens"] = list(spec["added_tokens"]) + [
            {"id": first + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False} for i, t in enumerate(texts) if "\ufffd" not in t]
        tok = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False), source="the extended tokenizer")

    def tokens_of(model) -> int:
        ids, _ = model.encode_words(words)
        return int((np.diff(ids.offsets.numpy()) * counts.numpy()).sum())

    report = ExtendReport(
        method=method, select=select, base_size=first, new_size=tok.vocab_size, added=len(new_tokens),
        domain_words=seen, domain_unique_words=len(words), candidates=len(merges),
        domain_tokens_base=tokens_of(base.model), domain_tokens_extended=tokens_of(extended.model),
        seconds={"counting": counted - started, "merging": time.perf_counter() - counted},
        pieces=[{"token": extended.id_to_token(first + i), "id": first + i} for i in range(len(new_tokens))])
    return tok, report
