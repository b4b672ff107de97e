"""Packer: unpacking the blocks by cu_seqlens gives the documents back (concat: exactly, in order;
best-fit: every document whole), the best-fit kernel against a plain Python reference, and the
collate that tokenizes and packs."""

import numpy as np
import pytest
import torch

from gputok import assets
from gputok.kernels.packing_numba import best_fit_decreasing
from gputok.packing import IGNORE_INDEX, Packer


def _ragged(docs):
    lengths = torch.tensor([len(d) for d in docs])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)])
    return torch.tensor([t for d in docs for t in d], dtype=torch.long), offsets


def _segments(out):
    flat = out["input_ids"].flatten().tolist()
    labels, cu = out["labels"].flatten().tolist(), out["cu_seqlens"].tolist()
    segs = [(flat[a:b], labels[a:b]) for a, b in zip(cu[:-1], cu[1:])]
    return [(ids, lab) for ids, lab in segs if any(x != IGNORE_INDEX for x in lab[1:]) or lab[0] != IGNORE_INDEX
            or ids != [0] * len(ids)]


def _random_docs(rng, n, longest):
    return [list(rng.integers(1, 1000, rng.integers(0, longest))) for _ in range(n)]


@pytest.mark.parametrize("seq_len", [1, 7, 64])
def test_concat_gives_the_documents_back(seq_len):
    rng = np.random.default_rng(seq_len)
    docs = _random_docs(rng, 200, 150)
    out = Packer(seq_len, pad_id=0)(*_ragged(docs))
    flat, cu = out["input_ids"].flatten(), out["cu_seqlens"]
    assert cu.dtype == torch.int32 and int(cu[-1]) == flat.numel() and out["input_ids"].shape[1] == seq_len
    assert out["max_seqlen"] == int((cu[1:] - cu[:-1]).max()) <= seq_len
    real = sum(map(len, docs))
    pieces = [flat[a:b] for a, b in zip(cu[:-1].tolist(), cu[1:].tolist())][: -1 if real % seq_len else None]
    assert torch.cat(pieces).tolist() == [t for d in docs for t in d]
    positions = out["position_ids"].flatten()
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        assert positions[a:b].tolist() == list(range(b - a))
    # labels: -100 exactly at every document's first token and on the padding
    starts = set(np.cumsum([0] + [len(d) for d in docs[:-1]])[[len(d) > 0 for d in docs]].tolist())
    masked = {i for i, x in enumerate(out["labels"].flatten().tolist()) if x == IGNORE_INDEX}
    assert masked == starts | set(range(real, flat.numel()))
    assert out["efficiency"] == pytest.approx(real / flat.numel())


def _best_fit_reference(lengths, capacity):
    rooms, bins = [], [0] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fits = [b for b, r in enumerate(rooms) if r >= lengths[i]]
        if fits:
            best = min(fits, key=lambda b: rooms[b])
        else:
            best = len(rooms)
            rooms.append(capacity)
        rooms[best] -= lengths[i]
        bins[i] = best
    return sorted(rooms)


def test_best_fit_kernel_matches_reference():
    rng = np.random.default_rng(0)
    for capacity in (1, 10, 100, 2048):
        lengths = rng.integers(1, capacity + 1, 300)
        bins, count = best_fit_decreasing(lengths, np.argsort(-lengths, kind="stable"), capacity)
        rooms = np.full(count, capacity) - np.bincount(bins, weights=lengths, minlength=count).astype(int)
        assert rooms.min() >= 0
        assert sorted(rooms.tolist()) == _best_fit_reference(lengths.tolist(), capacity)


@pytest.mark.parametrize("seq_len", [16, 100])
def test_best_fit_keeps_documents_whole(seq_len):
    rng = np.random.default_rng(seq_len)
    docs = _random_docs(rng, 300, 2 * seq_len)
    out = Packer(seq_len, mode="best_fit", pad_id=0)(*_ragged(docs))
    flat, cu = out["input_ids"].flatten().tolist(), out["cu_seqlens"].tolist()
    labels = out["labels"].flatten().tolist()
    segments = [tuple(flat[a:b]) for a, b in zip(cu[:-1], cu[1:]) if labels[a + 1:b] != [IGNORE_INDEX] * (b - a - 1)
                or b - a == 1 and flat[a] != 0]
    expected = []
    for d in docs:  # pieces of seq_len; a document that fits is one piece
        expected += [tuple(d[i:i + seq_len]) for i in range(0, len(d), seq_len)]
    assert sorted(segments) == sorted(expected)
    assert all(b - a <= seq_len for a, b in zip(cu[:-1], cu[1:]))
    assert not any(a // seq_len != (b - 1) // seq_len for a, b in zip(cu[:-1], cu[1:]))  # no piece crosses a block
    concat = Packer(seq_len)(*_ragged(docs))
    assert out["efficiency"] <= 1 and concat["efficiency"] >= out["efficiency"]


def test_packing_real_text_and_collate():
    import gputok
    from gputok.packing import PackingCollate

    tok = gputok.Tokenizer.from_vocab(assets.fetch("bert-vocab"))
    with open(assets.english_corpus(20), encoding="utf-8") as f:
        texts = [line for line in f.read(100_000).split("\n")[:-1] if line]
    out = PackingCollate(tok, Packer(128, mode="best_fit"))(texts)
    encoded = tok.encode_batch(texts)
    flat, cu = out["input_ids"].flatten().tolist(), out["cu_seqlens"].tolist()
    segments = sorted(tuple(flat[a:b]) for a, b in zip(cu[:-1], cu[1:]) if flat[a] == tok.token_to_id("[CLS]"))
    assert segments == sorted(tuple(e) for e in encoded if len(e) <= 128)
    assert 0.9 < out["efficiency"] <= 1
