"""huggingface's Precompiled normalizer (a tokenizer.json's charsmap), where it reads the rules otherwise
than SentencePiece.

SentencePiece rewrites a text left to right by the longest rule at each position
(``gputok.charsmap``). huggingface reads it a grapheme cluster (UAX #29, extended) at a time: a
cluster of under 6 UTF-8 bytes that has a rule for some prefix becomes the output of the rule of
its *shortest* such prefix, the rest of the cluster dropped (decomposed ``e`` U+0302 U+0323 is
``ê``, the dot below lost); any other cluster is rewritten a character at a time by one-character
rules only (``ｶﾞ``, 6 bytes, is ``カ`` U+3099 where SentencePiece's two-character rule gives
``ガ``). Rules never apply across clusters.

The two readings agree on a text unless a cluster of several characters holds a character some
rule's key holds, or a rule's key spans clusters in it; their offsets also differ where a rule
removes a text's first characters or removes one after a rule that writes more than it reads
(huggingface gives the removal to the character before it, a new one: the alignment shifts).
:meth:`HuggingfacePrecompiled.differing`
finds the texts of a batch where that may be so (table lookups over the batch's codepoints, none
for most text: ``gputok.normalizers.Precompiled`` then keeps the charsmap kernel's rows), and
:meth:`HuggingfacePrecompiled.rewrite` rewrites such a text as huggingface does, with its offsets:
each rule's output characters tagged as huggingface tags them (0, the last ones +1 where the
output is longer, the last -k where it is k shorter, the character before it where it is empty)
and read by ``normalizers.transform_sources``.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

from . import unicode
from .normalizers import transform_sources

_CODEPOINTS = 0x110000
_WHOLE_CLUSTER_BYTES = 6  # a cluster of fewer UTF-8 bytes is looked up whole
# What joins a neighbour into a cluster: the one before (Extend, ZWJ, SpacingMark, V, T, a
# second Regional_Indicator) or the ones after (L, Prepend; LV and LVT only before V or T,
# which are here).
_JOINING = ("Extend", "ZWJ", "SpacingMark", "Regional_Indicator", "L", "V", "T", "Prepend")
_CLUSTER = regex.compile(r"\X", regex.DOTALL)
_TABLES_VERSION = 3  # of the cached table (its name holds it: a new layout, a new file)
KEYED, JOINING, ALONE, REMOVED, EXPANDS = 1, 2, 4, 8, 16  # the table's bits


class HuggingfacePrecompiled:
    """huggingface's reading of a charsmap's rules (``key_values`` ... ``value_lengths``: the rule
    arrays of ``gputok.charsmap.Charsmap``; ``digest``: the charsmap's), built on first use."""

    def __init__(self, arrays: dict[str, np.ndarray], digest: str) -> None:
        self._arrays, self._digest = arrays, digest

    @functools.cached_property
    def rules(self) -> dict[str, str]:
        a = self._arrays
        keys = np.split(a["key_values"], np.cumsum(a["key_lengths"])[:-1])
        values = np.split(a["value_values"], np.cumsum(a["value_lengths"])[:-1])
        as_str = lambda codes: "".join(map(chr, codes.tolist()))  # noqa: E731
        return {as_str(k): as_str(v) for k, v in zip(keys, values)} if a["key_lengths"].size else {}

    @functools.cached_property
    def _flags(self) -> np.ndarray:
        """Per codepoint (uint8 bits): ``KEYED``, a rule's key holds it; ``JOINING``, it joins a
        neighbour into a cluster; ``ALONE``, it may make a difference by itself (the first of a
        key that spans clusters); ``REMOVED``, a rule removes it; ``EXPANDS``, a rule that writes
        more than it reads holds it. Built once (~1 s) and cached on disk."""
        def build() -> dict[str, np.ndarray]:
            a = self._arrays
            flags = np.zeros(_CODEPOINTS, dtype=np.uint8)
            flags[a["key_values"]] |= KEYED
            every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, _CODEPOINTS)))
            found = np.array([m.start() for m in regex.finditer(
                "[" + "".join(rf"\p{{Grapheme_Cluster_Break={k}}}" for k in _JOINING) + "]", every)], dtype=np.int64)
            flags[found + np.where(found >= 0xD800, 0x800, 0)] |= JOINING  # past the surrogates' gap
            flags[[ord(key[0]) for key in self.rules if len(key) > 1 and len(_CLUSTER.findall(key)) > 1]] |= ALONE
            key_of = np.repeat(np.arange(a["key_lengths"].size), a["key_lengths"])  # each key codepoint's rule
            flags[a["key_values"][(a["value_lengths"] == 0)[key_of]]] |= REMOVED
            flags[a["key_values"][(a["value_lengths"] > a["key_lengths"])[key_of]]] |= EXPANDS
            return {"flags": flags}

        # keyed by the rules and the regex module's Unicode (its cluster rules)
        name = f"huggingface-precompiled-{self._digest}-regex{regex.__version__}-v{_TABLES_VERSION}"
        return unicode.disk_cached(name, build)["flags"]

    @functools.cached_property
    def ascii_may_differ(self) -> bool:
        """Whether an ASCII text can read otherwise: a key holds CR or LF (CR LF is one cluster), a
        key over several characters starting with an ASCII one spans clusters, or a rule removes
        an ASCII character (which huggingface aligns otherwise at a text's start). Read from the
        rules alone, so ASCII batches never build the tables."""
        a = self._arrays
        lengths, keys = a["key_lengths"], a["key_values"]
        starts = np.cumsum(lengths) - lengths
        spans = any(len(_CLUSTER.findall("".join(map(chr, keys[b:b + n].tolist())))) > 1
                    for b, n in zip(starts.tolist(), lengths.tolist()) if n > 1 and keys[b] < 0x80)
        return bool(spans or np.isin(keys, (ord("\r"), ord("\n"))).any()
                    or ((lengths == 1) & (a["value_lengths"] == 0) & (keys[starts] < 0x80)).any())

    def differing(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The rows of ragged codepoints (``values``, row ``offsets``) on which huggingface's reading
        may differ from the longest-match kernel's, strings or offsets (a superset: the others
        certainly agree): a joining character in a rule's key or next to a character in one, a
        character that alone may make a difference, CR LF where a key holds either, and a removed
        character at a text's start or after an expanding one (huggingface aligns those
        otherwise). Neighbours are read within a text only: a row's answer never depends on
        the batch. Array passes over the batch."""
        if not self._arrays["key_lengths"].size or values.size == 0:
            return np.zeros(0, dtype=np.int64)
        flags = self._flags[np.clip(values, 0, _CODEPOINTS - 1)]
        at = np.flatnonzero(flags & (JOINING | ALONE | REMOVED))
        crlf = np.zeros(0, dtype=np.int64)  # CR LF is one cluster
        if (self._flags[13] | self._flags[10]) & KEYED:
            crlf = np.flatnonzero((values[:-1] == 13) & (values[1:] == 10))
        if not at.size and not crlf.size:
            return np.zeros(0, dtype=np.int64)
        row = np.searchsorted(offsets, at, side="right") - 1
        first, last = at == offsets[row], at == offsets[row + 1] - 1
        here = flags[at]
        before = np.where(first, 0, flags[np.maximum(at - 1, 0)])  # the neighbours within the text
        after = np.where(last, 0, flags[np.minimum(at + 1, values.size - 1)])
        risky = (here & ALONE) | (here & JOINING) * ((here | before | after) & KEYED)
        # a removal at a text's start, or after an expanding or removed character
        risky |= (here & REMOVED) * (first | (before & (EXPANDS | REMOVED) != 0))
        crlf_rows = np.searchsorted(offsets, crlf, side="right") - 1
        crlf_rows = crlf_rows[crlf + 1 < offsets[crlf_rows + 1]]  # CR LF within a text
        return np.unique(np.concatenate([row[risky != 0], crlf_rows]))

    def rewrite(self, text: str) -> tuple[str, list[int]]:
        """``text`` as huggingface's Precompiled rewrites it, and each output character's source
        index in it as huggingface aligns it."""
        rules = self.rules
        chars: list[str] = []
        tags: list[int] = []

        def replace(old: int, new: str) -> None:  # huggingface's tags for a rule's output
            chars.extend(new)
            tags.extend([0] * len(new))
            diff = len(new) - old
            if diff > 0:
                tags[len(tags) - diff:] = [1] * diff
            elif diff < 0 and tags:
                tags[-1] += diff

        for cluster in _CLUSTER.findall(text):
            if len(cluster.encode("utf-8", "surrogatepass")) < _WHOLE_CLUSTER_BYTES:
                prefix = next((cluster[:i] for i in range(1, len(cluster) + 1) if cluster[:i] in rules), None)
                if prefix is not None:
                    replace(len(cluster), rules[prefix])
                    continue
            for c in cluster:
                if c in rules:
                    replace(1, rules[c])
                else:
                    chars.append(c)
                    tags.append(0)
        return "".join(chars), transform_sources(tags, len(text))
