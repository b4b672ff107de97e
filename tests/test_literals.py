"""``gputok.literals``: the trie walk (``kernels/literal_match_numba.py``) that finds many added
tokens against the regex it stands for (the literals joined by ``|``, longest first): the same
matches, in order, on random literal sets whose literals overlap and prefix each other, over text
from their alphabet and beyond it (astral characters, lone surrogates, codes on both sides of the
root's dense table)."""

import random
import re

import numpy as np
import pytest

from gputok.literals import DENSE_ROOT_CODES, REGEX_MAX_LITERALS, LiteralPattern, literal_pattern, match_spans

ALPHABETS = ["ab", "abc ", "ab\u2581é中😀\ud800", "xyz<>|",
             "".join(map(chr, range(DENSE_ROOT_CODES - 3, DENSE_ROOT_CODES + 3)))]


def _regex(literals: list[str]) -> re.Pattern:
    return re.compile("|".join(map(re.escape, sorted(dict.fromkeys(literals), key=lambda c: -len(c)))))


def _random_case(rnd: random.Random) -> tuple[list[str], list[str]]:
    alphabet = rnd.choice(ALPHABETS) + rnd.choice(ALPHABETS)
    literals = ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 7)))
                for _ in range(rnd.randrange(REGEX_MAX_LITERALS + 1, 300))]
    noise = alphabet + "q \t\U0010ffff\x00"
    texts = ["".join(rnd.choice(noise) if rnd.random() < 0.2 else rnd.choice(literals) if rnd.random() < 0.3
                     else rnd.choice(alphabet) for _ in range(rnd.randrange(0, 60))) for _ in range(40)]
    return literals, texts


def test_trie_walk_finds_what_the_regex_finds():
    rnd = random.Random(3)
    for _ in range(60):
        literals, texts = _random_case(rnd)
        pattern, regex = literal_pattern(literals), _regex(literals)
        assert isinstance(pattern, LiteralPattern) and pattern.pattern == regex.pattern
        for text in texts:
            want = [(m.span(), m.group()) for m in regex.finditer(text)]
            assert [(m.span(), m.group()) for m in pattern.finditer(text)] == want, (literals, text)
            first, got = regex.search(text), pattern.search(text)
            assert (got is None) == (first is None) and (got is None or got.span() == first.span()), (literals, text)
        # the batch in one kernel call: each text's own matches, none across two texts
        assert match_spans(pattern, texts) == match_spans(regex, texts) == [
            [m.span() for m in regex.finditer(text)] for text in texts]


def test_search_reads_a_long_text_in_pieces(monkeypatch):
    """``search`` reads ``SEARCH_CHARS`` characters at a time: with a tiny read, a match that
    crosses from one read into the next, or starts past the first, is still the regex's first."""
    import gputok.literals

    monkeypatch.setattr(gputok.literals, "SEARCH_CHARS", 3)
    rnd = random.Random(6)
    for _ in range(30):
        literals, texts = _random_case(rnd)
        pattern, regex = literal_pattern(literals), _regex(literals)
        for text in texts + ["q" * 10 + max(literals, key=len)]:
            first, got = regex.search(text), pattern.search(text)
            assert (got is None) == (first is None) and (got is None or got.span() == first.span()), (literals, text)


def test_longest_at_the_leftmost_position_then_on_from_its_end():
    literals = ["ab", "abc", "bcd", "c", "d"] + [f"<{k}>" for k in range(REGEX_MAX_LITERALS)]
    pattern = literal_pattern(literals)
    assert isinstance(pattern, LiteralPattern)
    assert [m.group() for m in pattern.finditer("abcd")] == ["abc", "d"]  # not "bcd", which overlaps "abc"
    assert [m.span() for m in pattern.finditer("xabx<3><12>c")] == [(1, 3), (4, 7), (7, 11), (11, 12)]
    assert pattern.search("zzz") is None and pattern.search("") is None and list(pattern.finditer("")) == []
    assert pattern.search("xxc<1>").span() == (2, 3)
    assert match_spans(pattern, ["xab", "c", "", "d<1", ">c"]) == [[(1, 3)], [(0, 1)], [], [(0, 1)], [(1, 2)]]


def test_many_matches_and_astral_roots():
    """More matches than the kernel's first arrays hold; literals whose first character is past
    the dense root table (an emoji) or the last one in it."""
    literals = ["😀", "😀x", chr(DENSE_ROOT_CODES - 1), chr(DENSE_ROOT_CODES - 1) + "y"] + [chr(0x61 + k) * 2
                                                                                           for k in range(20)]
    text = ("😀x" + "aa" + chr(DENSE_ROOT_CODES - 1) + "yz😀") * 500
    pattern, regex = literal_pattern(literals), _regex(literals)
    assert isinstance(pattern, LiteralPattern)
    assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in regex.finditer(text)]
    assert len(list(pattern.finditer(text))) == 2000


@pytest.mark.parametrize("count", [0, 1, REGEX_MAX_LITERALS, REGEX_MAX_LITERALS + 1])
def test_a_regex_for_few_literals_the_walk_for_many(count):
    literals = [f"tok{k}" for k in range(count)]
    pattern = literal_pattern(literals + literals[:1])  # a repeat counts once
    if count == 0:
        assert pattern is None
    elif count <= REGEX_MAX_LITERALS:
        assert isinstance(pattern, re.Pattern)
    else:
        assert isinstance(pattern, LiteralPattern)
    # an empty literal matches everywhere, as in the regex
    assert isinstance(literal_pattern(literals + [""]), re.Pattern)


def test_cut_at_matches_lays_pieces_and_tokens_in_order():
    """``gputok.tokenizer.cut_at_matches`` against the loop it replaced: per text, the non-empty
    text before each match, the match, and the text after the last."""
    from gputok.tokenizer import cut_at_matches

    rnd = random.Random(4)
    for _ in range(200):
        lengths, matches = [], []
        for _ in range(rnd.randrange(0, 6)):
            length = rnd.randrange(0, 30)
            cuts = sorted(rnd.sample(range(length + 1), min(length + 1, 2 * rnd.randrange(0, 4))))
            spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if b > a]
            lengths.append(length)
            matches.append([(a, b, rnd.randrange(100, 200)) for a, b in spans])
        want, pieces = [], 0
        for row, (length, found) in enumerate(zip(lengths, matches)):
            position = 0
            for m in [*found, None]:
                end = length if m is None else m[0]
                if end > position:
                    want.append((pieces, -1, row, position, end))
                    pieces += 1
                if m is not None:
                    want.append((-1, m[2], row, m[0], m[1]))
                    position = m[1]
        flat = [m for found in matches for m in found]
        offsets = np.cumsum([0] + [len(found) for found in matches])
        got = cut_at_matches(np.array(lengths, np.int64), *(np.array([m[k] for m in flat], np.int64) for k in range(3)),
                             offsets.astype(np.int64))
        assert list(zip(*(column.tolist() for column in got))) == want, (lengths, matches)


def test_utf8_spans_are_the_bytes_regex_spans():
    """``LiteralPattern.utf8_spans``: the regex of the literals' UTF-8 bytes on raw bytes, invalid
    UTF-8 and all (``gputok.ingest.rows_with`` reads it)."""
    rnd = random.Random(8)
    for _ in range(40):
        literals, texts = _random_case(rnd)
        pattern = literal_pattern(literals)
        regex = re.compile(pattern.pattern.encode("utf-8", "surrogatepass"))
        data = b"".join(text.encode("utf-8", "surrogatepass") + bytes([rnd.randrange(256)]) for text in texts)
        want = [m.span() for m in regex.finditer(data)]
        assert pattern.utf8_spans(np.frombuffer(data, np.uint8)).tolist() == [list(span) for span in want]


def test_encode_utf8_with_many_added_tokens(bert_json_path, parity_lines):
    """Rows of UTF-8 bytes with hundreds of added tokens (``rows_with`` through the trie walk):
    the ids of the same texts as ``str``."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from gputok import Tokenizer

    lines = parity_lines[:3000:3]
    words = sorted({word for line in lines for word in line.split() if len(word) > 3})
    hf = HFTokenizer.from_file(str(bert_json_path))
    hf.no_padding()
    hf.no_truncation()
    hf.add_tokens([AddedToken(word, normalized=False) for word in random.Random(2).sample(words, 300)])
    tok = Tokenizer.from_str(hf.to_str())
    assert isinstance(tok._pattern(None), LiteralPattern)
    rows = [line.encode() for line in lines]
    offsets = np.cumsum([0] + [len(row) for row in rows])
    got = tok.encode_utf8(b"".join(rows), offsets)
    want = tok.encode_ragged(lines)
    assert got.ids.offsets.tolist() == want.ids.offsets.tolist() and got.ids.values.tolist() == want.ids.values.tolist()
    assert want.ids.values.tolist() == [i for e in hf.encode_batch(lines, add_special_tokens=False) for i in e.ids]
