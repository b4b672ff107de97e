"""The vocabulary as a tensorized trie: longest-match lookups for many words in lock-step.

Nodes are integers; the edge ``node --codepoint--> child`` is the entry
``node * 0x110000 + codepoint -> child`` of a :class:`gputok.hashing.HashMap`, so one transition
for a whole batch of (word, position) pairs is one hash and a few gathers, on any device. This is
the job a double-array trie does (base/check arrays); a hash map does it in the same O(1) per
transition without the double array's slow, fiddly construction, and is reused for BPE pair ranks.

A trie has several roots (nodes ``0 .. len(roots) - 1``): WordPiece uses root 0 for word-initial
pieces and root 1 for continuation pieces with their ``##`` prefix removed. ``token_of_node`` holds
the token id that ends at each node, or -1. Memory: ~40 bytes per trie node.
"""

from __future__ import annotations

import torch

from .hashing import HashMap
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
        keys = torch.tensor([node * MAX_CODEPOINT + cp for node, cp in edges], dtype=torch.int64)
        self.edges = HashMap(keys, torch.tensor(list(edges.values()), dtype=torch.int64))
        self.token_of_node = torch.tensor(tokens, dtype=torch.int32)
        self.num_roots = len(roots)
        self._on_device: dict[torch.device, torch.Tensor] = {}

    def tensors(self, device: torch.device | str) -> dict:
        """Everything a matching kernel needs, on ``device``."""
        device = torch.device(device)
        slot_keys, slot_values = self.edges.tensors(device)
        if device not in self._on_device:
            self._on_device[device] = self.token_of_node.to(device)
        return dict(slot_keys=slot_keys, slot_values=slot_values, hash_mask=self.edges.mask,
                    max_probes=self.edges.max_probes, token_of_node=self._on_device[device])

    def step(self, node: torch.Tensor, codepoint: torch.Tensor) -> torch.Tensor:
        """The child of each ``node`` along ``codepoint``, or -1."""
        return self.edges.get(node.long() * MAX_CODEPOINT + codepoint.long())
