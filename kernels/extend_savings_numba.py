"""Vocabulary extension by savings: WordPiece token counts of words under a changing vocabulary.

``gputok.extend`` with ``select="savings"`` picks pieces greedily by how many tokens each saves
on the domain corpus, recounting as pieces join. These kernels make that recount cheap:

- ``match_lists``: every vocabulary match of every word, found once. For each character position
  of each word, the pieces of the union vocabulary (the base's pieces and every candidate) that
  start there (root 0 of the trie at a word's first character, root 1, the ``##`` pieces, after
  it), as ``(end, piece)`` entries in walk order (shortest first). This is the trie walk of
  ``wordpiece_match_numba`` that remembers every token it passes instead of the last.
- ``greedy_counts``: the WordPiece token count of words under the vocabulary ``in_vocab`` plus
  one extra piece: greedy longest match reads each position's matches from the longest down and
  takes the first in the vocabulary; a position with none makes the word one unk token (the
  reference rule), as does a word over ``max_chars``.
- ``candidate_gains``: for each candidate, the tokens it would save: the sum over the words that
  hold it of ``count * (tokens now - tokens with it)``.
- ``words_touched``: the candidates that share a word with a chosen piece (their gains change).

Reference: ``WordPiece.encode_words`` of the extended vocabulary (``tests/test_extend.py`` checks
the counts against it). Memory: two int32 per match (a few per character of the unique words).
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import probe

MAX_CODEPOINT = np.int64(0x110000)


# The trie step below is written out as in wordpiece_match_numba._encode, not shared: a shared
# inline="always" helper made that kernel 1.5-2x slower (56k unique English words: 38-46 ms ->
# 68-74 ms, interleaved runs on the shared 2-core machine, 2026-11-26).
@kernel
def _walk(codes, base, n, start, slot_keys, slot_values, mask, shift, max_probes, token_of_node, ascii_row,
          ascii_children, out_end, out_piece, written):
    """Every token the trie walk from ``start`` passes, appended at ``written``; the new count."""
    node = np.int64(0) if start == 0 else np.int64(1)
    cur = start
    while cur < n:
        cp = np.int64(codes[base + cur])
        child = np.int64(-1)
        if cp < 128:
            row = ascii_row[node]
            if row >= 0:
                child = ascii_children[row, cp]
        else:
            child = probe(node * MAX_CODEPOINT + cp, slot_keys, slot_values, mask, shift, max_probes, -1)
        if child < 0:
            break
        node = child
        cur += 1
        token = token_of_node[node]
        if token >= 0:
            if out_end.size:
                out_end[written] = cur
                out_piece[written] = token
            written += 1
    return written


@kernel
def _matches(codes, offsets, slot_keys, slot_values, mask, shift, max_probes, token_of_node, ascii_row,
             ascii_children, max_chars, position_offsets, out_end, out_piece):
    """Count (``out_end`` empty) or write the matches; ``position_offsets[i + 1]``: matches up to
    character ``i`` of the flat ``codes``."""
    written = 0
    for w in range(offsets.size - 1):
        base = offsets[w]
        n = offsets[w + 1] - base
        for start in range(n):
            if n <= max_chars:
                written = _walk(codes, base, n, start, slot_keys, slot_values, mask, shift, max_probes,
                                token_of_node, ascii_row, ascii_children, out_end, out_piece, written)
            position_offsets[base + start + 1] = written
    return written


def match_lists(codes: np.ndarray, offsets: np.ndarray, *, slot_keys: np.ndarray, slot_values: np.ndarray,
                hash_mask: int, max_probes: int, token_of_node: np.ndarray, ascii_row: np.ndarray,
                ascii_children: np.ndarray, max_chars: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position_offsets int64 [chars + 1], ends int32, pieces int32): the matches at each
    character of the words ``codes[offsets[w]:offsets[w + 1]]`` (int32), ends within the word.

    >>> from gputok.trie import Trie
    >>> t = Trie([{"un": 0, "u": 1}, {"a": 2, "ab": 3}])
    >>> tables = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in t.tensors("cpu").items()}
    >>> where, ends, pieces = match_lists(np.array([ord(c) for c in "unab"], np.int32), np.array([0, 4]),
    ...                                   max_chars=100, **tables)
    >>> where.tolist(), ends.tolist(), pieces.tolist()
    ([0, 2, 2, 4, 4], [1, 2, 3, 4], [1, 0, 2, 3])
    """
    shift = 64 - hash_mask.bit_length()
    position_offsets = np.zeros(codes.size + 1, np.int64)
    empty = np.zeros(0, np.int32)
    args = (codes, offsets, slot_keys, slot_values, hash_mask, shift, max_probes, token_of_node, ascii_row,
            ascii_children, max_chars)
    total = _matches(*args, position_offsets, empty, empty)
    ends = np.empty(total, np.int32)
    pieces = np.empty(total, np.int32)
    _matches(*args, position_offsets, ends, pieces)
    return position_offsets, ends, pieces


@kernel
def _word_tokens(w, offsets, position_offsets, ends, pieces, in_vocab, extra, max_chars):
    base = offsets[w]
    n = offsets[w + 1] - base
    if n > max_chars:
        return 1
    start = 0
    tokens = 0
    while start < n:
        took = -1
        for m in range(position_offsets[base + start + 1] - 1, position_offsets[base + start] - 1, -1):
            piece = pieces[m]
            if in_vocab[piece] or piece == extra:
                took = ends[m]
                break
        if took < 0:
            return 1  # the whole word is unk
        tokens += 1
        start = took
    return tokens


@kernel
def greedy_counts(words, offsets, position_offsets, ends, pieces, in_vocab, extra, max_chars):
    """WordPiece token counts of ``words`` (indices) with the pieces ``in_vocab`` and ``extra``
    (-1: none)."""
    out = np.empty(words.size, np.int64)
    for i in range(words.size):
        out[i] = _word_tokens(words[i], offsets, position_offsets, ends, pieces, in_vocab, extra, max_chars)
    return out


@kernel
def candidate_gains(candidates, piece_of_candidate, cand_word_offsets, cand_words, counts, current, offsets,
                    position_offsets, ends, pieces, in_vocab, max_chars):
    """Tokens each candidate saves: sum of ``counts[w] * (current[w] - tokens of w with it)``."""
    out = np.zeros(candidates.size, np.int64)
    for i in range(candidates.size):
        c = candidates[i]
        piece = piece_of_candidate[c]
        saved = 0
        for j in range(cand_word_offsets[c], cand_word_offsets[c + 1]):
            w = cand_words[j]
            saved += counts[w] * (current[w] - _word_tokens(w, offsets, position_offsets, ends, pieces, in_vocab,
                                                            piece, max_chars))
        out[i] = saved
    return out


@kernel
def words_touched(chosen, cand_word_offsets, cand_words, word_cand_offsets, word_cands, dirty):
    """Mark ``dirty`` every candidate sharing a word with candidate ``chosen``."""
    for j in range(cand_word_offsets[chosen], cand_word_offsets[chosen + 1]):
        w = cand_words[j]
        for k in range(word_cand_offsets[w], word_cand_offsets[w + 1]):
            dirty[word_cands[k]] = True
