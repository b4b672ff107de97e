"""``model.encode_words`` on the CPU: numba kernels (the default) against the torch path, per family.

The words are the unique words of the first 1, 32 and 1,024 non-blank lines of the English corpus, as each
tokenizer's own normalizer and pre-tokenizer cut them; both paths get the same Ragged. One process,
best of ``--repeats`` calls each (after a warm-up call). Prints a table (ms per call, ratio).

    PYTHONPATH=. python benchmarks/bench_models_numba.py [--repeats 5] [--batches 1,32,1024]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from gputok import Tokenizer, _dispatch, assets, pre_tokenizers
from gputok.dedup import gather_words, unique_words
from gputok.ingest import codepoints

from _timing import best_of, first_lines


def char_bpe_with_fallback() -> Tokenizer:
    """huggingface's CharBPETokenizer (``</w>``) trained on 1 MB of English, with ``<0xNN>`` tokens
    and byte_fallback on (as tests/test_bpe_char_level.py builds it)."""
    from tokenizers import CharBPETokenizer

    trained = CharBPETokenizer()
    trained.train([str(assets.english_corpus(1))], vocab_size=5000)
    spec = json.loads(trained.to_str())
    for b in range(256):
        spec["model"]["vocab"][f"<0x{b:02X}>"] = len(spec["model"]["vocab"])
    spec["model"]["byte_fallback"] = True
    path = Path(tempfile.mkdtemp()) / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return Tokenizer.from_file(path)


def families() -> dict[str, Tokenizer]:
    return {
        "bert": Tokenizer.from_file(assets.fetch("bert-tokenizer-json")),
        "cl100k": Tokenizer.from_tiktoken(assets.fetch("cl100k-tiktoken"), pattern="cl100k"),
        "gpt2": Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2"),
        "mistral-sp-bpe": Tokenizer.from_sentencepiece(assets.fetch("mistral-sp-model")),
        "char-bpe-fallback": char_bpe_with_fallback(),
    }


def unique_word_batch(tok: Tokenizer, texts: list[str]):
    """The unique words of ``texts`` as ``tok``'s model sees them (the start of Tokenizer._encode_codepoints)."""
    with _dispatch.use_backend("torch"):  # the same words whatever the other stages run
        norm = codepoints(texts, "cpu")
        if tok.normalizer is not None:
            norm, _ = tok.normalizer(norm)
        rewrite = getattr(tok.pre_tokenizer, "rewrite", None)
        if rewrite is not None:
            norm, _ = rewrite(norm)
        words = pre_tokenizers.whole_texts(norm) if tok.pre_tokenizer is None else tok.pre_tokenizer(norm)
        unique = unique_words(norm.values, words)
        rep = unique.representative
        return gather_words(norm.values, words.starts[rep], words.lengths()[rep])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", default="1,32,1024")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    lines = first_lines(max(batches))
    print(f"CPU, torch threads {torch.get_num_threads()}, best of {args.repeats}; ms per encode_words call")
    print(f"{'family':<18} {'lines':>6} {'words':>6} {'chars':>7} {'numba ms':>9} {'torch ms':>9} {'speed-up':>9}")
    for name, tok in families().items():
        for batch in batches:
            words = unique_word_batch(tok, lines[:batch])
            model = tok.model
            numba_s = best_of(lambda: model.encode_words(words), args.repeats)

            def torch_path():
                with _dispatch.use_backend("torch"):
                    model.encode_words(words)

            torch_s = best_of(torch_path, args.repeats)
            print(f"{name:<18} {batch:>6} {len(words):>6} {words.values.numel():>7} "
                  f"{numba_s * 1e3:>9.3f} {torch_s * 1e3:>9.3f} "
                  f"{torch_s / numba_s:>8.1f}x", flush=True)


if __name__ == "__main__":
    main()
