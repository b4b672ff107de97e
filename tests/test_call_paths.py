"""``tok(texts)``'s short paths on the CPU give what its general path gives: the one-call path of a
call at the defaults (``Tokenizer._padded_call``, taken when ``padding is True``; ``padding=
"longest"`` means the same and takes the general path) and the padded rows filled per chunk on the
chunk threads (``Tokenizer._padded_in_chunks``) against one chunk."""

import pytest
import torch

from gputok import Tokenizer, _cpu_threads
from gputok import tokenizer as tokenizer_module


@pytest.fixture(scope="module")
def lines(parity_lines):
    english = [line for line in parity_lines[7::301] if line.strip()][:300]
    chinese = [line for line in parity_lines if any("\u4e00" <= c <= "\u9fff" for c in line)][::97][:40]
    return english + chinese + ["", " ", "x"]


def _assert_same(got, expected):
    assert got.keys() == expected.keys()
    for key in got:
        assert torch.equal(got[key], expected[key]), key


@pytest.fixture
def one_call_spy(monkeypatch):
    """The calls ``_padded_call`` answered (not None)."""
    answered = []
    real = Tokenizer._padded_call

    def spy(self, *args):
        out = real(self, *args)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(Tokenizer, "_padded_call", spy)
    return answered


@pytest.mark.parametrize("options", [{}, dict(add_special_tokens=False), dict(return_token_type_ids=False),
                                     dict(return_token_type_ids=True, add_special_tokens=False),
                                     dict(device="cpu")])
def test_the_one_call_path_gives_the_general_paths_tensors(bert, lines, one_call_spy, options):
    for batch in ([lines[0]], lines[:32], lines[-45:], [""], lines[5]):
        one_call_spy.clear()
        got = bert(batch, **options)
        assert one_call_spy == [True]  # it took the one-call path
        _assert_same(got, bert(batch, padding="longest", **options))


def test_left_padding_from_the_file(bert_json_path, lines, one_call_spy):
    tok = Tokenizer.from_file(bert_json_path)
    tok.no_truncation()
    tok.enable_padding(direction="left", pad_id=tok.token_to_id("[PAD]"))
    got = tok(lines[:20])
    assert one_call_spy == [True]
    assert got["attention_mask"][:, -1].all() and not got["attention_mask"][:, 0].all()  # pads first
    _assert_same(got, tok(lines[:20], padding="longest"))


def test_added_tokens_and_large_batches_take_the_general_path(bert, lines, one_call_spy):
    marked = [line + " [MASK]" for line in lines[:10]]
    got = bert(marked)
    assert one_call_spy == [False]
    assert (got["input_ids"] == bert.token_to_id("[MASK]")).sum() == 10
    _assert_same(got, bert(marked, padding="longest"))


@pytest.mark.parametrize("options", [{}, dict(return_offsets=True, padding_side="left"),
                                     dict(truncation=True, max_length=12, pad_to_multiple_of=8),
                                     dict(padding="max_length", max_length=200, return_token_type_ids=True),
                                     dict(add_special_tokens=False, return_offsets=True)])
def test_padded_rows_filled_per_chunk_equal_one_chunk(bert, lines, split_small, options, monkeypatch):
    batch = lines * 3  # ~60k characters: past one call's worth
    # the chunked path of a batch too large for the parts path (tests/test_wordpiece_bpe_parts.py)
    monkeypatch.setattr(tokenizer_module, "PARTS_MAX_CHARS", 0)
    got = bert(batch, **options)
    assert split_small == [2, 2]  # encoded and planned per chunk, then filled per chunk
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_cpu_threads, "MIN_CHUNK_CHARS", 1 << 60)
        expected = bert(batch, **options)
    _assert_same(got, expected)


def test_a_truncation_error_is_raised_from_the_chunks(bert, lines, split_small):
    with pytest.raises(ValueError):
        bert(lines * 3, truncation=True, max_length=1)  # shorter than [CLS] and [SEP]


def test_the_one_call_plan_follows_changed_settings(bert_json_path, lines, one_call_spy):
    """``_padded_call`` keeps what it hands the kernel (``Tokenizer._padded_plan``) from call to
    call: each setting changed after a first call must show in the next call's tensors (and equal
    the general path's, which reads the settings afresh)."""
    tok = Tokenizer.from_file(bert_json_path)
    tok.no_truncation()
    tok.no_padding()
    batch = [lines[0], lines[1][:20], "Hello There"]
    pad, mask_id, unk = (tok.token_to_id(t) for t in ("[PAD]", "[MASK]", "[UNK]"))

    def call(**options):
        one_call_spy.clear()
        got = tok(batch, **options)
        assert one_call_spy == [True]
        _assert_same(got, tok(batch, padding="longest", **options))
        return got

    right = call()
    assert right["attention_mask"][:, 0].all() and not right["attention_mask"][:, -1].all()
    tok.enable_padding(direction="left", pad_id=mask_id, pad_token="[MASK]")
    left = call()
    assert left["attention_mask"][:, -1].all() and not left["attention_mask"][:, 0].all()  # pads first
    assert set(left["input_ids"][left["attention_mask"] == 0].tolist()) == {mask_id}
    tok.pad_token = "[UNK]"  # the pad id follows the pad token
    assert set(call()["input_ids"][left["attention_mask"] == 0].tolist()) == {unk}
    tok.pad_token = "[PAD]"  # (a pad token set by the user outranks the file's pad id)
    tok.enable_padding(pad_id=pad)
    assert torch.equal(call()["input_ids"], right["input_ids"])
    cls = tok.token_to_id("[CLS]")
    assert (call()["input_ids"][:, 0] == cls).all()
    single = tok.post_processor.single
    tok.post_processor.single = single[1:]  # the template replaced: no [CLS]
    assert not (call()["input_ids"][:, 0] == cls).any()
    tok.post_processor.single = single
    post, tok.post_processor = tok.post_processor, None  # no post-processor: no special tokens, no types
    bare = call()
    assert "token_type_ids" not in bare and not (bare["input_ids"][:, 0] == cls).any()
    tok.post_processor = post
    assert torch.equal(call(add_special_tokens=False)["input_ids"], bare["input_ids"])
    lower = call()["input_ids"]
    normalizer, tok.normalizer = tok.normalizer, None  # a stage replaced: "Hello" is no longer lowercased
    assert not torch.equal(call()["input_ids"], lower)
    tok.normalizer = normalizer
    assert torch.equal(call()["input_ids"], lower)
    tok.join_surrogate_pairs = True  # not what the one-call kernel reads: the general path
    one_call_spy.clear()
    tok(batch)
    assert one_call_spy == [False]


def test_the_one_call_path_reads_unigrams_tables_at_each_call(sp_test_model_path, lines, one_call_spy):
    """Unigram's one-call tables hold the calling thread's word store for the word cache of the
    moment, and there are none while the model samples: the plan keeps the kernel, and each call
    reads its tables afresh (a plan that kept the first call's tables shared one store between
    threads, and sampled nothing inside ``model.sampling``)."""
    import threading

    from gputok.word_cache import WordCache

    tok = Tokenizer.from_sentencepiece(sp_test_model_path)
    batch = lines[:8]
    whole = tok._whole_pipeline_kernel
    stores = []
    real = whole.padded_kernel

    def recording(units, lengths, *tables_and_options):
        stores.append(tables_and_options[-12])  # the last table: the calling thread's store (kept alive: ids stay distinct)
        return real(units, lengths, *tables_and_options)

    whole.padded_kernel = recording
    want = tok(batch, padding="longest")
    first = tok(batch)
    _assert_same(first, want)
    tok.word_cache = WordCache()
    _assert_same(tok(batch), want)
    done = []
    worker = threading.Thread(target=lambda: done.append(tok(batch)))
    worker.start()
    worker.join()
    _assert_same(done[0], want)
    assert one_call_spy == [True, True, True] and len({id(store) for store in stores}) == 3  # a store per cache and thread
    one_call_spy.clear()
    with tok.model.sampling(0.1, torch.Generator().manual_seed(0)):
        samples = [tok(["tokenization of unaffable words"] * 8)["input_ids"] for _ in range(3)]
    assert one_call_spy == [False, False, False]
    assert not (torch.equal(samples[0], samples[1]) and torch.equal(samples[1], samples[2]))
