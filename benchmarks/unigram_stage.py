"""Unigram's model stage on the CPU, numba kernels against the torch-op path, and the whole
``Tokenizer.__call__`` (padded tensors) against ``sentencepiece.SentencePieceProcessor.encode``.

One process, the 8k test model, the first lines of the English corpus, best of ``--repeats``
timings per cell. The torch path's model stage is timed with the tokenizer's word cache warm
(every word a hit after the warm-up) and without a cache; the numba path uses none.
Usage: ``python benchmarks/unigram_stage.py [--repeats 5] [--batches 1 32 1024] [--threads N]``.
"""

import argparse
import os

import sentencepiece as spm
import torch

import gputok
from gputok import assets
from gputok._dispatch import use_backend
from gputok.ingest import as_texts, codepoints

from _timing import best_of, first_lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32, 1024])
    parser.add_argument("--threads", type=int, default=None, help="torch threads and sentencepiece's num_threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    path = str(assets.fetch("sp-test-model"))
    tok = gputok.Tokenizer.from_sentencepiece(path)
    sp = spm.SentencePieceProcessor(model_file=path)
    lines = first_lines(max(args.batches))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; wall times in ms, best of {args.repeats}")
    print(f"{'batch':>6} {'chars':>8} | {'model numba':>11} {'torch cache':>11} {'ratio':>6} {'torch none':>10} | "
          f"{'call numba':>10} {'call torch':>10} {'sp.encode':>9} {'sp/numba':>8}")
    for batch in args.batches:
        texts = lines[:batch]
        with use_backend("torch"):  # the model's inputs, the same for both paths
            norm, _ = tok.normalizer(codepoints(as_texts(texts)))
            words = tok.pre_tokenizer(norm)
        model = tok.model
        numba_model = best_of(lambda: model.encode_in_context(norm.values, words, cache=tok.word_cache), args.repeats)
        with use_backend("torch"):
            torch_model = best_of(lambda: model.encode_in_context(norm.values, words, cache=tok.word_cache),
                               args.repeats)
            torch_cold = best_of(lambda: model.encode_in_context(norm.values, words, cache=None), args.repeats)
            torch_call = best_of(lambda: tok(texts), args.repeats)
        numba_call = best_of(lambda: tok(texts), args.repeats)
        sp_time = best_of(lambda: sp.encode(texts, num_threads=args.threads or -1), args.repeats)
        print(f"{batch:>6} {norm.values.numel():>8} | {numba_model * 1e3:>11.3f} {torch_model * 1e3:>11.3f} "
              f"{torch_model / numba_model:>5.1f}x {torch_cold * 1e3:>10.3f} | "
              f"{numba_call * 1e3:>10.3f} {torch_call * 1e3:>10.3f} "
              f"{sp_time * 1e3:>9.3f} {sp_time / numba_call:>7.2f}x")


if __name__ == "__main__":
    main()
