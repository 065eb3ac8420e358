"""``lru``: keep every tensor still needed; when an operator does not fit, evict the least recently used.

ROC's second baseline (section 7.7: "the least-recently-used (LRU) cache replacement
policy"). Operators run in the graph's order. Before operator ``k`` the cache holds
the tensors earlier steps kept; ``k``'s inputs found there are reused, the others
loaded. If the cache kept through ``k`` plus ``k``'s inputs and outputs exceed the
capacity, cached tensors that ``k`` does not use are evicted, least recently used
(read or written) first, ties by declaration order, until they fit. After ``k`` every
input and output that a later operator reads is cached. Tensors nobody reads again are
released at once: a cache that knows reference counts, as a framework's allocator
does, which makes this baseline stronger, not weaker.

:func:`lru_cached_sets` is shared with ``dpmm``, which keeps LRU's trajectory in its
search so that it is never worse than ``lru`` even when its beam bound binds.
"""

from __future__ import annotations

from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import (
    MemoryPolicy,
    MemorySchedule,
    OperatorGraph,
    assemble_schedule,
    bits,
    check_capacity,
)


def lru_cached_sets(graph: OperatorGraph, capacity_bytes: int) -> list[int]:
    """The tensors (bitmask) LRU holds after each step, operators in graph order."""
    sizes = graph.sizes
    cache = 0
    done = 0
    last_use: dict[int, int] = {}
    out = []
    for k in range(len(graph.operators)):
        io = graph.read_masks[k] | graph.write_masks[k]
        through = cache & ~io
        room = capacity_bytes - graph.mask_bytes(io)
        held = graph.mask_bytes(through)
        if held > room:
            for i in sorted(bits(through), key=lambda i: (last_use[i], i)):
                through &= ~(1 << i)
                held -= sizes[i]
                if held <= room:
                    break
        done |= 1 << k
        for i in bits(io):
            last_use[i] = k
        cache = (through | io) & graph.active(done)
        out.append(cache)
    return out


@MEMORY_POLICIES.register("lru")
class LRUPolicy(MemoryPolicy):
    """Least-recently-used caching (ROC's baseline): keep what is still needed, evict the oldest."""

    def schedule(self, graph: OperatorGraph, capacity_bytes: int) -> MemorySchedule:
        cap = check_capacity(graph, capacity_bytes, "lru")
        n = len(graph.operators)
        return assemble_schedule(graph, cap, range(n), lru_cached_sets(graph, cap), "lru")
