"""``python -m gputok ...`` (and ``torchrun -m gputok encode-corpus ...``): the command line."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a spawned child (gputok compile's jobs) imports it
    sys.exit(main())
