"""A huggingface Unigram tokenizer.json runs in one kernel call on the CPU
(``kernels/hf_unigram_texts_numba.py``, ``gputok._whole_hf_unigram``): the same ids and spans as its
stage path, and as huggingface, for the shapes SentencePiece Unigram models come in (the file
``Tokenizer.save`` writes; transformers' conversion: ``Precompiled``, ``Strip`` right,
``Replace(" {2,}" -> "▁")``, ``Metaspace``; without a charsmap; each Metaspace scheme and split),
on real text, random Unicode and texts huggingface's grapheme-cluster reading of the charsmap
reads otherwise (which the kernel leaves to the stage path)."""

import json
import random

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer

from gputok import Tokenizer, assets, ingest
from gputok.huggingface_precompiled import HuggingfacePrecompiled
from gputok.kernels import hf_unigram_texts_numba
from test_huggingface_precompiled import built_charsmap

EDGE = ["", " ", "  ", "a", " a", "a ", "a  b", "  Hello   world  ", "\n", "\t x \r\n", "▁", "▁▁x ▁", "x\x00y",
        "é中文𝔘\U0001F600", "ｶﾞｷﾞ ㌀ ﬁ", "Vie\u0302\u0323t", "ㄱㅏ", "\u3000x\u3000", "1" * 300, " " * 300,
        "日本語の文章" * 40, "\U000F0000", "㌀ x㍿", "ﬁne … ½", "Ａ１ ① ｈｅｌｌｏ", "x\u00a0y"]
CLUSTERS = ["ｶﾞ", "ｷﾞ", "e\u0302\u0323", "ㄱㅏ", "\r\n", "\x01", "a\u0301", "ﾊﾟ", "\U0001F1EB\U0001F1F7", "①"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """The tokenizer.json gputok writes for the tests' SentencePiece Unigram (nmt_nfkc charsmap)."""
    path = tmp_path_factory.mktemp("hf-unigram") / "tokenizer.json"
    Tokenizer.from_sentencepiece(assets.fetch("sp-test-model")).save(path)
    return json.loads(path.read_text(encoding="utf-8"))


def converted(saved: dict, charsmap: bool = True, scheme: str = "always", split: bool = True) -> dict:
    """The same model as transformers' SpmConverter writes it."""
    spec = json.loads(json.dumps(saved))
    precompiled = [n for n in saved["normalizer"]["normalizers"] if n["type"] == "Precompiled"]
    steps = [{"type": "Strip", "strip_left": False, "strip_right": True},
             {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "▁"}]
    spec["normalizer"] = {"type": "Sequence", "normalizers": (precompiled if charsmap else []) + steps}
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
    return spec


def shapes(saved: dict) -> dict[str, dict]:
    return {"saved": saved, "converted": converted(saved), "no charsmap": converted(saved, charsmap=False),
            "never, unsplit": converted(saved, scheme="never", split=False),
            "first, no charsmap": {**converted(saved, charsmap=False), "normalizer": None,
                                   "pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
                                                     "prepend_scheme": "first", "split": True}}}


def texts_for(parity_lines: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    chars = [*"  ab\tc.,", "\u3000", "\u00e9", "中", "\U0001F600", *CLUSTERS]
    noise = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 20))) for _ in range(200)]
    # random Unicode, without lone surrogates (huggingface refuses them)
    blocks = [(0x20, 0x7E), (0xA0, 0x2FFF), (0x3000, 0xD7FF), (0xE000, 0xFFEF), (0x10000, 0x10FFFF)]
    unicode = ["".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(rng.randint(0, 30))) for _ in range(200)]
    return parity_lines[::400] + EDGE + noise + unicode


def kernel_call(tok: Tokenizer, texts: list[str], with_spans: bool) -> tuple:
    """The kernel itself on the tokenizer's tables and word cache: (ids, token offsets, spans,
    misses, missing, refused)."""
    tables = tok._whole_pipeline_kernel.tables()[1:]  # (after the cache itself)
    return hf_unigram_texts_numba.encode_texts(*ingest.utf32_units(texts), *tables, with_spans)


def stage_path(tok: Tokenizer, texts: list[str], with_spans: bool):
    """The stages one kernel each (the reference), as ``_encode_units`` runs them without the kernel."""
    got = tok._encode_codepoints(ingest.codepoints(texts), with_spans)
    return got.ids.values.tolist(), got.ids.offsets.tolist(), None if got.spans is None else got.spans.tolist()


@pytest.mark.parametrize("shape", ["saved", "converted", "no charsmap", "never, unsplit", "first, no charsmap"])
def test_kernel_equals_the_stage_path_and_huggingface(saved, parity_lines, shape):
    spec = shapes(saved)[shape]
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    texts = texts_for(parity_lines, hash(shape) % 1000)
    plain = [t for t in texts if not kernel_call(tok, [t], False)[5]]  # (the others: the test below)
    assert len(plain) > 0.8 * len(texts)
    distinct = kernel_call(tok, plain, False)[3][0]  # words segmented with the cache empty
    for with_spans in (False, True, True):  # (the cache empty, then filled)
        ids, offsets, spans, misses, missing, refused = kernel_call(tok, plain, with_spans)
        assert not refused and not missing
        assert (ids.tolist(), offsets.tolist(), spans.tolist() if with_spans else None) == stage_path(
            tok, plain, with_spans)
        tok.word_cache.insert_misses(tok.model, misses)
    after = kernel_call(tok, plain, False)[3][0]  # the words too long for the cache
    assert after < distinct and (after < distinct / 20 or not spec["pre_tokenizer"]["split"])
    expected = hf.encode_batch(texts, add_special_tokens=False)
    assert tok.encode_batch(texts) == [e.ids for e in expected]
    out = tok(texts, return_offsets=True, padding=False)
    assert out["offsets"].tolist() == [list(o) for e in expected for o in e.offsets]
    padded = tok(texts, padding=True)
    rows = [row[:int(mask.sum())] for row, mask in zip(padded["input_ids"].tolist(), padded["attention_mask"])]
    assert rows == [e.ids for e in expected]
    for size in (1, 32):  # the one-call path (padded and ragged) at each batch size
        for i in range(0, 96, size):
            batch, want = texts[i:i + size], [e.ids for e in expected[i:i + size]]
            out = tok(batch, padding=True)
            assert [r[:int(m.sum())] for r, m in zip(out["input_ids"].tolist(), out["attention_mask"])] == want
            assert tok(batch, padding=False)["input_ids"].tolist() == [t for row in want for t in row]


def test_clusters_huggingface_reads_otherwise_take_the_stages(saved):
    """A batch holding a text huggingface's grapheme-cluster reading of the charsmap may read
    otherwise is refused by the kernel and encoded by the stages, which rewrite such texts; a
    batch of ASCII is never refused."""
    spec = shapes(saved)["converted"]
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    for cluster in ["ｶﾞ", "ｷﾞ", "e\u0302\u0323", "ㄱㅏ", "\U0001F1EB\U0001F1F7"]:
        texts = ["plain text", f"a{cluster}b", "more"]
        assert kernel_call(tok, texts, False)[5], cluster
        expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        assert tok.encode_batch(texts) == expected
        assert [r[:int(m.sum())] for r, m in zip(tok(texts, padding=True)["input_ids"].tolist(),
                                                tok(texts, padding=True)["attention_mask"])] == expected
    ascii_texts = ["Hello world", "  two  spaces ", ""]
    assert not kernel_call(tok, ascii_texts, False)[5]


def test_refusal_rule_is_huggingface_precompiled_differing(saved, parity_lines):
    """The kernel's check finds a text exactly where ``HuggingfacePrecompiled.differing`` does."""
    spec = shapes(saved)["converted"]
    reading = Tokenizer.from_str(json.dumps(spec)).normalizer.normalizers[0].charsmap.huggingface
    assert isinstance(reading, HuggingfacePrecompiled)
    flags = reading._flags
    crlf = bool((flags[13] | flags[10]) & hf_unigram_texts_numba.KEYED)
    texts = texts_for(parity_lines, 5)
    rng = random.Random(3)
    texts += ["".join(rng.choice(CLUSTERS + ["x", " ", "\u0301", "\uff9e"]) for _ in range(rng.randint(1, 5)))
              for _ in range(500)]
    for text in texts:
        values = np.array([ord(c) for c in text], np.int32)
        offsets = np.array([0, values.size], np.int64)
        assert hf_unigram_texts_numba.huggingface_may_differ(values, offsets, flags, crlf) == bool(
            reading.differing(values, offsets).size), text


def test_other_pipelines_keep_the_stages(saved):
    """A normalizer step the kernel does not run, a scheme that needs the tokenizer's own handling,
    or a SentencePiece-mode model: no kernel."""
    lowercase = converted(saved)
    lowercase["normalizer"]["normalizers"].append({"type": "Lowercase"})
    first = converted(saved, scheme="first")  # Replace(" {2,}") may remove a text's first characters
    for spec in (lowercase, first):
        assert Tokenizer.from_str(json.dumps(spec))._whole_pipeline_kernel is None
    model = Tokenizer.from_sentencepiece(assets.fetch("sp-test-model"))
    assert type(model._whole_pipeline_kernel.encode).__name__ == "function"  # the .model's own kernel
    assert "hf_unigram" not in model._whole_pipeline_kernel.padded_kernel.py_func.__module__


def test_removals_and_line_breaks_in_the_charsmap(saved, tmp_path):
    """A charsmap that removes characters and holds CR and LF (huggingface aligns a removal at a
    text's start, or after an expanding rule, otherwise; CR LF is one cluster): the kernel refuses
    exactly the texts ``differing`` finds, and the tokenizer gives huggingface's ids and offsets."""
    charsmap = built_charsmap(tmp_path, {"\x01": "", "a": "b", "\ufb01": "fi", "\r": "\n", "q": ""})
    spec = converted(saved)
    spec["normalizer"]["normalizers"][0]["precompiled_charsmap"] = charsmap
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    reading = tok.normalizer.normalizers[0].charsmap.huggingface
    assert reading.ascii_may_differ  # (its ASCII rules: the kernel checks ASCII texts too)
    rng = random.Random(11)
    texts = ["".join(rng.choice(["\x01", "a", "\ufb01", "\r", "\n", "q", "x", " ", "\u0301", "é"])
                     for _ in range(rng.randint(0, 6))) for _ in range(400)]
    for text in texts:
        values = np.array([ord(c) for c in text], np.int32)
        offsets = np.array([0, values.size], np.int64)
        refused = kernel_call(tok, [text], False)[5]
        assert refused == bool(reading.differing(values, offsets).size), text
    expected = hf.encode_batch(texts, add_special_tokens=False)
    for size in (1, 7, 400):
        for i in range(0, len(texts), size):
            got = tok(texts[i:i + size], return_offsets=True, padding=False)
            want = expected[i:i + size]
            assert got["input_ids"].tolist() == [t for e in want for t in e.ids]
            assert got["offsets"].tolist() == [list(o) for e in want for o in e.offsets]


def test_threads_workers_and_pickles(saved, parity_lines):
    """One tokenizer called from 8 threads at once (each reading the word cache while others insert
    into it), a pickled copy, and forked DataLoader workers give the single-threaded answers."""
    import pickle
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from torch.utils.data import DataLoader

    from gputok.data import Collate

    spec = json.dumps(shapes(saved)["converted"])
    chunks = [parity_lines[i::997][:300] for i in range(8)]
    reference = Tokenizer.from_str(spec)
    expected = [(reference.encode_batch(c), reference(c, return_offsets=True, padding=False)["offsets"].tolist())
                for c in chunks]
    tok = Tokenizer.from_str(spec)
    start = threading.Barrier(8)

    def work(i: int) -> list:
        start.wait()
        return [(tok.encode_batch(chunks[i]), tok(chunks[i], return_offsets=True, padding=False)["offsets"].tolist())
                for _ in range(3)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        for i, rounds in enumerate(pool.map(work, range(8))):
            assert all(got == expected[i] for got in rounds)
    copy = pickle.loads(pickle.dumps(tok))
    assert copy._whole_pipeline_kernel is not None and copy.encode_batch(chunks[0]) == expected[0][0]
    collate = Collate(tok, max_length=64)
    loader = DataLoader(chunks[1][:64], batch_size=16, num_workers=2, multiprocessing_context="fork",
                        collate_fn=collate)
    for got, i in zip(loader, range(0, 64, 16)):
        want = collate(chunks[1][i:i + 16])
        assert torch.equal(got["input_ids"], want["input_ids"])


def test_no_unk_piece_raises_on_every_path(saved):
    """A model without an unk piece: a character no piece covers raises, as in huggingface, on a
    small batch and on a batch encoded in parts; the words of a batch that raised are not cached
    (they held id -1), so the next call raises too; other texts still encode as huggingface does."""
    spec = converted(saved)
    spec["model"]["unk_id"] = None
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    for texts in (["abc \u2603 def"], ["plain words here and there \u2603 ok"] * 700):
        with pytest.raises(Exception):
            hf.encode_batch(texts, add_special_tokens=False)
        with pytest.raises(ValueError, match="no unk_id"):
            tok.encode_batch(texts)
    with pytest.raises(ValueError, match="no unk_id"):
        tok.encode("x \u2603")
    plain = ["plain words here and there ok"] * 700
    assert tok.encode_batch(plain) == [e.ids for e in hf.encode_batch(plain, add_special_tokens=False)]


def assert_huggingface_on_both_paths(tok: Tokenizer, texts: list[str], expected: list) -> None:
    """``tok``'s ids and offsets of ``texts`` are huggingface's (``expected``: its encodings) on the
    CPU kernels and on the torch path."""
    from gputok import _dispatch

    for backend in ("numba", "torch"):
        with _dispatch.use_backend(backend):
            got = tok(texts, return_offsets=True, padding=False)
        bounds = got["row_offsets"].tolist()
        ids, spans = got["input_ids"].tolist(), [tuple(o) for o in got["offsets"].tolist()]
        assert [ids[a:b] for a, b in zip(bounds, bounds[1:])] == [e.ids for e in expected], backend
        assert [spans[a:b] for a, b in zip(bounds, bounds[1:])] == [e.offsets for e in expected], backend


@pytest.mark.parametrize("scheme,split", [("always", True), ("never", True), ("always", False)])
def test_metaspace_after_whitespace_split(saved, parity_lines, scheme, split):
    """Older T5 and Pegasus files: ``Sequence[WhitespaceSplit, Metaspace]``, each word rewritten by
    the Metaspace as huggingface rewrites each split (a "▁" before every word, pointing at its first
    character): the one-call kernel equals the stages; huggingface's ids and offsets, on the CPU
    kernels and on the torch path; "first" (which asks where the word was in the raw text) is still
    refused at load."""
    spec = converted(saved)
    spec["normalizer"]["normalizers"][1:] = [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]}
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    texts = texts_for(parity_lines, 9) + ["▁a ▁ b▁c", " \t x  y\u3000z ", "a▁▁b"]
    plain = [t for t in texts if not kernel_call(tok, [t], False)[5]]
    for with_spans in (False, True):  # the one-call kernel against the stages
        got = kernel_call(tok, plain, with_spans)
        assert (got[0].tolist(), got[1].tolist(), got[2].tolist() if with_spans else None) == stage_path(
            tok, plain, with_spans)
    expected = hf.encode_batch(texts, add_special_tokens=False)
    assert_huggingface_on_both_paths(tok, texts, expected)
    assert json.loads(json.dumps(tok.to_json()))["pre_tokenizer"] == spec["pre_tokenizer"]
    spec["pre_tokenizer"]["pretokenizers"][1]["prepend_scheme"] = "first"
    with pytest.raises(ValueError, match="last Metaspace"):
        Tokenizer.from_str(json.dumps(spec))


def test_byte_fallback_runs_span_as_huggingface(saved, parity_lines):
    """With byte fallback, huggingface fuses a run of unknown characters into one unk and spells it
    in byte pieces that each span the whole run; gputok's byte pieces of such a run (each character's
    bytes, the same ids) did so on no path: the one-call kernel equals the stages, and huggingface's
    ids and offsets on the CPU kernels and on the torch path."""
    spec = converted(saved)
    vocab = spec["model"]["vocab"]
    vocab += [[f"<0x{byte:02X}>", -30.0] for byte in range(256)]
    spec["model"]["byte_fallback"] = True
    tok, hf = Tokenizer.from_str(json.dumps(spec)), HFTokenizer.from_str(json.dumps(spec))
    rng = random.Random(11)
    rare = ["\U0001F600", "\u2603", "\ua66e", "\U0001D306", "\x00", "\ufeff", "\u0fff", "é", "中"]
    runs = ["".join(rng.choice(rare + [*"ab ."]) for _ in range(rng.randint(1, 14))) for _ in range(300)]
    texts = ["ab😀\x00\ufeffé c", "a😀b é", "😀😀 x ☃ꙮ𝌆y", "☃"] + runs + texts_for(parity_lines, 13)[::3]
    plain = [t for t in texts if not kernel_call(tok, [t], False)[5]]
    got = kernel_call(tok, plain, True)
    assert (got[0].tolist(), got[1].tolist(), got[2].tolist()) == stage_path(tok, plain, True)
    expected = hf.encode_batch(texts, add_special_tokens=False)
    byte_pieces = {hf.token_to_id(f"<0x{byte:02X}>") for byte in range(256)}
    assert sum(len(byte_pieces.intersection(e.ids)) > 0 for e in expected) > 200
    assert_huggingface_on_both_paths(tok, texts, expected)
