"""The models' numba kernels against the torch path: ``encode_words`` of the same words under the
default CPU backend (``wordpiece_match_numba``; ``bpe_symbols_numba`` + ``bpe_heap``) and under
``_dispatch.use_backend("torch")`` (the torch twins), compared exactly: ids, ends, offsets, dtypes.

Models: BERT WordPiece (and its partial-unk variant), cl100k and gpt2 (byte-level, ignore_merges),
gpt2's merges without ignore_merges, Mistral's SentencePiece BPE (ranks by score, byte fallback),
and a character-level BPE trained here (``</w>`` suffix) with byte fallback, fused unknowns,
ignore_merges, and a ``##`` prefix. Words: cut from the parity corpus, random Unicode (every
plane, lone surrogates, combining marks, CJK, emoji; words longer than max_input_chars_per_word),
and odd shapes (no words, empty words, one character).
"""

import json
import random
import re

import numpy as np
import pytest
import torch

from gputok import Tokenizer, _dispatch, assets
from gputok.models.bpe import BPE
from gputok.models.wordpiece import WordPiece
from gputok.ragged import Ragged


def ragged(words, dtype=torch.int32):
    return Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w], dtype=dtype),
                               torch.tensor([len(w) for w in words], dtype=torch.int64))


def both(model, words):
    got = model.encode_words(words)
    with _dispatch.use_backend("torch"):
        want = model.encode_words(words)
    return got, want


def assert_same(model, words):
    got, want = both(model, words)
    for name, g, w in zip(("ids", "ends"), got, want):
        assert g.values.dtype == w.values.dtype and g.offsets.dtype == w.offsets.dtype, (name, g.values.dtype,
                                                                                         w.values.dtype)
        assert torch.equal(g.offsets, w.offsets), name
        if not torch.equal(g.values, w.values):
            rows = [i for i, (a, b) in enumerate(zip(g.tolist(), w.tolist())) if a != b]
            raise AssertionError(f"{name} differ in {len(rows)} words, first {rows[:3]}: "
                                 f"{[g.tolist()[i] for i in rows[:3]]} vs {[w.tolist()[i] for i in rows[:3]]}")
    assert len(got[0]) == len(words)


@pytest.fixture(scope="module")
def char_bpe_json(tmp_path_factory):
    """huggingface's CharBPETokenizer (``</w>``, ``<unk>``) trained on 1 MB of English, vocab 3000."""
    from tokenizers import CharBPETokenizer

    trained = CharBPETokenizer()
    trained.train([str(assets.english_corpus(1))], vocab_size=3000)
    path = tmp_path_factory.mktemp("charbpe") / "tokenizer.json"
    trained.save(str(path))
    return path


def _char_variant(path, **changes):
    spec = json.loads(path.read_text(encoding="utf-8"))["model"]
    if changes.pop("fallback_tokens", False):
        for b in range(256):
            spec["vocab"][f"<0x{b:02X}>"] = len(spec["vocab"])
    spec.update(changes)
    return BPE.from_json(spec, byte_level=False)


@pytest.fixture(scope="module")
def models(bert, char_bpe_json):
    cl100k = Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k").model
    gpt2 = Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2").model
    spec = bert.model.to_json()
    partial = WordPiece(spec["vocab"], partial_unk=True)
    prefixed = {"a": 0, "b": 1, "c": 2, "##b": 3, "##c": 4, "##c$": 5, "ab": 6, "abc$": 7, "##bc$": 8,
                "[UNK]": 9, "c$": 10, **{f"<0x{b:02X}>": 11 + b for b in range(256)}}
    tokens = _tokens(prefixed)
    return {
        "bert": bert.model,
        "bert-partial-unk": partial,
        "cl100k": cl100k,
        "gpt2": gpt2,
        "gpt2-no-ignore-merges": BPE(gpt2.token_bytes, gpt2._pairs_dict, ignore_merges=False),
        "mistral": Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model")).model,
        "char": _char_variant(char_bpe_json),
        "char-byte-fallback": _char_variant(char_bpe_json, fallback_tokens=True, byte_fallback=True),
        "char-fuse-unk": _char_variant(char_bpe_json, fuse_unk=True),
        "char-ignore-merges": _char_variant(char_bpe_json, ignore_merges=True),
        "char-no-unk": _char_variant(char_bpe_json, unk_token=None),
        "char-prefix-fallback": BPE(None, {(0, 3): (0, 6), (6, 5): (1, 7), (3, 5): (2, 8)}, tokens=tokens,
                                    unk_token="[UNK]", fuse_unk=True, byte_fallback=True,
                                    continuing_subword_prefix="##", end_of_word_suffix="$"),
    }


def _tokens(vocab):
    tokens = [None] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        tokens[i] = t
    return tokens


NAMES = ["bert", "bert-partial-unk", "cl100k", "gpt2", "gpt2-no-ignore-merges", "mistral", "char",
         "char-byte-fallback", "char-fuse-unk", "char-ignore-merges", "char-no-unk", "char-prefix-fallback"]


def _as_model_sees(name, word):
    if name == "mistral":
        return word.replace(" ", "\u2581")
    if name.startswith("bert"):
        return word.strip().lower() if len(word) % 3 else word.strip()  # some words keep their case
    return word


@pytest.fixture(scope="module")
def corpus_words(parity_lines):
    """The unique words of every 40th parity line (English, Chinese, symbols), gpt2-style cuts."""
    pattern = re.compile(r" ?\w+| ?[^\w\s]+|\s+")
    seen = dict.fromkeys(w for line in parity_lines[::40] for w in pattern.findall(line))
    return list(seen)


def _random_words(seed, count=400):
    rng = random.Random(seed)
    pools = [
        lambda: chr(rng.randrange(0x20, 0x7F)),
        lambda: chr(rng.randrange(0x80, 0x800)),
        lambda: chr(rng.randrange(0x4E00, 0x9FFF)),  # CJK
        lambda: chr(rng.randrange(0x300, 0x370)),  # combining marks
        lambda: chr(rng.randrange(0x1F300, 0x1FAFF)),  # emoji
        lambda: chr(rng.randrange(0xD800, 0xE000)),  # lone surrogates
        lambda: chr(rng.randrange(0x10000, 0x110000)),  # the other planes
        lambda: chr(rng.randrange(0, 0x110000)),
        lambda: rng.choice("abcdefghijklmnopqrstuvwxyz \u2581#<>"),
    ]
    words = []
    for _ in range(count):
        length = rng.choice([1, 1, 2, 3, 5, 8, 13, 40, 99, 100, 101, 150, 300])
        pool = rng.sample(pools, rng.randint(1, 3))
        words.append("".join(rng.choice(pool)() for _ in range(length)))
    return words


@pytest.mark.parametrize("name", NAMES)
def test_corpus_words(models, corpus_words, name):
    words = [_as_model_sees(name, w) for w in corpus_words]
    assert len(words) > 5000
    assert_same(models[name], ragged(words))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_unicode_words(models, name, seed):
    assert_same(models[name], ragged(_random_words(seed)))


ODD = {
    "no words": [],
    "one empty word": [""],
    "empty words between": ["", "a", "", "", "b", ""],
    "one char": ["x"],
    "one char each": list("aZ9 é中😀\u2581#\ud800"),
    "longest allowed and one more": ["a" * 100, "a" * 101, "ab" * 50, "ab" * 51],
    "a long word": ["the" * 3000],
    "one letter repeated": ["a" * 5000, "\u2581" * 300],
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", list(ODD))
def test_odd_shapes(models, name, case):
    assert_same(models[name], ragged(ODD[case]))


def test_int64_codepoints_give_the_same_result(models, corpus_words):
    """Callers may pass int64 codepoints: the kernels see int32 (one compiled signature)."""
    for name in ("bert", "cl100k", "char-byte-fallback"):
        words = corpus_words[:300]
        a, b = models[name].encode_words(ragged(words)), models[name].encode_words(ragged(words, torch.int64))
        assert all(torch.equal(x.values, y.values) and torch.equal(x.offsets, y.offsets) for x, y in zip(a, b))


def _wordpiece_reference(model, word):
    """The greedy rule in Python over the vocabulary dicts: (ids, ends) of one word."""
    n, start, pieces = len(word), 0, []
    while start < n <= model.max_input_chars_per_word:
        table = model.vocab if start == 0 else model.continuations
        end = n
        while end > start and word[start:end] not in table:
            end -= 1
        if end == start:
            break
        pieces.append((table[word[start:end]], end))
        start = end
    if start < n:
        pieces = [(model.unk_id, n)]
    return [i for i, _ in pieces], [e for _, e in pieces]


def test_wordpiece_equals_the_python_rule(models, corpus_words):
    """The kernel against the rule itself, in Python (what the removed small-batch loop did)."""
    bert = models["bert"]
    words = [w.strip().lower() for w in corpus_words[:3000]] + _random_words(5, 200) + ["unaffable", "a" * 101]
    ids, ends = bert.encode_words(ragged(words))
    assert list(zip(ids.tolist(), ends.tolist())) == [tuple(_wordpiece_reference(bert, w)) for w in words]


def test_wordpiece_partial_unk_runs(models):
    """With partial_unk, a run of unmatched characters is one unk ending where the run does."""
    partial, vocab = models["bert-partial-unk"], models["bert"].vocab
    ids, ends = partial.encode_words(ragged(["x\u0378\u0378\u0378y", "\u0378", "a" * 101]))  # U+0378: unassigned
    assert ids.tolist() == [[vocab["x"], partial.unk_id, vocab["##y"]], [partial.unk_id], [partial.unk_id]]
    assert ends.tolist() == [[1, 4, 5], [1], [101]]


def test_bpe_missing_unk_token_raises_on_both_paths():
    model = BPE(None, {}, tokens=["a", "b"], unk_token="<unk>")
    with pytest.raises(ValueError, match="unk_token '<unk>' is not in the vocabulary"):
        model.encode_words(ragged(["ab", "ac"]))
    with _dispatch.use_backend("torch"), pytest.raises(ValueError, match="unk_token '<unk>' is not in the vocabulary"):
        model.encode_words(ragged(["ab", "ac"]))
    assert model.encode_words(ragged(["ab", "ba"]))[0].tolist() == [[0, 1], [1, 0]]


@pytest.mark.parametrize("name", ["cl100k", "gpt2", "gpt2-no-ignore-merges"])
def test_encode_word_bytes_equals_encode_words(models, corpus_words, name):
    model = models[name]
    words = corpus_words[:500] + ["x" + "é" * 300, "ab" * 200]
    ids, _ = model.encode_words(ragged(words))
    assert [model.encode_word_bytes(w.encode("utf-8")) for w in words] == ids.tolist()


def test_kernels_do_not_touch_their_inputs(models, corpus_words):
    words = ragged(corpus_words[:500])
    before = words.values.clone(), words.offsets.clone()
    for name in ("bert", "cl100k", "mistral", "char-byte-fallback"):
        models[name].encode_words(words)
    assert torch.equal(words.values, before[0]) and torch.equal(words.offsets, before[1])


def test_whole_word_table_finds_every_token(models):
    """``ignore_merges``: every cl100k token, as a word, is itself (the hash table and its checks)."""
    model = models["cl100k"]
    rng = np.random.default_rng(3)
    chosen = rng.choice(model.vocab_size, 3000, replace=False)
    words = [model.token_bytes[i].decode("utf-8") for i in chosen
             if model.token_bytes[i] is not None and _utf8_text(model.token_bytes[i])]
    ids, _ = model.encode_words(ragged(words))
    assert ids.tolist() == [[model.vocab[w]] for w in words]


def _utf8_text(b):
    try:
        return bool(b.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def test_a_merged_token_that_is_also_one_character_ends_at_that_character():
    """"##bc" is both the merge of "##b" and "##c" and, with suffix "c", the symbol of a last "b":
    in "ab" it covers one character. (The torch path counts a token's symbols from its merge, 2
    here, and gives ends [1, 3]; the kernels track each token's symbols: [1, 2].)"""
    model = BPE(None, {(2, 3): (0, 4)}, tokens=_tokens({"a": 0, "b": 1, "##b": 2, "##c": 3, "##bc": 4}),
                continuing_subword_prefix="##", end_of_word_suffix="c")
    ids, ends = model.encode_words(ragged(["ab", "abb"]))
    assert ids.tolist() == [[0, 4], [0, 2, 4]] and ends.tolist() == [[1, 2], [1, 2, 3]]


def test_pickled_models_and_threads_give_the_same_pieces(models, corpus_words):
    """A pickled model (DataLoader workers) leaves the kernels' tables behind and makes them again;
    8 threads calling the nogil kernels at once get the single-call pieces."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    words = ragged(corpus_words[:2000])
    for name in ("bert", "cl100k", "char-byte-fallback"):
        model = models[name]
        want = [r.tolist() for r in model.encode_words(words)]
        copy = pickle.loads(pickle.dumps(model))
        assert "_numba_tables" not in copy.__dict__
        assert [r.tolist() for r in copy.encode_words(words)] == want
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda _: [r.tolist() for r in model.encode_words(words)], range(16)))
        assert all(g == want for g in got)
