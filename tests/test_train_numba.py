"""Training kernels on the CPU (numba) against the torch / numpy reference path, exactly.

The BPE / WordPiece merge loop (``gputok.kernels.train_bpe_numba``) runs by default on CPU words;
``_dispatch.use_backend("torch")`` forces the numpy merge loop it replaces. Both must give the
same vocabulary, the same ordered merges and the same stop reason: on real English words, on
random Unicode words (astral, combining marks, CJK, emoji, runs of one character, lone
surrogates), with prefixes / suffixes, ``max_token_length``, ``min_frequency``, special tokens
spelled like merges (merges onto existing tokens), counts above 2**31, and odd shapes (no words,
one-character words only, one very long word). Word counting (``gputok.kernels.count_words_numba``) must give the same words,
counts and dtypes as the torch path for each preset; Unigram's Viterbi and per-piece alternatives
(``gputok.kernels.train_unigram_numba``) the same edges, scores and segmentations as their twins,
its E-step port the twin's expected counts to rounding, and a whole Unigram training the same pieces.
"""

import collections
import random

import pytest
import torch

from gputok import _dispatch, assets
from gputok.ragged import Ragged
from gputok.trainers import TrainStats, learn_bpe, learn_wordpiece


def _ragged(word_counts: dict[str, int]) -> tuple[Ragged, torch.Tensor]:
    words = list(word_counts)
    values = torch.tensor([ord(c) for w in words for c in w], dtype=torch.int64)
    ragged = Ragged.from_lengths(values, torch.tensor([len(w) for w in words], dtype=torch.int64))
    return ragged, torch.tensor([word_counts[w] for w in words], dtype=torch.int64)


def _both(fn, word_counts, **options):
    """``fn`` on the numba path and on the torch path: results and stats must be equal."""
    words, counts = _ragged(word_counts)
    out = {}
    for name in ("numba", "torch"):
        stats = TrainStats()
        with _dispatch.use_backend(name):
            try:
                result = fn(words, counts, progress=False, stats=stats, **options)
            except ValueError as error:
                result = ("error", str(error))
        out[name] = (result, stats.merges, stats.stopped_by, stats.pairs, stats.words, stats.symbols)
    assert out["numba"] == out["torch"]
    return out["numba"][0]


@pytest.fixture(scope="module")
def english_counts():
    lines = assets.english_corpus(1).read_text(encoding="utf-8").splitlines()[:6000]
    return collections.Counter(w for line in lines for w in line.split())


@pytest.mark.parametrize("options", [
    dict(vocab_size=3000, min_frequency=2),
    dict(vocab_size=2500, end_of_word_suffix="</w>"),
    dict(vocab_size=2500, continuing_subword_prefix="##", max_token_length=6),
    dict(vocab_size=100000, min_frequency=4),  # stops by min_frequency
])
def test_bpe_english_words(english_counts, options):
    vocab, merges = _both(learn_bpe, english_counts, **options)
    assert len(merges) > 500


def test_wordpiece_english_words(english_counts):
    vocab = _both(learn_wordpiece, english_counts, vocab_size=3000, min_frequency=2,
                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    assert any(t.startswith("##") and len(t) > 3 for t in vocab)


def test_byte_level_words_with_big_counts(english_counts):
    from gputok.models.bpe import byte_decoder

    table = {b: ch for ch, b in byte_decoder().items()}
    mapped = collections.Counter()
    for w, c in english_counts.items():
        mapped["".join(table[b] for b in (" " + w).encode())] += c << 33
    _both(learn_bpe, mapped, vocab_size=1500, min_frequency=2 << 33)


_ALPHABET = ("aab1é中文𝄞\u0301\u0300ĠĠ\U0001F600\ud800\udfff \u3000x")


@pytest.mark.parametrize("seed", range(12))
def test_bpe_random_unicode(seed):
    rng = random.Random(seed)
    word_counts = {}
    for _ in range(rng.randint(1, 60)):
        word = "".join(rng.choice(_ALPHABET[:rng.randint(2, len(_ALPHABET))]) for _ in range(rng.randint(1, 14)))
        word_counts[word] = rng.choice([1, 2, 3, 7, 3 << 31])
    options = dict(vocab_size=rng.randint(10, 200), min_frequency=rng.choice([0, 2, 5]),
                   max_token_length=rng.choice([None, 2, 3, 5]),
                   continuing_subword_prefix=rng.choice([None, "##", "a"]),
                   end_of_word_suffix=rng.choice([None, "</w>"]),
                   limit_alphabet=rng.choice([None, 4]))
    _both(learn_bpe, word_counts, **options)


@pytest.mark.parametrize("seed", range(12))
def test_merges_onto_existing_tokens(seed):
    # special tokens spelled like merges: a merge then reuses an existing id
    rng = random.Random(100 + seed)
    word_counts = {"".join(rng.choice("aabc") for _ in range(rng.randint(1, 12))): rng.randint(1, 6)
                   for _ in range(rng.randint(1, 25))}
    specials = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 5))]
    _both(learn_bpe, word_counts, vocab_size=rng.randint(4, 60), special_tokens=specials)
    _both(learn_wordpiece, word_counts, vocab_size=rng.randint(4, 60), special_tokens=specials + ["##a"])


def test_runs_of_one_character():
    word_counts = {"a" * n: n for n in range(1, 40)} | {"ab" * 9: 3, "Ġ" * 64: 2, "aab" * 7: 1}
    vocab, merges = _both(learn_bpe, word_counts, vocab_size=60)
    assert ("a", "a") in merges


@pytest.mark.parametrize("word_counts", [{}, {"a": 3, "b": 1, "中": 2}, {"x": 1}])
def test_no_pairs(word_counts):
    vocab, merges = _both(learn_bpe, word_counts, vocab_size=10)
    assert merges == []


def test_one_long_word():
    rng = random.Random(7)
    word = "".join(rng.choice("abcdé ") for _ in range(20000))
    vocab, merges = _both(learn_bpe, {word: 2, word[:50]: 1}, vocab_size=400)
    assert len(merges) > 300


def test_vocab_size_already_reached_and_too_small():
    _both(learn_bpe, {"abc": 2}, vocab_size=3)
    result = _both(learn_bpe, {"abc": 2}, vocab_size=2)
    assert result[0] == "error"


# -- word counting ------------------------------------------------------------------------------

def _counts_both(preset, feed):
    """``feed(counter)`` on a WordCounter of ``preset`` on both paths: same words, counts, dtypes."""
    from gputok.trainers.counting import WordCounter
    from gputok.training import _components, _resolve

    out = {}
    for name in ("numba", "torch"):
        with _dispatch.use_backend(name):
            _, chosen = _resolve(None, preset, "frequency")
            counter = WordCounter(*_components(chosen), byte_level=chosen.byte_level)
            feed(counter)
            table = counter.result()
        out[name] = (table.to_dict(), counter.words_seen, table.words.values.dtype, table.words.offsets.dtype,
                     table.counts.dtype)
    assert out["numba"] == out["torch"]
    return out["numba"]


_PRESETS = ["byte-level-bpe", "char-bpe", "bert-wordpiece"]


@pytest.mark.parametrize("preset", _PRESETS)
def test_counting_english_chunks(preset):
    text = assets.english_corpus(1).read_text(encoding="utf-8")
    cut = len(text) // 3
    found, seen, *_ = _counts_both(preset, lambda c: [c.add_lines(text[:cut]), c.add_lines(text[cut:])])
    assert len(found) > 10000 and seen > 100000


@pytest.mark.parametrize("preset", _PRESETS)
@pytest.mark.parametrize("seed", range(4))
def test_counting_random_unicode(preset, seed):
    rng = random.Random(seed)
    pool = list("ab AB1.,!?é\u0301\u0300中文\U0001F600\U0001F1FA\U0001F1F8\ud800\udfff\u3000\t\n  ") + [
        chr(rng.randrange(0x110000)) for _ in range(40)]
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 60))) for _ in range(rng.randint(1, 80))]
    texts += ["", "a", " ", "x" * 5000, "héllo wörld " * 300]
    _counts_both(preset, lambda c: [c.add_texts(texts[:7]), c.add_texts(texts[7:]), c.add_texts([])])


@pytest.mark.parametrize("preset", _PRESETS)
def test_counting_odd_shapes(preset):
    assert _counts_both(preset, lambda c: None)[:2] == ({}, 0)
    _counts_both(preset, lambda c: c.add_texts(["", " ", "\n"]))
    _counts_both(preset, lambda c: c.add_texts(["a"]))


def test_counting_table_grows_and_result_twice():
    from gputok.trainers.counting import WordCounter
    from gputok.pre_tokenizers import BertPreTokenizer

    words = [f"w{i}" for i in range(70000)]
    counter = WordCounter(None, BertPreTokenizer())
    counter.add_texts([" ".join(words)])
    first = counter.result().to_dict()
    counter.add_texts([" ".join(words[:10])])
    with _dispatch.use_backend("torch"):
        reference = WordCounter(None, BertPreTokenizer())
        reference.add_texts([" ".join(words)])
        reference.add_texts([" ".join(words[:10])])
    assert first == {w: 1 for w in words}
    assert counter.result().to_dict() == reference.result().to_dict()


# -- Unigram: E-step and Viterbi ----------------------------------------------------------------

def _unigram_trainer(words, counts, vocab_size=40):
    from gputok.trainers.unigram import UnigramTrainStats, _Trainer

    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w], dtype=torch.int32),
                                 torch.tensor([len(w) for w in words]))
    trainer = _Trainer(ragged, torch.tensor(counts), torch.zeros(len(counts), dtype=torch.int64), vocab_size=vocab_size,
                       coverage=0.98, max_len=16, num_meta=3, seed_size=10_000, shrinking=0.75, sub_iterations=2,
                       progress=False, stats=UnigramTrainStats())
    trainer._required_chars()
    trainer._seeds()
    trainer._build_lattice()
    return trainer


@pytest.mark.parametrize("num_words", [1, 3, 64, 130, 600])
def test_unigram_expect_and_viterbi_kernels_equal_twins(num_words):
    from gputok.kernels.train_unigram_numba import unigram_expect_numba
    from gputok.trainers.unigram import _viterbi, unigram_expect, unigram_expect_torch

    rng = random.Random(num_words)
    alphabet = "▁abcdeé漢x\U0001F600\u0301"
    words = ["▁" + "".join(rng.choice(alphabet[1:]) for _ in range(rng.choice([1, 2, 5, 17, 40])))
             for _ in range(num_words)] + ["▁ab", "▁ab", "▁abc", "▁zq", "▁" + "a" * 300]
    trainer = _unigram_trainer(words, [rng.choice([1, 2, 9, 3 << 31]) for _ in words])
    scores = torch.tensor([rng.uniform(-12, -1) for _ in range(trainer.num_seeds + 1)], dtype=torch.float64)
    scores[:-1][torch.rand(trainer.num_seeds, generator=torch.Generator().manual_seed(num_words)) < 0.2] = -float("inf")
    scores[:-1][trainer.seed_len == 1] = -3.0  # characters always have an edge
    scores[5 % scores.numel()] = scores[7 % scores.numel()]  # ties in the Viterbi
    counts = trainer.counts.double()
    bounds = trainer.batch_start.tolist()
    for lat, w0 in zip(trainer.lattices, bounds):
        out = {}
        c = counts[w0:w0 + lat.num_words]
        for name in ("numba", "torch"):
            with _dispatch.use_backend(name):
                if name == "numba":
                    expected, log_z = (torch.from_numpy(t) for t in unigram_expect_numba(
                        lat.lengths.numpy(), c.numpy(), lat.step_base.numpy(), lat.row_ptr.numpy(),
                        lat.edge_src.numpy(), lat.edge_word.numpy(), lat.edge_piece.numpy(), scores.numpy()))
                    # the training's dispatch runs this kernel on CPU lattices
                    dispatched = unigram_expect(lat, c, scores, 16)
                    assert torch.equal(dispatched[0], expected) and torch.equal(dispatched[1], log_z)
                else:
                    expected, log_z = unigram_expect_torch(lat.lengths, c, lat.step_base, lat.row_ptr, lat.edge_src,
                                                           lat.edge_word, lat.edge_piece, scores, 16)
                edges, owner = _viterbi(lat, scores.index_select(0, lat.edge_piece))
            order = torch.argsort(edges)
            out[name] = (expected, log_z, edges[order], owner[order])
        (e1, z1, ed1, o1), (e2, z2, ed2, o2) = out["numba"], out["torch"]
        assert e1.dtype == e2.dtype == torch.float64 and e1.shape == e2.shape and z1.shape == z2.shape
        torch.testing.assert_close(z1, z2, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(e1, e2, rtol=1e-10, atol=1e-10)
        assert ed1.dtype == ed2.dtype and torch.equal(ed1, ed2) and torch.equal(o1, o2)


@pytest.mark.parametrize("batch_edges", [None, 4096])
def test_unigram_training_same_pieces_both_paths(monkeypatch, batch_edges):
    # small batches: many lattices, run on threads at once on the numba path
    from gputok.trainers import unigram
    from gputok.trainers.unigram import learn_unigram, unigram_training_words

    if batch_edges:
        monkeypatch.setattr(unigram, "_BATCH_EDGES", batch_edges)
        monkeypatch.setattr(torch, "get_num_threads", lambda: 3)

    lines = assets.english_corpus(1).read_text(encoding="utf-8").splitlines()[:3000]
    words, counts, final = unigram_training_words(lines, return_sentence_final=True)
    out = {}
    for name in ("numba", "torch"):
        with _dispatch.use_backend(name):
            out[name] = learn_unigram(words, counts, vocab_size=1000, sentence_final_counts=final, progress=False)
    assert [p for p, _ in out["numba"]] == [p for p, _ in out["torch"]]
    for (_, a), (_, b) in zip(out["numba"], out["torch"]):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("num_words", [3, 200])
def test_unigram_alternatives_kernel_equals_twin(num_words):
    rng = random.Random(num_words + 5)
    words = ["▁" + "".join(rng.choice("▁abcdeé漢") for _ in range(rng.choice([1, 3, 8, 20]))) for _ in range(num_words)]
    words += ["▁abab", "▁abab", "▁ab", "▁ba", "▁" + "ab" * 40]
    trainer = _unigram_trainer(words, [rng.randint(1, 9) for _ in words])
    score = torch.tensor([rng.choice([-2.0, -3.0, rng.uniform(-9, -1)]) for _ in range(trainer.num_seeds + 1)],
                         dtype=torch.float64)  # repeated values: ties between segmentations
    score[:-1][torch.rand(trainer.num_seeds, generator=torch.Generator().manual_seed(num_words)) < 0.1] = -float("inf")
    pieces = torch.nonzero(trainer.seed_len >= 2).squeeze(1)
    out = {}
    for name in ("numba", "torch"):
        with _dispatch.use_backend(name):
            out[name] = trainer._alternatives(pieces, score)
    assert pieces.numel() > 10
    for got, want in zip(out["numba"], out["torch"]):
        assert got.dtype == want.dtype and torch.equal(got, want)
