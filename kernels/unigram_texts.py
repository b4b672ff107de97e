"""SentencePiece's Unigram segmentation of whole texts on CUDA, one text per lane: Viterbi, then unk handling.

Numba twins: ``unigram_sentence.unigram_sentence_viterbi`` (``_sentence_row``: SentencePiece's
float32 Viterbi over the whole text, with its re-centring of the running score) followed by
``unigram_finish_numba.unigram_finish_numba`` over the text's words (an unk token followed by an
unk of the same word is dropped; with byte fallback every unk token becomes the ``<0xNN>`` pieces
of its character's UTF-8 bytes). The arithmetic is the twin's, step for step: a candidate is
``piece_score + best[start]`` in float32, a node takes the first candidate and later ones only if
strictly greater, starts are visited in order, the unk candidate (``unk_score``) where no
single-character piece starts; so the ids are the CPU path's (``Tokenizer.from_sentencepiece``'s
Unigram pipeline runs its Viterbi over each whole text). The piece trie is the twin's
(``PieceTrie.walk_arrays``: ``code_of``, the double array's rows and the rare edges,
``unigram_trie_numba``).

The lanes of a block walk their texts' start positions together (position ``s`` of every text at
once); at each, a lane walks the trie from ``s`` (the block steps as long as its longest match).
A word starts at a text's first character and, with ``split``, at each ``mark`` ('▁'), as
``word_split_numba.split_at_marks`` cuts them.

Layout (no host sync): text ``t`` is ``values[expand * offsets[t] + 2 * t:]`` (``lengths[t]``
characters: ``whitespace_rules.whitespace_rules_triton``'s output), and the per-position scratch
(best score, start, piece: the twin's ``best`` / ``start`` / ``piece``) sits at the same places.
Its tokens are written from ``k * (expand * offsets[t] + 2 * t)`` (``k``: 4 with byte fallback,
at most four byte pieces per character, else 1), their number to ``counts[t]`` and that first
place to ``piece_starts[t]``: one word slot per text for ``postprocess.write_rows_triton``.
Memory: 12 bytes of scratch and ``8 * k`` bytes of tokens per place of ``values``.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _trie_step(node, code, walking, trie_ptr, dense, rare_offsets_ptr, rare_codes_ptr, rare_rows_ptr):
    """Each walking lane's child of ``node`` along ``code`` (-1: none): from the root or along a
    code below ``dense``, the double array's row ``base + code`` if its check is ``node``, else
    binary search in the node's sorted rare edges (``unigram_trie_numba.rare_child``)."""
    arrayed = walking & ((code < dense) | (node == 0))
    child = tl.load(trie_ptr + 4 * node + 1, mask=arrayed, other=0).to(tl.int64) + code
    check = tl.load(trie_ptr + 4 * child, mask=arrayed, other=-1).to(tl.int64)
    child = tl.where(check == node, child, -1)
    listed = walking & ~arrayed
    lo = tl.load(rare_offsets_ptr + node, mask=listed, other=0)
    end = tl.load(rare_offsets_ptr + node + 1, mask=listed, other=0)
    hi = end
    searching = listed & (lo < hi)
    while tl.max(searching.to(tl.int32), 0) > 0:
        mid = (lo + hi) >> 1
        below = searching & (tl.load(rare_codes_ptr + mid, mask=searching, other=0) < code)
        lo = tl.where(below, mid + 1, lo)
        hi = tl.where(searching & ~below, mid, hi)
        searching = searching & (lo < hi)
    hit = listed & (lo < end)
    hit = hit & (tl.load(rare_codes_ptr + lo, mask=hit, other=-1) == code)
    child = tl.where(listed, tl.where(hit, tl.load(rare_rows_ptr + lo, mask=hit, other=-1), -1), child)
    return tl.where(walking, child, -1)


@triton.jit
def _word_start(values_ptr, lo, at, ok, mark):
    """Whether a word starts at character ``at`` of the text from ``lo`` (its first, or a ``mark``)."""
    later = ok & (at > 0)
    c = tl.load(values_ptr + lo + at, mask=later, other=0)
    return (at == 0) | (later & (c == mark))  # mark -1: no character


@triton.jit(do_not_specialize=["texts", "dense", "unk_id", "unk_score", "threshold", "mark", "byte_fallback",
                               "per_place"])
def _unigram_texts_kernel(values_ptr, offsets_ptr, lengths_ptr, code_of_ptr, trie_ptr, rare_offsets_ptr,
                          rare_codes_ptr, rare_rows_ptr, piece_score_ptr, byte_ids_ptr, best_ptr, start_ptr, piece_ptr,
                          tokens_ptr, piece_starts_ptr, counts_ptr, texts, dense, unk_id, unk_score, threshold, mark,
                          byte_fallback, per_place, EXPAND: tl.constexpr, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    lo = EXPAND * tl.load(offsets_ptr + text, mask=inside, other=0) + 2 * text
    n = tl.load(lengths_ptr + text, mask=inside, other=0)
    longest = tl.max(n, 0)
    unk32 = tl.zeros([BLOCK], dtype=tl.float32) + unk_score
    limit = tl.zeros([BLOCK], dtype=tl.float32) + threshold
    for e in range(0, longest + 1):
        tl.store(start_ptr + lo + e, tl.full([BLOCK], -1, dtype=tl.int32), mask=inside & (e <= n))
    tl.store(best_ptr + lo, tl.zeros([BLOCK], dtype=tl.float32), mask=inside)
    frontier = tl.zeros([BLOCK], dtype=tl.int64)  # the furthest node a candidate has reached

    for s in range(0, longest):
        # The last step's stores (its unk candidate at s) before this step's loads: with more
        # threads than lanes, a lane's copy in another warp loads best[s] too, and a stale value
        # there would feed the re-centring's reach (a reduction over every warp).
        tl.debug_barrier()
        active = inside & (s < n)
        base = tl.load(best_ptr + lo + s, mask=active, other=0.0)
        # Re-centre (rare): every node from s to the frontier loses the score at s, in float32.
        recentre = active & ((base < -limit) | (base > limit))
        reach = tl.max(tl.where(recentre, frontier - s + 1, 0), 0)
        for k in range(0, reach):
            i = s + k
            moved = recentre & (i <= frontier)
            moved = moved & ((frontier * 0 + k == 0) | (tl.load(start_ptr + lo + i, mask=moved, other=-1) >= 0))
            old = tl.load(best_ptr + lo + i, mask=moved, other=0.0)
            tl.store(best_ptr + lo + i, old - base, mask=moved)
        base = tl.where(recentre, 0.0, base)

        c = tl.load(values_ptr + lo + s, mask=active, other=0)
        code = tl.load(code_of_ptr + c, mask=active, other=0).to(tl.int64)
        node = _trie_step(tl.zeros([BLOCK], dtype=tl.int64), code, active, trie_ptr, dense, rare_offsets_ptr,
                          rare_codes_ptr, rare_rows_ptr)  # from the root, row 0
        end = tl.zeros([BLOCK], dtype=tl.int64) + s
        single = tl.zeros([BLOCK], dtype=tl.int1)
        walking = active & (node >= 0)
        while tl.max(walking.to(tl.int32), 0) > 0:
            end = tl.where(walking, end + 1, end)  # the piece of ``node`` covers s .. end
            token = tl.load(trie_ptr + 4 * node + 2, mask=walking, other=-1)
            has = walking & (token >= 0)
            frontier = tl.where(has, tl.maximum(frontier, end), frontier)
            cand = tl.load(piece_score_ptr + token, mask=has, other=0.0) + base  # float32, as in C++
            old_start = tl.load(start_ptr + lo + end, mask=has, other=-1)
            old_best = tl.load(best_ptr + lo + end, mask=has, other=0.0)
            take = has & ((old_start < 0) | (cand > old_best))
            tl.store(best_ptr + lo + end, cand, mask=take)
            tl.store(start_ptr + lo + end, tl.zeros([BLOCK], dtype=tl.int32) + s, mask=take)
            tl.store(piece_ptr + lo + end, token.to(tl.int32), mask=take)
            single = single | (has & (end == s + 1))
            walking = walking & (end < n)
            c = tl.load(values_ptr + lo + end, mask=walking, other=0)
            code = tl.load(code_of_ptr + c, mask=walking, other=0).to(tl.int64)
            node = _trie_step(node, code, walking, trie_ptr, dense, rare_offsets_ptr, rare_codes_ptr, rare_rows_ptr)
            walking = walking & (node >= 0)
        unk = active & ~single
        cand = unk32 + base
        old_start = tl.load(start_ptr + lo + s + 1, mask=unk, other=-1)
        old_best = tl.load(best_ptr + lo + s + 1, mask=unk, other=0.0)
        take = unk & ((old_start < 0) | (cand > old_best))
        tl.store(best_ptr + lo + s + 1, cand, mask=take)
        tl.store(start_ptr + lo + s + 1, tl.zeros([BLOCK], dtype=tl.int32) + s, mask=take)
        tl.store(piece_ptr + lo + s + 1, tl.zeros([BLOCK], dtype=tl.int32) + unk_id, mask=take)
        frontier = tl.where(unk, tl.maximum(frontier, s + 1), frontier)

    # The best path, last token first: count the tokens unk handling leaves, then write them.
    fallback = (tl.zeros([BLOCK], dtype=tl.int32) + byte_fallback) != 0
    count = tl.zeros([BLOCK], dtype=tl.int64)
    at = tl.where(inside, n, 0)
    next_unk = tl.zeros([BLOCK], dtype=tl.int1)  # the token after is an unk of the same word
    while tl.max(at, 0) > 0:
        walking = at > 0
        token = tl.load(piece_ptr + lo + at, mask=walking, other=0)
        first = tl.load(start_ptr + lo + at, mask=walking, other=0).to(tl.int64)
        is_unk = walking & (token == unk_id)
        c = tl.load(values_ptr + lo + at - 1, mask=is_unk, other=0)
        width = 1 + (c >= 0x80).to(tl.int64) + (c >= 0x800).to(tl.int64) + (c >= 0x10000).to(tl.int64)
        written = tl.where(is_unk & fallback, width, tl.where(is_unk & next_unk, 0, 1))
        count = tl.where(walking, count + written, count)
        next_unk = is_unk & ~_word_start(values_ptr, lo, first, walking, mark)
        at = tl.where(walking, first, at)
    out = tokens_ptr + per_place * lo
    put = count  # one past the next token to write, from the end
    at = tl.where(inside, n, 0)
    next_unk = tl.zeros([BLOCK], dtype=tl.int1)
    while tl.max(at, 0) > 0:
        walking = at > 0
        token = tl.load(piece_ptr + lo + at, mask=walking, other=0)
        first = tl.load(start_ptr + lo + at, mask=walking, other=0).to(tl.int64)
        is_unk = walking & (token == unk_id)
        as_bytes = is_unk & fallback
        c = tl.load(values_ptr + lo + at - 1, mask=as_bytes, other=0).to(tl.int64)
        width = 1 + (c >= 0x80).to(tl.int64) + (c >= 0x800).to(tl.int64) + (c >= 0x10000).to(tl.int64)
        lead = tl.where(width == 1, c, tl.where(width == 2, 0xC0, tl.where(width == 3, 0xE0, 0xF0))
                        | (c >> (6 * (width - 1))))
        tl.store(out + put - width, tl.load(byte_ids_ptr + (lead & 0xFF), mask=as_bytes, other=0), mask=as_bytes)
        for k in range(1, 4):  # continuation byte k: bits 6 * (width - 1 - k) of c
            cont = as_bytes & (k < width)
            byte = 0x80 | ((c >> tl.maximum(6 * (width - 1 - k), 0)) & 0x3F)
            tl.store(out + put - width + k, tl.load(byte_ids_ptr + byte, mask=cont, other=0), mask=cont)
        single = walking & ~as_bytes & ~(is_unk & next_unk)
        tl.store(out + put - 1, token.to(tl.int64), mask=single)
        put = tl.where(as_bytes, put - width, tl.where(single, put - 1, put))
        next_unk = is_unk & ~_word_start(values_ptr, lo, first, walking, mark)
        at = tl.where(walking, first, at)
    tl.store(counts_ptr + text, count, mask=inside)
    tl.store(piece_starts_ptr + text, per_place * lo, mask=inside)


def unigram_texts_triton(values: torch.Tensor, offsets: torch.Tensor, lengths: torch.Tensor, *, expand: int,
                         code_of: torch.Tensor, trie: torch.Tensor, dense: int, rare_offsets: torch.Tensor,
                         rare_codes: torch.Tensor, rare_rows: torch.Tensor,
                         piece_score: torch.Tensor, byte_ids: torch.Tensor, unk_id: int, unk_score: float,
                         reset_threshold: float, mark: int, byte_fallback: bool
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int64 tokens, four places per place of ``values`` with byte fallback, else one; int64 each
    text's first token's place and its number of tokens) of the texts ``values[expand * offsets[t] + 2 * t:]``, ``lengths[t]``
    characters each. The trie: ``PieceTrie.walk_arrays`` on the device; ``piece_score`` float32;
    ``mark``: the codepoint words start at (-1: each text is one word); ``unk_id >= 0``."""
    texts = offsets.numel() - 1
    device = values.device
    room = max(values.numel(), 1)
    best = torch.empty(room, dtype=torch.float32, device=device)
    start = torch.empty(room, dtype=torch.int32, device=device)
    piece = torch.empty(room, dtype=torch.int32, device=device)
    per_place = 4 if byte_fallback else 1  # an unk token spelled in byte pieces: at most four
    tokens = torch.empty(per_place * room, dtype=torch.int64, device=device)
    piece_starts = torch.empty(texts, dtype=torch.int64, device=device)
    counts = torch.empty(texts, dtype=torch.int64, device=device)
    if texts:
        block = 64  # as the other per-text kernels (a block runs as long as its longest text)
        _unigram_texts_kernel[(triton.cdiv(texts, block),)](
            values, offsets, lengths, code_of, trie, rare_offsets, rare_codes, rare_rows, piece_score, byte_ids, best,
            start, piece, tokens, piece_starts, counts, texts, dense, unk_id, unk_score, reset_threshold, mark,
            int(byte_fallback), per_place, EXPAND=expand,
            BLOCK=block)
    return tokens, piece_starts, counts
