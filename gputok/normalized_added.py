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
of them, Python work per piece and per match (the regex), and one encode of all the normalized
sub-pieces by the pipeline without its normalizer. Memory: the normalized text and its source
index once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import torch

from .ingest import codepoints
from .kernels.scatter_numba import splice_added_tokens
from .ragged import Ragged

if TYPE_CHECKING:
    from .tokenizer import AddedToken, Encoded, Tokenizer

_NO_SPANS = np.zeros((0, 2), np.int64)


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


def pattern(tokens: dict[str, AddedToken], allowed: frozenset[str] | None) -> re.Pattern | None:
    """A regex of the normalized contents of the tokens in ``allowed`` (None: all), longest first."""
    chosen = sorted((form for form, t in tokens.items() if allowed is None or t.content in allowed), key=lambda c: -len(c))
    return re.compile("|".join(map(re.escape, chosen))) if chosen else None


def encode_pieces(tok: Tokenizer, pieces: list[str], allowed: frozenset[str] | None, device: torch.device | str,
                  with_spans: bool) -> Encoded:
    """:meth:`Tokenizer.encode_ragged` of raw ``pieces`` (no unnormalized added token in them)
    with the normalized added tokens of ``allowed`` cut out after the normalizer: ids per piece,
    spans into each raw piece."""
    from .tokenizer import Encoded

    tokens = tok._normalized_added_tokens
    found = pattern(tokens, allowed)
    forms, norm, source = normalize(tok, pieces)
    sub_pieces: list[str] = []
    item_piece, item_id, item_text, item_start, item_end = [], [], [], [], []
    sub_base = []  # where each sub-piece starts in the flat normalized text
    starts = norm.offsets.numpy()
    for row, form in enumerate(forms):
        position = 0
        matches = tok._added_matches(form, found, tokens) if found is not None else []
        for m in [*matches, None]:
            end = len(form) if m is None else m[0]
            if end > position:
                item_piece.append(len(sub_pieces)), item_id.append(-1), item_text.append(row)
                item_start.append(0), item_end.append(0)
                sub_pieces.append(form[position:end])
                sub_base.append(starts[row] + position)
            if m is not None:
                flat = starts[row]
                item_piece.append(-1), item_id.append(m[2]), item_text.append(row)
                item_start.append(source[flat + m[0]]), item_end.append(source[flat + m[1] - 1] + 1)
                position = m[1]
    plain = tok._without_normalizer.encode_ragged(sub_pieces, device="cpu", with_spans=with_spans, allowed=frozenset())
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
