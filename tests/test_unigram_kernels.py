"""The Unigram Viterbi kernel equals its torch twin (Triton runs under TRITON_INTERPRET=1 on CPU)."""

import pytest
import torch

from gputok._dispatch import use_backend
from gputok.models.unigram import PieceTrie, Unigram, unigram_viterbi, unigram_viterbi_torch
from gputok.ragged import Ragged, offsets_from_lengths


def random_lattice(lengths: list[int], seed: int, ties: bool):
    """Edges from every position: always length 1, and random longer ones; scores with ties if
    asked. Laid out column by column, rows sorted longest first, as the twin's contract says."""
    g = torch.Generator().manual_seed(seed)
    lengths = sorted(lengths, reverse=True)
    width = max(lengths, default=0) + 1
    at_least = [sum(n >= e for n in lengths) for e in range(width)]
    node_offsets = [0]
    for count in at_least:
        node_offsets.append(node_offsets[-1] + count)
    edges = {}  # node -> [(target, length)]
    for r, length in enumerate(lengths):
        for s in range(length):
            sizes = [1] + sorted({int(k) for k in torch.randint(2, 6, (int(torch.randint(0, 4, (1,), generator=g)),),
                                                                 generator=g) if s + int(k) <= length})
            edges[node_offsets[s] + r] = [(node_offsets[s + k] + r, k) for k in sizes]
    counts = [len(edges.get(t, [])) for t in range(node_offsets[-1])]
    flat = [e for t in range(node_offsets[-1]) for e in edges.get(t, [])]
    edge_target = torch.tensor([t for t, _ in flat], dtype=torch.int64)
    edge_len = torch.tensor([k for _, k in flat], dtype=torch.int64)
    if ties:  # scores proportional to length: many equal paths
        scores = -edge_len.double() * 0.5
    else:
        scores = -torch.rand(len(flat), generator=g, dtype=torch.float64) * 10
    edge_offsets = offsets_from_lengths(torch.tensor(counts, dtype=torch.int64))
    return edge_offsets, edge_target, scores, torch.tensor(node_offsets, dtype=torch.int64)


@pytest.mark.parametrize("lengths", [[], [0], [1], [3, 0, 5], [7] * 3 + [130, 1, 64, 65], list(range(70))])
@pytest.mark.parametrize("ties", [False, True])
def test_viterbi_kernel_matches_twin(lengths, ties):
    args = random_lattice(lengths, seed=len(lengths) + 7 * ties, ties=ties)
    want = unigram_viterbi_torch(*args)
    with use_backend("triton"):
        got = unigram_viterbi(*args)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1], want[1])


def test_viterbi_kernel_on_a_real_model_lattice(sp_test_tokenizer):
    model = sp_test_tokenizer.model
    words = ["▁Hello", "▁unaffable", "▁x", "▁", "▁ﬁ€漢字", "▁" + "ab" * 40]
    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w]), torch.tensor([len(w) for w in words]))
    want = model.encode_words(ragged)
    with use_backend("triton"):
        got = model.encode_words(ragged)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_torch_twin_picks_the_best_path_by_hand():
    # "abc": a b c (-1 each), ab (-1.5), bc (-1.2): a+bc = -2.2 beats ab+c = -2.5 and a+b+c = -3.
    m = Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -1.5), ("bc", -1.2)], unk_id=0)
    ids, ends = m.encode_words(Ragged.from_lengths(torch.tensor([97, 98, 99]), torch.tensor([3])))
    assert ids.tolist() == [[1, 5]] and ends.tolist() == [[1, 3]]


def test_tokenizer_on_the_triton_path_matches_sentencepiece(sp_test_model_path, sp_test_tokenizer):
    """End to end through the kernel, including the whole-sentence float32 path of near ties."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    texts = ["Hello, unaffable world!", "+" + "-" * 17 + "+---+", "中文 ｶﾞ", "", "word " * 12]
    with use_backend("triton"):
        assert sp_test_tokenizer.encode_batch(texts) == sp.encode(texts)


def test_lattice_rare_codes_take_the_binary_search(sp_test_tokenizer):
    """With a 3-code table nearly every step after the first character goes through the sorted
    keys of the rare edges: the segmentation must not change."""
    model = sp_test_tokenizer.model
    words = ["▁Hello", "▁unaffable", "▁x", "▁", "▁ﬁ€漢字", "▁" + "ab" * 40, "▁international", "▁the▁"]
    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w]), torch.tensor([len(w) for w in words]))
    want = model.encode_words(ragged)
    pieces = {p: i for i, p in enumerate(model.pieces) if model.types[i] in (1, 4) and p}
    small = Unigram.__new__(Unigram)
    small.__dict__.update(model.__dict__)
    small.trie = PieceTrie(pieces, dense=3)
    assert small.trie.rare_keys.numel() > 1000
    got = small.encode_words(ragged)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_whitespace_rules_kernel_matches_twin(seed):
    """The numba whitespace rules (CPU path) equal their torch twin on random texts of spaces, '▁',
    letters and multi-codepoint units (a unit's rewrite may hold a space after a letter)."""
    from gputok.charsmap import whitespace_rules, whitespace_rules_torch

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (40,), generator=g)
    lengths[::7] = 0
    n = int(lengths.sum())
    values = torch.tensor([32, 97, 0x2581, 98])[torch.randint(0, 4, (n,), generator=g)].int()
    text = Ragged.from_lengths(values, lengths)
    new_unit = torch.rand(n, generator=g) < 0.7
    new_unit[text.offsets[:-1][lengths > 0]] = True  # a unit never spans two texts
    unit = torch.cumsum(new_unit.long(), 0)  # runs of one unit
    for flags in range(8):
        options = dict(add_dummy_prefix=bool(flags & 1), remove_extra_whitespaces=bool(flags & 2),
                       escape_whitespaces=bool(flags & 4))
        want_text, want_source = whitespace_rules_torch(text, unit, **options)
        got_text, got_source = whitespace_rules(text, unit, **options)
        assert got_text.tolist() == want_text.tolist(), options
        assert got_source.tolist() == want_source.tolist(), options
