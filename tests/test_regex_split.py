"""The tensorized regex split (gputok.regex_split) against the ``regex`` module, span for span.

``regex.finditer(PATTERNS[rule], text)`` is the reference, with the classes tiktoken reads
(:func:`reference_pattern`; the tables are checked against tiktoken and huggingface, codepoint
for codepoint). Checked: the whole ~20 MB parity
corpus (English, Chinese kernel docs, accented text) for gpt2, cl100k and o200k; every codepoint
(the class tables); random mixes with hypothesis; long runs and chains (time must stay linear);
the slow general fallback; the pattern strings themselves against tiktoken's; and, on real lines,
tiktoken itself (Rust fancy-regex), through token ids.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import re
import time
from pathlib import Path

import numpy as np
import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputok import _dispatch, assets, regex_split, unicode
from gputok.ingest import codepoints
from gputok.pre_tokenizers import Words
from gputok.regex_split import PATTERNS, class_tables, split, split_with_regex
from gputok.unicode import MAX_CODEPOINT

RULES = ["gpt2", "cl100k", "o200k"]
ROOT = Path(__file__).resolve().parents[1]


BACKENDS = ["numba", "torch"]  # the CPU kernel and the tensor twin (the CUDA path)


@functools.lru_cache(maxsize=None)
def reference_pattern(rule: str) -> str:
    """``PATTERNS[rule]`` for the installed ``regex`` module, with the classes tiktoken reads
    (the tables; regex >= 2025.10.23 reads Unicode 17): :func:`regex_split.with_table_classes`,
    checked codepoint for codepoint below. The contraction letters are literals: the module must
    fold them as the tables do."""
    assert np.array_equal(regex_split._regex_module_tables()["letters"], class_tables()[1].numpy())
    return regex_split.with_table_classes(PATTERNS[rule])


def reference(texts: list[str], pattern: str) -> tuple[list[int], list[int], list[int]]:
    """Flat (starts, ends, text_offsets) of regex.finditer over each text, in batch positions."""
    finditer = regex.compile(pattern).finditer
    starts: list[int] = []
    ends: list[int] = []
    counts = [0]
    base = 0
    for text in texts:
        for m in finditer(text):
            s, e = m.span()
            starts.append(base + s)
            ends.append(base + e)
        base += len(text)
        counts.append(len(starts))
    return starts, ends, counts


def mismatched_texts(words: Words, texts: list[str], ref) -> list[int]:
    """Indices of the texts whose spans differ (the slow path, only run when something differs)."""
    starts, ends, counts = ref
    gs, ge, go = words.starts.tolist(), words.ends.tolist(), words.text_offsets.tolist()
    if len(go) != len(counts):
        return list(range(len(texts)))
    return [i for i in range(len(texts))
            if list(zip(gs[go[i]:go[i + 1]], ge[go[i]:go[i + 1]])) != list(zip(starts[counts[i]:counts[i + 1]], ends[counts[i]:counts[i + 1]]))]


def assert_parity(texts: list[str], rule: str, *, label: str = "") -> Words:
    """The numba kernel and the tensor twin both give regex.finditer's spans."""
    ref = reference(texts, reference_pattern(rule))
    cps = codepoints(texts)
    for backend in BACKENDS:
        with _dispatch.use_backend(backend):
            words = split(cps, rule)
        same = (words.starts.tolist() == ref[0] and words.ends.tolist() == ref[1]
                and words.text_offsets.tolist() == ref[2])
        if not same:
            bad = mismatched_texts(words, texts, ref)
            examples = [texts[i][:200] for i in bad[:5]]
            raise AssertionError(f"{rule}{label} ({backend}): {len(bad)} of {len(texts)} texts differ from "
                                 f"regex.finditer: {examples!r}")
    return words


def assert_tiles(texts: list[str], rule: str) -> None:
    """The assumption of the module: these patterns match every character (matches tile a text)."""
    for text in texts:
        position = 0
        for m in regex.finditer(reference_pattern(rule), text):
            assert m.start() == position, (rule, text, m.span())
            position = m.end()
        assert position == len(text), (rule, text)


# ---- the pattern strings ---------------------------------------------------------------------

def test_patterns_are_tiktokens():
    op = pytest.importorskip("tiktoken_ext.openai_public")
    assert PATTERNS["gpt2"] == PATTERNS["r50k"] == PATTERNS["p50k"] == op.r50k_pat_str
    for name in ("gpt2", "r50k_base", "p50k_base", "p50k_edit"):
        assert '"pat_str": r50k_pat_str' in inspect.getsource(getattr(op, name))
    cl100k = re.findall(r'"pat_str": r"""(.*?)"""', inspect.getsource(op.cl100k_base))
    assert cl100k == [PATTERNS["cl100k"]]
    o200k_parts = re.findall(r'r"""(.*?)"""', inspect.getsource(op.o200k_base))
    assert len(o200k_parts) == 7 and "|".join(o200k_parts) == PATTERNS["o200k"]


# ---- real text: the ~20 MB parity corpus -----------------------------------------------------

@pytest.fixture(scope="module")
def corpus(parity_lines):
    return parity_lines, codepoints(parity_lines)


_CORPUS_REFERENCE: dict = {}


def _corpus_reference(rule: str, lines: list[str]):
    """regex.finditer over the corpus, once per rule (both backends compare with it)."""
    if rule not in _CORPUS_REFERENCE:
        _CORPUS_REFERENCE[rule] = reference(lines, reference_pattern(rule))
    return _CORPUS_REFERENCE[rule]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule", RULES)
def test_parity_corpus_span_for_span(corpus, rule, backend):
    lines, cps = corpus
    with _dispatch.use_backend(backend):
        split(codepoints(["warm up"]), rule)
        t0 = time.perf_counter()
        words = split(cps, rule)
        t_split = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = _corpus_reference(rule, lines)
    t_regex = time.perf_counter() - t0
    same = (torch.equal(words.starts, torch.tensor(ref[0], dtype=torch.int64))
            and torch.equal(words.ends, torch.tensor(ref[1], dtype=torch.int64))
            and words.text_offsets.tolist() == ref[2])
    bad = [] if same else mismatched_texts(words, lines, ref)
    print(f"\n{rule} ({backend}): {len(lines)} lines ({cps.values.numel()} codepoints, {len(ref[0])} words) compared, "
          f"{len(bad)} mismatched; split {t_split:.2f}s, regex.finditer {t_regex:.2f}s")
    assert same, f"{len(bad)} lines differ, e.g. {[lines[i][:200] for i in bad[:5]]!r}"
    assert cps.values.numel() > 18_000_000  # the whole corpus, ~20 MB of UTF-8


# ---- every codepoint -----------------------------------------------------------------------

ALL = "".join(chr(c) for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000)


@pytest.mark.parametrize("rule", RULES)
def test_every_codepoint(rule):
    # In order (runs of neighbours of one class), and each one after a space and before a letter.
    texts = [ALL[i:i + 4096] for i in range(0, len(ALL), 4096)]
    assert_tiles(texts[:64] + texts[-8:], rule)
    assert_parity(texts, rule, label=" (all codepoints in order)")
    mixed = "".join(f" {ALL[i]}a{ALL[i + 1]}'s{ALL[i + 2]}1 " for i in range(0, len(ALL) - 2, 97))
    assert_parity([mixed], rule, label=" (codepoints in context)")


def test_class_tables_are_tiktokens_and_huggingfaces():
    """gputok/_split_classes.py holds, for every codepoint, the classes tiktoken's regex engine
    reads (asked through tools/make_split_classes.py's probe), and huggingface's reads the same."""
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    tool = ROOT / "tools" / "make_split_classes.py"
    if not tool.exists():
        pytest.skip("needs the repository's tools/ (not shipped in the package)")
    spec = importlib.util.spec_from_file_location("make_split_classes", tool)
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    classes, letters = (t.numpy() for t in class_tables())
    expected_classes, expected_letters = make.reference_tables()
    assert np.array_equal(classes, expected_classes), np.nonzero(classes != expected_classes)[0][:10]
    for code, ch in enumerate(regex_split._LETTERS, 1):
        assert np.nonzero(letters == code)[0].tolist() == expected_letters[ch], ch
    for bit, pattern in make.CLASSES.items():
        assert np.array_equal(make.huggingface_mask(pattern), (classes & bit) != 0), pattern
    c = classes.astype(np.int64)
    assert np.array_equal((c & 1) != 0, (c & (8 | 16 | 32)) != 0)  # \p{L} is exactly Lu Ll Lt Lm Lo
    for a, b in [(1, 2), (1, 4), (1, 64), (2, 4), (2, 64), (4, 64)]:  # L, N, \s, M are disjoint
        assert not ((c & a) != 0)[(c & b) != 0].any(), (a, b)
    assert letters[ord("s")] == letters[ord("S")] == letters[0x17F] == 1 and letters[ord("x")] == 0  # ſ folds to s
    assert classes[0x16EBB] == 0 and classes[0x10D50] & 1  # new in Unicode 17 / 16


def test_regex_module_agrees_where_its_unicode_is_the_tables():
    newer = regex.match(r"\p{L}", "\U00016ebb") is not None  # regex >= 2025.10.23: Unicode 17
    assert regex_split.regex_module_agrees("\U00016ebb:A") is not newer
    assert regex_split.regex_module_agrees(np.array([0x16EBB, 0x41])) is not newer
    assert regex_split.regex_module_agrees("Hello, 世界 é ١٢") and regex_split.regex_module_agrees("")
    # split reads the tables' classes: tiktoken's pieces, not the module's.
    words = split(codepoints(["\U00016ebb:A", "x"]), "cl100k")
    assert words.starts.tolist() == [0, 2, 3]  # U+16EBB is no letter: "\U00016ebb:", "A", "x"
    words = split(codepoints(["\u0295Ab"]), "o200k")
    assert words.starts.tolist() == [0, 1]  # U+0295 is lowercase (Lo in Unicode 17): "\u0295", "Ab"


def test_an_unwritable_cache_dir_only_costs_the_build(monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPUTOK_CACHE", str(tmp_path / "a-file" / "cache"))
    builds = []
    build = lambda: builds.append(1) or {"x": np.arange(3)}  # noqa: E731
    assert unicode.disk_cached("probe", build)["x"].tolist() == [0, 1, 2]
    assert unicode.disk_cached("probe", build)["x"].tolist() == [0, 1, 2] and len(builds) == 2
    monkeypatch.setattr(regex_split, "_regex_module_differs", functools.lru_cache(maxsize=1)(
        regex_split._regex_module_differs.__wrapped__))  # built afresh, under the unwritable dir
    assert regex_split.regex_module_agrees("Hello, 世界")


# ---- any other pattern: the tables' classes through the regex module ---------------------

LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
          r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
# Each spelling of a class the tables hold, with the table bits it must match exactly.
_L, _N, _WS, _UP, _LO, _BL, _M = 1, 2, 4, 8, 16, 32, 64
SPELLINGS = {
    r"\p{L}": (_L, False), r"\pL": (_L, False), r"\p{Letter}": (_L, False), r"\p{gc=L}": (_L, False),
    r"\P{L}": (_L, True), r"\p{^L}": (_L, True), r"[^\p{L}]": (_L, True), r"[\p{L}]": (_L, False),
    r"\p{N}": (_N, False), r"\pN": (_N, False), r"\p{Number}": (_N, False), r"\P{N}": (_N, True),
    r"\s": (_WS, False), r"\S": (_WS, True), r"[\s]": (_WS, False), r"[^\s]": (_WS, True),
    r"\p{M}": (_M, False), r"\p{Mark}": (_M, False), r"\p{Ll}": (_LO, False), r"[\p{Lu}\p{Lt}]": (_UP, False),
    r"[\p{Lm}\p{Lo}]": (_BL, False), r"[\p{L}\p{N}]": (_L | _N, False), r"[^\s\p{L}\p{N}]": (_WS | _L | _N, True),
    r"[^\r\n\p{L}\p{N}]": (_L | _N, True),  # \r and \n are not changed codepoints
}


def _matches_everywhere(pattern: str) -> np.ndarray:
    """Which codepoints (all of them, surrogates excepted) the compiled pattern matches alone."""
    everything = "".join(chr(c) for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000)
    marked = regex.sub(pattern, "\x00", everything)
    assert len(marked) == len(everything), pattern
    hit = np.frombuffer(marked.encode("utf-32-le"), dtype=np.uint32) == 0
    mask = np.zeros(MAX_CODEPOINT, dtype=bool)
    mask[[c for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000]] = hit
    mask[0] = regex.fullmatch(pattern, "\x00") is not None
    return mask


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_with_table_classes_reads_every_class_spelling_as_the_tables(spelling):
    bits, negated = SPELLINGS[spelling]
    classes = class_tables()[0].numpy()
    want = ((classes & bits) != 0) != negated
    if spelling.startswith("[^\\r\\n"):
        want[[0x0D, 0x0A]] = False
    want[0xD800:0xE000] = False  # surrogates are never in a text (replaced at ingestion)
    got = _matches_everywhere(regex_split.with_table_classes(spelling))
    assert np.array_equal(got, want), [hex(c) for c in np.nonzero(got != want)[0][:10]]
    # The same under (?i), scoped or not, where no case pair crosses the class (U+0345, a mark,
    # folds to a letter: (?i)[^\p{L}] leaves it out in either Unicode)
    if spelling in (r"\p{L}", r"\p{N}", r"\S"):
        for flagged in (f"(?i){spelling}", f"(?i:{spelling})", f"(?i:(?:{spelling}))", f"(?i)[@]|{spelling}"):
            expected = want.copy()
            expected[ord("@")] |= "@" in flagged
            assert np.array_equal(_matches_everywhere(regex_split.with_table_classes(flagged)), expected), flagged


# Classes the tables do not hold, as huggingface (Oniguruma, Unicode 16) reads them on the changed
# codepoints (where the regex module's Unicode differs): \p{Lu} \p{Lo} \d \p{Han}, and the symbols
# and punctuation new in Unicode 17 (U+1F8D0-U+1F8D8 arrows, U+20C1 a currency sign) ...
OTHER_CLASSES = [r"\p{Lu}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{Nd}", r"\d", r"\D", r"\p{Nl}", r"\p{No}",
                 r"\p{Mn}", r"\p{Mc}", r"\p{Han}", r"\p{Latin}", r"\p{Cn}", r"[\p{Han}\d]", r"[^\w\s]",
                 r"\p{P}", r"\p{Po}", r"\p{S}", r"\p{Sm}", r"\p{So}", r"\p{Sc}", r"[\p{P}\p{S}]", r"\P{C}"]


@pytest.mark.parametrize("spelling", OTHER_CLASSES)
def test_with_table_classes_reads_other_classes_as_huggingface(spelling):
    pytest.importorskip("tokenizers")
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import Split as HfSplit

    stand_ins = regex_split._stand_ins()
    if stand_ins is None:
        pytest.skip("the installed regex module reads Unicode as the tables do")
    # The codepoints huggingface reads as unassigned and the module not, found here without the
    # stand-ins, then some neighbours that did not change.
    everything = "".join(chr(c) for c in range(1, MAX_CODEPOINT) if not 0xD800 <= c < 0xE000)
    assigned = "".join(text for text, _ in HfSplit(Regex(r"\p{Cn}"), "removed").pre_tokenize_str(everything))
    new = set(everything) - set(assigned)
    new &= {c for c in new if regex.fullmatch(r"\p{Cn}", c) is None}
    changed = "".join(sorted(set(stand_ins[0]) | new)) + "\u0294\u0296a1 \u4e00"
    pieces = HfSplit(Regex(spelling), "removed").pre_tokenize_str("\x00".join(changed))
    kept = {text for text, _ in pieces}  # "removed" keeps what does not match
    hf = [c not in kept and not any(c in k for k in kept) for c in changed]
    compiled = regex.compile(regex_split.with_table_classes(spelling))
    ours = [compiled.fullmatch(c) is not None for c in changed]
    differ = [hex(ord(c)) for c, a, b in zip(changed, hf, ours) if a != b]
    assert not differ, differ[:10]


@pytest.mark.parametrize("spelling", [r"\w", r"\W", r"[^\w\s]", r"[\w']", r"(?i)\w"])
def test_word_class_reads_as_oniguruma_on_every_codepoint(spelling):
    """Oniguruma's \\w (huggingface's) is not the regex module's: the Latin-1 superscripts and
    fractions are word characters, U+200C/U+200D are not."""
    pytest.importorskip("tokenizers")
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import Split as HfSplit

    codepoints = [c for c in range(1, MAX_CODEPOINT) if not 0xD800 <= c < 0xE000]
    everything = "".join(map(chr, codepoints))
    outside = np.zeros(len(codepoints) + 1, dtype=np.int64)
    for _, (start, end) in HfSplit(Regex(spelling), "removed").pre_tokenize_str(everything):
        outside[start] += 1
        outside[end] -= 1
    want = np.zeros(MAX_CODEPOINT, dtype=bool)
    want[np.array(codepoints)[np.cumsum(outside)[:-1] == 0]] = True
    want[0] = _matches_everywhere(regex_split.with_table_classes(spelling))[0]  # NUL is not probed
    got = _matches_everywhere(regex_split.with_table_classes(spelling))
    assert np.array_equal(got, want), [hex(c) for c in np.nonzero(got != want)[0][:10]]
    w = regex_split.split_with_regex(["x\u00b2y \u00bd\u200c"], spelling + "+")  # the path without stand-ins
    hf = HfSplit(Regex(spelling + "+"), "isolated").pre_tokenize_str("x\u00b2y \u00bd\u200c")
    assert list(zip(w.starts.tolist(), w.ends.tolist())) == [span for _, span in hf]


def test_with_table_classes_keeps_the_rest_of_the_pattern():
    assert regex_split.with_table_classes(r"a+|[xyz]|\\p{L}|(?i:k)|\x41|\N{BULLET}") == r"a+|[xyz]|\\p{L}|(?i:k)|\x41|\N{BULLET}"
    for pattern in [LLAMA3] + list(PATTERNS.values()) + [r"[]\p{L}]+", r"[\]\s]|[[:alpha:]]+", r"(?#x\p{L})\p{L}"]:
        rewritten = regex_split.with_table_classes(pattern)
        regex.compile(rewritten)
        text = "Hello world's  1234 \u4e2d\u6587 \t!?\n[] ]] \U00016ebb'm \u0295x"
        if regex_split.regex_module_agrees(text):
            continue
        ascii_text = "Hello world's  1234 \t!?\n[] ]]"
        assert regex.findall(rewritten, ascii_text) == regex.findall(pattern, ascii_text), pattern


NEW_IN_UNICODE_17 = ["\U00016ebb'm", "\U00016ebb;a", "a\U00011db0'S", "\U000323b0\U000323b1's1", "!\u088f x",
                     "\u0295'd", "x\U0001e6c0\u0c5c 12"]
ISSUE_EXAMPLES = ["\U000107bf;a", "\u058c'm"]


def _tiny_byte_level(tmp_path: Path, pattern: str):
    """A byte-level BPE with merges across the pieces that differ (``'m``, ``;a``...), split by
    ``pattern``, as a gputok Tokenizer and as the huggingface Tokenizer of its tokenizer.json."""
    import base64

    tokenizers = pytest.importorskip("tokenizers")
    from gputok import Tokenizer

    tokens = [bytes([b]) for b in range(256)] + [b"'m", b"'S", b"'d", b";a", b"'s", b"\xf0\x96"]
    path = tmp_path / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    ours = Tokenizer.from_tiktoken(str(path), pattern=pattern)
    ours.save(str(tmp_path / "tiny.json"))
    return ours, tokenizers.Tokenizer.from_file(str(tmp_path / "tiny.json"))


def test_a_split_regex_reads_unicode_17_letters_as_huggingface(tmp_path, monkeypatch):
    """Issue 22 item 7: the Llama 3 split on characters new in Unicode 17 (regex >= 2025.10.23
    reads them as letters, huggingface as unassigned)."""
    ours, hf = _tiny_byte_level(tmp_path, LLAMA3)
    texts = NEW_IN_UNICODE_17 + ISSUE_EXAMPLES
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert [list(ours.encode(t)) for t in texts] == expected  # one by one: the small Python path
    assert [list(ids) for ids in ours.encode_batch(texts)] == expected  # the batch path
    from gputok.pre_tokenizers import Split

    words = Split(LLAMA3)(codepoints(["\U00016ebb'm"]))
    assert list(zip(words.starts.tolist(), words.ends.tolist())) == [(0, 2), (2, 3)]  # "\U00016ebb'", "m"


def test_replace_regexes_read_the_tables_classes():
    from gputok.decoders import ReplaceDecoder
    from gputok.normalizers import Replace

    assert ReplaceDecoder({"Regex": r"\p{L}"}, "_").decode_chain(["a\U00016ebb"]) == ["_\U00016ebb"]
    out, _ = Replace({"Regex": r"\p{L}+"}, "_")(codepoints(["ab\U00016ebbc"]))
    assert "".join(map(chr, out.values.tolist())) == "_\U00016ebb_"


# ---- random mixes ---------------------------------------------------------------------------

ATOMS = [
    "a", "b", "Z", "e", "s", "t", "é", "ß", "ſ", "ǅ", "ʰ", "Ω", "ж", "中", "文", "字", "あ", "ー",
    "0", "7", "١", "٣", "²", "Ⅻ", "½",
    "'", "''", "'s", "'S", "'t", "'T", "'d", "'D", "'m", "'M", "'ll", "'LL", "'lL", "'re", "'RE", "'Re",
    "'rE", "'ve", "'VE", "'x", "don't", "it's", "we'LL", "'s's's",
    " ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\u00a0", "\u3000", "\u2028",
    "\u2029", "\u0085", "\u000b", "\u000c", "\u1680", "\u2007",
    ".", ",", "!", "?", "!!", "...", "/", "//", "-", "(", ")", "@", "#", "$", "€", "«", "»", "「", "」",
    "\u0301", "\u0300", "e\u0301", "!\u0301", "\u0301\u0301", "\u064b", "\u20dd",
    "😀", "👍🏽", "🇫🇷", "\x00", "\x01", "\x1c", "\x1f", "\x7f", "\u200b", "\u200d", "\ufeff", "\ufffd",
    "HTTPServer", "camelCase", "ABC中DEF", "x123456", "  x", "x  ", "a\n  ",
]
TEXT = st.lists(st.one_of(st.sampled_from(ATOMS), st.characters(exclude_categories=["Cs"])), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, max_size=6))
def test_random_mixes(texts):
    for rule in RULES:
        assert_tiles(texts, rule)
        assert_parity(texts, rule)


# ---- edge cases and long runs --------------------------------------------------------------

@pytest.mark.parametrize("rule", RULES + ["r50k", "p50k"])
def test_empty_and_tiny(rule):
    words = split(codepoints([]), rule)
    assert words.starts.numel() == 0 and words.text_offsets.tolist() == [0]
    words = split(codepoints(["", ""]), rule)
    assert words.starts.numel() == 0 and words.text_offsets.tolist() == [0, 0, 0]
    assert_parity(["", "a", "", " ", "   ", "\n", "", "'s", "1", ""], rule)
    assert_parity(["     "], rule)


M = 1_000_000
K = 200_000  # chains produce a word every few chars: shorter, so that the reference stays quick
LONG = {
    "one letter": "a" * M,
    "digits": "7" * M,
    "spaces": " " * M,
    "spaces then a word": " " * M + "x",
    "newlines and spaces": " \n" * (M // 2) + "x",
    "camel": "aB" * (K // 2),
    "words": "ab " * (K // 3),
    "apostrophe chain": "'s" * (K // 2),  # o200k pairs these up from the start: a long NX chain
    "apostrophe chain after a word": "x" + "'s" * (K // 2),
    "contraction case chain": "'rE" * (K // 3),
    "punctuation and marks": "!\u0301" * (K // 2),
    "newline slash": "!" + "\n/" * (K // 2),
}


@pytest.mark.parametrize("name", list(LONG))
def test_long_runs_stay_linear(name):
    text = LONG[name]
    cps = codepoints([text])
    for rule in RULES:
        ref = reference([text], reference_pattern(rule))
        for backend in BACKENDS:
            elapsed = []
            with _dispatch.use_backend(backend):
                for _ in range(2):  # the better of two runs: a busy machine should not fail the test
                    t0 = time.perf_counter()
                    words = split(cps, rule)
                    elapsed.append(time.perf_counter() - t0)
            assert min(elapsed) < 5.0, f"{rule} ({backend}) on {name!r}: {min(elapsed):.2f}s for {len(text)} chars"
            assert words.starts.tolist() == ref[0] and words.ends.tolist() == ref[1], (rule, backend, name)


def test_long_chains_next_to_short_texts():
    # The pointer-doubling fallback works on the texts with long chains only; others stay right.
    texts = ["abc", "'s" * 5000, "x y", "", "'s's" * 777 + " tail", "'ll" * 3001 + "'", "Zz"]
    for rule in RULES:
        assert_parity(texts, rule)


# ---- the general fallback -------------------------------------------------------------------

def test_split_with_regex_custom_pattern():
    texts = ["Hello, world!", "", "  a1_b  ", "x"]
    # Whitespace is matched by nothing: huggingface's Split keeps it as words of its own (Isolated),
    # and Removed with invert keeps the matches only.
    words = split_with_regex(texts, r"\w+|[^\w\s]+")
    spans = list(zip(words.starts.tolist(), words.ends.tolist()))
    assert spans == [(0, 5), (5, 6), (6, 7), (7, 12), (12, 13), (13, 15), (15, 19), (19, 21), (21, 22)]
    assert words.text_offsets.tolist() == [0, 5, 5, 8, 9]
    words = split_with_regex(texts, r"\w+|[^\w\s]+", behavior="Removed", invert=True)
    spans = list(zip(words.starts.tolist(), words.ends.tolist()))
    assert spans == [(0, 5), (5, 6), (7, 12), (12, 13), (15, 19), (21, 22)]
    assert words.text_offsets.tolist() == [0, 4, 4, 5, 6]
    assert words.starts.dtype == torch.int64
    empty = split_with_regex([], r"\w+")
    assert empty.starts.numel() == 0 and empty.text_offsets.tolist() == [0]


@pytest.mark.parametrize("rule", RULES)
def test_split_with_regex_agrees_with_split(rule):
    texts = ["Hello world's  end", "x123456 \n\n", "", "don't STOP  \t!?\n"]
    fast, slow = split(codepoints(texts), rule), split_with_regex(texts, PATTERNS[rule])
    assert torch.equal(fast.starts, slow.starts) and torch.equal(fast.ends, slow.ends)
    assert torch.equal(fast.text_offsets, slow.text_offsets)


def test_int64_positions(monkeypatch):
    # Batches above 2**31 codepoints index with int64; the same code path, forced on a small batch.
    monkeypatch.setattr(regex_split, "_INT32_LIMIT", 0)
    texts = ["Hello world's  end", "x123456 \n\n", "", "'s" * 40 + " HTTPServer", "\u4e2d\u6587 \t !?\n/"]
    for rule in RULES:
        assert_parity(texts, rule)  # (the tensor twin's int64 path; the kernel's positions are int64)


def test_unknown_rule():
    with pytest.raises(ValueError, match="unknown split rule"):
        split(codepoints(["a"]), "o300k")


# ---- tiktoken (Rust fancy-regex) on real lines ---------------------------------------------

@pytest.mark.parametrize("rule", RULES)
def test_tiktoken_agrees_on_real_lines(corpus, rule):
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load

    # o200k's ranks are not available offline: cl100k's ranks with o200k's pattern still show
    # whether the pieces agree (different pieces give different ids).
    vocab = "gpt2-tiktoken" if rule == "gpt2" else "cl100k-tiktoken"
    ranks = tiktoken.load.load_tiktoken_bpe(str(assets.fetch(vocab)))
    enc = tiktoken.Encoding(f"test-{rule}", pat_str=PATTERNS[rule], mergeable_ranks=ranks, special_tokens={})
    lines = corpus[0]
    sample = lines[:2000] + lines[len(lines) // 3:len(lines) // 3 + 2000] + lines[-2000:]
    cps = codepoints(sample)
    words = split(cps, rule)
    starts, ends, counts = words.starts.tolist(), words.ends.tolist(), words.text_offsets.tolist()
    base = cps.offsets.tolist()
    whole = enc.encode_ordinary_batch(sample)
    differ = []
    for i, line in enumerate(sample):
        ids = [t for j in range(counts[i], counts[i + 1])
               for t in enc._encode_single_piece(line[starts[j] - base[i]:ends[j] - base[i]])]
        if ids != whole[i]:
            differ.append(line)
    print(f"\n{rule}: {len(sample)} lines compared with tiktoken, {len(differ)} differ")
    assert not differ, differ[:5]


# ---- devices -------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("rule", RULES)
def test_cuda_matches_cpu(rule):
    texts = ["Hello world's  end", "x123456 \n\n", "", "don't STOP  \t!?\n", "'s" * 100, "中文 camelCase HTTPServer"]
    cpu = split(codepoints(texts), rule)
    gpu = split(codepoints(texts, device="cuda"), rule)
    assert gpu.starts.device.type == "cuda"
    assert torch.equal(cpu.starts, gpu.starts.cpu()) and torch.equal(cpu.ends, gpu.ends.cpu())
    assert torch.equal(cpu.text_offsets, gpu.text_offsets.cpu())


@pytest.mark.parametrize("rule", RULES)
def test_hf_spelling_splits_like_the_regex_module_in_huggingface(rule, parity_lines):
    """A saved tokenizer.json carries ``hf_spelling(pattern)``: huggingface's Oniguruma must split
    with it exactly as the regex module splits with the pattern (it reads cl100k's possessive
    ``{1,3}+`` as "any digit run", hence the spelling)."""
    from tokenizers import Regex
    from tokenizers.pre_tokenizers import Split

    hf = Split(Regex(regex_split.hf_spelling(PATTERNS[rule])), "isolated")
    lines = parity_lines[::97] + ["1913 12345678 x1234567", "2024-01-15 3.14159 ١٢٣٤٥"]
    finditer = regex.compile(reference_pattern(rule)).finditer
    for line in lines:
        assert [span for _, span in hf.pre_tokenize_str(line)] == [m.span() for m in finditer(line)], line
    if rule == "cl100k":  # the pattern as written would not do
        raw = Split(Regex(PATTERNS[rule]), "isolated").pre_tokenize_str("1913")
        assert [piece for piece, _ in raw] == ["1913"]


# ---- huggingface Split: every behavior, invert, text the pattern does not cover ----------------

SPLIT_PATTERNS = ["a", r"\s+", r"\d", r"[^\s]+", "x*"]
SPLIT_BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]


def _split_tokenizer_json(split: dict, *, byte_level: bool = True) -> str:
    """A byte-level BPE behind ``split`` (all 256 bytes and two merges); ``byte_level=False``:
    the Split alone (huggingface's words in plain text, for pre_tokenize_str)."""
    import json

    from gputok.models.bpe import byte_decoder

    alphabet = sorted(byte_decoder(), key=byte_decoder().get)
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({"ab": 256, "xx": 257})
    pre = {"type": "Sequence", "pretokenizers": [
        split, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": pre if byte_level else split, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["a b", "x x"]}})


def _split_texts() -> list[str]:
    rng = np.random.default_rng(22)
    alphabet = list("abx1 2\t") + ["é", "\n"]
    texts = ["ab c", "", "a", "aa", " a ", "xax", "axb", "xxaxx", "1a2", "  ", "a  b\t1"]
    texts += ["".join(rng.choice(alphabet, size=int(rng.integers(0, 12)))) for _ in range(200)]
    return texts


@pytest.mark.parametrize("invert", [False, True], ids=["plain", "invert"])
@pytest.mark.parametrize("behavior", SPLIT_BEHAVIORS)
@pytest.mark.parametrize("pattern", SPLIT_PATTERNS)
def test_split_behaviors_match_huggingface(pattern, behavior, invert):
    """Before: gputok read only Isolated/invert=false, and dropped the text its regex did not
    match ("ab c" with pattern "a": only "a"; huggingface keeps "b c"). Words and ids against
    huggingface's pre_tokenize_str and encode: text by text, and as one batch large enough to be
    cut into chunks on several threads (``gputok._cpu_threads``)."""
    import json

    tokenizers = pytest.importorskip("tokenizers")
    from gputok import Tokenizer
    from gputok._cpu_threads import MIN_CHUNK_CHARS

    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}
    text = _split_tokenizer_json(split)
    ours, reference = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    hf_split = tokenizers.Tokenizer.from_str(_split_tokenizer_json(split, byte_level=False)).pre_tokenizer
    texts = _split_texts()
    expected_words = [[w for w, _ in hf_split.pre_tokenize_str(t)] for t in texts]
    assert ours.pre_tokenizer.words_of(texts) == expected_words
    words = ours.pre_tokenizer(codepoints(texts))
    joined = "".join(texts)
    assert [joined[s:e] for s, e in zip(words.starts.tolist(), words.ends.tolist())] == sum(expected_words, [])
    assert words.text_offsets.tolist() == np.cumsum([0] + [len(ws) for ws in expected_words]).tolist()
    expected_ids = [e.ids for e in reference.encode_batch(texts)]
    assert [ours.encode(t) for t in texts] == expected_ids
    many = texts * (4 * MIN_CHUNK_CHARS // sum(map(len, texts)) + 1)
    assert ours.encode_batch(many) == expected_ids * (len(many) // len(texts))
    assert ours.to_json()["pre_tokenizer"]["pretokenizers"][0] == split  # saved as read
    assert Tokenizer.from_str(json.dumps(ours.to_json())).encode_batch(texts) == expected_ids
