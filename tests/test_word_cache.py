"""The word cache (gputok.word_cache) and the batch hashing it relies on (gputok.dedup).

The cache must never change a result: ids and offsets with it equal those without it (and
tiktoken's), when words come from the cache, when the cache is emptied for lack of room, when
two words share a hash, and when threads share it.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from gputok import Tokenizer, _dispatch, assets
from gputok.dedup import span_hashes, spans_equal, unique_words
from gputok.pre_tokenizers import Words
from gputok.ragged import Ragged, offsets_from_lengths
from gputok.word_cache import WordCache


@pytest.fixture(scope="module")
def cl100k_path():
    return assets.fetch("cl100k-tiktoken")


@pytest.fixture(scope="module")
def tiktoken_cl100k(cl100k_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from gputok.regex_split import PATTERNS

    return tiktoken.Encoding("cl100k", pat_str=PATTERNS["cl100k"], special_tokens={},
                             mergeable_ranks=load_tiktoken_bpe(str(cl100k_path)))


@pytest.fixture(scope="module")
def lines(parity_lines):
    english = [line for line in parity_lines[::211] if line.strip()][:900]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::60][:150]
    return english + chinese


def _thue_morse(n: int) -> str:
    return "".join("ab"[bin(i).count("1") % 2] for i in range(n))


def test_cache_changes_nothing(cl100k_path, tiktoken_cl100k, lines):
    cached = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    plain = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    plain.word_cache = None
    expected = tiktoken_cl100k.encode_ordinary_batch(lines)
    for start, stop in ((0, 500), (300, None), (0, None)):  # overlapping batches: hits and misses mixed
        assert cached.encode_batch(lines[start:stop], allowed_special=set()) == expected[start:stop]
    assert len(cached.word_cache) > 1000
    a = cached(lines[:300], return_offsets=True)
    b = plain(lines[:300], return_offsets=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_cache_is_bounded_and_refills(cl100k_path, tiktoken_cl100k, lines, backend):
    """The store stays within capacity on both paths, batches large and small, and is emptied
    (a new store) when a batch brings more new words than there is room for."""
    from gputok import _dispatch

    tok = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    tok.word_cache = cache = WordCache(capacity=300, max_word_length=8)
    with _dispatch.use_backend(backend):
        for batch in (100, 3):
            sizes, stores = [], set()
            for i in range(0, 600, batch):
                assert tok.encode_batch(lines[i:i + batch]) == tiktoken_cl100k.encode_ordinary_batch(lines[i:i + batch])
                sizes.append(len(cache))
                stores.add(id(cache._stores[torch.device("cpu")]))
            assert max(sizes) <= 300
            assert any(b < a for a, b in zip(sizes, sizes[1:])) and len(stores) > 1  # it was emptied at least once
    store = next(iter(cache._stores.values()))
    assert int(store.entries[:store.count, 1].max()) <= 8  # longer words are not kept


def test_hash_collision_is_a_miss_not_a_wrong_token():
    """Two different words given the same key in turn: the second must not get the first's ids."""
    class Model:  # the cache keeps a weak reference to its model
        pass

    cache = WordCache(capacity=16)
    owner = Model()
    calls = []

    def model(values):
        def encode(starts, lengths):  # ids: the codepoints + 1000; ends: 1, 2, ...
            calls.append(lengths.numel())
            index = torch.cat([torch.arange(s, s + n) for s, n in zip(starts.tolist(), lengths.tolist())]
                              or [torch.zeros(0, dtype=torch.int64)])
            offsets = offsets_from_lengths(lengths)
            ends = index - torch.repeat_interleave(starts - 1, lengths)
            return Ragged(values[index].long() + 1000, offsets), Ragged(ends, offsets)
        return encode

    def run(text, keys):
        values = torch.tensor([ord(c) for c in text])
        starts = torch.arange(0, len(text), 3)
        lengths = torch.full_like(starts, 3)
        ids, _ = cache.encode(owner, values, starts, lengths, torch.tensor(keys), model(values))
        return ids.tolist()

    assert run("abcabc", [7, 7]) == [[1097, 1098, 1099]] * 2
    assert calls == [1]  # one distinct word encoded
    assert run("xyzabc", [7, 7]) == [[1120, 1121, 1122], [1097, 1098, 1099]]  # "xyz" shares key 7
    assert calls == [1, 1]
    assert run("abc", [7]) == [[1097, 1098, 1099]] and calls == [1, 1]  # "abc" still a hit
    assert len(cache) == 1
    cache.encode(Model(), torch.tensor([97]), torch.tensor([0]), torch.tensor([1]), torch.tensor([1]),
                 model(torch.tensor([97])))
    assert len(cache) == 1  # another model: the cache started again


def test_threads_share_one_cache(cl100k_path, tiktoken_cl100k, lines):
    tok = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    tok.word_cache = WordCache(capacity=500)  # small: resets happen while threads read
    chunks = [lines[i::6][:120] for i in range(6)]
    expected = [tiktoken_cl100k.encode_ordinary_batch(c) for c in chunks]
    start = threading.Barrier(6)

    def work(i):
        start.wait()
        return [tok.encode_batch(chunks[i]) for _ in range(3)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(work, range(6)))
    for got, want in zip(results, expected):
        assert all(g == want for g in got)



def test_a_snapshot_stays_valid_while_words_are_added(cl100k_path, monkeypatch):
    """Lookups read a snapshot outside the lock: a word inserted after it is a miss through it,
    and neither later inserts nor a reset (a full cache gets a new store) change what it holds."""
    tok = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    cache = tok.word_cache = WordCache(capacity=64)

    def key(word):
        values = torch.tensor([ord(c) for c in word])
        return span_hashes(values, torch.tensor([0]), torch.tensor([len(word)]))

    def stored_ids(snapshot, entry):
        start, count = snapshot.entries[entry, 2:].tolist()
        return snapshot.ids[start:start + count].tolist()

    tok.encode_batch(["alpha beta gamma"])
    store = cache._stores[torch.device("cpu")]
    snapshot = store.snapshot()
    beta = int(snapshot.find(key(" beta")))
    assert beta >= 0 and stored_ids(snapshot, beta) == tok.encode(" beta")
    tok.encode_batch(["delta"])
    assert int(store.snapshot().find(key("delta"))) >= snapshot.count  # in the store, past the snapshot
    assert int(snapshot.find(key("delta"))) == -1
    tok.encode_batch([" ".join(f"w{i}x" for i in range(100))])  # more new words than room: a new store
    assert cache._stores[torch.device("cpu")] is not store
    assert int(snapshot.find(key(" beta"))) == beta and stored_ids(snapshot, beta) == tok.encode(" beta")


def test_the_snapshot_without_the_lock_follows_every_change(cl100k_path):
    """``cpu_snapshot`` returns the tuple the last change under the lock left (``_cpu_view``),
    without taking the lock: it must follow each insert (a stale one would make every word a
    miss: right tokens, no cache), a reset to a new store, the torch path's inserts and another
    model taking the cache."""
    tok = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    cache = tok.word_cache = WordCache(capacity=64)
    model = tok.model
    tok(["alpha beta gamma"])
    assert cache.cpu_snapshot(model)[2] == len(cache) == 3
    tok(["delta"])
    first = cache.cpu_snapshot(model)
    assert first[2] == len(cache) == 4
    tok([" ".join(f"w{i}x" for i in range(100))])  # more new words than room: a new store
    after = cache.cpu_snapshot(model)
    assert after[0] is not first[0] and after[2] == len(cache) == 64
    with _dispatch.use_backend("torch"):  # the torch path inserts into the same store
        tok.encode_batch(["epsilon"])
    assert cache.cpu_snapshot(model)[2] == len(cache) == 1  # the store was full: a new one
    other = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k").model
    assert cache.cpu_snapshot(other)[2] == 0  # another model empties the cache
    assert cache.cpu_snapshot(model)[2] == 0


def test_bad_capacity():
    with pytest.raises(ValueError, match=r"capacity=0.*word_cache to None"):
        WordCache(capacity=0)


def test_polynomial_collision_falls_back(cl100k_path, tiktoken_cl100k):
    """Thue-Morse strings of 2048 characters collide under any polynomial hash modulo 2**64."""
    tm = _thue_morse(2048)
    other = tm.translate(str.maketrans("ab", "ba"))
    values = torch.tensor([ord(c) for c in tm + other])
    starts, ends = torch.tensor([0, 2048]), torch.tensor([2048, 4096])
    assert span_hashes(values, starts, ends)[0] == span_hashes(values, starts, ends)[1]  # the collision
    unique = unique_words(values, Words(starts, ends, torch.tensor([0, 2])))
    assert unique.representative.numel() == 2
    tok = Tokenizer.from_tiktoken(cl100k_path, pattern="cl100k")
    for _ in range(2):  # the second time through the cache
        assert tok.encode_batch([tm, other, tm]) == tiktoken_cl100k.encode_ordinary_batch([tm, other, tm])


def test_spans_equal_layouts():
    v = torch.tensor([5, 6, 5, 6, 7, 5, 6])
    # tiling spans, spans with gaps, and out-of-order spans all take their own path
    assert spans_equal(v, torch.tensor([0, 2, 4, 5]), torch.tensor([2, 2, 1, 2]), v, torch.tensor([0, 0, 4, 2]))
    assert not spans_equal(v, torch.tensor([0, 2, 4, 5]), torch.tensor([2, 2, 1, 2]), v, torch.tensor([0, 0, 4, 3]))
    assert spans_equal(v, torch.tensor([2, 5]), torch.tensor([2, 2]), v, torch.tensor([0, 0]))
    assert not spans_equal(v, torch.tensor([2, 4]), torch.tensor([2, 2]), v, torch.tensor([0, 0]))
    assert spans_equal(v, torch.tensor([5, 0]), torch.tensor([2, 2]), v, torch.tensor([2, 2]))
    other = torch.tensor([9, 5, 6])
    assert spans_equal(v, torch.tensor([0]), torch.tensor([2]), other, torch.tensor([1]))


def test_tokenizers_pickle_with_an_empty_cache(cl100k_path, bert):
    import pickle

    texts = ["a word, another word", "naïve café 你好"]
    tok = Tokenizer.from_tiktoken(cl100k_path)
    expected = tok.encode_batch(texts)
    assert len(tok.word_cache) > 0
    copy = pickle.loads(pickle.dumps(tok))
    assert len(copy.word_cache) == 0 and copy.word_cache.capacity == tok.word_cache.capacity
    assert copy.encode_batch(texts) == expected
    assert len(copy.word_cache) > 0
    # BERT encodes in one kernel call on the CPU (no cache); its kernel is made again after unpickling
    expected = bert.encode_batch(texts)
    assert pickle.loads(pickle.dumps(bert)).encode_batch(texts) == expected


@pytest.mark.parametrize("block_below", [0, 1 << 30])
def test_hash_lookup_long_probe_sequences(monkeypatch, block_below):
    """Keys crowded onto a few home slots: lookups equal a dict, whether the probes past the
    first are passes (many keys pending) or one block (few pending)."""
    from gputok import hashing

    monkeypatch.setattr(hashing, "_BLOCK_BELOW", block_below)
    candidates = torch.arange(1, 200_000)
    homes = hashing.home_slot(candidates, 1023)  # the slots of a 1024-slot table, as HashMap makes for 256 keys
    crowded = torch.cat([candidates[homes == h][:40] for h in (5, 6, 1022)])  # chains wrap past the end
    keys = torch.cat([crowded, torch.arange(300_000, 300_000 + 256 - crowded.numel())])
    table = hashing.HashMap(keys, keys * 3)
    assert table.mask == 1023 and table.max_probes > 40
    query = torch.cat([keys, candidates[homes == 5][40:60], torch.tensor([0, 7, 123456789])])
    expected = [3 * k if k in set(keys.tolist()) else -1 for k in query.tolist()]
    assert table.get(query).tolist() == expected


def test_seeded_word_hashes_tell_far_positions_apart():
    """The seeded re-hash (after a polynomial-hash collision) mixes each character's position in
    64 bits: with int32 word starts, positions 2048 apart must still hash apart."""
    text = "a" + "x" * 2047 + "b" + "b" + "x" * 2047 + "a"
    values = torch.tensor([ord(c) for c in text])
    for dtype in (torch.int64, torch.int32):
        words = Words(torch.tensor([0, 2049], dtype=dtype), torch.tensor([2049, 4098], dtype=dtype),
                      torch.tensor([0, 2]))
        assert len(unique_words(values, words, seed=0).representative) == 2

