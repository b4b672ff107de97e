"""A tokenizer.json's Precompiled normalizer reads its charsmap as huggingface does, a grapheme
cluster at a time (``gputok.huggingface_precompiled``): its strings and offsets against
huggingface's own normalizer, on random strings built from combining marks, fullwidth and
halfwidth forms, Hangul jamo and other characters the rules touch, and on real text; a
SentencePiece ``.model`` keeps SentencePiece's longest-match reading."""

import base64
import json
import random
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers
from tokenizers import normalizers as hf_normalizers

from gputok import Tokenizer, _dispatch, assets, ingest
from gputok import normalizers as N

MARKS = [*range(0x300, 0x370), 0x20DD, 0x3099, 0x309A, 0xFE0F, 0x200D, 0x1F3FB]
BASES = [*range(0x41, 0x7B), *range(0xC0, 0x180), *range(0xFF01, 0xFF5E), 0x3042, 0x304B, 0x30AB, 0xAC00, 0x1F468,
         0x2460, 0xFB01, 0x2160, 0x3131, 0x314F, 0x1100, 0x1161, 0x11A8, 0xFF76, 0xFF9E, 0x0915, 0x093F, 0x094D,
         0x0E19, 0x0E49, 0x0627, 0x064E, 0x1F1EB, 0x1F1F7, 0x0D, 0x0A, 0x0600, 0x20, 0x3000, 0x01]


@pytest.fixture(scope="module")
def charsmap(tmp_path_factory) -> str:
    """The tests' SentencePiece model's charsmap (nmt_nfkc), base64, as its tokenizer.json holds it."""
    path = tmp_path_factory.mktemp("precompiled") / "tokenizer.json"
    Tokenizer.from_sentencepiece(assets.fetch("sp-test-model")).save(path)
    spec = json.loads(path.read_text(encoding="utf-8"))["normalizer"]
    return next(n for n in spec["normalizers"] if n["type"] == "Precompiled")["precompiled_charsmap"]


def random_texts(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(chr(rnd.choice(BASES)) + "".join(chr(rnd.choice(MARKS)) for _ in range(rnd.choice([0, 0, 1, 2])))
                    for _ in range(rnd.randint(0, 6))) for _ in range(count)]


def per_character(normalizer) -> tokenizers.Tokenizer:
    """A huggingface tokenizer whose every normalized character is a token with its offsets."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"[\s\S]"), "isolated")
    return tok


def check(charsmap: str, texts: list[str]) -> None:
    reference = hf_normalizers.Precompiled(base64.b64decode(charsmap))
    normalizer = N.Precompiled.from_json({"type": "Precompiled", "precompiled_charsmap": charsmap})
    out, _ = normalizer(ingest.codepoints(texts))
    assert ingest.strings(out) == [reference.normalize_str(t) for t in texts]
    hf = per_character(reference)
    ours = Tokenizer.from_str(hf.to_str())
    got = ours(texts, return_offsets=True, padding=False)
    spans, bounds = got["offsets"].tolist(), got["row_offsets"].tolist()
    for i, e in enumerate(hf.encode_batch(texts)):
        assert [tuple(s) for s in spans[bounds[i]:bounds[i + 1]]] == e.offsets, texts[i]


def test_random_strings_match_huggingface(charsmap):
    check(charsmap, random_texts(3000, 0))


def test_real_text_and_its_decomposed_form(charsmap, parity_lines):
    scripts = ["Tiếng Việt có dấu: người, được", "日本語 ｶﾞｷﾞ ﾊﾟ ㌀", "한국어 ㄱㅏ ㅋㅋ", "नमस्ते क्षत्रिय", "ภาษาไทย น้ำ",
               "العَرَبِيَّة", "👍🏽 🇫🇷 👨\u200d👩\u200d👧", "a\r\nb"]
    check(charsmap, parity_lines[::40][:3000] + scripts + [unicodedata.normalize("NFD", t) for t in scripts])


def test_torch_backend_matches_huggingface(charsmap):
    with _dispatch.use_backend("torch"):
        check(charsmap, random_texts(300, 1))


def test_the_texts_found_hold_every_difference(charsmap):
    """Where huggingface's reading differs from the longest-match kernel's, the check finds the
    text (not every text: these are dense in what it looks for)."""
    normalizer = N.Precompiled.from_json({"type": "Precompiled", "precompiled_charsmap": charsmap})
    texts = random_texts(3000, 2)
    text = ingest.codepoints(texts)
    kernel = ingest.strings(normalizer.charsmap.rewrite(text)[0])
    reading = normalizer.charsmap.huggingface
    differ = {i for i, t in enumerate(texts) if reading.rewrite(t)[0] != kernel[i]}
    found = set(reading.differing(text.values.numpy(), text.offsets.numpy()).tolist())
    assert differ and differ <= found
    assert len(found) < len(texts)


def test_ascii_batches_take_the_kernel_alone(charsmap):
    normalizer = N.Precompiled.from_json({"type": "Precompiled", "precompiled_charsmap": charsmap})
    text = ingest.codepoints(["plain ASCII text", "more\ttext"])
    assert not normalizer.charsmap.huggingface.differing(text.values.numpy(), text.offsets.numpy()).size
    out, source = normalizer(text)
    kernel, kernel_source = normalizer.charsmap.rewrite(text)
    assert np.array_equal(out.values.numpy(), kernel.values.numpy()) and np.array_equal(source, kernel_source)


def test_sentencepiece_model_keeps_sentencepiece_reading():
    """The same rules in a .model: SentencePiece's longest match (``ｶﾞ`` one composed ``ガ``, the
    dot below of decomposed ``ệ`` kept), sentencepiece's ids."""
    path = assets.fetch("sp-test-model")
    texts = ["ｶﾞｷﾞ ﾊﾟ", "Vie\u0302\u0323t Nam", "Ｅ\u033c ﬁ\u0301", "ㄱㅏ"]
    assert Tokenizer.from_sentencepiece(path).encode_batch(texts) == spm.SentencePieceProcessor(
        model_file=str(path)).encode(texts)


def built_charsmap(tmp_path, rules: dict[str, str]) -> str:
    """A charsmap of ``rules`` as sentencepiece's trainer compiles them (``normalization_rule_tsv``),
    base64."""
    (tmp_path / "rules.tsv").write_text("".join(" ".join(f"{ord(c):04X}" for c in k) + "\t"
                                                + " ".join(f"{ord(c):04X}" for c in v) + "\n" for k, v in rules.items()))
    (tmp_path / "corpus.txt").write_text("hello world abc def\n" * 50)
    spm.SentencePieceTrainer.train(input=str(tmp_path / "corpus.txt"), model_prefix=str(tmp_path / "m"),
                                   vocab_size=30, normalization_rule_tsv=str(tmp_path / "rules.tsv"),
                                   minloglevel=2, hard_vocab_limit=False)
    from gputok.sentencepiece_model import read_model

    return base64.b64encode(read_model(tmp_path / "m.model").normalizer.precompiled_charsmap).decode()


def test_an_ascii_key_over_two_clusters(tmp_path):
    """huggingface never applies ``ab`` (two clusters); an all-ASCII batch is no exception, and a
    text reads the same whatever else is in its batch."""
    charsmap = built_charsmap(tmp_path, {"ab": "X", "a": "b"})
    for batch in (["ab", "xab"], ["ab", "xab", "é"]):
        check(charsmap, batch)


def test_removals_align_as_huggingface_whatever_the_batch(tmp_path):
    """A removed character at a text's start or after an expanding rule (huggingface shifts the
    alignment there), alone or beside texts whose last character is a rule's, and a text that
    starts with a joining character after such a text."""
    charsmap = built_charsmap(tmp_path, {"\x01": "", "a": "b", "\ufb01": "fi"})
    texts = ["\u0301z\ufb01\x01", "\x01abc", "\x01\x01a", "\ufb01\x01\x01x", "a", "a\u0301"]
    check(charsmap, texts)
    for i in range(len(texts)):
        check(charsmap, [texts[i]])
        check(charsmap, texts[i:] + texts[:i])
