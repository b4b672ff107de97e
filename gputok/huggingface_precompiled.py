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
rule's key holds, or a rule's key spans clusters in it. :meth:`HuggingfacePrecompiled.differing`
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
# The characters that join the one before them into a cluster (or, Prepend, the one after).
_JOINING = ("Extend", "ZWJ", "SpacingMark", "Regional_Indicator", "L", "V", "T")
_CLUSTER = regex.compile(r"\X", regex.DOTALL)


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
    def keys_cr_or_lf(self) -> bool:
        """Whether a rule's key holds CR or LF (CR LF is a cluster: the one ASCII cluster of two)."""
        return bool(np.isin(self._arrays["key_values"], (ord("\r"), ord("\n"))).any())

    @functools.cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per codepoint: whether a rule's key holds it, whether it joins the character before it
        into a cluster, and whether it alone may make a difference (a Prepend character, or the
        first of a key that spans clusters). Built once (~1 s) and cached on disk."""
        def build() -> dict[str, np.ndarray]:
            keyed = np.zeros(_CODEPOINTS, dtype=np.bool_)
            keyed[self._arrays["key_values"]] = True
            every = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, _CODEPOINTS)))

            def having(pattern: str) -> np.ndarray:
                table = np.zeros(_CODEPOINTS, dtype=np.bool_)
                found = np.array([m.start() for m in regex.finditer(pattern, every)], dtype=np.int64)
                table[found + np.where(found >= 0xD800, 0x800, 0)] = True  # past the surrogates' gap
                return table

            joining = having("[" + "".join(rf"\p{{Grapheme_Cluster_Break={k}}}" for k in _JOINING) + "]")
            alone = having(r"\p{Grapheme_Cluster_Break=Prepend}")
            alone[[ord(key[0]) for key in self.rules if len(key) > 1 and len(_CLUSTER.findall(key)) > 1]] = True
            return {name: np.packbits(table) for name, table in
                    (("keyed", keyed), ("joining", joining), ("alone", alone))}

        # keyed by the rules and the regex module's Unicode (its cluster rules)
        tables = unicode.disk_cached(f"huggingface-precompiled-{self._digest}-regex{regex.__version__}", build)
        return tuple(np.unpackbits(tables[name], count=_CODEPOINTS).astype(np.bool_)
                     for name in ("keyed", "joining", "alone"))

    def differing(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The rows of ragged codepoints (``values``, row ``offsets``) on which huggingface's reading
        may differ from SentencePiece's (a superset: the others certainly agree): a joining
        character in a rule's key or next to a character in one, a character that alone may make
        a difference, or CR LF where a key holds either. Array passes over the batch."""
        if not self._arrays["key_lengths"].size or values.size == 0:
            return np.zeros(0, dtype=np.int64)
        keyed, joining, alone = self._tables
        v = np.clip(values, 0, _CODEPOINTS - 1)
        at = np.flatnonzero(joining[v] | alone[v])
        if at.size:  # (a neighbour across two texts only makes the check stricter)
            near = keyed[v[at]] | keyed[v[np.maximum(at - 1, 0)]] | keyed[v[np.minimum(at + 1, v.size - 1)]]
            at = at[alone[v[at]] | near]
        if self.keys_cr_or_lf:
            at = np.concatenate([at, np.flatnonzero((v[:-1] == 13) & (v[1:] == 10))])
        return np.unique(np.searchsorted(offsets, at, side="right") - 1)

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
