"""The device-resident merge loop (``gputok.trainers.bpe_device``, what CUDA words train with) against the host loop.

The host loop is checked against huggingface's trainers in ``test_train_bpe.py``; here the device
loop, run on CPU tensors (``runs_on_device`` patched to say yes) with the torch twins and, on a
small case, with the Triton kernels under ``TRITON_INTERPRET=1``, must return the same vocabulary,
the same ordered merges and the same stop reason, on real words and on random ones: suffixes,
``##`` prefixes, the likelihood score, ``max_token_length``, special tokens spelled like merges
(merges onto existing tokens), overlapping runs and counts above 2**31.
"""

import collections

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import _dispatch, assets
from gputok.ragged import Ragged
from gputok.trainers import TrainStats, bpe_device, learn_bpe, learn_wordpiece


def _ragged(word_counts: dict[str, int], device="cpu") -> tuple[Ragged, torch.Tensor]:
    words = list(word_counts)
    values = torch.tensor([ord(c) for w in words for c in w], dtype=torch.int64, device=device)
    ragged = Ragged.from_lengths(values, torch.tensor([len(w) for w in words], dtype=torch.int64, device=device))
    return ragged, torch.tensor([word_counts[w] for w in words], dtype=torch.int64, device=device)


def _both_loops(learn, word_counts, monkeypatch, **options):
    """(host result, host stats), (device result, device stats) for the same words."""
    results = []
    for on_device in (False, True):
        monkeypatch.setattr(bpe_device, "runs_on_device", lambda device, flag=on_device: flag)
        stats = TrainStats()
        results.append((learn(*_ragged(word_counts), progress=False, stats=stats, **options), stats))
    return results


def _assert_same(host, device):
    (host_result, host_stats), (device_result, device_stats) = host, device
    assert device_result == host_result
    assert (device_stats.merges, device_stats.pairs, device_stats.stopped_by) == \
        (host_stats.merges, host_stats.pairs, host_stats.stopped_by)


@pytest.fixture(scope="module")
def word_counts():
    lines = assets.english_corpus(1).read_text(encoding="utf-8").splitlines()[:2500]
    return collections.Counter(w for line in lines for w in line.split())


@pytest.mark.parametrize("learn,options", [
    (learn_bpe, dict(vocab_size=2500, min_frequency=2)),
    (learn_bpe, dict(vocab_size=2500, end_of_word_suffix="</w>")),
    (learn_bpe, dict(vocab_size=2500, max_token_length=4, limit_alphabet=50)),
    (learn_bpe, dict(vocab_size=2500, special_tokens=["th", "the", "in", "ing", "e</w>"],
                     end_of_word_suffix="</w>")),
    (learn_wordpiece, dict(vocab_size=2500, min_frequency=3)),
    (learn_wordpiece, dict(vocab_size=1200, min_frequency=3, score="likelihood")),
    (learn_bpe, dict(vocab_size=100000, min_frequency=10)),
], ids=["byte-level", "suffix", "max-length", "existing-tokens", "wordpiece", "likelihood", "min-frequency"])
def test_device_loop_equals_host_loop_on_real_words(word_counts, monkeypatch, learn, options):
    host, device = _both_loops(learn, word_counts, monkeypatch, **options)
    _assert_same(host, device)
    assert host[1].merges > 400


def test_device_loop_counts_above_2_31(word_counts, monkeypatch):
    big = {w: c << 32 for w, c in word_counts.items()}
    big["zzzzzz"] = 1 << 50  # its pairs count above every other
    host, device = _both_loops(learn_bpe, big, monkeypatch, vocab_size=1500, min_frequency=3 << 32)
    _assert_same(host, device)
    assert device[0][1][:2] == [("z", "z"), ("zz", "zz")]


unicode_words = st.text(alphabet=st.sampled_from("aab1é中𝄞\u0301ĠĠ"), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(word_counts=st.dictionaries(unicode_words, st.integers(1, 6), min_size=1, max_size=25),
       specials=st.lists(st.text(alphabet=st.sampled_from("aab"), min_size=2, max_size=4), max_size=3),
       extra=st.integers(0, 60), min_frequency=st.sampled_from([0, 2, 5]),
       max_token_length=st.sampled_from([None, 2, 3]), prefix=st.sampled_from([None, "##"]))
def test_device_loop_equals_host_loop_on_random_words(word_counts, specials, extra, min_frequency,
                                                      max_token_length, prefix):
    with pytest.MonkeyPatch.context() as monkeypatch:
        vocab_size = 40 * len(word_counts) + extra  # above any alphabet with its ## forms
        learn = learn_wordpiece if prefix else learn_bpe
        host, device = _both_loops(learn, word_counts, monkeypatch, vocab_size=vocab_size,
                                   min_frequency=min_frequency, max_token_length=max_token_length,
                                   special_tokens=specials)
        _assert_same(host, device)


def test_device_loop_with_the_kernels(monkeypatch):
    word_counts = {"aaaa": 3, "aaaaa": 2, "abab": 4, "ĠĠĠĠĠĠ": 7, "1111111": 5, "ba": 1, "abc": 2}
    host = _both_loops(learn_bpe, word_counts, monkeypatch, vocab_size=30)[0]
    with _dispatch.use_backend("triton"):
        device = _both_loops(learn_bpe, word_counts, monkeypatch, vocab_size=30)[1]
    _assert_same(host, device)
    assert len(device[0][1]) > 10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_words_train_on_the_device(word_counts):
    assert bpe_device.runs_on_device(torch.device("cuda"))
    host = learn_bpe(*_ragged(word_counts), vocab_size=2500, progress=False)
    assert learn_bpe(*_ragged(word_counts, "cuda"), vocab_size=2500, progress=False) == host
