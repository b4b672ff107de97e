"""``gputok encode`` (issue 21): output formats by extension, files with the user's umask, every
tokenizer format, ``--threads`` on every command."""

import os
import shutil

import numpy as np
import pytest

import gputok
from gputok import Tokenizer, _cpu_threads, assets
from gputok.cli import main

LINES = ["Hello, world!", "second line, with more words", "", "日本語 café"]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _encode(corpus, tokenizer, output, *extra):
    return main(["encode", "--quiet", "--tokenizer", str(tokenizer), str(corpus), "-o", str(output), *extra])


def test_unknown_output_extension_is_refused_with_the_known_ones(corpus, tmp_path):
    """Surprise 6: ``-o ids.bin`` quietly wrote text."""
    with pytest.raises(SystemExit, match=r"\.txt .*\.npz .*\.npy .*\.bin"):
        _encode(corpus, assets.fetch("bert-vocab"), tmp_path / "ids.ids")
    assert not (tmp_path / "ids.ids").exists()


@pytest.mark.parametrize("name, dtype", [("bert-vocab", np.uint16), ("cl100k-tiktoken", np.uint32)])
def test_npy_and_bin_hold_the_token_stream(corpus, tmp_path, name, dtype):
    tokenizer = assets.fetch(name)
    tok = Tokenizer.from_vocab(tokenizer) if name == "bert-vocab" else Tokenizer.from_tiktoken(tokenizer, pattern="cl100k")
    want = np.array([i for row in tok.encode_batch(LINES) for i in row])
    _encode(corpus, tokenizer, tmp_path / "ids.npy")
    _encode(corpus, tokenizer, tmp_path / "ids.bin")
    stream = np.load(tmp_path / "ids.npy")
    assert stream.dtype == dtype and np.array_equal(stream, want)
    assert np.array_equal(np.fromfile(tmp_path / "ids.bin", dtype=np.dtype(dtype).newbyteorder("<")), want)
    _encode(corpus, tokenizer, tmp_path / "ids.npz")
    with np.load(tmp_path / "ids.npz") as npz:
        assert np.array_equal(npz["ids"], want) and npz["offsets"][-1] == len(want)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_follow_the_umask(corpus, tmp_path, umask):
    """Surprise 6: outputs were created with mode 0600 whatever the umask."""
    before = os.umask(umask)
    try:
        for name in ("ids.txt", "ids.npz", "ids.npy", "ids.bin"):
            _encode(corpus, assets.fetch("bert-vocab"), tmp_path / name)
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    finally:
        os.umask(before)


def test_every_tokenizer_format(corpus, tmp_path):
    """Surprise 6: ``--tokenizer cl100k_base.tiktoken`` ended in a JSON traceback."""
    cases = {
        "cl100k_base.tiktoken": Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"),
        "test_model.model": Tokenizer.from_sentencepiece(assets.fetch("sp-test-model")),
        "vocab.txt": Tokenizer.from_vocab(assets.fetch("bert-vocab")),
    }
    sources = {"cl100k_base.tiktoken": "cl100k-tiktoken", "test_model.model": "sp-test-model", "vocab.txt": "bert-vocab"}
    for name, tok in cases.items():
        _encode(corpus, assets.fetch(sources[name]), tmp_path / "ids.txt")
        got = [list(map(int, line.split())) for line in (tmp_path / "ids.txt").read_text().splitlines()]
        assert got == tok.encode_batch(LINES), name
    unnamed = tmp_path / "ranks.tiktoken"
    shutil.copy(assets.fetch("gpt2-tiktoken"), unnamed)
    with pytest.raises(SystemExit, match="--pattern"):
        _encode(corpus, unnamed, tmp_path / "ids.txt")
    _encode(corpus, unnamed, tmp_path / "ids.txt", "--pattern", "gpt2")
    gpt2 = Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2")
    assert (tmp_path / "ids.txt").read_text().splitlines()[0] == " ".join(map(str, gpt2.encode(LINES[0])))
    vocab_json = tmp_path / "vocab.json"
    vocab_json.write_text('{"a": 0}', encoding="utf-8")
    with pytest.raises(SystemExit, match="--merges"):
        _encode(corpus, vocab_json, tmp_path / "ids.txt")
    unknown = tmp_path / "tokenizer.bak"
    unknown.write_text("x")
    with pytest.raises(SystemExit, match=r"known: \.json"):
        _encode(corpus, unknown, tmp_path / "o.txt")


def test_threads_option_on_every_command(corpus, tmp_path):
    """Surprise 3: neither ``gputok encode`` nor ``gputok train`` had ``--threads``."""
    try:
        _encode(corpus, assets.fetch("bert-vocab"), tmp_path / "ids.txt", "--threads", "1")
        assert gputok.get_num_threads() == 1
        main(["train", str(corpus), "--vocab-size", "300", "--no-progress", "-o", str(tmp_path / "t.json"),
              "--threads", "3"])
        assert gputok.get_num_threads() == 3
        with pytest.raises(SystemExit):
            main(["encode", "--tokenizer", "x", "y", "-o", "z.txt", "--threads", "0"])
    finally:
        gputok.set_num_threads(None)
    assert _cpu_threads.num_threads() >= 1


def test_every_subcommand_takes_threads(capsys):
    """``--threads`` on every command (bench has its own)."""
    for command in ("encode", "train", "encode-corpus", "extend", "fertility"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--threads" in capsys.readouterr().out, command
