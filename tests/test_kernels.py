"""Triton kernels against their torch twins, plus the hash map and trie they run on.

conftest.py sets TRITON_INTERPRET=1, so ``wordpiece_match_triton`` runs on CPU tensors here and
must equal ``wordpiece_match_torch`` exactly: same piece ids, piece ends and piece counts, same
dtypes and shapes. Inputs are real words (the BERT vocabulary trie; words from the parity corpus,
English and Chinese, normalized by huggingface's own BERT normalizer and pre-tokenizer, plus raw
cased/accented words that leave characters unmatched) and odd shapes. The interpreter runs about
2 ms per word, so the batches are kept to a few thousand words in all.
"""

import random

import pytest
import torch

from gputok import _dispatch, cuda_pipeline
from gputok.hashing import HashMap, hash_lookup
from gputok.kernels import wordpiece_match as kernel_module
from gputok.kernels.wordpiece_match import wordpiece_match_triton
from gputok.models.wordpiece import UNMATCHED, wordpiece_match_torch
from gputok.trie import Trie
from gputok.unicode import MAX_CODEPOINT

BLOCK = 128  # lanes per program in the kernel: batches below and above it are both tested


def _pack(words, width=None, fill=0):
    """Padded int32 codepoints [len(words), width] (pad value ``fill``) and int64 lengths."""
    lengths = [len(w) for w in words]
    width = max(lengths, default=0) if width is None else width
    assert width >= max(lengths, default=0)
    chars = torch.full((len(words), width), fill, dtype=torch.int32)
    for i, w in enumerate(words):
        if w:
            chars[i, :len(w)] = torch.tensor([ord(c) for c in w], dtype=torch.int32)
    return chars, torch.tensor(lengths, dtype=torch.int64)


def _both(chars, lengths, trie, partial_unk):
    tensors = trie.tensors("cpu")
    expected = wordpiece_match_torch(chars, lengths, partial_unk=partial_unk, **tensors)
    got = wordpiece_match_triton(chars, lengths, partial_unk=partial_unk, **tensors)
    return expected, got


def _assert_same(expected, got):
    for name, e, g in zip(("piece_ids", "piece_ends", "num_pieces"), expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape, (name, g.dtype, e.dtype, g.shape, e.shape)
        if not torch.equal(g, e):
            bad = torch.nonzero(g != e)[:5].tolist()
            raise AssertionError(f"{name} differs at {bad}: kernel {g[tuple(zip(*bad))] if bad else g} "
                                 f"vs twin {e[tuple(zip(*bad))] if bad else e}")


@pytest.fixture(scope="module")
def trie(bert):
    return bert.model.trie


@pytest.fixture(scope="module")
def real_words(hf_bert, parity_lines):
    """Sorted unique words as BERT's model sees them (huggingface normalizer + pre-tokenizer),
    from English and Chinese lines, plus raw whitespace-split words (cased, accented)."""
    english = [line for line in parity_lines[::97] if line.strip()][:1500]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::40][:400]
    normalized = set()
    for line in english + chinese:
        for word, _ in hf_bert.pre_tokenizer.pre_tokenize_str(hf_bert.normalizer.normalize_str(line)):
            normalized.add(word)
    raw = {w for line in english for w in line.split() if len(w) <= 40}
    return sorted(normalized), sorted(raw - normalized)


def test_real_words_bert_trie(trie, real_words):
    normalized, raw = real_words
    rng = random.Random(1)
    chinese = [w for w in normalized if any("\u4e00" <= c <= "\u9fff" for c in w)]
    words = rng.sample(normalized, 1100) + rng.sample(chinese, 150) + rng.sample(raw, 350)
    rng.shuffle(words)
    chars, lengths = _pack(words)
    for partial_unk in (False, True):
        expected, got = _both(chars, lengths, trie, partial_unk)
        _assert_same(expected, got)
        ids, ends, num = expected
        # The batch exercises what it claims to: multi-piece words, Chinese, unmatched characters.
        assert (num > 2).sum() > 50
        assert bool(((chars >= 0x4E00) & (chars <= 0x9FFF)).any())
        if partial_unk:
            assert bool((ids == UNMATCHED).any()) and bool((num > 0).all())
        else:
            assert bool((num == -1).any()) and bool((num > 0).any())


def test_tiny_trie_hand_computed():
    """Both implementations give the hand-computed greedy longest match on a tiny two-root trie."""
    t = Trie([{"un": 0, "a": 1}, {"aff": 2, "able": 3}])
    chars, lengths = _pack(["unaffable", "unxa", "xun", "a"], width=10, fill=ord("a"))
    for partial_unk in (False, True):
        expected, got = _both(chars, lengths, t, partial_unk)
        _assert_same(expected, got)
        ids, ends, num = got
        assert ids[0, :3].tolist() == [0, 2, 3] and ends[0, :3].tolist() == [2, 5, 9]
        assert ids[0, 3:].tolist() == [-1] * 7 and ends[0, 3:].tolist() == [-1] * 7
        assert ids[3, :1].tolist() == [1] and ends[3, :1].tolist() == [1]
        if partial_unk:
            assert num.tolist() == [3, 3, 3, 1]
            assert ids[1, :3].tolist() == [0, UNMATCHED, UNMATCHED] and ends[1, :3].tolist() == [2, 3, 4]
            assert ids[2, :3].tolist() == [UNMATCHED] * 3 and ends[2, :3].tolist() == [1, 2, 3]
        else:
            assert num.tolist() == [3, -1, -1, 1]


def _odd_cases(words300):
    long_words = ["a" * 150, "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
                  "x" * 119 + "\x01", "\x01" + "ab" * 60, "中" * 101]
    unmatched = ["\x01", "a\x01b", "\x01\x01x", "hello\ue000", "ＡＢＣ", "日本語", "\U0001f642\U0001f642ok",
                 "Hello", "café", "ÉCOLE"]
    return {
        "no_words": ([], None, 0),
        "no_words_width_7": ([], 7, 0),
        "one_word": (["unaffable"], None, 0),
        "one_char": (["a"], None, 0),
        "zero_length_words": (["", "hello", "", "world"], None, 0),
        "only_zero_length_width_0": (["", "", ""], None, 0),
        "only_zero_length_width_5": (["", ""], 5, ord("a")),
        "width_1": (["a", "!", "中", "\x01", "Z", "é", "s"], None, 0),
        "width_37_garbage_padding": (words300[:50], 37, ord("s")),
        "300_words": (words300, None, 0),
        "exactly_block": (words300[:BLOCK], None, 0),
        "block_plus_one": (words300[:BLOCK + 1], None, 0),
        "long_words": (long_words + words300[:20], None, 0),
        "unmatched": (unmatched, 13, 0),
    }


@pytest.fixture(scope="module")
def odd_cases(real_words):
    normalized, raw = real_words
    rng = random.Random(2)
    words300 = [w for w in rng.sample(normalized + raw, 330) if len(w) <= 30][:300]
    assert len(words300) == 300
    return _odd_cases(words300)


@pytest.mark.parametrize("partial_unk", [False, True])
@pytest.mark.parametrize("case", list(_odd_cases([""] * 300)))
def test_odd_shapes(trie, odd_cases, case, partial_unk):
    words, width, fill = odd_cases[case]
    chars, lengths = _pack(words, width, fill)
    expected, got = _both(chars, lengths, trie, partial_unk)
    _assert_same(expected, got)
    ids, ends, num = got
    assert num.shape == (len(words),) and ids.shape == chars.shape
    # Zero-length words have no pieces; every other word ends exactly at its length.
    assert bool((num[lengths == 0] == 0).all())
    ok = num > 0
    if bool(ok.any()):
        last = ends[ok, (num[ok] - 1).long()]
        assert torch.equal(last.long(), lengths[ok])
    if case == "long_words":
        assert num[0] > 1 and (num[2] == -1 if not partial_unk else num[2] > 1)


def test_lengths_shorter_than_row(trie):
    """encode_words passes width = max_input_chars_per_word + 1 and zero lengths for long words:
    words cut short by ``lengths`` (shorter than the row) match only their first characters."""
    words = ["unaffable", "hello"]
    chars, _ = _pack(words)
    lengths = torch.tensor([3, 0])
    for partial_unk in (False, True):
        expected, got = _both(chars, lengths, trie, partial_unk)
        _assert_same(expected, got)
        assert got[2][1] == 0 and int(got[1][0, got[2][0] - 1]) == 3


def test_end_to_end_triton_backend_equals_torch(bert, hf_bert, parity_lines, monkeypatch):
    english = [line for line in parity_lines[5::311] if line.strip()][:220]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][7::90][:60]
    lines = english + chinese + ["", "x" * 130 + " ok", "Hello\x01World naïve"]
    calls = []
    original = kernel_module.wordpiece_match_triton

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(kernel_module, "wordpiece_match_triton", spy)
    monkeypatch.setattr(bert, "word_cache", None)  # every call must reach the model
    with _dispatch.use_backend("torch"):
        torch_ids = bert.encode_batch(lines)
        torch_out = bert(lines[:80], return_offsets=True, padding=False)
    assert not calls
    with _dispatch.use_backend("triton"):
        triton_ids = bert.encode_batch(lines)
        triton_out = bert(lines[:80], return_offsets=True, padding=False)
    # encode_batch runs gputok.cuda_pipeline (WordPiece per word); offsets still take the padded kernel
    assert len(calls) == 1, "use_backend('triton') did not reach the kernel"
    assert triton_ids == torch_ids
    assert triton_out.keys() == torch_out.keys()
    for key in torch_out:
        assert torch.equal(triton_out[key], torch_out[key]), key
    assert torch_ids == [e.ids for e in hf_bert.encode_batch(lines)]


def test_use_backend_validates_and_nests():
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        with _dispatch.use_backend("cuda"):
            pass
    assert _dispatch.backend(torch.device("cpu")) == "numba"
    with _dispatch.use_backend("triton"):
        assert _dispatch.backend(torch.device("cpu")) == "triton"
        with _dispatch.use_backend("torch"):
            assert _dispatch.backend(torch.device("cpu")) == "torch"
        assert _dispatch.backend(torch.device("cpu")) == "triton"
    assert _dispatch.backend(torch.device("cpu")) == "numba"


# ---- HashMap ------------------------------------------------------------------------------

def test_hashmap_present_and_absent():
    m = HashMap(torch.tensor([5, 9, 1 << 40, 0, (1 << 63) - 1]), torch.tensor([50, 90, 7, 11, -3]))
    q = torch.tensor([9, 4, 1 << 40, 0, (1 << 63) - 1, 6, 1 << 41])
    assert m.get(q).tolist() == [90, -1, 7, 11, -3, -1, -1]
    assert m.get(q, default=-99).tolist() == [90, -99, 7, 11, -3, -99, -99]
    assert m.get(torch.zeros(0, dtype=torch.int64)).tolist() == []


def test_hashmap_empty():
    m = HashMap(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64))
    assert m.get(torch.tensor([0, 1, 12345])).tolist() == [-1, -1, -1]


def test_hashmap_duplicate_and_negative_keys_raise():
    with pytest.raises(ValueError, match="2 duplicated keys"):
        HashMap(torch.tensor([3, 7, 3, 7, 8]), torch.tensor([1, 2, 3, 4, 5]))
    with pytest.raises(ValueError, match="non-negative"):
        HashMap(torch.tensor([3, -1]), torch.tensor([1, 2]))


@pytest.mark.parametrize("kind", ["random63", "trie_like", "dense_small"])
def test_hashmap_large_vs_dict(kind):
    g = torch.Generator().manual_seed(7)
    if kind == "random63":
        keys = torch.unique(torch.randint(0, 1 << 62, (200_000,), generator=g)) * 2 + 1
        absent = torch.randint(0, 1 << 62, (50_000,), generator=g) * 2  # even: never a key
    elif kind == "trie_like":  # the keys a trie stores: node * 0x110000 + codepoint
        node = torch.randint(0, 60_000, (150_000,), generator=g)
        cp = torch.randint(0, 0x3000, (150_000,), generator=g)
        keys = torch.unique(node * MAX_CODEPOINT + cp)
        absent = torch.randint(60_000, 70_000, (50_000,), generator=g) * MAX_CODEPOINT + 97
    else:
        keys = torch.arange(100_000)
        absent = torch.arange(100_000, 150_000)
    keys = keys[torch.randperm(keys.numel(), generator=g)]
    values = torch.randint(-(1 << 40), 1 << 40, (keys.numel(),), generator=g)
    m = HashMap(keys, values)
    reference = dict(zip(keys.tolist(), values.tolist()))
    query = torch.cat([keys[:100_000], absent])
    query = query[torch.randperm(query.numel(), generator=g)]
    assert m.get(query).tolist() == [reference.get(k, -1) for k in query.tolist()]
    slot_keys, slot_values = m.tensors("cpu")
    assert hash_lookup(slot_keys, slot_values, m.mask, m.max_probes, keys, -5).tolist() == values.tolist()
    assert m.mask + 1 >= 4 * keys.numel()  # the documented load factor of at most 1/4


# ---- Trie ---------------------------------------------------------------------------------

def test_trie_small_hand_made():
    t = Trie([{"ab": 7, "a": 3, "": 99, "中文": 5}, {"b": 4, "ab": 8}])
    assert t.num_roots == 2
    a = t.step(torch.tensor([0]), torch.tensor([ord("a")]))
    ab = t.step(a, torch.tensor([ord("b")]))
    assert t.token_of_node[a].tolist() == [3] and t.token_of_node[ab].tolist() == [7]
    zh = t.step(t.step(torch.tensor([0]), torch.tensor([ord("中")])), torch.tensor([ord("文")]))
    assert t.token_of_node[zh].tolist() == [5]
    # root 1 has its own edges; an edge that is not there gives -1
    b1 = t.step(torch.tensor([1, 0, 1, 0]), torch.tensor([ord("b"), ord("b"), ord("a"), ord("x")]))
    assert t.token_of_node[b1[0]] == 4 and b1[1] == -1 and b1[2] >= 2 and b1[3] == -1
    assert t.token_of_node[t.step(b1[2:3], torch.tensor([ord("b")]))].tolist() == [8]
    # the empty piece does not make a root a token
    assert t.token_of_node[:2].tolist() == [-1, -1]
    assert int((t.token_of_node >= 0).sum()) == 5


def test_trie_without_ascii_pieces():
    """A vocabulary with no ASCII piece at all (a pure-CJK one) still builds and steps."""
    t = Trie([{"中": 0, "中文": 1}, {"文": 2}])
    nodes = t.step(torch.tensor([0, 1, 0]), torch.tensor([ord("中"), ord("文"), ord("a")]))
    assert t.token_of_node[nodes[:2]].tolist() == [0, 2] and nodes[2] == -1
    chars, lengths = _pack(["中文", "中中", "a中"])
    expected, got = _both(chars, lengths, t, partial_unk=True)
    _assert_same(expected, got)
    assert got[0][:, :2].tolist() == [[1, -1], [0, UNMATCHED], [UNMATCHED, UNMATCHED]]


def test_trie_reaches_every_bert_token(bert, trie):
    """Walking each vocabulary token from its root ends on a node holding that token's id."""
    vocab = bert.model.vocab
    prefix = bert.model.continuing_subword_prefix
    for root, pieces in ((0, vocab), (1, {p[len(prefix):]: i for p, i in vocab.items() if p.startswith(prefix) and len(p) > len(prefix)})):
        tokens = sorted(pieces)
        chars, lengths = _pack(tokens)
        node = torch.full((len(tokens),), root, dtype=torch.int64)
        for col in range(chars.shape[1]):
            walking = lengths > col
            node[walking] = trie.step(node[walking], chars[walking, col].long())
            assert bool((node[walking] >= 0).all()), f"root {root}: a token's path breaks at character {col}"
        ids = torch.tensor([pieces[t] for t in tokens], dtype=torch.int32)
        assert torch.equal(trie.token_of_node[node], ids)
    # and a few strings that are not tokens end on nodes without a token (or nowhere)
    chars, lengths = _pack(["qzxj", "##"])
    node = torch.zeros(2, dtype=torch.int64)
    for col in range(chars.shape[1]):
        walking = (lengths > col) & (node >= 0)
        node[walking] = trie.step(node[walking], chars[walking, col].long())
    assert node[0] == -1 or trie.token_of_node[node[0]] == -1


# ---- hash lookup kernel (BPE pair ranks) --------------------------------------------------------

@pytest.mark.parametrize("num_keys,num_queries", [(1, 0), (1, 1), (37, 5), (5000, 3001)])
def test_hash_lookup_kernel_equals_twin(num_keys, num_queries):
    from gputok.hashing import hash_lookup
    from gputok.kernels.hash_lookup import hash_lookup_triton

    gen = torch.Generator().manual_seed(num_keys)
    keys = torch.unique(torch.randint(0, 1 << 50, (num_keys,), generator=gen))
    m = HashMap(keys, torch.arange(keys.numel()) * 3)
    present = keys[torch.randint(0, keys.numel(), (num_queries // 2,), generator=gen)]
    absent = torch.randint(0, 1 << 50, (num_queries - present.numel(),), generator=gen)
    query = torch.cat([present, absent])[torch.randperm(num_queries, generator=gen)]
    args = (*m.tensors("cpu"), m.mask, m.max_probes, query, -7)
    expected = hash_lookup(*args)
    assert torch.equal(hash_lookup_triton(*args), expected)
    assert int((expected >= 0).sum()) >= present.numel()  # the present keys were found


def test_bpe_end_to_end_triton_backend_equals_torch(parity_lines):
    from gputok import Tokenizer, assets

    tok = Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2")
    tok.word_cache = None  # or the second pass would read the words from the cache
    lines = [line for line in parity_lines[::1999] if line][:60]
    expected = tok.encode_batch(lines)
    with _dispatch.use_backend("triton"):
        assert tok.encode_batch(lines) == expected


# ---- BPE merge kernel ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cl100k_model():
    from gputok import Tokenizer, assets

    return Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k")


def _merge_both(model, words, block):
    """Byte ids of ``words`` merged by the twin and by the kernel (under the interpreter)."""
    from gputok.ingest import utf8
    from gputok.kernels.bpe_merge import bpe_merge_triton
    from gputok.models.bpe import bpe_merge_torch

    data = utf8(words)
    tokens = model.byte_to_id[data.values.long()]
    keys, values = model.pairs.tensors("cpu")
    table = dict(slot_keys=keys, slot_values=values, hash_mask=model.pairs.mask,
                 max_probes=model.pairs.max_probes, vocab_size=model.vocab_size)
    return bpe_merge_torch(tokens, data.offsets, **table), bpe_merge_triton(tokens, data.offsets, block=block, **table)


def test_bpe_merge_kernel_equals_twin_on_real_words(cl100k_model, parity_lines):
    """Words as cl100k splits them (English and Chinese), that are not tokens themselves, so
    they take several merges; block 16 makes the longer ones span several chunks."""
    from gputok.ingest import codepoints

    english = [line for line in parity_lines[::3001] if line.strip()][:40]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::300][:5]
    text = codepoints(english + chinese)
    words = cl100k_model.pre_tokenizer(text)
    strings = {"".join(map(chr, text.values[s:e].tolist())) for s, e in zip(words.starts.tolist(), words.ends.tolist())}
    vocab = cl100k_model.model.vocab
    several = sorted(w for w in strings if w not in vocab and len(w.encode()) <= 40)
    rng = random.Random(3)
    chosen = rng.sample(several, min(24, len(several)))
    assert len(chosen) >= 12 and any(len(w.encode()) > 16 for w in chosen)
    for block in (16, 128):
        (expected_tokens, expected_offsets), (tokens, offsets) = _merge_both(cl100k_model.model, chosen, block)
        assert expected_offsets[-1] < len(b"".join(w.encode() for w in chosen))  # the twin merged
        assert torch.equal(offsets, expected_offsets) and torch.equal(tokens, expected_tokens), block


@pytest.mark.parametrize("words", [
    [],  # no rows
    [""],  # an empty row
    ["x"],  # one token
    ["", "a", "", "ab"],  # empty rows between others
    ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],  # 46 bytes: 3 chunks of 16; equal ranks tie
    [" \u00e9t\u00e9 \u4e2d\u6587 " * 3, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"],  # multi-byte; rows > block
])
def test_bpe_merge_kernel_equals_twin_on_odd_shapes(cl100k_model, words):
    (expected_tokens, expected_offsets), (tokens, offsets) = _merge_both(cl100k_model.model, words, 16)
    assert offsets.tolist() == expected_offsets.tolist()
    assert tokens.dtype == expected_tokens.dtype and tokens.tolist() == expected_tokens.tolist()
    assert offsets.numel() == len(words) + 1


def test_bpe_merge_dispatch_picks_kernel_on_triton_backend(cl100k_model, monkeypatch):
    """``bpe_merge`` runs the kernel when the backend is triton, the twin otherwise."""
    from gputok.kernels import bpe_merge as kernel
    from gputok.models import bpe

    calls = []
    real = kernel.bpe_merge_triton
    # each call records how many words the kernel merged
    monkeypatch.setattr(kernel, "bpe_merge_triton", lambda *a, **k: calls.append(a[1].numel() - 1) or real(*a, **k))
    # The stage-by-stage path: a cl100k call otherwise runs as gputok.cuda_pipeline (bpe_words' kernel).
    monkeypatch.setattr(cuda_pipeline, "supports", lambda *a, **k: False)
    words = [" zqxmergingkernels", "Tokenizerzq"]  # not tokens: they need merges
    tok = cl100k_model
    tok.word_cache = None
    try:
        expected = tok.encode_batch(words)
        assert not calls and all(len(ids) >= 3 for ids in expected)
        with _dispatch.use_backend("triton"):
            assert tok.encode_batch(words) == expected
        assert sum(calls) == len(words)  # both words, though a CPU batch this small takes the heap under torch
    finally:
        from gputok.word_cache import WordCache

        tok.word_cache = WordCache()
    assert bpe.LONG_WORD >= 64  # words up to LONG_WORD symbols take the kernel (or the twin)


def test_small_batches_for_a_gpu_encode_on_the_cpu(bert, sp_test_tokenizer):
    from gputok.tokenizer import CUDA_FROM_CHARS

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    small, large = ["x" * 100] * 3, ["x" * 100] * (CUDA_FROM_CHARS // 100 + 1)
    assert bert._work_device(cuda, small, None) == cpu
    assert bert._work_device(cuda, small, small * 200) == cuda  # pairs count too
    assert bert._work_device(cuda, large, None) == cuda
    assert bert._work_device(cpu, large, None) == cpu
    assert sp_test_tokenizer._work_device(cuda, small, None) == cpu
    with sp_test_tokenizer.model.sampling(0.1):  # a sample draws on the caller's (device) generator
        assert sp_test_tokenizer._work_device(cuda, small, None) == cuda
    with _dispatch.use_backend("triton"):  # kernels forced: CPU tensors would meet them uninterpreted
        assert bert._work_device(cuda, small, None) == cuda


# ---- BPE heap kernel (numba, CPU) ---------------------------------------------------------------

def _random_merge_table(rng):
    """A pair map over 2-4 base symbols, ranks drawn from a small range in any order: ties between
    different pairs (as SentencePiece's shared scores give) and merges that make a pair ranked
    below the one merged (which the kernel queues in its heap)."""
    base = rng.randint(2, 4)
    pairs, vocab = {}, base
    for _ in range(rng.randint(0, 60)):
        pair = (rng.randrange(vocab), rng.randrange(vocab))
        if pair not in pairs:
            pairs[pair] = (rng.randrange(12), vocab)
            vocab += 1
    return base, pairs, vocab


def _heap_kernel(rows, pairs, vocab):
    """``rows`` merged by the numba kernel, as lists."""
    from gputok.kernels.bpe_heap import bpe_merge_numba
    from gputok.ragged import Ragged, offsets_from_lengths

    m = HashMap(torch.tensor([a * vocab + b for a, b in pairs], dtype=torch.int64),
                torch.tensor([(rank << 32) | merged for rank, merged in pairs.values()], dtype=torch.int64))
    flat = torch.tensor([t for row in rows for t in row], dtype=torch.int64)
    offsets = offsets_from_lengths(torch.tensor([len(row) for row in rows], dtype=torch.int64))
    tokens, out_offsets = bpe_merge_numba(flat, offsets, slot_keys=m.slot_keys, slot_values=m.slot_values,
                                          hash_mask=m.mask, max_probes=m.max_probes, vocab_size=vocab)
    assert tokens.dtype == torch.int64 and out_offsets.numel() == len(rows) + 1
    assert flat.tolist() == [t for row in rows for t in row]  # the input stays intact
    return Ragged(tokens, out_offsets).tolist()


def test_bpe_heap_kernel_equals_the_python_heap_on_random_tables():
    """The kernel against ``bpe_merge_heap`` (the rule, in Python): 200 random tables, batches of
    rows from empty to 1,000 symbols (one scratch space for rows of all lengths)."""
    from gputok.models.bpe import bpe_merge_heap

    for seed in range(200):
        rng = random.Random(seed)
        base, pairs, vocab = _random_merge_table(rng)
        rows = [[rng.randrange(base) for _ in range(rng.choice([0, 1, 2, 3, 10, 100, 1000]))]
                for _ in range(rng.randint(0, 6))]
        assert _heap_kernel(rows, pairs, vocab) == [bpe_merge_heap(row, pairs) for row in rows], seed


@pytest.mark.parametrize("rows", [
    [],  # no rows
    [[]],  # an empty row
    [[0]],  # one symbol
    [[], [1], [], [0, 1], [1, 0]],  # empty rows between others
    [[0] * 4097],  # one symbol repeated: equal ranks overlap, leftmost first
    [[0, 1] * 5000, [1] * 3, [0, 0, 1, 1] * 2500],  # long rows after each other
])
def test_bpe_heap_kernel_on_odd_shapes(rows):
    from gputok.models.bpe import bpe_merge_heap

    pairs = {(0, 0): (0, 2), (0, 1): (1, 3), (2, 2): (2, 4), (3, 3): (2, 5), (1, 0): (3, 6), (2, 3): (1, 7)}
    assert _heap_kernel(rows, pairs, 8) == [bpe_merge_heap(row, pairs) for row in rows]
    assert _heap_kernel(rows, {}, 8) == rows  # no pair merges


def test_bpe_heap_kernel_equals_the_python_heap_on_a_long_real_word(cl100k_model):
    """200 KB of random letters and digits with cl100k's pair map (~230k pairs, 100k ranks)."""
    from gputok.models.bpe import bpe_merge_heap

    model = cl100k_model.model
    rng = random.Random(5)
    word = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=200_000))
    rows = [model.byte_to_id[torch.tensor(list(text.encode()))].tolist() for text in (word, "ab" * 3000 + "a")]
    assert _heap_kernel(rows, model._pairs_dict, model.vocab_size) == [bpe_merge_heap(r, model._pairs_dict) for r in rows]
