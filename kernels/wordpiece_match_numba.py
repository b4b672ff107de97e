"""WordPiece on the CPU: greedy longest match of every word over the vocabulary trie, a numba kernel.

Contract (per word, not the padded matrix of ``wordpiece_match.py``): ``wordpiece_encode_numba``
takes ragged codepoints (one row per word) and returns what ``gputok.models.wordpiece.WordPiece.
encode_words`` returns, as numpy arrays: int32 piece ids, int32 piece ends (in characters, within
the word) and their int64 offsets (a row per word). Reference: the same method under the torch
backend (``wordpiece_match_torch`` and the unk rules around it); ``tests/test_models_numba.py``
compares the two.

How: one sequential loop per word. A word longer than ``max_chars`` is ``[unk_id]`` ending at
its length. Otherwise, from the piece start, walk the trie (root 0 for a word's first piece,
root 1 for continuations, whose ``##`` the trie has dropped) while an edge exists, remembering
the last node that ends a token; emit that token and restart where it ended. No token from some
start: the whole word is ``[unk_id]`` (ending at its length), or, with ``partial_unk``, that
character is unmatched and the walk restarts after it, a run of unmatched characters making one
``unk_id`` that ends where the run does. Edges on ASCII codepoints come from the trie's dense
``ascii_children`` table, the others from its hash map (``bpe_heap.probe``). Output buffers are
sized by the upper bound (a piece per character plus one per word) and sliced.
"""

import numpy as np

from ._numba import kernel
from .bpe_heap import probe

MAX_CODEPOINT = np.int64(0x110000)  # gputok.unicode.MAX_CODEPOINT: trie edge keys are node * it + codepoint


@kernel
def _encode(codes, word_starts, word_ends, slot_keys, slot_values, mask, shift, max_probes, token_of_node,
            ascii_row, ascii_children, max_chars, unk_id, partial_unk, ids, ends, counts):
    """Pieces of every word (``codes[word_starts[w]:word_ends[w]]``: gathered words, or words in
    place in their text) into ``ids``/``ends`` back to back, their number per word into ``counts``."""
    written = 0
    for w in range(word_starts.size):
        base = word_starts[w]
        n = word_ends[w] - base
        first = written
        if n > max_chars:
            ids[written] = unk_id
            ends[written] = n
            written += 1
        start = 0
        unmatched_before = False  # the last piece emitted is a run of unmatched characters
        while start < n <= max_chars:
            node = np.int64(0) if start == 0 else np.int64(1)
            cur = start
            best_end = -1
            best_id = -1
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
                    best_end = cur
                    best_id = token
            if best_end >= 0:
                ids[written] = best_id
                ends[written] = best_end
                written += 1
                start = best_end
                unmatched_before = False
            elif partial_unk:
                if unmatched_before:
                    ends[written - 1] = start + 1
                else:
                    ids[written] = unk_id
                    ends[written] = start + 1
                    written += 1
                    unmatched_before = True
                start += 1
            else:  # the whole word is unk
                written = first
                ids[written] = unk_id
                ends[written] = n
                written += 1
                break
        counts[w] = written - first
    return written


def wordpiece_encode_numba(codes: np.ndarray, offsets: np.ndarray, *, slot_keys: np.ndarray, slot_values: np.ndarray,
                           hash_mask: int, max_probes: int, token_of_node: np.ndarray, ascii_row: np.ndarray,
                           ascii_children: np.ndarray, max_chars: int, unk_id: int,
                           partial_unk: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids int32, ends int32, offsets int64) of the words ``codes[offsets[i]:offsets[i + 1]]``
    (int32 codepoints). The trie arrays are ``gputok.trie.Trie``'s, as numpy.

    >>> from gputok.trie import Trie
    >>> t = Trie([{"un": 0, "a": 1, "[UNK]": 9}, {"aff": 2, "able": 3}])
    >>> tables = {k: v.numpy() if hasattr(v, "numpy") else v for k, v in t.tensors("cpu").items()}
    >>> word = np.array([ord(c) for c in "unaffable"], np.int32)
    >>> ids, ends, offsets = wordpiece_encode_numba(word, np.array([0, 9]), max_chars=100, unk_id=9,
    ...                                             partial_unk=False, **tables)
    >>> ids.tolist(), ends.tolist(), offsets.tolist()
    ([0, 2, 3], [2, 5, 9], [0, 3])
    """
    words = offsets.size - 1
    bound = codes.size + words  # a piece per character, or one unk per word
    ids = np.empty(bound, np.int32)
    ends = np.empty(bound, np.int32)
    out_offsets = np.empty(words + 1, np.int64)
    out_offsets[0] = 0
    counts = out_offsets[1:]
    total = _encode(codes, offsets[:-1], offsets[1:], slot_keys, slot_values, hash_mask, 64 - hash_mask.bit_length(),
                    max_probes, token_of_node, ascii_row, ascii_children, max_chars, unk_id, partial_unk, ids, ends,
                    counts)
    np.cumsum(counts, out=counts)
    return ids[:total], ends[:total], out_offsets
