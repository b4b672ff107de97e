"""Padded outputs on the CPU (``gputok.tokenizer._padded_outputs``): the pad cells either left as
the zeroed pages of a large ``np.zeros`` allocation, or written by the fill kernel into ``np.empty``
memory (smaller outputs, which may be reused heap memory). Both give the same tensors, per chunk
(``Tokenizer._padded_in_chunks``) and in row ranges (``_padded_in_ranges``, a pair batch)."""

import pytest
import torch

from gputok import Tokenizer
from gputok import tokenizer as tokenizer_module

GARBAGE = -7


@pytest.fixture(scope="module")
def lines(parity_lines):
    return [line for line in parity_lines[11::97] if line.strip()][:400] + ["", "x"]


@pytest.fixture
def dirty_written_outputs(monkeypatch):
    """Outputs whose pad cells the kernel is to write start as garbage (as reused memory may)."""
    real = tokenizer_module._padded_outputs

    def dirty(*args):
        ids, mask, types, offsets, write_types, write_pads = out = real(*args)
        if write_pads:
            for array in (ids, mask, offsets, types) if write_types else (ids, mask, offsets):
                array.fill(GARBAGE)
        return out

    monkeypatch.setattr(tokenizer_module, "_padded_outputs", dirty)


@pytest.mark.parametrize("options", [{}, {"return_offsets": True, "padding_side": "left"},
                                     {"return_token_type_ids": True, "pad_to_multiple_of": 8}])
def test_pad_cells_written_or_left_zero_give_the_same_tensors(bert: Tokenizer, lines, split_small,
                                                              dirty_written_outputs, monkeypatch, options):
    batch = lines * 3
    pairs = lines * 4  # past PADDED_IN_RANGES_FROM tokens: post-processed in one pass, filled in row ranges
    in_ranges = []
    real_ranges = tokenizer_module._padded_in_ranges
    monkeypatch.setattr(tokenizer_module, "_padded_in_ranges", lambda *a: in_ranges.append(1) or real_ranges(*a))
    got = {}
    for fresh in (0, 1 << 60):  # every output fresh zeroed pages; none
        monkeypatch.setattr(tokenizer_module, "FRESH_PAGES_BYTES", fresh)
        got[fresh] = bert(batch, **options), bert(pairs, text_pair=pairs[::-1], **options)
    assert split_small[:2] == [2, 2] and in_ranges  # per chunk (single texts); in row ranges (pairs)
    for zeroed, written in zip(got[0], got[1 << 60]):
        assert zeroed.keys() == written.keys()
        for key in zeroed:
            assert torch.equal(zeroed[key], written[key]), key
            assert not (written[key] == GARBAGE).any(), key
        assert (zeroed["attention_mask"] == 0).any()  # there were pad cells

