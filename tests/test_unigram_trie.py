"""The piece trie the Unigram CPU kernels and their Triton twin walk (``PieceTrie.walk_arrays``: a
double array for the common codes, sorted rare edges for the others, built by
``kernels/unigram_trie_numba.double_array``) against a dict of the pieces: ``pieces_from`` finds
exactly the pieces that start at each position of a text, with their ids, whatever share of the
codes the array holds (all of them, a few, none below the root); the rows are dense."""

import random

import numpy as np
import pytest

from gputok.kernels.unigram_trie_numba import BASE, CHECK, pieces_from
from gputok.models.unigram import PieceTrie

ALPHABET = "abcdefgh▁" + "".join(chr(0x4E00 + i) for i in range(40)) + "😀é"


def _pieces(rng: random.Random, count: int) -> dict[str, int]:
    pieces: dict[str, int] = {}
    while len(pieces) < count:
        weights = [30 if c in "abcde▁" else 1 for c in ALPHABET]  # some common codes, many rare ones
        piece = "".join(rng.choices(ALPHABET, weights, k=rng.randint(1, 6)))
        pieces.setdefault(piece, rng.randrange(10_000))
    return pieces


@pytest.mark.parametrize("arrayed", [1, 3, 8, 256])
def test_pieces_from_finds_every_piece_at_every_start(arrayed):
    rng = random.Random(arrayed)
    pieces = _pieces(rng, 3000)
    walk = PieceTrie(pieces, arrayed=arrayed).walk_arrays
    code_of, trie, dense, rare_offsets, rare_codes, rare_rows = walk
    assert dense == arrayed
    if arrayed < 8:
        assert rare_codes.size > 0  # the binary search is walked too
    texts = [rng.choice(list(pieces)) + "".join(rng.choices(ALPHABET + "xyz", k=rng.randint(0, 12)))
             for _ in range(300)] + ["", "xyz", "".join(pieces)[:500]]
    ends = np.empty(64, np.int64)
    tokens = np.empty(64, np.int64)
    for text in texts:
        values = np.array([ord(c) for c in text], np.int32)
        for s in range(len(text)):
            found = pieces_from(values, 0, len(text), s, *walk, ends, tokens)
            want = [(e, pieces[text[s:e]]) for e in range(s + 1, min(len(text), s + 6) + 1) if text[s:e] in pieces]
            assert list(zip(ends[:found].tolist(), tokens[:found].tolist())) == want, (text, s)


def test_rows_are_dense_and_the_table_runs_past_every_step():
    rng = random.Random(5)
    trie = PieceTrie(_pieces(rng, 5000))
    code_of, rows, dense, rare_offsets, rare_codes, rare_rows = trie.walk_arrays
    nodes = trie.token_of_node.numel()
    # a row per node: the root's, one per child in the array (its parent's row as CHECK), one per rare child
    assert np.count_nonzero(rows[:, CHECK] >= 0) + rare_codes.size + 1 == nodes
    assert rows.shape[0] <= 1.2 * nodes + trie.codes  # the holes the widest blocks leave are filled
    # every step reads inside the table: the largest base plus the largest code
    assert rows[:, BASE].max() + trie.codes - 1 < rows.shape[0]
