"""fifo: a sequence of batches with hits, misses and evictions worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.graph.generators import erdos_renyi
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import CacheStats, PlacementRequest


def test_fifo_by_hand() -> None:
    fifo = PLACEMENTS.create("fifo")
    initial = fifo.place(PlacementRequest(graph=erdos_renyi(12, 2.0, seed=0), num_gpus=2, capacity=3))
    assert initial.cache_sizes() == [0, 0]
    assert fifo.dynamic
    # Cache (oldest first) after each batch, capacity 3:
    # [1, 2, 3]: three misses fill the empty cache                  -> [1, 2, 3]
    assert fifo.update(np.array([1, 2, 3])) == CacheStats(hits=0, misses=3, evicted=0)
    # [2, 4]: 2 hits; 4 misses and pushes out the oldest, 1          -> [2, 3, 4]
    assert fifo.update(np.array([2, 4])) == CacheStats(hits=1, misses=1, evicted=1)
    # [5, 6, 7, 8]: four misses; only the last three stay; 2, 3, 4 go -> [6, 7, 8]
    assert fifo.update(np.array([5, 6, 7, 8])) == CacheStats(hits=0, misses=4, evicted=3)
    # [8, 6, 6, 9]: deduplicated to [8, 6, 9]; 8 and 6 hit; 9 pushes out 6, the oldest,
    # although it was just read (FIFO, not LRU)                     -> [7, 8, 9]
    assert fifo.update(np.array([8, 6, 6, 9])) == CacheStats(hits=2, misses=1, evicted=1)
    assert fifo.caches[0].fifo_order().tolist() == [7, 8, 9]
    state = fifo.state()
    assert [v.tolist() for v in state.gpu_vertices] == [[7, 8, 9], []]
    assert (state.home == -1).all()
    # GPU 1 has its own cache: a miss there, although GPU 0 holds 7.
    assert fifo.update(np.array([7]), gpu=1) == CacheStats(hits=0, misses=1, evicted=0)
    assert fifo.state().expected_hit_rate(np.full(12, 1 / 12)).peer.tolist() == [0.0, 0.0]


def test_fifo_degree_warm_start_and_zero_capacity() -> None:
    g = erdos_renyi(30, 4.0, seed=2)
    fifo = PLACEMENTS.create("fifo", initial="degree")
    state = fifo.place(PlacementRequest(graph=g, num_gpus=1, capacity=4))
    top = np.argsort(-g.out_degrees(), kind="stable")[:4]
    assert state.gpu_vertices[0].tolist() == sorted(top.tolist())
    # The highest-degree vertex was admitted last, so it is the youngest.
    assert fifo.caches[0].fifo_order()[-1] == top[0]
    empty = PLACEMENTS.create("fifo")
    empty.place(PlacementRequest(graph=g, num_gpus=1, capacity=0))
    assert empty.update(np.array([1, 2])) == CacheStats(hits=0, misses=2, evicted=0)


def test_fifo_update_before_place() -> None:
    with pytest.raises(RuntimeError, match="place"):
        PLACEMENTS.create("fifo").update(np.array([1]))
