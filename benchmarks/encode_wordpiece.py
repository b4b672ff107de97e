"""WordPiece encoding throughput, gputok vs huggingface tokenizers, on the 20 MB English set.

    python benchmarks/encode_wordpiece.py [--batch-sizes 1 32 1024 65536] [--json FILE]

Prints a table (MB/s, tokens/s, peak RSS, ratio) and writes JSON (default
bench-results/encode_wordpiece.json). The same code runs as `gputok bench`.
"""

import sys

from gputok.bench import main

if __name__ == "__main__":
    sys.exit(main())
