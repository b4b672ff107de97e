"""Splits recognised by meaning (gputok.split_recognition) and the llama3 / qwen2 fast rules.

A regex spelled otherwise than a named rule but splitting as it takes the rule's numba matcher;
checked here: the verdicts (equivalent spellings found, near misses refused), the rules
themselves against the ``regex`` module on real text (a slice of the parity corpus), every
codepoint in context and hypothesis text, the verdict cache, and a whole tokenizer.json with a
respelled split against huggingface ``tokenizers``.
"""

from __future__ import annotations

import json

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputok import Tokenizer, _dispatch, assets, regex_split, split_recognition
from gputok.ingest import codepoints
from gputok.regex_split import PATTERNS
from gputok.split_recognition import rule_for
from gputok.unicode import MAX_CODEPOINT

NEW_RULES = ["llama3", "qwen2"]
LLAMA3, QWEN2, CL100K, GPT2, O200K = (PATTERNS[r] for r in ("llama3", "qwen2", "cl100k", "gpt2", "o200k"))

# (spelling, the rule it splits as)
EQUIVALENT = [
    (LLAMA3, "llama3"),
    (QWEN2, "qwen2"),
    (regex_split.hf_spelling(CL100K), "cl100k"),
    (CL100K.replace(r"\p{L}", r"\pL").replace(r"\p{N}", r"\pN"), "cl100k"),
    (LLAMA3.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'(?i:[sdmt]|ll|ve|re)"), "llama3"),
    (LLAMA3.replace(r"\s*[\r\n]+", r"\s*[\n\r]+"), "llama3"),
    (QWEN2.replace(r"\s+(?!\S)|\s+", r"\s+(?!\S)|\s"), "qwen2"),
    (QWEN2.replace(r"|\p{N}|", r"|\p{N}{1}|"), "qwen2"),
    (CL100K.replace(r"\s++$|", ""), "llama3"),  # cl100k without its end-of-text rule is Llama 3's
    (O200K.replace(r"[\r\n/]*", r"[\r\n/]*+"), "o200k"),
]

# huggingface's regex engine (Oniguruma, Ruby syntax) reads ``$`` as a line's end: without the
# possessive quantifiers ``\s+$`` gives back before a newline inside a text ("d \n\n  e"), so
# these spellings are not the rules whose ``$`` ends the text (tiktoken's, and the rules here).
LINE_END_SPELLINGS = [
    CL100K.replace("++", "+").replace("?+", "?").replace("*+", "*").replace("{1,3}+", "{1,3}"),
    GPT2.replace("++", "+"),
]

# Near misses: each differs from the closest rule on some text.
NOT_EQUIVALENT = [*LINE_END_SPELLINGS,
    LLAMA3.replace("{1,3}", "{1,4}"),  # needs 4 digits in a row to tell
    LLAMA3.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'s|'t|'re|'ve|'m|'ll|'d"),  # case-sensitive contractions
    LLAMA3.replace(r"[^\r\n\p{L}\p{N}]?", r"[^\r\n\p{L}\p{N}\t]?"),  # a tab no longer leads a word
    QWEN2.replace(r"\p{N}|", r"\d|"),  # \d is not \p{N} (superscripts, Roman numerals)
    GPT2.replace(r" ?[^\s\p{L}\p{N}]++", r" ?[^\s\p{L}\p{N}\u00a7]++"),  # '§' left unmatched
    r"\w+|\s+",
    r"(\w)\1|.",  # a backreference: never judged by classes
    r"\b\w+\b|\W",
]


@pytest.mark.parametrize(("spelling", "rule"), EQUIVALENT)
def test_equivalent_spellings_take_the_rule(spelling, rule):
    assert rule_for(spelling) == rule


def test_a_redundant_class_is_still_the_rule():
    spelling = LLAMA3.replace(r"\p{L}+", r"[A-Za-z\p{L}]+").replace(r"[^\r\n\p{L}\p{N}]?", r"[^\r\n\p{L}\p{N}\u00e9]?")
    assert rule_for(spelling) == "llama3"


@pytest.mark.parametrize("spelling", NOT_EQUIVALENT)
def test_near_misses_stay_with_the_regex_module(spelling):
    assert rule_for(spelling) is None


def test_the_class_argument_sees_the_near_miss_the_probe_text_does_not():
    # The probe text has no '§': only the classes show the difference.
    spelling = GPT2.replace(r" ?[^\s\p{L}\p{N}]++", r" ?[^\s\p{L}\p{N}\u00a7]++")
    compiled = regex_split.compile_with_table_classes(spelling)
    assert split_recognition._agrees(compiled, "gpt2", split_recognition._PROBE_TEXTS)
    assert not split_recognition.equivalent(spelling, "gpt2")


def test_pattern_atoms():
    assert split_recognition.pattern_atoms(r"'(?i:[sd]|l)|\p{L}{2,}|\x41\s$") == [
        ("'", False), ("[sd]", True), ("l", True), (r"\p{L}", False), (r"\x41", False), (r"\s", False)]
    for unsupported in (r"(\w)\1", r"\bx", r"(?P<n>x)", r"(?s:.)", r"(?x) a"):
        assert split_recognition.pattern_atoms(unsupported) is None


def test_the_verdict_is_cached_on_disk(monkeypatch):
    spelling = LLAMA3.replace(r"\s+(?!\S)|\s+", r"\s+(?!\S)|\s")
    assert rule_for(spelling) == "llama3"
    split_recognition._cached_verdict.cache_clear()
    monkeypatch.setattr(split_recognition, "_verdict", lambda pattern: pytest.fail("verdict computed again"))
    assert rule_for(spelling) == "llama3"
    split_recognition._cached_verdict.cache_clear()


# ---- the new rules against the regex module ----------------------------------------------------

def _reference(texts: list[str], pattern: str) -> list[tuple[int, int]]:
    compiled = regex_split.compile_with_table_classes(pattern)
    spans, base = [], 0
    for text in texts:
        spans += [(base + s, base + e) for s, e in regex_split._matches(compiled, text)]
        base += len(text)
    return spans


def _ours(texts: list[str], rule: str) -> list[tuple[int, int]]:
    words = regex_split.split(codepoints(texts), rule)
    return list(zip(words.starts.tolist(), words.ends.tolist()))


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("rule", NEW_RULES)
def test_new_rules_on_real_text(parity_lines, rule, backend):
    lines = parity_lines[::25] + ["a\n  ", "x \n\n  ", "1234567 ١٢٣٤ ²³", "  \n", "I'LL DON'T ſ's"]
    with _dispatch.use_backend(backend):
        ours = _ours(lines, rule)
    assert ours == _reference(lines, PATTERNS[rule])


@pytest.mark.parametrize("rule", NEW_RULES)
def test_new_rules_on_every_codepoint_in_context(rule):
    cps = [c for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000]
    texts = ["".join(f" {chr(cps[i])}a{chr(cps[i + 1])}'s{chr(cps[i + 2])}12345\n " for i in range(j, min(j + 9700, len(cps) - 2), 97))
             for j in range(0, len(cps), 9700)]
    assert _ours(texts, rule) == _reference(texts, PATTERNS[rule])


_MIX = list("aZé中ſ1١²'s S t LLvE re\u00a0\t\r\n\u3000!?.-/") + ["\U0001F600", "\u0301", "\u0295", "\U00016ebb"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(st.one_of(st.sampled_from(_MIX), st.characters(exclude_categories=("Cs",))), max_size=30),
                min_size=1, max_size=8))
def test_recognised_spellings_on_hypothesis_text(texts):
    for spelling, rule in EQUIVALENT:
        assert _ours(texts, rule) == _reference(texts, spelling), (spelling, texts)


# ---- a whole tokenizer.json ------------------------------------------------------------------

@pytest.mark.parametrize(("spelling", "rule"), [EQUIVALENT[2], (LLAMA3, "llama3"), (QWEN2, "qwen2"),
                                               (LINE_END_SPELLINGS[0], None)])
def test_respelled_tokenizer_json_encodes_as_huggingface(parity_lines, spelling, rule):
    tokenizers = pytest.importorskip("tokenizers")
    spec = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").to_json()
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = spelling
    text = json.dumps(spec)
    ours = Tokenizer.from_str(text)
    assert ours.pre_tokenizer.rule == rule  # the fast path, not the regex module
    theirs = tokenizers.Tokenizer.from_str(text)
    lines = parity_lines[::400] + ["a\n  ", "Numbers 1234567 and ١٢٣٤٥", "I'LL  go\n\n  ", "d \n\n  e", "a  \nb"]
    assert ours.encode_batch(lines) == [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]


def test_regex_module_is_the_reference_for_llama3():
    # Llama 3's spelling is not cl100k's on a whitespace run with a newline that ends a text.
    assert [m.group() for m in regex.finditer(LLAMA3, "a\n  ")] == ["a", "\n", "  "]
    assert [m.group() for m in regex.finditer(CL100K, "a\n  ")] == ["a", "\n  "]
    assert rule_for(LLAMA3) != rule_for(CL100K)


@pytest.mark.parametrize("pattern", [r"\S+|\s+$|\s+", r"ab$|\S|\s", CL100K.replace("++", "+").replace("*+", "*")])
def test_tiktoken_patterns_read_dollar_as_the_end(pattern):
    """A tiktoken pattern is not Ruby syntax: its ``$`` is the text's end (tiktoken's regex engine),
    where a tokenizer.json's is a line's (huggingface's): the same pattern gives tiktoken's ids
    through gputok's tiktoken entry points, the other reading through a tokenizer.json Split."""
    tiktoken = pytest.importorskip("tiktoken")
    tokenizers = pytest.importorskip("tokenizers")
    from gputok.tiktoken import Encoding

    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"\n\n": 257}
    reference = tiktoken.Encoding("t", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    ours = Encoding("t", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    saved = tokenizers.Tokenizer.from_str(json.dumps(ours._tokenizer.to_json()))  # ^ and $ written as \A and \z
    for text in ["ab\n\nab", "ab \n\n ab\n", "x  \ny"]:
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text), text
        assert saved.encode(text, add_special_tokens=False).ids == reference.encode_ordinary(text), text
    assert rule_for(pattern, ruby=False) == (None if "ab$" in pattern or "\\S+" in pattern else "cl100k")
