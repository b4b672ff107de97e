"""The per-codepoint normalizers map every codepoint as huggingface does.

Lowercase (Rust's ``to_lowercase``), StripAccents (an older Unicode's mark table), Nmt, Strip and
BertNormalizer's steps each read their own Unicode tables; one text holding every codepoint
between two letters must normalize to huggingface's string. (NFC / NFD / NFKC / NFKD:
tests/test_nf_forms.py.)
"""

import pytest

from gputok import Tokenizer, ingest
from gputok.unicode import MAX_CODEPOINT

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import models, normalizers  # noqa: E402

NORMALIZERS = {
    "Lowercase": normalizers.Lowercase(),
    "StripAccents": normalizers.StripAccents(),
    "NFD+StripAccents": normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()]),
    "Nmt": normalizers.Nmt(),
    "Strip": normalizers.Strip(),
    "BertNormalizer": normalizers.BertNormalizer(),
    "BertNormalizer-cased": normalizers.BertNormalizer(lowercase=False, strip_accents=True),
}
EVERY_CODEPOINT = " ".join(f"a{chr(c)}b" for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000)


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_every_codepoint_normalizes_as_huggingface(name):
    reference = tokenizers.Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    reference.normalizer = NORMALIZERS[name]
    out, _ = Tokenizer.from_str(reference.to_str()).normalizer(ingest.codepoints([EVERY_CODEPOINT]))
    got, want = ingest.strings(out)[0], NORMALIZERS[name].normalize_str(EVERY_CODEPOINT)
    differ = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    assert got == want, f"first difference at {differ}: ours {got[differ - 3:differ + 3]!r}, huggingface {want[differ - 3:differ + 3]!r}"
