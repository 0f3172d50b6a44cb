"""Prefix cache of the continuous-batching scheduler.

Prompts are cut into blocks of :data:`BLOCK_TOKENS` token ids; each full block is identified by a
hash chained over all blocks before it, as vLLM's automatic prefix caching does. A request's cached
prefix is the run of leading blocks already in the cache; its prefill then only computes the rest.
Cached blocks are kept in LRU order up to a capacity (and the room the KV memory has for them at the
moment) and evicted beyond it. A sequence whose token ids are not known (an offline workload given
only lengths) gets private block hashes, which let it find its own blocks again after a preemption.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import List, Optional, Sequence

BLOCK_TOKENS = 16


def block_hashes(token_ids: Sequence[int]) -> List[int]:
    """Chained hashes of the full blocks of ``token_ids``."""
    hashes = []
    previous = 0
    for start in range(0, len(token_ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        previous = hash((previous, tuple(token_ids[start : start + BLOCK_TOKENS])))
        hashes.append(previous)
    return hashes


def private_block_hashes(key: int, blocks: int) -> List[int]:
    """Hashes of ``blocks`` blocks of a sequence whose token ids are not known: unique to ``key``, so
    only that sequence finds them (it does after a preemption)."""
    return [hash((key, index, -1)) for index in range(blocks)]


class PrefixCache:
    """LRU set of cached block hashes."""

    def __init__(self, capacity_blocks: int) -> None:
        self._capacity = max(1, capacity_blocks)
        self._blocks: "OrderedDict[int, None]" = OrderedDict()

    def cached_tokens(self, hashes: Sequence[int]) -> int:
        """Tokens of the longest cached prefix (touching its blocks)."""
        matched = 0
        for block_hash in hashes:
            if block_hash not in self._blocks:
                break
            self._blocks.move_to_end(block_hash)
            matched += 1
        return matched * BLOCK_TOKENS

    def insert(self, hashes: Sequence[int], room: Optional[int] = None) -> None:
        """Cache ``hashes`` as the most recent blocks, then evict the least recent beyond the capacity
        and beyond ``room`` (the blocks the KV memory can keep cached now)."""
        for block_hash in hashes:
            self._blocks[block_hash] = None
            self._blocks.move_to_end(block_hash)
        self.trim(self._capacity if room is None else min(self._capacity, room))

    def trim(self, room: int) -> None:
        """Evict the least recent blocks beyond ``room`` (the KV memory just shrank)."""
        while len(self._blocks) > max(1, room):
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        """Forget every block (a cache reset)."""
        self._blocks.clear()
