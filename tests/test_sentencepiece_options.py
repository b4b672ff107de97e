"""SentencePiece models trained by sentencepiece itself with each option that changes encoding.

For Unigram and BPE: the trainer options (split_digits, split_by_unicode_script, split_by_number,
split_by_whitespace, treat_whitespace_as_suffix, allow_whitespace_only_pieces, add_dummy_prefix
off, remove_extra_whitespaces off), user-defined and control pieces, byte fallback, and unused
pieces (marked in a trained model's file). Each model is trained once per session on ASSETS
text (small and fast) and must give sentencepiece's ids, 0 mismatches, on a slice of the parity
corpus (all of it with ``GPUTOK_FULL=1``), hand-picked edge cases and random Unicode; decode too.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random

import pytest

from gputok import Tokenizer
from gputok.sentencepiece_model import UNUSED, USER_DEFINED, read_model, write_model

spm = pytest.importorskip("sentencepiece")

OPTIONS = {
    "base": {},
    "split_digits": {"split_digits": True},
    "no_split_by_unicode_script": {"split_by_unicode_script": False},
    "no_split_by_number": {"split_by_number": False},
    "no_split_by_whitespace": {"split_by_whitespace": False},
    "treat_whitespace_as_suffix": {"treat_whitespace_as_suffix": True},
    # a text of "▁" (not a space under identity, dropped at the end) gets the suffix back
    "treat_whitespace_as_suffix_identity": {"treat_whitespace_as_suffix": True, "normalization_rule_name": "identity"},
    "allow_whitespace_only_pieces": {"allow_whitespace_only_pieces": True, "remove_extra_whitespaces": False},
    "no_add_dummy_prefix": {"add_dummy_prefix": False},
    "no_remove_extra_whitespaces": {"remove_extra_whitespaces": False},
    # "▁the▁" crosses words; "12" cuts digit runs; "<ctrl>" is a control piece (never matched in text)
    "user_defined_and_control": {"user_defined_symbols": ["<tool>", "foo", "▁the▁", "12"], "control_symbols": ["<ctrl>"]},
    "byte_fallback": {"byte_fallback": True},
}
# User pieces the normalizer would change if it did not copy them as written: characters nmt_nfkc
# rewrites (full-width letters, a ligature, '▁' -> space, a combining sequence, U+3000), spaces
# (kept inside, squeezed around), "  " (a unit of two spaces keeps both after a non-space).
RAW_PIECES = ["ＡＢ", "ﬁx", "▁the▁", "a▁b", "<sep>", "x  y", " of", "中文", "é▁", "e\u0301x", "x\u0301", "\u3000z", "ᄀ"]
USER_PIECE_OPTIONS = {
    "default": {}, "identity": {"normalization_rule_name": "identity"},
    "no_remove_extra_whitespaces": {"remove_extra_whitespaces": False}, "no_add_dummy_prefix": {"add_dummy_prefix": False},
    # a text of spaces with the piece "  " in it gets the suffix, though nothing else is kept
    "treat_whitespace_as_suffix": {"treat_whitespace_as_suffix": True},
    "treat_whitespace_as_suffix_keep_spaces": {"treat_whitespace_as_suffix": True, "remove_extra_whitespaces": False},
}
for _name, _options in USER_PIECE_OPTIONS.items():
    OPTIONS[f"raw_user_pieces_{_name}"] = {"user_defined_symbols": RAW_PIECES + ["  "], **_options}
MODEL_TYPES = ("unigram", "bpe")
EDGE_CASES = ["", " ", "  hello   world  ", "foo<tool>bar 12345 <ctrl> the x", "\t a\u3000b  \n", "1234567890 12 112",
              "in the regulation of the cell", "don't  stop ▁ now", "中文字符 和 English", "e\u0301 \u00e9 ﬁ ①",
              "the the the▁the", "\U0001F600 emoji \U0001F600\U0001F600",
              "ＡＢ ＡＢＣ xＡＢ", "ﬁx ﬁxed ﬁ x", "the▁the▁ ▁the▁", "a ▁ ▁b a▁b", "x  y x y x   y  ", "of  of of",
              "moniker.  And  x", "e\u0301x ex\u0301 e\u0301\u0301x", "\u3000z z\u3000\u3000z", "ᄀ\u1161 ᄀ",
              # texts the normalizer empties: of spaces (only one-space units: no dummy), or with a
              # character nmt_nfkc deletes (U+0001) or a user piece "  " (the dummy suffix is written)
              "   ", "\u3000 \t", "\x01", " \x01 ", "\x01\x02", "  \x01", "\u3000  ", " \u3000  \t", "  ", "\t\t", "▁", " ▁ ", "▁▁"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory, parity_lines):
    """{(model_type, option): path of a .model trained by sentencepiece}, trained on first use."""
    folder = tmp_path_factory.mktemp("sentencepiece-options")
    text = [line for line in parity_lines[::40] if line.strip()][:6000]
    paths: dict[tuple[str, str], str] = {}

    def get(model_type: str, option: str) -> str:
        if (model_type, option) not in paths:
            prefix = str(folder / f"{model_type}-{option}")
            spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_prefix=prefix, model_type=model_type,
                                           vocab_size=1500, character_coverage=0.9995, minloglevel=2,
                                           num_threads=1, **OPTIONS[option])
            paths[model_type, option] = prefix + ".model"
        return paths[model_type, option]

    return get


@pytest.fixture(scope="session")
def texts(parity_lines):
    full = os.environ.get("GPUTOK_FULL")
    real = parity_lines if full else parity_lines[1::150]
    rng = random.Random(18)
    pool = [(0x20, 0x7F), (0xA0, 0x2000), (0x2000, 0x2BFF), (0x3000, 0x3100), (0x4E00, 0x4F00), (0x1F600, 0x1F650)]
    randoms = []
    for _ in range(400):
        chars = []
        for _ in range(rng.randrange(0, 40)):
            lo, hi = rng.choice(pool)
            chars.append(" " if rng.random() < 0.2 else chr(rng.randrange(lo, hi)))
        randoms.append("".join(chars))
    return real + EDGE_CASES + randoms


def assert_parity(path: str, texts: list[str]) -> None:
    sp = spm.SentencePieceProcessor(model_file=path)
    tok = Tokenizer.from_sentencepiece(path)
    ours, theirs = tok.encode_batch(texts), sp.encode(texts)
    bad = [i for i in range(len(texts)) if ours[i] != theirs[i]]
    print(f"\n{os.path.basename(path)}: {len(texts)} texts, {len(bad)} mismatched")
    assert not bad, [(texts[i][:80], [tok.id_to_token(t) for t in ours[i][:12]], [sp.id_to_piece(t) for t in theirs[i][:12]])
                     for i in bad[:3]]
    sample = [t for t in texts[:2000] if "\ufffd" not in t]
    assert [tok.decode(ids) for ids in ours[:len(sample)]] == sp.decode(theirs[:len(sample)])


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_trained_with_option(trained, texts, model_type, option):
    assert_parity(trained(model_type, option), texts)


@pytest.fixture(scope="module")
def piece_texts(parity_lines):
    """Texts made of the user pieces, their parts and their neighbours (spaces, combining marks,
    what the charsmap rewrites), and real words, in random order."""
    rng = random.Random(5)
    parts = RAW_PIECES + ["  ", "e", "x", " ", "  ", "\u0301", "ＡＢＣ", "the", "▁", "\t", "\u3000", "中", "文", "ﬁ", "a",
                          "b", "ｶﾞ", "ᄀ\u1161", "①", "of"]
    words = " ".join(parity_lines[::997]).split()
    return ["".join(rng.choice(parts if rng.random() < 0.8 else words) for _ in range(rng.randrange(0, 12)))
            for _ in range(1500)]


@pytest.mark.parametrize("option", USER_PIECE_OPTIONS)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_user_pieces_written_in_the_text_are_copied_as_they_are(trained, piece_texts, model_type, option):
    """sentencepiece's normalizer takes a user piece written in the raw text whole and unchanged
    (``NormalizePrefix`` looks user pieces up before the charsmap), e.g. "ＡＢ" stays full-width
    and is the user piece, "x  y" keeps its two spaces."""
    path = trained(model_type, f"raw_user_pieces_{option}")
    assert_parity(path, piece_texts)
    sp = spm.SentencePieceProcessor(model_file=path)
    if option == "default":
        assert sp.piece_to_id("ＡＢ") in sp.encode("xＡＢ")  # the case itself (nmt_nfkc would make it "AB")
        assert "▁▁" in sp.normalize("x  y")


def test_whole_kernel_kept_where_the_normalizer_keeps_every_user_piece(trained, tmp_path):
    """Pieces the normalizer leaves as they are wherever they stand ("12", "<tool>|"; not "<tool>",
    whose '>' a following U+0338 makes '≯') need no copying: the tokenizer keeps SentencePiece's
    plain normalizer and the whole-text kernel; "▁the▁" (nmt_nfkc makes '▁' a space) needs it."""
    from gputok.models.user_pieces import UserPieceNormalizer
    from gputok.normalizers import SentencePieceNormalizer

    path = trained("unigram", "user_defined_and_control")
    assert type(Tokenizer.from_sentencepiece(path).normalizer) is UserPieceNormalizer
    model = read_model(path)
    for p in model.pieces:
        if p.piece in ("▁the▁", "foo"):
            p.type = 1  # NORMAL
        if p.piece == "<tool>":
            p.piece = "<tool>|"
    write_model(model, tmp_path / "kept.model")
    tok = Tokenizer.from_sentencepiece(tmp_path / "kept.model")
    assert type(tok.normalizer) is SentencePieceNormalizer and tok._whole_pipeline_kernel is not None
    lines = ["<tool>|x12 <tool>|\u0338", "foo12foo the 1\u03382"]
    assert tok.encode_batch(lines) == spm.SentencePieceProcessor(model_file=str(tmp_path / "kept.model")).encode(lines)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_user_pieces_written_in_the_text_on_the_triton_path(trained, model_type):
    """The CUDA pipeline does not take a tokenizer whose normalizer copies user pieces; the Triton
    backend (TRITON_INTERPRET=1 on CPU tensors) runs the stage path, with sentencepiece's ids."""
    from gputok import _dispatch, cuda_pipeline

    path = trained(model_type, "raw_user_pieces_default")
    sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
    assert not cuda_pipeline.supports(tok, pairs=None, return_offsets=False, overflow=False, truncation=None)
    lines = ["ＡＢ ＡＢＣ xＡＢ", "ﬁx ﬁxed ﬁ x", "the ▁the▁the", "x  y x y", "moniker.  And", "plain text", ""]
    with _dispatch.use_backend("triton"):
        out = tok(lines, padding=False)
    ids, cuts = out["input_ids"].tolist(), out["row_offsets"].tolist()
    assert [ids[a:b] for a, b in itertools.pairwise(cuts)] == sp.encode(lines)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_emptied_texts_on_the_triton_path(trained, model_type):
    """Without remove_extra_whitespaces a text the charsmap rewrites to nothing (U+0001) still gets
    the dummy prefix: the Triton pipeline's whitespace rules too (TRITON_INTERPRET=1 on CPU tensors)."""
    from gputok import _dispatch

    path = trained(model_type, "no_remove_extra_whitespaces")
    sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
    lines = ["\x01", "\x01\x02", " \x01", "", "x\x01", "plain  text "]
    with _dispatch.use_backend("triton"):
        out = tok(lines, padding=False)
    ids, cuts = out["input_ids"].tolist(), out["row_offsets"].tolist()
    assert [ids[a:b] for a, b in itertools.pairwise(cuts)] == sp.encode(lines)
    assert sp.encode("\x01") == [sp.piece_to_id("▁")]  # the case itself


def _with_unused_pieces(path: str, out) -> str:
    """The model with every 7th multi-character piece and one letter marked UNUSED, as a file may."""
    model = read_model(path)
    normal = [i for i, p in enumerate(model.pieces) if p.type == 1]
    for i in normal[10::7]:
        if len(model.pieces[i].piece) > 1:
            model.pieces[i].type = UNUSED
    single = next(i for i in normal if len(model.pieces[i].piece) == 1 and model.pieces[i].piece.isalpha())
    model.pieces[single].type = UNUSED
    write_model(model, out)
    return str(out)


def test_unused_pieces_unigram(trained, texts, tmp_path):
    assert_parity(_with_unused_pieces(trained("unigram", "base"), tmp_path / "unused.model"), texts)


@pytest.mark.parametrize("option", ["base", "user_defined_and_control", "byte_fallback"])
def test_unused_pieces_bpe(trained, texts, tmp_path, option):
    """BPE merges through an unused piece and splits it back into the pair that made it."""
    path = _with_unused_pieces(trained("bpe", option), tmp_path / "unused.model")
    letter = next(p.piece for p in read_model(path).pieces if p.type == UNUSED and len(p.piece) == 1)
    # the unused letter left whole is an unknown character: <unk> with its unknown neighbours, or bytes
    probes = [f"{letter}", f"x{letter}中x", f"x中{letter}{letter}中x", f"{letter} {letter}{letter}x 中{letter}"]
    assert_parity(path, texts + probes)
    unused = {i for i, p in enumerate(read_model(path).pieces) if p.type == UNUSED}
    assert not unused & {i for row in Tokenizer.from_sentencepiece(path).encode_batch(texts) for i in row}
    with pytest.raises(ValueError, match="UNUSED pieces cannot be written as a huggingface tokenizer.json"):
        Tokenizer.from_sentencepiece(path).save(tmp_path / "t.json")


# Lines of the parity corpus where sentencepiece leaves the user piece "▁the▁" (score 0.8) for a
# cheaper path, or takes it, plus constructed cases: "▁" at the piece's end, a piece inside a longer
# word, at the start and end of a text, next to and overlapping longer normal pieces.
USER_PIECE_LINES = [
    "Of all perfection, which the workmanship", "    adj 1: of or relating to the work of an actuary",
    "       acetic ether, acetic acid. The latter is the acid to", "the discretion of the court;",
    "which may depend on the underlying TLS implementation", "in the catabolism of the cell", "the adjective",
    "the", "the ", " the", "x the", "the the the", "thethe the▁the", "the▁work", "other theme", "bathe them",
    "foo", "foobar", "xfoox", "food foo.", "112", "1212 121", "a12b", "<tool>", "x<tool>y", "<tool><tool>12foo",
    "<too", "the <tool> the 12",
]


@pytest.mark.parametrize("path_taken", ["whole_kernel", "stage_kernels", "torch"])
def test_user_defined_piece_in_unigram_lattice(trained, monkeypatch, path_taken):
    """A user piece is a lattice node scored float32(0.1 * (bytes - 1)) (sentencepiece 0.2.3's
    GetUserDefinedScore): it usually wins, not always. The same in the whole-pipeline kernel, the
    stage kernels and the torch reference."""
    path = trained("unigram", "user_defined_and_control")
    sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
    # nmt_nfkc rewrites "▁" (to a space), so the normalizer copies user pieces written in the text
    # (UserPieceNormalizer), which the whole kernel does not take; these lines hold none such.
    tok.normalizer = tok.normalizer.inner
    assert tok._whole_pipeline_kernel is not None
    if path_taken == "stage_kernels":
        monkeypatch.setattr(Tokenizer, "_whole_pipeline_kernel", property(lambda self: None))
    elif path_taken == "torch":
        monkeypatch.setenv("GPUTOK_BACKEND", "torch")
    assert tok.encode_batch(USER_PIECE_LINES) == sp.encode(USER_PIECE_LINES)
    pieces = [[sp.id_to_piece(i) for i in ids] for ids in sp.encode(USER_PIECE_LINES[:2])]
    assert "▁the▁" not in pieces[0] and "▁the▁" not in pieces[1]  # the cases the old bonus got wrong


def _with_scores(path: str, out, scores: dict[str, float], user_defined: tuple[str, ...] = ()) -> str:
    """The model with some pieces' scores changed and some normal pieces made user-defined."""
    model = read_model(path)
    for p in model.pieces:
        if p.piece in scores:
            p.score = scores[p.piece]
        if p.piece in user_defined:
            p.type = USER_DEFINED
    write_model(model, out)
    return str(out)


@pytest.mark.parametrize("side", [-1, 1])
def test_user_defined_score_is_one_tenth_per_extra_byte(trained, tmp_path, side):
    """Near the tie: "▁the" "▁work" against "▁the▁" (9 bytes: 0.8) "w" "or" "k", and a multi-byte
    user piece ("中文", 6 bytes: 0.5, where characters would give 0.1) against its two letters."""
    base = trained("unigram", "user_defined_and_control")
    sp = spm.SentencePieceProcessor(model_file=base)
    score = {p: sp.get_score(sp.piece_to_id(p)) for p in ("▁the", "w", "or", "k")}
    work = score["w"] + score["or"] + score["k"] + 0.8 - score["▁the"] + side * 0.01
    letters = {"中": 0.25, "文": 0.25 + side * 0.01}  # the user piece "中文" wins iff 0.5 > 中 + 文
    path = _with_scores(base, tmp_path / "near.model", {"▁work": work, **letters})
    model = read_model(path)
    model.pieces.append(dataclasses.replace(model.pieces[-1], piece="中文", score=0.0, type=USER_DEFINED))
    write_model(model, path)
    sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
    lines = ["the work", "which the workmanship", "中文", "x中文中文 中文", "中 文"]
    theirs = sp.encode(lines)
    assert tok.encode_batch(lines) == theirs
    assert (sp.piece_to_id("▁the▁") in theirs[0]) == (side < 0)
    assert (sp.piece_to_id("中文") in theirs[2]) == (side < 0)


def test_user_defined_piece_bonus_is_sentencepieces(trained):
    # Unigram: a user piece is in the lattice with sentencepiece 0.2.3's score (not always taken);
    # BPE: matched whole before the merges (always taken).
    for model_type in MODEL_TYPES:
        path = trained(model_type, "user_defined_and_control")
        sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
        lines = ["in the catabolism of the cell", "the regulation of the chemical"]
        assert tok.encode_batch(lines) == sp.encode(lines)
        assert tok.token_to_id("▁the▁") == sp.piece_to_id("▁the▁")


@pytest.mark.parametrize("seed", range(3))
def test_whitespace_rules_of_units_that_start_with_spaces(seed):
    """A unit that starts with spaces (a user piece "  x" copied whole) keeps them after a non-space
    and drops them after a space, as sentencepiece's ``Normalize`` does (``ConsumePrefix`` of the
    unit's spaces only while the previous unit ends in one): numba, torch and Triton alike."""
    import numpy as np
    import torch

    from gputok.charsmap import whitespace_rules_torch
    from gputok.kernels.sentencepiece_whitespace import whitespace_rules_numba
    from gputok.kernels.whitespace_rules import whitespace_rules_triton
    from gputok.ragged import Ragged

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, 40)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.array([32, 97, 0x2581, 98], np.int32)[rng.integers(0, 4, int(offsets[-1]))]
    new_unit = rng.random(values.size) < 0.6
    new_unit[offsets[:-1][lengths > 0]] = True
    unit = np.cumsum(new_unit).astype(np.int64)
    text = Ragged(torch.from_numpy(values), torch.from_numpy(offsets))
    for flags in range(8):
        spec = {"add_dummy_prefix": bool(flags & 1), "remove_extra_whitespaces": bool(flags & 2),
                "escape_whitespaces": bool(flags & 4)}
        want, want_offsets, _ = whitespace_rules_numba(values, offsets, unit, *spec.values())
        rows = [want[a:b].tolist() for a, b in itertools.pairwise(want_offsets)]
        torch_text, _ = whitespace_rules_torch(text, torch.from_numpy(unit), **spec)
        assert torch_text.tolist() == rows, spec
        out, out_lengths = whitespace_rules_triton(torch.from_numpy(values), torch.from_numpy(unit),
                                                   torch.from_numpy(offsets), torch.from_numpy(lengths), chars=values.size,
                                                   in_expand=1, in_gap=0, out_expand=1, **spec)
        starts = offsets[:-1] + 2 * np.arange(lengths.size)
        assert [out[s:s + n].tolist() for s, n in zip(starts, out_lengths.tolist())] == rows, spec
    # the case itself: "x" then the unit "  y" keeps both spaces; after "x " it keeps none
    one = np.array([120, 32, 32, 121], np.int32)
    kept, _, _ = whitespace_rules_numba(one, np.array([0, 4]), np.array([0, 1, 1, 1]), False, True, False)
    assert kept.tolist() == [120, 32, 32, 121]
    squeezed, _, _ = whitespace_rules_numba(one, np.array([0, 4]), np.array([0, 1, 2, 2]), False, True, False)
    assert squeezed.tolist() == [120, 32, 121]


@pytest.mark.skipif(not __import__("torch").cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                    reason="needs a CUDA GPU (run with TRITON_INTERPRET=0)")
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_user_pieces_written_in_the_text_on_cuda(trained, piece_texts, model_type):
    path = trained(model_type, "raw_user_pieces_default")
    sp, tok = spm.SentencePieceProcessor(model_file=path), Tokenizer.from_sentencepiece(path)
    out = tok(piece_texts, device="cuda", padding=False)
    ids, cuts = out["input_ids"].cpu().tolist(), out["row_offsets"].cpu().tolist()
    assert [ids[a:b] for a, b in itertools.pairwise(cuts)] == sp.encode(piece_texts)
