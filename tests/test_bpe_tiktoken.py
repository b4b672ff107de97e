"""Byte-level BPE from .tiktoken files: ids identical to tiktoken on real text and random Unicode."""

import contextlib
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import Tokenizer, assets
from gputok.hashing import HashMap
from gputok.ingest import utf8_bytes
from gputok.models.bpe import BPE, bpe_merge_torch
from gputok.ragged import Ragged, offsets_from_lengths

tiktoken = pytest.importorskip("tiktoken")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

CHUNK = 65536


@pytest.fixture(scope="module", params=["gpt2", "cl100k"])
def pair(request):
    from gputok.regex_split import PATTERNS

    name = request.param
    path = assets.fetch(f"{name}-tiktoken")
    reference = tiktoken.Encoding(name, pat_str=PATTERNS[name], mergeable_ranks=load_tiktoken_bpe(str(path)),
                                  special_tokens={})
    return name, Tokenizer.from_tiktoken(path, pattern=name), reference


def test_real_text_parity(pair, parity_lines):
    name, ours, reference = pair
    mismatches, compared, examples = 0, 0, []
    for i in range(0, len(parity_lines), CHUNK):
        chunk = parity_lines[i:i + CHUNK]
        got = ours.encode_batch(chunk)
        expected = reference.encode_ordinary_batch(chunk, num_threads=2)
        for line, g, e in zip(chunk, got, expected):
            if g != e:
                mismatches += 1
                examples.append((line[:80], g[:12], e[:12]))
        compared += len(chunk)
    print(f"\n{name}: {compared} lines compared, {mismatches} mismatches")
    assert compared > 400_000
    assert mismatches == 0, examples[:5]


def test_whole_corpus_as_one_text(pair, parity_lines):
    """Newlines and runs of whitespace between lines matter to the split: one long string too."""
    name, ours, reference = pair
    text = "\n".join(parity_lines[:20000])
    assert ours.encode(text) == reference.encode_ordinary(text)


TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" \t\n\r\x0b\x0c\u00a0\u3000\u2028\u0085'sdtmlvreSDTMLVRE0123456789٣")),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
        st.characters(min_codepoint=0x0300, max_codepoint=0x036F),
        st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
)


@contextlib.contextmanager
def without_word_cache(tok):
    """Without the word cache, so the merges run again (in the numba kernel) on the same input."""
    saved = tok.word_cache
    tok.word_cache = None
    try:
        yield
    finally:
        tok.word_cache = saved


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_random_unicode(pair, texts):
    name, ours, reference = pair
    expected = reference.encode_ordinary_batch(texts, num_threads=1)
    assert ours.encode_batch(texts) == expected
    with without_word_cache(ours):
        assert ours.encode_batch(texts) == expected


@pytest.mark.parametrize("text", ["\U00016ebb:A", "\U00016ebb's", "\u088f's", "\U00011de0's 12"])
def test_characters_newer_than_tiktokens_unicode(pair, text, monkeypatch):
    """tiktoken reads Unicode 16; the regex module from 2025.10.23 on reads 17, where U+16EBB and
    U+088F are letters and U+11DE0 a digit (each text here got other ids when gputok's classes
    came from the regex module). Every path gives tiktoken's ids: the default one, the tensor one that splits small
    batches with the regex module under the same check, and the tensor split alone."""
    name, ours, reference = pair
    expected = reference.encode_ordinary(text)
    assert ours.encode(text) == expected
    with without_word_cache(ours):
        assert ours.encode(text) == expected


@pytest.mark.parametrize("text", ["", " ", "a", "   \n\n  x  ", "1" * 5000, " " * 5000, "ab" * 3000,
                                  "\U0001F600" * 50, "don't DON'T It'S we'LL", "x\r\n\r\ny"])
def test_edge_cases(pair, text):
    name, ours, reference = pair
    assert ours.encode(text) == reference.encode_ordinary(text)


def test_decode_round_trip(pair, parity_lines):
    name, ours, reference = pair
    lines = parity_lines[::997][:300]
    for line, ids in zip(lines, ours.encode_batch(lines)):
        assert ours.decode(ids) == reference.decode(ids) == line
    assert ours.decode([ours.encode("é")[0]]) == reference.decode([reference.encode_ordinary("é")[0]])


def test_merge_rounds_match_one_at_a_time():
    """A pair ranked below the one being merged, created by a merge, goes first (tiktoken's rule)."""
    # tokens: x=0, y=1, xy=2 (rank 1), yx=3 (rank 3), xyx=4 (rank 0), made of (xy, x) or (x, yx)
    pairs = {(0, 1): (1, 2), (1, 0): (3, 3), (2, 0): (0, 4), (0, 3): (0, 4)}
    m = HashMap(torch.tensor([a * 5 + b for a, b in pairs]), torch.tensor([(r << 32) | t for r, t in pairs.values()]))
    keys, values = m.tensors("cpu")
    # "x y x y": one at a time, [xy] x y, then (xy, x) ranks 0 < 1 -> [xyx] y. Merging both (x, y)
    # pairs in one round would give [xy] [xy].
    tokens, offsets = bpe_merge_torch(torch.tensor([0, 1, 0, 1]), torch.tensor([0, 4]), slot_keys=keys,
                                      slot_values=values, hash_mask=m.mask, max_probes=m.max_probes, vocab_size=5)
    assert tokens.tolist() == [4, 1]


@pytest.mark.parametrize("seed", range(6))
def test_merge_rounds_equal_the_heap_on_random_merge_tables(seed):
    """Random merge tables (ranks in any order, so merges often create pairs ranked below the
    one being merged) and words with repeated pairs: the rounds give the one-at-a-time result."""
    import random

    from gputok.models.bpe import bpe_merge_heap

    rng = random.Random(seed)
    vocab, made = 4, []
    while vocab < 40:
        pair = (rng.randrange(vocab), rng.randrange(vocab))
        if pair not in made:
            made.append(pair)
            vocab += 1
    ranks = rng.sample(range(len(made)), len(made))  # distinct, in no particular order
    pairs = {pair: (rank, 4 + i) for i, (pair, rank) in enumerate(zip(made, ranks))}
    m = HashMap(torch.tensor([a * vocab + b for a, b in pairs]), torch.tensor([(r << 32) | t for r, t in pairs.values()]))
    table = dict(zip(["slot_keys", "slot_values"], m.tensors("cpu")), hash_mask=m.mask, max_probes=m.max_probes,
                 vocab_size=vocab)
    words = [[rng.randrange(4) for _ in range(rng.randint(0, 30))] for _ in range(300)]
    words += [[0] * 17, [0, 1] * 9, [1, 1, 0] * 7]
    flat = torch.tensor([t for w in words for t in w], dtype=torch.int64)
    offsets = offsets_from_lengths(torch.tensor([len(w) for w in words]))
    expected = [bpe_merge_heap(w, pairs) for w in words]
    assert Ragged(*bpe_merge_torch(flat, offsets, **table)).tolist() == expected



def test_dense_byte_pair_table_equals_the_pair_map(pair):
    """The first merge round reads byte pairs from a dense table: it must hold exactly the pair
    map's values, for every byte pair (and NO_RANK where the pair map has none)."""
    from gputok.hashing import lookup
    from gputok.models.bpe import NO_RANK

    model = pair[1].model
    left, right = torch.meshgrid(torch.arange(256), torch.arange(256), indexing="ij")
    ids = model.byte_to_id
    tokens = torch.stack([ids[left.flatten()], ids[right.flatten()]], 1).flatten()  # (a, b) pairs side by side
    expected = lookup(*model.pairs.tensors("cpu"), model.pairs.mask, model.pairs.max_probes,
                      tokens[:-1] * model.vocab_size + tokens[1:], default=NO_RANK)
    got = model._byte_pair_values(tokens)
    assert torch.equal(got, expected)
    assert int((got != NO_RANK).sum()) > 1000  # real merges among the byte pairs, not an all-missing table


def test_utf8_bytes_matches_python():
    text = "a\u00e9\u20ac\U0001F600z"
    data, _ = utf8_bytes(Ragged.from_lengths(torch.tensor([ord(c) for c in text]), torch.tensor([len(text)])))
    assert bytes(data.values.tolist()) == text.encode()


def test_bad_tiktoken_files(tmp_path):
    truncated = tmp_path / "bad.tiktoken"
    truncated.write_bytes(b"IQ== 0\nIg==\n")
    with pytest.raises(ValueError, match=r"bad.tiktoken:2: not a 'base64-token rank' line"):
        BPE.from_tiktoken(truncated)
    not_base64 = tmp_path / "bad2.tiktoken"
    not_base64.write_bytes(b"@@@ 0\n")
    with pytest.raises(ValueError, match=r"bad2.tiktoken:1"):
        BPE.from_tiktoken(not_base64)
    few_bytes = tmp_path / "few.tiktoken"
    few_bytes.write_bytes(b"IQ== 0\n")
    with pytest.raises(ValueError, match="single-byte tokens"):
        BPE.from_tiktoken(few_bytes)


def test_unknown_pattern_name():
    with pytest.raises(ValueError, match="neither a known name"):
        Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="cl100k_typo(")


@pytest.mark.parametrize("pattern", [" ", r"\w+", r"[a-z]+|\d", r"\p{L}+"])
def test_a_regex_pattern_encodes_its_matches_only_as_tiktoken(pattern, parity_lines):
    """tiktoken drops the text between a regex's matches; the text between must not become words
    (found by benchmarks/fuzz.py: pattern " " gave other ids once Split kept unmatched text)."""
    path = assets.fetch("gpt2-tiktoken")
    reference = tiktoken.Encoding("gpt2-custom", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                  special_tokens={})
    ours = Tokenizer.from_tiktoken(path, pattern=pattern)
    texts = ["Hello, world!  12 34", "don't stop   now\n", "naïve café 中文"] + parity_lines[:300]
    assert ours.encode_batch(texts[:3]) == reference.encode_ordinary_batch(texts[:3])  # the small-batch path
    assert ours.encode_batch(texts * 40) == reference.encode_ordinary_batch(texts * 40)  # the tensor path
    assert Tokenizer.from_str(json.dumps(ours.to_json())).encode_batch(texts) == reference.encode_ordinary_batch(texts)


@pytest.mark.parametrize("pattern", ["a{99999999}", "x{1,200000}", "(?:ab){,100001}"])
def test_a_repeat_count_over_huggingfaces_limit_is_refused_before_it_compiles(pattern):
    """The regex module expands a repeat count in memory (a{99999999} took gigabytes and was
    killed); Oniguruma refuses counts over 100000, and so does gputok, before compiling."""
    with pytest.raises(ValueError, match="over huggingface's limit of 100000"):
        Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern=pattern)


def test_long_words_take_the_heap_path(pair, monkeypatch):
    """Words over LONG_WORD bytes merge one pair at a time with a heap; both paths equal tiktoken."""
    import random

    import gputok.models.bpe as bpe

    name, ours, reference = pair
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéüß中文"
    words = ["".join(rng.choices(alphabet, k=rng.randint(200, 3000))) for _ in range(12)]
    words += ["a" * 5000, "ab" * 2000, "x" + "é" * 700]
    expected = [reference.encode_ordinary(w) for w in words]
    assert ours.encode_batch(words) == expected
    monkeypatch.setattr(bpe, "LONG_WORD", 1 << 30)  # the same words through merge rounds only
    assert ours.encode_batch(words[:8]) == expected[:8]
    monkeypatch.setattr(bpe, "LONG_WORD", 2)  # and nearly everything through the heap
    lines = ["don't stop 12345 the quick brown fox", "naïve café 中文字符 🙂🙂"]
    assert ours.encode_batch(lines) == reference.encode_ordinary_batch(lines)


def test_adversarial_inputs(pair):
    """A megabyte without spaces / of one letter / of digits (timings: see the issue note)."""
    name, ours, reference = pair
    for text in ("xq" * 250_000, "a" * 1_000_000, "7" * 1_000_000):
        assert ours.encode(text) == reference.encode_ordinary(text)


def test_long_words_merge_in_the_kernel(pair, monkeypatch):
    """A 200 KB word without spaces, a long run of a pair, and words over LONG_WORD bytes merge in
    the numba kernel (issue 22: the Python heap took ~5 s per MB), with tiktoken's ids."""
    import random
    import string

    import gputok.models.bpe as bpe

    name, ours, reference = pair

    def python_heap(*args):
        raise AssertionError("a word of the tensor path merged in the Python heap")

    monkeypatch.setattr(bpe, "bpe_merge_heap", python_heap)
    rng = random.Random(11)
    texts = ["".join(rng.choices(string.ascii_letters, k=200_000)), "ab" * 50_000, "x" + "é" * 30_000 + " y" * 9000]
    for text in texts:
        assert ours.encode(text) == reference.encode_ordinary(text)


def test_one_long_line(pair, long_line):
    """The English corpus as one line (100 KB; 1 MB under GPUTOK_FULL=1): tiktoken's ids."""
    name, ours, reference = pair
    ours.word_cache = None  # every word merged, none read back
    try:
        assert ours.encode(long_line) == reference.encode_ordinary(long_line)
    finally:
        from gputok.word_cache import WordCache

        ours.word_cache = WordCache()


def test_special_tokens_like_tiktoken():
    """allowed_special / disallowed_special behave as in tiktoken's encode."""
    from gputok.regex_split import PATTERNS

    path = assets.fetch("gpt2-tiktoken")
    specials = {"<|endoftext|>": 50256}
    reference = tiktoken.Encoding("gpt2", pat_str=PATTERNS["gpt2"], mergeable_ranks=load_tiktoken_bpe(str(path)),
                                  special_tokens=specials)
    ours = Tokenizer.from_tiktoken(path, pattern="gpt2", special_tokens=specials)
    text = "end of one<|endoftext|>start of two <|endoftext|>"
    with pytest.raises(ValueError):
        reference.encode(text)
    with pytest.raises(ValueError, match=r"special token '<\|endoftext\|>', which is disallowed"):
        ours.encode(text, allowed_special=set(), disallowed_special="all")
    assert ours.encode(text, allowed_special={"<|endoftext|>"}) == reference.encode(text, allowed_special={"<|endoftext|>"})
    assert ours.encode(text) == reference.encode(text, allowed_special="all")  # the huggingface default
    plain = ours.encode(text, allowed_special=set(), disallowed_special=())
    assert plain == reference.encode(text, disallowed_special=()) == reference.encode_ordinary(text)
    # A special token cut across two texts of a batch is neither matched nor disallowed.
    assert ours.encode_batch(["a<|endof", "text|>b"], allowed_special=set(), disallowed_special="all") == \
        reference.encode_ordinary_batch(["a<|endof", "text|>b"])
    with pytest.raises(ValueError, match="not added tokens of this tokenizer"):
        ours.encode(text, allowed_special={"<|fim|>"})
    with pytest.raises(ValueError, match="pass 'all' or a set"):
        ours.encode(text, disallowed_special="none")


def test_bench_worker_takes_the_fastest_pass_and_counts_like_tiktoken(tmp_path):
    from gputok import bench

    threads = torch.get_num_threads()
    hf_json = str(tmp_path / "tokenizer.json")
    Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2").save(hf_json)
    rows = {engine: bench._worker(engine, "gpt2", 0.02, [256], threads, "cpu", passes=2, hf_json=hf_json)["results"][0]
            for engine in ("gputok", "gputok-ragged", "tiktoken-batch", "tiktoken-string", "huggingface")}
    for row in rows.values():
        assert len(row["pass_seconds"]) == 2 and row["seconds"] == min(row["pass_seconds"])
    counts = {engine: row["tokens"] for engine, row in rows.items() if engine != "tiktoken-string"}  # (+ newlines)
    assert len(set(counts.values())) == 1, counts
    assert rows["tiktoken-string"]["tokens"] > counts["gputok"]
    assert bench.ANCHORS["cl100k"] == ("tiktoken-batch", "tiktoken-string", "huggingface")
    with pytest.raises(SystemExit):
        bench.main(["--tokenizer", "cl100k", "--passes", "0"])


def test_token_type_ids_only_where_the_template_gives_them(pair, bert):
    """As huggingface transformers: BERT's batches carry token_type_ids, GPT-2 style ones do not
    (GPT-2's model would add their embeddings), unless asked for."""
    _, ours, _ = pair
    texts, seconds = ["Hello there", "a b"], ["x", "y z"]
    assert not ours.uses_token_types and bert.uses_token_types
    for padding in (True, False):
        assert "token_type_ids" not in ours(texts, padding=padding)
        assert "token_type_ids" not in ours(texts, seconds, padding=padding)
        asked = ours(texts, seconds, padding=padding, return_token_type_ids=True)
        assert asked["token_type_ids"].shape == asked["input_ids"].shape
        assert bool(asked["token_type_ids"].eq(1).any())  # the second texts' tokens
        plain = ours(texts, padding=padding, return_token_type_ids=True)
        assert plain["token_type_ids"].shape == plain["input_ids"].shape and not bool(plain["token_type_ids"].any())
        assert "token_type_ids" in bert(texts, padding=padding)
        assert "token_type_ids" not in bert(texts, padding=padding, return_token_type_ids=False)


def test_small_batches_cold_and_warm_give_the_same_ids(pair, parity_lines):
    """Small CPU batches (one text a call) take the one path, the word cache's kernels included:
    tiktoken's ids, cold and then warm (every word from the cache)."""
    from gputok.word_cache import WordCache

    name, ours, reference = pair
    saved = ours.word_cache
    ours.word_cache = cache = WordCache(capacity=5000)
    try:
        lines = [line for line in parity_lines[::409] if 0 < len(line) < 2000][:600]
        lines += ["x\ud800y \udfff", "don't 1234567 \U0001F600\U0001F600", "   \n\n  "]
        lone = str.maketrans({c: "\ufffd" for c in "\ud800\udfff"})  # each lone surrogate is one U+FFFD
        expected = reference.encode_ordinary_batch([line.translate(lone) for line in lines])
        for _ in range(2):  # cold, then every word from the cache
            assert [ours.encode(line) for line in lines] == expected
        assert ours.encode_batch(lines[:5]) == expected[:5]
        assert 1000 < len(cache) <= 5000
        out = ours(lines[:3], padding=False)  # the tensors come out as from the tensor path
        assert out["input_ids"].tolist() == sum(expected[:3], []) and out["input_ids"].dtype == torch.int64
    finally:
        ours.word_cache = saved
