"""SentencePiece's whitespace rules over rewritten codepoints, one pass per text, on the CPU.

Torch twin: ``gputok.charsmap.whitespace_rules_torch`` (same arguments, same outputs); the
CPU path, because the twin's dozen full-length int64 temporaries cost ~0.13 s per MB of text.
The rules (``normalizer.cc``): with ``remove_extra_whitespaces``, the spaces a unit's rewrite
starts with go where the unit follows a space (or starts its text), and trailing spaces go (and a
trailing '▁' when escaping); with ``add_dummy_prefix`` a non-empty text gets a
leading space, pointing at its first kept character; with ``escape_whitespaces`` spaces become '▁'.
(A unit whose rewrite starts with two spaces, after a non-space, keeps both: no charsmap rule's
does, a user piece ``"  x"`` copied as one unit does, ``gputok.models.user_pieces``.)
Memory: the outputs, plus one byte per character.
"""

import numpy as np
from ._numba import kernel

SPACE, ESCAPED_SPACE = 32, 0x2581


@kernel
def whitespace_rules_numba(values, offsets, unit, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces):
    """Returns ``(out, out_offsets, source_unit)``: the kept codepoints (int32), their row offsets
    and each one's ``unit`` value."""
    n = values.size
    texts = offsets.size - 1
    keep = np.ones(n, np.bool_)
    lengths = np.zeros(texts, np.int64)
    for t in range(texts):
        lo, hi = offsets[t], offsets[t + 1]
        if remove_extra_whitespaces:
            non_space_in_unit = False
            unit_after_space = True
            for i in range(lo, hi):
                if i == lo or unit[i] != unit[i - 1]:
                    non_space_in_unit = False
                    unit_after_space = i == lo or values[i - 1] == SPACE
                space = values[i] == SPACE
                if space and unit_after_space and not non_space_in_unit:
                    keep[i] = False
                if not space:
                    non_space_in_unit = True
            end = hi
            while True:  # trailing spaces (and '▁' when escaping) among the kept characters
                last = end - 1
                while last >= lo and not keep[last]:
                    last -= 1
                if last < lo:
                    break
                c = values[last]
                if c == SPACE or (c == ESCAPED_SPACE and escape_whitespaces):
                    keep[last] = False
                    end = last
                else:
                    break
        count = 0
        for i in range(lo, hi):
            if keep[i]:
                count += 1
        lengths[t] = count + (1 if add_dummy_prefix and count > 0 else 0)
    out_offsets = np.zeros(texts + 1, np.int64)
    for t in range(texts):
        out_offsets[t + 1] = out_offsets[t] + lengths[t]
    out = np.empty(out_offsets[texts], np.int32)
    source_unit = np.empty(out_offsets[texts], unit.dtype)
    prefix = ESCAPED_SPACE if escape_whitespaces else SPACE
    for t in range(texts):
        at = out_offsets[t]
        first = True
        for i in range(offsets[t], offsets[t + 1]):
            if not keep[i]:
                continue
            if first and add_dummy_prefix:
                out[at] = prefix
                source_unit[at] = unit[i]
                at += 1
            first = False
            c = values[i]
            out[at] = ESCAPED_SPACE if c == SPACE and escape_whitespaces else c
            source_unit[at] = unit[i]
            at += 1
    return out, out_offsets, source_unit


@kernel
def dummy_sources_when_empty(offsets, rewritten, rewritten_offsets, unit, kept_offsets, remove_extra_whitespaces):
    """Per text, where SentencePiece's normalizer writes its dummy whitespace though the whitespace
    rules keep none of the text's characters: the source index of the text's last character, else -1.

    ``offsets``: the texts' raw codepoint offsets; ``rewritten`` / ``rewritten_offsets`` / ``unit``:
    the charsmap's (and user pieces') rewrite, ``unit`` the raw index each output's unit starts
    at; ``kept_offsets``: the offsets after the whitespace rules. ``normalizer.cc`` returns early
    (no dummy) only for a text that is empty, or, with ``remove_extra_whitespaces``, whose units all
    rewrite to exactly one space (its loop over leading spaces then consumes the whole text); any
    other text gets the dummy even where nothing else is kept: a unit that rewrites to nothing
    (U+0001 under nmt_nfkc), or a user piece of spaces ("  ", copied whole: not one space). (A unit
    of several characters rewritten to one space would count as not one space: no charsmap seen
    has such a rule.)"""
    texts = offsets.size - 1
    out = np.full(texts, -1, np.int64)
    for t in range(texts):
        lo, hi = offsets[t], offsets[t + 1]
        if hi == lo or kept_offsets[t + 1] > kept_offsets[t]:
            continue
        a, b = rewritten_offsets[t], rewritten_offsets[t + 1]
        spaces_only = remove_extra_whitespaces and b - a == hi - lo
        for k in range(b - a):
            if not spaces_only:
                break
            spaces_only = rewritten[a + k] == SPACE and unit[a + k] == lo + k
        if not spaces_only:
            out[t] = hi - 1
    return out


@kernel
def add_dummy(values, offsets, source, code, empty_source, after_nonempty):
    """The dummy ``code`` ('▁' or ' ') after each empty text whose ``empty_source``
    (``dummy_sources_when_empty``) is >= 0, with that source, and, if ``after_nonempty``
    (``treat_whitespace_as_suffix``'s dummy suffix), after each non-empty text, with its last
    character's source: ``(out, out_offsets, out_source)``."""
    texts = offsets.size - 1
    out_offsets = np.zeros(texts + 1, np.int64)
    for t in range(texts):
        grows = (after_nonempty and offsets[t + 1] > offsets[t]) or (offsets[t + 1] == offsets[t] and empty_source[t] >= 0)
        out_offsets[t + 1] = out_offsets[t] + (offsets[t + 1] - offsets[t]) + (1 if grows else 0)
    out = np.empty(out_offsets[texts], values.dtype)
    out_source = np.empty(out_offsets[texts], source.dtype)
    for t in range(texts):
        at = out_offsets[t]
        for i in range(offsets[t], offsets[t + 1]):
            out[at] = values[i]
            out_source[at] = source[i]
            at += 1
        if at < out_offsets[t + 1]:
            out[at] = code
            out_source[at] = source[offsets[t + 1] - 1] if offsets[t + 1] > offsets[t] else empty_source[t]
    return out, out_offsets, out_source
