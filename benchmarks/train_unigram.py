"""Unigram training, gputok vs sentencepiece vs huggingface's UnigramTrainer: time, memory, quality.

    python benchmarks/train_unigram.py [--megabytes 20] [--vocab-size 8000] [--threads 2]
                                       [--engines gputok sentencepiece huggingface] [--out FILE]

Each engine trains in its own subprocess on the first N MB of the English set (wall time from
reading the file to the written model, peak RSS of that process). Then held-out English (the lines
after the training slice) is encoded: the gputok and sentencepiece models by sentencepiece itself
(gputok's ``.model`` gets the nmt_nfkc compiled rules of sentencepiece's model first, so both
normalize alike), the huggingface model by huggingface. Prints a table (seconds, ratio to
sentencepiece, peak RSS, held-out tokens, ratio, vocabulary overlap with sentencepiece) and writes
JSON (default bench-results/train_unigram.json). Runs on CPU; no timing is asserted anywhere. CPU
seconds (all threads, from getrusage) are reported beside wall time: on a shared machine they move
less with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker(engine: str, corpus: str, vocab_size: int, threads: int, out_dir: str) -> dict:
    """Train one engine; the clock starts after its imports (torch's import is not training)."""
    result: dict = {}
    if engine == "gputok":
        import torch

        torch.set_num_threads(threads)
        from gputok.trainers.counting import file_chunks
        from gputok.trainers.unigram import (UnigramTrainStats, UnigramWordCounter, learn_unigram,
                                             write_sentencepiece_model)

        start, cpu_start = time.perf_counter(), _cpu_seconds()
        counter = UnigramWordCounter()  # the file streamed in chunks, as gputok.train reads it
        for chunk in file_chunks([Path(corpus)]):
            counter.add_lines(chunk.split("\n"))
        words, counts, final = counter.result()
        counted = time.perf_counter()
        stats = UnigramTrainStats()
        pieces = learn_unigram(words, counts, vocab_size=vocab_size, sentence_final_counts=final, progress=False,
                               stats=stats)
        write_sentencepiece_model(pieces, os.path.join(out_dir, "gputok.model"))
        result = {"counting_s": counted - start, "phases_s": stats.seconds, "unique_words": stats.words,
                  "seed_pieces": stats.seed_pieces, "rounds": stats.rounds}
    elif engine == "sentencepiece":
        import sentencepiece as spm

        start, cpu_start = time.perf_counter(), _cpu_seconds()
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(out_dir, "sentencepiece"),
                                       model_type="unigram", vocab_size=vocab_size, num_threads=threads,
                                       minloglevel=2)
    elif engine == "huggingface":
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        from tokenizers import SentencePieceUnigramTokenizer

        start, cpu_start = time.perf_counter(), _cpu_seconds()
        tok = SentencePieceUnigramTokenizer()
        tok.train([corpus], vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>",
                  show_progress=False)
        tok.save(os.path.join(out_dir, "huggingface.json"))
    else:
        raise ValueError(f"unknown engine {engine!r}; choose gputok, sentencepiece or huggingface")
    result["seconds"] = time.perf_counter() - start
    result["cpu_s"] = _cpu_seconds() - cpu_start
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def _cpu_seconds() -> float:
    """User + system CPU time of this process, all threads (steadier than wall time on a shared machine)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: unlike ru_maxrss it does not carry the parent's over exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run(engine: str, corpus: Path, vocab_size: int, threads: int, out_dir: str) -> dict:
    # OMP_WAIT_POLICY=PASSIVE: torch's OpenMP workers sleep instead of spinning between ops; on a
    # shared (oversubscribed) machine spinning made gputok ~10x slower at 2 threads. sentencepiece
    # (std::thread) and huggingface (rayon) do not read it.
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    cmd = [sys.executable, __file__, "--worker", engine, str(corpus), str(vocab_size), str(threads), out_dir]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise RuntimeError(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=20)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--held-out-lines", type=int, default=200_000)
    parser.add_argument("--engines", nargs="+", default=["gputok", "sentencepiece", "huggingface"])
    parser.add_argument("--out", default="bench-results/train_unigram.json")
    args = parser.parse_args(argv)

    import sentencepiece as spm

    from gputok import assets
    from gputok.sentencepiece_model import read_model, write_model

    corpus = assets.english_corpus(args.megabytes)
    train_lines = corpus.read_text(encoding="utf-8").count("\n")
    with open(assets.english_corpus(), encoding="utf-8") as f:
        held_out = f.read().splitlines()[train_lines: train_lines + args.held_out_lines]
    rows = []
    with tempfile.TemporaryDirectory() as out_dir:
        for engine in args.engines:
            print(f"training {engine} ...", file=sys.stderr)
            rows.append({"engine": engine, **_run(engine, corpus, args.vocab_size, args.threads, out_dir)})
            print(f"  {rows[-1]['seconds']:.1f} s ({rows[-1]['cpu_s']:.1f} s CPU), peak {rows[-1]['peak_rss_mb']:.0f} MB",
                  file=sys.stderr)
        vocab = {}
        reference = os.path.join(out_dir, "sentencepiece.model")
        for row in rows:
            if row["engine"] == "huggingface":
                from tokenizers import Tokenizer

                hf = Tokenizer.from_file(os.path.join(out_dir, "huggingface.json"))
                row["held_out_tokens"] = sum(len(e.ids) for e in hf.encode_batch(held_out))
                vocab["huggingface"] = set(hf.get_vocab())
                continue
            path = os.path.join(out_dir, f"{row['engine']}.model")
            if row["engine"] == "gputok" and os.path.exists(reference):
                model = read_model(path)  # sentencepiece's compiled nmt_nfkc rules, so both normalize alike
                model.normalizer = read_model(reference).normalizer
                write_model(model, path)
            sp = spm.SentencePieceProcessor(model_file=path)
            row["held_out_tokens"] = sum(map(len, sp.encode(held_out)))
            vocab[row["engine"]] = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    anchor = next((r for r in rows if r["engine"] == "sentencepiece"), None)
    for row in rows:
        if anchor:
            row["time_ratio_to_sentencepiece"] = row["seconds"] / anchor["seconds"]
            row["cpu_ratio_to_sentencepiece"] = row["cpu_s"] / anchor["cpu_s"]
            row["tokens_ratio_to_sentencepiece"] = row["held_out_tokens"] / anchor["held_out_tokens"]
            if row["engine"] in vocab:
                row["vocab_overlap_with_sentencepiece"] = len(vocab[row["engine"]] & vocab["sentencepiece"]) / len(
                    vocab["sentencepiece"])
    print(f"Unigram training, first {args.megabytes} MB of the English set, vocab {args.vocab_size}, "
          f"{args.threads} threads, CPU; held-out: {len(held_out)} lines")
    print(f"{'engine':<14}{'seconds':>9}{'x sp':>7}{'cpu s':>8}{'peak MB':>9}{'tokens':>11}{'x sp':>8}{'overlap':>9}")
    for r in rows:
        print(f"{r['engine']:<14}{r['seconds']:>9.1f}{r.get('time_ratio_to_sentencepiece', 0):>7.2f}{r['cpu_s']:>8.1f}"
              f"{r['peak_rss_mb']:>9.0f}{r['held_out_tokens']:>11}{r.get('tokens_ratio_to_sentencepiece', 0):>8.4f}"
              f"{r.get('vocab_overlap_with_sentencepiece', 0):>9.3f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": "cpu", "machine": platform.machine(), "threads": args.threads,
                               "megabytes": args.megabytes, "vocab_size": args.vocab_size,
                               "held_out_lines": len(held_out), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        engine, corpus, vocab_size, threads, out_dir = sys.argv[2:7]
        print(json.dumps(_worker(engine, corpus, int(vocab_size), int(threads), out_dir)))
        sys.exit(0)
    sys.exit(main())
