"""Added tokens with ``normalized: true`` under a normalizer, matched as huggingface matches them.

huggingface ``tokenizers`` (``AddedVocabulary::extract_and_normalize``) finds the added tokens of a
text in two passes: those with ``normalized: false`` in the raw text (gputok:
``Tokenizer._encode_with_added_tokens``), then, in each piece of text between them *after the
normalizer ran on that piece*, those with ``normalized: true``, whose own content is normalized
the same way first (a ``Lowercase`` normalizer makes the token ``"Hello"`` match ``"HELLO"``).
``single_word``, ``lstrip`` and ``rstrip`` then look at the normalized text. What is left between
the matches is pre-tokenized and encoded as it is (already normalized); every offset is mapped back
to the raw text through the normalizer's source index, as huggingface maps it through its
alignments.

:func:`encode_pieces` does the second pass for a batch of raw pieces: one normalizer call over all
of them, one search of all of them (``gputok.literals.match_spans``), Python work per piece and per
match, and one encode of all the normalized sub-pieces by the pipeline without its normalizer.
Memory: the normalized text and its source index once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import torch

from .ingest import codepoints
from .kernels.scatter_numba import splice_added_tokens
from .literals import LiteralPattern, literal_pattern
from .ragged import Ragged

if TYPE_CHECKING:
    from .tokenizer import AddedToken, Encoded, Tokenizer

_NO_SPANS = np.zeros((0, 2), np.int64)
_NO_INDEX = np.zeros(0, np.int64)


def normalized_contents(tok: Tokenizer) -> dict[str, AddedToken]:
    """``{normalized content: token}`` of the tokens matched after the normalizer (empty when there
    is no normalizer: then every token is matched in the raw text). The first token wins where two
    normalize alike, as huggingface's trie keeps the first."""
    if tok.normalizer is None:
        return {}
    chosen = [t for t in tok.added_tokens if t.normalized]
    forms = normalize(tok, [t.content for t in chosen])[0] if chosen else []
    by_form: dict[str, AddedToken] = {}
    for form, token in zip(forms, chosen):
        if form:
            by_form.setdefault(form, token)
    return by_form


def normalize(tok: Tokenizer, texts: list[str]) -> tuple[list[str], Ragged, np.ndarray]:
    """Each text after ``tok``'s normalizer, its codepoints, and the source index of each
    normalized codepoint in its own text."""
    raw = codepoints(texts, "cpu", join_surrogate_pairs=tok.join_surrogate_pairs)
    norm, source = tok.normalizer(raw)
    values, offsets = norm.values.numpy(), norm.offsets.numpy()
    joined = values.astype(np.uint32).tobytes().decode("utf-32-le", errors="surrogatepass")
    forms = [joined[offsets[k]:offsets[k + 1]] for k in range(len(texts))]
    row = np.repeat(np.arange(len(texts)), np.diff(offsets))
    return forms, norm, source.numpy().astype(np.int64) - raw.offsets.numpy()[row]


def pattern(tokens: dict[str, AddedToken], allowed: frozenset[str] | None) -> re.Pattern | LiteralPattern | None:
    """What finds the normalized contents of the tokens in ``allowed`` (None: all), longest first
    (:func:`gputok.literals.literal_pattern`; with the tokens' ids where none has options)."""
    chosen = {form: t for form, t in tokens.items() if allowed is None or t.content in allowed}
    plain = not any(t.single_word or t.lstrip or t.rstrip for t in chosen.values())
    return literal_pattern(chosen, {form: t.id for form, t in chosen.items()} if plain else None)


def encode_pieces(tok: Tokenizer, pieces: list[str], at_start: np.ndarray, allowed: frozenset[str] | None,
                  device: torch.device | str, with_spans: bool) -> Encoded:
    """:meth:`Tokenizer.encode_ragged` of raw ``pieces`` (no unnormalized added token in them)
    with the normalized added tokens of ``allowed`` cut out after the normalizer: ids per piece,
    spans into each raw piece. ``at_start``: whether each piece starts its text (a Metaspace with
    ``prepend_scheme`` "first" prepends only to the sub-piece that starts a piece that does)."""
    from .tokenizer import Encoded, cut_at_matches

    found = tok._normalized_pattern(allowed)
    forms, norm, source = normalize(tok, pieces)
    starts = norm.offsets.numpy()
    matched = (tok._matched_added_tokens(forms, found, tok._normalized_added_tokens) if found is not None
               else (_NO_INDEX, _NO_INDEX, _NO_INDEX, np.zeros(len(forms) + 1, np.int64)))
    item_piece, item_id, item_text, item_start, item_end = cut_at_matches(np.diff(starts), *matched)
    is_piece = item_piece >= 0
    sub_base = starts[item_text[is_piece]] + item_start[is_piece]  # where each sub-piece starts in the flat text
    sub_at_start = at_start[item_text[is_piece]] & (item_start[is_piece] == 0)
    if tok._first_reads_source:  # not where the normalizer removed the piece's first characters
        sub_at_start &= source[np.minimum(sub_base, max(source.size - 1, 0))] == 0
    sub_pieces = [forms[row][start:end] for row, start, end in
                  zip(item_text[is_piece].tolist(), item_start[is_piece].tolist(), item_end[is_piece].tolist())]
    # a token's span: its first and last normalized characters' sources in the raw piece; a sub-piece's: none here
    token = ~is_piece
    flat = starts[item_text[token]]
    token_start, token_end = source[flat + item_start[token]], source[flat + item_end[token] - 1] + 1
    item_start[token], item_end[token] = token_start, token_end
    item_start[is_piece] = item_end[is_piece] = 0
    plain = tok._encode_pieces(tok._without_normalizer, tok._not_first and tok._not_first[1], sub_pieces, sub_at_start,
                               "cpu", with_spans)
    spans = _NO_SPANS
    if with_spans and len(sub_pieces):
        # spans in the normalized sub-piece, mapped back into the raw piece through the source index
        local = plain.spans.numpy()
        base = np.repeat(np.asarray(sub_base, np.int64), np.diff(plain.ids.offsets.numpy()))
        spans = np.stack([source[base + local[:, 0]], source[base + local[:, 1] - 1] + 1], 1) if local.size \
            else _NO_SPANS
    items = [np.asarray(v, dtype=np.int64) for v in (item_piece, item_id, item_text, item_start, item_end)]
    ids, token_offsets, out_spans = splice_added_tokens(*items, plain.ids.values.numpy(), plain.ids.offsets.numpy(),
                                                        spans, len(pieces), with_spans)
    return Encoded(Ragged(torch.from_numpy(ids), torch.from_numpy(token_offsets)).to(device),
                   torch.from_numpy(out_spans).to(device) if with_spans else None)
