"""The tables of the Unicode normalization forms (NFC, NFD, NFKC, NFKD), built from ``unicodedata``.

``gputok.kernels.nf_forms_numba`` normalizes a batch from these flat arrays, so its results are
those of ``unicodedata.normalize`` of this Python (Unicode ``unicodedata.unidata_version``; the
disk cache is keyed by it, see :func:`gputok.unicode.disk_cached`):

- ``ccc``: the canonical combining class of every codepoint (uint8, 0x110000 entries);
- ``nfd_*`` / ``nfkd_*``: each codepoint's full decomposition as CSR rows over all codepoints
  (``offsets`` int32, 0x110001 entries; an empty row: the codepoint is its own decomposition);
  taken from ``unicodedata.normalize`` of the single character, Hangul syllables included;
- the primary composites as a dense table over the characters that occur first / second in one
  (``first_index``, ``second_index``: int16 over all codepoints, -1 elsewhere; ``pair_table``:
  int32 composite or -1): a character ``c`` with a two-character canonical decomposition ``a b``
  whose NFC is ``c`` itself (this leaves out the composition exclusions, singletons and
  non-starter decompositions), and the Hangul LV and LVT syllables;
- ``quick``: bit i set where a codepoint is a starter that FORMS[i] leaves as it is, and (NFC,
  NFKC) that composes with nothing before it (neither it nor the start of its decomposition is
  the second of a pair): a text of such codepoints is already in the form.

Building takes ~1 s of CPU (``unicodedata`` calls per codepoint and form, measured 0.7 s); it
happens once per machine. Memory once loaded: ~16 MB (two int32 offset arrays, two int16 index
arrays and two uint8 ones over all codepoints), shared by the four forms.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from pathlib import Path

import numpy as np

from . import unicode

_CODEPOINTS = 0x110000
FORMS = ("NFC", "NFD", "NFKC", "NFKD")  # bit i of ``quick`` is FORMS[i]'s
_HANGUL = (0xAC00, 19, 21, 28)  # first syllable; L, V, T counts (T index 0: no trailing consonant)


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, np.ndarray]:
    """The arrays of the module docstring, built once (on disk under gputok's cache dir)."""
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]  # a new build rule: a new file
    return unicode.disk_cached(f"unicode-forms-{code}", _build)


def kernel_tables(form: str) -> tuple:
    """The kernel's arguments after ``values, offsets`` for ``form`` (NFC, NFD, NFKC or NFKD)."""
    t = tables()
    kind = "nfkd" if form in ("NFKC", "NFKD") else "nfd"
    return (form in ("NFC", "NFKC"), 1 << FORMS.index(form), t["quick"], t["ccc"], t[f"{kind}_offsets"],
            t[f"{kind}_values"], t["first_index"], t["second_index"], t["pair_table"])


def _build() -> dict[str, np.ndarray]:
    chars = [chr(c) if not 0xD800 <= c <= 0xDFFF else "\ufffd" for c in range(_CODEPOINTS)]
    arrays = {"ccc": np.fromiter(map(unicodedata.combining, chars), dtype=np.uint8, count=_CODEPOINTS)}
    for form in ("NFD", "NFKD"):
        offsets = np.zeros(_CODEPOINTS + 1, dtype=np.int32)
        values = []
        for c, ch in enumerate(chars):
            decomposed = unicodedata.normalize(form, ch)
            if decomposed != ch:
                values.extend(map(ord, decomposed))
            offsets[c + 1] = len(values)
        arrays[f"{form.lower()}_offsets"] = offsets
        arrays[f"{form.lower()}_values"] = np.array(values, dtype=np.int32)
    pairs = []
    for c, ch in enumerate(chars):
        parts = unicodedata.decomposition(ch).split()
        if len(parts) == 2 and not parts[0].startswith("<") and unicodedata.normalize("NFC", ch) == ch:
            pairs.append((int(parts[0], 16), int(parts[1], 16), c))
    s_base, l_count, v_count, t_count = _HANGUL
    for lv in range(l_count * v_count):  # L + V -> LV, then LV + T -> LVT
        syllable = s_base + lv * t_count
        pairs.append((0x1100 + lv // v_count, 0x1161 + lv % v_count, syllable))
        pairs += [(syllable, 0x11A7 + t, syllable + t) for t in range(1, t_count)]
    firsts = sorted({a for a, _, _ in pairs})
    seconds = sorted({b for _, b, _ in pairs})
    first_index = np.full(_CODEPOINTS, -1, dtype=np.int16)
    second_index = np.full(_CODEPOINTS, -1, dtype=np.int16)
    first_index[firsts] = np.arange(len(firsts))
    second_index[seconds] = np.arange(len(seconds))
    pair_table = np.full((len(firsts), len(seconds)), -1, dtype=np.int32)
    for a, b, c in pairs:
        pair_table[first_index[a], second_index[b]] = c
    arrays.update(first_index=first_index, second_index=second_index, pair_table=pair_table)
    # Quick check: a starter (class 0) that is its own normal form, and in the composed forms is
    # no second of a pair, leaves a text of such characters as it is.
    starter = arrays["ccc"] == 0
    quick = np.zeros(_CODEPOINTS, dtype=np.uint8)
    for bit, form in enumerate(FORMS):
        kind = "nfkd" if form in ("NFKC", "NFKD") else "nfd"
        own = np.diff(arrays[f"{kind}_offsets"]) == 0
        if form in ("NFC", "NFKC"):  # a character whose decomposition composes back is stable too
            offsets, values = arrays[f"{kind}_offsets"], arrays[f"{kind}_values"]
            leading = np.arange(_CODEPOINTS)  # the first character of each decomposition
            decomposes = np.diff(offsets) > 0
            leading[decomposes] = values[offsets[:-1][decomposes]]
            own |= np.array([unicodedata.normalize(form, ch) == ch for ch in chars])
            own &= (second_index < 0) & (second_index[leading] < 0)
        quick |= ((own & starter).astype(np.uint8) << bit)
    arrays["quick"] = quick
    return arrays
