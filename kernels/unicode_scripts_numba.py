"""huggingface's UnicodeScripts pre-tokenizer as one pass per text (numba).

A text is cut before every character whose script differs from the script of the last character
that had one: the space (class 0, "Any") has none, so it never cuts and stays with the words before
it; a text's characters before its first cut (leading spaces) are dropped, as huggingface's
``ranges.windows(2)`` drops them. ``classes`` maps each codepoint to its script class
(:func:`gputok.pre_tokenizers.script_table`: Hiragana and Katakana are Han there).
"""

from ._numba import kernel
from .word_split_numba import _word_buffers


@kernel
def split_scripts(values, offsets, classes):
    """Words (starts, ends, text_offsets: int64) of each text of ``values`` (codepoints, rows at
    ``offsets``) cut where the script changes."""
    texts = offsets.size - 1
    starts, ends, text_offsets = _word_buffers(values.size, texts)
    w = 0
    for t in range(texts):
        last = -1  # no script seen yet
        first = w
        for p in range(offsets[t], offsets[t + 1]):
            c = values[p]
            script = classes[c] if 0 <= c < classes.size else 1
            if script == 0:
                continue
            if script != last:
                if w > first:
                    ends[w - 1] = p
                starts[w] = p
                w += 1
                last = script
        if w > first:
            ends[w - 1] = offsets[t + 1]
        text_offsets[t + 1] = w
    return starts[:w].copy(), ends[:w].copy(), text_offsets
