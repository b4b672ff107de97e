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
cuts the text's words, all while the text is in cache; the first character outside that case
hands the whole batch to the three kernels.
"""

import numpy as np

from ._numba import kernel
from .charsmap_numba import CODEPOINT, CONTINUE, SEVERAL, START, charsmap_rewrite_numba
from .sentencepiece_whitespace import ESCAPED_SPACE, SPACE, add_dummy, dummy_sources_when_empty, whitespace_rules_numba
from .word_split_numba import _split_at, split_text_at


@kernel
def _breaks_one_to_one(values, i, direct):
    """Whether the codepoint at ``i`` has a charsmap rule other than its own one-codepoint rewrite
    (see the module notes; one outside the table has none: the reference raises on it)."""
    limit = direct.size
    c = values[i]
    if c < 0 or c >= limit:
        return True
    d = direct[c]
    if d & SEVERAL:
        return True
    if d & START and i + 1 < values.size:
        c2 = values[i + 1]
        return c2 < 0 or c2 >= limit or (direct[c2] & CONTINUE) != 0
    return False


@kernel
def normalize_split(values, offsets, charsmap, direct, table_values, table_offsets, hashes, order, key_values,
                    key_offsets, rule_values, rule_offsets, max_long, add_dummy_prefix, remove_extra_whitespaces,
                    escape_whitespaces, suffix_code, mark, split, runs):
    """``values`` / ``offsets``: the texts' codepoints; ``charsmap``: whether the charsmap's arrays
    are real (else the identity); ``suffix_code``: the dummy suffix's codepoint (-1: none);
    ``mark``, ``split``, ``runs``: the word split's. Returns
    ``(text, text_offsets, source, starts, ends, word_offsets)``."""
    done, text, text_offsets, source, starts, ends, word_offsets = _fast_pass(
        values, offsets, charsmap, direct, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, suffix_code,
        mark, split, runs)
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
               suffix_code, mark, split, runs):
    """``normalize_split``'s outputs after ``True``, or ``False`` (and empty arrays) as soon as a
    codepoint breaks the one-to-one case (then only a charsmap's rules can give the outputs)."""
    texts = offsets.size - 1
    bound = values.size + 2 * texts  # every character kept, a dummy prefix and suffix per text
    text = np.empty(bound, np.int32)
    source = np.empty(bound, np.int64)
    text_offsets = np.empty(texts + 1, np.int64)
    starts = np.empty(bound, np.int64)
    ends = np.empty(bound, np.int64)
    word_offsets = np.empty(texts + 1, np.int64)
    text_offsets[0] = 0
    word_offsets[0] = 0
    prefix = ESCAPED_SPACE if escape_whitespaces else SPACE
    at = 0
    w = 0
    for t in range(texts):
        lo, hi = offsets[t], offsets[t + 1]
        first = at
        if add_dummy_prefix:
            at += 1  # its slot, filled (or given back) once the text's characters are known
        previous = SPACE  # a space at a text's start goes
        only_spaces = True  # (SentencePiece writes the dummy suffix to an emptied text unless so)
        for i in range(lo, hi):
            c = values[i]
            if charsmap:
                if _breaks_one_to_one(values, i, direct):
                    return False, text[:0], text_offsets, source[:0], starts[:0], ends[:0], word_offsets
                c = direct[c] & CODEPOINT
            only_spaces = only_spaces and c == SPACE
            if c == SPACE and previous == SPACE and remove_extra_whitespaces:
                continue
            previous = c
            text[at] = ESCAPED_SPACE if c == SPACE and escape_whitespaces else c
            source[at] = i
            at += 1
        body = first + 1 if add_dummy_prefix else first
        if remove_extra_whitespaces:  # trailing spaces, and '▁' when escaping
            while at > body and (text[at - 1] == SPACE or (escape_whitespaces and text[at - 1] == ESCAPED_SPACE)):
                at -= 1
        if at == body:
            at = first  # an empty text takes no dummy prefix
        elif add_dummy_prefix:
            text[first] = prefix
            source[first] = source[first + 1]
        if suffix_code >= 0 and (at > first or (hi > lo and not only_spaces)):
            text[at] = suffix_code
            source[at] = source[at - 1] if at > first else hi - 1
            at += 1
        text_offsets[t + 1] = at
        w = split_text_at(text, first, at, mark, split, runs, starts, ends, w)
        word_offsets[t + 1] = w
    return True, text[:at], text_offsets, source[:at], starts[:w], ends[:w], word_offsets
