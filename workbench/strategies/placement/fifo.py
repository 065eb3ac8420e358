"""``fifo``: BGL's dynamic feature cache with first-in-first-out replacement.

BGL (Liu et al., NSDI 2023, section 3.2 "dynamic cache engine") keeps a per-GPU
feature cache whose contents follow the minibatches: vertices a minibatch reads that
are not cached are fetched and admitted, the oldest admitted vertices leave first,
and a hit does not refresh a vertex's age (FIFO, not LRU: cheap to maintain on a GPU).

Its :class:`~workbench.strategies.placement.base.PlacementResult` is a snapshot:
``place`` returns the initial state (empty, or warmed with the highest-degree
vertices), :meth:`FifoPlacement.update` feeds one minibatch of one GPU through that
GPU's cache, and :meth:`FifoPlacement.state` returns the current contents. GPUs do
not read each other's caches (peer groups of one) and every vertex's home is host
memory.

One ``update`` (batch deduplicated, first occurrence kept):

* **hits**: batch vertices already cached; **misses**: the others, fetched from host;
* the misses are admitted in batch order into the oldest slots; when a batch misses
  more vertices than the cache holds, only its last ``capacity`` misses stay (the
  earlier ones would be pushed out by the later ones of the same batch);
* **evicted**: vertices cached before the update and not after it.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import ConfigError
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import (
    CacheStats,
    DynamicPlacement,
    PlacementRequest,
    PlacementResult,
    descending_order,
)

INITIAL_STATES = ("empty", "degree")


class FifoCache:
    """One GPU's FIFO cache of ``capacity`` vertices over a graph of ``num_nodes`` vertices (a ring buffer)."""

    def __init__(self, num_nodes: int, capacity: int, initial: np.ndarray | None = None) -> None:
        self.capacity = capacity
        self.slot_of = np.full(num_nodes, -1, dtype=np.int64)
        self.ring = np.full(capacity, -1, dtype=np.int64)
        self.head = 0  # the oldest slot: the next one to be overwritten
        if initial is not None and capacity > 0:
            self.update(np.asarray(initial, dtype=np.int64)[:capacity])

    def contents(self) -> np.ndarray:
        """Cached vertices, sorted."""
        return np.sort(self.ring[self.ring >= 0])

    def fifo_order(self) -> np.ndarray:
        """Cached vertices, oldest first."""
        rolled = np.roll(self.ring, -self.head)
        return rolled[rolled >= 0]

    def update(self, batch_vertices: np.ndarray) -> CacheStats:
        batch = np.asarray(batch_vertices, dtype=np.int64)
        _, first = np.unique(batch, return_index=True)
        batch = batch[np.sort(first)]
        hit = self.slot_of[batch] >= 0
        missed = batch[~hit]
        admitted = missed[max(0, missed.shape[0] - self.capacity) :] if self.capacity else missed[:0]
        slots = (self.head + np.arange(admitted.shape[0], dtype=np.int64)) % max(self.capacity, 1)
        victims = self.ring[slots]
        victims = victims[victims >= 0]
        self.slot_of[victims] = -1
        self.ring[slots] = admitted
        self.slot_of[admitted] = slots
        if self.capacity:
            self.head = int((self.head + admitted.shape[0]) % self.capacity)
        return CacheStats(hits=int(hit.sum()), misses=int(missed.shape[0]), evicted=int(victims.shape[0]))


@PLACEMENTS.register("fifo")
class FifoPlacement(DynamicPlacement):
    """BGL's dynamic FIFO cache per GPU; ``place`` gives the initial state, ``update(batch)`` advances it."""

    def __init__(self, initial: str = "empty") -> None:
        if initial not in INITIAL_STATES:
            raise ConfigError(f"fifo placement: initial {initial!r}; allowed: {', '.join(INITIAL_STATES)}")
        self.initial = initial
        self.caches: list[FifoCache] = []
        self._num_nodes = 0

    def place(self, request: PlacementRequest) -> PlacementResult:
        warm = None
        if self.initial == "degree":
            # Admitted lowest degree first, so the highest-degree vertices are the youngest.
            warm = descending_order(request.graph.out_degrees())[: request.capacity][::-1]
        self._num_nodes = request.num_nodes
        self.caches = [FifoCache(request.num_nodes, request.capacity, warm) for _ in range(request.num_gpus)]
        return self.state()

    def update(self, batch_vertices: np.ndarray, gpu: int = 0) -> CacheStats:
        if not self.caches:
            raise RuntimeError("fifo placement: call place() before update()")
        if not 0 <= gpu < len(self.caches):
            raise ConfigError(f"fifo placement: GPU {gpu} outside 0..{len(self.caches) - 1}")
        return self.caches[gpu].update(batch_vertices)

    def state(self) -> PlacementResult:
        if not self.caches:
            raise RuntimeError("fifo placement: call place() before state()")
        return PlacementResult(
            gpu_vertices=[c.contents() for c in self.caches],
            home=np.full(self._num_nodes, -1, dtype=np.int64),
            peer_groups=tuple((g,) for g in range(len(self.caches))),
        )
