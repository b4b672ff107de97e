"""The vocabulary as a tensorized trie: longest-match lookups for many words in lock-step.

Nodes are integers; the edge ``node --codepoint--> child`` is the entry
``node * 0x110000 + codepoint -> child`` of a :class:`gputok.hashing.HashMap`, so one transition
for a whole batch of (word, position) pairs is one hash and a few gathers, on any device. This is
the job a double-array trie does (base/check arrays); a hash map does it in the same O(1) per
transition without the double array's slow, fiddly construction, and is reused for BPE pair ranks.

Most text is ASCII, so edges on ASCII codepoints are also kept in a dense table
(``ascii_children[ascii_row[node], codepoint]``, only for nodes that have an ASCII edge): one
gather instead of a hash and its probes, which is what the lock-step CPU loop spends its time on.

The CPU kernel ``gputok.kernels.wordpiece_match_numba`` walks the same arrays (numpy views of
these tensors) one word at a time; the Triton kernel and the torch twin, many words in lock-step.

A trie has several roots (nodes ``0 .. len(roots) - 1``): WordPiece uses root 0 for word-initial
pieces and root 1 for continuation pieces with their ``##`` prefix removed. ``token_of_node`` holds
the token id that ends at each node, or -1. Memory: ~40 bytes per trie node for the hash map,
plus 512 bytes per node with an ASCII edge (23 MB for bert-base-uncased's 45k such nodes).
"""

from __future__ import annotations

import torch

from .hashing import HashMap, hash_lookup
from .unicode import MAX_CODEPOINT


class Trie:
    """
    >>> t = Trie([{"ab": 7, "a": 3}])
    >>> node = t.step(torch.tensor([0]), torch.tensor([ord("a")]))
    >>> t.token_of_node[node].tolist(), t.token_of_node[t.step(node, torch.tensor([ord("b")]))].tolist()
    ([3], [7])
    """

    def __init__(self, roots: list[dict[str, int]]) -> None:
        edges: dict[tuple[int, int], int] = {}
        tokens = [-1] * len(roots)
        for root, pieces in enumerate(roots):
            for piece, token_id in pieces.items():
                node = root
                for ch in piece:
                    child = edges.get((node, ord(ch)))
                    if child is None:
                        child = edges[(node, ord(ch))] = len(tokens)
                        tokens.append(-1)
                    node = child
                if node >= len(roots):  # an empty piece would make a root a token: skip it
                    tokens[node] = token_id
        parents = torch.tensor([node for node, _ in edges], dtype=torch.int64)
        labels = torch.tensor([cp for _, cp in edges], dtype=torch.int64)
        children = torch.tensor(list(edges.values()), dtype=torch.int64)
        self.edges = HashMap(parents * MAX_CODEPOINT + labels, children)
        self.token_of_node = torch.tensor(tokens, dtype=torch.int32)
        ascii_edge = labels < 128
        has_ascii = torch.zeros(len(tokens), dtype=torch.bool)
        has_ascii[parents[ascii_edge]] = True
        self.ascii_row = torch.full((len(tokens),), -1, dtype=torch.int32)
        self.ascii_row[has_ascii] = torch.arange(int(has_ascii.sum()), dtype=torch.int32)
        self.ascii_children = torch.full((max(1, int(has_ascii.sum())), 128), -1, dtype=torch.int32)  # >= 1 row: gathers at row 0 stay in bounds
        self.ascii_children[self.ascii_row[parents[ascii_edge]].long(), labels[ascii_edge]] = children[ascii_edge].int()
        self.num_roots = len(roots)
        self._on_device: dict[torch.device, tuple[torch.Tensor, ...]] = {}

    def tensors(self, device: torch.device | str) -> dict:
        """Everything a matching kernel needs, on ``device``."""
        device = torch.device(device)
        slot_keys, slot_values = self.edges.tensors(device)
        if device not in self._on_device:
            self._on_device[device] = tuple(t.to(device) for t in (self.token_of_node, self.ascii_row, self.ascii_children))
        token_of_node, ascii_row, ascii_children = self._on_device[device]
        return dict(slot_keys=slot_keys, slot_values=slot_values, hash_mask=self.edges.mask,
                    max_probes=self.edges.max_probes, token_of_node=token_of_node, ascii_row=ascii_row,
                    ascii_children=ascii_children)

    def step(self, node: torch.Tensor, codepoint: torch.Tensor) -> torch.Tensor:
        """The child of each ``node`` along ``codepoint``, or -1."""
        t = self.tensors(node.device)
        return trie_step(node.long(), codepoint.long(), t["ascii_row"], t["ascii_children"], t["slot_keys"],
                         t["slot_values"], t["hash_mask"], t["max_probes"])


def trie_step(node: torch.Tensor, codepoint: torch.Tensor, ascii_row: torch.Tensor, ascii_children: torch.Tensor,
              slot_keys: torch.Tensor, slot_values: torch.Tensor, hash_mask: int, max_probes: int) -> torch.Tensor:
    """Children of int64 ``node`` along int64 ``codepoint`` (-1 where there is no edge)."""
    is_ascii = codepoint < 128
    row = ascii_row[node].long()
    child = torch.where(is_ascii & (row >= 0), ascii_children[row.clamp(min=0), codepoint.clamp(max=127)], -1).long()
    if not bool(is_ascii.all()):
        other = torch.nonzero(~is_ascii).flatten()
        child[other] = hash_lookup(slot_keys, slot_values, hash_mask, max_probes,
                                   node[other] * MAX_CODEPOINT + codepoint[other])
    return child
