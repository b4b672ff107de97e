"""Word counting for training on the CPU: the words of a chunk into one running hash table.

Contract: after any number of calls, the table holds every distinct word seen (a word is the span
``values[starts[i]:ends[i]]``, empty spans skipped; with ``byte_chars`` given, the word's UTF-8
bytes, each mapped to ``byte_chars[byte]``: the GPT-2 byte characters of byte-level BPE) once,
in order of first appearance, with the number of times it was seen: the same words and counts
(as a ``{word: count}`` mapping) as ``gputok.trainers.counting.WordCounter``'s torch path
(``unique_words`` per chunk, ``to_byte_level``, ``merge_tables``; forced with
``_dispatch.use_backend("torch")``). UTF-8 is the plain formula for every value (a lone surrogate
gives three bytes), as ``gputok.ingest.utf8_bytes``.

How: the word's characters are written at the end of the character store, hashed (64-bit FNV-1a
style), and looked up in an open-addressing table of word ids; a hit is compared character by
character (so there are no collisions to worry about) and counted, a miss keeps the characters
and takes the next id. ``state`` holds (words, characters used, words seen); the caller grows
the arrays before a call (:func:`gputok.trainers.counting.WordCounter` keeps room for a whole chunk)
and :func:`rehash_numba` rebuilds the table into a bigger one.
"""

import numpy as np

from ._numba import kernel


@kernel
def _word_hash(chars, start, end):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, end):
        h = (h ^ np.uint64(chars[i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(29)
    return np.int64(h >> np.uint64(1))


@kernel
def count_words_numba(values, starts, ends, byte_chars, table, whash, woff, chars, wcount, state):
    mask = table.size - 1
    nw, nc = state[0], state[1]
    seen = 0
    byte_level = byte_chars.size > 0
    for i in range(starts.size):
        s, e = starts[i], ends[i]
        if e <= s:
            continue
        k = nc
        if byte_level:
            for j in range(s, e):
                c = np.int64(values[j])
                if c < 0x80:
                    chars[k] = byte_chars[c]
                    k += 1
                elif c < 0x800:
                    chars[k] = byte_chars[0xC0 | (c >> 6)]
                    chars[k + 1] = byte_chars[0x80 | (c & 0x3F)]
                    k += 2
                elif c < 0x10000:
                    chars[k] = byte_chars[0xE0 | (c >> 12)]
                    chars[k + 1] = byte_chars[0x80 | ((c >> 6) & 0x3F)]
                    chars[k + 2] = byte_chars[0x80 | (c & 0x3F)]
                    k += 3
                else:
                    chars[k] = byte_chars[0xF0 | (c >> 18)]
                    chars[k + 1] = byte_chars[0x80 | ((c >> 12) & 0x3F)]
                    chars[k + 2] = byte_chars[0x80 | ((c >> 6) & 0x3F)]
                    chars[k + 3] = byte_chars[0x80 | (c & 0x3F)]
                    k += 4
        else:
            for j in range(s, e):
                chars[k] = values[j]
                k += 1
        seen += 1
        h = _word_hash(chars, nc, k)
        at = h & mask
        while True:
            w = table[at]
            if w < 0:
                table[at] = nw
                whash[nw] = h
                woff[nw + 1] = k
                wcount[nw] = 1
                nw += 1
                nc = k
                break
            if whash[w] == h and woff[w + 1] - woff[w] == k - nc:
                o = woff[w]
                same = True
                for j in range(k - nc):
                    if chars[o + j] != chars[nc + j]:
                        same = False
                        break
                if same:
                    wcount[w] += 1
                    break
            at = (at + 1) & mask
    state[0], state[1] = nw, nc
    state[2] += seen


@kernel
def rehash_numba(table, whash, nw):
    """Put word ids ``0..nw`` into the empty ``table`` (-1 everywhere) by their hashes."""
    mask = table.size - 1
    for w in range(nw):
        at = whash[w] & mask
        while table[at] >= 0:
            at = (at + 1) & mask
        table[at] = w
