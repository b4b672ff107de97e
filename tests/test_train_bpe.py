"""The BPE and WordPiece merge loops against huggingface ``tokenizers``' trainers.

The words are counted here the way huggingface counts them (its own normalizer and pre-tokenizer on
every line of the text, newline included), so both trainers see the same words. Byte-level BPE
(no prefix / suffix) must give the identical vocabulary and ordered merges. With ``</w>`` or ``##``
the reference numbers those forms in hash order, which reorders its tied merges from run to run
(and then even its token set changes between runs: seen here on 1 MB with WordPiece), so char-BPE
and WordPiece are compared with those forms given fixed ids as special tokens in both trainers:
then the vocabulary and the ordered merges must be identical too.
Randomized words (hypothesis, astral and combining characters, long runs) go through huggingface's
BpeTrainer with a whitespace pre-tokenizer. The likelihood score has no reference and is compared
with a brute-force implementation of its documented rule below. ``GPUTOK_FULL=1`` adds the ~100 MB
English set against ``ByteLevelBPETokenizer`` (32000, min_frequency 2).
"""

import collections
import json
import os
import time
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import (BertWordPieceTokenizer, ByteLevelBPETokenizer, CharBPETokenizer, Tokenizer, models,
                        pre_tokenizers, trainers)

from gputok import assets
from gputok.ragged import Ragged
from gputok.trainers import TrainStats, learn_bpe, learn_wordpiece

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _ragged(word_counts: dict[str, int]) -> tuple[Ragged, torch.Tensor]:
    words = list(word_counts)
    values = torch.tensor([ord(c) for w in words for c in w], dtype=torch.int64)
    ragged = Ragged.from_lengths(values, torch.tensor([len(w) for w in words], dtype=torch.int64))
    return ragged, torch.tensor([word_counts[w] for w in words], dtype=torch.int64)


def _hf_words(hf, lines) -> collections.Counter:
    """Words as huggingface's trainer counts them: its normalizer, then its pre-tokenizer, per line."""
    normalizer, pre_tokenizer = hf._tokenizer.normalizer, hf._tokenizer.pre_tokenizer
    counter = collections.Counter()
    for line in lines:
        text = normalizer.normalize_str(line) if normalizer else line
        counter.update(w for w, _ in pre_tokenizer.pre_tokenize_str(text))
    return counter


def _hf_vocab(hf) -> dict[str, int]:
    return hf._tokenizer.get_vocab(with_added_tokens=False)


def _hf_merges(hf) -> list[tuple[str, str]]:
    merges = json.loads(hf._tokenizer.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


@pytest.fixture(scope="module")
def lines():
    """1 MB of the English set, one string per line with its newline (huggingface feeds lines so)."""
    return assets.english_corpus(1).read_text(encoding="utf-8").splitlines(keepends=True)


def test_byte_level_bpe_same_vocab_and_ordered_merges(lines):
    hf = ByteLevelBPETokenizer()
    hf.train_from_iterator(lines, vocab_size=8000, min_frequency=2, show_progress=False)
    words, counts = _ragged(_hf_words(hf, lines))
    stats = TrainStats()
    vocab, merges = learn_bpe(words, counts, vocab_size=8000, min_frequency=2,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), progress=False,
                              stats=stats)
    hf_merges = _hf_merges(hf)
    assert len(merges) > 7000
    assert merges == hf_merges
    assert vocab == _hf_vocab(hf)
    assert stats.merges == len(merges) and stats.stopped_by == "vocab_size" and stats.merge_seconds > 0


def test_char_bpe_same_vocab_and_merges(lines):
    # the reference numbers the "x</w>" forms in hash order and breaks ties by those ids, so its
    # runs differ among themselves; given as special tokens the forms get fixed ids in both trainers
    hf = CharBPETokenizer()
    word_counts = _hf_words(hf, lines)
    assert len({c for w in word_counts for c in w}) < 1000  # limit_alphabet=1000 drops nothing here
    specials = ["<unk>"] + sorted({w[-1] + "</w>" for w in word_counts})
    hf.train_from_iterator(lines, vocab_size=6000, min_frequency=2, special_tokens=specials,
                           show_progress=False)
    vocab, merges = learn_bpe(*_ragged(word_counts), vocab_size=6000, min_frequency=2,
                              special_tokens=specials, limit_alphabet=1000, end_of_word_suffix="</w>",
                              progress=False)
    assert merges == _hf_merges(hf) and len(merges) > 5000
    assert vocab == _hf_vocab(hf)


def test_char_bpe_forms_sorted_after_the_alphabet(lines):
    word_counts = collections.Counter(w for line in lines[:2000] for w in line.split())
    vocab, merges = learn_bpe(*_ragged(word_counts), vocab_size=500, special_tokens=["<unk>"],
                              end_of_word_suffix="</w>", progress=False)
    alphabet = sorted({c for w in word_counts for c in w}, key=ord)
    forms = sorted({w[-1] + "</w>" for w in word_counts})
    assert list(vocab)[:1 + len(alphabet) + len(forms)] == ["<unk>"] + alphabet + forms
    assert all(b.endswith("</w>") or not a.endswith("</w>") for a, b in merges)


def test_bert_wordpiece_same_vocab(lines):
    # as above: the "##x" forms get fixed ids through special_tokens in both trainers
    hf = BertWordPieceTokenizer(lowercase=True)
    word_counts = _hf_words(hf, lines)
    specials = BERT_SPECIALS + sorted({"##" + c for w in word_counts for c in w[1:]})
    hf.train_from_iterator(lines, vocab_size=5000, min_frequency=3, special_tokens=specials,
                           show_progress=False)
    vocab = learn_wordpiece(*_ragged(word_counts), vocab_size=5000, min_frequency=3, special_tokens=specials,
                            limit_alphabet=1000, progress=False)
    assert vocab == _hf_vocab(hf) and len(vocab) == 5000
    assert "##ing" in vocab and all(not t.startswith("####") for t in vocab)


def test_limits_and_initial_alphabet_match(lines):
    hf = ByteLevelBPETokenizer()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=5, limit_alphabet=60,
                                  initial_alphabet=["€", "ö", "Ω"], max_token_length=5,
                                  special_tokens=["<s>", "</s>"], show_progress=False)
    hf._tokenizer.train_from_iterator(lines, trainer=trainer)
    words, counts = _ragged(_hf_words(hf, lines))
    vocab, merges = learn_bpe(words, counts, vocab_size=3000, min_frequency=5, limit_alphabet=60,
                              initial_alphabet=["€", "ö", "Ω"], max_token_length=5,
                              special_tokens=["<s>", "</s>"], progress=False)
    assert merges == _hf_merges(hf)
    assert vocab == _hf_vocab(hf)
    assert max(len(t) for t in vocab) == 4  # the reference keeps merges strictly shorter than 5


def _hf_bpe(word_counts, **options):
    """huggingface's BpeTrainer on exactly these words: each written ``count`` times, split on spaces."""
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(show_progress=False, **options)
    hf.train_from_iterator([" ".join([w] * c) for w, c in word_counts.items()], trainer=trainer)
    model = json.loads(hf.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return model["vocab"], merges


def test_overlapping_pairs_and_runs_match_reference():
    word_counts = {"aaaa": 3, "aaaaa": 2, "aaa": 1, "ab": 4, "1111111": 5, "11": 2, "ĠĠĠĠĠĠĠĠ": 7,
                   "ĠĠĠx": 2, "xĠĠĠĠĠ": 1, "abababa": 2, "0000000000": 1}
    words, counts = _ragged(word_counts)
    for options in ({"vocab_size": 40}, {"vocab_size": 40, "min_frequency": 3}):
        expected = _hf_bpe(word_counts, **options)
        assert learn_bpe(words, counts, progress=False, **options) == expected


def test_overlapping_windows_count_and_merge_left_to_right():
    words, counts = _ragged({"aaaa": 1})
    stats = TrainStats()
    vocab, merges = learn_bpe(words, counts, vocab_size=10, progress=False, stats=stats)
    # (a, a) is counted 3 times and merged as "aa aa"; then (aa, aa) once
    assert merges == [("a", "a"), ("aa", "aa")]
    assert vocab == {"a": 0, "aa": 1, "aaaa": 2} and stats.stopped_by == "no pairs"
    words, counts = _ragged({"aaa": 1, "ab": 2})
    # (a, a) = 2 ties with (a, b) = 2: the smaller pair of ids, (a, a) = (0, 0), goes first
    assert learn_bpe(words, counts, vocab_size=10, progress=False)[1] == [("a", "a"), ("a", "b"), ("aa", "a")]


unicode_words = st.text(alphabet=st.sampled_from("aab1é中𝄞\u0301ĠĠ"), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(word_counts=st.dictionaries(unicode_words, st.integers(1, 6), min_size=1, max_size=25),
       vocab_size=st.integers(8, 80), min_frequency=st.sampled_from([0, 2, 5]),
       max_token_length=st.sampled_from([None, 2, 3, 5]))
def test_random_words_match_reference(word_counts, vocab_size, min_frequency, max_token_length):
    options = dict(vocab_size=vocab_size, min_frequency=min_frequency, max_token_length=max_token_length)
    words, counts = _ragged(word_counts)
    alphabet = len(set("".join(word_counts)))
    if vocab_size < alphabet:
        with pytest.raises(ValueError, match=f"vocab_size={vocab_size} is smaller than the {alphabet} tokens"):
            learn_bpe(words, counts, progress=False, **options)
        return
    assert learn_bpe(words, counts, progress=False, **options) == _hf_bpe(word_counts, **options)


@settings(max_examples=40, deadline=None)
@given(word_counts=st.dictionaries(st.text(alphabet=st.sampled_from("aabc"), min_size=1, max_size=12),
                                   st.integers(1, 6), min_size=1, max_size=25),
       specials=st.lists(st.text(alphabet=st.sampled_from("abc"), min_size=1, max_size=4), max_size=4),
       vocab_size=st.integers(4, 60))
def test_merges_onto_existing_tokens_match_reference(word_counts, specials, vocab_size):
    # a special token spelled like a merge makes that merge produce an existing token, whose new
    # pairs may then exist already (the path ``fresh`` false in the trainer)
    words, counts = _ragged(word_counts)
    hf_vocab, hf_merges = _hf_bpe(word_counts, vocab_size=vocab_size, special_tokens=specials)
    try:
        vocab, merges = learn_bpe(words, counts, vocab_size=vocab_size, special_tokens=specials, progress=False)
    except ValueError as error:
        assert "is smaller than the" in str(error)
        assert len(hf_vocab) > vocab_size and hf_merges == []  # the reference overshoots instead
        return
    assert (vocab, merges) == (hf_vocab, hf_merges)


def test_counts_above_2_31_give_the_same_merges(lines):
    word_counts = collections.Counter(w for line in lines[:3000] for w in line.split())
    words, counts = _ragged(word_counts)
    small = learn_bpe(words, counts, vocab_size=2000, min_frequency=3, progress=False)
    big = learn_bpe(words, counts << 32, vocab_size=2000, min_frequency=3 << 32, progress=False)
    assert big == small and len(small[1]) > 1000
    # one word alone above 2**31 (the reference's i32 pair counts wrap there)
    huge = dict(word_counts, zzzzzz=3 << 31)
    vocab, merges = learn_bpe(*_ragged(huge), vocab_size=2000, progress=False)
    assert merges[:2] == [("z", "z"), ("zz", "zz")]


def test_min_frequency_stops_the_loop(lines):
    word_counts = collections.Counter(w for line in lines[:2000] for w in line.split())
    stats = TrainStats()
    vocab, merges = learn_bpe(*_ragged(word_counts), vocab_size=100000, min_frequency=40, progress=False,
                              stats=stats)
    assert stats.stopped_by == "min_frequency" and 0 < len(merges) < 100000
    assert (vocab, merges) == _hf_bpe(word_counts, vocab_size=100000, min_frequency=40)


def test_vocab_size_below_the_alphabet_is_an_error():
    words, counts = _ragged({"abcdefghij": 3, "klmno": 1})
    with pytest.raises(ValueError, match=r"vocab_size=10 is smaller than the 17 tokens .*2 special tokens, "
                                         r"15 alphabet"):
        learn_bpe(words, counts, vocab_size=10, special_tokens=["<s>", "</s>"], progress=False)
    # the reference returns the whole alphabet then, larger than asked
    hf_vocab, hf_merges = _hf_bpe({"abcdefghij": 3, "klmno": 1}, vocab_size=10)
    assert len(hf_vocab) == 15 and hf_merges == []
    # exactly the alphabet: no merge, no error
    assert learn_bpe(words, counts, vocab_size=15, progress=False)[1] == []


def test_bad_arguments_are_named():
    words, counts = _ragged({"ab": 1})
    with pytest.raises(ValueError, match="score='unigram' is not one of"):
        learn_wordpiece(words, counts, vocab_size=10, score="unigram", progress=False)
    with pytest.raises(ValueError, match="counts has 2 entries for 1 words"):
        learn_bpe(words, torch.tensor([1, 2]), vocab_size=10, progress=False)
    with pytest.raises(ValueError, match="min_frequency=-1 must be an integer >= 0"):
        learn_bpe(words, counts, vocab_size=10, min_frequency=-1, progress=False)
    empty = learn_bpe(*_ragged({}), vocab_size=5, special_tokens=["<s>"], progress=False)
    assert empty == ({"<s>": 0}, [])


def _likelihood_oracle(word_counts, vocab_size, prefix="##"):
    """The likelihood rule written out per word: the highest count(ab) / (count(a) * count(b)),
    ties to the higher count(ab), then to the smaller pair of ids; never a pair counted 0."""
    alphabet = sorted({c for w in word_counts for c in w}, key=ord)
    tokens = alphabet + sorted({prefix + c for w in word_counts for c in w[1:]})
    ids = {t: i for i, t in enumerate(tokens)}
    words = {w: [w[0]] + [prefix + c for c in w[1:]] for w in word_counts}
    while len(tokens) < vocab_size:
        freq, pairs = collections.Counter(), collections.Counter()
        for w, symbols in words.items():
            for s in symbols:
                freq[s] += word_counts[w]
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += word_counts[w]
        if not pairs:
            break
        a, b = max(pairs, key=lambda p: (Fraction(pairs[p], freq[p[0]] * freq[p[1]]), pairs[p],
                                         -ids[p[0]], -ids[p[1]]))
        merged = a + b.removeprefix(prefix)
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        for w, symbols in words.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == (a, b):
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[w] = out
    return ids


def test_likelihood_score_worked_example():
    word_counts = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
    vocab = learn_wordpiece(*_ragged(word_counts), vocab_size=20, score="likelihood", progress=False)
    learned = [t for t, i in sorted(vocab.items(), key=lambda x: x[1]) if i >= 11]
    # ##gs scores 5 / (20 * 5) = 1/20 against 1/36 for every other pair; then all tie at 1/36 and the
    # higher count wins (p ##u: 17); then h ##u, b ##u and ##u ##gs tie at 1/19, h ##u has the count
    assert learned[:3] == ["##gs", "pu", "hu"]
    assert vocab == _likelihood_oracle(word_counts, 20)
    frequency = learn_wordpiece(*_ragged(word_counts), vocab_size=12, progress=False)
    assert max(frequency, key=frequency.get) == "##ug"  # the frequency score merges ##u ##g (20) first


@settings(max_examples=30, deadline=None)
@given(word_counts=st.dictionaries(st.text(alphabet=st.sampled_from("abcé中"), min_size=1, max_size=8),
                                   st.integers(1, 9), min_size=1, max_size=15),
       extra=st.integers(0, 30))
def test_likelihood_score_matches_its_rule(word_counts, extra):
    alphabet = {c for w in word_counts for c in w}
    forms = {"##" + c for w in word_counts for c in w[1:]}
    vocab_size = len(alphabet) + len(forms) + extra
    vocab = learn_wordpiece(*_ragged(word_counts), vocab_size=vocab_size, score="likelihood", progress=False)
    assert vocab == _likelihood_oracle(word_counts, vocab_size)


@pytest.mark.skipif(not os.environ.get("GPUTOK_FULL"), reason="the ~100 MB English set: set GPUTOK_FULL=1")
def test_full_english_set_byte_level_bpe():
    path = assets.english_corpus(None)
    hf = ByteLevelBPETokenizer()
    started = time.perf_counter()
    hf.train([str(path)], vocab_size=32000, min_frequency=2, show_progress=False)
    hf_seconds = time.perf_counter() - started
    with open(path, encoding="utf-8", newline="") as f:
        word_counts = _hf_words(hf, f)
    stats = TrainStats()
    vocab, merges = learn_bpe(*_ragged(word_counts), vocab_size=32000, min_frequency=2,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), progress=False, stats=stats)
    hf_merges = _hf_merges(hf)
    mismatches = sum(a != b for a, b in zip(merges, hf_merges)) + abs(len(merges) - len(hf_merges))
    print(f"\n100 MB byte-level BPE: {len(merges)} merges, {mismatches} positions differ from huggingface; "
          f"setup {stats.setup_seconds:.1f} s, merge loop {stats.merge_seconds:.1f} s; "
          f"huggingface train (counting included) {hf_seconds:.1f} s")
    assert mismatches == 0
    assert vocab == _hf_vocab(hf)
