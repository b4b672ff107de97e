"""Tokenizer.encode_utf8 (ragged UTF-8 bytes in, no str per text) against encode_ragged of the
decoded strings: real text, random Unicode, invalid UTF-8 and added tokens written in the text,
for BERT (WordPiece), cl100k (byte-level BPE), a SentencePiece Unigram model and Mistral
(SentencePiece BPE with byte fallback); and the UTF-8 kernel against Python's decoder."""

import random
import re

import numpy as np
import pytest
import torch

import gputok
from gputok import assets
from gputok.ingest import rows_with
from gputok.kernels.ingest_numba import utf8_units_numba

# bytes that start, continue, overlong or cut short UTF-8 characters, at the edges of each range
_EDGE_BYTES = [0x00, 0x0A, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
               0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]


def _ragged(rows: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    data = np.frombuffer(b"".join(rows), dtype=np.uint8)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return data, offsets


def _random_text(rng: random.Random, length: int) -> str:
    """Mixed scripts, combining marks, emoji, controls and whitespace (no surrogates: UTF-8 holds none)."""
    pools = [(0x20, 0x7F), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000),
             (0x4E00, 0xA000), (0x300, 0x370), (0x1F300, 0x1FAFF)]
    chars = []
    for _ in range(length):
        low, high = rng.choice(pools)
        chars.append(chr(rng.randrange(low, high)) if rng.random() < 0.7 else rng.choice(" \n\t\u3000\xa0é"))
    return "".join(chars)


def _invalid_row(rng: random.Random) -> bytes:
    good = _random_text(rng, rng.randrange(6)).encode("utf-8")
    bad = bytes(rng.choice(_EDGE_BYTES) for _ in range(rng.randrange(1, 6)))
    cut = rng.randrange(len(good) + 1)
    return good[:cut] + bad + good[cut:]


def test_utf8_kernel_decodes_as_python_replace():
    rng = random.Random(0)
    rows = [bytes(rng.choice(_EDGE_BYTES) for _ in range(rng.randrange(9))) for _ in range(20000)]
    rows += [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(3000)]
    rows += [_random_text(rng, 12).encode("utf-8") for _ in range(2000)]
    rows += [b"", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xf0\x9f\x98"]  # surrogate, > U+10FFFF, cut short
    data, offsets = _ragged(rows)
    units, lengths, invalid = utf8_units_numba(data, offsets[:-1], offsets[1:])
    decoded = units.astype("<u4").tobytes().decode("utf-32-le")
    ends = np.cumsum(lengths).tolist()
    got = [decoded[a:b] for a, b in zip([0, *ends], ends)]
    assert got == [r.decode("utf-8", errors="replace") for r in rows]
    assert invalid.tolist() == [r.decode("utf-8", errors="replace").encode("utf-8") != r for r in rows]
    assert invalid.sum() > 1000


@pytest.fixture(scope="module")
def sample_lines() -> list[str]:
    """Every 40th line of the parity corpus (English, Chinese, Shakespeare, GO terms): ~500 KB."""
    return assets.parity_corpus().read_text(encoding="utf-8").splitlines()[::40]


_TOKENIZERS = {
    "bert": lambda: gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json")),
    "cl100k": lambda: gputok.Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k",
                                                     special_tokens={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258}),
    "unigram": lambda: gputok.Tokenizer.from_sentencepiece(str(assets.fetch("sp-test-model"))),
    "mistral": lambda: gputok.Tokenizer.from_sentencepiece(str(assets.fetch("mistral-sp-model"))),
}


@pytest.fixture(scope="module", params=sorted(_TOKENIZERS))
def tok(request):
    return _TOKENIZERS[request.param]()


def _rows(tok, sample_lines) -> list[bytes]:
    rng = random.Random(1)
    added = [t.content for t in tok.added_tokens] or ["<|endoftext|>"]
    rows = [line.encode("utf-8") for line in sample_lines]
    rows += [_random_text(rng, rng.randrange(40)).encode("utf-8") for _ in range(1500)]
    rows += [_invalid_row(rng) for _ in range(1500)]
    # added tokens written in the text, beside invalid bytes, and split across two rows
    rows += [b"x " + rng.choice(added).encode("utf-8") + b"\xff y" for _ in range(50)]
    rng.shuffle(rows)
    token = added[0].encode("utf-8")
    return rows + [b"ab" + token[:2], token[2:] + b" " + token + b" cd", b"", token]  # a match across two rows


@pytest.mark.parametrize("threads", [1, 2])
def test_encode_utf8_equals_encode_ragged(tok, sample_lines, threads):
    rows = _rows(tok, sample_lines)
    texts = [r.decode("utf-8", errors="replace") for r in rows]
    data, offsets = _ragged(rows)
    gputok.set_num_threads(threads)
    try:
        got = tok.encode_utf8(torch.from_numpy(data.copy()), torch.from_numpy(offsets), with_spans=True)
        want = tok.encode_ragged(texts, with_spans=True)
        plain = tok.encode_utf8(data.tobytes(), offsets, allowed=frozenset())
        plain_want = tok.encode_ragged(texts, allowed=frozenset())
    finally:
        gputok.set_num_threads(None)
    assert got.ids.offsets.tolist() == want.ids.offsets.tolist()
    assert torch.equal(got.ids.values, want.ids.values)
    assert torch.equal(got.spans, want.spans)
    assert torch.equal(plain.ids.offsets, plain_want.ids.offsets) and torch.equal(plain.ids.values, plain_want.ids.values)


def test_rows_with_marks_rows_a_match_across_rows_overlaps():
    # "aXa" across rows 0-1 ("a" + "Xa") hides the one inside row 1 ("XaXa"[1:]) from the search
    data, offsets = _ragged([b"..a", b"XaXa", b"zz", b"aXa", b""])
    assert rows_with(re.compile("aXa"), data, offsets).tolist() == [True, True, False, True, False]
    assert rows_with(re.compile("é"), data, offsets).tolist() == [False] * 5


def test_encode_utf8_rows_of_a_larger_buffer_and_errors():
    tok = _TOKENIZERS["bert"]()
    data = np.frombuffer(b"junk[SEP] hello world [MASK]!tail", dtype=np.uint8)
    got = tok.encode_utf8(data, [4, 9, 28])  # rows need not start at 0 or end at the buffer's end
    assert got.ids.tolist() == tok.encode_ragged(["[SEP]", " hello world [MASK]"]).ids.tolist()
    assert tok.encode_utf8(b"", [0]).ids.tolist() == []
    with pytest.raises(ValueError, match="offsets must rise"):
        tok.encode_utf8(b"abc", [0, 2, 1])
    with pytest.raises(ValueError, match="len\\(data\\) = 3"):
        tok.encode_utf8(b"abc", [0, 4])
    with pytest.raises(ValueError, match="1-D uint8"):
        tok.encode_utf8(np.zeros(3, dtype=np.int32), [0, 3])
