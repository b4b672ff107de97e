"""The ``gputok`` command line: ``gputok encode`` and ``gputok bench``.

    gputok encode --tokenizer tokenizer.json corpus.txt -o ids.txt     # one line of ids per line
    gputok encode --tokenizer vocab.txt a.txt b.txt -o ids.npz          # ragged ids + offsets
    gputok bench                                                        # gputok vs huggingface
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def load_tokenizer(path: str):
    from .tokenizer import Tokenizer

    if not Path(path).is_file():
        raise SystemExit(f"gputok: tokenizer file {path} does not exist")
    if path.endswith(".txt"):
        return Tokenizer.from_vocab(path)
    return Tokenizer.from_file(path)


def _encode(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from .ingest import read_lines

    tok = load_tokenizer(args.tokenizer)
    for name in args.inputs:
        if not Path(name).is_file():
            raise SystemExit(f"gputok: input file {name} does not exist")
    out = Path(args.output)
    as_npz = out.suffix == ".npz"
    fd, tmp = tempfile.mkstemp(dir=out.parent if str(out.parent) else ".", prefix=out.name, suffix=".tmp")
    values, lengths = [], []
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as text_out:
            for name in args.inputs:
                lines = read_lines(name)
                with tqdm(total=len(lines), desc=name, unit="line", disable=args.quiet, file=sys.stderr) as bar:
                    for i in range(0, len(lines), args.batch_size):
                        batch = tok(lines[i : i + args.batch_size], padding=False, device=args.device,
                                    add_special_tokens=not args.no_special_tokens)
                        ids, offsets = batch["input_ids"].cpu(), batch["row_offsets"].cpu()
                        if as_npz:
                            values.append(ids.to(torch.int32).numpy())
                            lengths.append((offsets[1:] - offsets[:-1]).numpy())
                        else:
                            flat, bounds = ids.tolist(), offsets.tolist()
                            text_out.writelines(" ".join(map(str, flat[bounds[j] : bounds[j + 1]])) + "\n"
                                                for j in range(len(bounds) - 1))
                        bar.update(len(bounds) - 1 if not as_npz else offsets.numel() - 1)
        if as_npz:
            lens = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
            with open(tmp, "wb") as f:
                np.savez(f, ids=np.concatenate(values) if values else np.zeros(0, dtype=np.int32),
                         offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gputok", description="GPU-batched tensor tokenizer")
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="token ids of every line of text files")
    enc.add_argument("--tokenizer", required=True, help="a huggingface tokenizer.json or a BERT vocab.txt")
    enc.add_argument("inputs", nargs="+", help="UTF-8 text files (invalid bytes become U+FFFD)")
    enc.add_argument("-o", "--output", required=True,
                     help="OUT.txt: one line of space-separated ids per input line; OUT.npz: arrays ids, offsets")
    enc.add_argument("--batch-size", type=int, default=65536, help="lines per batch (default 65536)")
    enc.add_argument("--device", default="cpu", help="cpu or cuda")
    enc.add_argument("--no-special-tokens", action="store_true", help="leave out [CLS]/[SEP]")
    enc.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("bench", help="encoding throughput against huggingface tokenizers", add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        from .bench import main as bench_main

        return bench_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return _encode(args)


if __name__ == "__main__":
    sys.exit(main())
