"""Unigram's numba kernels (the CPU path) equal the torch-op path and sentencepiece / huggingface.

``Unigram.encode_in_context`` and ``encode_words`` on CPU tensors run
``kernels/unigram_sentence.py`` (SentencePiece mode: each text whole, in float32),
``kernels/unigram_words_numba.py`` (huggingface mode: each word in float64) and
``kernels/unigram_finish_numba.py`` (unk fusion, byte fallback); ``use_backend("torch")`` runs the
lattice of torch ops they replace. Rows differ between the two (one per word occurrence against one
per unique word), so the comparisons are per occurrence, dtypes included.
"""

import random

import pytest
import sentencepiece as spm
import torch

import gputok
from gputok import assets
from gputok._dispatch import use_backend
from gputok.ingest import as_texts, codepoints
from gputok.models.unigram import BYTE, NORMAL, UNKNOWN, MetaspaceSplit, Unigram
from gputok.pre_tokenizers import Words
from gputok.ragged import Ragged

EDGE = ["", " ", "a", "▁", "x", "   ", "  Hello   wörld  ｱ ", "x\u0301y e\u0301", "emoji 😀👍🏽",
        "中文文本，没有空格。", "+------+------+", "a" * 300, "\x00\x01 control", "ǅ Ǆ ǆ", "\t tab\tand\nnewline"]


def random_text(rng: random.Random, size: int) -> str:
    """Characters of every plane: ASCII, whitespace runs, combining marks, CJK, emoji, astral,
    private use, tags, lone surrogates."""
    pools = [(0x20, 0x7E), (0x20, 0x20), (0x09, 0x0D), (0x300, 0x36F), (0x4E00, 0x9FFF), (0x1F300, 0x1F64F),
             (0xAC00, 0xD7A3), (0x10000, 0x10FFFF), (0xE000, 0xF8FF), (0xE0000, 0xE007F), (0xD800, 0xDFFF),
             (0x80, 0x7FF), (0x3000, 0x3000), (0x2581, 0x2581)]
    out = []
    for _ in range(size):
        lo, hi = rng.choice(pools)
        out.append(chr(rng.randint(lo, hi)) * (rng.randint(1, 4) if lo == 0x20 and hi == 0x20 else 1))
    return "".join(out)


def random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [random_text(rng, rng.randint(0, 40)) for _ in range(count)]


@pytest.fixture(scope="module")
def sample(parity_lines):
    rng = random.Random(17)
    chinese = assets.corpus("kernel-docs-zh").read_text(encoding="utf-8").splitlines()
    return rng.sample(parity_lines, 2500) + rng.sample(chinese, 500) + EDGE


@pytest.fixture(scope="module")
def hf_tokenizer(sp_test_tokenizer, tmp_path_factory):
    """The test model saved as tokenizer.json and read back: a huggingface-mode Unigram."""
    path = tmp_path_factory.mktemp("unigram-numba") / "tokenizer.json"
    sp_test_tokenizer.save(path)
    tok = gputok.Tokenizer.from_file(path)
    assert not tok.model.sentencepiece
    return tok, path


def normalized_words(tok, texts):
    with use_backend("torch"):  # the stages before the model: the same inputs for both paths
        norm, _ = tok.normalizer(codepoints(as_texts(texts)))
        rewrite = getattr(tok.pre_tokenizer, "rewrite", None)
        if rewrite is not None:
            norm, _ = rewrite(norm)
        return norm, tok.pre_tokenizer(norm)


def per_occurrence(result):
    ids, ends, inverse = result
    assert ids.values.dtype == ends.values.dtype == torch.int64
    assert ids.offsets.dtype == ends.offsets.dtype == inverse.dtype == torch.int64
    assert torch.equal(ids.offsets, ends.offsets)
    rows_ids, rows_ends = ids.tolist(), ends.tolist()
    return [rows_ids[r] for r in inverse.tolist()], [rows_ends[r] for r in inverse.tolist()]


def assert_paths_agree(tok, texts):
    norm, words = normalized_words(tok, texts)
    got = per_occurrence(tok.model.encode_in_context(norm.values, words, cache=None))
    with use_backend("torch"):
        want = per_occurrence(tok.model.encode_in_context(norm.values, words, cache=None))
    assert got == want


def test_sentencepiece_mode_matches_torch_path_and_sentencepiece(sp_test_model_path, sp_test_tokenizer, sample):
    assert_paths_agree(sp_test_tokenizer, sample)
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    assert sp_test_tokenizer.encode_batch(sample) == sp.encode(sample)


def test_huggingface_mode_matches_torch_path_and_huggingface(hf_tokenizer, sample):
    from tokenizers import Tokenizer as HFTokenizer

    tok, path = hf_tokenizer
    assert_paths_agree(tok, sample)
    real = sample[:-len(EDGE)]  # huggingface's whitespace rules differ from SentencePiece's on odd inputs
    hf = HFTokenizer.from_file(str(path))
    assert tok.encode_batch(real) == [e.ids for e in hf.encode_batch(real, add_special_tokens=False)]


@pytest.mark.parametrize("seed", range(4))
def test_random_unicode_matches_torch_path(sp_test_model_path, sp_test_tokenizer, hf_tokenizer, seed):
    texts = random_texts(seed, 300)
    assert_paths_agree(sp_test_tokenizer, texts)
    assert_paths_agree(hf_tokenizer[0], texts)
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    clean = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]  # sentencepiece refuses lone surrogates
    assert sp_test_tokenizer.encode_batch(clean) == sp.encode(clean)


@pytest.mark.parametrize("texts", [[], [""], ["", "", ""], ["a"], ["▁"], [" "], ["中"], ["😀"], ["", "x", ""]])
def test_odd_shapes(sp_test_model_path, sp_test_tokenizer, hf_tokenizer, texts):
    assert_paths_agree(sp_test_tokenizer, texts)
    assert_paths_agree(hf_tokenizer[0], texts)
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    assert sp_test_tokenizer.encode_batch(texts) == (sp.encode(texts) if texts else [])


def test_a_very_long_text(sp_test_model_path, sp_test_tokenizer, hf_tokenizer, parity_lines):
    text = " ".join(parity_lines[:4000])[:100_000]  # sentence scores past 1e5: float32 re-centring
    assert len(text) == 100_000
    assert_paths_agree(sp_test_tokenizer, [text, "short", text[:5000]])
    assert_paths_agree(hf_tokenizer[0], [text])
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    assert sp_test_tokenizer.encode_batch([text]) == [sp.encode(text)]


def byte_fallback_model(sentencepiece: bool) -> Unigram:
    pieces = ["<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "a", "b", "ab", "▁a", "é", "中"]
    scores = [0.0] * 257 + [-2.0, -1.0, -1.5, -2.0, -1.2, -3.0, -4.0]
    types = [UNKNOWN] + [BYTE] * 256 + [NORMAL] * 7
    return Unigram(list(zip(pieces, scores)), unk_id=0, byte_fallback=True, types=types, sentencepiece=sentencepiece)


def encode_words_both(model: Unigram, words: list[str]):
    ragged = Ragged.from_lengths(torch.tensor([ord(c) for w in words for c in w], dtype=torch.int32),
                                 torch.tensor([len(w) for w in words], dtype=torch.int64))
    got = model.encode_words(ragged)
    with use_backend("torch"):
        want = model.encode_words(ragged)
    for g, w in zip(got, want):
        assert g.values.dtype == w.values.dtype and g.offsets.dtype == w.offsets.dtype
        assert g.tolist() == w.tolist()
    return got


@pytest.mark.parametrize("sentencepiece", [False, True])
@pytest.mark.parametrize("byte_fallback", [False, True])
def test_unk_fusion_and_byte_fallback(sentencepiece, byte_fallback):
    model = byte_fallback_model(sentencepiece)
    model.byte_fallback = byte_fallback
    words = ["ab", "zzz", "a☃b", "𝌆", "\ud800", "é中x", "", "▁abab", "\U0010ffffq\x7f\x80", "<0x41>"]
    ids, _ = encode_words_both(model, words)
    if byte_fallback:
        assert ids.tolist()[3] == [1 + 0xF0, 1 + 0x9D, 1 + 0x8C, 1 + 0x86]  # U+1D306 as its UTF-8 bytes
    else:
        assert ids.tolist()[1] == [0]  # a run of unks is one unk
    rng = random.Random(3)
    encode_words_both(model, [random_text(rng, rng.randint(0, 12)) for _ in range(400)])
    # the same through encode_in_context, one word per text and several
    texts = ["▁ab▁zzz▁a☃b", "▁𝌆", "", "▁é中x▁ab"]
    values = codepoints(texts)
    for words in (MetaspaceSplit()(values), MetaspaceSplit(split=False)(values)):
        got = per_occurrence(model.encode_in_context(values.values, words))
        with use_backend("torch"):
            assert got == per_occurrence(model.encode_in_context(values.values, words))


def test_words_kernel_margins_match_the_torch_lattice(sp_test_tokenizer, sample):
    from gputok.kernels.unigram_words_numba import unigram_words_numba

    model = sp_test_tokenizer.model
    norm, words = normalized_words(sp_test_tokenizer, sample[:800])
    chars = [norm.values[s:e] for s, e in zip(words.starts.tolist(), words.ends.tolist())]
    ragged = Ragged.from_lengths(torch.cat(chars), words.lengths())
    with use_backend("torch"):
        ids, ends, counts, margin, _ = model.segment(ragged)
    got_ids, got_ends, offsets, got_margin, missing = unigram_words_numba(
        ragged.values.int().numpy(), ragged.offsets[:-1].numpy(), ragged.lengths().numpy(), *model.trie.walk_arrays,
        model.score64.numpy(), model.unk_score, model.unk_id)
    assert not missing
    assert torch.equal(torch.from_numpy(got_ids), ids) and torch.equal(torch.from_numpy(got_ends), ends)
    assert torch.equal(torch.from_numpy(offsets).diff(), counts)
    assert torch.equal(torch.from_numpy(got_margin), margin)
    assert bool((margin < 1e-3).any()) and bool(torch.isinf(margin).any())  # near ties and single paths both seen


def test_whole_sentence_words_model():
    """A piece holding '▁' after its start: SentencePiece mode segments each word (here a whole
    text) as a sentence, huggingface mode each word in float64."""
    vocab = [("<unk>", 0.0), ("▁a", -1.0), ("a▁b", -1.5), ("b", -2.0), ("▁", -2.5), ("a", -3.0), ("c", -3.0)]
    types = [UNKNOWN] + [NORMAL] * 6
    texts = ["▁a▁b▁c", "▁aa▁bb", "", "▁xa▁b"]
    values = codepoints(texts)
    for sentencepiece in (True, False):
        model = Unigram(vocab, unk_id=0, types=types, sentencepiece=sentencepiece)
        assert not model.splits_at_space
        words = MetaspaceSplit(split=False)(values)
        got = per_occurrence(model.encode_in_context(values.values, words))
        with use_backend("torch"):
            assert got == per_occurrence(model.encode_in_context(values.values, words))
        assert got[0][0] == [4, 2, 4, 6]  # "a▁b" crosses a word start: -9.5 against -11 for ▁a ▁ b ▁ c


@pytest.mark.parametrize("sentencepiece", [False, True])
def test_no_unk_id_raises(sentencepiece):
    model = Unigram([("a", -1.0), ("▁", -1.0)], unk_id=None, types=[NORMAL, NORMAL], sentencepiece=sentencepiece)
    values = codepoints(["▁a▁a", "▁b"])
    words = MetaspaceSplit()(values)
    ok = Words(words.starts[:2], words.ends[:2], torch.tensor([0, 2]))
    assert per_occurrence(model.encode_in_context(values.values, ok))[0] == [[1, 0], [1, 0]]
    with pytest.raises(ValueError, match="no unk_id"):
        model.encode_in_context(values.values, words)
    with pytest.raises(ValueError, match="no unk_id"):
        model.encode_words(Ragged.from_lengths(torch.tensor([98], dtype=torch.int32), torch.tensor([1])))


def exact_samples(model: Unigram, word: str, alpha: float) -> dict[tuple[int, ...], float]:
    """Every segmentation of ``word`` (pieces, and an unk where no single-character piece starts)
    with its probability under ``exp(alpha * score)``."""
    def paths(at):
        if at == len(word):
            return [((), 0.0)]
        out = []
        single = False
        for end in range(at + 1, len(word) + 1):
            i = model.vocab.get(word[at:end])
            if i is not None:
                single |= end == at + 1
                out += [((i,) + rest, model.scores[i] + score) for rest, score in paths(end)]
        if not single:
            out += [((model.unk_id,) + rest, model.unk_score + score) for rest, score in paths(at + 1)]
        return out

    weights = {p: torch.tensor(alpha * s, dtype=torch.float64).exp().item() for p, s in paths(0)}
    total = sum(weights.values())
    return {p: w / total for p, w in weights.items()}


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_sampling_follows_the_smoothed_distribution_with_unks(backend):
    stats = pytest.importorskip("scipy.stats")
    vocab = [("<unk>", -1.0), ("▁", -2.0), ("a", -1.5), ("b", -1.7), ("ab", -2.2), ("▁a", -1.9), ("ba", -2.5)]
    model = Unigram(vocab, unk_id=0)
    word, n, alpha = "▁ab☃aba", 20000, 0.7
    values = codepoints([word] * n)
    words = MetaspaceSplit()(values)
    with use_backend(backend), model.sampling(alpha, torch.Generator().manual_seed(5)):
        ids, _, inverse = model.encode_in_context(values.values, words)
    rows = ids.tolist()
    counts = {}
    for r in inverse.tolist():
        counts[tuple(rows[r])] = counts.get(tuple(rows[r]), 0) + 1

    def pvalue(expected):
        assert set(counts) <= set(expected)
        keys = sorted(expected)
        return stats.chisquare([counts.get(k, 0) for k in keys], [expected[k] * n for k in keys]).pvalue

    assert len(counts) == len(exact_samples(model, word, alpha)) == 9
    assert pvalue(exact_samples(model, word, alpha)) > 1e-4
    assert pvalue(exact_samples(model, word, alpha * 1.3)) < 1e-6  # the test has power


def test_sampling_is_driven_by_the_generator_and_spells_unks_as_bytes():
    model = byte_fallback_model(sentencepiece=True)
    texts = ["▁ab☃ab▁abab"] * 64
    values = codepoints(texts)
    words = MetaspaceSplit()(values)

    def draw(seed):
        with model.sampling(0.3, torch.Generator().manual_seed(seed)):
            return per_occurrence(model.encode_in_context(values.values, words))

    first = draw(3)
    assert draw(3) == first and draw(4) != first
    assert len({tuple(ids) for ids in first[0]}) > 5
    snowman = [1 + b for b in "☃".encode()]
    assert all(any(ids[i:i + 3] == snowman for i in range(len(ids))) for ids in first[0][0::2])
    with use_backend("torch"), model.sampling(0.3, torch.Generator().manual_seed(3)):
        got = per_occurrence(model.encode_in_context(values.values, words))
    assert all(any(ids[i:i + 3] == snowman for i in range(len(ids))) for ids in got[0][0::2])


@pytest.mark.parametrize("nbest_size", [1, 3, 20])
def test_nbest_matches_torch_path_and_sentencepiece(sp_test_model_path, sp_test_tokenizer, sample, nbest_size):
    from gputok.models.unigram import nbest_encode

    texts = sample[:60] + ["", "a", "☃☃ x", "hello world"] + random_texts(9, 20)
    from test_unigram_sampling import same_up_to_ties

    norm, _ = normalized_words(sp_test_tokenizer, texts)
    got = sp_test_tokenizer.model.nbest(norm, nbest_size)
    # The torch path keeps each node's k best in float64 (a stable merge); the CPU kernel runs
    # sentencepiece's own A* in float32 (lists of more than one): the same paths, near-equal
    # scores, ties in another order (and another cut among those tied with the n-th).
    with use_backend("torch"):
        want = sp_test_tokenizer.model.nbest(norm, nbest_size + (30 if nbest_size > 1 else 0))
    if nbest_size == 1:
        assert got == want
    assert all(same_up_to_ties(w, [p for p, _ in g]) for g, w in zip(got, want))
    assert all(abs(s - {tuple(p): ws for p, ws in w}[tuple(p)]) < 1e-3 for g, w in zip(got, want) for p, s in g)
    sp = spm.SentencePieceProcessor(model_file=sp_test_model_path)
    clean = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
    assert nbest_encode(sp_test_tokenizer, clean, nbest_size) == [sp.nbest_encode_as_ids(t, nbest_size) for t in clean]


def test_nbest_with_ties_and_unks():
    vocab = [("<unk>", -1.0), ("▁", -1.0), ("a", -1.0), ("aa", -2.0), ("b", -1.5), ("ab", -2.5)]
    model = Unigram(vocab, unk_id=0)
    words = Ragged.from_lengths(torch.tensor([ord(c) for c in "▁aaaa▁aab☃b▁"], dtype=torch.int32),
                                torch.tensor([5, 0, 7]))
    got = model.nbest(words, 50)
    with use_backend("torch"):  # (the same paths; ties in another order: see the test above)
        assert [sorted(row) for row in got] == [sorted(row) for row in model.nbest(words, 50)]
    assert len(got[0]) == 5 and got[1] == [([], 0.0)]  # ▁ then aaaa five ways, all scoring -5
    assert all(0 in tokens for tokens, _ in got[2])  # the unk candidate of ☃
