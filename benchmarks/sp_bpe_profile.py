"""Where a cold SentencePiece BPE encode (Mistral) spends its CPU: stage by stage, and against sentencepiece.

Two parts, both in one process (the project's machine is shared: CPU time per thread or process,
each figure the best of ``--repeats``):

1. ``ratio``: gputok's padded call (as ``gputok bench`` makes it, word cache emptied before each
   pass) and ``SentencePieceProcessor.encode(batch, num_threads=N)`` interleaved over the same
   batches; wall time and process CPU time of each, and their ratios.
2. ``stages``: the whole-text kernel's stages called one by one in the calling thread on the
   chunks a 2-thread call of ``--batch`` lines gives each thread (half the batch), over the same
   lines, a fresh word store at the start as in a bench pass: UTF-32 ingest (Python), codepoints,
   normalize + split, the rest of the encode with the store (lookups, symbols, merges of misses,
   scatter), the same with every word already stored (lookups and copies only) and with no store
   (every word merged), the padded tail (``cells_numba.padded_cells``).

    python benchmarks/sp_bpe_profile.py --megabytes 4 --batch 1024 --repeats 3
"""

import argparse
import time

import numpy as np
import sentencepiece as spm
import torch

from gputok import assets, bench, set_num_threads
from gputok._whole_sp_bpe import _NO_STORE, WordStore
from gputok.kernels.cells_numba import padded_cells
from gputok.kernels.ingest_numba import codepoints_numba
from gputok.kernels.sp_bpe_texts_numba import _encode_normalized, encode_texts
from gputok.kernels.sp_normalize_numba import normalize_split
from gputok.word_cache import WordCache


def ratio(tok, sp, lines, batch, threads, repeats):
    batches = [lines[i:i + batch] for i in range(0, len(lines), batch)]
    engines = {"gputok": lambda b: tok(b, add_special_tokens=False, padding=True),
               "sentencepiece": lambda b: sp.encode(b, num_threads=threads)}
    wall, cpu = {}, {}
    for _ in range(repeats):
        for name, run in engines.items():
            tok.word_cache = WordCache()
            w0, c0 = time.perf_counter(), time.process_time()
            for b in batches:
                run(b)
            c1, w1 = time.process_time(), time.perf_counter()
            wall[name] = min(wall.get(name, 1e9), w1 - w0)
            cpu[name] = min(cpu.get(name, 1e9), c1 - c0)
    print(f"batch {batch}, {len(lines)} lines, {threads} threads, best of {repeats}:")
    for name in engines:
        print(f"  {name:<14} wall {wall[name]:.3f} s  cpu {cpu[name]:.3f} s")
    print(f"  gputok speed: wall {wall['sentencepiece'] / wall['gputok']:.2f}x  "
          f"cpu {cpu['sentencepiece'] / cpu['gputok']:.2f}x", flush=True)


def stages(tok, lines, batch, repeats):
    whole = tok._whole_pipeline_kernel
    tables = whole.tables()
    cut = 1 + 10 + 4  # the charsmap flag and its 10 arrays, then the 4 whitespace / split rules
    charsmap, rules = tables[:11], tables[11:cut]
    options = tok._padded_plan(False, None)[1]
    model = tables[cut:-7]
    chunk = batch // 2
    parts = [lines[i:i + chunk] for i in range(0, len(lines), chunk)]
    cache = WordCache()

    def store_arrays():
        return WordStore(min(cache.capacity, 1 << 17), cache.max_word_length).arrays()

    best: dict[str, float] = {}
    mark = rules[3]
    for _ in range(repeats):
        acc: dict[str, float] = {}

        def timed(name, fn, *args, acc=acc):
            t0 = time.thread_time()
            out = fn(*args)
            acc[name] = acc.get(name, 0.0) + time.thread_time() - t0
            return out

        store, full, whole_store = store_arrays(), store_arrays(), store_arrays()
        words = 0
        for part in parts:
            joined = timed("ingest (python utf-32)", str.encode, "".join(part), "utf-32-le", "surrogatepass")
            units = np.frombuffer(joined, np.int32)
            lengths = np.fromiter(map(len, part), np.int64, len(part))
            values, offsets = timed("codepoints", codepoints_numba, units, lengths)
            n, n_off, source, starts, ends, w_off = timed("normalize+split", normalize_split, values, offsets,
                                                          *charsmap, *rules[:3], -1, mark, mark >= 0, True)
            args = (offsets, n, n_off, source, starts, ends, w_off, *model)
            ids, ids_off, _ = timed("encode, cold store", _encode_normalized, *args, *store, False)
            _encode_normalized(*args, *full, False)
            timed("encode, all stored", _encode_normalized, *args, *full, False)
            timed("encode, no store", _encode_normalized, *args, *_NO_STORE, False)
            timed("padded cells", padded_cells, ids, ids_off, *options)
            timed("whole kernel, cold store", encode_texts, units, lengths, *charsmap, *rules, *model, *whole_store,
                  False)
            words += starts.size
        for name, v in acc.items():
            best[name] = min(best.get(name, 1e9), v)
    print(f"stages on chunks of {chunk} lines, {len(lines)} lines, {words} words, {store[4][0]} stored by the "
          f"cold store (misses), thread CPU s, best of {repeats}:")
    for name, v in best.items():
        print(f"  {name:<28} {v:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=4)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip", choices=["ratio", "stages"], default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    set_num_threads(args.threads)
    tok = bench.make_tokenizer("mistral")
    lines = assets.english_corpus(20).read_text(encoding="utf-8")[:int(args.megabytes * 1e6)].splitlines()
    tok(lines[:2048], add_special_tokens=False, padding=True)
    if args.skip != "stages":
        stages(tok, lines, args.batch, args.repeats)
    if args.skip != "ratio":
        sp = spm.SentencePieceProcessor(model_file=str(bench.model_path("mistral")))
        ratio(tok, sp, lines, args.batch, args.threads, args.repeats)


if __name__ == "__main__":
    main()
