"""Scatter the tokens of unique words back to every word occurrence, with character spans.

Contract (the reference is the torch tail of ``gputok.tokenizer.Tokenizer._encode_codepoints``):
given the model's tokens per unique word (``piece_ids`` / ``piece_ends`` values with
``piece_offsets``; ends are each token's end in codepoints within its word), each word
occurrence's unique word (``inverse``; empty: word ``i`` is row ``i``), the words' starts in the
normalized text and the words of each text (``text_offsets``), return every occurrence's token
ids (int64), the token offsets of each text (int64) and, with spans, each token's [start, end)
in characters of its original text (int64, [tokens, 2]): a token covers normalized codepoints
``first + piece_start .. first + end - 1``, mapped through ``source`` (normalized codepoint ->
original character; empty: the identity) and made relative to its text's start. A token that
starts past its last codepoint (byte tokens of one character) starts at that codepoint; with
``shared_start``, a token that ends where the token before it in its word ends starts where that
one starts (Unigram's byte pieces of a run of unks, which all end at the run's end: huggingface
gives each the run's span; byte-level BPE, whose last bytes of a character span that character
alone, passes False).

How: one pass over the words counts the tokens per text, one writes them; sequential, re-entrant.
"""

import numpy as np

from ._numba import kernel


@kernel
def scatter_tokens(piece_ids, piece_ends, piece_offsets, inverse, word_starts, text_offsets, source,
                   text_starts, with_spans, shared_start):
    texts = text_offsets.size - 1
    token_offsets = np.empty(texts + 1, np.int64)
    token_offsets[0] = 0
    for t in range(texts):
        total = token_offsets[t]
        for w in range(text_offsets[t], text_offsets[t + 1]):
            u = inverse[w] if inverse.size else w
            total += piece_offsets[u + 1] - piece_offsets[u]
        token_offsets[t + 1] = total
    ids = np.empty(token_offsets[texts], np.int64)
    spans = np.empty((token_offsets[texts] if with_spans else 0, 2), np.int64)
    at = 0
    for t in range(texts):
        base = text_starts[t]
        for w in range(text_offsets[t], text_offsets[t + 1]):
            u = inverse[w] if inverse.size else w
            first = word_starts[w]
            start = 0
            lo = 0  # the start of the token before, within the word
            for p in range(piece_offsets[u], piece_offsets[u + 1]):
                ids[at] = piece_ids[p]
                if with_spans:
                    last = piece_ends[p] - 1
                    if not (shared_start and p > piece_offsets[u] and piece_ends[p] == piece_ends[p - 1]):
                        lo = min(start, last)
                    a = first + lo
                    b = first + last
                    if source.size:
                        a = source[a]
                        b = source[b]
                    spans[at, 0] = a - base
                    spans[at, 1] = b + 1 - base
                    start = piece_ends[p]
                at += 1
    return ids, token_offsets, spans


@kernel
def splice_added_tokens(item_piece, item_id, item_text, item_start, item_end, ids, offsets, spans, texts, with_spans):
    """Texts cut at their added tokens, laid back together (the reference: the torch tail of
    ``Tokenizer._encode_with_added_tokens``): item ``k`` of text ``item_text[k]`` (items in text
    order) is the encoded piece ``item_piece[k]`` (its tokens ``ids[offsets[p]:offsets[p + 1]]``,
    spans shifted by the piece's start ``item_start[k]``) or, where that is -1, the added token
    ``item_id[k]`` spanning ``item_start[k]:item_end[k]``. Returns ids, token offsets per text
    and spans (int64)."""
    token_offsets = np.zeros(texts + 1, np.int64)
    for k in range(item_piece.size):
        p = item_piece[k]
        token_offsets[item_text[k] + 1] += offsets[p + 1] - offsets[p] if p >= 0 else 1
    for t in range(texts):
        token_offsets[t + 1] += token_offsets[t]
    total = token_offsets[texts]
    out = np.empty(total, np.int64)
    out_spans = np.empty((total if with_spans else 0, 2), np.int64)
    at = 0
    for k in range(item_piece.size):
        p = item_piece[k]
        if p < 0:
            out[at] = item_id[k]
            if with_spans:
                out_spans[at, 0] = item_start[k]
                out_spans[at, 1] = item_end[k]
            at += 1
            continue
        for j in range(offsets[p], offsets[p + 1]):
            out[at] = ids[j]
            if with_spans:
                out_spans[at, 0] = spans[j, 0] + item_start[k]
                out_spans[at, 1] = spans[j, 1] + item_start[k]
            at += 1
    return out, token_offsets, out_spans
