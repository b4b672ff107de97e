"""The BPE / WordPiece training merge loop on the CPU: one numba kernel runs every merge.

Contract: given the symbols of the unique words (the flat int32 ids ``_Trainer._words_to_symbols``
makes, words of two or more symbols only, ``wid`` their word, ``counts`` the int64 word counts),
the strings of the tokens so far (code points, CSR) and the trainer's options, return the merges
``(left id, right id, merged id)`` in order, exactly those of the numpy merge loop of
``gputok.trainers.bpe._Trainer`` with ``score="frequency"`` (the reference; forced with
``_dispatch.use_backend("torch")``): the best pair is the highest count, ties to the smallest
``left << 32 | right``; pairs counted below ``floor`` or, with ``max_len``, whose merge is
``max_len`` characters or longer (``tlen[a] + tlen[b]``, every token of the start counted as 1,
pairs of the start always eligible) are never chosen; a merge applies to every word, left to
right without overlap; a merge whose string (left + right less the ``prefix``) already exists
reuses that token's id.

How: symbols are linked lists (``nxt`` / ``prv``) over one flat array; a merged symbol keeps its
left position. Pairs live in an open-addressing table (key ``left << 32 | right`` -> slot) with
an int64 count per slot; each slot owns a list of runs of a position buffer: the windows it was
given at its birth (the first count) or in a later merge. A merge reads its pair's runs, sorts
the positions (left to right within a word), skips those whose symbols are no longer the pair,
rewrites the words in place and subtracts the windows it destroys (a left neighbour that is
itself a merge of this round is not a window destroyed: its window was the right neighbour of
that merge); then, with all rewrites done, it counts the windows it creates (``(l, z)`` unless
``l`` merged this round, ``(z, r)``), grouped into one run per pair. The best pair comes from a
lazy max-heap of ``(count, key)``: an entry is pushed whenever a count rises, and a popped
entry whose count is stale is pushed again with the current count if that fell (else a fresher
entry exists): so the first entry popped with its pair's current count is the best pair. Work
per merge follows its occurrences, never a recount. Merged strings are hashed (64-bit polynomial)
into a table of token ids and compared exactly on a hit, so a merge onto an existing token finds it.

``status``: 0 stopped at ``vocab_size``, 1 no pair left counted at least ``floor`` though an
eligible pair is counted above 0 (``min_frequency``), 2 no pairs. Memory: ~6 int32/int64 words per
symbol, 3 int64 per pair ever seen and per run, the heap, the position buffer (every window born).
"""

import numpy as np

from ._numba import kernel

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_LOW = np.int64(0xFFFFFFFF)


@kernel
def _slot_of(table, key, mask):
    """Index in ``table`` (int64 keys, -1 empty) where ``key`` is or would go."""
    i = np.int64((np.uint64(key) * _GOLD) >> np.uint64(33)) & mask
    while table[i] != key and table[i] != -1:
        i = (i + 1) & mask
    return i


@kernel
def _rehashed(pkey, nslots, psize):
    """A pair key table of ``psize`` slots (a power of two) and each slot's pair index, holding
    the first ``nslots`` keys of ``pkey``: the table grown."""
    pmask = psize - 1
    ptable = np.full(psize, -1, dtype=np.int64)
    pindex = np.empty(psize, dtype=np.int64)
    for s in range(nslots):
        at = _slot_of(ptable, pkey[s], pmask)
        ptable[at] = pkey[s]
        pindex[at] = s
    return ptable, pindex


@kernel
def _grow(array, need):
    if need <= array.size:
        return array
    bigger = np.empty(max(need, 2 * array.size), dtype=array.dtype)
    bigger[:array.size] = array
    return bigger


@kernel
def _better(c1, k1, c2, k2):
    return c1 > c2 or (c1 == c2 and k1 < k2)


@kernel
def _heap_push(hc, hk, size, count, key):
    i = size
    hc[i] = count
    hk[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if not _better(hc[i], hk[i], hc[parent], hk[parent]):
            break
        hc[i], hc[parent] = hc[parent], hc[i]
        hk[i], hk[parent] = hk[parent], hk[i]
        i = parent


@kernel
def _heap_pop(hc, hk, size):
    """Remove the top of a heap of ``size`` entries (the caller read it)."""
    size -= 1
    hc[0] = hc[size]
    hk[0] = hk[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _better(hc[child + 1], hk[child + 1], hc[child], hk[child]):
            child += 1
        if not _better(hc[child], hk[child], hc[i], hk[i]):
            break
        hc[i], hc[child] = hc[child], hc[i]
        hk[i], hk[child] = hk[child], hk[i]
        i = child


@kernel
def _chars_hash(chars, start, end):
    h = np.uint64(0x84222325CBF29CE4)
    for i in range(start, end):
        h = (h ^ np.uint64(chars[i])) * np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@kernel
def _token_slot(ttable, tok_off, tok_chars, tmask, h, start, end):
    """Index in ``ttable`` (token ids, -1 empty; keyed by hash ``h``) of the token whose string is
    ``tok_chars[start:end]``, or of the empty entry where it would go."""
    i = (h * np.int64(0x2545F4914F6CDD1D)) & tmask
    while True:
        t = ttable[i]
        if t < 0:
            return i
        s, e = tok_off[t], tok_off[t + 1]
        if e - s == end - start:
            same = True
            for j in range(end - start):
                if tok_chars[s + j] != tok_chars[start + j]:
                    same = False
                    break
            if same:
                return i
        i = (i + 1) & tmask


@kernel
def train_bpe_numba(sym, wid, counts, num_tokens, vocab_size, floor, max_len, tok_off_in, tok_chars_in, prefix):
    """Run the merge loop; returns ``(merges int64 [m, 3], status, initial distinct pairs)``.

    ``sym`` (int32) is rewritten in place. ``max_len`` <= 0: no length limit."""
    n = sym.size
    nxt = np.empty(n, dtype=np.int32)
    prv = np.empty(n, dtype=np.int32)
    for i in range(n):
        nxt[i] = i + 1 if i + 1 < n and wid[i + 1] == wid[i] else -1
        prv[i] = i - 1 if i > 0 and wid[i - 1] == wid[i] else -1
    # -- tokens: strings, lengths, a hash table of strings
    tcap = num_tokens + vocab_size + 2
    tok_off = np.zeros(tcap + 1, dtype=np.int64)
    tok_off[:num_tokens + 1] = tok_off_in
    tok_chars = _grow(tok_chars_in.astype(np.int32), 2 * tok_chars_in.size + 64)
    tlen = np.ones(tcap, dtype=np.int64)
    tsize = 16
    while tsize < 2 * tcap:
        tsize *= 2
    tmask = tsize - 1
    ttable = np.full(tsize, -1, dtype=np.int64)
    for t in range(num_tokens):
        h = _chars_hash(tok_chars, tok_off[t], tok_off[t + 1])
        i = _token_slot(ttable, tok_off, tok_chars, tmask, h, tok_off[t], tok_off[t + 1])
        if ttable[i] < 0:
            ttable[i] = t
    # -- pairs: key -> slot table, per slot key / count / eligibility / runs
    psize = 4096  # grows with the pairs: a small table stays in cache
    pmask = psize - 1
    ptable = np.full(psize, -1, dtype=np.int64)
    pindex = np.empty(psize, dtype=np.int64)
    scap = 1024
    pkey = np.empty(scap, dtype=np.int64)
    pcnt = np.zeros(scap, dtype=np.int64)
    elig = np.ones(scap, dtype=np.bool_)
    head = np.full(scap, -1, dtype=np.int64)
    nslots = 0
    wslot = np.full(n, -1, dtype=np.int32)
    for i in range(n):
        j = nxt[i]
        if j < 0:
            continue
        key = (np.int64(sym[i]) << 32) | sym[j]
        at = _slot_of(ptable, key, pmask)
        if ptable[at] == -1:
            if 2 * (nslots + 1) > psize:  # grow the key table
                psize *= 2
                pmask = psize - 1
                ptable, pindex = _rehashed(pkey, nslots, psize)
                at = _slot_of(ptable, key, pmask)
            if nslots == scap:
                scap *= 2
                pkey = _grow(pkey, scap)
                pcnt = _grow(pcnt, scap)
                elig = _grow(elig, scap)
                head = _grow(head, scap)
            ptable[at] = key
            pindex[at] = nslots
            pkey[nslots] = key
            pcnt[nslots] = 0
            elig[nslots] = True
            head[nslots] = -1
            nslots += 1
        s = pindex[at]
        pcnt[s] += counts[wid[i]]
        wslot[i] = s
    initial_pairs = nslots
    # positions grouped by slot (ascending within a slot): one run per slot
    rcap = max(1024, 2 * nslots)
    rstart = np.empty(rcap, dtype=np.int64)
    rlen = np.zeros(rcap, dtype=np.int64)
    rnext = np.full(rcap, -1, dtype=np.int64)
    nruns = nslots
    for i in range(n):
        if wslot[i] >= 0:
            rlen[wslot[i]] += 1
    total = 0
    for s in range(nslots):
        rstart[s] = total
        total += rlen[s]
        head[s] = s
    posbuf = np.empty(max(1024, 2 * total), dtype=np.int32)
    fill = rstart[:nslots].copy()
    for i in range(n):
        s = wslot[i]
        if s >= 0:
            posbuf[fill[s]] = i
            fill[s] += 1
    used = total
    # heap of (count, key) of every pair that may be chosen
    hcap = max(1024, 2 * nslots)
    hc = np.empty(hcap, dtype=np.int64)
    hk = np.empty(hcap, dtype=np.int64)
    hsize = 0
    for s in range(nslots):
        if pcnt[s] >= floor:
            _heap_push(hc, hk, hsize, pcnt[s], pkey[s])
            hsize += 1
    # per-merge scratch
    mark = np.full(n, -1, dtype=np.int64)
    occ = np.empty(1024, dtype=np.int32)
    born_pos = np.empty(2048, dtype=np.int32)
    born_slot = np.empty(2048, dtype=np.int64)
    tcount = np.zeros(scap, dtype=np.int64)
    lmap = np.full(tcap, -1, dtype=np.int64)  # this merge's slot of (other, z), by other
    rmap = np.full(tcap, -1, dtype=np.int64)  # and of (z, other)
    touched = np.empty(1024, dtype=np.int64)
    merges = np.empty((max(vocab_size - num_tokens, 0), 3), dtype=np.int64)
    nmerges = 0
    ntok = num_tokens
    plen = prefix.size
    status = 0
    while ntok < vocab_size:
        # -- the best pair
        best = -1
        while hsize > 0:
            c, key = hc[0], hk[0]
            _heap_pop(hc, hk, hsize)
            hsize -= 1
            s = pindex[_slot_of(ptable, key, pmask)]
            cur = pcnt[s]
            if not elig[s]:
                continue
            if cur == c:
                best = s
                break
            if cur < c and cur >= floor:
                _heap_push(hc, hk, hsize, cur, key)
                hsize += 1
        if best < 0:
            status = 2
            for s in range(nslots):
                if elig[s] and pcnt[s] > 0:
                    status = 1
                    break
            break
        key = pkey[best]
        a = np.int32(key >> 32)
        b = np.int32(key & _LOW)
        # -- the merged token: left + right less the prefix; an existing string keeps its id
        la, lb = tok_off[a + 1] - tok_off[a], tok_off[b + 1] - tok_off[b]
        skip = 0
        if plen > 0 and lb >= plen:
            skip = plen
            for j in range(plen):
                if tok_chars[tok_off[b] + j] != prefix[j]:
                    skip = 0
                    break
        start = tok_off[ntok]
        end = start + la + lb - skip
        tok_chars = _grow(tok_chars, end)
        tok_chars[start:start + la] = tok_chars[tok_off[a]:tok_off[a + 1]]
        tok_chars[start + la:end] = tok_chars[tok_off[b] + skip:tok_off[b + 1]]
        h = _chars_hash(tok_chars, start, end)
        at = _token_slot(ttable, tok_off, tok_chars, tmask, h, start, end)
        if ttable[at] >= 0:
            z = np.int32(ttable[at])
        else:
            z = np.int32(ntok)
            ttable[at] = ntok
            tok_off[ntok + 1] = end
            tlen[z] = tlen[a] + tlen[b]
            ntok += 1
        if nmerges == merges.shape[0]:  # merges onto existing tokens add no token
            bigger = np.empty((2 * nmerges + 16, 3), dtype=np.int64)
            bigger[:nmerges] = merges
            merges = bigger
        merges[nmerges, 0] = a
        merges[nmerges, 1] = b
        merges[nmerges, 2] = z
        nmerges += 1
        # -- its windows, left to right (a run is in order; several runs are sorted)
        total = 0
        runs = 0
        r_ = head[best]
        while r_ >= 0:
            total += rlen[r_]
            runs += 1
            r_ = rnext[r_]
        if total > occ.size:
            occ = np.empty(2 * total, dtype=np.int32)
        if runs == 1:
            cand = posbuf[rstart[head[best]]:rstart[head[best]] + total]
        else:
            k = 0
            r_ = head[best]
            while r_ >= 0:
                occ[k:k + rlen[r_]] = posbuf[rstart[r_]:rstart[r_] + rlen[r_]]
                k += rlen[r_]
                r_ = rnext[r_]
            cand = np.sort(occ[:total])
        head[best] = -1  # its windows are all merged now; new ones (a merge onto a) get new runs
        # -- rewrite the words, subtract the windows destroyed
        live = 0
        for p in cand:
            if wslot[p] != best:
                continue
            q = nxt[p]
            w = counts[wid[p]]
            left = prv[p]
            if left >= 0 and mark[left] != nmerges:
                pcnt[wslot[left]] -= w
            r = nxt[q]
            if r >= 0:
                pcnt[wslot[q]] -= w
            sym[p] = z
            sym[q] = -1
            wslot[q] = -1
            wslot[p] = -1
            nxt[p] = r
            if r >= 0:
                prv[r] = p
            mark[p] = nmerges
            occ[live] = p
            live += 1
        pcnt[best] = 0
        # -- the windows created: (x, z) and (z, y), their slots found once per merge through
        # maps indexed by the other symbol
        if 2 * live > born_pos.size:
            born_pos = np.empty(4 * live, dtype=np.int32)
            born_slot = np.empty(4 * live, dtype=np.int64)
        nborn = 0
        ntouched = 0
        for i in range(live):
            p = occ[i]
            for side in range(2):
                if side == 0:
                    at_pos = prv[p]
                    if at_pos < 0 or mark[at_pos] == nmerges:
                        continue
                    other = sym[at_pos]
                    s = lmap[other]
                else:
                    r = nxt[p]
                    if r < 0:
                        continue
                    at_pos = p
                    other = sym[r]
                    s = rmap[other]
                if s < 0:
                    key = (np.int64(other) << 32) | z if side == 0 else (np.int64(z) << 32) | other
                    at = _slot_of(ptable, key, pmask)
                    if ptable[at] == -1:
                        if 2 * (nslots + 1) > psize:
                            psize *= 2
                            pmask = psize - 1
                            ptable, pindex = _rehashed(pkey, nslots, psize)
                            at = _slot_of(ptable, key, pmask)
                        if nslots == scap:
                            scap *= 2
                            pkey = _grow(pkey, scap)
                            pcnt = _grow(pcnt, scap)
                            elig = _grow(elig, scap)
                            head = _grow(head, scap)
                            tcount = _grow(tcount, scap)
                            tcount[nslots:] = 0
                        ptable[at] = key
                        pindex[at] = nslots
                        pkey[nslots] = key
                        pcnt[nslots] = 0
                        elig[nslots] = True
                        head[nslots] = -1
                        nslots += 1
                    s = pindex[at]
                    if side == 0:
                        lmap[other] = s
                    else:
                        rmap[other] = s
                    if ntouched == touched.size:
                        touched = _grow(touched, 2 * ntouched)
                    touched[ntouched] = s
                    ntouched += 1
                pcnt[s] += counts[wid[at_pos]]
                wslot[at_pos] = s
                tcount[s] += 1
                born_pos[nborn] = at_pos
                born_slot[nborn] = s
                nborn += 1
        for i in range(ntouched):  # reset the maps
            key = pkey[touched[i]]
            if (key >> 32) == z:
                rmap[key & _LOW] = -1
            if (key & _LOW) == z:
                lmap[key >> 32] = -1
        # one run per pair touched, then the positions into their runs
        posbuf = _grow(posbuf, used + nborn)
        if nruns + ntouched > rstart.size:
            rstart = _grow(rstart, nruns + ntouched)
            rlen = _grow(rlen, nruns + ntouched)
            rnext = _grow(rnext, nruns + ntouched)
        for i in range(ntouched):
            s = touched[i]
            rstart[nruns] = used
            rlen[nruns] = tcount[s]
            rnext[nruns] = head[s]
            head[s] = nruns
            nruns += 1
            tcount[s] = used  # now the next free place of the run
            used += rlen[nruns - 1]
        for i in range(nborn):
            s = born_slot[i]
            posbuf[tcount[s]] = born_pos[i]
            tcount[s] += 1
        for i in range(ntouched):
            s = touched[i]
            tcount[s] = 0
            if max_len > 0:
                elig[s] = tlen[pkey[s] >> 32] + tlen[pkey[s] & _LOW] < max_len
            if elig[s] and pcnt[s] >= floor:
                if hsize == hc.size:
                    hc = _grow(hc, 2 * hsize)
                    hk = _grow(hk, 2 * hsize)
                _heap_push(hc, hk, hsize, pcnt[s], pkey[s])
                hsize += 1
    return merges[:nmerges].copy(), status, initial_pairs
