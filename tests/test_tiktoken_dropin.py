"""gputok.tiktoken against tiktoken itself on the same rank files: the kinds of checks of tiktoken's
public tests (repeated digits, regex edge cases, large repeated input, special tokens, surrogates,
raw bytes, offsets, pickling, batch calls), on real text and hypothesis-drawn text.

tiktoken 0.14's own suite runs against gputok through ``tools/tiktoken_shim`` (its README has the
command); these tests compare call by call with the real library.
"""

import hashlib
import pickle
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputok import assets
from gputok import tiktoken as gtiktoken

tiktoken = pytest.importorskip("tiktoken")

NAMES = ["r50k_base", "cl100k_base", "o200k_base"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ours(name: str) -> gtiktoken.Encoding:
    assets.fetch(gtiktoken._RANK_FILES[gtiktoken._ENCODINGS[name][0]][1])
    return gtiktoken.get_encoding(name)


@pytest.fixture(scope="module", params=NAMES)
def pair(request):
    """(gputok's encoding, tiktoken's Encoding built from the same ranks, pattern and specials)."""
    ours = _ours(request.param)
    theirs = tiktoken.Encoding(request.param, pat_str=ours._pat_str, mergeable_ranks=ours._mergeable_ranks,
                               special_tokens=ours._special_tokens)
    return ours, theirs


@pytest.fixture(scope="module")
def cl100k():
    ours = _ours("cl100k_base")
    return ours, tiktoken.Encoding("cl100k_base", pat_str=ours._pat_str, mergeable_ranks=ours._mergeable_ranks,
                                   special_tokens=ours._special_tokens)


def _small_ranks() -> dict[bytes, int]:
    """A tiny vocabulary: the 256 bytes and a few merges (builds in milliseconds)."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b"he", b"ll", b"hell", b"hello", b" w", b" wo", b"or", b" world"):
        ranks[token] = len(ranks)
    return ranks


EDGE_CASES = [
    "", "0", *("0" * n for n in range(2, 20)), "rer", "'rer", "today\n ", "today\n \n", "today\n  \n", " \x850",
    "hello world", "hello  world ", "  leading", "trailing  ", "\n\n\n", "\r\n\r\n x", "\t\tx", "I'M don'T we've 'LL",
    "请考试我的软件！12345", "1234567890 3.14159", "x" * 1000 + " " + "y" * 1000, "a\u0300\u0301b", "٣٤٥ ١٢",
    "emoji \U0001f680\U0001f525\U0001f44d mixed", "Ω≈ç√∫ Икс हिन्दी", "<|endoftext|> inside", "<|endof", "text|>",
    "https://example.com/path?q=1&x=2#frag", " \u00a0\u3000\u2028 x", "ſ\u0130K", "'s's's", "foo/bar\n/baz",
]


def test_edge_cases(pair):
    ours, theirs = pair
    for text in EDGE_CASES:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text
        assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=()), text
        assert ours.decode(ours.encode_ordinary(text)) == text
    assert ours.encode_ordinary_batch(EDGE_CASES) == theirs.encode_ordinary_batch(EDGE_CASES)


def test_large_repeated(pair):
    """Long runs of one character (one word of 100k bytes) and the catastrophic repeats."""
    ours, theirs = pair
    assert ours.encode("x" * 100_000) == theirs.encode("x" * 100_000)
    for c in ["^", "0", "a", "'s", " ", "\n"]:
        for text in (c * 10_000, " " + c * 10_000, " " + c * 10_000 + "\n"):
            ids = ours.encode(text)
            assert ids == theirs.encode(text), c
            assert ours.decode(ids) == text


def test_real_lines(pair, parity_lines):
    """Every fifth of the first 20,000 lines of the parity corpus (English, Chinese, symbols)."""
    ours, theirs = pair
    lines = parity_lines[:20000:5]
    assert ours.encode_ordinary_batch(lines) == theirs.encode_ordinary_batch(lines)
    assert ours.encode_batch(lines, disallowed_special=()) == theirs.encode_batch(lines, disallowed_special=())
    joined = "\n".join(lines)
    assert ours.encode_ordinary(joined) == theirs.encode_ordinary(joined)
    assert (ours.encode_to_numpy(joined, disallowed_special=()) == theirs.encode_to_numpy(joined, disallowed_special=())).all()


TEXT = st.text(alphabet=st.one_of(
    st.sampled_from(list(" \t\n\r\u00a0\u3000'sdtmlvreSDTM0123456789٣!?.,/-\u0300\U0001f44d中é")),
    st.characters(codec="utf-8")), max_size=60)


@given(texts=st.lists(TEXT, max_size=8))
@SETTINGS
def test_random_text(pair, texts):
    ours, theirs = pair
    assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)
    encoded = ours.encode_batch(texts, allowed_special="all")
    assert encoded == theirs.encode_batch(texts, allowed_special="all")
    assert ours.decode_batch(encoded) == texts


SPECIAL_TEXT = "<|endoftext|> hello <|fim_prefix|> there <|fim_middle|>"
SPECIAL_OPTIONS = [
    {}, {"disallowed_special": ()}, {"allowed_special": "all"}, {"allowed_special": "all", "disallowed_special": ()},
    {"allowed_special": "all", "disallowed_special": "all"}, {"disallowed_special": {"<|endoftext|>"}},
    {"disallowed_special": {"<|fim_prefix|>"}}, {"allowed_special": {"<|fim_prefix|>"}, "disallowed_special": ()},
    {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
    {"allowed_special": {"<|endoftext|>"}, "disallowed_special": {"<|endoftext|>"}},  # in both: raises
    {"allowed_special": {"<|endoftext|>"}, "disallowed_special": {"<|fim_prefix|>"}},
    {"allowed_special": {"<|endoftext|>", "<|fim_middle|>"}}, {"allowed_special": {"<|not a token|>"}},
    {"disallowed_special": {"hello"}},  # a string that is no special token is still looked for
]


def _outcome(call):
    try:
        return call()
    except ValueError:
        return "ValueError"


@pytest.mark.parametrize("options", SPECIAL_OPTIONS, ids=str)
def test_special_tokens(cl100k, options):
    ours, theirs = cl100k
    for text in (SPECIAL_TEXT, "no special here", "<|endoftext|>"):
        expected = _outcome(lambda: theirs.encode(text, **options))
        assert _outcome(lambda: ours.encode(text, **options)) == expected, text
        assert _outcome(lambda: ours.encode_batch([text, "x"], **options)) == _outcome(
            lambda: theirs.encode_batch([text, "x"], **options)), text
    with pytest.raises(ValueError, match="allowed_special="):
        ours.encode("a <|endoftext|>")


def test_special_token_helpers(pair):
    ours, theirs = pair
    assert ours.n_vocab == theirs.n_vocab and ours.max_token_value == theirs.max_token_value
    assert ours.eot_token == theirs.eot_token and ours.special_tokens_set == theirs.special_tokens_set
    assert ours.is_special_token(ours.eot_token) and not ours.is_special_token(0)
    assert ours.encode_single_token("<|endoftext|>") == ours.eot_token
    assert ours.encode_single_token(b"hello") == theirs.encode_single_token(b"hello")
    with pytest.raises(KeyError):
        ours.encode_single_token("not one token at all")
    assert ours.token_byte_values() == theirs.token_byte_values()
    assert ours._encode_single_piece("helloqqqq") == theirs._encode_single_piece("helloqqqq")


SURROGATES = ["\ud83d\udc4d", "\ud83d", "\udc4d", "\udc4d\ud83d", "a\ud83d\ud83d\udc4db", "x\ud800", "\ud83d\udc4d" * 3,
              "hi \ud83d\udc4d <|endoftext|>", "\udbff\udfff\ud800\udc00"]


def test_surrogates(pair):
    """A surrogate pair is read as its codepoint, a lone surrogate as U+FFFD, as tiktoken reads them."""
    ours, theirs = pair
    for text in SURROGATES:
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), ascii(text)
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), ascii(text)
    assert ours.encode_ordinary_batch(SURROGATES) == theirs.encode_ordinary_batch(SURROGATES)
    assert ours.encode("\ud83d") == ours.encode("\ufffd")


@given(texts=st.lists(st.text(alphabet=st.sampled_from(["\ud83d", "\udc4d", "\udbff", "\udc00", "a", " ", "é"]),
                              max_size=8), max_size=5))
@SETTINGS
def test_random_surrogates(cl100k, texts):
    ours, theirs = cl100k
    assert ours.encode_ordinary_batch(texts) == [theirs.encode_ordinary(t) for t in texts]


BYTES = [b" \xec\x8b\xa4\xed", b"\x80", b"\x80" * 9, b"hello \xff world", b"  \xe2\x82", b"a\n\n \xc3", b"\xff\xfe\x00abc",
         "日本語".encode()[:-1], b"\xed\xa0\x80", b"ok then   \x80\x80 more text"]


def test_encode_bytes(pair):
    ours, theirs = pair
    for data in BYTES:
        ids = ours._encode_bytes(data)
        assert ids == theirs._encode_bytes(data), data
        assert ours.decode_bytes(ids) == data


@given(data=st.binary(max_size=40))
@SETTINGS
def test_random_bytes(cl100k, data):
    ours, theirs = cl100k
    ids = ours._encode_bytes(data)
    assert ids == theirs._encode_bytes(data)
    assert ours.decode_bytes(ids) == data


def test_decode(pair):
    ours, theirs = pair
    ids = theirs.encode("héllo wörld 👍 中文") + theirs._encode_bytes(b"\xe4\xb8") + [ours.eot_token]
    for errors in ("replace", "ignore", "backslashreplace", "surrogateescape"):
        assert ours.decode(ids, errors=errors) == theirs.decode(ids, errors=errors)
    with pytest.raises(UnicodeDecodeError):
        ours.decode(ids, errors="strict")
    assert ours.decode_bytes(ids) == theirs.decode_bytes(ids)
    assert ours.decode_tokens_bytes(ids) == theirs.decode_tokens_bytes(ids)
    assert ours.decode_single_token_bytes(ids[0]) == theirs.decode_single_token_bytes(ids[0])
    rows = [ids, [], ids[:3], [ours.eot_token]]
    assert ours.decode_batch(rows) == theirs.decode_batch(rows)
    assert ours.decode_batch(rows, errors="ignore") == theirs.decode_batch(rows, errors="ignore")
    assert ours.decode_bytes_batch(rows) == theirs.decode_bytes_batch(rows)
    missing = ours.n_vocab + 5
    for call in (ours.decode_single_token_bytes, theirs.decode_single_token_bytes):
        with pytest.raises(KeyError):
            call(missing)
    for call in (ours.decode_bytes, theirs.decode_bytes):
        with pytest.raises(KeyError):
            call([1, missing])


OFFSET_TEXTS = ["hello world", "hello world<|endoftext|> green cow", "我非常渴望与人工智能一起工作", "நடிகர் சூர்யா",
                " Ġ除", "a👍b  c\n\nd", ""]


def test_offsets(pair):
    ours, theirs = pair
    for text in OFFSET_TEXTS:
        ids = theirs.encode(text, allowed_special="all")
        assert ours.decode_with_offsets(ids) == theirs.decode_with_offsets(ids), text


@given(data=st.data())
@SETTINGS
def test_random_offsets(cl100k, data):
    ours, theirs = cl100k
    ids = data.draw(st.lists(st.sampled_from(range(0, 100256, 7)), min_size=1, max_size=20))
    ids = theirs.encode(theirs.decode(ids, errors="ignore"), allowed_special="all")
    assert ours.decode_with_offsets(ids) == theirs.decode_with_offsets(ids)


def test_pickle():
    """By value, about the size of the ranks themselves (tiktoken pickles the dict); r50k only:
    unpickling rebuilds the tokenizer (seconds for the larger vocabularies)."""
    ours = _ours("r50k_base")
    theirs = tiktoken.Encoding("r50k_base", pat_str=ours._pat_str, mergeable_ranks=ours._mergeable_ranks,
                               special_tokens=ours._special_tokens)
    data = pickle.dumps(ours)
    assert len(data) < len(pickle.dumps(theirs))
    again = pickle.loads(data)
    assert again.name == ours.name and again.encode("hello world <|endoftext|>", allowed_special="all") == \
        ours.encode("hello world <|endoftext|>", allowed_special="all")
    assert again._mergeable_ranks == ours._mergeable_ranks and again._special_tokens == ours._special_tokens


def test_custom_encoding_and_pickle():
    ranks = _small_ranks()
    ours = gtiktoken.Encoding("tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|p|>": 300})
    theirs = tiktoken.Encoding("tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|p|>": 300})
    for text in ("hello world", "  hello\tworld hellohello ", "<|p|>hello", ""):
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    again = pickle.loads(pickle.dumps(ours))
    assert again.encode("<|p|> hello", allowed_special="all") == ours.encode("<|p|> hello", allowed_special="all")
    with pytest.raises(ValueError, match="explicit_n_vocab"):
        gtiktoken.Encoding("tiny", pat_str=r"\S+", mergeable_ranks=ranks, special_tokens={}, explicit_n_vocab=7)
    with pytest.raises(ValueError, match="share a rank"):
        gtiktoken.Encoding("bad", pat_str=r"\S+", mergeable_ranks={**ranks, b"xy": 0}, special_tokens={})


def test_gpt2_original_pattern_is_recognised():
    """GPT-2's own regex runs as the r50k rule, and gives the ids of tiktoken with that regex."""
    ours = _ours("r50k_base")
    same = gtiktoken.Encoding("gpt2-original", pat_str=gtiktoken._GPT2_ORIGINAL, mergeable_ranks=ours._mergeable_ranks,
                              special_tokens={})
    assert same._tokenizer.pre_tokenizer.rule == "gpt2"
    theirs = tiktoken.Encoding("gpt2-original", pat_str=gtiktoken._GPT2_ORIGINAL, mergeable_ranks=ours._mergeable_ranks,
                               special_tokens={})
    texts = EDGE_CASES + ["a  \n  b\t\t", "x   ", "   ", "it's  ok  \n"]
    assert same.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)


def test_tensors_and_tokenizer(cl100k, parity_lines):
    ours, theirs = cl100k
    lines = parity_lines[:300]
    flat = ours.encode_batch_to_tensors(lines)
    bounds = flat["row_offsets"].tolist()
    ids = flat["input_ids"].tolist()
    assert [ids[a:b] for a, b in zip(bounds, bounds[1:])] == theirs.encode_batch(lines)
    padded = ours.encode_batch_to_tensors(["hello world", "hi"], padding=True)
    assert padded["input_ids"].tolist()[1][:1] == theirs.encode("hi") and padded["attention_mask"].tolist()[1] == [1, 0]
    tok = ours.to_tokenizer()
    assert tok.encode_batch(lines[:20], allowed_special=set(), disallowed_special="all") == theirs.encode_batch(lines[:20])


def test_registry_offline(tmp_path, monkeypatch):
    """Rank files are found in tiktoken's cache layout, in a folder given as rank_file, and p50k
    from r50k's file; nothing found is an error that says where gputok looked; no network."""
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("gputok.tiktoken opened a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    r50k = assets.fetch("gpt2-tiktoken")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("GPUTOK_CACHE", str(empty))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(empty))
    with pytest.raises(FileNotFoundError, match="python -m gputok.assets cl100k-tiktoken") as error:
        gtiktoken._find_rank_file("cl100k_base", None)
    assert str(empty) in str(error.value)

    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    url = gtiktoken._TIKTOKEN_URL.format("r50k_base")
    shutil.copy(r50k, cache / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    assert gtiktoken._find_rank_file("r50k_base", None)[0].startswith(str(cache))
    where, data = gtiktoken._find_rank_file("p50k_base", None)  # made from r50k's ranks
    assert "runs of spaces" in where and hashlib.sha256(data).hexdigest() == gtiktoken._RANK_FILES["p50k_base"][0]

    folder = tmp_path / "ranks"
    folder.mkdir()
    shutil.copy(r50k, folder / "r50k_base.tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(empty))
    assert gtiktoken._find_rank_file("r50k_base", folder)[0] == str(folder / "r50k_base.tiktoken")
    (folder / "r50k_base.tiktoken").write_bytes(b"aGk= 0\n")
    with pytest.raises(FileNotFoundError, match="its sha256 differs"):
        gtiktoken._find_rank_file("r50k_base", folder)


def test_model_names():
    expected = {"gpt2": "gpt2", "text-davinci-003": "p50k_base", "text-davinci-edit-001": "p50k_edit",
                "gpt-3.5-turbo-0301": "cl100k_base", "gpt-4": "cl100k_base", "gpt-4o": "o200k_base",
                "gpt-oss-120b": "o200k_harmony", "ft:gpt-4o-mini:x": "o200k_base", "ft:gpt-4:x": "cl100k_base",
                "davinci": "r50k_base"}
    for model, name in expected.items():
        assert gtiktoken.encoding_name_for_model(model) == name == tiktoken.encoding_name_for_model(model)
    with pytest.raises(KeyError):
        gtiktoken.encoding_name_for_model("not-a-model")
    assert gtiktoken.list_encoding_names() == tiktoken.list_encoding_names()
    assert gtiktoken.encoding_for_model("gpt-4").name == "cl100k_base"
    with pytest.raises(ValueError, match="unknown encoding"):
        gtiktoken.get_encoding("cl100k")


def test_ingest_kernel_joins_pairs_as_utf16_does():
    """The ingest kernel's surrogate rule against UTF-16 decoding with replacement, text by text."""
    from gputok.ingest import codepoints, joined_surrogate_pairs

    rng = np.random.default_rng(0)
    alphabet = ["\ud83d", "\udc4d", "\udbff", "\udfff", "\ud800", "a", "é", "\U0001f600", "中"]
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 9))) for _ in range(500)]
    got = codepoints(texts, join_surrogate_pairs=True).tolist()
    assert got == [[ord(c) for c in joined_surrogate_pairs(t)] for t in texts]


def test_ingest_torch_path_joins_pairs(monkeypatch):
    """The tensor-op path (GPUTOK_BACKEND=torch) reads surrogates as the kernel does."""
    from gputok.ingest import codepoints

    texts = ["\ud83d\udc4d", "\ud83d", "x\udc4d\ud83d\udc4d", ""]
    kernel = codepoints(texts, join_surrogate_pairs=True).tolist()
    monkeypatch.setenv("GPUTOK_BACKEND", "torch")
    assert codepoints(texts, join_surrogate_pairs=True).tolist() == kernel == [[0x1F44D], [0xFFFD], [120, 0xFFFD, 0x1F44D], []]


def test_tokenizer_rules(cl100k):
    """gputok.Tokenizer itself: tiktoken's allowed/disallowed rule (a token in both sets raises),
    decode(errors=), decode_bytes."""
    ours, theirs = cl100k
    tok = ours.to_tokenizer()
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode("a<|endoftext|>", allowed_special={"<|endoftext|>"}, disallowed_special={"<|endoftext|>"})
    assert tok.encode("a<|endoftext|>", allowed_special={"<|endoftext|>"}, disallowed_special="all") == [64, 100257]
    ids = theirs._encode_bytes(b"ok \xe4\xb8")
    assert tok.decode(ids, errors="ignore") == theirs.decode(ids, errors="ignore") == "ok "
    assert tok.decode(ids) == theirs.decode(ids)
    assert tok.decode_bytes(ids) == b"ok \xe4\xb8"
    assert tok.decode_bytes_batch([ids, [100257]], skip_special_tokens=True) == [b"ok \xe4\xb8", b""]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode_bytes([10 ** 7])
