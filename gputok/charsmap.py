"""SentencePiece normalization on tensors: the precompiled charsmap and the whitespace rules.

A SentencePiece model carries its normalization rules (nmt_nfkc, nfkc, ...) compiled into
``precompiled_charsmap``: a little-endian uint32 size, a Darts-clone double-array trie over the
UTF-8 bytes of the source strings, and a blob of NUL-terminated replacement strings the trie's
values point into (sentencepiece ``normalizer.cc``; huggingface's ``spm_precompiled`` crate reads
the same format). SentencePiece rewrites a sentence left to right, each time with the *longest*
rule matching at the current position (or the character itself), and then, as it appends each
rewritten unit, applies its whitespace rules: leading spaces dropped, a space at the start of a
unit dropped after a space (``remove_extra_whitespaces``), a ``▁`` prefix (``add_dummy_prefix``),
spaces written as ``▁`` (``escape_whitespaces``), trailing ``▁`` dropped.

Here the trie is read once into rules over codepoints (its Darts-clone units indexed by
``index ^ label``, a few array passes; the rules are cached on disk): rules whose source is one
codepoint become a ragged map over all codepoints (one gather for the whole batch, as every
normalizer here); rules with longer sources (composition sequences, Hangul jamo) go into one
hash map per source length, looked up from the few positions whose first two codepoints can
start one, and the longest match wins. Which of two overlapping long matches wins is settled by
a few fixpoint rounds over the long-match positions, not by a walk per text. (SentencePiece's
copy of user-defined pieces written in the text is ``gputok.models.user_pieces.UserPieceNormalizer``.)
Leaves out SentencePiece's one-U+FFFD-per-invalid-byte rule (ingest replaces invalid UTF-8 as Python does).
Memory: the 0x110000-row map (~9 MB), ~16 MB of hash maps for nmt_nfkc's 220k long rules, and a
few int64 tensors the size of the batch.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import torch

from . import _dispatch, unicode
from .hashing import HashMap, mix64
from .ragged import Ragged, expand_rows, nonzero, offsets_from_lengths, positions_in_rows, row_ids, span_indices
from .kernels.charsmap_numba import charsmap_rewrite_numba
from .kernels.charsmap_numba import key_hashes_numba
from .kernels.sentencepiece_whitespace import whitespace_rules_numba

SPACE, ESCAPED_SPACE = ord(" "), 0x2581  # '▁'
_VERSION = 1  # of the cached rule arrays


def parse_charsmap(blob: bytes) -> dict[str, str]:
    """The rewrite rules of a precompiled charsmap, source -> replacement.

    >>> rules = parse_charsmap(_example_charsmap())
    >>> sorted(rules.items())
    [('a', 'b'), ('ab', 'X')]
    """
    if len(blob) < 4:
        raise ValueError(f"precompiled_charsmap of {len(blob)} bytes is truncated (needs a 4-byte trie size)")
    trie_size = int.from_bytes(blob[:4], "little")
    if trie_size % 4 or 4 + trie_size > len(blob):
        raise ValueError(f"precompiled_charsmap says its trie has {trie_size} bytes but holds {len(blob) - 4}")
    units = np.frombuffer(blob[4:4 + trie_size], dtype="<u4").astype(np.int64)
    normalized = blob[4 + trie_size:]
    if units.size == 0:
        return {}
    _check_trie(units, len(normalized))

    def offset(u):  # Darts-clone unit layout
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    # Breadth-first from the root. The children of a node with child base ``b`` are the units
    # ``i`` labelled ``c = i ^ b``: indexing every labelled unit by ``i ^ label`` finds them all
    # with a sort and a search, where probing 255 labels per node costs a 255x larger array.
    index = np.arange(units.size, dtype=np.int64)
    label = units & ((1 << 31) | 0xFF)
    labelled = index[(label > 0) & (label < 256)]
    implied = labelled ^ label[labelled]
    order = np.argsort(implied, kind="stable")
    implied, labelled = implied[order], labelled[order]
    frontier = np.array([0], dtype=np.int64)
    keys = np.zeros((1, 0), dtype=np.uint8)
    leaf_keys, leaf_values = [], []
    for _ in range(64):  # keys are at most a few codepoints; a deeper chain is a damaged trie
        base = frontier ^ offset(units[frontier])
        lo, hi = np.searchsorted(implied, base), np.searchsorted(implied, base, side="right")
        count = hi - lo
        parent = np.repeat(np.arange(frontier.size), count)
        within = np.arange(parent.size) - np.repeat(np.cumsum(count) - count, count)
        frontier = labelled[np.repeat(lo, count) + within]
        if not frontier.size:
            break
        keys = np.concatenate([keys[parent], label[frontier].astype(np.uint8)[:, None]], 1)
        leaf = ((units[frontier] >> 8) & 1) == 1
        leaf_keys.append(keys[leaf])
        leaf_values.append(units[np.minimum(frontier[leaf] ^ offset(units[frontier[leaf]]), units.size - 1)]
                           & ((1 << 31) - 1))
    else:
        raise ValueError("precompiled_charsmap has keys over 64 bytes long: the trie is damaged")
    rules: dict[str, str] = {}
    for key, value in ((bytes(k), v) for keys_, values_ in zip(leaf_keys, leaf_values)
                       for k, v in zip(keys_.tolist(), values_.tolist())):
        end = normalized.find(b"\0", value)
        if value >= len(normalized) or end < 0:
            raise ValueError(f"precompiled_charsmap rule {key!r} points outside its strings ({value})")
        try:
            rules[key.decode("utf-8")] = normalized[value:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"precompiled_charsmap rule {key!r} is not UTF-8: {e}") from e
    return rules


def _check_trie(units: np.ndarray, strings: int) -> None:
    """SentencePiece's check of the double array (darts-clone ``DoubleArray::validate``, given the
    size of the normalized strings): the root is a node whose children lie inside the array, and
    so do those of every labelled unit; a node that has a leaf points at a leaf unit; every
    leaf's value (where its rule's output starts) lies inside the ``strings`` bytes."""
    def base(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    root = units[0]
    root_ok = (root & ((1 << 31) | 0xFF)) == 0 and not (root >> 8) & 1 and 0 < base(root) and (base(root) | 0xFF) < units.size
    labelled = np.nonzero((units & ((1 << 31) | 0xFF)) <= 0xFF)[0]
    offsets = base(units[labelled])
    inside = ((labelled ^ offsets) | 0xFF) < units.size
    if not root_ok or not np.all(inside | (offsets == 0)):
        raise ValueError("precompiled_charsmap is invalid: its trie points outside itself")
    # a node that has a leaf points at a leaf unit (sentencepiece 0.2.3 refuses the model otherwise)
    has_leaf = labelled[(units[labelled] >> 8) & 1 == 1]
    if has_leaf.size and not np.all(units[(has_leaf ^ base(units[has_leaf])) % units.size] >> 31 == 1):
        raise ValueError("precompiled_charsmap is invalid: a node's leaf is no leaf unit")
    leaves = units[units >> 31 == 1] & 0x7FFFFFFF
    if leaves.size and int(leaves.max()) >= strings:
        raise ValueError(f"precompiled_charsmap is invalid: a rule's output starts at byte {int(leaves.max())} "
                         f"of {strings} bytes of normalized strings")


def check_charsmap(blob: bytes, sentencepiece: bool = False) -> None:
    """The checks of :func:`parse_charsmap` that need no trie walk (sizes, the double array), for
    loaders; empty means no rules. ``sentencepiece``: SentencePiece's loader's own checks of the
    blob too (huggingface's makes none of them): a trie of whole blocks of 1,024 bytes, at least
    one, and normalized strings after it that end in a NUL."""
    if not blob:
        return
    if len(blob) < 4 or sentencepiece and len(blob) == 4:
        raise ValueError(f"precompiled_charsmap of {len(blob)} bytes is truncated (needs a 4-byte trie size"
                         + (" and more)" if sentencepiece else ")"))
    trie_size = int.from_bytes(blob[:4], "little")
    if trie_size % 4 or 4 + trie_size > len(blob):
        raise ValueError(f"precompiled_charsmap says its trie has {trie_size} bytes but holds {len(blob) - 4}")
    if sentencepiece:
        if trie_size == 0 or trie_size % 1024:
            raise ValueError(f"precompiled_charsmap is invalid: its trie has {trie_size} bytes, not whole blocks "
                             "of 1,024 (SentencePiece: 'Trie data size is not divisible by 1024')")
        if 4 + trie_size == len(blob):
            raise ValueError("precompiled_charsmap is invalid: no normalized strings follow its trie "
                             "(SentencePiece: 'Trie data size exceeds the input blob size')")
        if not blob.endswith(b"\0"):
            raise ValueError("precompiled_charsmap is invalid: its normalized strings do not end in a NUL "
                             "(SentencePiece: 'normalized block must be null terminated')")
    if trie_size:
        _check_trie(np.frombuffer(blob[4:4 + trie_size], dtype="<u4").astype(np.int64), len(blob) - 4 - trie_size)


class Charsmap:
    """Longest-match rewrite of codepoints by the rules of a precompiled charsmap.

    >>> cm = Charsmap(_example_charsmap())
    >>> out, unit = cm.rewrite(Ragged.from_lengths(torch.tensor([97, 98, 97, 99]), torch.tensor([4])))
    >>> "".join(map(chr, out.values.tolist())), unit.tolist()
    ('Xbc', [0, 2, 3])
    """

    def __init__(self, blob: bytes) -> None:
        self.blob = bytes(blob)
        check_charsmap(self.blob)  # before the disk cache: a cached damaged blob is refused too
        self.digest = hashlib.sha256(self.blob).hexdigest()[:16]
        # Reading the trie costs ~2 s of Python per rule set, so its rules are cached on disk.
        arrays = unicode.disk_cached(f"charsmap-{self.digest}-v{_VERSION}", lambda: _rule_arrays(self.blob))
        self._arrays = arrays
        key = Ragged.from_lengths(torch.from_numpy(arrays["key_values"]), torch.from_numpy(arrays["key_lengths"]))
        value = Ragged.from_lengths(torch.from_numpy(arrays["value_values"]), torch.from_numpy(arrays["value_lengths"]))
        lengths = key.lengths()
        single = nonzero(lengths == 1)
        self.table = _single_table(key.values[key.offsets[single]].long(), _rows(value, single))
        longer = nonzero(lengths > 1)
        self.long_keys, self.long_table = _rows(key, longer), _rows(value, longer)
        self.max_long = int(lengths.max()) if lengths.numel() else 0
        self._long_maps = None
        # A long rule can start only where its first two codepoints could: two table lookups
        # leave only the few such positions (combining sequences, Hangul jamo) for the hash lookups.
        starts = torch.zeros(unicode.MAX_CODEPOINT, dtype=torch.bool)
        seconds = torch.zeros(unicode.MAX_CODEPOINT, dtype=torch.bool)
        if longer.numel():
            starts[self.long_keys.values[self.long_keys.offsets[:-1]].long()] = True
            seconds[self.long_keys.values[self.long_keys.offsets[:-1] + 1].long()] = True
        # The common case in one gather: per codepoint, its one-codepoint rewrite (0 with bit 23
        # set where a rule writes zero or several), with bits 21 and 22 set where it can start /
        # continue a long rule.
        one = self.table.offsets[1:] - self.table.offsets[:-1] == 1
        first = self.table.offsets[:-1].clamp(max=max(self.table.values.numel() - 1, 0))
        direct = torch.where(one, self.table.values[first].long(), -1)
        self.direct = (direct.clamp(min=0) | starts.long() << 21 | seconds.long() << 22
                       | (~one).long() << 23).int()
        self._on: dict = {}

    @functools.cached_property
    def huggingface(self):
        """huggingface's reading of these rules, a grapheme cluster at a time
        (:mod:`gputok.huggingface_precompiled`)."""
        from .huggingface_precompiled import HuggingfacePrecompiled

        return HuggingfacePrecompiled(self._arrays, self.digest)

    @property
    def long_maps(self) -> dict:
        """One hash map per key length, from the hash of the key's codepoints to its rule (the torch
        twin's; built on first use, as the numba kernel has arrays of its own)."""
        if self._long_maps is None:
            maps = {}
            for length in range(2, self.max_long + 1):
                rules = nonzero(self.long_keys.lengths() == length)
                if rules.numel():
                    grams = self.long_keys.values[self.long_keys.offsets[rules][:, None] + torch.arange(length)].long()
                    maps[length] = HashMap(_gram_hashes(grams.T)[-1], rules)
            self._long_maps = maps
        return self._long_maps

    def _tensors(self, device: torch.device):
        if device not in self._on:
            self._on[device] = (self.table.to(device), self.long_table.to(device), self.long_keys.to(device),
                                self.direct.to(device))
        return self._on[device]

    def rewrite(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        """Rewritten codepoints (one row per text) and, for each, the input index its unit starts at."""
        device = text.device
        if _dispatch.on_cpu_kernels(device):
            arrays = self.numpy_rules()
            out, offsets, unit = charsmap_rewrite_numba(text.values.numpy(), text.offsets.numpy(), *arrays)
            return Ragged(torch.from_numpy(out), torch.from_numpy(offsets)), torch.from_numpy(unit)
        table, long_table, long_keys, direct = self._tensors(device)
        values = text.values.long()
        n = values.numel()
        packed = direct.index_select(0, values)
        candidates = None
        if self.long_maps and n > 1:
            # Codepoints that can continue a long rule are rare (combining marks, jamo): find
            # those first, then keep the ones whose predecessor can start one.
            maybe = nonzero(packed[1:] & (1 << 22))
            maybe = maybe[(packed.index_select(0, maybe) & (1 << 21)) != 0]
            candidates = maybe[~torch.isin(maybe + 1, text.offsets)]  # a rule never spans two texts
        if candidates is None or not candidates.numel():
            # The common case: every codepoint is a unit of its own.
            if not bool((packed >= 1 << 23).any()):  # and each becomes one codepoint: the gather is all
                return Ragged(packed & ((1 << 21) - 1), text.offsets), torch.arange(n, device=device)
            out, unit = expand_rows(table, values)
            return Ragged(out.values, out.offsets[text.offsets]), unit
        rule = torch.full((n,), -1, dtype=torch.int64, device=device)
        span = torch.ones(n, dtype=torch.int64, device=device)
        rule_c, span_c = self._longest(values, text.offsets, candidates)
        rule[candidates], span[candidates] = rule_c, span_c
        # A position is a unit start unless an earlier unit start's long match covers it.
        start = torch.ones(n, dtype=torch.bool, device=device)
        long_pos = nonzero(span > 1)
        if long_pos.numel():
            while True:
                chosen = long_pos[start[long_pos]]
                cover = torch.zeros(n + 1, dtype=torch.int64, device=device)
                cover.index_add_(0, chosen + 1, torch.ones_like(chosen))
                cover.index_add_(0, chosen + span[chosen], -torch.ones_like(chosen))
                new_start = torch.cumsum(cover[:n], 0) == 0
                if bool((new_start == start).all()):
                    break
                start = new_start
        unit = nonzero(start)
        is_long = rule[unit] >= 0
        out_len = torch.where(is_long, long_table.offsets[rule[unit].clamp(min=0) + 1]
                              - long_table.offsets[rule[unit].clamp(min=0)],
                              table.offsets[values[unit] + 1] - table.offsets[values[unit]])
        out_offsets = offsets_from_lengths(out_len)
        total = int(out_offsets[-1])
        unit_of = row_ids(out_offsets, total)
        within = positions_in_rows(out_offsets, total)
        from_long = is_long[unit_of]
        source_long = long_table.offsets[rule[unit].clamp(min=0)][unit_of] + within
        source_single = table.offsets[values[unit]][unit_of] + within
        out = torch.where(from_long, long_table.values[source_long.clamp(max=max(long_table.values.numel() - 1, 0))]
                          if long_table.values.numel() else 0,
                          table.values[source_single])
        # Row bounds: the output of the units that start inside each text.
        units_before = torch.searchsorted(unit, text.offsets)
        return Ragged(out.int(), out_offsets[units_before]), unit[unit_of]

    def numpy_rules(self) -> tuple:
        """The rules as the numba kernels' arrays (``kernels/charsmap_numba.py``: ``direct`` ..
        ``max_long``), made on first use."""
        return self.__dict__.get("_numpy_rules") or self._numpy_rules_build()

    def _numpy_rules_build(self) -> tuple:
        """:meth:`numpy_rules`, made."""
        keys = self.long_keys
        key_values, key_offsets = keys.values.int().numpy(), keys.offsets.numpy()
        hashes = key_hashes_numba(key_values, key_offsets)
        order = np.argsort(hashes, kind="stable")
        self._numpy_rules = (self.direct.numpy(), self.table.values.int().numpy(), self.table.offsets.numpy(),
                             hashes[order], order.astype(np.int64), key_values, key_offsets,
                             self.long_table.values.int().numpy(), self.long_table.offsets.numpy(), self.max_long)
        return self._numpy_rules

    def _longest(self, values: torch.Tensor, offsets: torch.Tensor, pos: torch.Tensor):
        """Longest long rule matching at each of ``pos`` (-1 if none) and its length (1 if none)."""
        _, _, long_keys, _ = self._tensors(values.device)
        text_end = offsets[1:][torch.searchsorted(offsets, pos, right=True) - 1]
        rule = torch.full_like(pos, -1)
        length = torch.ones_like(pos)
        grams = torch.stack([torch.where(pos + j < text_end, values[(pos + j).clamp(max=values.numel() - 1)], -1)
                             for j in range(self.max_long)])
        hashes = _gram_hashes(grams)
        for size, table in self.long_maps.items():
            found = table.get(hashes[size - 1])
            # Check the codepoints (a hash can collide) and that the text is long enough.
            ok = found >= 0
            start = long_keys.offsets[found.clamp(min=0)]
            for j in range(size):
                ok &= grams[j] == long_keys.values[start + j].long()
            rule = torch.where(ok, found, rule)
            length = torch.where(ok, size, length)
        return rule, length


def _gram_hashes(grams: torch.Tensor) -> torch.Tensor:
    """Row ``j``: a 63-bit hash of each column's first ``j + 1`` codepoints (-1 = past the text)."""
    out, h = [], torch.zeros_like(grams[0])
    for j in range(grams.shape[0]):
        h = mix64(h ^ (grams[j] + (j << 32)))
        out.append(h & ((1 << 63) - 1))
    return torch.stack(out)


def _rows(r: Ragged, rows: torch.Tensor) -> Ragged:
    index, offsets = span_indices(r.offsets[rows], r.lengths()[rows])
    return Ragged(r.values[index], offsets)


def _rule_arrays(blob: bytes) -> dict[str, np.ndarray]:
    rules = parse_charsmap(blob)
    keys, values = list(rules), list(rules.values())
    as_array = lambda strings: np.array([ord(c) for s in strings for c in s], dtype=np.int32)  # noqa: E731
    return {"key_values": as_array(keys), "key_lengths": np.array([len(k) for k in keys], dtype=np.int64),
            "value_values": as_array(values), "value_lengths": np.array([len(v) for v in values], dtype=np.int64)}


def _single_table(codepoints: torch.Tensor, values: Ragged) -> Ragged:
    """The one-codepoint rules as a ragged map over all codepoints (identity elsewhere)."""
    lengths = torch.ones(unicode.MAX_CODEPOINT, dtype=torch.int64)
    lengths[codepoints] = values.lengths()
    offsets = offsets_from_lengths(lengths)
    out = torch.arange(unicode.MAX_CODEPOINT, dtype=torch.int32)[row_ids(offsets, int(offsets[-1]))]
    index, _ = span_indices(offsets[codepoints], values.lengths())
    out[index] = values.values
    return Ragged(out, offsets)


def whitespace_rules(out: Ragged, unit: torch.Tensor, *, add_dummy_prefix: bool, remove_extra_whitespaces: bool,
                     escape_whitespaces: bool) -> tuple[Ragged, torch.Tensor]:
    """SentencePiece's whitespace handling of rewritten codepoints (``unit``: each one's unit start):
    the numba kernel ``gputok.kernels.sentencepiece_whitespace`` on CPU tensors, else
    :func:`whitespace_rules_torch` (same outputs).

    >>> text = Ragged.from_lengths(torch.tensor([32, 97, 32, 32, 98, 32]), torch.tensor([6]))
    >>> o, src = whitespace_rules(text, torch.arange(6), add_dummy_prefix=True, remove_extra_whitespaces=True,
    ...                           escape_whitespaces=True)
    >>> "".join(map(chr, o.values.tolist())), src.tolist()
    ('▁a▁b', [1, 1, 2, 4])
    """
    if not _dispatch.on_cpu_kernels(out.values.device):
        return whitespace_rules_torch(out, unit, add_dummy_prefix=add_dummy_prefix,
                                      remove_extra_whitespaces=remove_extra_whitespaces,
                                      escape_whitespaces=escape_whitespaces)
    values, offsets, source = whitespace_rules_numba(out.values.int().numpy(), out.offsets.numpy(), unit.long().numpy(),
                                                     add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces)
    return Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), torch.from_numpy(source)


def whitespace_rules_torch(out: Ragged, unit: torch.Tensor, *, add_dummy_prefix: bool, remove_extra_whitespaces: bool,
                           escape_whitespaces: bool) -> tuple[Ragged, torch.Tensor]:
    """:func:`whitespace_rules` in torch ops (any device).

    Returns the kept codepoints (spaces as ``▁`` when escaping, the dummy-prefix ``▁`` first) and the
    input index of each (the dummy prefix points at its text's first kept unit).

    >>> text = Ragged.from_lengths(torch.tensor([32, 97, 32, 32, 98, 32]), torch.tensor([6]))
    >>> o, src = whitespace_rules(text, torch.arange(6), add_dummy_prefix=True, remove_extra_whitespaces=True,
    ...                           escape_whitespaces=True)
    >>> "".join(map(chr, o.values.tolist())), src.tolist()
    ('▁a▁b', [1, 1, 2, 4])
    """
    values, device = out.values, out.values.device
    offsets = out.offsets
    n = values.numel()
    # The kept characters, as positions ``kept`` (None: all of them), each text's run of them
    # ``kept[begin[t]:end[t]]``; then one gather writes the output with its prefixes.
    kept, begin, end = None, offsets[:-1], offsets[1:]
    if remove_extra_whitespaces and n:
        is_space = values == SPACE
        after_space = torch.empty_like(is_space)
        after_space[0] = True
        after_space[1:] = is_space[:-1]
        starts = offsets[:-1]
        after_space.index_fill_(0, starts[starts < n], True)  # the start of a text counts as after a space
        drop = is_space & after_space
        dropped = nonzero(drop)
        # Only the spaces a unit's rewrite starts with go, and only where the unit follows a space
        # (a rule whose output holds "x  ", a user piece "  x" copied as one unit): rare, so
        # computed only when a dropped space shares its unit with the character before it.
        inside = dropped[dropped > 0]
        if bool((unit.index_select(0, inside) == unit.index_select(0, inside - 1)).any()):
            same_unit = torch.zeros_like(is_space)
            same_unit[1:] = unit[1:] == unit[:-1]
            non_space_before = torch.cumsum((~is_space).long(), 0) - (~is_space).long()
            unit_start = torch.cummax(torch.where(same_unit, 0, torch.arange(n, device=device)), 0).values
            drop &= non_space_before == non_space_before.index_select(0, unit_start)
            drop &= after_space.index_select(0, unit_start)
            dropped = nonzero(drop)
        kept = nonzero(~drop)
        bounds = offsets - torch.searchsorted(dropped, offsets)  # kept characters before each text
        begin, end = bounds[:-1], bounds[1:].clone()
        # Trailing spaces go (and a literal '▁' when escaping, as SentencePiece checks the output).
        while kept.numel():
            last = values.index_select(0, kept.index_select(0, (end - 1).clamp(min=0)))
            space = (end > begin) & ((last == SPACE) | ((last == ESCAPED_SPACE) & escape_whitespaces))
            if not bool(space.any()):
                break
            end = end - space.long()
    lengths = end - begin
    has_text = (lengths > 0).long() if add_dummy_prefix else torch.zeros_like(lengths)
    out_offsets = offsets_from_lengths(lengths + has_text)
    total = int(out_offsets[-1])
    # Output slot j of text t reads kept[j + begin[t] - out_offsets[t] - has_text[t]]; the prefix
    # slot reads its text's first kept character (it points at that source).
    source = torch.arange(total, device=device) + torch.repeat_interleave(
        begin - out_offsets[:-1] - has_text, lengths + has_text, output_size=total)
    prefix = out_offsets[:-1][has_text > 0]
    source.index_copy_(0, prefix, begin[has_text > 0])
    if kept is not None:
        source = kept.index_select(0, source)
    values = values.index_select(0, source)
    if escape_whitespaces:
        values = torch.where(values == SPACE, ESCAPED_SPACE, values)
    values.index_fill_(0, prefix, ESCAPED_SPACE if escape_whitespaces else SPACE)
    return Ragged(values.int(), out_offsets), unit.index_select(0, source)


def _example_charsmap() -> bytes:
    """A two-rule charsmap ('a' -> 'b', 'ab' -> 'X') in the Darts-clone layout, for doctests."""
    strings = b"b\0X\0"
    # Units: root at 0 with offset 1 (children at 1 ^ label); 'a' = 97 -> node 96, then 'b' = 98.
    units = [0] * 256
    units[0] = 1 << 10  # offset 1
    units[1 ^ 97] = 97 | (1 << 8) | (128 << 10)  # label 'a', has a leaf, children at 96 ^ 128
    a_children = (1 ^ 97) ^ 128
    units[a_children] = (1 << 31) | 0  # the leaf: value 0 -> "b"
    units[a_children ^ 98] = 98 | (1 << 8) | (200 << 10)
    units[a_children ^ 98 ^ 200] = (1 << 31) | 2  # value 2 -> "X"
    return len(units * 4).to_bytes(4, "little") + np.array(units, dtype="<u4").tobytes() + strings
