"""Trainers: learn a vocabulary from unique words and their counts (``gputok.train`` builds on them)."""

from .bpe import TrainStats, learn_bpe
from .wordpiece import learn_wordpiece

__all__ = ["TrainStats", "learn_bpe", "learn_wordpiece"]
