"""Every tokenizer.json component option, built and saved by huggingface ``tokenizers`` itself,
loaded by gputok: ids, token type ids, offsets and decode equal on real text and random Unicode;
saved back by gputok, the file loads in huggingface as the same tokenizer.

CI runs each file on a slice of the parity corpus (every 600th line); ``GPUTOK_FULL=1`` on the
whole 20 MB, ``GPUTOK_COMPONENTS_STEP=n`` on every n-th line (a long run that fits an hour).
"""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from tokenizers import AddedToken, Regex, Tokenizer as HFTokenizer
from tokenizers import decoders as D, models as M, normalizers as N, pre_tokenizers as P, processors as PP

from gputok import Tokenizer, bench
from gputok.sentencepiece_model import read_model

FULL = bool(os.environ.get("GPUTOK_FULL"))
STEP = int(os.environ.get("GPUTOK_COMPONENTS_STEP") or (1 if FULL else 600))
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
CL100K_LIKE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


@pytest.fixture(scope="module")
def texts(parity_lines):
    rnd = random.Random(18)
    alphabet = "ab cd,.!'0123½ \t\n\u00a0éü\u0301中文😀Привет<s>\u2581_|\x00\u200b"
    random_texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(30))) for _ in range(300)]
    return parity_lines[::STEP] + random_texts


def _pipeline(trained: dict, kind: str, **components) -> HFTokenizer:
    spec = json.loads(HFTokenizer(M.WordLevel({"[UNK]": 0}, unk_token="[UNK]")).to_str())
    spec["model"] = trained[kind]
    tok = HFTokenizer.from_str(json.dumps(spec))
    for stage, component in components.items():
        setattr(tok, stage, component)
    return tok


S, E = ("<s>", 0), ("</s>", 1)
TEMPLATE = PP.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[S, E])
NORMALIZERS = {
    "BertNormalizer": N.BertNormalizer(), "BertNormalizer-cased": N.BertNormalizer(lowercase=False, strip_accents=False),
    "BertNormalizer-no-clean-no-cjk": N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True),
    "Strip": N.Strip(), "Strip-left": N.Strip(left=True, right=False), "StripAccents": N.Sequence([N.NFD(), N.StripAccents()]),
    "NFC": N.NFC(), "NFD": N.NFD(), "NFKC": N.NFKC(), "NFKD": N.NFKD(), "Lowercase": N.Lowercase(), "Nmt": N.Nmt(),
    "Replace-String": N.Replace("th", "TH"), "Replace-Regex": N.Replace(Regex(r"\s+"), " "), "Prepend": N.Prepend("\u2581"),
    "ByteLevel": N.ByteLevel(), "Sequence": N.Sequence([N.Lowercase(), N.Replace(" ", "\u2581"), N.Prepend("\u2581")]),
}
PRE_TOKENIZERS = {
    "BertPreTokenizer": P.BertPreTokenizer(), "Whitespace": P.Whitespace(), "WhitespaceSplit": P.WhitespaceSplit(),
    **{f"Punctuation-{b}": P.Punctuation(b) for b in BEHAVIORS},
    **{f"Split-String-{b}-{i}": P.Split(" ", b, invert=i) for b in BEHAVIORS for i in (False, True)},
    **{f"Split-String-long-{b}": P.Split("th", b) for b in BEHAVIORS},
    **{f"Split-Regex-{b}-{i}": P.Split(Regex(r"\p{N}+|[\p{P}\p{S}]"), b, invert=i) for b in BEHAVIORS for i in (False, True)},
    **{f"Metaspace-{s}-{split}": P.Metaspace(prepend_scheme=s, split=split) for s in ("always", "first", "never")
       for split in (True, False)},
    "Metaspace-replacement": P.Metaspace(replacement="_"),
    "CharDelimiterSplit": P.CharDelimiterSplit("e"), "Digits": P.Digits(), "Digits-individual": P.Digits(individual_digits=True),
    "FixedLength": P.FixedLength(length=4), "UnicodeScripts": P.UnicodeScripts(),
    "Sequence-UnicodeScripts": P.Sequence([P.WhitespaceSplit(), P.UnicodeScripts()]),
    "Sequence": P.Sequence([P.WhitespaceSplit(), P.Digits(individual_digits=True), P.Punctuation()]),
    "Sequence-Metaspace-first": P.Sequence([P.Metaspace(), P.Punctuation("merged_with_previous")]),
}
BYTE_LEVEL_PRE_TOKENIZERS = {
    **{f"ByteLevel-{a}-{r}": P.ByteLevel(add_prefix_space=a, use_regex=r) for a in (False, True) for r in (False, True)},
    "Split-Removed-invert+ByteLevel": P.Sequence([P.Split(Regex(CL100K_LIKE), "removed", invert=True),
                                                 P.ByteLevel(add_prefix_space=False, use_regex=False)]),
    "Split-String-MergedWithPrevious+ByteLevel": P.Sequence([P.Split(" ", "merged_with_previous"),
                                                            P.ByteLevel(add_prefix_space=False, use_regex=False)]),
    "Splits+ByteLevel": P.Sequence([P.Split(Regex(r"\p{N}{1,3}"), "isolated"), P.Split(Regex(r"[\p{P}\p{S}]+"), "isolated"),
                                    P.ByteLevel(add_prefix_space=False, use_regex=True)]),
}
POST_PROCESSORS = {
    "TemplateProcessing": TEMPLATE, "BertProcessing": PP.BertProcessing(E, S),
    **{f"RobertaProcessing-{t}-{a}": PP.RobertaProcessing(E, S, trim_offsets=t, add_prefix_space=a)
       for t in (False, True) for a in (False, True)},
    **{f"ByteLevel-{t}-{a}": PP.ByteLevel(trim_offsets=t, add_prefix_space=a) for t in (False, True) for a in (False, True)},
    "Sequence": PP.Sequence([PP.ByteLevel(trim_offsets=True), TEMPLATE]),
}
DECODERS = {
    "BPEDecoder": D.BPEDecoder(), "ByteFallback": D.ByteFallback(), "CTC": D.CTC(), "CTC-no-cleanup": D.CTC(cleanup=False),
    "Fuse": D.Fuse(), "Metaspace": D.Metaspace(), "Metaspace-never": D.Metaspace(prepend_scheme="never"),
    "Replace": D.Replace("\u2581", " "), "Strip": D.Strip(" ", 1, 1), "WordPiece": D.WordPiece(),
    "WordPiece-no-cleanup": D.WordPiece(cleanup=False),
    "Sequence": D.Sequence([D.Replace("\u2581", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)]),
}
CASES = {
    **{f"normalizer-{k}": ("wordpiece", {"normalizer": v, "pre_tokenizer": P.BertPreTokenizer()}) for k, v in NORMALIZERS.items()},
    **{f"pre_tokenizer-{k}": ("bpe", {"pre_tokenizer": v}) for k, v in PRE_TOKENIZERS.items()},
    **{f"pre_tokenizer-{k}": ("bpe_byte", {"pre_tokenizer": v, "decoder": D.ByteLevel()})
       for k, v in BYTE_LEVEL_PRE_TOKENIZERS.items()},
    **{f"post_processor-{k}": ("bpe_byte", {"pre_tokenizer": P.ByteLevel(add_prefix_space=False), "post_processor": v})
       for k, v in POST_PROCESSORS.items()},
    **{f"decoder-{k}": ("unigram", {"pre_tokenizer": P.Metaspace(), "decoder": v}) for k, v in DECODERS.items()},
    **{f"model-{k}": (k, {"pre_tokenizer": P.ByteLevel() if k == "bpe_byte" else P.Whitespace()})
       for k in ("bpe_byte", "bpe", "wordpiece", "wordlevel", "unigram")},
}
UNICODE_FORMS = ("NFC", "NFD", "NFKC", "NFKD", "StripAccents")


def _check(hf: HFTokenizer, ours: Tokenizer, texts: list[str], pairs: list[str] | None, offsets: bool) -> None:
    inputs = texts if pairs is None else list(zip(texts, pairs))
    expected = hf.encode_batch(inputs)
    got = ours(texts, pairs, padding=False, return_offsets=True, return_token_type_ids=True)
    ids, bounds = got["input_ids"].tolist(), got["row_offsets"].tolist()
    spans, types = got["offsets"].tolist(), got["token_type_ids"].tolist()
    mismatches = []
    for i, e in enumerate(expected):
        row = slice(bounds[i], bounds[i + 1])
        if ids[row] != e.ids or types[row] != e.type_ids or (offsets and [tuple(o) for o in spans[row]] != e.offsets):
            mismatches.append(inputs[i])
    assert not mismatches, f"{len(mismatches)} of {len(inputs)} differ; first: {mismatches[0]!r}"
    decoded = ours.decode_batch([e.ids for e in expected])
    assert decoded == hf.decode_batch([e.ids for e in expected])


def _check_utf8(ours: Tokenizer, texts: list[str]) -> None:
    """``encode_utf8`` (what ``gputok encode`` reads) of the texts gives ``encode_ragged``'s ids and spans."""
    valid = [text for text in texts if text.encode("utf-8", "replace").decode() == text]  # no lone surrogates
    offsets = np.cumsum([0] + [len(text.encode()) for text in valid])
    got = ours.encode_utf8("".join(valid).encode(), offsets, with_spans=True)
    want = ours.encode_ragged(valid, with_spans=True)
    assert got.ids.offsets.tolist() == want.ids.offsets.tolist() and got.ids.values.tolist() == want.ids.values.tolist()
    assert got.spans.tolist() == want.spans.tolist()


@pytest.mark.parametrize("case", sorted(CASES))
def test_component_matches_huggingface(case, hf_trained_models, texts):
    kind, components = CASES[case]
    hf = _pipeline(hf_trained_models, kind, **components)
    ours = Tokenizer.from_str(hf.to_str())
    offsets = not any(form in case for form in UNICODE_FORMS)
    _check(hf, ours, texts, None, offsets)
    if case.startswith("post_processor"):
        half = len(texts) // 2
        _check(hf, ours, texts[:half], texts[half:2 * half], offsets)
    assert HFTokenizer.from_str(json.dumps(ours.to_json(), ensure_ascii=False)).to_str() == hf.to_str()


def test_added_token_options_match_huggingface(hf_trained_models):
    """single_word, lstrip, rstrip: which matches count and which spaces the token takes."""
    rnd = random.Random(5)
    pieces = ["<m>", "ab", "a", "b", " ", "  ", "x y", "\t", "é", "_", "<m><m>"]
    for _ in range(40):
        hf = _pipeline(hf_trained_models, "wordlevel", pre_tokenizer=P.Whitespace())
        hf.add_tokens([AddedToken(content, single_word=rnd.random() < 0.5, lstrip=rnd.random() < 0.5,
                                  rstrip=rnd.random() < 0.5, normalized=False, special=rnd.random() < 0.5)
                       for content in rnd.sample(["<m>", "ab", "<m><m>", "x y", "é"], 3)])
        texts = ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(8))) for _ in range(50)]
        _check(hf, Tokenizer.from_str(hf.to_str()), texts, None, True)



@pytest.mark.parametrize("normalized", [0.0, 0.5, 1.0])
def test_many_added_tokens_match_huggingface(hf_trained_models, texts, normalized):
    """Hundreds of added tokens (past ``gputok.literals.REGEX_MAX_LITERALS``: found by the trie
    walk, in the raw text and after the normalizer), words of the text and pieces that overlap
    them, with random options: the same ids, offsets and decode as huggingface."""
    from gputok.literals import LiteralPattern

    rnd = random.Random(int(10 * normalized))
    words = sorted({word for text in texts for word in text.split()})
    # Each content once, and none two that lowercase alike (huggingface keeps a repeat's options in
    # memory but writes the first's; two normalized tokens of one form are not settled here).
    chosen = rnd.sample(words, 400) + ["<m>", "x y", "é", "ab", "a", "①", "<m><m>", "the"]
    contents = {content.lower(): content for content in chosen}.values()
    hf = _pipeline(hf_trained_models, "wordpiece", normalizer=N.Lowercase(), pre_tokenizer=P.Whitespace())
    hf.add_tokens([AddedToken(content, single_word=rnd.random() < 0.2, lstrip=rnd.random() < 0.2,
                              rstrip=rnd.random() < 0.2, normalized=rnd.random() < normalized,
                              special=rnd.random() < 0.2) for content in contents])
    ours = Tokenizer.from_str(hf.to_str())
    found = [ours._pattern(None), ours._normalized_pattern(None)]
    assert any(isinstance(pattern, LiteralPattern) for pattern in found)
    _check(hf, ours, texts, None, True)



@pytest.mark.parametrize("kind", ["bpe", "unigram"])
@pytest.mark.parametrize("steps", ["Metaspace", "Sequence"])
def test_metaspace_first_prepends_only_where_the_text_starts(hf_trained_models, texts, kind, steps):
    """Metaspace with ``prepend_scheme`` "first" and added tokens written in the text: huggingface
    prepends '▁' to the piece that starts the text, not to the text after an added token (raw or
    matched after the normalizer), nor after a lone added token at the start, nor to a text whose
    normalizer removed its first characters (its raw offset is then not 0); ids and offsets, the
    padded call and the UTF-8 entry point too."""
    rnd = random.Random(len(kind) + len(steps))
    metaspace = P.Metaspace(prepend_scheme="first", split=rnd.random() < 0.5)
    pre = metaspace if steps == "Metaspace" else P.Sequence([metaspace, P.Punctuation("merged_with_previous")])
    pieces = ["<X>", "[INST]", "yy", "hello", "World", " ", "  ", "a", "b.", "\n", "é", "中", "\u0301", "\x01", "\t"]
    lines = texts[::3] + ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(8))) for _ in range(400)] + [
        "<X>hello", "hello<X>world<X>again", " <X>x", "<X>", "[INST]what[INST] is", "yyb", "ayyb", "<X>yyb",
        "  hello", " <X>", "a<X>b", "\u0301x", "  ", "a"]
    charsmap = read_model(bench.model_path("unigram")).normalizer.precompiled_charsmap  # nmt_nfkc: removes \x01
    for normalizer in (None, N.Lowercase(), N.Strip(), N.Sequence([N.Replace("a", ""), N.Lowercase()]),
                       N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=True),
                       N.Sequence([N.Replace("ab", "x"), N.Replace(Regex(r"\s+"), "Q")]), N.Precompiled(charsmap)):
        hf = _pipeline(hf_trained_models, kind, pre_tokenizer=pre)
        if normalizer is not None:
            hf.normalizer = normalizer
        hf.add_tokens([AddedToken("<X>", normalized=False, special=True), AddedToken("[INST]", normalized=False),
                       AddedToken("yy", normalized=True)])
        ours = Tokenizer.from_str(hf.to_str())
        # A charsmap's offsets around a character it removes, and its rules on a combining mark after
        # a space, are huggingface's own (README, Limitations): its case checks ids, on other texts.
        charsmapped = isinstance(normalizer, N.Precompiled)
        _check(hf, ours, [line for line in lines if "\u0301" not in line] if charsmapped else lines, None,
               not charsmapped)
        ragged = ours.encode_ragged(lines)
        want = [ragged.ids.values[a:b].tolist() for a, b in zip(ragged.ids.offsets[:-1], ragged.ids.offsets[1:])]
        padded = ours(lines, padding=True, add_special_tokens=False)
        assert [row[mask.bool()].tolist() for row, mask in zip(padded["input_ids"], padded["attention_mask"])] == want
        _check_utf8(ours, lines)


NORMALIZED_ADDED_CASES = {
    "Lowercase": ("wordpiece", N.Lowercase(), P.Whitespace()),
    "BertNormalizer": ("wordpiece", N.BertNormalizer(), P.BertPreTokenizer()),
    "NFKC+Lowercase": ("bpe", N.Sequence([N.NFKC(), N.Lowercase()]), P.Whitespace()),
    "Replace": ("bpe_byte", N.Replace(" ", "_"), P.ByteLevel(add_prefix_space=False)),
    "Prepend+Strip": ("unigram", N.Sequence([N.Strip(), N.Prepend("\u2581")]), P.Metaspace(prepend_scheme="never")),
}


@pytest.mark.parametrize("case", sorted(NORMALIZED_ADDED_CASES))
def test_normalized_added_tokens_match_in_the_normalized_text(case, hf_trained_models, texts):
    """``normalized: true`` under a normalizer: matched after the normalizer, as huggingface does
    (the content normalized too), beside unnormalized tokens matched in the raw text; ids, offsets."""
    kind, normalizer, pre_tokenizer = NORMALIZED_ADDED_CASES[case]
    rnd = random.Random(len(case))
    contents = ["Hello", "ÉTÉ", "x y", "<M>", "the", "①", "ab"]
    pieces = ["hello", "HELLO", "Hello", "été", "ÉTÉ", "x y", "X Y", "<M>", "<m>", "the", "THE", "1", "①", " ", "  ",
              "ab", "AB", "\t", "é"]
    lines = texts[::4] + ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(10))) for _ in range(300)]
    for _ in range(6):
        hf = _pipeline(hf_trained_models, kind, normalizer=normalizer, pre_tokenizer=pre_tokenizer)
        hf.add_tokens([AddedToken(content, single_word=rnd.random() < 0.3, lstrip=rnd.random() < 0.3,
                                  rstrip=rnd.random() < 0.3, normalized=rnd.random() < 0.7, special=rnd.random() < 0.3)
                       for content in rnd.sample(contents, 4)])
        ours = Tokenizer.from_str(hf.to_str())
        _check(hf, ours, lines, None, offsets="NFKC" not in case)
        _check_utf8(ours, lines)
        assert HFTokenizer.from_str(json.dumps(ours.to_json(), ensure_ascii=False)).to_str() == hf.to_str()


def test_unicode_scripts_splits_as_huggingface(parity_lines):
    """UnicodeScripts on real multilingual text and random Unicode (every plane, scripts mixed with
    spaces, Han/Hiragana/Katakana, marks): the same pieces and offsets as huggingface's."""
    from gputok import pre_tokenizers
    from gputok.ingest import codepoints

    rnd = random.Random(7)
    mixed = " aZé中ーひカ1\u0301Яα한ا\t"
    texts = [line for line in parity_lines if not line.isascii()][:2000] + [
        "  Hello Мир 世界 こんにちは カタカナー abc", "", "   ", "e\u0301x", "日本語のテキスト", "ＡＢＣ１２３"]
    texts += ["".join(chr(rnd.randrange(0x110000)) if rnd.random() < 0.4 else rnd.choice(mixed)
                      for _ in range(rnd.randrange(25))) for _ in range(3000)]
    texts = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]  # no lone surrogates
    hf = P.UnicodeScripts()
    text = codepoints(texts)
    words = pre_tokenizers.UnicodeScripts()(text)
    starts, ends, owner = words.starts.tolist(), words.ends.tolist(), words.text_offsets.tolist()
    first = text.offsets.tolist()
    for k, t in enumerate(texts):
        got = [(starts[w] - first[k], ends[w] - first[k]) for w in range(owner[k], owner[k + 1])]
        assert got == [span for _, span in hf.pre_tokenize_str(t)], t


def test_readme_table_is_the_generated_one():
    """The README's components table is what tools/components_table.py writes from the registries."""
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    tool = runpy.run_path(str(root / "tools" / "components_table.py"))
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert tool["readme_with_table"](readme) == readme, "run: python tools/components_table.py"


BAD_COMPONENTS = {
    "unknown normalizer": ("normalizer", {"type": "FancyNormalizer"}, r"unknown normalizer type 'FancyNormalizer'; known types: \["),
    "unknown pre_tokenizer": ("pre_tokenizer", {"type": "FancySplit"}, r"unknown pre_tokenizer type 'FancySplit'; known"),
    "unknown post_processor": ("post_processor", {"type": "FancyProcessing"}, r"unknown post_processor type 'FancyProcessing'"),
    "unknown decoder": ("decoder", {"type": "Fancy"}, r"unknown decoder type 'Fancy'; known types: \['BPEDecoder'"),
    "Digits option type": ("pre_tokenizer", {"type": "Digits", "individual_digits": "yes"},
                           r"pre_tokenizer\.individual_digits = 'yes': expected a JSON boolean"),
    "Punctuation behavior": ("pre_tokenizer", {"type": "Punctuation", "behavior": "Sideways"},
                             r"pre_tokenizer\.behavior = 'Sideways': expected one of \['Removed'"),
    "FixedLength length": ("pre_tokenizer", {"type": "FixedLength", "length": 0}, r"FixedLength length 0: expected an integer >= 1"),
    "CharDelimiterSplit delimiter": ("pre_tokenizer", {"type": "CharDelimiterSplit", "delimiter": "ab"},
                                     r"CharDelimiterSplit delimiter 'ab': expected one character"),
    "RobertaProcessing option type": ("post_processor", {"type": "RobertaProcessing", "cls": ["a", 1], "sep": ["a", 1],
                                                         "trim_offsets": "x"},
                                      r"post_processor\.trim_offsets = 'x': expected a JSON boolean"),
    "CTC option type": ("decoder", {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": 1},
                        r"decoder\.cleanup = 1: expected a JSON boolean"),
    "Split regex": ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": False},
                    r"Split pattern '\(a' is neither a known name .* nor a valid regex"),
    "Replace regex": ("normalizer", {"type": "Replace", "pattern": {"Regex": "[a"}, "content": ""},
                      r"Replace normalizer: pattern '\[a' is not a valid regex \(unterminated character set"),
    "Replace decoder regex": ("decoder", {"type": "Replace", "pattern": {"Regex": "[a"}, "content": ""},
                              r"Replace decoder: pattern '\[a' is not a valid regex"),
    "ByteLevel before a split": ("pre_tokenizer", {"type": "Sequence", "pretokenizers": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}, {"type": "Whitespace"}]},
        r"pre_tokenizer Sequence: step 0 is ByteLevel, which maps the text to its byte characters"),
    "two templates": ("post_processor", {"type": "Sequence", "processors": [
        {"type": "BertProcessing", "cls": ["a", 1], "sep": ["a", 1]}, {"type": "BertProcessing", "cls": ["a", 1], "sep": ["a", 1]}]},
        r"post_processor Sequence: gputok supports at most one processor that adds special tokens"),
}


@pytest.mark.parametrize("case", sorted(BAD_COMPONENTS))
def test_bad_components_fail_at_load_naming_the_problem(case):
    stage, component, message = BAD_COMPONENTS[case]
    spec = json.loads(HFTokenizer(M.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]")).to_str())
    spec[stage] = component
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_str(json.dumps(spec))


def test_added_tokens_that_collide_are_refused(hf_trained_models):
    """Two added tokens with one content or one id; overlapping contents ("<m>", "<m><m>") are
    fine and match leftmost-longest (test_added_token_options_match_huggingface)."""
    spec = json.loads(_pipeline(hf_trained_models, "wordlevel", pre_tokenizer=P.Whitespace()).to_str())
    size = len(spec["model"]["vocab"])
    token = {"special": True, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    spec["added_tokens"] = [dict(token, id=size, content="<m>"), dict(token, id=size + 1, content="<m>")]
    with pytest.raises(ValueError, match=r"added_tokens\[1\]\.content = '<m>': added_tokens\[0\] has it too"):
        Tokenizer.from_str(json.dumps(spec))
    spec["added_tokens"] = [dict(token, id=size, content="<m>"), dict(token, id=size, content="<n>")]
    with pytest.raises(ValueError, match=r"added_tokens\[1\]\.id = \d+: added_tokens\[0\] has this id too"):
        Tokenizer.from_str(json.dumps(spec))


ANCHORED = [r"^\s+", r"^a", r"a$", r"\s+$", r"^", r"$", r"\Aa", r"a\z", r"a\Z", r"[\n]^a", r"\ba$", r"[\^a]b",
            r"(?m)a.b", r"(?m:\s.)b|(?i)A"]


@pytest.mark.parametrize("pattern", ANCHORED)
def test_regex_anchors_read_as_huggingface(pattern):
    """A tokenizer.json Regex is Oniguruma's, in Ruby syntax: ``^`` and ``$`` match at each line's
    start and end (not ``^`` after a text's last newline), ``\\Z`` before a final newline. A Replace
    normalizer, a Split pre-tokenizer (each behavior) and a Replace decoder with such a pattern give
    huggingface's ids, offsets and text (``regex_split.ruby_anchors``; they read ``^`` as the text's
    start only)."""
    texts = ["a\n\n b", "ab\nab", "ba\nba\n", " a \n a", "a", "", "\n", "a\r\nb\ra", "^ab\n^a\n\n"]
    vocab = {c: i for i, c in enumerate(["[UNK]", *sorted(set("abX \n\r^"))])}
    for behavior in ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"):
        hf = HFTokenizer(M.WordLevel(vocab, unk_token="[UNK]"))
        hf.pre_tokenizer = P.Split(Regex(pattern), behavior=behavior)
        _check(hf, Tokenizer.from_str(hf.to_str()), texts, None, True)
    hf = HFTokenizer(M.WordLevel(vocab, unk_token="[UNK]"))
    hf.normalizer = N.Replace(Regex(pattern), "X")
    hf.pre_tokenizer = P.Split(Regex("."), behavior="isolated")
    hf.decoder = D.Replace(Regex(pattern), "X")
    # (what an empty match inserts at a text's start takes its first character's offsets, huggingface's (0, 0))
    _check(hf, Tokenizer.from_str(hf.to_str()), texts, None, pattern not in ("^", "$"))


def test_ruby_has_no_s_option():
    """Ruby's dot-all option is ``m``; ``(?s)`` is an error to huggingface, and so at load to gputok."""
    hf = HFTokenizer(M.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    hf.pre_tokenizer = P.Split(Regex("a"), behavior="isolated")
    spec = json.loads(hf.to_str())
    spec["pre_tokenizer"]["pattern"]["Regex"] = "(?s)a.b"
    with pytest.raises(Exception, match="undefined group option"):
        HFTokenizer.from_str(json.dumps(spec))
    with pytest.raises(ValueError, match="undefined group option"):
        Tokenizer.from_str(json.dumps(spec))


def test_replace_matches_as_oniguruma():
    """A Replace normalizer and decoder find huggingface's matches: no empty match right after a
    match (``\\s*+$`` on "a\\n"), an empty token left as it is by the decoder, and an empty match
    at a text's end after another normalizer (Strip then ``$``: gputok raised IndexError)."""
    cases = [(r"\s*+$", "a\n"), (r"a*", "baab"), (r"$", "a"), (r"^", "ab\nc"), (r"(?=$)", " a "), (r"\z", "a\n")]
    for pattern, text in cases:
        for normalizer in (N.Replace(Regex(pattern), "X"), N.Sequence([N.Strip(), N.Replace(Regex(pattern), "X")])):
            vocab = {"[UNK]": 0, "X": 1, "a": 2, "b": 3, "c": 4, "\n": 5, " ": 6}
            hf = HFTokenizer(M.WordLevel(vocab, unk_token="[UNK]"))
            hf.normalizer = normalizer
            hf.pre_tokenizer = P.Split(Regex("."), behavior="isolated")
            hf.decoder = D.Replace(Regex(pattern), "X")
            ours = Tokenizer.from_str(hf.to_str())
            assert ours.encode(text) == hf.encode(text).ids, (pattern, text)
            tokens = ["a", "", "b\n", "\n", "a\nb"]
            assert "".join(ours.decoder.decode_chain(tokens)) == hf.decoder.decode(tokens), pattern


RUN_PATTERNS = [r" {2,}", r"\s+", r"\A +| +\z", r"\A\s{2,}|\s{2,}\z", r"[ \t]+", r"\p{Zs}{3,}", r"\.+", r"a+",
                r"\s", r"a{2,3}", r" {2}"]


@pytest.mark.parametrize("pattern", RUN_PATTERNS)
def test_replace_runs_kernel_as_huggingface(pattern):
    """A Replace of runs of one character class (SentencePiece converters' ``" {2,}"``, gputok's own
    ``\\A +| +\\z``), which the CPU runs as a kernel (``normalize_numba.replace_runs_numba``),
    gives huggingface's ids and offsets on random texts of spaces, tabs, ideographic spaces,
    newlines, dots and letters, for a content longer, shorter and empty."""
    from gputok.normalizers import replace_runs

    assert replace_runs(pattern) is not None  # the kernel, not the regex module, runs it
    rng = random.Random(pattern)
    texts = ["", " ", "  ", "a", *("".join(rng.choice("  \t\u3000\n.aab") for _ in range(rng.randint(0, 12)))
                                for _ in range(300))]
    vocab = {c: i for i, c in enumerate(["[UNK]", *sorted(set(" \t\u3000\n.abXY"))])}
    for content in ("X", "", "XY"):
        hf = HFTokenizer(M.WordLevel(vocab, unk_token="[UNK]"))
        hf.normalizer = N.Sequence([N.Replace(Regex(pattern), content), N.Replace("ab", "Y")])
        hf.pre_tokenizer = P.Split(Regex("."), behavior="isolated")
        _check(hf, Tokenizer.from_str(hf.to_str()), texts, None, True)


def test_sentencepiece_normalizer_saved_strips_the_text_not_each_line():
    """A SentencePiece normalizer written to tokenizer.json strips spaces at the text's ends (``\\A``,
    ``\\z``), as SentencePiece does, not at each line's (``^``, ``$`` in huggingface's reading):
    gputok's normalizer, the one read back from its JSON, and huggingface's agree on a multi-line text."""
    from gputok import ingest, normalizers

    ours = normalizers.SentencePieceNormalizer(b"")
    back = normalizers.from_json(ours.to_json())
    hf = HFTokenizer.from_str(json.dumps({**json.loads(HFTokenizer(M.WordLevel({"a": 0}, unk_token="a")).to_str()),
                                          "normalizer": ours.to_json()}))
    for text in ["a \n b", "  x  \n  y  ", "\n a\n"]:
        want = hf.normalizer.normalize_str(text)
        for normalizer in (ours, back):
            out, _ = normalizer(ingest.codepoints([text]))
            assert "".join(map(chr, out.values.tolist())) == want, (text, normalizer)
