"""SentencePiece's precompiled-charsmap rewrite on CUDA, one text per lane: longest match, left to right.

Numba twin: ``charsmap_numba.charsmap_rewrite_numba`` (the same rules as arrays, the same walk): at
each position the longest of the longer rules whose key starts there (looked up only where the
codepoint can start one and the next can continue one), else the codepoint's own rule (``direct``,
or its CSR row where it writes zero or several codepoints). A key's hash is the twin's
(``key_hashes_numba``: splitmix64's finalizer over each codepoint plus its index << 32), computed
here in int64 lanes (the same bits: the products wrap, the shifts are masked to be logical); the
candidates are found by binary search in ``sorted_hashes`` (the rule hashes sorted as *signed*
int64, with ``sorted_rules`` the rule of each) and checked codepoint by codepoint.

Layout (no host sync): text ``t`` (``values[offsets[t]:offsets[t + 1]]``) is written from
``expand * offsets[t] + 2 * t`` (``expand``: :func:`expansion`, the most codepoints a rule writes per
codepoint it reads, so every text has room; the two more places per text are for the later
stages of the Unigram pipeline, which keep this layout) with its length in ``lengths[t]``; ``units`` gets each
written codepoint's unit (the input index its match starts at), as the twin's third output.
Compacting row ``t`` gives the twin's row. Memory: ``expand`` int32 and int64 per input codepoint.
"""

import numpy as np
import torch
import triton
import triton.language as tl

START = tl.constexpr(1 << 21)
CONTINUE = tl.constexpr(1 << 22)
SEVERAL = tl.constexpr(1 << 23)
CODEPOINT = tl.constexpr((1 << 21) - 1)
REPLACEMENT = tl.constexpr(0xFFFD)
MIX1 = tl.constexpr(0xBF58476D1CE4E5B9 - (1 << 64))  # charsmap_numba._mix's multipliers, as int64
MIX2 = tl.constexpr(0x94D049BB133111EB - (1 << 64))
LOW34 = tl.constexpr((1 << 34) - 1)  # logical shifts of int64: x >> k & ((1 << 64 - k) - 1)
LOW37 = tl.constexpr((1 << 37) - 1)
LOW33 = tl.constexpr((1 << 33) - 1)


@triton.jit
def _mix(h):
    """``charsmap_numba._mix`` (splitmix64's finalizer) on the bits of int64 ``h``."""
    h = (h ^ ((h >> 30) & LOW34)) * MIX1
    h = (h ^ ((h >> 27) & LOW37)) * MIX2
    return h ^ ((h >> 31) & LOW33)


@triton.jit
def _longest_rule(values_ptr, i, end, look, sorted_hashes_ptr, sorted_rules_ptr, key_values_ptr, key_offsets_ptr,
                  rules, max_long, steps):
    """``charsmap_numba._longest`` per lane where ``look``: the longest rule whose key starts
    ``values[i:end]``, else -1."""
    most = tl.minimum(end - i, max_long)
    found = tl.full(i.shape, -1, dtype=tl.int64)
    for size_back in range(0, max_long - 1):  # sizes max_long .. 2, longest first
        size = max_long - size_back
        trying = look & (found < 0) & (size <= most)
        h = tl.zeros_like(i)
        for j in range(0, size):
            c = tl.load(values_ptr + i + j, mask=trying, other=0).to(tl.int64)
            h = _mix(h ^ (c + ((tl.zeros_like(i) + j) << 32)))  # j as int64 before the shift
        lo = tl.zeros_like(i)
        hi = tl.zeros_like(i) + rules
        for _ in range(0, steps):  # the first sorted hash >= h
            mid = (lo + hi) >> 1
            below = trying & (lo < hi) & (tl.load(sorted_hashes_ptr + mid, mask=trying & (lo < hi), other=0) < h)
            bigger = trying & (lo < hi) & ~below
            lo = tl.where(below, mid + 1, lo)
            hi = tl.where(bigger, mid, hi)
        at = lo
        scanning = trying & (at < rules)
        scanning = scanning & (tl.load(sorted_hashes_ptr + at, mask=scanning, other=0) == h)
        while tl.max(scanning.to(tl.int32), 0) > 0:
            rule = tl.load(sorted_rules_ptr + at, mask=scanning, other=0)
            key = tl.load(key_offsets_ptr + rule, mask=scanning, other=0)
            same = scanning & (tl.load(key_offsets_ptr + rule + 1, mask=scanning, other=0) - key == size)
            for j in range(0, size):
                differs = (tl.load(key_values_ptr + key + j, mask=same, other=0).to(tl.int64)
                           != tl.load(values_ptr + i + j, mask=same, other=0).to(tl.int64))
                same = same & ~differs
            found = tl.where(same, rule, found)
            at += 1
            scanning = scanning & ~same & (at < rules)
            scanning = scanning & (tl.load(sorted_hashes_ptr + at, mask=scanning, other=0) == h)
    return found


@triton.jit(do_not_specialize=["texts", "limit", "rules", "max_long", "steps"])
def _charsmap_rewrite_kernel(values_ptr, offsets_ptr, direct_ptr, table_values_ptr, table_offsets_ptr,
                             sorted_hashes_ptr, sorted_rules_ptr, key_values_ptr, key_offsets_ptr, rule_values_ptr,
                             rule_offsets_ptr, out_ptr, units_ptr, lengths_ptr, texts, limit, rules, max_long, steps,
                             EXPAND: tl.constexpr, BLOCK: tl.constexpr):
    text = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = text < texts
    i = tl.load(offsets_ptr + text, mask=inside, other=0)
    end = tl.load(offsets_ptr + text + 1, mask=inside, other=0)
    at = EXPAND * i + 2 * text
    first = at
    alive = inside & (i < end)
    while tl.max(alive.to(tl.int32), 0) > 0:
        c = tl.load(values_ptr + i, mask=alive, other=0).to(tl.int64)
        c = tl.where((c < 0) | (c >= limit), REPLACEMENT, c)
        d = tl.load(direct_ptr + c, mask=alive, other=0)
        c2 = tl.load(values_ptr + i + 1, mask=alive & (i + 1 < end), other=0).to(tl.int64)
        c2 = tl.where((c2 < 0) | (c2 >= limit), REPLACEMENT, c2)
        d2 = tl.load(direct_ptr + c2, mask=alive & (i + 1 < end), other=0)
        look = alive & ((d & START) != 0) & (i + 1 < end) & ((d2 & CONTINUE) != 0)
        rule = tl.full([BLOCK], -1, dtype=tl.int64)
        if tl.max(look.to(tl.int32), 0) > 0:  # rare: combining sequences, Hangul jamo
            rule = _longest_rule(values_ptr, i, end, look, sorted_hashes_ptr, sorted_rules_ptr, key_values_ptr,
                                 key_offsets_ptr, rules, max_long, steps)
        by_rule = alive & (rule >= 0)
        several = alive & ~by_rule & ((d & SEVERAL) != 0)
        row_lo = tl.where(by_rule, tl.load(rule_offsets_ptr + rule, mask=by_rule, other=0),
                          tl.load(table_offsets_ptr + c, mask=several, other=0))
        row_hi = tl.where(by_rule, tl.load(rule_offsets_ptr + rule + 1, mask=by_rule, other=0),
                          tl.load(table_offsets_ptr + c + 1, mask=several, other=0))
        from_row = by_rule | several
        written = tl.where(from_row, row_hi - row_lo, 1)
        single = alive & ~from_row
        tl.store(out_ptr + at, (d & CODEPOINT).to(tl.int32), mask=single)
        tl.store(units_ptr + at, i, mask=single)
        # A row can be longer than EXPAND (a longer rule's output counts per codepoint it reads).
        for k in range(0, tl.max(tl.where(from_row, row_hi - row_lo, 0), 0)):
            put = from_row & (row_lo + k < row_hi)
            rule_value = tl.load(rule_values_ptr + row_lo + k, mask=put & by_rule, other=0)
            table_value = tl.load(table_values_ptr + row_lo + k, mask=put & ~by_rule, other=0)
            tl.store(out_ptr + at + k, tl.where(by_rule, rule_value, table_value).to(tl.int32), mask=put)
            tl.store(units_ptr + at + k, i, mask=put)
        at = tl.where(alive, at + written, at)
        consumed = tl.where(by_rule, tl.load(key_offsets_ptr + rule + 1, mask=by_rule, other=0)
                            - tl.load(key_offsets_ptr + rule, mask=by_rule, other=0), 1)
        i = tl.where(alive, i + consumed, i)
        alive = alive & (i < end)
    tl.store(lengths_ptr + text, at - first, mask=inside)


def expansion(rules: tuple) -> int:
    """The most codepoints the charsmap (``Charsmap.numpy_rules()``) writes per codepoint it reads."""
    table_offsets, key_offsets, rule_offsets = rules[2], rules[6], rules[8]
    most = int(np.diff(table_offsets).max()) if table_offsets.size > 1 else 1
    if rule_offsets.size > 1:
        most = max(most, int((-(-np.diff(rule_offsets) // np.diff(key_offsets))).max()))
    return max(most, 1)


def device_rules(rules: tuple, device: torch.device) -> dict:
    """``charsmap_rewrite_triton``'s tables from ``Charsmap.numpy_rules()`` on ``device``: the
    longer rules' hashes sorted as signed int64 (the kernel compares int64 lanes)."""
    (direct, table_values, table_offsets, hashes, order, key_values, key_offsets, rule_values, rule_offsets,
     max_long) = rules
    signed = hashes.view(np.int64)
    by_hash = np.argsort(signed, kind="stable")
    on = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return dict(direct=on(direct), table_values=on(table_values), table_offsets=on(table_offsets),
                sorted_hashes=on(signed[by_hash]), sorted_rules=on(order[by_hash].astype(np.int64)),
                key_values=on(key_values), key_offsets=on(key_offsets), rule_values=on(rule_values),
                rule_offsets=on(rule_offsets), max_long=int(max_long), expand=expansion(rules))


def charsmap_rewrite_triton(values: torch.Tensor, offsets: torch.Tensor, *, direct: torch.Tensor,
                            table_values: torch.Tensor, table_offsets: torch.Tensor, sorted_hashes: torch.Tensor,
                            sorted_rules: torch.Tensor, key_values: torch.Tensor, key_offsets: torch.Tensor,
                            rule_values: torch.Tensor, rule_offsets: torch.Tensor, max_long: int, expand: int
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int32 rewritten codepoints, ``expand`` places per element of ``values``; int64 the unit of
    each; int64 each text's length) of the texts ``values[offsets[t]:offsets[t + 1]]``, text ``t``
    from ``expand * offsets[t] + 2 * t``. The tables: :func:`device_rules`."""
    texts = offsets.numel() - 1
    device = values.device
    room = max(expand * values.numel() + 2 * texts, 1)
    out = torch.empty(room, dtype=torch.int32, device=device)
    units = torch.empty(room, dtype=torch.int64, device=device)
    lengths = torch.empty(texts, dtype=torch.int64, device=device)
    if texts:
        rules = sorted_hashes.numel()
        # 64 texts per program, as the other per-text kernels (a block runs as long as its longest text).
        block = 64
        _charsmap_rewrite_kernel[(triton.cdiv(texts, block),)](
            values, offsets, direct, table_values, table_offsets, sorted_hashes if rules else key_offsets,
            sorted_rules if rules else key_offsets, key_values if key_values.numel() else key_offsets, key_offsets,
            rule_values if rule_values.numel() else key_offsets, rule_offsets, out, units, lengths, texts,
            direct.numel(), rules, max_long if rules else 1, max(rules, 1).bit_length(), EXPAND=expand, BLOCK=block)
    return out, units, lengths
