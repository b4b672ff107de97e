"""Training stages, numba kernels against the torch path they replace, one process, same inputs.

    python benchmarks/train_stages.py [--megabytes 5] [--repeats 3]

For the first N MB of the English set: word counting (file to unique words and counts, per preset),
the BPE / WordPiece merge loop (byte-level BPE 32000 / 2, BERT WordPiece 30000 / 3, from the counted
words), and Unigram's E-step (the first one, all lattice batches) and pruning (one prune round, after
one EM step), each on the numba path and on the torch path (``_dispatch.use_backend``), alternating,
best of ``--repeats`` wall seconds (a warm-up call first, so compilation and cache loading are not timed). Prints
seconds and the ratio torch / numba. CPU only; no anchors here (``benchmarks/train.py`` and
``benchmarks/train_unigram.py`` time whole trainings against huggingface and sentencepiece).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from _timing import best_of


def _compare(name: str, fn, repeats: int) -> None:
    from gputok import _dispatch

    seconds = {}
    for backend in ("numba", "torch"):  # warm-up: compile / load the kernels, fill caches
        with _dispatch.use_backend(backend):
            fn()
    for _ in range(repeats):
        for backend in ("numba", "torch"):
            with _dispatch.use_backend(backend):
                seconds[backend] = min(seconds.get(backend, float("inf")), best_of(fn, 1, warmup=False))
    print(f"{name:<40} numba {seconds['numba']:>8.3f} s   torch {seconds['torch']:>8.3f} s   "
          f"torch/numba {seconds['torch'] / seconds['numba']:>6.2f}x", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stages", nargs="+", default=["counting", "merges", "unigram"])
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from gputok import _dispatch, assets
    from gputok.trainers import learn_bpe, learn_wordpiece
    from gputok.training import count_words

    path = assets.english_corpus(args.megabytes)
    print(f"training stages, first {args.megabytes} MB of the English set, {args.threads} threads, "
          f"best of {args.repeats}")
    if "counting" in args.stages:
        for preset in ("byte-level-bpe", "bert-wordpiece"):
            _compare(f"counting {preset}", lambda: count_words(path, preset=preset), args.repeats)
    if "merges" in args.stages:
        for preset, fn, options in (
                ("byte-level-bpe", learn_bpe, dict(vocab_size=32000, min_frequency=2)),
                ("bert-wordpiece", learn_wordpiece, dict(vocab_size=30000, min_frequency=3,
                                                         special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))):
            with _dispatch.use_backend("numba"):
                table, _ = count_words(path, preset=preset)
            _compare(f"merge loop {preset}", lambda: fn(table.words, table.counts, progress=False, **options),
                     args.repeats)
    if "unigram" in args.stages:
        from gputok.trainers.counting import file_chunks
        from gputok.trainers.unigram import UnigramTrainStats, UnigramWordCounter, _Trainer

        counter = UnigramWordCounter()
        for chunk in file_chunks([Path(path)]):
            counter.add_lines(chunk.split("\n"))
        words, counts, final = counter.result()
        trainer = _Trainer(words, counts, final, vocab_size=8000, coverage=0.9995, max_len=16, num_meta=3,
                           seed_size=1_000_000, shrinking=0.75, sub_iterations=2, progress=False,
                           stats=UnigramTrainStats())
        trainer._required_chars()
        trainer._seeds()
        trainer._build_lattice()
        trainer.order = torch.arange(trainer.num_seeds)
        trainer.alive = torch.ones(trainer.num_seeds, dtype=torch.bool)
        trainer.desired = int(trainer.vocab_size * 1.1)
        state = (trainer.order.clone(), trainer.alive.clone(), trainer.scores.clone(), trainer.edges_per_piece.clone())

        def reset():
            trainer.order, trainer.alive, trainer.scores, trainer.edges_per_piece = (t.clone() for t in state)

        print(f"unigram: {len(words)} words, {trainer.num_seeds} seeds, {len(trainer.lattices)} lattice batches, "
              f"{trainer._num_edges()} edges")
        first_scores = trainer._piece_scores(trainer._unk_score())
        _compare("unigram E-step (the first)", lambda: trainer._expected(first_scores), args.repeats)
        with _dispatch.use_backend("numba"):
            trainer._em_step()  # scores as after the first EM step, before the first prune
        state = (trainer.order.clone(), trainer.alive.clone(), trainer.scores.clone(), trainer.edges_per_piece.clone())
        lattices = list(trainer.lattices)

        def prune():
            reset()
            trainer.lattices = list(lattices)
            trainer._prune()

        _compare("unigram prune (one round)", prune, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
