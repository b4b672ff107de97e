"""Issue 17's CUDA budget: at most 40 launches and 3 host syncs per encode call, for each family.

Counted as ``gputok bench --count-launches`` counts (:mod:`gputok.bench_launches`: Triton launches
plus non-view torch ops, and the ops that make the host wait), on the Triton code path that CUDA
tensors take, run here on CPU tensors under ``TRITON_INTERPRET=1``. Batches of 32 real English
lines and of 1,024 short ones (each line's first few words: the interpreter is slow, and the
number of launches of a call does not grow with its text), after one warm-up call (32 lines).
All four families run as :mod:`gputok.cuda_pipeline` (BERT, cl100k, Unigram, Mistral's
SentencePiece BPE).
"""

import pytest
import torch

from gputok.bench import _load_lines, make_tokenizer, special_tokens
from gputok.bench_launches import count_call

LAUNCHES, SYNCS = 40, 3


@pytest.fixture(scope="module")
def batches():
    lines = [line for line in _load_lines(None, 400_000)[0] if line.strip()]
    short = [" ".join(line.split()[:2]) for line in lines]
    # The warm-up call builds the device tables; 32 lines do that as well as 1,024 (the interpreter
    # is slow, and the counted call is the same).
    return {32: (lines[:32], lines[32:64]), 1024: (short[:1024], short[1024:1056])}


def _counts(family: str, batch, warm_up) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one chunk of texts: the dispatch mode counts this thread's ops
    try:
        return count_call(make_tokenizer(family), batch, warm_up=warm_up, padding=True,
                          add_special_tokens=special_tokens(family))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(("family", "size"), [
    ("bert", 32), ("bert", 1024), ("cl100k", 32), ("cl100k", 1024), ("unigram", 32), ("unigram", 1024),
    ("mistral", 32), ("mistral", 1024),
])
def test_encode_call_within_budget(family, size, batches):
    counts = _counts(family, *batches[size])
    assert counts["triton_launches"] >= 1  # the Triton path ran
    assert counts["launches"] <= LAUNCHES, counts["ops_by_name"]
    assert counts["host_syncs"] <= SYNCS, counts["syncs_by_op"]
