"""``torchrun --nproc-per-node 2`` (gloo): encode-corpus and train give the files of one process.
Skipped only where torchrun cannot start a 2-process gloo group here."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputok import assets

REPO = Path(__file__).resolve().parents[1]
_PROBE = "import torch.distributed as d; d.init_process_group('gloo'); d.barrier(); d.destroy_process_group()"


def _run(args, cwd, launcher, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.run([*launcher, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    exe = shutil.which("torchrun")
    if exe is None:
        pytest.skip("torchrun is not installed")
    launcher = [exe, "--standalone", "--nproc-per-node", "2"]  # a free port of its own
    probe = tmp_path_factory.mktemp("probe") / "probe.py"
    probe.write_text(_PROBE)
    try:
        result = _run([str(probe)], probe.parent, launcher, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("torchrun could not start a 2-process gloo group here in 120 s")
    if result.returncode != 0:
        pytest.skip(f"torchrun cannot start a 2-process gloo group here: {result.stderr[-500:]}")
    return launcher


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    with open(assets.english_corpus(20), "rb") as f:
        data = f.read(300_000)
    path.write_bytes(data[:data.rfind(b"\n") + 1])
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_encode_corpus_two_ranks_equal_one_process(tmp_path, torchrun, corpus):
    args = ["-m", "gputok", "encode-corpus", str(corpus), "--tokenizer", str(assets.fetch("bert-vocab")),
            "--append-eos", "--format", "megatron", "flat", "--shard-documents", "1500", "--quiet"]
    two = _run([*args, "--out", str(tmp_path / "two")], tmp_path, torchrun)
    assert two.returncode == 0, two.stderr[-2000:]
    one = _run([*args, "--out", str(tmp_path / "one")], tmp_path, [sys.executable])
    assert one.returncode == 0, one.stderr[-2000:]
    assert len(_files(tmp_path / "one")) > 5 and _files(tmp_path / "two") == _files(tmp_path / "one")


@pytest.mark.parametrize("preset", ["byte-level-bpe"] + (["bert-wordpiece"] if os.environ.get("GPUTOK_FULL") else []))
def test_train_two_ranks_equal_one_process(tmp_path, torchrun, corpus, preset):
    args = ["-m", "gputok", "train", str(corpus), "--preset", preset, "--vocab-size", "800", "--no-progress"]
    two = _run([*args, "-o", str(tmp_path / "two.json")], tmp_path, torchrun)
    assert two.returncode == 0, two.stderr[-2000:]
    one = _run([*args, "-o", str(tmp_path / "one.json")], tmp_path, [sys.executable])
    assert one.returncode == 0, one.stderr[-2000:]
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
