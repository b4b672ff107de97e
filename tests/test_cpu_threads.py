"""A large CPU batch encoded as chunks in worker threads (``gputok._cpu_threads``) gives the same
tensors as one chunk, leaves the caller's torch thread count alone, and survives a fork."""

import multiprocessing
import threading

import pytest
import torch

from gputok import Tokenizer, _cpu_threads, assets


@pytest.fixture(scope="module")
def mixed_lines(parity_lines):
    english = [line for line in parity_lines[5::211] if line.strip()][:600]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::90][:100]
    return english + chinese + ["", "  ", "x"]


def _whole(tok, texts, **kwargs):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_cpu_threads, "MIN_CHUNK_CHARS", 1 << 60)
        return tok(texts, **kwargs)


def _assert_same(got, expected):
    assert got.keys() == expected.keys()
    for key in got:
        assert torch.equal(got[key], expected[key]), key


@pytest.mark.parametrize("name", ["cl100k", "bert", "unigram"])
def test_chunks_give_the_same_tensors(name, split_small, mixed_lines, sp_test_model_path, bert):
    tok = {"cl100k": lambda: Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"),
           "bert": lambda: bert,
           "unigram": lambda: Tokenizer.from_sentencepiece(sp_test_model_path)}[name]()
    pairs = [line[:20] for line in reversed(mixed_lines)]
    for kwargs in (dict(padding=False), dict(return_offsets=True),
                   dict(text_pair=pairs, truncation="only_first", max_length=40, stride=4,
                        return_overflowing_tokens=True)):
        expected = _whole(tok, mixed_lines, **kwargs)
        split_small.clear()
        _assert_same(tok(mixed_lines, **kwargs), expected)
        assert split_small and split_small[0] == 2  # it really ran in two chunks


def test_added_tokens_in_the_text(split_small, mixed_lines, bert):
    lines = [line + " [MASK]" if i % 5 == 0 else line for i, line in enumerate(mixed_lines)]
    _assert_same(bert(lines, return_offsets=True), _whole(bert, lines, return_offsets=True))
    assert split_small  # the text between the added tokens is encoded in chunks too


def test_sampling_stays_in_one_thread(split_small, mixed_lines, sp_test_model_path):
    tok = Tokenizer.from_sentencepiece(sp_test_model_path)
    with tok.model.sampling(0.3, torch.Generator().manual_seed(5)):
        first = tok(mixed_lines, padding=False)
    with tok.model.sampling(0.3, torch.Generator().manual_seed(5)):
        again = tok(mixed_lines, padding=False)
    assert not split_small  # draws from one generator in one order: reproducible
    _assert_same(first, again)


def test_chunks_are_balanced_and_cover_every_text(split_small):
    texts = ["a" * 5000] + ["b" * 10] * 1000 + ["c" * 5000]
    parts = _cpu_threads.chunks(texts)
    assert [t for part in parts for t in part] == texts
    sizes = [sum(map(len, part)) for part in parts]
    assert len(parts) == 2 and max(sizes) - min(sizes) <= 5000
    assert _cpu_threads.chunks(["a" * 1999, "b"]) is None  # 2,000 characters: one chunk's worth
    assert _cpu_threads.chunks(["a" * 10**6]) is None  # one text is never cut
    assert _cpu_threads.chunks([""] * 20 + ["a" * 10**6]) is None  # nor is one text with empty ones
    torch.set_num_threads(1)
    assert _cpu_threads.chunks(texts) is None


def test_the_callers_chunk_is_shorter_by_its_glue(split_small):
    texts = ["a" * 100] * 400  # 40,000 characters: 2 chunks (the machine's 2 threads)
    parts = _cpu_threads.chunks(texts)
    first, second = (sum(map(len, part)) for part in parts)
    assert abs((second - first) - _cpu_threads.CALLER_CHARS) <= 100  # within a text
    few = _cpu_threads.chunks(["a" * 100] * 50)  # 5,000 characters: the glue counts as half a share at most
    assert len(few) == 2 and 1800 <= sum(map(len, few[0])) <= 1900  # (5,000 - 1,250) / 2, to a text


def test_caller_thread_count_is_kept(split_small, mixed_lines, bert):
    bert(mixed_lines)
    assert split_small
    assert torch.get_num_threads() == 2
    seen = []
    later = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    later.start()
    later.join()
    assert seen == [2]  # a thread started later takes the caller's count, not the workers' 1


def _map_in_child(queue):
    queue.put(_cpu_threads.map_chunks(len, [["a"], ["b", "c"]]))


def test_forked_child_gets_a_pool_of_its_own(split_small, mixed_lines, bert):
    bert(mixed_lines)  # the parent's pool threads exist now
    assert split_small
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_map_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)  # the parent's pool has no threads in the child: it would hang
    child.join(timeout=60)
    assert child.exitcode == 0 and got == [1, 2]
