"""The pre-tokenizers that split by character class or at a marker, on the CPU: numba kernels.

Contracts (each the torch twin in ``gputok.pre_tokenizers`` it must equal, dtypes included; words
are int64 ``(starts, ends, text_offsets)`` indexing ``values``, in text order):

- :func:`split_by_class`: ``split_by_class_torch`` (BertPreTokenizer, WhitespaceSplit): runs of
  WORD characters are words, each PUNCTUATION character is a word of its own, SPACE characters
  separate words and are dropped; ``classes`` maps a codepoint to its class (uint8).
- :func:`split_at_marks`: ``Metaspace.__call__``'s torch path: a word starts at the first
  character of each text and, with ``split``, at each ``mark``; it runs to the next start.
- :func:`split_before_runs`: ``MergeSafeSplit.__call__``'s torch path
  (``gputok.models.bpe_sentencepiece``): a word starts at the first character of each text and at
  each run of ``mark``; it runs to the next start.
- :func:`whole_texts`: ``whole_texts_torch``: each non-empty text is one word.
- :func:`words_from_starts`: ``words_from_starts_torch``: a word starts at each marked character
  (``starts_word``, bool) and runs to the next mark or to the end of its text.
- :func:`prepend_unless_first`: ``Metaspace.rewrite`` and ByteLevel's ``add_prefix_space``:
  ``space`` (if >= 0) becomes ``replacement``, then ``char`` goes before each non-empty text that
  does not start with it (if ``prepend``); returns the values (the input's dtype), int64 offsets,
  and each character's source position (the prepended one: its text's first character).

How: one pass per text, a few compares per character; outputs of unknown size are written to an
upper-bound buffer (one word per character) and copied out. A value that is no codepoint reads as
U+FFFD's class. ``nogil=True``: chunks run on Python threads at once; no state outside the call.
"""

import numpy as np

from ._numba import kernel

WORD, SPACE, PUNCTUATION = 0, 1, 2  # gputok.pre_tokenizers' classes
REPLACEMENT = 0xFFFD


@kernel
def _word_buffers(size, texts):
    """Room for ``size`` words' int64 starts and ends, and the ``texts + 1`` int64 offsets of each
    text's words (the first 0): filled by the kernels below, then cut to the words written."""
    starts = np.empty(size, np.int64)
    ends = np.empty(size, np.int64)
    text_offsets = np.empty(texts + 1, np.int64)
    text_offsets[0] = 0
    return starts, ends, text_offsets


@kernel
def split_by_class(values, offsets, classes):
    n = values.size
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(n, texts)
    w = 0
    for t in range(texts):
        inside = False  # a WORD run is open at starts[w]
        for p in range(offsets[t], offsets[t + 1]):
            c = values[p]
            if c < 0 or c >= classes.size:
                c = REPLACEMENT
            k = classes[c]
            if k == WORD:
                if not inside:
                    starts[w] = p
                    inside = True
                continue
            if inside:
                ends[w] = p
                w += 1
                inside = False
            if k == PUNCTUATION:
                starts[w] = p
                ends[w] = p + 1
                w += 1
        if inside:
            ends[w] = offsets[t + 1]
            w += 1
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


@kernel
def _split_at(values, offsets, mark, split, runs):
    """A word starts at each text's first character and, with ``split``, at each ``mark`` (with
    ``runs``: at the first ``mark`` of each run of them)."""
    n = values.size
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(n, texts)
    w = 0
    for t in range(texts):
        w = split_text_at(values, offsets[t], offsets[t + 1], mark, split, runs, starts, ends, w)
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


@kernel
def split_text_at(values, a, b, mark, split, runs, starts, ends, w):
    """``_split_at`` of one text, ``values[a:b]``: its words written from slot ``w`` of ``starts``
    and ``ends``; returns the next free slot."""
    if b > a:
        starts[w] = a
        if split:
            for p in range(a + 1, b):
                if values[p] == mark and not (runs and values[p - 1] == mark):
                    ends[w] = p
                    w += 1
                    starts[w] = p
        ends[w] = b
        w += 1
    return w


@kernel
def split_at_marks(values, offsets, mark, split):
    return _split_at(values, offsets, mark, split, False)


@kernel
def split_before_runs(values, offsets, mark):
    return _split_at(values, offsets, mark, True, True)


@kernel
def whole_texts(offsets):
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(texts, texts)
    w = 0
    for t in range(texts):
        if offsets[t + 1] > offsets[t]:
            starts[w] = offsets[t]
            ends[w] = offsets[t + 1]
            w += 1
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


@kernel
def prepend_unless_first(values, offsets, space, replacement, char, prepend):
    texts = offsets.size - 1
    added = 0
    if prepend:
        for t in range(texts):
            a = offsets[t]
            if offsets[t + 1] > a:
                first = values[a]
                if first == space:
                    first = replacement
                if first != char:
                    added += 1
    total = offsets[texts] - offsets[0] + added
    out = np.empty(total, values.dtype)
    src = np.empty(total, np.int64)
    out_offsets = np.empty(texts + 1, np.int64)
    out_offsets[0] = 0
    q = 0
    for t in range(texts):
        a = offsets[t]
        b = offsets[t + 1]
        if prepend and b > a:
            first = values[a]
            if first == space:
                first = replacement
            if first != char:
                out[q] = char
                src[q] = a
                q += 1
        for p in range(a, b):
            c = values[p]
            out[q] = replacement if c == space else c
            src[q] = p
            q += 1
        out_offsets[t + 1] = q
    return out, out_offsets, src


@kernel
def words_from_starts(offsets, starts_word):
    texts = offsets.size - 1
    n = starts_word.size
    starts, ends, text_offsets = _word_buffers(n, texts)
    w = 0
    for t in range(texts):
        inside = False
        for p in range(offsets[t], offsets[t + 1]):
            if starts_word[p]:
                if inside:
                    ends[w] = p
                    w += 1
                starts[w] = p
                inside = True
        if inside:
            ends[w] = offsets[t + 1]
            w += 1
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


# huggingface's Split behaviors, in gputok.regex_split.BEHAVIORS order.
REMOVED, ISOLATED, MERGED_WITH_PREVIOUS, MERGED_WITH_NEXT, CONTIGUOUS = 0, 1, 2, 3, 4


@kernel
def split_by_mask(values, offsets, mask, behavior, invert):
    """huggingface's ``NormalizedString::split`` with a per-character pattern (Split on a
    one-character String, CharDelimiterSplit, Punctuation, Digits): each character whose ``mask``
    (uint8 per codepoint) is set is a match of its own, each run of other characters a piece;
    ``invert`` swaps the two; ``behavior`` (the constants above) groups the pieces as
    ``gputok.regex_split._group_pieces`` does (its reference): Removed drops the matches, Isolated
    keeps every piece, MergedWithPrevious / MergedWithNext glue a match to the non-match before /
    after it, Contiguous joins neighbouring pieces of one kind."""
    n = values.size
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(n, texts)
    w = 0
    for t in range(texts):
        a = offsets[t]
        b = offsets[t + 1]
        p = a
        previous = -1  # -1: no piece yet in this text; else whether the previous piece was a match
        while p < b:
            c = values[p]
            if c < 0 or c >= mask.size:
                c = REPLACEMENT
            if mask[c]:
                end = p + 1
                hit = True
            else:
                end = p + 1
                while end < b:
                    d = values[end]
                    if d < 0 or d >= mask.size:
                        d = REPLACEMENT
                    if mask[d]:
                        break
                    end += 1
                hit = False
            if invert:
                hit = not hit
            if behavior == REMOVED:
                joins = False
                if hit:
                    p = end
                    previous = 1
                    continue
            elif behavior == ISOLATED:
                joins = False
            elif behavior == MERGED_WITH_PREVIOUS:
                joins = hit and previous == 0
            elif behavior == MERGED_WITH_NEXT:
                joins = (not hit) and previous == 1
            else:
                joins = previous == (1 if hit else 0)
            if joins:
                ends[w - 1] = end
            else:
                starts[w] = p
                ends[w] = end
                w += 1
            previous = 1 if hit else 0
            p = end
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


@kernel
def split_fixed_length(offsets, length):
    """huggingface's FixedLength: each text cut into pieces of ``length`` characters (the last
    one shorter)."""
    texts = offsets.size - 1
    total = 0
    for t in range(texts):
        total += (offsets[t + 1] - offsets[t] + length - 1) // length
    starts, ends, text_offsets = _word_buffers(total, texts)
    w = 0
    for t in range(texts):
        for p in range(offsets[t], offsets[t + 1], length):
            starts[w] = p
            ends[w] = min(p + length, offsets[t + 1])
            w += 1
        text_offsets[t + 1] = w
    return starts, ends, text_offsets


@kernel
def split_runs(values, offsets, classes):
    """Words are the maximal runs of characters of one non-zero class (uint8 per codepoint);
    class 0 separates words and is dropped (huggingface's Whitespace, ``\\w+|[^\\w\\s]+``)."""
    n = values.size
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(n, texts)
    w = 0
    for t in range(texts):
        current = 0
        for p in range(offsets[t], offsets[t + 1]):
            c = values[p]
            if c < 0 or c >= classes.size:
                c = REPLACEMENT
            k = classes[c]
            if k != current:
                if current != 0:
                    ends[w] = p
                    w += 1
                if k != 0:
                    starts[w] = p
                current = k
        if current != 0:
            ends[w] = offsets[t + 1]
            w += 1
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets


@kernel
def gather_words(values, starts, ends):
    """The characters of each word, one row per word (``values``' dtype, int64 offsets): the
    texts a later step of a pre-tokenizer Sequence splits."""
    words = starts.size
    out_offsets = np.empty(words + 1, np.int64)
    out_offsets[0] = 0
    for k in range(words):
        out_offsets[k + 1] = out_offsets[k] + ends[k] - starts[k]
    out = np.empty(out_offsets[words], values.dtype)
    for k in range(words):
        q = out_offsets[k]
        for p in range(starts[k], ends[k]):
            out[q] = values[p]
            q += 1
    return out, out_offsets


@kernel
def words_within_words(outer_starts, outer_text_offsets, row_offsets, inner_starts, inner_ends, inner_text_offsets):
    """Compose two splits: ``inner`` words index the rows of :func:`gather_words` (row k = outer
    word k, starting at ``row_offsets[k]``); returns them as positions of the outer text, with
    the offsets of each outer text's inner words."""
    words = outer_starts.size
    starts = np.empty(inner_starts.size, np.int64)
    ends = np.empty(inner_starts.size, np.int64)
    for k in range(words):
        shift = outer_starts[k] - row_offsets[k]
        for j in range(inner_text_offsets[k], inner_text_offsets[k + 1]):
            starts[j] = inner_starts[j] + shift
            ends[j] = inner_ends[j] + shift
    texts = outer_text_offsets.size - 1
    text_offsets = np.empty(texts + 1, np.int64)
    for t in range(texts + 1):
        text_offsets[t] = inner_text_offsets[outer_text_offsets[t]]
    return starts, ends, text_offsets
