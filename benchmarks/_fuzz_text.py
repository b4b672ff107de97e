"""Text for the differential fuzz (benchmarks/fuzz.py): random Unicode, adversarial text, long
lines; every generator is a function of a ``random.Random``, so a seed replays a batch exactly."""

from __future__ import annotations

import functools
import random
import string


def _span(lo: int, hi: int) -> str:
    return "".join(map(chr, range(lo, hi + 1)))


def _spans(*ranges: tuple[int, int]) -> str:
    return "".join(_span(lo, hi) for lo, hi in ranges)


WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2007\u2008\u200a\u2028\u2029\u202f\u205f\u3000\u200b\ufeff\u180e"
NUMERIC = string.digits + "٠١٢٣٤٥٦٧٨٩۴߃१৪௫๓໒༣၄០᠓᥆᧐꘠꣐꧐０１９½¼¾Ⅻⅻ①⑴⒈²³¹⁰₅〇〡𝟎𝟗🄁"
PUNCTUATION = string.punctuation + "«»“”‘’„‚‹›–—…·•¡¿§¶†‡‰′″、。，．！？：；「」『』（）【】《》＂＇＃"
SPECIAL_TEXT = ["<|endoftext|>", "<|fim_prefix|>", "<|im_start|>", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]",
                "[mask]", "[ MASK ]", "<s>", "</s>", "<unk>", "<pad>", "<0x41>", "▁", "▁▁", "##", "##s", "</w>", "Ġ",
                "Ċ", "ĠĠ", "\u2047", "<|endoftext|><|endoftext|>", "[CLS][SEP]"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'mM", "'LL", "'D", "'ſ",
                "'ſt", "’s", "''s", "' s", "'", "''", "'1", "'é", "'\u0301s"]
POOLS = {
    "ascii letters": string.ascii_letters,
    "ascii": _span(0x20, 0x7E),
    "numeric": NUMERIC,
    "whitespace": WHITESPACE,
    "punctuation": PUNCTUATION,
    "latin": _span(0xC0, 0x24F),
    "marks": _spans((0x300, 0x36F), (0x483, 0x489), (0x591, 0x5BD), (0x610, 0x61A), (0x64B, 0x65F), (0x900, 0x903),
                    (0x93A, 0x94F), (0x1AB0, 0x1ACE), (0x1DC0, 0x1DFF), (0x20D0, 0x20F0), (0xFE20, 0xFE2F),
                    (0xFE00, 0xFE0F)),
    "cjk": _spans((0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x1100, 0x11FF), (0xFF00, 0xFFEF),
                  (0x3400, 0x4DBF), (0x3000, 0x303F), (0x20000, 0x2062F)),
    "scripts": _spans((0x370, 0x3FF), (0x400, 0x4FF), (0x5D0, 0x5EA), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F),
                      (0x10A0, 0x10FF), (0x1200, 0x137F), (0xB80, 0xBFF), (0x1E00, 0x1EFF), (0x1F00, 0x1FFF)),
    "emoji": _spans((0x1F300, 0x1FAFF), (0x2600, 0x27BF), (0x1F1E6, 0x1F1FF), (0x1F3FB, 0x1F3FF)) + "\u200d\ufe0f" * 40,
    "controls": _spans((0x0, 0x1F), (0x7F, 0x9F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0xFFF9, 0xFFFD),
                       (0xE000, 0xE0FF), (0xFDD0, 0xFDEF), (0xFFFE, 0xFFFF), (0xE0000, 0xE007F), (0xF0000, 0xF00FF)),
}
POOL_WEIGHTS = {"ascii letters": 30, "ascii": 12, "numeric": 6, "whitespace": 10, "punctuation": 6, "latin": 6,
                "marks": 5, "cjk": 8, "scripts": 6, "emoji": 5, "controls": 2, "unicode 17": 2, "any": 2}


@functools.lru_cache(maxsize=1)
def unicode17_changed() -> str:
    """Characters the installed ``regex`` module classes otherwise than tiktoken and huggingface do
    (new in Unicode 17: gputok.regex_split); empty when the module reads the same tables."""
    import numpy as np

    from gputok.regex_split import _regex_module_differs

    differs = _regex_module_differs()
    return "" if differs is None else "".join(map(chr, np.nonzero(differs)[0]))


@functools.lru_cache(maxsize=1)
def real_lines() -> list[str]:
    """The parity corpus (English, Chinese, Shakespeare, GO terms), one line each."""
    from gputok import assets

    return assets.parity_corpus().read_text(encoding="utf-8").splitlines()


def _pool(name: str) -> str:
    return unicode17_changed() or "a" if name == "unicode 17" else POOLS[name]


def any_codepoint(rng: random.Random) -> str:
    """Any codepoint of any plane, lone surrogates included (gputok reads them as U+FFFD)."""
    return chr(rng.randrange(0x110000))


def random_unicode(rng: random.Random, length: int) -> str:
    """Characters from one to three pools (letters, marks, digits, punctuation, whitespace, CJK, emoji, ...)."""
    names = rng.choices(list(POOL_WEIGHTS), weights=list(POOL_WEIGHTS.values()), k=rng.randint(1, 3))
    if "any" in names:
        return "".join(any_codepoint(rng) if rng.random() < 0.5 else rng.choice(POOLS["ascii"]) for _ in range(length))
    alphabet = "".join(_pool(n) for n in set(names))
    return "".join(rng.choices(alphabet, k=length))


def _word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters if rng.random() < 0.7 else _pool(rng.choice(list(POOLS))),
                               k=rng.randint(1, 9)))


def _run(rng: random.Random) -> str:
    unit = rng.choice([" ", "\n", "\r\n", "\t", "  \n", " \n ", "\u3000", "\xa0", "0", "9", "12", "٣", "!", ".",
                       "-", "=", "'", "▁", "\U0001F600", "a", "ab"])
    return unit * rng.choice([2, 3, 4, 7, 15, 16, 17, 31, 64, 100, 255, 256, 257, 999])


def adversarial(rng: random.Random) -> str:
    """Text that stresses the split rules and special-token matching."""
    kind = rng.randrange(10)
    if kind == 0:  # runs of whitespace / digits / one character between words
        return "".join(rng.choice([_run(rng), _word(rng), " "]) for _ in range(rng.randint(1, 5)))
    if kind == 1:  # contractions with odd cases, after letters, digits, marks, spaces
        return "".join(rng.choice(["", " ", "x", "X", "1", "é", "\u0301", "中", _word(rng)]) + rng.choice(CONTRACTIONS)
                       for _ in range(rng.randint(1, 6)))
    if kind == 2:  # special-token spellings as plain text
        glue = rng.choice(["", " ", "\n", "a", "1"])
        return glue.join(rng.choice(SPECIAL_TEXT + [_word(rng)]) for _ in range(rng.randint(1, 6)))
    if kind == 3:  # a long word without spaces
        return rng.choice(string.ascii_letters) * rng.randint(100, 3000) if rng.random() < 0.3 else \
            random_unicode(rng, rng.randint(300, 5000)).replace(" ", "")
    if kind == 4:  # a repeated pattern
        return random_unicode(rng, rng.randint(1, 5)) * rng.randint(10, 1500)
    if kind == 5:  # mixed scripts, glued or spaced
        glue = rng.choice(["", " ", "'", "-", "\u200d", "1"])
        return glue.join(random_unicode(rng, rng.randint(1, 6)) for _ in range(rng.randint(2, 10)))
    if kind == 6:  # characters whose class changed in Unicode 17, next to what the split rules care about
        changed = _pool("unicode 17")
        return "".join(rng.choice(changed) + rng.choice(["", "'s", ";a", ":", "1", " ", "a", "'m", "\u0301", "A"])
                       for _ in range(rng.randint(1, 5)))
    if kind == 7:  # lone surrogates, NUL and controls inside words
        return "".join(rng.choice([_word(rng), chr(rng.randint(0xD800, 0xDFFF)), "\x00", "\ufffd", " ",
                                   rng.choice(POOLS["controls"])]) for _ in range(rng.randint(1, 8)))
    if kind == 8:  # tiny texts
        return rng.choice(["", " ", "a", "\n", "'", "'s", "0", "▁", "\x00", "\ufffd", "中", "\U0001F600", "  ", "\r\n"])
    return "".join(rng.choice([_word(rng), _run(rng), rng.choice(SPECIAL_TEXT), rng.choice(CONTRACTIONS)])
                   for _ in range(rng.randint(2, 12)))


def real_text(rng: random.Random) -> str:
    """A real line, sometimes with a few random characters inserted or cut."""
    line = rng.choice(real_lines())
    for _ in range(rng.choice([0, 0, 1, 3])):
        at = rng.randint(0, len(line))
        line = line[:at] + random_unicode(rng, rng.randint(1, 4)) + line[at + rng.randint(0, 3):]
    return line


def short_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.55:
        return random_unicode(rng, min(int(rng.expovariate(1 / 40)), 2000))
    if roll < 0.8:
        return real_text(rng)
    return adversarial(rng)


def long_line(rng: random.Random) -> str:
    """10k to 200k characters (log-uniform): real text joined into one line, random Unicode, or
    adversarial pieces."""
    target = int(10 ** rng.uniform(4, 5.3))
    kind = rng.randrange(3)
    pieces, size = [], 0
    while size < target:
        piece = (rng.choice(real_lines()) + rng.choice([" ", "\n", ""]) if kind == 0 else
                 random_unicode(rng, 500) if kind == 1 else adversarial(rng))
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces)[:target]


# (batch size, number of calls, long lines per call) of each kind of job; the weights favour the
# large batches that carry most strings, while every batch path (1, 7, 64, 1000) runs often.
JOBS = {"batch1000": (1000, 1, 0), "batch64": (64, 4, 0), "batch7": (7, 10, 0), "single": (1, 20, 0),
        "long": (3, 1, 1)}
JOB_WEIGHTS = {"batch1000": 40, "batch64": 20, "batch7": 18, "single": 14, "long": 8}


def job_batches(kind: str, seed: int) -> list[list[str]]:
    """The batches of one job, a function of (kind, seed) alone."""
    rng = random.Random(seed)
    size, calls, long_lines = JOBS[kind]
    batches = []
    for _ in range(calls):
        batch = [short_text(rng) for _ in range(size - long_lines)] + [long_line(rng) for _ in range(long_lines)]
        rng.shuffle(batch)
        batches.append(batch)
    return batches
