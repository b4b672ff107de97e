"""Subword regularization and n-best lists of Unigram tokenizers.

Sampling is checked against the exact alpha-smoothed distribution over all segmentations of a
word (enumerated here), with a chi-square test that rejects a wrong alpha; n-best lists against
sentencepiece's ``nbest_encode_as_ids``.
"""

import collections
import itertools
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


def test_collate_samples_from_the_nbest_list(sp_test_tokenizer):
    texts = ["tokenization of unaffable words"] * 16
    collate = gputok.data.Collate(sp_test_tokenizer, sample_alpha=0.0, sample_nbest_size=3, padding=False,
                                  generator=torch.Generator().manual_seed(0))
    out = collate(texts)
    ids, cuts = out["input_ids"].tolist(), out["row_offsets"].tolist()
    rows = {tuple(ids[a:b]) for a, b in itertools.pairwise(cuts)}
    assert 1 < len(rows) <= 3 and rows <= {tuple(p) for p in nbest_encode(sp_test_tokenizer, texts[:1], 3)[0]}


def test_collate_sampling_needs_a_unigram_model():
    tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    with pytest.raises(ValueError, match="needs a Unigram tokenizer"):
        gputok.data.Collate(tok, sample_alpha=0.1)


# Texts whose n-best lists hold paths of equal float32 score ("lingers and lingers": the same
# two segmentations of each word, swapped), which sentencepiece orders by its A* heap.
TIED_TEXTS = ['Accelerator \\Ac*cel"er*a`tor\\, n', "--------", "borrowing only lingers and lingers it",
              "Why, fool, I meant not thee, I meant thy master.", "More light and light,--more dark and dark our woes!",
              "toluene 3-monooxygenas", "You understand me not that tell me so.", "aaaa aaaa", "x" * 30]


@pytest.mark.parametrize("nbest_size", [2, 5, 20, 60])
def test_nbest_equals_sentencepiece(sp_test_model_path, sp_test_tokenizer, parity_lines, nbest_size):
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    texts = ["hello world", "I saw a girl with a telescope.", "unaffable", "New York", "中文 text",
             "the kernel documentation", "ｶﾞ", "x", ""] + TIED_TEXTS
    # long lines: ~100 tokens, thousands of hypotheses (past 10,000 sentencepiece trims its agenda)
    texts += [line for line in parity_lines[::5000] if len(line) > 300][:4]
    theirs = [sp.nbest_encode_as_ids(t, nbest_size) for t in texts]
    assert nbest_encode(sp_test_tokenizer, texts, nbest_size) == theirs
    # the test has power: the ties are there, and a stable merge of each node's k best orders them otherwise
    from gputok.ingest import as_texts, codepoints

    size = max(nbest_size, 5)
    norm, _ = sp_test_tokenizer.normalizer(codepoints(as_texts(TIED_TEXTS)))
    scored = sp_test_tokenizer.model.nbest(norm, size)
    assert sum(len({s for _, s in paths}) < len(paths) for paths in scored) >= 5
    with gputok._dispatch.use_backend("torch"):
        merged = sp_test_tokenizer.model.nbest(norm, size)
    assert [[p for p, _ in paths] for paths in merged] != [[p for p, _ in paths] for paths in scored]


NBEST_SAMPLING_CASES = [("hello world", 5, 0.5), ("unaffable telescope", 10, 0.2), ("lingers and lingers", 8, 0.0)]


def nbest_distribution(tok, text: str, nbest_size: int, alpha: float) -> dict[tuple[int, ...], float]:
    """SentencePiece's distribution when it samples from the n-best list: ``exp(alpha * score)``
    over the list's sum (``SampleEncode`` with ``nbest_size > 1``), from gputok's list and scores."""
    from gputok.ingest import as_texts, codepoints

    norm, _ = tok.normalizer(codepoints(as_texts([text])))
    paths = tok.model.nbest(norm, nbest_size)[0]
    ids = nbest_encode(tok, [text], nbest_size)[0]
    top = max(score for _, score in paths)
    weights = {tuple(i): math.exp(alpha * (score - top)) for i, (_, score) in zip(ids, paths)}
    return {p: w / sum(weights.values()) for p, w in weights.items()}


@pytest.mark.parametrize("text,nbest_size,alpha", NBEST_SAMPLING_CASES)
def test_sampling_from_the_nbest_list_follows_sentencepiece(sp_test_model_path, sp_test_tokenizer, text, nbest_size,
                                                            alpha):
    """``sampling(alpha, nbest_size=n)`` draws a segmentation of the whole text among its n best,
    ``P ~ exp(alpha * score)``: chi-square against that distribution (which sentencepiece's own
    samples pass too), and the same samples rejected against a neighbouring alpha."""
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    n = 20000
    with sp_test_tokenizer.model.sampling(alpha, torch.Generator().manual_seed(11), nbest_size=nbest_size):
        ours = collections.Counter(map(tuple, sp_test_tokenizer.encode_batch([text] * n)))
    theirs = collections.Counter(tuple(sp.encode(text, enable_sampling=True, nbest_size=nbest_size, alpha=alpha))
                                 for _ in range(n))
    expected = nbest_distribution(sp_test_tokenizer, text, nbest_size, alpha)
    assert len(expected) == nbest_size and set(ours) <= set(expected) and set(theirs) <= set(expected)
    assert chi_square_pvalue(theirs, expected, n) > 1e-4  # (the expected distribution is sentencepiece's)
    assert chi_square_pvalue(ours, expected, n) > 1e-4
    other = nbest_distribution(sp_test_tokenizer, text, nbest_size, alpha * 1.5 if alpha else 0.3)
    assert chi_square_pvalue(ours, other, n) < 1e-6


def test_nbest_sampling_is_reproducible_and_checks_its_arguments(sp_test_tokenizer):
    texts = ["the quick brown fox jumps over the lazy dog"] * 40 + ["", " ", "x", "中文 ｶﾞ"]
    model = sp_test_tokenizer.model

    def draw(seed, backend="numba"):
        with gputok._dispatch.use_backend(backend), model.sampling(0.2, torch.Generator().manual_seed(seed),
                                                                   nbest_size=6):
            return sp_test_tokenizer.encode_batch(texts)

    first = draw(5)
    assert draw(5) == first and draw(5, "torch") == first and draw(6) != first
    assert 2 < len({tuple(ids) for ids in first[:40]}) <= 6  # each occurrence draws on its own, among 6
    assert first[40:42] == [[], []] and tuple(first[43]) in nbest_distribution(sp_test_tokenizer, texts[43], 6, 0.2)
    for bad in ({"nbest_size": 0}, {"nbest_size": 1}):
        with pytest.raises(ValueError, match="nbest_size="), model.sampling(0.1, **bad):
            pass
    with pytest.raises(ValueError, match="alpha > 0"), model.sampling(0.0):  # (the whole lattice needs a smoothing)
        pass
    with model.sampling(0.0, nbest_size=3):
        assert model.is_sampling


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


# A user piece scores float32(0.1 * (length - 1)) in sentencepiece 0.2.3: length in UTF-8 bytes in
# its encoder, in characters in the lattice of its n-best lists and sampling. The model below sets
# normal scores between the two: "中" + "文" = 0.3 against "中文" (0.5 by bytes, 0.1 by characters),
# "é" + "▁" = 0.25 against "é▁" (0.4, 0.1), so the two rules order the paths differently.
USER_PIECES = ["中文", "é▁", "▁the▁"]
USER_PIECE_TEXTS = ["中文", "x中文y 中文中文", "café x", "né▁é ée", "the 中文 café the end", "中 文", "的中文字"]


@pytest.fixture(scope="module")
def user_piece_model(tmp_path_factory, parity_lines):
    """(path, sentencepiece processor, gputok tokenizer) of a Unigram model with non-ASCII user pieces."""
    from gputok.sentencepiece_model import read_model, write_model

    folder = tmp_path_factory.mktemp("unigram-user-pieces")
    text = [line for line in parity_lines[::40] if line.strip()][:6000]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_prefix=str(folder / "m"), model_type="unigram",
                                   vocab_size=1500, character_coverage=0.9995, minloglevel=2, num_threads=1,
                                   user_defined_symbols=USER_PIECES)
    model = read_model(folder / "m.model")
    space = next(p.score for p in model.pieces if p.piece == "▁")
    for p in model.pieces:
        if p.piece in ("中", "文"):
            p.score = 0.15
        if p.piece == "é":
            p.score = 0.25 - space
    path = str(folder / "scored.model")
    write_model(model, path)
    return path, spm.SentencePieceProcessor(model_file=path), gputok.Tokenizer.from_sentencepiece(path)


def same_up_to_ties(ours: list[tuple[list[int], float]], theirs: list[list[int]]) -> bool:
    """Whether ``theirs`` (n paths) holds ``ours``' first n paths in the same order, paths of equal
    score in any order among themselves (the torch path's merge orders ties otherwise than
    sentencepiece's A* heap, and cuts other ones at the n-th place). ``ours``: more than n paths,
    with their scores."""
    size = len(theirs)
    if [p for p, _ in ours[:size]] == theirs:
        return True
    start = 0
    while start < size:
        end = start + 1
        while end < len(ours) and abs(ours[end][1] - ours[start][1]) < 1e-4:
            end += 1
        tied = sorted(p for p, _ in ours[start:end])
        if end <= size and sorted(theirs[start:end]) != tied:
            return False
        if end > size and any(p not in tied for p in theirs[start:]):
            return False
        start = end
    return True


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_nbest_scores_user_pieces_by_characters(user_piece_model, parity_lines, monkeypatch, backend):
    from gputok.ingest import as_texts, codepoints

    _, sp, tok = user_piece_model
    if backend == "torch":
        monkeypatch.setenv("GPUTOK_BACKEND", "torch")
    texts = USER_PIECE_TEXTS + [line[:50] for line in parity_lines[5::1500] if line.strip()][:120]
    assert nbest_encode(tok, texts, 1) == [sp.nbest_encode_as_ids(t, 1) for t in texts]  # the encoder: bytes
    if backend == "numba":  # sentencepiece's own search: its lists exactly, ties in its order
        assert all(nbest_encode(tok, texts, size) == [sp.nbest_encode_as_ids(t, size) for t in texts] for size in (2, 5))
    norm, _ = tok.normalizer(codepoints(as_texts(texts)))
    for size in (2, 5):
        scored = tok.model.nbest(norm, size + 30)  # (paths tied with the n-th too)
        ours = nbest_encode(tok, texts, size + 30)  # (unks fused, as sentencepiece gives them)
        theirs = [sp.nbest_encode_as_ids(t, size) for t in texts]
        bad = [t for t, o, s, th in zip(texts, ours, scored, theirs)
               if not same_up_to_ties([(p, score) for p, (_, score) in zip(o, s)], th)]
        assert not bad, bad[:3]
    # the case itself: the lattice's best path is not the encoder's
    assert [sp.id_to_piece(i) for i in sp.nbest_encode_as_ids("中文", 2)[0]] == ["▁", "中", "文"]
    assert [sp.id_to_piece(i) for i in sp.encode("中文")] == ["▁", "中文"]


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_sampling_scores_user_pieces_by_characters(user_piece_model, monkeypatch, backend):
    """As alpha grows, a sample is the lattice's best path (sentencepiece's too), which scores user
    pieces by characters: "中" "文" (0.3) over "中文" (0.1 by characters, 0.5 by bytes)."""
    from gputok.ingest import as_texts, codepoints

    _, sp, tok = user_piece_model
    if backend == "torch":
        monkeypatch.setenv("GPUTOK_BACKEND", "torch")
    norm, _ = tok.normalizer(codepoints(as_texts(USER_PIECE_TEXTS)))
    top_two = tok.model.nbest(norm, 2)
    assert all(len(s) == 1 or s[0][1] - s[1][1] > 0.05 for s in top_two)  # a clear best: e^-100 left to others
    theirs = [sp.sample_encode_as_ids(t, -1, 2000.0) for t in USER_PIECE_TEXTS]
    assert theirs == [sp.nbest_encode_as_ids(t, 2)[0] for t in USER_PIECE_TEXTS]
    assert sp.piece_to_id("中文") not in theirs[0]
    with tok.model.sampling(2000.0, torch.Generator().manual_seed(3)):
        ours = tok.encode_batch(USER_PIECE_TEXTS)
    assert ours == theirs
