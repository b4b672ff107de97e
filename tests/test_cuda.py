"""gputok on a CUDA device: the compiled Triton kernels against their torch twins, and every
tokenizer family, the sampler and the trainers giving on the GPU exactly what they give on the CPU.

Every other test runs the kernels under ``TRITON_INTERPRET=1`` on CPU tensors; these need a GPU
and compiled kernels, so they are skipped unless torch sees a CUDA device and the interpreter is
off. On a CUDA machine::

    TRITON_INTERPRET=0 python -m pytest tests/test_cuda.py
"""

import collections
import os
import random

import pytest
import torch

import gputok
from gputok import _dispatch, assets
from gputok.data import Collate
from gputok.word_cache import WordCache

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason="needs a CUDA device and compiled Triton kernels (TRITON_INTERPRET=0)")


def _random_texts(count: int, seed: int) -> list[str]:
    """Random Unicode: every plane's letters, marks, digits, CJK, emoji, runs of spaces, digits and
    newlines, and lone surrogates (which become U+FFFD)."""
    rng = random.Random(seed)
    pools = ["abc XYZ", " " * 7, "\n\n\t", "0123456789", "éüßñ\u0301\u0308", "漢字かなカナ한국어", "😀👍🏽\u200d",
             "\u00a0\u2003\u3000", "'s're've", "<|endoftext|>", "\ud800\udfff", "ﬁ€ℌ①", "".join(map(chr, range(0x370, 0x400)))]
    texts = []
    for _ in range(count):
        pieces = [rng.choice(pools) for _ in range(rng.randint(0, 12))]
        texts.append("".join(rng.choice(p) * rng.randint(1, 3) if p else "" for p in pieces))
    return texts


@pytest.fixture(scope="module")
def texts(parity_lines):
    """~16k real lines (English, the Chinese kernel docs, Shakespeare, GO terms) and 500 random ones."""
    return parity_lines[::25] + _random_texts(500, seed=3)


def _tokenizer(name: str) -> gputok.Tokenizer:
    if name == "bert":
        return gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
    if name in ("cl100k", "gpt2"):
        return gputok.Tokenizer.from_tiktoken(assets.fetch(f"{name}-tiktoken"), pattern=name)
    if name == "mistral":
        return gputok.Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model"))
    return gputok.Tokenizer.from_sentencepiece(assets.fetch("sp-test-model"))


def _encode(tok: gputok.Tokenizer, texts: list[str], device: str, cold: bool = True,
            **options) -> dict[str, torch.Tensor]:
    if cold:
        tok.word_cache = WordCache()  # every word goes through the device's kernels
    out = tok(texts, device=device, **options)
    assert all(value.device.type == torch.device(device).type for value in out.values())
    return {key: value.cpu() for key, value in out.items()}


def _assert_equal(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
        mismatches = int((got[key] != want[key]).sum())
        assert mismatches == 0, f"{key}: {mismatches} cells differ"


@pytest.mark.parametrize("name", ["bert", "cl100k", "gpt2", "mistral", "sp-unigram"])
def test_tokenizers_give_the_cpu_ids_on_cuda(name, texts):
    tok = _tokenizer(name)
    want = _encode(tok, texts, "cpu", padding=False)
    assert want["input_ids"].numel() > 100_000
    _assert_equal(_encode(tok, texts, "cuda", padding=False), want)
    # Padded output with offsets and truncation, from a word cache that holds half the words on the device.
    options = dict(padding=True, return_offsets=True, truncation=True, max_length=64)
    want = _encode(tok, texts[:4000], "cpu", **options)
    _encode(tok, texts[:2000], "cuda", padding=False)
    _assert_equal(_encode(tok, texts[:4000], "cuda", cold=False, **options), want)


@pytest.mark.parametrize("normalized", [0.0, 0.5])
def test_many_added_tokens_give_the_cpu_ids_on_cuda(texts, normalized):
    """BERT with 400 added words (found by the literal trie walk) on the GPU: the CPU's ids and
    offsets. All matched in the raw text (the whole-call path searches them), or half after the
    normalizer (the stage-by-stage path)."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    from gputok.literals import LiteralPattern

    rnd = random.Random(7)
    words = sorted({word.lower() for text in texts[:4000] for word in text.split() if word.isalpha()})
    hf = HFTokenizer.from_file(str(assets.fetch("bert-tokenizer-json")))
    hf.add_tokens([AddedToken(word, normalized=rnd.random() < normalized, lstrip=rnd.random() < 0.2)
                   for word in rnd.sample(words, 400)])
    tok = gputok.Tokenizer.from_str(hf.to_str())
    assert isinstance(tok._pattern(None), LiteralPattern)
    for options in (dict(padding=True), dict(padding=True, return_offsets=True)):
        _assert_equal(_encode(tok, texts, "cuda", **options), _encode(tok, texts, "cpu", **options))


def test_tokenizer_from_a_cuda_trained_char_bpe_matches_the_cpu(parity_lines):
    lines = parity_lines[:20000]
    on_cpu = gputok.train(iter(lines), preset="char-bpe", vocab_size=3000, progress=False)
    on_cuda = gputok.train(iter(lines), preset="char-bpe", vocab_size=3000, device="cuda", progress=False)
    assert on_cuda.to_json() == on_cpu.to_json()
    sample = parity_lines[::97]
    _assert_equal(_encode(on_cuda, sample, "cuda", padding=False), _encode(on_cpu, sample, "cpu", padding=False))


@pytest.mark.parametrize("preset", ["byte-level-bpe", "bert-wordpiece"])
def test_training_on_cuda_equals_the_cpu(preset, parity_lines):
    lines = parity_lines[:20000] + parity_lines[-5000:]
    options = dict(preset=preset, vocab_size=4000, min_frequency=2, progress=False)
    on_cpu = gputok.train(iter(lines), **options).to_json()
    assert gputok.train(iter(lines), device="cuda", **options).to_json() == on_cpu


def test_train_from_counts_on_cuda_with_counts_above_2_to_the_31():
    counts = collections.Counter({"hug": 10 << 31, "pug": 5, "pun": 12 << 32, "bun": 4, "hugs": 5 << 31})
    options = dict(model="bpe", preset="char-bpe", vocab_size=40, min_frequency=1, progress=False)
    assert (gputok.train_from_counts(dict(counts), device="cuda", **options).to_json()
            == gputok.train_from_counts(dict(counts), **options).to_json())


def test_sampling_on_cuda_is_reproducible_and_spells_the_text(texts):
    tok = _tokenizer("sp-unigram")
    sample = texts[:3000]
    runs = []
    for _ in range(2):
        with tok.model.sampling(0.1, torch.Generator(device="cuda").manual_seed(7)):
            runs.append(_encode(tok, sample, "cuda", padding=False))
    _assert_equal(runs[1], runs[0])
    plain = _encode(tok, sample, "cpu", padding=False)
    assert not torch.equal(runs[0]["input_ids"], plain["input_ids"])  # sampling changed something
    flat, bounds = runs[0]["input_ids"].tolist(), runs[0]["row_offsets"].tolist()
    decoded = [tok.decode(flat[a:b]) for a, b in zip(bounds, bounds[1:])]
    wanted = [tok.decode(ids) for ids in tok.encode_batch(sample)]
    assert decoded == wanted


def test_collate_puts_the_batch_on_cuda(parity_lines):
    tok = _tokenizer("bert")
    batch = Collate(tok, max_length=32, device="cuda")(parity_lines[:64])
    assert batch["input_ids"].device.type == "cuda" and batch["input_ids"].shape[1] <= 32
    assert batch["input_ids"].cpu().tolist() == tok(parity_lines[:64], truncation=True, max_length=32)["input_ids"].tolist()


def test_small_batches_encode_on_the_cpu_and_land_on_the_device(parity_lines, monkeypatch):
    from gputok import tokenizer as tokenizer_module

    tok = _tokenizer("cl100k")
    small = parity_lines[1000:1040]
    assert sum(map(len, small)) < tokenizer_module.CUDA_FROM_CHARS
    routed = _encode(tok, small, "cuda", padding=True, return_offsets=True)
    assert {device.type for device in tok.word_cache._stores} == {"cpu"}  # encoded on the CPU
    monkeypatch.setattr(tokenizer_module, "CUDA_FROM_CHARS", 0)
    on_gpu = _encode(tok, small, "cuda", padding=True, return_offsets=True)
    assert {device.type for device in tok.word_cache._stores} == {"cuda"}
    _assert_equal(routed, on_gpu)


def test_pairs_truncation_and_overflow_on_cuda(parity_lines):
    tok = _tokenizer("bert")
    first, second = parity_lines[2000:6000], parity_lines[6000:10000]
    for options in (dict(text_pair=second, truncation="longest_first", max_length=48, return_offsets=True),
                    dict(truncation=True, max_length=32, stride=8, return_overflowing_tokens=True, return_offsets=True)):
        _assert_equal(_encode(tok, first, "cuda", **options), _encode(tok, first, "cpu", **options))


def test_collate_samples_on_cuda_reproducibly(parity_lines):
    tok = _tokenizer("sp-unigram")
    texts = parity_lines[:512]
    batches = []
    for seed in (5, 5, 6):
        collate = Collate(tok, device="cuda", sample_alpha=0.2, generator=torch.Generator(device="cuda").manual_seed(seed))
        batches.append(collate(texts)["input_ids"].cpu())
    assert torch.equal(batches[0], batches[1])
    assert not torch.equal(batches[0], batches[2])  # another seed, other segmentations


def test_cli_encode_on_cuda(tmp_path, parity_lines):
    import numpy as np

    from gputok.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(parity_lines[::40]) + "\n", encoding="utf-8")
    tokenizer = str(assets.fetch("bert-tokenizer-json"))
    for device in ("cpu", "cuda"):
        assert main(["encode", "--tokenizer", tokenizer, str(corpus), "-o", str(tmp_path / f"{device}.npz"),
                     "--device", device, "--quiet"]) == 0
    on_cpu, on_cuda = np.load(tmp_path / "cpu.npz"), np.load(tmp_path / "cuda.npz")
    assert on_cpu["ids"].size > 100_000
    assert all(np.array_equal(on_cpu[key], on_cuda[key]) for key in ("ids", "offsets"))


# ---- the kernels themselves, compiled, on random inputs beyond what real text exercises ----

def test_unigram_viterbi_kernel_compiled():
    from test_unigram_kernels import random_lattice
    from gputok.models.unigram import unigram_viterbi, unigram_viterbi_torch

    for lengths in ([1], [3, 0, 5], [7] * 3 + [130, 1, 64, 65], list(range(300))):
        for ties in (False, True):
            args = [a.cuda() for a in random_lattice(lengths, seed=len(lengths), ties=ties)]
            want = unigram_viterbi_torch(*args)
            got = unigram_viterbi(*args)  # CUDA tensors: the kernel
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_unigram_expect_kernel_compiled():
    from test_train_unigram import _lattice
    from gputok.kernels.unigram_expect import unigram_expect_triton
    from gputok.trainers.unigram import unigram_expect_torch

    rng = random.Random(11)
    words = ["▁" + "".join(rng.choice("abcdeé漢x") for _ in range(rng.choice([1, 2, 5, 17, 40]))) for _ in range(300)]
    trainer = _lattice(words, [rng.randint(1, 9) for _ in words])
    lat = trainer.lattices[0]
    scores = torch.tensor([rng.uniform(-12, -1) for _ in range(trainer.num_seeds + 1)], dtype=torch.float64)
    scores[:-1][trainer.seed_len == 1] = -3.0
    args = [a.cuda() for a in (lat.lengths, trainer.counts.double(), lat.step_base, lat.row_ptr, lat.edge_src,
                               lat.edge_word, lat.edge_piece, scores)] + [16]
    expected, log_z = unigram_expect_torch(*args)
    got, got_z = unigram_expect_triton(*args)
    torch.testing.assert_close(got_z, log_z, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_bpe_merge_kernel_compiled_gives_the_twin_on_every_launch(parity_lines):
    """The one-word-per-program merge kernel (the stage-by-stage path's: gpt2, o200k) on every
    word of 100,000 real lines, launched 200 times: each launch gives the numba twin's tokens. A
    merge of a word's last pair once left its store unseparated from the next step's loads: on an
    H100 about one launch in 45 of this size gave one wrong token (2026-11-27)."""
    from gputok.ingest import utf8
    from gputok.kernels.bpe_merge import bpe_merge_triton
    from gputok.models.bpe import bpe_merge_one_at_a_time

    model = _tokenizer("gpt2").model
    words = [word for line in parity_lines[::2][:100000] for word in line.split(" ") if 0 < len(word) < 60]
    data = utf8(words)
    tokens = model.byte_to_id[data.values.long()]
    table = dict(hash_mask=model.pairs.mask, max_probes=model.pairs.max_probes, vocab_size=model.vocab_size)
    want, want_offsets = bpe_merge_one_at_a_time(tokens, data.offsets, slot_keys=model.pairs.slot_keys,
                                                 slot_values=model.pairs.slot_values, **table)
    keys, values = model.pairs.tensors("cuda")
    on_gpu, offsets = tokens.cuda(), data.offsets.cuda()
    differing = 0
    for _ in range(200):
        got, got_offsets = bpe_merge_triton(on_gpu, offsets, slot_keys=keys, slot_values=values, **table)
        differing += not (torch.equal(got_offsets.cpu(), want_offsets) and torch.equal(got.cpu(), want))
    assert differing == 0, f"{differing} of 200 launches differ from the twin"


def test_pair_count_kernel_compiled():
    from test_train_kernels import _random_rows
    from gputok.kernels.pair_count import pair_count_triton
    from gputok.trainers.pair_ops import pair_windows_torch

    for num_rows, max_len in ((1, 1), (300, 6), (5000, 40)):
        symbols, rows, counts = (t.cuda() for t in _random_rows(num_rows, max_len, alphabet=5, seed=num_rows))
        for e, g in zip(pair_windows_torch(symbols, rows, counts), pair_count_triton(symbols, rows, counts)):
            assert g.dtype == e.dtype and torch.equal(g, e)


def test_kernels_are_what_cuda_tensors_take():
    assert _dispatch.backend(torch.device("cuda")) == "triton"
