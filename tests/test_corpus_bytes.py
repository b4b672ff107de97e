"""RecordReader.batches(as_bytes=True), the path encode_corpus reads: lines and blocks cut on the
bytes, Arrow string/binary columns from their buffers. Its records (decoded), bad-record counts and
errors equal the string path's on messy input; encode_corpus with the tokenizer's template, BOS and
EOS equals encode_batch."""

import random
from pathlib import Path

import numpy as np
import pytest

import gputok
from gputok import assets
from gputok.corpus import BadRecordError, ByteRecords, RecordReader, Source
from gputok.encode_corpus import encode_corpus
from gputok.shards import TokenShards

# line ends, blank lines, lone and doubled \r, ASCII and Unicode whitespace, invalid and cut UTF-8
_PIECES = [b"a", b"b c", b"\n", b"\n", b"\r\n", b"\r", b" ", b"\t", b"\x0b", b"\x1c", b"\xc3\xa9", b"\xe3\x80\x80",
           b"\xc2\xa0", b"\xc2\x85", b"\xff", b"\xe2\x82", b"\n\n", b"\r\r\n", b"\n \t\n"]


def _read(source: Source, as_bytes: bool, **options) -> tuple[list, dict] | str:
    reader = RecordReader(**options)
    try:
        records = []
        for batch in reader.batches(source, as_bytes=as_bytes):
            if as_bytes and isinstance(batch, ByteRecords):
                batch = batch.texts()
            records += batch
    except BadRecordError as e:
        return str(e)
    return records, reader.bad.to_json()


@pytest.mark.parametrize("mode", ["lines", "blocks"])
def test_text_bytes_equal_strings(tmp_path, mode):
    rng = random.Random(0)
    path = tmp_path / "x.txt"
    checked = 0
    for _ in range(400):
        path.write_bytes(b"".join(rng.choice(_PIECES) for _ in range(rng.randrange(40))))
        source = Source("x.txt", "text", path=path)
        for policy in ("replace", "skip", "fail"):
            options = dict(mode=mode, on_bad_record=policy, chunk_bytes=rng.choice([3, 16, 1 << 20]))
            want = _read(source, False, **options)
            assert _read(source, True, **options) == want
            checked += isinstance(want, tuple) and bool(want[0])
    assert checked > 300


def test_arrow_columns_from_buffers(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = ["first", None, "", "é and 中文", "last\n", None, "x" * 100]
    raw = [None if t is None else t.encode() for t in texts] + [b"bro\xc3ken", b"\xff"]
    columns = {
        "string": pa.array(texts, pa.string()),
        "large_string": pa.array(texts, pa.large_string()),
        "binary": pa.array(raw, pa.binary()),
        "large_binary": pa.array(raw, pa.large_binary()),
        "sliced": pa.array(texts, pa.string()).slice(2, 4),
        # a null whose slot still holds bytes (Arrow allows it): they are not the record's
        "null_with_bytes": pa.Array.from_buffers(pa.string(), 2, [pa.py_buffer(np.packbits([1, 0], bitorder="little")),
                                                                  pa.py_buffer(np.array([0, 2, 5], np.int32)),
                                                                  pa.py_buffer(b"okbad")], null_count=1),
    }
    for name, column in columns.items():
        table = pa.table({"text": column})
        pq.write_table(table, tmp_path / f"{name}.parquet", row_group_size=3)
        with pa.ipc.new_file(tmp_path / f"{name}.arrow", table.schema) as w:
            w.write_table(table)
        for suffix, kind in ((".parquet", "parquet"), (".arrow", "arrow")):
            source = Source(name, kind, path=tmp_path / f"{name}{suffix}")
            for policy in ("replace", "skip", "fail"):
                want = _read(source, False, on_bad_record=policy)
                assert _read(source, True, on_bad_record=policy) == want, (name, kind, policy)
    assert _read(Source("b", "arrow", path=tmp_path / "binary.arrow"), True, on_bad_record="skip")[1] == {
        "replaced": {}, "skipped": {"invalid utf-8": 2, "null": 2}}
    datasets = pytest.importorskip("datasets")
    dataset = datasets.concatenate_datasets([datasets.Dataset.from_dict({"text": texts})] * 2)  # chunked columns
    source = Source("<dataset>", "dataset", dataset=dataset)
    assert _read(source, True) == _read(source, False)


@pytest.mark.parametrize("name", ["bert", "mistral"])
def test_template_bos_eos_on_the_byte_path(tmp_path, name):
    tok = (gputok.Tokenizer.from_file(assets.fetch("bert-tokenizer-json")) if name == "bert"
           else gputok.Tokenizer.from_sentencepiece(str(assets.fetch("mistral-sp-model"))))
    long_doc = " ".join(["words"] * 300)  # longer than the bert file's truncation (128): shards never truncate
    docs = ["Hello world.", "中文 and é", "a [MASK] or <s> written in the text", long_doc]
    Path(tmp_path / "c.txt").write_text("\n".join(docs[:2]) + "\n\n" + "\n".join(docs[2:]) + "\n", encoding="utf-8")
    bos, eos = ("[CLS]", "[SEP]") if name == "bert" else ("<s>", "</s>")
    encode_corpus(tmp_path / "c.txt", tok, tmp_path / "o", add_special_tokens=True, prepend_bos=True,
                  append_eos=True, bos_token=bos, eos_token=eos)
    shards = TokenShards(tmp_path / "o")
    tok.no_padding()  # the file's padding and truncation sections are encode_batch defaults, not corpus ones
    tok.no_truncation()
    want = [[tok.token_to_id(bos), *ids, tok.token_to_id(eos)] for ids in tok.encode_batch(docs)]
    assert len(want[3]) > 300
    assert [shards[i].tolist() for i in range(len(shards))] == want
    template = 2 if name == "bert" else 0  # [CLS] ... [SEP]; the SentencePiece model has no template
    assert len(want[0]) == len(tok.encode_batch(docs, add_special_tokens=False)[0]) + 2 + template
