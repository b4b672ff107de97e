"""Unigram on long lines: sentencepiece's ids however long the line, in memory linear in it.

SentencePiece keeps one float32 score for the whole sentence and re-centres it on 0 whenever it
passes +-1e5, so from about 25k words on its choices between near-tied segmentations follow that
arithmetic (kernels/unigram_sentence.py). ``GPUTOK_FULL=1`` adds the 10 MB line.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gputok
from gputok import assets
from test_unigram import trained_model

spm = pytest.importorskip("sentencepiece")
FULL = bool(os.environ.get("GPUTOK_FULL"))
ROOT = Path(__file__).resolve().parent.parent


def english_line(chars: int) -> str:
    """The first lines of the English corpus joined with spaces into one line of ``chars`` characters."""
    with assets.english_corpus(20).open(encoding="utf-8") as f:
        return f.read(chars + 1000).replace("\n", " ")[:chars]


@pytest.fixture(scope="module")
def model_8k():
    path = trained_model(8000)
    return gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)


def test_long_english_line_matches_sentencepiece(model_8k):
    # The first token that differed before: 39,294 ("▁ def ile" for "▁de fil e"), after ~136k characters.
    tok, sp = model_8k
    line = english_line(150_000)
    assert tok.encode(line) == sp.encode(line)


@pytest.mark.parametrize("repeats", [7422, 7423, 22656, 22657, 30080, 30081])
def test_near_tie_after_the_score_is_recentred(model_8k, repeats):
    # "▁ def ile" and "▁de fil e" tie up to float32 rounding; which one SentencePiece picks depends
    # on its running sentence score, which it re-centres on 0 past -1e5 (after 22,657 "▁the"s).
    tok, sp = model_8k
    line = "the " * repeats + "defile"
    assert tok.encode(line)[-3:] == sp.encode(line)[-3:]


def test_long_line_with_unknown_characters_matches_sentencepiece():
    path = str(assets.fetch("sp-test-model"))  # no pieces for much of the kernel docs' punctuation
    tok, sp = gputok.Tokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)
    line = english_line(60_000) + " ☃☃ 漢字 " + english_line(50_000)
    assert tok.encode(line) == sp.encode(line)
    assert tok.encode_batch([line, "short line", ""]) == sp.encode([line, "short line", ""])


_BOUNDED = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {tests!r})
    import gputok, sentencepiece as spm
    from test_unigram import trained_model
    from test_unigram_long_lines import english_line
    path = trained_model(8000)
    tok = gputok.Tokenizer.from_sentencepiece(path)
    line = english_line({chars})
    want = spm.SentencePieceProcessor(model_file=path).encode(line)
    tok.encode(line[:10_000])  # loads the kernels
    with open("/proc/self/status") as f:
        size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + {extra}, size + {extra}))
    got = tok.encode(line)
    print("equal" if got == want else "differ")
""")


def _encode_with_memory_ceiling(chars: int, extra: int) -> subprocess.CompletedProcess:
    code = _BOUNDED.format(tests=str(ROOT / "tests"), chars=chars, extra=extra)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


def test_one_megabyte_line_encodes_within_a_memory_ceiling(model_8k):
    # 600 MB of address space past the warmed-up process for a 1 MB line (it needs ~60 MB;
    # the per-word float32 re-segmentation it replaced needed ~2.2 GB per MB).
    out = _encode_with_memory_ceiling(1_000_000, 600 << 20)
    assert out.returncode == 0 and out.stdout.strip() == "equal", out.stderr[-2000:]


@pytest.mark.skipif(not FULL, reason="GPUTOK_FULL=1: a 10 MB line")
def test_ten_megabyte_line_matches_sentencepiece_within_a_memory_ceiling(model_8k):
    out = _encode_with_memory_ceiling(10_000_000, 2 << 30)
    assert out.returncode == 0 and out.stdout.strip() == "equal", out.stderr[-2000:]
