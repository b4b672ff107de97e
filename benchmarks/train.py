"""Training speed and peak memory, gputok vs huggingface tokenizers, for the three presets.

    python benchmarks/train.py [--megabytes 10 50 all] [--presets byte-level-bpe bert-wordpiece]

Each engine trains in its own subprocess on the first N MB of the English set (vocab 32000 /
min_frequency 2 for BPE, 30000 / 3 for WordPiece, as the training issue's acceptance); prints a
table (seconds, gputok's counting/merging split, peak RSS, the ratios, whether the vocabularies
agree) and writes JSON (default bench-results/train.json). The same code runs as
`gputok bench --train`.
"""

import sys

from gputok.bench_train import main

if __name__ == "__main__":
    sys.exit(main())
