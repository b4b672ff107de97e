"""Subword regularization and n-best lists of Unigram tokenizers.

Sampling is checked against the exact alpha-smoothed distribution over all segmentations of a
word (enumerated here), with a chi-square test that rejects a wrong alpha; n-best lists against
sentencepiece's ``nbest_encode_as_ids``.
"""

import collections
import math

import pytest
import torch

import gputok
from gputok.models.unigram import nbest_encode

spm = pytest.importorskip("sentencepiece")
stats = pytest.importorskip("scipy.stats")


def segmentations(model, word: str):
    """Every segmentation of ``word`` into matchable pieces (ids) with its score, by recursion."""
    if not word:
        return [([], 0.0)]
    out = []
    for size in range(1, len(word) + 1):
        piece = word[:size]
        i = model.vocab.get(piece)
        if i is not None and model.types[i] in (1, 4):
            out += [([i] + rest, model.scores[i] + score) for rest, score in segmentations(model, word[size:])]
    return out


def exact_distribution(model, word: str, alpha: float) -> dict[tuple[int, ...], float]:
    paths = segmentations(model, word)
    top = max(s for _, s in paths)
    weights = {tuple(p): math.exp(alpha * (s - top)) for p, s in paths}
    total = sum(weights.values())
    return {p: w / total for p, w in weights.items()}


def chi_square_pvalue(counts: collections.Counter, expected: dict, n: int) -> float:
    """Chi-square goodness of fit; segmentations expected fewer than 5 times are pooled."""
    observed, wanted, pooled_o, pooled_e = [], [], 0, 0.0
    for path, p in expected.items():
        if p * n >= 5:
            observed.append(counts.get(path, 0)), wanted.append(p * n)
        else:
            pooled_o, pooled_e = pooled_o + counts.get(path, 0), pooled_e + p * n
    pooled_o += sum(c for path, c in counts.items() if path not in expected)  # impossible paths
    observed.append(pooled_o), wanted.append(max(pooled_e, 1e-9))
    return float(stats.chisquare(observed, wanted).pvalue)


@pytest.mark.parametrize("word,alpha", [("hello", 0.5), ("unaffable", 0.2), ("telescope", 0.1)])
def test_sampled_segmentations_follow_the_alpha_smoothed_distribution(sp_test_tokenizer, word, alpha):
    model = sp_test_tokenizer.model
    n = 20000
    with model.sampling(alpha, torch.Generator().manual_seed(1234)):
        samples = sp_test_tokenizer.encode_batch([word] * n)
    counts = collections.Counter(map(tuple, samples))
    expected = exact_distribution(model, "▁" + word, alpha)
    assert len(expected) >= 5  # a word with several segmentations
    assert chi_square_pvalue(counts, expected, n) > 1e-4
    # The test has power: the same samples are rejected against a neighbouring alpha.
    assert chi_square_pvalue(counts, exact_distribution(model, "▁" + word, alpha * 1.5), n) < 1e-6


def test_sampling_is_reproducible_and_fresh_per_occurrence(sp_test_tokenizer):
    texts = ["the quick brown fox jumps over the lazy dog"] * 50
    model = sp_test_tokenizer.model

    def draw(seed):
        with model.sampling(0.1, torch.Generator().manual_seed(seed)):
            return sp_test_tokenizer.encode_batch(texts)

    first = draw(7)
    assert draw(7) == first
    assert draw(8) != first
    assert len({tuple(ids) for ids in first}) > 10  # occurrences of one text sample independently
    assert sp_test_tokenizer.encode_batch(texts[:1]) == [spm.SentencePieceProcessor(
        model_file=str(gputok.assets.fetch("sp-test-model"))).encode(texts[0])]  # off again after the block


def test_sampling_rejects_a_bad_alpha(sp_test_tokenizer):
    with pytest.raises(ValueError, match="alpha > 0"):
        with sp_test_tokenizer.model.sampling(0.0):
            pass


def test_collate_samples_fresh_segmentations_each_epoch(sp_test_tokenizer):
    texts = ["tokenization of unaffable words"] * 8
    collate = gputok.data.Collate(sp_test_tokenizer, sample_alpha=0.2, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(texts, batch_size=8, collate_fn=collate)
    epochs = [next(iter(loader))["input_ids"].tolist() for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    again = gputok.data.Collate(sp_test_tokenizer, sample_alpha=0.2, generator=torch.Generator().manual_seed(0))
    assert again(texts)["input_ids"].tolist() == epochs[0]


def test_collate_sampling_needs_a_unigram_model():
    tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    with pytest.raises(ValueError, match="needs a Unigram tokenizer"):
        gputok.data.Collate(tok, sample_alpha=0.1)


@pytest.mark.parametrize("nbest_size", [2, 5, 20])
def test_nbest_equals_sentencepiece(sp_test_model_path, sp_test_tokenizer, nbest_size):
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    texts = ["hello world", "I saw a girl with a telescope.", "unaffable", "New York", "中文 text",
             "the kernel documentation", "ｶﾞ", "x"]
    assert nbest_encode(sp_test_tokenizer, texts, nbest_size) == [sp.nbest_encode_as_ids(t, nbest_size) for t in texts]


def test_nbest_bad_size(sp_test_tokenizer):
    with pytest.raises(ValueError, match="nbest_size=0"):
        nbest_encode(sp_test_tokenizer, ["a"], 0)


def test_model_pickles_for_spawned_workers(sp_test_tokenizer):
    import pickle

    from gputok.ragged import Ragged

    model = pickle.loads(pickle.dumps(sp_test_tokenizer.model))
    word = Ragged.from_lengths(torch.tensor([0x2581, 104, 105]), torch.tensor([3]))
    assert model.encode_words(word)[0].tolist() == sp_test_tokenizer.model.encode_words(word)[0].tolist()
    with model.sampling(0.1, torch.Generator().manual_seed(0)):
        assert len(model.encode_words(word)[0]) == 1
