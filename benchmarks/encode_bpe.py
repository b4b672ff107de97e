"""Byte-level BPE encoding throughput, gputok vs tiktoken (batch call and one long string).

    python benchmarks/encode_bpe.py [--tokenizer cl100k|gpt2] [--batch-sizes 1 32 1024 65536]

Prints a table (MB/s, tokens/s, peak RSS, ratio to the fastest anchor) and writes JSON
(default bench-results/encode_<tokenizer>.json). The same code runs as `gputok bench --tokenizer cl100k`.
"""

import sys

from gputok.bench import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args if "--tokenizer" in args else ["--tokenizer", "cl100k", *args]))
