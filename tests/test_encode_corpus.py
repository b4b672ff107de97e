"""encode_corpus / gputok encode-corpus: shards read back through megatron-core and TokenShards equal
``tok.encode_batch``; every input kind; kill-and-resume byte-identical; bad input; ranks."""

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gputok
from gputok import assets
from gputok.corpus import BadRecordError
from gputok.encode_corpus import encode_corpus
from gputok.shards import TokenShards, shard_dtypes

REPO = Path(__file__).resolve().parents[1]
EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2():
    return gputok.Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2", special_tokens={EOS: 50256})


def _head(path: Path, limit: int | None) -> list[str]:
    with open(path, "rb") as f:
        data = f.read() if limit is None else f.read(limit)
    return data[:data.rfind(b"\n")].decode("utf-8").split("\n")


@pytest.fixture(scope="module")
def mixed_docs():
    """~200 kB of the 20 MB English set and ~100 kB of the Chinese kernel docs, one document a line
    (``GPUTOK_FULL=1``: all 20 MB and all 1.6 MB)."""
    full = bool(os.environ.get("GPUTOK_FULL"))
    return (_head(assets.english_corpus(20), None if full else 200_000)
            + _head(assets.corpus("kernel-docs-zh"), None if full else 100_000))


def _write_lines(path: Path, docs: list[str]) -> Path:
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path


def _megatron_documents(folder: Path, manifest: dict) -> list[list[int]]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    out = []
    for shard in manifest["shards"]:
        dataset = IndexedDataset(str(folder / shard["name"]))
        out.extend(dataset[i].tolist() for i in range(len(dataset)))
    return out


def test_round_trip_megatron_and_token_shards(tmp_path, gpt2, mixed_docs):
    pytest.importorskip("megatron.core")
    corpus = _write_lines(tmp_path / "mixed.txt", mixed_docs)
    manifest = encode_corpus([corpus], gpt2, tmp_path / "out", formats=["megatron", "flat"], append_eos=True,
                             shard_documents=1500)
    docs = [d for d in mixed_docs if d]
    expected = [ids + [50256] for ids in gpt2.encode_batch(docs, add_special_tokens=False)]
    assert manifest["documents"] == len(docs) and len(manifest["shards"]) > 2
    assert manifest["tokens"] == sum(map(len, expected))
    assert manifest["dtypes"] == {"megatron": "uint16", "flat": "uint16"}
    assert _megatron_documents(tmp_path / "out", manifest) == expected
    for fmt in ("megatron", "flat"):
        shards = TokenShards(tmp_path / "out", format=fmt, verify=True)
        assert [shards[i].tolist() for i in range(len(shards))] == expected
    flat = np.concatenate([np.array(e) for e in expected])
    samples = TokenShards(tmp_path / "out").samples(64, seed=3)
    assert len(samples) == (flat.size - 1) // 64
    order = samples.order.tolist()
    assert sorted(order) == list(range(len(samples))) and order != sorted(order)
    for j in (0, 5, len(samples) - 1):
        start = order[j] * 64
        assert samples[j]["input_ids"].tolist() == flat[start:start + 64].tolist()
        assert samples[j]["labels"].tolist() == flat[start + 1:start + 65].tolist()


def test_bos_and_special_tokens(tmp_path):
    bert = gputok.Tokenizer.from_vocab(assets.fetch("bert-vocab"))
    docs = ["Hello world", "", "a b c"]
    corpus = _write_lines(tmp_path / "a.txt", docs)
    manifest = encode_corpus(corpus, bert, tmp_path / "o", prepend_bos=True, bos_token="[CLS]", append_eos=True,
                             eos_token="[SEP]")
    assert manifest["empty_documents"] == 1
    got = [TokenShards(tmp_path / "o")[i].tolist() for i in range(2)]
    assert got == bert.encode_batch(["Hello world", "a b c"])  # [CLS] ... [SEP]: the BERT template
    manifest = encode_corpus(corpus, bert, tmp_path / "p", add_special_tokens=True)
    assert [TokenShards(tmp_path / "p")[i].tolist() for i in range(2)] == got
    manifest = encode_corpus(corpus, bert, tmp_path / "q", append_eos=True)  # no <|endoftext|>, </s>: [SEP]
    assert manifest["eos_id"] == bert.token_to_id("[SEP]")
    with pytest.raises(ValueError, match="eos token '</s>' is not in the tokenizer's vocabulary"):
        encode_corpus(corpus, bert, tmp_path / "r", append_eos=True, eos_token="</s>")


def test_input_kinds(tmp_path, gpt2):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    docs = ["first document", "second one, é and 中文", "third\twith tab", "last"]
    expected = gpt2.encode_batch(docs, add_special_tokens=False)
    records = [json.dumps({"id": i, "text": d}) for i, d in enumerate(docs)]
    with gzip.open(tmp_path / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(records) + "\n")
    table = pa.table({"text": docs, "n": list(range(len(docs)))})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=3)
    with pa.ipc.new_stream(tmp_path / "a.arrow", table.schema) as w:
        w.write_table(table)
    (tmp_path / "a.txt").write_bytes("\r\n\n".join(docs).encode() + b"\r\n")  # CRLF, blank-line blocks
    cases = {"a.jsonl.gz": {}, "a.parquet": {}, "a.arrow": {}, "a.txt": {"mode": "blocks"}}
    zstandard = pytest.importorskip("zstandard")
    (tmp_path / "a.zst").write_bytes(zstandard.ZstdCompressor().compress(("\n".join(docs) + "\n").encode()))
    cases["a.zst"] = {}
    for name, options in cases.items():
        encode_corpus(tmp_path / name, gpt2, tmp_path / f"out-{name}", **options)
        shards = TokenShards(tmp_path / f"out-{name}")
        assert [shards[i].tolist() for i in range(len(shards))] == expected, name
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"content": docs}).select([3, 2, 1, 0])
    encode_corpus(dataset, gpt2, tmp_path / "out-ds", text_field="content")
    shards = TokenShards(tmp_path / "out-ds")
    assert [shards[i].tolist() for i in range(len(shards))] == expected[::-1]


# ---- bad input ----------------------------------------------------------------------------

def test_missing_file_and_unreadable_parquet(tmp_path, gpt2):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        encode_corpus([tmp_path / "nope.txt"], gpt2, tmp_path / "o")
    (tmp_path / "bad.parquet").write_bytes(b"this is not parquet at all")
    with pytest.raises(ValueError, match="not a readable Parquet file"):
        encode_corpus([tmp_path / "bad.parquet"], gpt2, tmp_path / "o2")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    with pytest.raises(ValueError, match=r"no column 'text'.*\['body'\]"):
        encode_corpus([tmp_path / "c.parquet"], gpt2, tmp_path / "o3")


@pytest.mark.parametrize("policy", ["replace", "skip", "fail"])
def test_bad_records(tmp_path, gpt2, policy):
    lines = [b'{"text": "good one"}', b'{"txt": "no field"}', b'{"text": "bad \xff byte"}', b'not json',
             b'{"text": 7}', b'{"text": "good two"}']
    (tmp_path / "b.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    if policy == "fail":  # (invalid UTF-8 is found when a block is decoded, before the JSON is parsed)
        (tmp_path / "b.jsonl").write_bytes(b"\n".join(lines[:2]) + b"\n")
        with pytest.raises(BadRecordError, match=r"b.jsonl: record 1 \(line 2\): has no field 'text'"):
            encode_corpus(tmp_path / "b.jsonl", gpt2, tmp_path / "o", on_bad_record="fail")
        return
    manifest = encode_corpus(tmp_path / "b.jsonl", gpt2, tmp_path / "o", on_bad_record=policy)
    counts = {"invalid json": 1, "invalid utf-8": 1, "missing field": 1, "not a string": 1}
    assert manifest["bad_records"] == {"replaced": counts if policy == "replace" else {},
                                       "skipped": counts if policy == "skip" else {}}
    kept = ["good one", "bad \ufffd byte", "good two"] if policy == "replace" else ["good one", "good two"]
    shards = TokenShards(tmp_path / "o")
    assert [shards[i].tolist() for i in range(len(shards))] == gpt2.encode_batch(kept, add_special_tokens=False)


def test_invalid_utf8_text(tmp_path, gpt2):
    (tmp_path / "u.txt").write_bytes(b"ok\nbro\xc3ken\n\xe4\xb8\xadfine\n")
    with pytest.raises(BadRecordError, match=r"u.txt: record 1 \(line 2\): invalid utf-8"):
        encode_corpus(tmp_path / "u.txt", gpt2, tmp_path / "o", on_bad_record="fail")
    manifest = encode_corpus(tmp_path / "u.txt", gpt2, tmp_path / "o2", on_bad_record="skip")
    assert manifest["bad_records"]["skipped"] == {"invalid utf-8": 1} and manifest["documents"] == 2


def test_dtype_too_small(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(97, 123)]
    vocab += [f"w{i}" for i in range(70_000 - len(vocab))]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    big = gputok.Tokenizer.from_vocab(tmp_path / "vocab.txt")
    _write_lines(tmp_path / "a.txt", ["w69000 a"])
    with pytest.raises(ValueError, match="uint16 holds ids below 65536, but this tokenizer has 70000"):
        encode_corpus(tmp_path / "a.txt", big, tmp_path / "o", dtype="uint16")
    with pytest.raises(ValueError, match="no uint32"):
        shard_dtypes(70_000, ["megatron"], "uint32")
    manifest = encode_corpus(tmp_path / "a.txt", big, tmp_path / "o", formats=["megatron", "flat"])
    assert manifest["dtypes"] == {"megatron": "int32", "flat": "uint32"}
    assert TokenShards(tmp_path / "o")[0].tolist() == big.encode("w69000 a", add_special_tokens=False)
    result = _cli(["encode-corpus", str(tmp_path / "a.txt"), "--tokenizer", str(tmp_path / "vocab.txt"),
                   "--out", str(tmp_path / "cli"), "--dtype", "uint16", "--quiet"])
    assert result.returncode != 0 and "uint16 holds ids below 65536" in result.stderr


def test_existing_output_needs_resume(tmp_path, gpt2):
    corpus = _write_lines(tmp_path / "a.txt", ["one", "two"])
    first = encode_corpus(corpus, gpt2, tmp_path / "o")
    with pytest.raises(ValueError, match="already holds a finished"):
        encode_corpus(corpus, gpt2, tmp_path / "o")
    assert encode_corpus(corpus, gpt2, tmp_path / "o", resume=True) == first
    with pytest.raises(ValueError, match="other options"):
        encode_corpus(corpus, gpt2, tmp_path / "o", resume=True, append_eos=True)


# ---- kill and resume ----------------------------------------------------------------------

def _cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "gputok", *args], env=env, capture_output=True, text=True,
                          timeout=600, **kw)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_kill_and_resume_is_byte_identical(tmp_path):
    """The run is SIGKILLed 3 times at random points (after a random number of finished shards
    plus a random delay), resumed each time; the files equal an uninterrupted run's."""
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"".join(Path(assets.english_corpus(20)).open("rb").readlines()[:48000]))
    vocab = str(assets.fetch("bert-vocab"))
    # 480 shards: the kills (each 1-4 shards after the last) land far from the end, which a fast
    # encode reached between two polls with 48 shards (the manifest written before the third kill)
    args = ["encode-corpus", str(corpus), "--tokenizer", vocab, "--append-eos", "--eos-token", "[SEP]",
            "--format", "megatron", "flat", "--shard-documents", "100", "--quiet"]
    whole = _cli([*args, "--out", str(tmp_path / "whole")])
    assert whole.returncode == 0, whole.stderr
    out, rng = tmp_path / "killed", random.Random(19)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    kills, seen = 0, 0
    while kills < 3:
        proc = subprocess.Popen([sys.executable, "-m", "gputok", *args, "--out", str(out),
                                 *(["--resume"] if kills or seen else [])], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        target = seen + rng.randint(1, 4)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            done = len(list((out / ".progress").glob("shard_*.json"))) if (out / ".progress").exists() else 0
            if done >= target:
                time.sleep(rng.uniform(0, 0.05))
                break
            time.sleep(0.02)
        if proc.poll() is not None:  # finished before it could be killed: nothing left to test
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        seen = len(list((out / ".progress").glob("shard_*.json")))
    assert kills == 3, "the run finished before it was killed 3 times; give it more shards"
    assert not (out / "manifest.json").exists()
    resumed = _cli([*args, "--out", str(out), "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert _files(out) == _files(tmp_path / "whole")
