"""Which fast split rule a regex is, decided by what the regex does, not by how it is spelled.

A tokenizer.json may spell a named split (:data:`gputok.regex_split.PATTERNS`) its own way:
cl100k's pattern without possessive quantifiers and with ``\\s`` for its last ``\\s+`` splits
as cl100k's; Llama 3's (``llama3``) splits as cl100k's except on a whitespace run with a newline
at the end of a text (``"a\\n  "``: cl100k a, ``"\\n  "``; Llama 3 a, ``"\\n"``, ``"  "``), so
it is a rule of its own. :func:`rule_for` gives the named rule a regex is
equivalent to, so that such a file takes the rule's numba matcher instead of the ``regex``
module (~3 MB/s against 11-25 MB/s); any other regex gets None and runs through the module.

How equivalence is decided (:func:`equivalent`)
-----------------------------------------------
The regex module's matches of the pattern (found as :func:`gputok.regex_split.split_with_regex`
finds them, with the references' Unicode classes) must be the rule's words, span for span, on:

1. every *class* of codepoints: two codepoints are in one class when the rule's matcher reads
   them alike (its kind and contraction-letter tables) and every atom of the pattern (each class
   escape, ``[...]`` set, literal character and ``.``, under the case-folding in force where it
   stands) matches both or neither. Neither the pattern nor the rule can tell two codepoints of
   one class apart, so one representative of each class (two, for the random texts) stands for
   all of them;
2. all texts of 1, 2 and 3 representatives (a sample of the 3s where there are many classes),
   every pair of classes as runs (``aaaab``...), ~20k random texts made of runs of
   representatives, and a fixed multilingual probe text.

A pattern with a construct outside plain atoms, groups, alternation, quantifiers, lookarounds
and anchors (a backreference, ``\\b``, a flag other than ``i``...) is never called equivalent:
it runs through the ``regex`` module. A text of 3 classes cannot show a difference that needs
more (``\\p{N}{1,4}`` against ``{1,3}`` needs 4 digits), hence the runs; the tests add a
hypothesis corpus on real and random text. A verdict costs ~1-3 s the first time a spelling is
seen (mostly one pass of the ``regex`` module over all codepoints per new atom) and is cached on
disk per pattern and ``regex`` version, so loading the file again costs a file read. Patterns
that differ from every rule on the probe text (most) are rejected in milliseconds.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from . import regex_split, unicode
from .ingest import codepoints

#: The rules a pattern is compared with, in order (gpt2's aliases r50k/p50k are the same rule).
CANDIDATES = ("cl100k", "llama3", "qwen2", "gpt2", "o200k")
_VERDICT_VERSION = 3  # of the cached verdicts: bump when the decision procedure changes (3: anchors read per syntax)

_PROBE_TEXTS = [
    regex_split.PATTERNS["gpt2"], "Hello world, it's 2024! x=1+2; foo_bar\n\t  Ünïcode 中文字 😀 ...",
    "I'LL say: you're right, they've 'd it. DON'T 's's's 'S 'Re 'lL ſ'ſ", "1 12 123 1234 12345 1234567 ١٢٣٤ ²³⁴⁵",
    "a  b   c\t\td \n\n  e\r\n\r\nf  \n", "  leading and trailing  ", "x\u00a0y\u3000z \u2028w\u0085v",
    "camelCase HTTPServer ABC中DEF naïve café résumé e\u0301 Ωmega", "!!a ?!? ...\n\n// path/to/x //\n",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. नमस्ते दुनिया। こんにちは世界 안녕하세요",
    "tab\there 'quoted' \"double\" (paren) [bracket] {brace} <angle> #hash @at $5.00 100% a&b",
    "", " ", "\n", "'", "a", "1",
]


def rule_for(pattern: str, ruby: bool = True) -> str | None:
    """The named split rule ``pattern`` is equivalent to (:func:`equivalent`), or None; ``ruby``:
    the pattern is a tokenizer.json's, read as huggingface reads it (``regex_split.ruby_anchors``),
    else tiktoken's.

    >>> rule_for(regex_split.PATTERNS["cl100k"])
    'cl100k'
    >>> llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
    >>> rule_for(llama3.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'(?i:[sdmt]|ll|ve|re)"))
    'llama3'
    >>> rule_for(r"\\w+|\\s+") is None
    True
    """
    for name, spelled in regex_split.PATTERNS.items():
        if pattern in (spelled, regex_split.hf_spelling(spelled)):
            return regex_split._RULE[name]
    return _cached_verdict(pattern, ruby)


@functools.lru_cache(maxsize=256)
def _cached_verdict(pattern: str, ruby: bool) -> str | None:
    import regex

    key = hashlib.sha256(f"{_VERDICT_VERSION}\0{regex.__version__}\0{int(ruby)}\0{pattern}".encode(
        "utf-8", "surrogatepass"))
    verdict = unicode.disk_cached(f"split-verdict-{key.hexdigest()[:32]}", lambda: _verdict(pattern, ruby))
    index = int(verdict["rule"][0])
    return CANDIDATES[index] if index >= 0 else None


def _verdict(pattern: str, ruby: bool) -> dict[str, np.ndarray]:
    try:
        compiled = regex_split.compile_pattern(pattern, ruby)
    except Exception:  # noqa: BLE001 - any pattern the module refuses is no rule (the caller reports it)
        return {"rule": np.array([-1])}
    for index, rule in enumerate(CANDIDATES):
        if _agrees(compiled, rule, _PROBE_TEXTS) and equivalent(pattern, rule, ruby=ruby):
            return {"rule": np.array([index])}
    return {"rule": np.array([-1])}


def _agrees(compiled, rule: str, texts: list[str]) -> bool:
    """Whether the matches of ``compiled`` in every text are exactly ``rule``'s words."""
    words = regex_split.split(codepoints(texts), rule)
    spans: list[int] = []
    base = 0
    for text in texts:
        for s, e in regex_split._matches(compiled, text):
            spans += (base + s, base + e)
        base += len(text)
    ours = np.stack([words.starts.numpy(), words.ends.numpy()], axis=1).ravel()
    return len(spans) == ours.size and bool(np.array_equal(np.array(spans, dtype=np.int64), ours))


def equivalent(pattern: str, rule: str, *, random_texts: int = 20_000, seed: int = 0, ruby: bool = True) -> bool:
    """Whether ``pattern``'s matches are ``rule``'s words on every class of codepoints in all
    short combinations and on random runs of them (the module docstring); ``ruby``: as :func:`rule_for`."""
    atoms = pattern_atoms(pattern)
    if atoms is None:
        return False
    compiled = regex_split.compile_pattern(pattern, ruby)
    low, high = _representatives(rule, tuple(sorted(set(atoms))))
    return _agrees(compiled, rule, _texts(low, high, random_texts, seed) + _PROBE_TEXTS)


def _texts(low: np.ndarray, high: np.ndarray, random_texts: int, seed: int) -> list[str]:
    """The test texts of :func:`equivalent` from each class's lowest and highest codepoint."""
    reps = [chr(c) for c in low.tolist()]
    both = reps + [chr(c) for c in high.tolist()]
    texts = reps + [a + b for a in reps for b in reps]
    rng = np.random.default_rng(seed)
    if len(reps) ** 3 <= 60_000:
        texts += [a + b + c for a in reps for b in reps for c in reps]
    else:
        picks = rng.integers(0, len(reps), size=(60_000, 3))
        texts += ["".join(reps[i] for i in row) for row in picks.tolist()]
    texts += [a * k + b * j for a in reps for b in reps for k in (2, 3, 4, 5) for j in (1, 2)]
    lengths = np.array([1, 1, 1, 2, 2, 3, 4, 5, 7])
    for _ in range(random_texts):
        runs = rng.integers(2, 9)
        chars = rng.integers(0, len(both), size=runs).tolist()
        counts = lengths[rng.integers(0, lengths.size, size=runs)].tolist()
        texts.append("".join(both[c] * n for c, n in zip(chars, counts)))
    return texts


def _representatives(rule: str, atoms: tuple[tuple[str, bool], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) codepoint of each class: the codepoints with one rule kind, one
    contraction-letter code and the same answer from every atom (surrogates left out: the text
    never holds them)."""
    _, family, _ = regex_split._SPLITTERS[regex_split._RULE[rule]]
    columns = [regex_split._kind_table(family).numpy(), regex_split._letter_table(rule == "gpt2").numpy()]
    masks = [atom_mask(atom, ignore_case) for atom, ignore_case in atoms]
    if masks:
        columns += list(np.packbits(np.stack(masks), axis=0))
    signature = np.ascontiguousarray(np.stack(columns, axis=1))
    keep = np.ones(unicode.MAX_CODEPOINT, dtype=bool)
    keep[0xD800:0xE000] = False
    where = np.nonzero(keep)[0]
    rows = signature[where].view(np.dtype((np.void, signature.shape[1]))).ravel()
    _, first = np.unique(rows, return_index=True)
    _, last_reversed = np.unique(rows[::-1], return_index=True)
    return where[np.sort(first)], where[rows.size - 1 - last_reversed]


def pattern_atoms(pattern: str) -> list[tuple[str, bool]] | None:
    """The one-character atoms of ``pattern`` as (atom, case-insensitive there), or None if the
    pattern holds a construct that reads more than single characters (a backreference, ``\\b``,
    a named or conditional group, a flag other than ``i``): then no class argument holds.

    >>> pattern_atoms(r"'(?i:[sd]|ll)|\\p{L}+|\\s{1,3}")
    [("'", False), ('[sd]', True), ('l', True), ('l', True), ('\\\\p{L}', False), ('\\\\s', False)]
    >>> pattern_atoms(r"(\\w)\\1") is None
    True
    """
    import regex

    flags_re = regex.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
    quantifier = regex.compile(r"\{\d*(?:,\d*)?\}")
    atoms: list[tuple[str, bool]] = []
    scopes = [False]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern):
                return None
            letter = pattern[i + 1]
            if letter in "AZz":  # anchors: positions, no characters
                i += 2
                continue
            if letter in _UNSUPPORTED_ESCAPES or (letter.isdigit() and letter != "0"):
                return None
            end = _escape_end(pattern, i)
            atoms.append((pattern[i:end], scopes[-1]))
            i = end
        elif ch == "[":
            end, _ = regex_split._set_end(pattern, i)
            atoms.append((pattern[i:end], scopes[-1]))
            i = end
        elif ch == "(":
            if pattern.startswith("(?", i):
                flags = flags_re.match(pattern, i)
                if flags is not None:
                    on, off = flags.group(1), flags.group(2) or ""
                    if set(on + off) - {"i"}:
                        return None
                    ignore_case = (scopes[-1] or "i" in on) and "i" not in off
                    if flags.group(3) == ")":
                        scopes[-1] = ignore_case
                    else:
                        scopes.append(ignore_case)
                    i = flags.end()
                    continue
                for opener in ("(?=", "(?!", "(?<=", "(?<!", "(?>"):
                    if pattern.startswith(opener, i):
                        scopes.append(scopes[-1])
                        i += len(opener)
                        break
                else:
                    return None  # named, conditional, comment or other groups
                continue
            scopes.append(scopes[-1])
            i += 1
        elif ch == ")":
            if len(scopes) > 1:
                scopes.pop()
            i += 1
        elif ch in "|*+?^$":
            i += 1
        elif ch == "{" and (q := quantifier.match(pattern, i)) is not None:
            i = q.end()
        else:
            atoms.append((ch, scopes[-1]))
            i += 1
    return atoms


# Escapes that read positions or several characters (\b, \G, \X, backreferences, named lists...).
_UNSUPPORTED_ESCAPES = frozenset("bBGKXkgQENRLlCmMJ")


def _escape_end(pattern: str, i: int) -> int:
    """Index after the escape at ``pattern[i]``, hex escapes (``\\x41``, ``\\x{41}``, ``\\u0041``,
    ``\\U00000041``) whole."""
    letter = pattern[i + 1]
    if letter == "x" and pattern.startswith("{", i + 2):
        close = pattern.find("}", i + 3)
        return len(pattern) if close < 0 else close + 1
    width = {"x": 2, "u": 4, "U": 8}.get(letter)
    if width is not None:
        return min(i + 2 + width, len(pattern))
    return regex_split._escape_end(pattern, i)


@functools.lru_cache(maxsize=512)
def atom_mask(atom: str, ignore_case: bool) -> np.ndarray:
    """Which codepoints the one-character ``atom`` matches, with the references' Unicode classes
    (:func:`gputok.regex_split.with_table_classes`); asked of the ``regex`` module once per atom
    and ``regex`` version (~0.2 s for a class, cached on disk)."""
    import regex

    key = hashlib.sha256(f"{regex.__version__}\0{int(ignore_case)}\0{atom}".encode("utf-8", "surrogatepass"))

    def build() -> dict[str, np.ndarray]:
        spelled = regex_split._atom_with_table_classes(atom, ignore_case) if atom.startswith(("\\", "[")) else atom
        wrapped = f"(?i:{spelled})" if ignore_case else f"(?:{spelled})"
        everything = "".join(map(chr, range(unicode.MAX_CODEPOINT)))
        return {"mask": np.packbits(regex_split._regex_mask(wrapped, everything))}

    packed = unicode.disk_cached(f"split-atom-{key.hexdigest()[:32]}", build)["mask"]
    return np.unpackbits(packed, count=unicode.MAX_CODEPOINT).astype(bool)
