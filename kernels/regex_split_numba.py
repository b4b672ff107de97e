"""The gpt2 / cl100k / o200k / llama3 / qwen2 regex splits on the CPU, one left-to-right matcher per text: a numba kernel.

Contract: for every text row of ``values`` (codepoints, rows cut by ``offsets``), the spans of
``regex.finditer(PATTERNS[rule], text)`` with the classes tiktoken reads
(:mod:`gputok.regex_split`): exactly the words of the torch twin ``gputok.regex_split.split``
(``split_torch``), as int64 ``(starts, ends, text_offsets)``; positions index ``values``.

How: the three patterns match every character (their matches tile a text), so the words of a text
are the chain ``i = text start; i = match_end(i) ...``. ``match_end`` is the pattern written out as
the regex engine runs it at ``i``: the alternatives in order, each tried as written (possessive
runs take the whole run; backtracking ones give back exactly what the engine gives back, which
the module docstring of :mod:`gputok.regex_split` derives per pattern), the first that matches
wins. Characters are read through a per-rule *kind* table (``regex_split._kind_table``: one byte
per codepoint, letters, digits, other, apostrophe, space, other whitespace, newline, and o200k's
case classes and slash) and a contraction-letter table (``s d m t l v r e`` -> 1..8; the exact
lowercase letters for gpt2, case-insensitive with ``ſ`` for cl100k and o200k).

Each match reads each of its characters a bounded number of times (a run is scanned once per
alternative that needs it, at most three), and a failed alternative reads only what the next one
reads too, so a text of ``n`` characters costs O(n) whatever it holds: one letter repeated, a
megabyte of spaces, ``'s's's...`` (o200k pairs them from wherever the chain starts).

Memory: 8 bytes per codepoint of scratch (an upper bound on the starts) while it runs; the result
is 16 bytes per word plus 8 per text. ``nogil=True``: chunks of a batch run on Python threads at
once; no state outside the call.
"""

import numpy as np

from ._numba import kernel

# LLAMA3: cl100k's first spelling (Llama 3's): ``\s*[\r\n]+`` before the end-of-text rule;
# QWEN2: LLAMA3 with single digits (``\p{N}`` for ``\p{N}{1,3}``).
GPT2, CL100K, O200K, LLAMA3, QWEN2 = 0, 1, 2, 3, 4

# gpt2 / cl100k kinds (gputok.regex_split.K_*)
K_L, K_N, K_O, K_APOS, K_SP, K_OWS, K_NL = 0, 1, 2, 3, 4, 5, 6
# o200k kinds (gputok.regex_split.O_*)
O_UP, O_LO, O_BL, O_M, O_N, O_O, O_APOS, O_SLASH, O_SP, O_OWS, O_NL = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
# contraction letter codes (gputok.regex_split._LETTERS)
L_S, L_D, L_M, L_T, L_L, L_V, L_R, L_E = 1, 2, 3, 4, 5, 6, 7, 8
REPLACEMENT = 0xFFFD  # a value that is no codepoint is read as U+FFFD


@kernel
def _at(values, table, p):
    """``table[values[p]]`` (U+FFFD's entry for a value that is no codepoint)."""
    c = values[p]
    if c < 0 or c >= table.size:
        c = REPLACEMENT
    return table[c]


@kernel
def _contraction(values, letters, p, e):
    """Length of ``'(?:[sdmt]|ll|ve|re)`` at ``p`` (an apostrophe) before ``e``, else 0; the
    ``letters`` table decides the case rule."""
    if p + 1 >= e:
        return 0
    c1 = _at(values, letters, p + 1)
    if c1 == L_S or c1 == L_D or c1 == L_M or c1 == L_T:
        return 2
    if p + 2 >= e:
        return 0
    c2 = _at(values, letters, p + 2)
    if (c1 == L_L and c2 == L_L) or (c1 == L_V and c2 == L_E) or (c1 == L_R and c2 == L_E):
        return 3
    return 0


@kernel
def _whitespace_end(values, kinds, i, e, sp, ows, nl, end_first):
    """End of the whitespace match at ``i`` (a space ``sp``, other whitespace ``ows`` or newline
    ``nl`` kind): with ``end_first``, ``\\s++$`` first (cl100k); then ``\\s*[\\r\\n]+`` (to the
    run's last newline), ``\\s+(?!\\S)`` (all but the last char, or all at the text's end), ``\\s+``."""
    last_nl = i - 1
    r = i
    while r < e:
        kind = _at(values, kinds, r)
        if kind == nl:
            last_nl = r
        elif kind != sp and kind != ows:
            break
        r += 1
    if r == e and end_first:
        return e
    if last_nl >= i:
        return last_nl + 1
    if r == e:
        return e
    return r - 1 if r - i >= 2 else r


@kernel
def _gpt2_class(k):
    """The run class of a gpt2 kind: 0 letters, 1 digits, 2 other (apostrophe too), 3 whitespace."""
    if k == K_L:
        return 0
    if k == K_N:
        return 1
    if k == K_O or k == K_APOS:
        return 2
    return 3


@kernel
def _run_end(values, kinds, p, e, cls):
    """End of the run of gpt2 class ``cls`` from ``p``, not past ``e``."""
    while p < e and _gpt2_class(_at(values, kinds, p)) == cls:
        p += 1
    return p


@kernel
def _gpt2_end(values, kinds, letters, i, e):
    """``'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s`` at ``i``."""
    k = _at(values, kinds, i)
    if k == K_APOS:
        n = _contraction(values, letters, i, e)
        if n:
            return i + n
    if k == K_SP and i + 1 < e:
        cls = _gpt2_class(_at(values, kinds, i + 1))
        if cls != 3:  # ' ?X++': the space takes the run of the next character
            return _run_end(values, kinds, i + 2, e, cls)
    cls = _gpt2_class(k)
    r = _run_end(values, kinds, i + 1, e, cls)
    if cls != 3 or r == e:  # a letter, digit or other run; \s++$
        return r
    return r - 1 if r - i >= 2 else i + 1  # \s+(?!\S) gives back one character, else \s


@kernel
def _letters_end(values, kinds, p, e):
    while p < e and _at(values, kinds, p) == K_L:
        p += 1
    return p


@kernel
def _other_then_newlines(values, kinds, p, e, other, other2, nl):
    """``[^\\s\\p{L}\\p{N}]++[\\r\\n]*+`` from ``p`` (an other character): the run of kinds
    ``other``/``other2``, then the run of ``nl`` (cl100k; DeepSeek's ``[\\p{P}\\p{S}]+[\\r\\n]*``)."""
    while p < e:
        k = _at(values, kinds, p)
        if k != other and k != other2:
            break
        p += 1
    while p < e and _at(values, kinds, p) == nl:
        p += 1
    return p


@kernel
def _cl100k_end(values, kinds, letters, i, e, digits, end_first):
    """``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+|
    ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`` at ``i``, with
    groups of up to ``digits`` digits (3; 1 for Qwen's ``\\p{N}``); ``end_first`` False: Llama 3's
    ``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`` (a run reaching the text's end gives its newlines first)."""
    k = _at(values, kinds, i)
    if k == K_APOS:
        n = _contraction(values, letters, i, e)
        if n:
            return i + n
    if k == K_L:
        return _letters_end(values, kinds, i + 1, e)
    nk = _at(values, kinds, i + 1) if i + 1 < e else -1
    if k != K_N and k != K_NL and nk == K_L:  # one prefix character, then the letter run
        return _letters_end(values, kinds, i + 2, e)
    if k == K_N:
        p = i + 1
        while p < e and p < i + digits and _at(values, kinds, p) == K_N:
            p += 1
        return p
    if k == K_O or k == K_APOS:
        return _other_then_newlines(values, kinds, i + 1, e, K_O, K_APOS, K_NL)
    if k == K_SP and (nk == K_O or nk == K_APOS):
        return _other_then_newlines(values, kinds, i + 2, e, K_O, K_APOS, K_NL)
    # whitespace: \s++$, then \s*[\r\n] (to the run's last newline), \s+(?!\S), \s
    return _whitespace_end(values, kinds, i, e, K_SP, K_OWS, K_NL, end_first)


@kernel
def _is_upper(k):  # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    return k == O_UP or k == O_BL or k == O_M


@kernel
def _is_lower(k):  # [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    return k == O_LO or k == O_BL or k == O_M


@kernel
def _is_other(k):  # [^\s\p{L}\p{N}]
    return k == O_M or k == O_O or k == O_APOS or k == O_SLASH


@kernel
def _o200k_letters(values, kinds, s, e, second):
    """End of ``U*W+`` from ``s`` (first alternative, backtracking ``U*`` as the engine does), else
    (if ``second``) of ``U+W*`` (second alternative), else -1; U, W: the classes in
    :func:`_is_upper`, :func:`_is_lower`."""
    k = s
    last_both = -1  # the last Lm/Lo/mark of the U run: where W+ may start after U* gives back
    while k < e:
        kind = _at(values, kinds, k)
        if not _is_upper(kind):
            break
        if kind != O_UP:
            last_both = k
        k += 1
    if k < e and _at(values, kinds, k) == O_LO:  # W+ from the end of the U run
        p = k + 1
        while p < e and _is_lower(_at(values, kinds, p)):
            p += 1
        return p
    if last_both >= 0:
        return last_both + 1
    if second and k > s:  # U+ then no W
        return k
    return -1


@kernel
def _o200k_end(values, kinds, letters, i, e):
    """o200k's seven alternatives at ``i`` (:data:`gputok.regex_split.PATTERNS`)."""
    k = _at(values, kinds, i)
    nk = _at(values, kinds, i + 1) if i + 1 < e else -1
    # [^\r\n\p{L}\p{N}]? then U*W+ or U+W*, then an optional contraction
    end = -1
    if k == O_UP or k == O_LO or k == O_BL:
        end = _o200k_letters(values, kinds, i, e, True)
    elif k != O_N and k != O_NL:  # a prefix candidate: taken first, given back if that fails
        if nk == O_UP or nk == O_LO or nk == O_BL or nk == O_M:
            # A mark is a letter too: U*W+ without the prefix takes at least it, before U+W*.
            end = _o200k_letters(values, kinds, i + 1, e, k != O_M)
        if end < 0 and k == O_M:
            end = i + 1
    if end >= 0:
        if end < e and values[end] == 0x27:
            end += _contraction(values, letters, end, e)
        return end
    if k == O_N:  # \p{N}{1,3}
        p = i + 1
        while p < e and p < i + 3 and _at(values, kinds, p) == O_N:
            p += 1
        return p
    p = -1
    if _is_other(k):  # ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
        p = i + 1
    elif k == O_SP and _is_other(nk):
        p = i + 2
    if p >= 0:
        while p < e and _is_other(_at(values, kinds, p)):
            p += 1
        while p < e:
            kind = _at(values, kinds, p)
            if kind != O_NL and kind != O_SLASH:
                break
            p += 1
        return p
    # whitespace: \s*[\r\n]+ (to the run's last newline), \s+(?!\S), \s+
    return _whitespace_end(values, kinds, i, e, O_SP, O_OWS, O_NL, False)


@kernel
def regex_split_numba(values, offsets, kinds, letters, rule):
    """(starts, ends, text_offsets), int64: the matches of ``rule`` (GPT2, CL100K, O200K, LLAMA3, QWEN2) in every
    text row; ``kinds``/``letters``: the rule's kind table and contraction-letter table."""
    n = values.size
    texts = offsets.size - 1
    starts = np.empty(n, np.int64)
    text_offsets = np.empty(texts + 1, np.int64)
    text_offsets[0] = 0
    w = 0
    for t in range(texts):
        i = offsets[t]
        e = offsets[t + 1]
        while i < e:
            starts[w] = i
            w += 1
            if rule == GPT2:
                j = _gpt2_end(values, kinds, letters, i, e)
            elif rule == CL100K:
                j = _cl100k_end(values, kinds, letters, i, e, 3, True)
            elif rule == LLAMA3 or rule == QWEN2:
                j = _cl100k_end(values, kinds, letters, i, e, 1 if rule == QWEN2 else 3, False)
            else:
                j = _o200k_end(values, kinds, letters, i, e)
            i = j if j > i else i + 1  # (every character is matched: j > i)
        text_offsets[t + 1] = w
    out_starts = starts[:w].copy()
    ends = np.empty(w, np.int64)
    for j in range(w - 1):
        ends[j] = out_starts[j + 1]
    if w:
        ends[w - 1] = offsets[texts]
    return out_starts, ends, text_offsets


# DeepSeek-V3's three Splits (gputok.regex_split.DEEPSEEK_V3): kinds of its per-codepoint table
D_N, D_CJK, D_AP, D_AL, D_L, D_M, D_PS, D_SP, D_OWS, D_NL, D_X = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10


@kernel
def _deepseek_letters(k):  # [\p{L}\p{M}]
    return k == D_AL or k == D_L or k == D_M


@kernel
def _deepseek_third_end(values, kinds, i, e):
    """End of the match of DeepSeek-V3's third regex at ``i`` within the piece ending at ``e``
    (``[!-/:-@[-`{-~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|
    \\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``), or -1 where none matches."""
    k = _at(values, kinds, i)
    nk = _at(values, kinds, i + 1) if i + 1 < e else -1
    if k == D_AP and nk == D_AL:
        p = i + 2
        while p < e and _at(values, kinds, p) == D_AL:
            p += 1
        return p
    p = -1
    if _deepseek_letters(k):
        p = i + 1
    elif k != D_NL and k != D_AP and k != D_PS and _deepseek_letters(nk):
        p = i + 2
    if p >= 0:
        while p < e and _deepseek_letters(_at(values, kinds, p)):
            p += 1
        return p
    if k == D_AP or k == D_PS:
        return _other_then_newlines(values, kinds, i + 1, e, D_AP, D_PS, D_NL)
    if k == D_SP and (nk == D_AP or nk == D_PS):
        return _other_then_newlines(values, kinds, i + 2, e, D_AP, D_PS, D_NL)
    if k != D_SP and k != D_OWS and k != D_NL:
        return -1
    return _whitespace_end(values, kinds, i, e, D_SP, D_OWS, D_NL, False)


@kernel
def _deepseek_third(values, inner, i, pe, starts, ends, w):
    """The pieces of the third regex on ``[i, pe)`` (matches, and the runs no match covers),
    written at ``w``; returns the new ``w``. ``inner``: the kinds without the digit / CJK override."""
    gap = -1
    while i < pe:
        j = _deepseek_third_end(values, inner, i, pe)
        if j < 0:
            if gap < 0:
                gap = i
            i += 1
            continue
        if gap >= 0:
            starts[w] = gap
            ends[w] = i
            w += 1
            gap = -1
        starts[w] = i
        ends[w] = j
        w += 1
        i = j
    if gap >= 0:
        starts[w] = gap
        ends[w] = pe
        w += 1
    return w


@kernel
def deepseek_split_numba(values, offsets, kinds, inner):
    """(starts, ends, text_offsets), int64: the pieces of DeepSeek-V3's Sequence of three
    Isolated Splits (digits ``\\p{N}{1,3}``, CJK runs, then the third regex on every piece: what
    the first two left and the CJK runs too; text that no match covers kept as pieces) in every
    text row. ``kinds``: digits and CJK marked (``D_N``, ``D_CJK``); ``inner``: without them."""
    n = values.size
    texts = offsets.size - 1
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    text_offsets = np.empty(texts + 1, np.int64)
    text_offsets[0] = 0
    w = 0
    for t in range(texts):
        i = offsets[t]
        e = offsets[t + 1]
        while i < e:
            k = _at(values, kinds, i)
            if k == D_N:  # \p{N}{1,3}, from the start of each run
                p = i + 1
                while p < e and p < i + 3 and _at(values, kinds, p) == D_N:
                    p += 1
                starts[w] = i
                ends[w] = p
                w += 1
                i = p
                continue
            if k == D_CJK:  # the run, split again by the third regex
                p = i + 1
                while p < e and _at(values, kinds, p) == D_CJK:
                    p += 1
                w = _deepseek_third(values, inner, i, p, starts, ends, w)
                i = p
                continue
            # a piece of neither: up to the next digit or CJK character; the third regex on it
            pe = i + 1
            while pe < e:
                kind = _at(values, kinds, pe)
                if kind == D_N or kind == D_CJK:
                    break
                pe += 1
            w = _deepseek_third(values, inner, i, pe, starts, ends, w)
            i = pe
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets
