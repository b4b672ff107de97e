"""The ``gputok`` command line: ``gputok encode`` and ``gputok bench``.

    gputok encode --tokenizer tokenizer.json corpus.txt -o ids.txt     # one line of ids per line
    gputok encode --tokenizer vocab.txt a.txt b.txt -o ids.npz          # ragged ids + offsets
    gputok bench --tokenizer all                                        # gputok vs huggingface, tiktoken, sentencepiece
    gputok bench --count-launches --tokenizer all                       # launches/ops/syncs per call, CUDA path
    gputok train corpus.txt --preset bert-wordpiece --vocab-size 30000 -o tokenizer.json --vocab-txt vocab.txt
    gputok train corpus.txt --model unigram --vocab-size 8000 -o tokenizer.json --sp-model unigram.model
    gputok bench --train                                                # training vs huggingface
    gputok extend --base tokenizer.json --corpus domain.txt --add 5000 -o extended.json
    gputok fertility --tokenizer tokenizer.json --tokenizer extended.json heldout.txt --png fertility.png
    gputok compile --tokenizer all                                      # the CPU kernels compiled ahead of use
    gputok encode-corpus data.jsonl.gz --text-field text --tokenizer tokenizer.json --out shards/ --append-eos
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


# Tokenizer files gputok encode reads, by extension (a GPT-2 vocab.json needs --merges).
TOKENIZER_FORMATS = {".json": "a huggingface tokenizer.json (or a GPT-2 vocab.json with --merges merges.txt)",
                     ".txt": "a BERT vocab.txt", ".tiktoken": "tiktoken ranks (split rule from the file name or --pattern)",
                     ".model": "a SentencePiece model"}
# Output files gputok encode writes, by extension.
OUTPUT_FORMATS = {".txt": "one line of space-separated ids per input line",
                  ".npz": "arrays ids (int32) and offsets (int64, rows = input lines)",
                  ".npy": "every id in order, one array (uint16 if the vocabulary fits, else uint32; no line bounds)",
                  ".bin": "the same ids as raw little-endian uint16/uint32 (nanoGPT's format; no line bounds)"}


def load_tokenizer(path: str, *, pattern: str | None = None, merges: str | None = None):
    """The tokenizer in ``path``, read by its extension (``TOKENIZER_FORMATS``)."""
    from .tokenizer import Tokenizer

    if not Path(path).is_file():
        raise SystemExit(f"gputok: tokenizer file {path} does not exist")
    suffix = Path(path).suffix.lower()
    if suffix not in TOKENIZER_FORMATS:
        raise SystemExit(f"gputok: cannot tell the format of tokenizer file {path}; known: "
                         + "; ".join(f"{k} ({v})" for k, v in TOKENIZER_FORMATS.items()))
    if merges is not None:
        return Tokenizer.from_gpt2_files(path, merges)
    if suffix == ".txt":
        return Tokenizer.from_vocab(path)
    if suffix == ".model":
        return Tokenizer.from_sentencepiece(path)
    if suffix == ".tiktoken":
        rule = pattern or _split_rule_of(Path(path).stem)
        if rule is None:
            raise SystemExit(f"gputok: which split rule does {path} use? pass --pattern (gpt2, r50k_base, p50k_base, "
                             "cl100k_base, o200k_base, or a regex)")
        return Tokenizer.from_tiktoken(path, pattern=rule)
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if '"model"' not in text:
        raise SystemExit(f"gputok: {path} has no \"model\": a GPT-2 vocab.json? pass --merges merges.txt with it")
    return Tokenizer.from_file(path)


def _split_rule_of(stem: str) -> str | None:
    """The tiktoken split rule a file's name says (``cl100k_base.tiktoken``, ``gpt2.tiktoken``)."""
    for name in ("o200k", "cl100k", "p50k", "r50k", "gpt2"):
        if name in stem.lower():
            return name
    return None


def _add_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads`` for a subcommand (``gputok.set_num_threads``; read in :func:`main`)."""
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads gputok uses (default: torch's count, the cores; gputok's torch ops run on "
                             "one thread whatever this says, see README 'CPU threads')")


def _encode(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from ._atomic import check_output_paths, write_atomic
    from .ingest import read_lines

    try:
        check_output_paths({"-o": args.output})  # before the tokenizer loads and the inputs are read
    except ValueError as e:
        raise SystemExit(f"gputok encode: {e}") from e
    suffix = Path(args.output).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise SystemExit(f"gputok encode: cannot tell what to write to {args.output}; give -o one of these extensions: "
                         + "; ".join(f"{k} ({v})" for k, v in OUTPUT_FORMATS.items()))
    try:
        tok = load_tokenizer(args.tokenizer, pattern=args.pattern, merges=args.merges)
    except ValueError as e:
        raise SystemExit(f"gputok encode: {e}") from e
    for name in args.inputs:
        if not Path(name).is_file():
            raise SystemExit(f"gputok: input file {name} does not exist")
    as_arrays = suffix != ".txt"

    def write(tmp: Path) -> None:
        values, lengths = [], []
        with open(tmp, "w", encoding="utf-8") as text_out:
            for name in args.inputs:
                lines = read_lines(name)
                with tqdm(total=len(lines), desc=name, unit="line", disable=args.quiet, file=sys.stderr) as bar:
                    for i in range(0, len(lines), args.batch_size):
                        batch = tok(lines[i : i + args.batch_size], padding=False, device=args.device,
                                    add_special_tokens=not args.no_special_tokens)
                        ids, offsets = batch["input_ids"].cpu(), batch["row_offsets"].cpu()
                        if as_arrays:
                            values.append(ids.to(torch.int32).numpy())
                            lengths.append((offsets[1:] - offsets[:-1]).numpy())
                        else:
                            flat, bounds = ids.tolist(), offsets.tolist()
                            text_out.writelines(" ".join(map(str, flat[bounds[j] : bounds[j + 1]])) + "\n"
                                                for j in range(len(bounds) - 1))
                        bar.update(offsets.numel() - 1)
        if as_arrays:
            ids = np.concatenate(values) if values else np.zeros(0, dtype=np.int32)
            lens = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
            with open(tmp, "wb") as f:
                if suffix == ".npz":
                    np.savez(f, ids=ids, offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
                else:
                    stream = ids.astype(np.uint16 if len(tok) <= 1 << 16 else np.uint32)
                    if suffix == ".npy":
                        np.save(f, stream)
                    else:
                        f.write(stream.astype(stream.dtype.newbyteorder("<")).tobytes())

    write_atomic({args.output: write})
    return 0


def _train(args: argparse.Namespace) -> int:
    import time

    from .training import PRESETS, output_files, save_sentencepiece_model, train_with_summary
    from ._atomic import check_output_paths, write_atomic

    kind = PRESETS[args.preset].model if args.preset else args.model or "bpe"
    if kind == "unigram" and (args.vocab_txt or args.vocab_json or args.merges_txt):
        raise SystemExit("gputok: a unigram model is written as tokenizer.json (-o) and --sp-model; "
                         "--vocab-txt/--vocab-json/--merges-txt are for WordPiece and BPE")
    if args.sp_model and kind != "unigram":
        raise SystemExit("gputok: --sp-model writes a SentencePiece Unigram model; add --model unigram")
    if kind != "unigram" and (args.byte_fallback or args.max_piece_length != 16 or args.character_coverage != 0.9995
                              or args.max_sentence_length != 4192):
        raise SystemExit("gputok: --byte-fallback, --character-coverage, --max-piece-length and --max-sentence-length "
                         "are Unigram options; add --model unigram")
    if args.vocab_txt and kind == "bpe" or (args.vocab_json or args.merges_txt) and kind == "wordpiece":
        raise SystemExit(f"gputok: this trains a {kind} model; --vocab-txt is for WordPiece, "
                         "--vocab-json/--merges-txt for BPE")
    if bool(args.vocab_json) != bool(args.merges_txt):
        raise SystemExit("gputok: --vocab-json and --merges-txt go together; pass both")
    options = {"-o": args.output, "--vocab-txt": args.vocab_txt, "--vocab-json": args.vocab_json,
               "--merges-txt": args.merges_txt, "--sp-model": args.sp_model}
    try:
        check_output_paths(options)  # fail before hours of training, not after
    except ValueError as e:
        raise SystemExit(f"gputok train: {e}") from e
    outputs = [p for p in options.values() if p]
    rank = _init_distributed(args.device)  # under torchrun the ranks split the word counting
    try:
        tok, summary = train_with_summary(
            args.inputs, model=args.model, preset=args.preset, vocab_size=args.vocab_size,
            min_frequency=args.min_frequency, special_tokens=args.special_tokens, score=args.score,
            limit_alphabet=args.limit_alphabet, max_token_length=args.max_token_length, device=args.device,
            progress=not args.no_progress, byte_fallback=args.byte_fallback,
            character_coverage=args.character_coverage, max_piece_length=args.max_piece_length,
            max_sentence_length=args.max_sentence_length or None)
        start = time.perf_counter()
        files: dict = output_files(tok, tokenizer_json_path=args.output, vocab_txt=args.vocab_txt,
                                   vocab_json=args.vocab_json, merges_txt=args.merges_txt)
        if args.sp_model:
            files[Path(args.sp_model)] = lambda tmp: save_sentencepiece_model(tok, tmp)
        if not rank:  # one process, or rank 0 of torchrun's
            write_atomic(files)  # all of them or none
    except (ValueError, TypeError, OSError) as e:
        raise SystemExit(f"gputok train: {e}") from e
    finally:
        if rank is not None:
            import torch

            torch.distributed.destroy_process_group()
    summary.seconds["writing"] = time.perf_counter() - start
    if not rank:
        print(f"gputok train: {summary}; wrote {', '.join(map(str, outputs))}", file=sys.stderr)
    return 0


def _train_parser(sub) -> None:
    tr = sub.add_parser("train", help="train a BPE, WordPiece or Unigram tokenizer on text files")
    tr.add_argument("inputs", nargs="+", help="UTF-8 text files, read line by line (invalid bytes become U+FFFD)")
    tr.add_argument("--model", choices=["bpe", "wordpiece", "unigram"], default=None,
                    help="bpe (preset byte-level-bpe by default), wordpiece (bert-wordpiece) or unigram "
                         "(SentencePiece's trainer, nmt_nfkc; no preset)")
    tr.add_argument("--preset", choices=["byte-level-bpe", "char-bpe", "bert-wordpiece"], default=None,
                    help="huggingface's ByteLevelBPETokenizer, CharBPETokenizer, "
                         "BertWordPieceTokenizer(lowercase=True)")
    tr.add_argument("--vocab-size", type=int, default=None, help="default 30000 (unigram: 8000, as SentencePiece)")
    tr.add_argument("--min-frequency", type=int, default=2, help="pairs seen fewer times are not merged (default 2)")
    tr.add_argument("--special-tokens", nargs="*", default=None,
                    help="default: the preset's (unigram: <unk> <s> </s>)")
    tr.add_argument("--score", choices=["frequency", "likelihood"], default="frequency", help="WordPiece merge score")
    tr.add_argument("--limit-alphabet", type=int, default=None, help="keep the N most frequent characters")
    tr.add_argument("--max-token-length", type=int, default=None, help="no token longer than N characters")
    tr.add_argument("--device", default="cpu", help="cpu or cuda")
    tr.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_threads(tr)
    tr.add_argument("-o", "--output", required=True, help="the huggingface tokenizer.json to write")
    tr.add_argument("--vocab-txt", default=None, help="also write a WordPiece vocab.txt")
    tr.add_argument("--vocab-json", default=None, help="also write a BPE vocab.json (with --merges-txt)")
    tr.add_argument("--merges-txt", default=None, help="also write a BPE merges.txt (with --vocab-json)")
    tr.add_argument("--byte-fallback", action="store_true", help="unigram: 256 <0xNN> pieces for unknown characters")
    tr.add_argument("--character-coverage", type=float, default=0.9995,
                    help="unigram: share of characters that get a piece of their own (default 0.9995)")
    tr.add_argument("--max-piece-length", type=int, default=16, help="unigram: longest piece in characters (16)")
    tr.add_argument("--max-sentence-length", type=int, default=4192,
                    help="unigram: lines over this many UTF-8 bytes are skipped with a warning, as SentencePiece "
                         "skips them (4192); 0 trains on every line")
    tr.add_argument("--sp-model", default=None,
                    help="unigram: also write a SentencePiece .model (identity normalization: its text must be "
                         "nmt_nfkc-normalized first)")


def _init_distributed(device: str) -> int | None:
    """Under torchrun (WORLD_SIZE > 1): the process group (NCCL for cuda, else gloo) and this
    process's rank; None when not distributed."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    import torch

    if not torch.distributed.is_initialized():
        if str(device).startswith("cuda"):  # NCCL's collectives run on this rank's own GPU
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.distributed.init_process_group("nccl" if str(device).startswith("cuda") else "gloo")
    return torch.distributed.get_rank()


def _encode_corpus(args: argparse.Namespace) -> int:
    """``gputok encode-corpus``; under torchrun (WORLD_SIZE > 1) the ranks split the shards."""
    import os

    import torch

    from .corpus import BadRecordError
    from .encode_corpus import encode_corpus

    rank = _init_distributed(args.device)  # under torchrun the ranks split the shards
    if rank is not None and str(args.device) == "cuda":
        args.device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    try:
        tok = load_tokenizer(args.tokenizer)
        manifest = encode_corpus(
            args.inputs, tok, args.out, formats=args.format, dtype=args.dtype, text_field=args.text_field,
            mode=args.mode, input_format=args.input_format, append_eos=args.append_eos,
            prepend_bos=args.prepend_bos, eos_token=args.eos_token, bos_token=args.bos_token,
            add_special_tokens=args.add_special_tokens, shard_documents=args.shard_documents,
            on_bad_record=args.on_bad_record, resume=args.resume, device=args.device, progress=not args.quiet)
    except (BadRecordError, ValueError, OSError, ImportError) as e:
        raise SystemExit(f"gputok encode-corpus: {e}") from e
    finally:
        if rank is not None:
            torch.distributed.destroy_process_group()
    bad = manifest["bad_records"]
    bad_text = ", ".join(f"{n} {why} {what}" for what in ("replaced", "skipped") for why, n in bad[what].items())
    if not args.quiet and not rank:
        print(f"gputok encode-corpus: {manifest['documents']} documents, {manifest['tokens']} tokens in "
              f"{len(manifest['shards'])} shard(s) ({', '.join(manifest['dtypes'].values())}); "
              f"{manifest['empty_documents']} empty; bad records: {bad_text or 'none'}; wrote {args.out}",
              file=sys.stderr)
    return 0


def _encode_corpus_parser(sub) -> None:
    ec = sub.add_parser("encode-corpus", help="text, JSON Lines, Parquet or Arrow files to Megatron / flat token shards")
    ec.add_argument("inputs", nargs="+", help="files: text (a document per line, or --mode blocks), .jsonl, "
                                              ".parquet, .arrow; .gz / .zst compressed too")
    ec.add_argument("--tokenizer", required=True, help="a huggingface tokenizer.json or a BERT vocab.txt")
    ec.add_argument("--out", required=True, help="the folder to write (shards and manifest.json)")
    ec.add_argument("--format", nargs="+", default=["megatron"], choices=["megatron", "flat"],
                    help="megatron: NAME.bin + NAME.idx (megatron-core IndexedDataset); flat: NAME.tokens + "
                         "NAME.docs.npy (nanoGPT-style memmap)")
    ec.add_argument("--dtype", default="auto", choices=["auto", "uint16", "uint32", "int32"],
                    help="id dtype (auto: uint16 when the vocabulary fits, as Megatron chooses)")
    ec.add_argument("--text-field", default="text", help="JSON field / Arrow column holding the text")
    ec.add_argument("--mode", default="lines", choices=["lines", "blocks"],
                    help="text files: a document per line, or per block of lines separated by blank lines")
    ec.add_argument("--input-format", default=None, choices=["text", "jsonl", "parquet", "arrow"],
                    help="instead of the file suffix")
    ec.add_argument("--append-eos", action="store_true", help="end every document with the EOS token")
    ec.add_argument("--prepend-bos", action="store_true", help="begin every document with the BOS token")
    ec.add_argument("--eos-token", default=None, help="default: the first of <|endoftext|>, </s>, ... in the vocabulary")
    ec.add_argument("--bos-token", default=None, help="default: the first of <s>, <|begin_of_text|>, ...")
    ec.add_argument("--add-special-tokens", action="store_true", help="run the tokenizer's template ([CLS] A [SEP])")
    ec.add_argument("--shard-documents", type=int, default=1_000_000, help="input records per shard (1000000)")
    ec.add_argument("--on-bad-record", default="replace", choices=["replace", "skip", "fail"],
                    help="invalid UTF-8 / a missing JSON field: replace (U+FFFD / empty), skip, or fail; counted")
    ec.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    ec.add_argument("--device", default="cpu", help="cpu or cuda")
    ec.add_argument("--quiet", action="store_true", help="no progress bar or summary")


def _compile_parser(sub) -> None:
    cp = sub.add_parser("compile", help="compile the CPU kernels into the cache ahead of use, in processes of "
                                        "their own (two per tokenizer where the cores allow)")
    cp.add_argument("--tokenizer", nargs="+", default=["all"],
                    help="gputok bench's tokenizers (bert, cl100k, unigram, mistral, gpt2; all: the first four, "
                         "the default) "
                         "or tokenizer files: tokenizer.json, vocab.txt, .tiktoken or SentencePiece .model")
    cp.add_argument("--jobs", type=int, default=None,
                    help="processes at once (default: one per CPU core; with two or more per tokenizer, each "
                         "tokenizer's calls are split between two)")
    cp.add_argument("--pattern", default=None, help=".tiktoken files: the split rule (default: from the file name)")
    cp.add_argument("--device", default="cpu", help="cpu, or cuda to compile the Triton kernels too")
    cp.add_argument("--prune", action="store_true",
                    help="first remove the compiled kernels of other gputok versions or checkouts from the cache")


def _compile(args) -> int:
    import time

    from . import precompile

    names = [n for name in args.tokenizer for n in (precompile.FAMILIES if name == "all" else (name,))]
    start = time.perf_counter()
    if args.prune:
        try:
            folders, freed = precompile.prune_caches()
        except ValueError as e:
            raise SystemExit(f"gputok compile --prune: {e}")
        print(f"removed {folders} cache folder(s) of other kernel sources, {freed / 1e6:.1f} MB", flush=True)
    print(f"compiling the kernels of {', '.join(dict.fromkeys(names))} (seconds to a minute each where the cache "
          "is empty)", flush=True)

    def report(done: "precompile.Compiled") -> None:
        if done.error is not None:
            print(f"{done.tokenizer}: failed: {done.error}", file=sys.stderr, flush=True)
        else:
            print(f"{done.tokenizer}: {done.seconds:.1f} s ({done.cpu_seconds:.1f} s CPU), "
                  f"{done.kernels} kernels compiled", flush=True)

    try:
        results = precompile.compile_kernels(names, jobs=args.jobs, device=args.device, on_done=report,
                                             pattern=args.pattern)
    except ValueError as e:
        raise SystemExit(f"gputok compile: {e}")
    failed = [r.tokenizer for r in results if r.error is not None]
    print(f"compiled in {time.perf_counter() - start:.1f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gputok", description="GPU-batched tensor tokenizer")
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="token ids of every line of text files")
    enc.add_argument("--tokenizer", required=True,
                     help="tokenizer.json, vocab.txt (BERT), .tiktoken or SentencePiece .model (by extension)")
    enc.add_argument("--pattern", default=None, help=".tiktoken: the split rule (default: from the file name)")
    enc.add_argument("--merges", default=None, help="with a GPT-2 vocab.json as --tokenizer: its merges.txt")
    enc.add_argument("inputs", nargs="+", help="UTF-8 text files (invalid bytes become U+FFFD)")
    enc.add_argument("-o", "--output", required=True,
                     help="; ".join(f"OUT{k}: {v}" for k, v in OUTPUT_FORMATS.items()))
    enc.add_argument("--batch-size", type=int, default=65536, help="lines per batch (default 65536)")
    enc.add_argument("--device", default="cpu", help="cpu or cuda")
    enc.add_argument("--no-special-tokens", action="store_true", help="leave out [CLS]/[SEP]")
    enc.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_threads(enc)
    _compile_parser(sub)
    _train_parser(sub)
    from . import cli_domain

    cli_domain.add_parsers(sub)  # extend, fertility
    _encode_corpus_parser(sub)
    for name in ("extend", "fertility", "encode-corpus"):
        _add_threads(sub.choices[name])
    sub.add_parser("bench", help="encoding speed against huggingface, tiktoken and sentencepiece, with a figure "
                        "(or: --count-launches, the CUDA path's launches per call; --train, training speed)",
                   add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        from .bench import main as bench_main

        return bench_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if getattr(args, "threads", None) is not None:
        from ._cpu_threads import set_num_threads

        try:
            set_num_threads(args.threads)
        except ValueError as e:
            parser.error(f"--threads: {e}")
    if args.command == "train":
        return _train(args)
    if args.command in ("extend", "fertility"):
        return cli_domain.run_extend(args) if args.command == "extend" else cli_domain.run_fertility(args)
    if args.command == "encode-corpus":
        return _encode_corpus(args)
    if args.command == "compile":
        return _compile(args)
    return _encode(args)


if __name__ == "__main__":
    sys.exit(main())
