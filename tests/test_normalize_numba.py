"""The ingest and normalizer numba kernels equal their torch twins (``_dispatch.use_backend("torch")``):
values, offsets, source indices and their dtypes, on real text, random Unicode and odd shapes."""

import random

import pytest
import torch

from gputok import _dispatch, assets, ingest
from gputok import normalizers as N
from gputok.ragged import Ragged
from gputok.sentencepiece_model import read_model

WHITE = [0x09, 0x0A, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2007, 0x200A, 0x2028, 0x2029, 0x202F, 0x3000]


def random_texts(seed: int, count: int = 400, longest: int = 40, alphabet=None) -> list[str]:
    """Texts over all planes, with combining marks, CJK, Hangul jamo, emoji, runs of (Unicode)
    white space, compatibility characters and lone surrogates."""
    rng = random.Random(seed)
    pickers = [lambda: rng.randint(0x20, 0x7E), lambda: rng.randint(0, 0x10FFFF), lambda: rng.randint(0x300, 0x36F),
               lambda: rng.randint(0x4E00, 0x9FFF), lambda: rng.randint(0x1100, 0x11FF),
               lambda: rng.randint(0xAC00, 0xD7A3), lambda: rng.randint(0x1F300, 0x1FAFF), lambda: rng.choice(WHITE),
               lambda: 0x20, lambda: rng.choice([0xFB01, 0x130, 0x212B, 0xFF21, 0xFF76, 0xFF9E, 0x2160, 0x00C5]),
               lambda: rng.randint(0xD800, 0xDFFF), lambda: rng.choice([0, 0xFFFD, 0x200B, 0xE000, 0x7F])]
    if alphabet is not None:
        pickers = [lambda: rng.choice(alphabet)] * 4 + [lambda: 0x20]
    return ["".join(chr(rng.choice(pickers)()) for _ in range(rng.randint(0, longest))) for _ in range(count)]


ODD = [[], [""], ["", "", ""], ["x"], [" "], ["\u0301"], ["  Hello   wörld  ｱ "], ["a\u3000b", "", "ﬁ"]]


@pytest.fixture(scope="module")
def batches(parity_lines):
    lines = parity_lines[::max(1, len(parity_lines) // 6000)]  # English, Chinese, Shakespeare, GO terms
    long_text = "".join(random_texts(7, count=6000, longest=60))[:200_000]
    return [lines, random_texts(1), random_texts(2, count=50, longest=400), [long_text], *ODD]


def assert_same(numba_result, torch_result):
    (out, src), (ref, ref_src) = numba_result, torch_result
    assert out.values.dtype == ref.values.dtype and out.offsets.dtype == ref.offsets.dtype
    assert src.dtype == ref_src.dtype
    assert torch.equal(out.offsets, ref.offsets)
    assert torch.equal(out.values, ref.values)
    assert torch.equal(src, ref_src)


@pytest.fixture(autouse=True)
def numba_backend():
    """The kernels run even where GPUTOK_BACKEND names another backend for the rest of the suite."""
    with _dispatch.use_backend("numba"):
        yield


def check(normalizer, batches):
    for texts in batches:
        text = ingest.codepoints(texts)
        with _dispatch.use_backend("torch"):
            ref = normalizer(text)
        assert_same(normalizer(text), ref)


def test_codepoints_and_utf8(batches):
    for texts in batches + [random_texts(3, count=50), [chr(0xD800) + "a" + chr(0xDFFF)]]:
        cps = ingest.codepoints(texts)
        with _dispatch.use_backend("torch"):
            ref = ingest.codepoints(texts)
            ref_bytes = ingest.utf8_bytes(ref)
        assert cps.values.dtype == ref.values.dtype == torch.int32
        assert torch.equal(cps.values, ref.values) and torch.equal(cps.offsets, ref.offsets)
        assert cps.offsets.dtype == ref.offsets.dtype
        assert_same(ingest.utf8_bytes(cps), ref_bytes)
        assert bytes(ingest.utf8(texts).values.numpy()) == ingest.without_surrogates("".join(texts)).encode("utf-8")
    assert ingest.codepoints(["a\ud800b"]).values.tolist() == [97, 0xFFFD, 98]
    assert ingest.strings(ingest.codepoints(["hé", "", "€"])) == ["hé", "", "€"]


def test_utf8_bytes_of_int64_and_ascii():
    words = Ragged.from_lengths(torch.tensor([104, 233, 8364, 0x1F600, 97]), torch.tensor([1, 0, 3, 1]))
    with _dispatch.use_backend("torch"):
        ref = ingest.utf8_bytes(words)
        ascii_ref = ingest.utf8_bytes(Ragged.from_lengths(torch.tensor([104, 105]), torch.tensor([2])))
    assert_same(ingest.utf8_bytes(words), ref)
    assert_same(ingest.utf8_bytes(Ragged.from_lengths(torch.tensor([104, 105]), torch.tensor([2]))), ascii_ref)


@pytest.mark.parametrize("clean_text", [True, False])
@pytest.mark.parametrize("handle_chinese_chars", [True, False])
@pytest.mark.parametrize("strip_accents", [None, True, False])
@pytest.mark.parametrize("lowercase", [True, False])
def test_bert(batches, clean_text, handle_chinese_chars, strip_accents, lowercase):
    check(N.BertNormalizer(clean_text=clean_text, handle_chinese_chars=handle_chinese_chars,
                           strip_accents=strip_accents, lowercase=lowercase), batches)


@pytest.mark.parametrize("normalizer", [
    N.Lowercase(), N.Prepend("▁"), N.Prepend(""), N.Prepend("ab"), N.Replace({"String": " "}, "▁"),
    N.Replace({"String": "a"}, ""), N.Replace({"String": "e"}, "xyz"), N.Replace({"String": "ab"}, "X"),
    N.Replace({"Regex": "^ +| +$"}, ""), N.Replace({"Regex": " {2,}"}, " "), N.Replace({"Regex": "a*"}, "-"),
    N.Replace({"Regex": "\\A +| +\\z"}, ""), N.Replace({"Regex": "\\A\\s{2,}|\\s{2,}\\z"}, "<>"),
    N.Replace({"Regex": "\\s+"}, "▁"), N.Replace({"Regex": " {3,}"}, ""), N.Replace({"Regex": "[ \\t\u3000]+"}, "_"),
    N.Replace({"Regex": "\\p{Zs}{2,}"}, " "), N.Replace({"Regex": "\\.+"}, "."), N.Replace({"String": "``"}, '"'),
    N.Replace({"String": "aa"}, "b"), N.Replace({"String": "\u3000 "}, ""), N.Replace({"Regex": "\\d"}, "0"),
    N.Replace({"Regex": "\\s{2,3}"}, "_"), N.Replace({"Regex": "[ \u3000]{2}"}, ""),
    N.Strip(), N.Strip(strip_left=False), N.Strip(strip_right=False), N.Strip(strip_left=False, strip_right=False),
    N.NFC(), N.NFD(), N.NFKC(), N.NFKD(), N.Sequence([]),
    N.Sequence([N.NFKC(), N.Strip(), N.Lowercase(), N.Prepend("▁"), N.Replace({"String": " "}, "▁")]),
], ids=lambda n: str(n.to_json()))
def test_other_normalizers(batches, normalizer):
    check(normalizer, batches)


def test_int64_input():
    """Codepoints held as int64 keep their dtype where the torch twin keeps it."""
    text = Ragged.from_lengths(torch.tensor([32, 97, 32, 0xE9, 32], dtype=torch.int64), torch.tensor([2, 0, 3]))
    for normalizer in (N.Prepend("▁"), N.Replace({"String": " "}, "▁"), N.Strip(), N.Lowercase(), N.BertNormalizer()):
        with _dispatch.use_backend("torch"):
            ref = normalizer(text)
        assert_same(normalizer(text), ref)


def test_codepoint_outside_the_tables_is_refused():
    text = Ragged.from_lengths(torch.tensor([0x110000], dtype=torch.int32), torch.tensor([1]))
    for normalizer in (N.Lowercase(), N.Strip()):
        with pytest.raises(ValueError, match="outside"):
            normalizer(text)


def sentencepiece_charsmaps():
    specs = [read_model(str(assets.fetch(name))).normalizer for name in ("sp-test-model", "mistral-sp-model")]
    return [spec.precompiled_charsmap for spec in specs]


@pytest.fixture(scope="module")
def charsmaps():
    return sentencepiece_charsmaps()


def test_precompiled(charsmaps, batches):
    blob = charsmaps[0]
    assert blob, "the SentencePiece test model has a charsmap (nmt_nfkc)"
    normalizer = N.Precompiled(blob)
    cm = normalizer.charsmap
    assert cm.max_long > 2  # there are long rules to match
    # Texts made of the long rules' codepoints overlap long matches in every way.
    alphabet = sorted(set(cm.long_keys.values.tolist()))
    dense = random_texts(5, count=400, longest=30, alphabet=alphabet)
    keys = ["".join(map(chr, row)) for row in cm.long_keys.tolist()[:3000]]
    joined = ["".join(random.Random(i).sample(keys, 5)) for i in range(300)]
    check(normalizer, batches + [dense, joined])
    out, _ = cm.rewrite(ingest.codepoints(["e\u0301", "\u1100\u1161\u11a8"]))
    assert out.tolist() == [[0xE9], [0xAC01]]  # the long rules did apply (SentencePiece's longest match)
    out, _ = normalizer(ingest.codepoints(["e\u0301", "\u1100\u1161\u11a8"]))
    assert out.tolist() == [[0xE9], [0x1100, 0x1161, 0x11A8]]  # huggingface's: a 9-byte cluster, per character


@pytest.mark.parametrize("add_dummy_prefix", [True, False])
@pytest.mark.parametrize("remove_extra_whitespaces", [True, False])
@pytest.mark.parametrize("escape_whitespaces", [True, False])
def test_sentencepiece_normalizer(charsmaps, batches, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces):
    for blob in charsmaps + [b""]:
        check(N.SentencePieceNormalizer(blob, add_dummy_prefix=add_dummy_prefix,
                                        remove_extra_whitespaces=remove_extra_whitespaces,
                                        escape_whitespaces=escape_whitespaces), batches)


@pytest.mark.parametrize("pattern", [" {2,}", "\\s+", "\\A +| +\\z", "[ \\t]{2,}", "\\p{Zs}+", "\\.+",
                                     "\\A\\s+|\\s+\\z", "\\d", "a{2,3}", "[ab]{2}", "x"])
def test_replace_runs_are_recognized(pattern):
    """The run patterns take the kernel (else the parametrized comparisons above compare the
    ``regex`` path with itself)."""
    assert N.Replace({"Regex": pattern}, " ")._runs is not None


@pytest.mark.parametrize("pattern", ["a*", "^ +| +$", "ab+", "\\A +| {2,}\\z", "a+?", "(?i)a+", "a{2,}?", "\\X+",
                                     "[ab]{0,}", "\\A +", " +\\z", "(a)+", "a++", "\\Aa{2}|a{2}\\z"])
def test_other_regexes_take_the_regex_module(pattern):
    """Anything else (an empty match, line anchors, a lazy or possessive repeat, flags, a group, a
    cluster, bounded runs at the ends) stays on the per-text path, which reads it exactly."""
    assert N.Replace({"Regex": pattern}, " ")._runs is None


def test_replace_string_and_runs_on_long_runs():
    """Matches at a text's first and last character, a run filling a whole text, overlapping
    candidates of a string (``aaa``: one match), texts of one character."""
    for normalizer in (N.Replace({"String": "aa"}, "b"), N.Replace({"Regex": "a{2,}"}, ""),
                       N.Replace({"Regex": "\\Aa+|a+\\z"}, "XYZ"), N.Replace({"Regex": "a{2,3}"}, "-"),
                       N.Replace({"Regex": "a{3}"}, ""), N.Replace({"Regex": "a"}, "bb")):
        texts = ["aaa", "a", "", "aab aa", "baaab", "a" * 5000, "a" * 4999, "ba", "ab", "aaaaaaa", "aaaaaaaa"]
        check(normalizer, [texts])


def test_replace_runs_on_the_cuda_code_path(batches, monkeypatch):
    """The CUDA code path (``GPUTOK_BACKEND=triton``) runs the kernel on a CPU copy (the per-text
    path is not called), with the same result as the per-text ``regex`` path."""
    normalizer = N.Replace({"Regex": "\\A +| +\\z"}, "")
    refs = []
    for texts in batches[:3]:
        with _dispatch.use_backend("torch"):
            refs.append(normalizer(ingest.codepoints(texts)))
    monkeypatch.setattr(N, "_replace_matches", None)
    for texts, ref in zip(batches[:3], refs):
        with _dispatch.use_backend("triton"):
            assert_same(normalizer(ingest.codepoints(texts)), ref)


def test_replace_kernels_after_pickling(batches):
    """A Replace read back from a pickle (a tokenizer's disk cache, a DataLoader worker) still runs
    its kernel and gives the same result."""
    import pickle

    for normalizer in (N.Replace({"Regex": " {2,}"}, "▁"), N.Replace({"String": "``"}, '"')):
        again = pickle.loads(pickle.dumps(normalizer))
        text = ingest.codepoints(batches[0])
        assert_same(again(text), normalizer(text))
