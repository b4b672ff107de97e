"""The NFC / NFD / NFKC / NFKD kernel (``gputok.kernels.nf_forms_numba``) equals huggingface's forms
(``tokenizers.normalizers``, an older Unicode than ``unicodedata``'s) and ``unicodedata``'s on
what that Unicode knows (``reference_normalize``), its character alignments included, and its
Python twin ``unicode_forms.aligned`` per text (the normalizers' path off the CPU kernels,
``_dispatch.use_backend("torch")``), source indices included: on every codepoint alone, on random
strings built to compose and reorder, and on real text."""

import functools
import re
import unicodedata

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
import tokenizers
from tokenizers import normalizers as hf_normalizers

from gputok import _dispatch, ingest, unicode_forms
from gputok import normalizers as N
from gputok.kernels.nf_forms_numba import normalize_form_numba
from gputok.ragged import Ragged

FORMS = ("NFC", "NFD", "NFKC", "NFKD")


def normalize(values: np.ndarray, offsets: np.ndarray, form: str):
    return normalize_form_numba(values, offsets, *unicode_forms.kernel_tables(form))


def reference_normalize(form: str, text: str) -> str:
    """``unicodedata.normalize(form, text)`` as huggingface's older Unicode has it: a codepoint it
    lacks the data of (or a part of a composite it lacks) is a starter that decomposes, reorders
    and composes with nothing, so the text is normalized piecewise between such codepoints."""
    pieces = _unknown_pattern().split(text)
    return "".join(piece if i % 2 else unicodedata.normalize(form, piece) for i, piece in enumerate(pieces))


@functools.lru_cache(maxsize=1)
def _unknown_pattern() -> re.Pattern:
    """One codepoint whose decomposition, combining class or composite ``unicodedata`` has and
    huggingface lacks (``unicode_forms._known``)."""
    known = unicode_forms._known()
    unknown = set()
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        decomposition = unicodedata.decomposition(chr(c))
        if decomposition and not known[c] & 3 or unicodedata.combining(chr(c)) and not known[c] & 4:
            unknown.add(c)
            parts = decomposition.split()
            if len(parts) == 2 and not parts[0].startswith("<"):  # the parts of a composite it lacks
                unknown.update(int(part, 16) for part in parts)
    return re.compile("([" + "".join(re.escape(chr(c)) for c in sorted(unknown)) + "])")


def scalar(c: int) -> str:
    return "\ufffd" if 0xD800 <= c <= 0xDFFF else chr(c)


@pytest.mark.parametrize("form", FORMS)
def test_every_codepoint_alone(form):
    values = np.arange(0x110000, dtype=np.int32)
    out, offsets, source = normalize(values, np.arange(0x110001, dtype=np.int64), form)
    reference = getattr(hf_normalizers, form)()
    expected = [reference.normalize_str(scalar(c)) for c in range(0x110000)]
    assert expected == [reference_normalize(form, scalar(c)) for c in range(0x110000)]
    lengths = np.fromiter(map(len, expected), dtype=np.int64, count=0x110000)
    assert np.array_equal(np.diff(offsets), lengths)
    assert out.tobytes().decode("utf-32-le") == "".join(expected)
    assert np.array_equal(source, np.repeat(np.arange(0x110000), lengths))  # one text each: all its own


def test_what_the_reference_lacks_stays():
    """Newer than huggingface's Unicode: U+1FBF0's compatibility digit, U+32FF's square era name, the
    marks U+1AC1 / U+0898 (classes 230) and U+1ABF (220) reorder with nothing, and U+11935 U+11930
    do not compose to U+11938."""
    texts = ["\U0001fbf0\u32ff", "a\u1ac1\u0316", "a\u0301\u1abf", "e\u0898\u0316", "\U00011935\U00011930",
             "\U00011938", "a\u0316\u0301\U00011935\U00011930e\u0301"]
    for form in FORMS:
        reference = getattr(hf_normalizers, form)()
        expected = [reference.normalize_str(t) for t in texts]
        assert expected != [unicodedata.normalize(form, t) for t in texts]  # the cases are ones that differ
        out, _ = getattr(N, form)()(ingest.codepoints(texts))
        assert ingest.strings(out) == expected == [reference_normalize(form, t) for t in texts]


# Characters that decompose, compose, reorder or are Hangul, mixed with marks of every class.
_MARKS = [c for c in range(0x110000) if unicodedata.combining(chr(c))]
_DECOMPOSING = [c for c in range(0x30000) if unicodedata.decomposition(chr(c))]
_NEWER = [0x11930, 0x11935, 0x11938, 0x1FBF0, 0x32FF, 0x1AC1, 0x1ABF, 0x0898, 0x07FD, 0xA7F2, 0x10781]
_char = st.one_of(st.sampled_from(_MARKS), st.sampled_from(_DECOMPOSING), st.integers(0x1100, 0x11FF),
                  st.integers(0xAC00, 0xD7A3), st.integers(0x41, 0x7A), st.integers(0, 0x10FFFF),
                  st.sampled_from(_NEWER))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(_char, max_size=24).map(lambda cs: "".join(map(chr, cs))), max_size=6))
def test_random_strings_match_huggingface(texts):
    text = ingest.codepoints(texts)
    for form in FORMS:
        normalizer = getattr(N, form)()
        out, src = normalizer(text)
        reference = getattr(hf_normalizers, form)()
        assert ingest.strings(out) == [reference.normalize_str(t) for t in ingest.strings(text)]
        with _dispatch.use_backend("torch"):
            ref, ref_src = normalizer(text)
        assert torch.equal(out.values, ref.values) and torch.equal(out.offsets, ref.offsets)
        assert torch.equal(src, ref_src)


def huggingface_spans(form: str, texts: list[str]) -> list[list[tuple[int, int]]]:
    """Each normalized character's span in its text as huggingface aligns it: every character its
    own word, each an unknown token whose offsets are its span."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = getattr(hf_normalizers, form)()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"[\s\S]"), "isolated")
    return [e.offsets for e in tok.encode_batch(texts)]


def gputok_spans(form: str, texts: list[str]) -> list[list[tuple[int, int]]]:
    """The same from the kernel's source indices (a character's span: its source's)."""
    text = ingest.codepoints(texts)
    out, src = getattr(N, form)()(text)
    rows = (src - text.offsets[:-1].repeat_interleave(out.offsets.diff())).tolist()
    bounds = out.offsets.tolist()
    return [[(i, i + 1) for i in rows[a:b]] for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("form", FORMS)
def test_alignments_are_huggingfaces(form, parity_lines):
    """Decomposed, composed, reordered and compatibility characters sourced where huggingface puts
    them: a composite at its starter, the characters of a decomposition after its first at it, a
    mark moved by the reordering with its own tag (``x`` U+0344 U+0323: the U+0301 from U+0344
    lands after U+0323 and so at U+0323), Hangul jamo and syllables."""
    texts = ["cafe\u0301 au lait", "caf\u00e9", "\ufb01ne \u00bd", "a\u0301\u0323b", "\u1e09x", "x\u0344\u0323y",
             "\uac00\u11a8z", "\u1100\u1161\u11a8", "\u01c4x", "\u0344\u0323", "e\u0301\u0301\u0301",
             "\u0f73\u0f75\u0f81", "ｱﾞ ﬁ Ⅳ 한국어 e\u0301\u0327", ""] + [unicodedata.normalize("NFD", t)
                                                                 for t in parity_lines[::200]]
    assert gputok_spans(form, texts) == huggingface_spans(form, texts)
    with _dispatch.use_backend("torch"):
        assert gputok_spans(form, texts) == huggingface_spans(form, texts)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.lists(_char, max_size=24).map(lambda cs: "".join(map(chr, cs))), max_size=6))
def test_random_alignments_are_huggingfaces(texts):
    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]  # no str for huggingface
    for form in FORMS:
        assert gputok_spans(form, texts) == huggingface_spans(form, texts), form


def test_long_runs_of_marks_are_ordered():
    """Runs longer than the insertion sort's take the merge sort, stably."""
    rng = np.random.default_rng(0)
    text = "a" + "".join(chr(c) for c in rng.choice(_MARKS, 500)) + "e\u0301" + "\u0301" * 40
    out, offsets, _ = normalize(np.frombuffer(text.encode("utf-32-le"), dtype=np.int32),
                                np.array([0, len(text)], dtype=np.int64), "NFC")
    assert out.tobytes().decode("utf-32-le") == hf_normalizers.NFC().normalize_str(text)


@pytest.mark.parametrize("form", FORMS)
def test_real_text_and_odd_values(parity_lines, form):
    texts = parity_lines[::20] + ["", "a\ud800\u0301", "ﬁ Ⅳ ｱﾞ 한국어 e\u0301\u0327"]
    text = ingest.codepoints(texts)
    values = torch.cat([text.values, torch.tensor([-5, 0x110000, 0xDC00], dtype=torch.int32)])
    text = Ragged(values, torch.cat([text.offsets, text.offsets[-1:] + 3]))  # values no codepoint: U+FFFD
    normalizer = getattr(N, form)()
    out, src = normalizer(text)
    with _dispatch.use_backend("torch"):
        ref, ref_src = normalizer(text)
    assert out.values.dtype == ref.values.dtype == torch.int32 and src.dtype == ref_src.dtype == torch.int64
    assert torch.equal(out.offsets, ref.offsets) and torch.equal(out.values, ref.values)
    assert torch.equal(src, ref_src)
