"""Encoding throughput: gputok against the anchors on the same real text, one run.

WordPiece (``--tokenizer bert``) runs against huggingface ``BertWordPieceTokenizer.encode_batch``;
byte-level BPE (``--tokenizer gpt2|cl100k``) against tiktoken's ``encode_ordinary_batch``, against
tiktoken on the batch joined into one long string, and against huggingface
``Tokenizer.encode_batch_fast`` (no offsets, as tiktoken) on the tokenizer.json gputok writes for
those ranks (the same ids: ``tests/test_bpe_tokenizer_json.py``); SentencePiece models
(``--tokenizer unigram``: the Unigram model the tests train with sentencepiece, 8k pieces, nmt_nfkc,
see :data:`UNIGRAM_MODEL`; ``--tokenizer mistral``: Mistral's SentencePiece BPE, 32k pieces, the
``mistral-sp-model`` asset) against ``SentencePieceProcessor.encode(batch, num_threads=N)``, no
BOS/EOS on either side. ``--tokenizer all`` runs bert, cl100k, unigram and mistral one after the
other (the families of issue 17's acceptance). Each engine runs in its own subprocess
(so peak RSS is its own) with the same number of threads (``torch.set_num_threads`` for gputok:
its intra-op threads, and as many chunk threads for a large batch, see ``gputok._cpu_threads``;
``RAYON_NUM_THREADS`` for huggingface, ``num_threads`` for tiktoken and sentencepiece). gputok is timed end to end:
Python strings in, padded ``input_ids``/``attention_mask`` tensors out (``gputok``) or the flat
ids with their row offsets (``gputok-ragged``, ``padding=False``: what tiktoken's lists of ids
hold); its word cache (``gputok.word_cache``) starts empty at each pass, so every pass is cold,
and so does huggingface's BPE word cache (a tokenizer loaded afresh before each pass; its BERT
WordPiece, tiktoken and sentencepiece keep no word cache).
``--passes N`` times each batch size N times (every engine alike) and reports the fastest pass:
gputok's first pass in a fresh process also pays for growing its heap (~0.7 s of page faults on
20 MB of cl100k), which a long-running dataloader pays once. Small batch sizes run on a prefix of the corpus (the
table says how many MB) so that the whole benchmark stays within minutes.

Beside the JSON it draws the throughput-versus-batch-size figure (same name, ``.png``; one panel
per family, MB/s against batch size, both log; needs matplotlib, the ``bench`` extra).
``--count-launches`` times nothing: it counts what one call dispatches on the CUDA code path
(:mod:`gputok.bench_launches`).

    python benchmarks/encode_wordpiece.py            # or: gputok bench
    gputok bench --megabytes 5 --batch-sizes 1024 65536 --json out.json
    gputok bench --tokenizer all --megabytes 2 --batch-sizes 1 32 1024   # + bench-results/encode_all.png
    gputok bench --count-launches --tokenizer all    # Triton launches, torch ops, syncs per call
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._atomic import write_atomic

# Bytes of corpus each batch size runs on, at most: small batches cost a call per few texts.
_PREFIX_BYTES = {1: 1_000_000, 32: 5_000_000}


def _load_lines(megabytes: float | None, limit_bytes: int | None) -> tuple[list[str], int]:
    from . import assets

    text = assets.english_corpus(20).read_text(encoding="utf-8")
    for limit in (None if megabytes is None else int(megabytes * 1_000_000), limit_bytes):
        if limit is not None:
            text = text[:limit]
    lines = text.splitlines()
    return lines, len("\n".join(lines).encode("utf-8"))


ANCHORS = {"bert": ("huggingface",), "gpt2": ("tiktoken-batch", "tiktoken-string", "huggingface"),
           "cl100k": ("tiktoken-batch", "tiktoken-string", "huggingface"),
           "unigram": ("sentencepiece",), "mistral": ("sentencepiece",)}
# ``--tokenizer all``: the four families of issue 17's acceptance (gpt2 runs by name).
ALL = ("bert", "cl100k", "unigram", "mistral")
# The Unigram model of the tests (tests/test_unigram.py ``trained_model(8000)``): trained by
# sentencepiece on 2 MB of ASSETS text, cached under the gputok cache dir, shared with the tests.
UNIGRAM_MODEL = "unigram-tests/unigram-8000-unk-2MB.model"


def model_path(tokenizer: str) -> Path:
    """The vocabulary or model file of a family (fetched or, for ``unigram``, trained once)."""
    from . import assets

    if tokenizer == "bert":
        return assets.fetch("bert-vocab")
    if tokenizer == "mistral":
        return assets.fetch("mistral-sp-model")
    if tokenizer == "unigram":
        return _unigram_model()
    return assets.fetch(f"{tokenizer}-tiktoken")


def _unigram_model() -> Path:
    """The tests' 8k Unigram model; trained here as tests/test_unigram.py trains it if not cached."""
    from . import assets
    from ._cache import cache_dir

    path = cache_dir() / UNIGRAM_MODEL
    if not path.exists():
        import sentencepiece as spm

        text = path.parent / "train-2MB.txt"
        if not text.exists():  # as tests/test_unigram.py training_text(2)
            text.parent.mkdir(parents=True, exist_ok=True)
            english = assets.english_corpus(None).open("rb").read(int(2 * 0.75e6))
            chinese = assets.corpus("kernel-docs-zh").open("rb").read(int(2 * 0.25e6))
            tmp = text.with_suffix(".tmp")
            tmp.write_text((english + b"\n" + chinese).decode("utf-8", errors="ignore"), encoding="utf-8")
            os.replace(tmp, text)
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(path.with_suffix("")), vocab_size=8000,
                                       model_type="unigram", normalization_rule_name="nmt_nfkc", byte_fallback=False,
                                       num_threads=2, minloglevel=2, input_sentence_size=2_000_000,
                                       shuffle_input_sentence=False)
    return path


def make_tokenizer(tokenizer: str):
    """gputok's tokenizer of a family."""
    from .tokenizer import Tokenizer

    if tokenizer == "bert":
        return Tokenizer.from_vocab(model_path("bert"))
    if tokenizer in ("unigram", "mistral"):
        return Tokenizer.from_sentencepiece(model_path(tokenizer))
    return Tokenizer.from_tiktoken(model_path(tokenizer), pattern=tokenizer)


def special_tokens(tokenizer: str) -> bool:
    """Whether gputok adds special tokens, as the anchors do: BERT's [CLS]/[SEP] (huggingface adds
    them); none for tiktoken and sentencepiece (``encode`` adds no BOS/EOS)."""
    return tokenizer == "bert"


def _runner(engine: str, tokenizer: str, threads: int, device: str, hf_json: str | None = None):
    """A function batch -> number of tokens, for one engine and tokenizer."""
    import numpy as np
    import torch

    from . import assets

    if engine.startswith("gputok"):
        from .tokenizer import CUDA_FROM_CHARS
        from .word_cache import WordCache

        tok = make_tokenizer(tokenizer)
        # Long enough to reach the GPU (smaller batches for it are encoded on the CPU).
        tok(["warm up the tables " * (CUDA_FROM_CHARS // 19 + 1)], device=device)
        padded = engine == "gputok"

        def run(batch):
            if batch is None:  # a new pass over the corpus: start from an empty word cache
                tok.word_cache = WordCache()
                return 0
            out = tok(batch, device=device, add_special_tokens=special_tokens(tokenizer), padding=padded)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            if not padded:
                return out["input_ids"].numel()
            mask = out["attention_mask"]
            # Counted with numpy on the CPU: a torch reduction wakes torch's OpenMP threads, which
            # then spin on the cores the next call's chunk threads need (1-3 ms a call of 1,024
            # lines on 2 cores): a cost of this count, not of encoding.
            # (count_nonzero: half of sum's ~2 us, which a batch-1 call felt)
            return int(np.count_nonzero(mask.numpy())) if mask.device.type == "cpu" else int(mask.sum())
        return run
    if engine == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(model_path(tokenizer)))
        sp.encode(["warm up"], num_threads=threads)
        return lambda batch: sum(map(len, sp.encode(batch, num_threads=threads)))
    if engine == "huggingface" and tokenizer != "bert":
        from tokenizers import Tokenizer as HFTokenizer

        def load():  # a fresh tokenizer, so that its BPE word cache is empty, as gputok's is at each pass
            hf = HFTokenizer.from_file(hf_json)
            encode = getattr(hf, "encode_batch_fast", hf.encode_batch)  # newer tokenizers: no offsets computed
            encode(["warm up"], add_special_tokens=False)
            return encode

        encode = load()

        def run_hf(batch):
            nonlocal encode
            if batch is None:
                encode = load()
                return 0
            return sum(len(e.ids) for e in encode(batch, add_special_tokens=False))
        return run_hf
    if engine == "huggingface":
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer(str(assets.fetch("bert-vocab")), lowercase=True)
        hf.encode_batch(["warm up"])
        return lambda batch: sum(len(e.ids) for e in hf.encode_batch(batch))
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from .regex_split import PATTERNS

    enc = tiktoken.Encoding(tokenizer, pat_str=PATTERNS[tokenizer], special_tokens={},
                            mergeable_ranks=load_tiktoken_bpe(str(assets.fetch(f"{tokenizer}-tiktoken"))))
    if engine == "tiktoken-batch":
        return lambda batch: sum(map(len, enc.encode_ordinary_batch(batch, num_threads=threads)))
    return lambda batch: len(enc.encode_ordinary("\n".join(batch)))  # tiktoken-string


def _worker(engine: str, tokenizer: str, megabytes: float | None, batch_sizes: list[int], threads: int,
            device: str, passes: int = 1, hf_json: str | None = None) -> dict:
    """Runs in the subprocess: time one engine over the corpus at each batch size, the fastest of
    ``passes`` passes."""
    import torch

    torch.set_num_threads(threads)
    run = _runner(engine, tokenizer, threads, device, hf_json)
    results = []
    for batch_size in batch_sizes:
        lines, nbytes = _load_lines(megabytes, _PREFIX_BYTES.get(batch_size))
        times = []
        for _ in range(passes):
            if engine.startswith("gputok") or engine == "huggingface" and tokenizer != "bert":
                run(None)  # every pass is cold: no words cached by an earlier one
            tokens = 0
            start = time.perf_counter()
            for i in range(0, len(lines), batch_size):
                tokens += run(lines[i : i + batch_size])
            times.append(time.perf_counter() - start)
        seconds = min(times)
        results.append(dict(tokenizer=tokenizer, engine=engine, batch_size=batch_size, lines=len(lines),
                            megabytes=nbytes / 1e6,
                            seconds=seconds, pass_seconds=times, mb_per_s=nbytes / 1e6 / seconds, tokens=tokens,
                            tokens_per_s=tokens / seconds))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for r in results:
        r["peak_rss_mb"] = peak_mb
    return {"results": results}


def run_benchmark(*, tokenizer: str = "bert", megabytes: float | None = None, batch_sizes=(1, 32, 1024, 65536),
                  threads: int | None = None, device: str = "cpu", passes: int = 1,
                  json_path: str | None = None, figure: bool = True) -> list[dict]:
    """Time gputok and the anchors of ``tokenizer`` (a family, or ``all``: :data:`ALL` one after
    the other); print a table per family; write the JSON and, beside it, the figure (a PNG)."""
    threads = threads or min(os.cpu_count() or 1, 2)
    families = list(ALL) if tokenizer == "all" else [tokenizer]
    from . import assets

    assets.english_corpus(20)  # fetch once, outside the timed subprocesses
    rows = []
    date = time.strftime("%Y-%m-%d", time.gmtime())
    for family in families:
        family_rows = _run_family(family, megabytes, batch_sizes, threads, device, passes)
        _print_table(family_rows, family, threads, device)
        rows += family_rows
        if json_path:  # after each family: a run cut short keeps what it measured
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            write_atomic({json_path: json.dumps({"tokenizer": tokenizer, "tokenizers": families, "device": device,
                                                 "device_name": device_name(device), "threads": threads,
                                                 "passes": passes, "date": date, "rows": rows}, indent=2)})
    if json_path:
        print(f"wrote {json_path}")
        if figure:
            png = str(Path(json_path).with_suffix(".png"))
            if plot(rows, png, device=device_name(device), threads=threads, date=date):
                print(f"wrote {png}")
    return rows


def _run_family(tokenizer: str, megabytes: float | None, batch_sizes, threads: int, device: str,
                passes: int) -> list[dict]:
    """One family: gputok, gputok-ragged and each anchor, each in its own subprocess."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true",
               OMP_NUM_THREADS=str(threads))
    model_path(tokenizer)  # fetched (or trained) once, outside the timed subprocesses
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        hf_json = None
        if "huggingface" in ANCHORS[tokenizer] and tokenizer != "bert":
            # huggingface reads the ranks as the tokenizer.json gputok writes
            hf_json = str(Path(tmp) / "tokenizer.json")
            make_tokenizer(tokenizer).save(hf_json)
        for engine in ("gputok", "gputok-ragged") + ANCHORS[tokenizer]:
            cmd = [sys.executable, "-m", "gputok.bench", "--worker", engine, "--tokenizer", tokenizer,
                   "--threads", str(threads), "--passes", str(passes),
                   "--device", device, "--batch-sizes", *map(str, batch_sizes)]
            if megabytes is not None:
                cmd += ["--megabytes", str(megabytes)]
            if hf_json is not None:
                cmd += ["--hf-json", hf_json]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"benchmark worker {engine} ({tokenizer}) failed:\n{done.stderr}")
            rows += json.loads(done.stdout.strip().splitlines()[-1])["results"]
    # Two ratios: against the fastest anchor at the same batch size, and against the fastest
    # anchor row of all (an anchor may be fastest at another batch size).
    anchors = [a for a in rows if not a["engine"].startswith("gputok")]
    fastest = max(a["mb_per_s"] for a in anchors)
    for r in rows:
        if r["engine"].startswith("gputok"):
            best = max(a["mb_per_s"] for a in anchors if a["batch_size"] == r["batch_size"])
            r["speedup_vs_best_anchor"] = r["mb_per_s"] / best
            r["speedup_vs_fastest_anchor_row"] = r["mb_per_s"] / fastest
    return rows


def device_name(device: str) -> str:
    """``cpu (N cores)`` or the CUDA device's name, for the figure's title and the JSON."""
    import torch

    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu ({os.cpu_count()} cores)"


def plot(rows: list[dict], path: str, *, device: str, threads: int, date: str) -> bool:
    """The throughput-versus-batch-size figure: one panel per family, x = batch size, y = MB/s
    (both log), one line per engine. Needs matplotlib (the ``bench`` extra); without it, says so
    and returns False."""
    try:
        import matplotlib
    except ImportError:
        print("gputok bench: no figure (matplotlib is not installed: pip install 'gputok[bench]')", file=sys.stderr)
        return False
    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    families = list(dict.fromkeys(r["tokenizer"] for r in rows))
    columns = min(len(families), 2)
    lines = -(-len(families) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5.2 * columns, 3.9 * lines + 0.4), squeeze=False)
    for ax in axes.flat[len(families):]:
        ax.set_visible(False)
    for ax, family in zip(axes.flat, families):
        engines = list(dict.fromkeys(r["engine"] for r in rows if r["tokenizer"] == family))
        for engine in engines:
            points = sorted((r["batch_size"], r["mb_per_s"]) for r in rows
                            if r["tokenizer"] == family and r["engine"] == engine)
            style = dict(linewidth=2.2) if engine.startswith("gputok") else dict(linestyle="--", linewidth=1.4)
            ax.plot(*zip(*points), marker="o", label=engine, **style)
        sizes = sorted({r["batch_size"] for r in rows if r["tokenizer"] == family})
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{b:,}" for b in sizes])
        ax.minorticks_off()
        ax.set_title(family)
        ax.set_xlabel("batch size (lines per call)")
        ax.set_ylabel("MB/s")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"gputok encode throughput, {device}, {threads} thread(s), {date}")
    fig.tight_layout()
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def _print_table(rows: list[dict], tokenizer: str, threads: int, device: str) -> None:
    passes = max(len(r["pass_seconds"]) for r in rows)
    print(f"encode, {tokenizer} tokenizer, device={device}, threads={threads}, fastest of {passes} pass(es); "
          "ratio = gputok / fastest anchor at that batch size; vs-all = gputok / fastest anchor row")
    header = (f"{'engine':<16} {'batch':>6} {'MB':>6} {'lines':>8} {'s':>7} {'MB/s':>7} {'Mtok/s':>7} {'peakMB':>7} "
              f"{'ratio':>6} {'vs-all':>6}")
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['speedup_vs_best_anchor']:.2f}x" if "speedup_vs_best_anchor" in r else ""
        vs_all = f"{r['speedup_vs_fastest_anchor_row']:.2f}x" if "speedup_vs_fastest_anchor_row" in r else ""
        print(f"{r['engine']:<16} {r['batch_size']:>6} {r['megabytes']:>6.1f} {r['lines']:>8} {r['seconds']:>7.2f} "
              f"{r['mb_per_s']:>7.2f} {r['tokens_per_s'] / 1e6:>7.2f} {r['peak_rss_mb']:>7.0f} {ratio:>6} {vs_all:>6}")
    print()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--train" in argv:  # training speed: gputok/bench_train.py
        from .bench_train import main as train_main

        return train_main([a for a in argv if a != "--train"])
    parser = argparse.ArgumentParser(
        prog="gputok bench", description=__doc__.split("\n")[0],
        epilog="anchors: bert vs huggingface BertWordPieceTokenizer.encode_batch; gpt2/cl100k vs tiktoken "
               "(encode_ordinary_batch, and one joined string) and huggingface on the same ranks; unigram (the "
               "tests' sentencepiece-trained 8k model) and mistral (Mistral's SentencePiece BPE, 32k) vs "
               "sentencepiece encode on the batch. Every engine in its own process with the same threads. "
               "--train: training speed instead (gputok bench --train --help).")
    parser.add_argument("--tokenizer", choices=sorted(ANCHORS) + ["all"], default="bert",
                        help=f"the family to time (default bert); all: {', '.join(ALL)}, one after the other")
    parser.add_argument("--megabytes", type=float, default=None, help="corpus size (default: the 20 MB English set)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None,
                        help="lines per call (default 1 32 1024 65536; with --count-launches 32 1024)")
    parser.add_argument("--threads", type=int, default=None, help="threads for every engine (default: min(cores, 2))")
    parser.add_argument("--device", default="cpu",
                        help="where gputok encodes (cpu or cuda; the anchors run on the CPU)")
    parser.add_argument("--passes", type=int, default=1,
                        help="time each batch size this many times, every engine alike, and keep the fastest (default 1)")
    parser.add_argument("--json", default=None,
                        help="where to write the JSON (default bench-results/encode_<tokenizer>.json, with "
                             "--count-launches bench-results/launches_<tokenizer>.json); the figure is written "
                             "beside it, same name, .png")
    parser.add_argument("--no-figure", action="store_true", help="no PNG (the figure needs matplotlib: gputok[bench])")
    parser.add_argument("--count-launches", action="store_true",
                        help="instead of timing: per encode call on the CUDA code path (GPUTOK_BACKEND=triton, "
                             "TRITON_INTERPRET=1, CPU tensors), count Triton launches, torch ops (views apart) "
                             "and host syncs, for each family (default batch sizes 32 and 1024)")
    parser.add_argument("--redraw", metavar="JSON", default=None,
                        help="time nothing: draw the figure again from the JSON of an earlier run (PNG beside it)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--count-worker", help=argparse.SUPPRESS)
    parser.add_argument("--hf-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.count_worker:
        from .bench_launches import worker as count_worker

        print(json.dumps(count_worker(args.count_worker, args.batch_sizes or [32, 1024])))
        return 0
    if args.worker:
        print(json.dumps(_worker(args.worker, args.tokenizer, args.megabytes, args.batch_sizes or [1, 32, 1024, 65536],
                                 args.threads, args.device, args.passes, args.hf_json)))
        return 0
    if args.redraw:
        saved = json.loads(Path(args.redraw).read_text())
        png = str(Path(args.redraw).with_suffix(".png"))
        rows = [dict(r, tokenizer=r.get("tokenizer", saved["tokenizer"])) for r in saved["rows"]]  # older JSON
        if plot(rows, png, device=saved.get("device_name", saved["device"]), threads=saved["threads"],
                date=saved.get("date", "")):
            print(f"wrote {png}")
        return 0
    if args.passes < 1:
        parser.error(f"--passes {args.passes}: give 1 or more")
    if args.batch_sizes is not None and min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes {' '.join(map(str, args.batch_sizes))}: give sizes of 1 or more")
    if args.count_launches:
        if args.device != "cpu":
            parser.error("--count-launches counts the CUDA code path on CPU tensors (TRITON_INTERPRET=1); "
                         "leave out --device")
        from .bench_launches import run_counts

        run_counts(list(ALL) if args.tokenizer == "all" else [args.tokenizer], args.batch_sizes or (32, 1024),
                   json_path=args.json or f"bench-results/launches_{args.tokenizer}.json")
        return 0
    run_benchmark(tokenizer=args.tokenizer, megabytes=args.megabytes,
                  batch_sizes=args.batch_sizes or (1, 32, 1024, 65536),
                  threads=args.threads, device=args.device, passes=args.passes,
                  json_path=args.json or f"bench-results/encode_{args.tokenizer}.json", figure=not args.no_figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
