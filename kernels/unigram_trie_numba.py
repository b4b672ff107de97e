"""What the Unigram kernels share (``unigram_sentence``, ``unigram_words_numba``,
``unigram_nbest_numba``, ``unigram_sample_numba``): the piece trie walk's child lookup by binary
search (the search itself, :func:`first_at_least`, serves ``charsmap_numba``'s rule lookup too),
the pieces that start at a position (:func:`pieces_from`: the n-best and sampling kernels' walk),
and the read-back of a Viterbi's best path.

The trie is :class:`gputok.models.unigram.PieceTrie`'s (see
``unigram_sentence.unigram_sentence_viterbi``): a non-root node's child along an alphabet code
below ``narrow`` is read from the dense table ``narrow_table[narrow_row[node] * narrow + code]``,
any other from the node's sorted child list (``child_offsets``, ``child_codes``,
``child_nodes``) by binary search (:func:`trie_child`). Both give -1 where there is no such child.

(Numba's cache checks only the file of the function it compiled; ``kernels/_numba.py`` names the
cache folder by a hash of every kernel file, so editing this one recompiles its callers.)
"""

from ._numba import kernel, uncounted

# The walk's common step (the narrow table) is written out in each Viterbi kernel: as a call it cost the
# sentence kernel +70% (measured on 1,024 English lines before kernels were linked into their
# callers' one module, _numba._LinkOnlyLibrary); the binary search, the rare step, is a plain call.
# Forcing numba to inline the path read-back and the word cache's steps (inline="always") gained
# nothing measurable once linked so (unigram_whole.py, 1,024 and 65,536 lines) and cost ~0.6-1 s of
# every cold compile, so they are plain kernels too.
# The binary search (trie_child, first_at_least) is compiled without reference counts
# (_numba.uncounted): as a counted kernel, numba's atomic counts of its array arguments stayed
# around each call, inlined or not, and with a rare step on ~0.35 characters in 1 of English those
# were ~17% of the Unigram cache kernel's time (perf's samples in NRT_incref / NRT_decref against
# the kernel's, batches of 1,024 lines); now ~4-5%.


@uncounted
def first_at_least(sorted_values, lo, hi, value):
    """The first index in ``lo:hi`` of ``sorted_values`` whose value is not below ``value`` (``hi`` if
    none): ``np.searchsorted`` written out, which a kernel loaded from the cache runs without
    importing ``numba.np.arraymath`` (and scipy with it)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_values[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@uncounted
def trie_child(node, code, child_offsets, child_codes, child_nodes):
    """Child of ``node`` along ``code`` (binary search in its sorted child list), or -1."""
    at = first_at_least(child_codes, child_offsets[node], child_offsets[node + 1], code)
    if at < child_offsets[node + 1] and child_codes[at] == code:
        return child_nodes[at]
    return -1


@kernel
def write_best_path(start, piece, n, ids, ends, written):
    """Write the best path into node ``n`` (``start[e]``: where the best piece into node ``e``
    starts, ``piece[e]`` its id) as tokens ``written ..`` of ``ids`` and ``ends`` (each token's
    end node), in order; returns the number of tokens."""
    count = 0
    at = n
    while at > 0:
        count += 1
        at = start[at]
    at = n
    for t in range(written + count - 1, written - 1, -1):
        ids[t] = piece[at]
        ends[t] = at
        at = start[at]
    return count


@kernel
def pieces_from(values, lo, n, s, code_of, root_child, narrow_row, narrow_table, narrow, child_offsets, child_codes,
                child_nodes, token_of_node, piece_ends, piece_tokens):
    """The pieces that start at ``s`` in the row ``values[lo:lo + n]`` (the trie walk; the narrow
    table for common codes), shortest first: their ends into ``piece_ends`` and their ids into
    ``piece_tokens`` (scratch of ``n - s`` items or more). Returns how many."""
    found = 0
    node = root_child[code_of[values[lo + s]]]
    end = s
    while node >= 0:
        end += 1  # the piece of ``node`` covers s .. end
        token = token_of_node[node]
        if token >= 0:
            piece_ends[found] = end
            piece_tokens[found] = token
            found += 1
        if end >= n:
            break
        code = code_of[values[lo + end]]
        if code < narrow:
            node = narrow_table[narrow_row[node] * narrow + code]
        else:
            node = trie_child(node, code, child_offsets, child_codes, child_nodes)
    return found
