"""SentencePiece's own Viterbi over a whole sentence, on the CPU: the exact ids of
``SentencePieceProcessor.encode`` (sentencepiece 0.2.3) however long the sentence. CPU only: there
is no Triton twin; CUDA callers copy the (few, or long) sentences here and back.

Why a sequential kernel: SentencePiece keeps one float32 best score per position *of the whole
sentence*, so its rounding, which depends on everything before a word, decides between
segmentations of the word whose scores differ by less than a float32 ulp of that running score.
The arithmetic, established against sentencepiece 0.2.3 (its encoder source, and ties probed on
``"the " * k + "defile"`` with the tests' 8k model, ``tests/test_unigram_long_lines.py``):

- a candidate is ``score + best[start]`` in float32 (rounded before the comparison); the unk
  candidate (no single-character piece starts there) scores ``unk_score``; a user-defined piece
  ``float32(0.1 * (bytes - 1))`` (sentencepiece 0.2.3's ``GetUserDefinedScore``);
- starts are visited in order; a node takes the first candidate that reaches it and later ones only
  if strictly greater;
- re-centring: before a start whose best score is beyond +-``reset_threshold`` (1e5), that score is
  subtracted (in float32) from the start and from every reached node up to the furthest one, so
  the running score stays within about 1e5 and ties are decided at that precision. (Without it,
  float32 sums drift from SentencePiece's choices after ~25k words of English.)

Memory: 12 bytes per character of the longest row (best score, start, piece), plus the outputs
(16 bytes per token). Time: one trie walk per position (the longest match's length).
"""

import numpy as np
from ._numba import kernel
from .unigram_trie_numba import TOKEN, trie_step, write_best_path


@kernel
def _sentence_row(values, lo, n, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score, unk32, unk_id,
                  threshold, best, start, piece, codes):
    """SentencePiece's Viterbi over ``values[lo:lo + n]``: fills ``start[e]`` and ``piece[e]``
    (the best path's token ending after ``e`` characters) for ``e = 1 .. n``. ``codes``: scratch
    for the characters' alphabet codes (looked up once: each is read by every walk over it)."""
    for i in range(n):
        codes[i] = code_of[values[lo + i]]
    start[:n + 1] = -1
    best[0] = np.float32(0.0)
    frontier = 0  # the furthest node a candidate has reached
    for s in range(n):
        base = best[s]
        if base < -threshold or base > threshold:
            # Re-centre: every node from here to the frontier loses the score at s (float32).
            for i in range(s, frontier + 1):
                if i == s or start[i] >= 0:
                    best[i] = best[i] - base
            base = np.float32(0.0)
        single = False
        node = 0  # the root
        end = s
        while end < n:
            node = trie_step(node, codes[end], trie, dense, rare_offsets, rare_codes, rare_rows)
            if node < 0:
                break
            end += 1  # the piece of ``node`` covers s .. end
            token = trie[node, TOKEN]
            if token >= 0:
                frontier = max(frontier, end)
                cand = piece_score[token] + base  # float32 + float32: float32, as in C++
                if start[end] < 0 or cand > best[end]:
                    best[end] = cand
                    start[end] = s
                    piece[end] = token
                if end == s + 1:
                    single = True
        if not single:
            cand = unk32 + base
            if start[s + 1] < 0 or cand > best[s + 1]:
                best[s + 1] = cand
                start[s + 1] = s
                piece[s + 1] = unk_id
            frontier = max(frontier, s + 1)


@kernel
def unigram_sentence_viterbi(values, offsets, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score,
                             unk_score, unk_id, reset_threshold):
    """Best segmentation of every row (codepoints ``values[offsets[r]:offsets[r + 1]]``).

    The trie is :class:`gputok.models.unigram.PieceTrie`'s ``walk_arrays``: ``code_of`` (codepoint
    to alphabet code), the double array's rows ``trie`` for the codes below ``dense`` and the rare
    edges (``rare_offsets``, ``rare_codes``, ``rare_rows``) for the others (``unigram_trie_numba``).

    ``piece_score``: float32 per piece id (SentencePiece's candidate score), ``unk_score`` the unk
    candidate's, ``reset_threshold`` SentencePiece's re-centering bound (1e5). Returns
    ``(ids, ends, counts)``: int64 token ids and ends (characters into their row), row after row,
    and the number of tokens per row.
    """
    rows = offsets.size - 1
    longest = 0
    for r in range(rows):
        longest = max(longest, offsets[r + 1] - offsets[r])
    best = np.empty(longest + 1, np.float32)
    start = np.empty(longest + 1, np.int32)
    piece = np.empty(longest + 1, np.int32)
    codes = np.empty(longest + 1, np.int32)
    ids = np.empty(offsets[rows] - offsets[0], np.int64)
    ends = np.empty_like(ids)
    counts = np.zeros(rows, np.int64)
    unk32 = np.float32(unk_score)
    threshold = np.float32(reset_threshold)
    written = 0
    for r in range(rows):
        lo = offsets[r]
        n = offsets[r + 1] - lo
        _sentence_row(values, lo, n, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score, unk32,
                      unk_id, threshold, best, start, piece, codes)
        count = write_best_path(start, piece, n, ids, ends, written)
        counts[r] = count
        written += count
    return ids[:written].copy(), ends[:written].copy(), counts


@kernel
def sentence_sizes(word_starts, word_ends, sentence_words):
    """The longest sentence's characters and all sentences' (sentence ``k``: words
    ``sentence_words[k] .. sentence_words[k + 1]``, from its first word's start to its last one's end)."""
    longest = 0
    total = 0
    for k in range(sentence_words.size - 1):
        if sentence_words[k + 1] > sentence_words[k]:
            size = word_ends[sentence_words[k + 1] - 1] - word_starts[sentence_words[k]]
            longest = max(longest, size)
            total += size
    return longest, total


@kernel
def unigram_sentences_encode(values, word_starts, word_ends, sentence_words, code_of, trie, dense, rare_offsets,
                             rare_codes, rare_rows, piece_score, unk_score, unk_id, reset_threshold):
    """SentencePiece's segmentation of each sentence, its tokens cut at the sentence's words: the
    CPU path of ``Unigram.encode_in_context`` in SentencePiece mode.

    Words ``sentence_words[k] .. sentence_words[k + 1]`` (``values[word_starts[w]:word_ends[w]]``,
    in order, each starting where the last ended) make sentence ``k``, which runs from its first
    word's start to its last word's end; no token crosses a word end (no piece holds '▁' after its
    first character, or each word is a sentence). Returns ``(ids, ends, offsets)``: int64 token
    ids and ends (characters into their word), one row per word, and the rows' int64 offsets.
    Unk tokens are left as they are (one per character; see ``unigram_finish_numba``). Equals
    :func:`unigram_sentence_viterbi` of each sentence followed by :func:`cut_at_words`.
    """
    sentences = sentence_words.size - 1
    num_words = word_starts.size
    longest, total = sentence_sizes(word_starts, word_ends, sentence_words)
    best = np.empty(longest + 1, np.float32)
    start = np.empty(longest + 1, np.int32)
    piece = np.empty(longest + 1, np.int32)
    codes = np.empty(longest + 1, np.int32)
    path = np.empty(longest + 1, np.int32)  # the best path's token ends, last first
    ids = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    offsets = np.zeros(num_words + 1, np.int64)
    unk32 = np.float32(unk_score)
    threshold = np.float32(reset_threshold)
    written = 0
    for k in range(sentences):
        first = sentence_words[k]
        last = sentence_words[k + 1]
        if last == first:
            continue
        lo = word_starts[first]
        n = word_ends[last - 1] - lo
        _sentence_row(values, lo, n, code_of, trie, dense, rare_offsets, rare_codes, rare_rows, piece_score, unk32,
                      unk_id, threshold, best, start, piece, codes)
        written = cut_best_path(start, piece, n, lo, first, word_starts, word_ends, path, ids, ends, offsets[1:],
                                written)
    for w in range(num_words):
        offsets[w + 1] += offsets[w]
    return ids[:written], ends[:written], offsets


@kernel
def cut_best_path(start, piece, n, lo, first, word_starts, word_ends, path, ids, ends, counts, written):
    """The best path of a sentence ``_sentence_row`` left in ``start`` / ``piece`` (``n`` characters
    from ``lo``, its words from ``first``) written as tokens ``written ..`` of ``ids`` / ``ends``
    (ends into their word), each counted in ``counts`` of its word; returns the new ``written``.
    ``path``: scratch of ``n + 1``."""
    count = 0
    at = n
    while at > 0:
        path[count] = at
        count += 1
        at = start[at]
    w = first
    for i in range(count - 1, -1, -1):  # the tokens in order, each cut into its word
        at = path[i]
        end = at + lo  # in values
        while word_ends[w] < end:
            w += 1
        counts[w] += 1
        ids[written] = piece[at]
        ends[written] = end - word_starts[w]
        written += 1
    return written


@kernel
def cut_at_words(token_ends, word_starts, word_ends):
    """Tokens per word and each token's end within its word, for tokens and words that both run
    in order through the same text (``token_ends``, ``word_starts``, ``word_ends``: positions in
    it; no token crosses a word end). One merge of the two lists."""
    counts = np.zeros(word_starts.size, np.int64)
    within = np.empty_like(token_ends)
    w = 0
    for t in range(token_ends.size):
        while word_ends[w] < token_ends[t]:
            w += 1
        counts[w] += 1
        within[t] = token_ends[t] - word_starts[w]
    return counts, within
