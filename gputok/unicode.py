"""Per-codepoint Unicode tables, built once from :mod:`unicodedata` and cached on disk.

Normalizers and pre-tokenizers never look at characters one at a time: they index these tables
with a whole tensor of codepoints. Each table covers all 0x110000 codepoints:

- ``category``: the general category as an index into :data:`CATEGORIES` (uint8).
- ``nfd``: the canonical decomposition of each codepoint alone, as a ragged map.
- ``lower``: the full lowercase mapping of each codepoint alone (``'İ' -> 'i̇'``), as a ragged map.

Building takes ~2 s of Python; the result is cached (``$GPUTOK_CACHE`` or ``~/.cache/gputok``)
keyed by the Unicode version of this Python, so a newer Python never reads stale tables.
Memory: 1 MB for ``category``, which stays loaded; the ragged maps (~18 MB) are read when a
normalizer table is built (those are cached on disk too) and then dropped.

What it leaves out: NFD's canonical reordering of combining marks is not applied (the tables are
per codepoint); normalizers that need it for parity say so.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

import numpy as np
import torch

from ._atomic import write_atomic
from ._cache import cache_dir
from .ragged import Ragged, expand_rows, offsets_from_lengths

MAX_CODEPOINT = 0x110000
REPLACEMENT_CHAR = 0xFFFD
CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn"
).split()
_TABLE_VERSION = 1

# Rust's char::is_whitespace (the White_Space property), which unicodedata does not expose.
WHITE_SPACE = (
    list(range(0x09, 0x0E)) + [0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B))
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)

# The CJK blocks that BERT pads with spaces, as the reference lists them (0x2B920, not 0x2B820).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def _ragged_map(strings: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    """Identity map over all codepoints except ``strings``: returns (lengths, values)."""
    lengths = np.ones(MAX_CODEPOINT, dtype=np.int32)
    for cp, s in strings.items():
        lengths[cp] = len(s)
    values = np.zeros(int(lengths.sum()), dtype=np.int32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    identity = lengths == 1
    values[starts[identity]] = np.arange(MAX_CODEPOINT, dtype=np.int32)[identity]
    for cp, s in strings.items():
        values[starts[cp] : starts[cp] + len(s)] = [ord(ch) for ch in s]
    return lengths, values


def _build() -> dict[str, np.ndarray]:
    index = {name: i for i, name in enumerate(CATEGORIES)}
    category = np.empty(MAX_CODEPOINT, dtype=np.uint8)
    nfd: dict[int, str] = {}
    lower: dict[int, str] = {}
    for cp in range(MAX_CODEPOINT):
        ch = chr(cp)
        category[cp] = index[unicodedata.category(ch)]
        if 0xD800 <= cp < 0xE000:
            continue
        decomposed = unicodedata.normalize("NFD", ch)
        if decomposed != ch:
            nfd[cp] = decomposed
        lowered = ch.lower()
        if lowered != ch:
            lower[cp] = lowered
    nfd_lengths, nfd_values = _ragged_map(nfd)
    lower_lengths, lower_values = _ragged_map(lower)
    return dict(category=category, nfd_lengths=nfd_lengths, nfd_values=nfd_values,
                lower_lengths=lower_lengths, lower_values=lower_values)


def from_runs(runs: str) -> np.ndarray:
    """One uint8 value per codepoint from a generated module's run-length code ('length:value' in
    hex, space-separated, in codepoint order: ``tools/make_split_classes.run_length_body``)."""
    pairs = np.array([int(x, 16) for run in runs.split() for x in run.split(":")])
    table = np.repeat(pairs[1::2].astype(np.uint8), pairs[::2])
    assert len(table) == MAX_CODEPOINT
    return table


def disk_cached(name: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Arrays saved under the cache dir as ``name`` (keyed by this Python's Unicode version); built
    each time where the cache dir cannot be written."""
    path = cache_dir() / f"{name}-unicode{unicodedata.unidata_version}-v{_TABLE_VERSION}.npz"
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, KeyError, EOFError):
        pass
    arrays = build()

    def save(tmp) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic({path: save})
    except (OSError, ValueError):  # a cache dir that cannot be written only costs the build again next time
        pass
    return arrays


def _tables() -> dict[str, np.ndarray]:
    return disk_cached("unicode", _build)


@functools.lru_cache(maxsize=1)
def category() -> torch.Tensor:
    """The only table kept in memory (1 MB): the ragged maps serve to build normalizer tables,
    which are cached on disk themselves, so holding their 18 MB would only raise the RSS."""
    return torch.from_numpy(_tables()["category"])


def category_mask(names: str) -> torch.Tensor:
    """Boolean table over all codepoints: is the category one of ``names`` (e.g. ``"Mn Me"``)?"""
    wanted = torch.zeros(len(CATEGORIES), dtype=torch.bool)
    for name in names.split():
        wanted[CATEGORIES.index(name)] = True
    return wanted[category().long()]


def nfd_map() -> Ragged:
    t = _tables()
    return Ragged(torch.from_numpy(t["nfd_values"]), offsets_from_lengths(torch.from_numpy(t["nfd_lengths"]).long()))


def lower_map() -> Ragged:
    t = _tables()
    return Ragged(torch.from_numpy(t["lower_values"]), offsets_from_lengths(torch.from_numpy(t["lower_lengths"]).long()))


def identity_map() -> Ragged:
    n = MAX_CODEPOINT
    return Ragged(torch.arange(n, dtype=torch.int32), torch.arange(n + 1, dtype=torch.int64))


def compose(table: Ragged, step: Ragged) -> Ragged:
    """The map that applies ``table`` and then ``step`` (both per-codepoint ragged maps)."""
    expanded, _ = expand_rows(step, table.values.long())
    return Ragged(expanded.values, expanded.offsets[table.offsets])


def filter_map(drop: torch.Tensor) -> Ragged:
    """The map that deletes codepoints where ``drop`` is True and keeps the rest."""
    values = torch.arange(MAX_CODEPOINT, dtype=torch.int32)[~drop]
    return Ragged(values, offsets_from_lengths((~drop).long()))


def replace_map(mask: torch.Tensor, replacement: int) -> Ragged:
    values = torch.arange(MAX_CODEPOINT, dtype=torch.int32)
    values[mask] = replacement
    return Ragged(values, torch.arange(MAX_CODEPOINT + 1, dtype=torch.int64))


def pad_map(mask: torch.Tensor, pad: int) -> Ragged:
    """Surround codepoints where ``mask`` is True with ``pad`` on both sides."""
    offsets = offsets_from_lengths(1 + 2 * mask.long())
    values = torch.full((int(offsets[-1]),), pad, dtype=torch.int32)
    values[offsets[:-1] + mask.long()] = torch.arange(MAX_CODEPOINT, dtype=torch.int32)
    return Ragged(values, offsets)


def override_map(table: Ragged, overrides: dict[int, str]) -> Ragged:
    """``table`` with the rows of ``overrides`` (codepoint -> replacement string) replaced."""
    if not overrides:
        return table
    lengths = table.offsets[1:] - table.offsets[:-1]
    keys = torch.tensor(list(overrides), dtype=torch.int64)
    keep = torch.ones(table.values.numel(), dtype=torch.bool)
    keep[expand_rows(Ragged(torch.arange(table.values.numel()), table.offsets), keys)[0].values] = False
    lengths[keys] = torch.tensor([len(s) for s in overrides.values()])
    offsets = offsets_from_lengths(lengths)
    values = torch.empty(int(offsets[-1]), dtype=torch.int32)
    new_rows = torch.zeros(values.numel(), dtype=torch.bool)
    replaced = expand_rows(Ragged(torch.arange(values.numel()), offsets), keys)[0].values
    new_rows[replaced] = True
    values[new_rows] = torch.tensor([ord(ch) for s in overrides.values() for ch in s], dtype=torch.int32)
    values[~new_rows] = table.values[keep]
    return Ragged(values, offsets)


def step_map(step: str, *, overrides: bool = True) -> Ragged:
    """One BertNormalizer step as a per-codepoint map, with the reference's Unicode quirks.

    ``overrides=False`` gives the plain unicodedata rule (what tools/make_unicode_overrides.py
    compares the reference against).
    """
    if step == "clean_text":
        keep = torch.zeros(MAX_CODEPOINT, dtype=torch.bool)
        keep[[0x09, 0x0A, 0x0D]] = True
        drop = category_mask("Cc Cf Co Cs") & ~keep
        drop[[0, REPLACEMENT_CHAR]] = True
        table = compose(filter_map(drop), replace_map(white_space_mask(), ord(" ")))
    elif step == "strip_accents":
        table = compose(nfd_map(), filter_map(category_mask("Mn")))
    elif step == "lowercase":
        table = lower_map()
    else:
        raise ValueError(f"unknown step {step!r}; known: clean_text, strip_accents, lowercase")
    if overrides:
        from . import _reference_unicode

        table = override_map(table, getattr(_reference_unicode, step.upper()))
    return table


def bert_punctuation_mask(*, overrides: bool = True) -> torch.Tensor:
    """BERT's punctuation: ASCII punctuation or a P* category (with the reference's table quirks)."""
    mask = category_mask("Pc Pd Ps Pe Pi Pf Po")
    mask[[ord(ch) for ch in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]] = True
    if overrides:
        from . import _reference_unicode

        flips = torch.tensor(_reference_unicode.PUNCTUATION_FLIPS, dtype=torch.int64)
        mask[flips] = ~mask[flips]
    return mask


def white_space_mask() -> torch.Tensor:
    mask = torch.zeros(MAX_CODEPOINT, dtype=torch.bool)
    mask[WHITE_SPACE] = True
    return mask


def cjk_mask() -> torch.Tensor:
    mask = torch.zeros(MAX_CODEPOINT, dtype=torch.bool)
    for lo, hi in CJK_RANGES:
        mask[lo : hi + 1] = True
    return mask
