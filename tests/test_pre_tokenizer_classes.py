"""The character-class pre-tokenizers split every codepoint as huggingface does.

Whitespace (Rust's ``regex`` crate ``\\w``), Digits (``char::is_numeric``, Unicode 17), Punctuation,
WhitespaceSplit, BertPreTokenizer and UnicodeScripts each read classes from their own Unicode
tables; one text holding every codepoint between two letters (``a c b``, space-separated) must
give huggingface's pieces, offsets included.
"""

import pytest

from gputok import Tokenizer, ingest
from gputok.unicode import MAX_CODEPOINT

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import models, pre_tokenizers  # noqa: E402

PRE_TOKENIZERS = {
    "Whitespace": pre_tokenizers.Whitespace(),
    "Digits": pre_tokenizers.Digits(individual_digits=True),
    "Digits-runs": pre_tokenizers.Digits(individual_digits=False),
    "Punctuation": pre_tokenizers.Punctuation(),
    "WhitespaceSplit": pre_tokenizers.WhitespaceSplit(),
    "BertPreTokenizer": pre_tokenizers.BertPreTokenizer(),
    "UnicodeScripts": pre_tokenizers.UnicodeScripts(),
}
EVERY_CODEPOINT = " ".join(f"a{chr(c)}b" for c in range(MAX_CODEPOINT) if not 0xD800 <= c < 0xE000)


@pytest.mark.parametrize("name", list(PRE_TOKENIZERS))
def test_every_codepoint_splits_as_huggingface(name):
    reference = tokenizers.Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    reference.pre_tokenizer = PRE_TOKENIZERS[name]
    ours = Tokenizer.from_str(reference.to_str()).pre_tokenizer
    words = ours(ingest.codepoints([EVERY_CODEPOINT]))
    got = list(zip(words.starts.tolist(), words.ends.tolist()))
    want = [span for _, span in PRE_TOKENIZERS[name].pre_tokenize_str(EVERY_CODEPOINT)]
    differ = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    assert got == want, (f"first difference at piece {differ}: ours {got[differ:differ + 1]}, huggingface "
                         f"{want[differ:differ + 1]}, near {EVERY_CODEPOINT[max(0, want[differ][0] - 3):want[differ][0] + 4]!r}"
                         if differ < len(want) else "lengths differ")
