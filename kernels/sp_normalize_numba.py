"""SentencePiece's normalizer and word split in one pass per text, on the CPU, for the common case.

Contract: ``normalize_split`` returns what ``charsmap_numba.charsmap_rewrite_numba`` (or, without a
charsmap, the codepoints as they are) -> ``sentencepiece_whitespace.whitespace_rules_numba`` (then
``add_dummy`` for a dummy suffix, or for the dummy prefix SentencePiece writes to a text it empties)
-> ``word_split_numba.split_at_marks`` (``runs``: ``split_before_runs``) return in turn: the
normalized codepoints (int32), their row offsets, each one's source codepoint (int64), and the
words' starts, ends and offsets per text. The reference
is those kernels in that order, which it runs itself for a batch the fast pass does not cover
(tests/test_sp_normalize_numba.py compares the two on real text and random Unicode).

Why: the three kernels take three passes and six full-length arrays; the two normalizer passes
cost a third of a Unigram encode of English (this kernel: 47% less CPU than the three on 3 MB of
English lines in batches of 1,024). The fast pass covers batches in which every character's
charsmap rule is its own one-codepoint rewrite (no longer rule can start at it and continue at
the next character, no rewrite to zero or several codepoints): English and most text, whose
whitespace rules then read only the rewritten codepoint before (each character is its own unit).
It writes the kept characters, trims a text's trailing spaces, puts the dummy prefix first and
cuts the text's words, all while the text is in cache; a text with a character outside that case
hands the whole batch to the three kernels.
"""

import numpy as np

from ._numba import kernel
from .charsmap_numba import CODEPOINT, CONTINUE, SEVERAL, START, charsmap_rewrite_numba
from .sentencepiece_whitespace import ESCAPED_SPACE, SPACE, add_dummy, dummy_sources_when_empty, whitespace_rules_numba
from .word_split_numba import _split_at, split_text_at


@kernel
def normalize_split(values, offsets, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                    key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces,
                    escape_whitespaces, suffix_code, mark, split, runs, with_source):
    """``values`` / ``offsets``: the texts' codepoints; ``charsmap``: whether the charsmap's arrays
    are real (else the identity); ``suffix_code``: the dummy suffix's codepoint (-1: none);
    ``mark``, ``split``, ``runs``: the word split's; ``with_source``: False where the caller reads
    no ``source`` (no spans asked for): the fast pass then writes none and returns it empty. Returns
    ``(text, text_offsets, source, starts, ends, word_offsets)``."""
    done, text, text_offsets, source, starts, ends, word_offsets = _fast_pass(
        values, offsets, charsmap, direct, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, suffix_code,
        mark, split, runs, with_source)
    if done:
        return text, text_offsets, source, starts, ends, word_offsets
    out, out_offsets, unit = charsmap_rewrite_numba(values, offsets, direct, table_values, table_offsets, hashes,
                                                    order, key_values, key_offsets, rule_values, rule_offsets, max_long)
    text, text_offsets, source = whitespace_rules_numba(out, out_offsets, unit, add_dummy_prefix,
                                                        remove_extra_whitespaces, escape_whitespaces)
    if suffix_code >= 0 or (add_dummy_prefix and not remove_extra_whitespaces):
        empty_source = dummy_sources_when_empty(offsets, out, out_offsets, unit, text_offsets, remove_extra_whitespaces)
        code = suffix_code if suffix_code >= 0 else (ESCAPED_SPACE if escape_whitespaces else SPACE)
        text, text_offsets, source = add_dummy(text, text_offsets, source, code, empty_source, suffix_code >= 0)
    starts, ends, word_offsets = _split_at(text, text_offsets, mark, split, runs)
    return text, text_offsets, source, starts, ends, word_offsets


@kernel
def _fast_pass(values, offsets, charsmap, direct, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces,
               suffix_code, mark, split, runs, with_source):
    """``normalize_split``'s outputs after ``True``, or ``False`` (and empty arrays) where a
    codepoint breaks the one-to-one case (then only a charsmap's rules can give the outputs).

    The case is checked without a branch per character: what breaks it (a codepoint outside the
    table, a rule rewriting one to zero or several codepoints, a longer rule starting at one and
    continuing at the next codepoint) is or-ed into a flag as the text is written, read at the
    text's end. (A codepoint outside the table is looked up clamped: it breaks the batch where it
    is written, whichever text it is in.) Spaces are dropped by not moving the write position.
    With ``with_source`` False, 7.1 ns per character of English against 7.6 for the branching
    loop it replaced (``benchmarks/unigram_profile.py --batch-size 512``, normalize+split)."""
    texts = offsets.size - 1
    bound = values.size + 2 * texts  # every character kept, a dummy prefix and suffix per text
    text = np.empty(bound, np.int32)
    source = np.empty(bound if with_source else 0, np.int64)
    text_offsets = np.empty(texts + 1, np.int64)
    starts = np.empty(bound, np.int64)
    ends = np.empty(bound, np.int64)
    word_offsets = np.empty(texts + 1, np.int64)
    text_offsets[0] = 0
    word_offsets[0] = 0
    space = ESCAPED_SPACE if escape_whitespaces else SPACE  # a kept space, and the dummy prefix
    limit = direct.size
    last = values.size - 1
    # The common split (a word before each mark, no dummy suffix) is cut as the text is written: a
    # kept mark past the text's first slot starts a word (split_text_at's rule), and the words'
    # ends follow from their starts once the text's end is known; other splits take split_text_at
    # after the text. With each rule read once (below): 6.6 -> 5.3 ns per character of English for
    # normalize+split (scratch script: 100k lines in batches of 512, one thread, alternated runs).
    cut_here = split and not runs and suffix_code < 0
    # A character's rule is read once: as the following one's of the character before, then as its own.
    following = direct[min(np.uint32(values[0]), limit - 1)] if charsmap and values.size else 0
    at = 0
    w = 0
    for t in range(texts):
        lo, hi = offsets[t], offsets[t + 1]
        first = at
        first_word = w
        w += cut_here  # the text's first word, which starts at its first slot
        if add_dummy_prefix:
            at += 1  # its slot, filled (or given back) once the text's characters are known
        previous_space = True  # a space at a text's start goes
        only_spaces = True  # (SentencePiece writes the dummy suffix to an emptied text unless so)
        breaks = False
        for i in range(lo, hi):
            c = values[i]
            if charsmap:
                rule = following
                following = direct[min(np.uint32(values[i + 1]), limit - 1)] if i < last else 0
                breaks |= (np.uint32(c) >= limit) | ((rule & SEVERAL) != 0) | (
                    ((rule & START) != 0) & ((following & CONTINUE) != 0))
                c = rule & CODEPOINT
            is_space = c == SPACE
            only_spaces &= is_space
            written = space if is_space else c
            text[at] = written
            if with_source:
                source[at] = i
            kept = not (is_space and previous_space and remove_extra_whitespaces)
            if cut_here:
                starts[w] = at
                w += kept & (written == mark) & (at > first)
            at += kept
            previous_space = is_space
        if breaks:
            return False, text[:0], text_offsets, source[:0], starts[:0], ends[:0], word_offsets
        body = first + 1 if add_dummy_prefix else first
        if remove_extra_whitespaces:  # trailing spaces, and '▁' when escaping
            while at > body and (text[at - 1] == SPACE or (escape_whitespaces and text[at - 1] == ESCAPED_SPACE)):
                at -= 1
        if at == body:
            at = first  # an empty text takes no dummy prefix
        elif add_dummy_prefix:
            text[first] = space
            if with_source:
                source[first] = source[first + 1]
        if suffix_code >= 0 and (at > first or (hi > lo and not only_spaces)):
            text[at] = suffix_code
            if with_source:
                source[at] = source[at - 1] if at > first else hi - 1
            at += 1
        text_offsets[t + 1] = at
        if not cut_here:
            w = split_text_at(text, first, at, mark, split, runs, starts, ends, w)
        elif at == first:
            w = first_word  # an empty text has no words
        else:
            starts[first_word] = first
            while starts[w - 1] >= at:  # marks the trailing spaces' trim took back
                w -= 1
            for k in range(first_word, w - 1):
                ends[k] = starts[k + 1]
            ends[w - 1] = at
        word_offsets[t + 1] = w
    return True, text[:at], text_offsets, source[:at], starts[:w], ends[:w], word_offsets
