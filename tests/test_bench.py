"""``gputok bench``: the launch counter of ``--count-launches``, the sentencepiece families, the figure.

No timing is checked: what is checked is what the counter counts (a known number of Triton
launches for forced kernel calls, a sync where ``.item()`` is called), that a counted encode call
gives the ids of an uncounted one, that gputok and sentencepiece give the same tokens in the
benchmark's own workers, and that the JSON and the PNG are written. conftest.py sets
TRITON_INTERPRET=1, as ``--count-launches`` does in its subprocesses.
"""

import json
import struct

import pytest
import torch

from gputok import _dispatch, bench
from gputok.bench_launches import count, count_call
from gputok.hashing import HashMap


def test_counter_counts_each_kernel_launch_not_its_programs_or_the_interpreters_copies():
    from gputok.kernels.hash_lookup import hash_lookup_triton

    keys = torch.arange(0, 3000, 3)
    m = HashMap(keys, keys * 2)
    query = torch.arange(2500)  # 3 programs of 1,024 lanes: one launch
    with count() as counts:
        first = hash_lookup_triton(m.slot_keys, m.slot_values, m.mask, m.max_probes, query)
        hash_lookup_triton(m.slot_keys, m.slot_values, m.mask, m.max_probes, query[:10])
    assert dict(counts.launches) == {"_hash_lookup_kernel": 2}
    # The launcher's own ops (an output buffer per call) count; the interpreter's argument copies do not.
    assert counts.ops["empty_like"] == 2 and sum(counts.ops.values()) <= 4, counts.ops
    assert sum(counts.syncs.values()) == 0, counts.syncs
    assert torch.equal(first, torch.where(query % 3 == 0, query * 2, -1))


def test_counter_counts_host_syncs_and_views_apart():
    t = torch.arange(10)
    with count() as counts:
        (t + 1).sum().item()  # add, sum: ops; item: a sync
        t.nonzero()
        t[t > 3]  # a boolean mask: a nonzero inside
        t.tolist()
        t.cpu()
        t.view(2, 5)
        t[2:5]
    assert counts.syncs == {"_local_scalar_dense": 1, "nonzero": 1, "index": 1, "tolist": 1, "cpu": 1}
    assert counts.ops["add"] == 1 and counts.ops["sum"] == 1 and counts.ops["gt"] == 1
    assert counts.views["view"] == 1 and counts.views["slice"] == 1
    assert "view" not in counts.ops
    # The wrappers are gone after the region: nothing counts any more.
    t.tolist()
    t.sum().item()
    assert sum(counts.syncs.values()) == 5
    assert torch.Tensor.tolist is torch._C.TensorBase.tolist


def test_count_call_on_a_tiny_bert_batch_counts_the_triton_path_and_keeps_its_ids():
    tok = bench.make_tokenizer("bert")
    batch = ["Hello world, a tiny batch.", "Zebras don't tokenize themselves!"]
    result = count_call(tok, batch, warm_up=["warm up the tables"], padding=False)
    assert result["launches_by_kernel"].get("_wordpiece_encode_kernel", 0) >= 1  # gputok.cuda_pipeline
    assert result["triton_launches"] == sum(result["launches_by_kernel"].values())
    assert result["launches"] == result["triton_launches"] + result["torch_ops"]
    assert result["torch_ops"] > 0 and result["torch_view_ops"] > 0
    assert result["host_syncs"] == sum(result["syncs_by_op"].values()) > 0
    with _dispatch.use_backend("triton"):
        with count():
            counted = tok(batch, padding=False)
        plain = tok(batch, padding=False)
    assert torch.equal(counted["input_ids"], plain["input_ids"])
    assert torch.equal(counted["input_ids"], tok(batch, padding=False)["input_ids"])  # the CPU path


def test_count_launches_cli_writes_its_json(tmp_path, capsys):
    out = tmp_path / "launches.json"
    assert bench.main(["--count-launches", "--tokenizer", "bert", "--batch-sizes", "3", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["tokenizer"], r["batch_size"]) for r in rows] == [("bert", 3)]
    assert rows[0]["triton_launches"] >= 1 and rows[0]["host_syncs"] > 0
    assert "syncs" in capsys.readouterr().out


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_sentencepiece_families_run_against_sentencepiece_and_draw_the_figure(tmp_path):
    out = tmp_path / "encode.json"
    rows = bench.run_benchmark(tokenizer="unigram", megabytes=0.003, batch_sizes=(4, 16), threads=1,
                               json_path=str(out))
    assert {(r["engine"], r["batch_size"]) for r in rows} == {
        (e, b) for e in ("gputok", "gputok-ragged", "sentencepiece") for b in (4, 16)}
    tokens = {(r["engine"], r["batch_size"]): r["tokens"] for r in rows}
    for b in (4, 16):  # the same ids count: gputok encodes as sentencepiece, no BOS/EOS
        assert tokens["gputok", b] == tokens["gputok-ragged", b] == tokens["sentencepiece", b] > 0
    saved = json.loads(out.read_text())
    assert saved["tokenizers"] == ["unigram"] and len(saved["rows"]) == 6
    width, height = _png_size(out.with_suffix(".png"))
    assert width > 300 and height > 300
    out.with_suffix(".png").unlink()
    assert bench.main(["--redraw", str(out)]) == 0
    assert _png_size(out.with_suffix(".png")) == (width, height)


def test_mistral_worker_counts_the_tokens_sentencepiece_does():
    ours = bench._worker("gputok-ragged", "mistral", 0.003, [8], 1, "cpu")["results"][0]
    theirs = bench._worker("sentencepiece", "mistral", 0.003, [8], 1, "cpu")["results"][0]
    assert ours["tokens"] == theirs["tokens"] > 0 and ours["lines"] == theirs["lines"]


def test_figure_has_one_panel_per_family(tmp_path):
    rows = [dict(tokenizer=family, engine=engine, batch_size=b, mb_per_s=speed * b ** 0.5)
            for family in ("bert", "unigram") for engine, speed in (("gputok", 2.0), ("huggingface", 1.0))
            for b in (1, 32, 1024)]
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    assert bench.plot(rows[:6], str(one), device="cpu (2 cores)", threads=2, date="2026-11-25")
    assert bench.plot(rows, str(two), device="cpu (2 cores)", threads=2, date="2026-11-25")
    (w1, h1), (w2, h2) = _png_size(one), _png_size(two)
    assert h1 == h2 and w2 > 1.8 * w1  # a panel each, side by side


def test_bench_help_names_every_family_and_the_counter(capsys):
    from gputok.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for word in ("unigram", "mistral", "all", "--count-launches", "sentencepiece", ".png"):
        assert word in text
