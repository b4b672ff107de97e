"""``python -m gputok ...`` (and ``torchrun -m gputok encode-corpus ...``): the command line."""

import sys

from .cli import main

sys.exit(main())
