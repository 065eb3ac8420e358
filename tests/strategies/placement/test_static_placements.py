"""none, degree, presample and partitioned against cases worked out by hand or by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError, UnknownNameError
from workbench.graph.csr import CSRGraph
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import AccessModel, PlacementRequest, capacity_in_vertices


def star_graph() -> CSRGraph:
    # In-degrees: 0 -> 3 (from 1, 2, 3), 1 -> 2 (from 0, 2), 2 -> 1 (from 0), 3 -> 0, 4 -> 2 (from 0, 1).
    src = np.array([1, 2, 3, 0, 2, 0, 0, 1])
    dst = np.array([0, 0, 0, 1, 1, 2, 4, 4])
    return CSRGraph.from_edges(src, dst, 5)


def test_registered_names() -> None:
    assert PLACEMENTS.names() == ["degree", "fifo", "none", "partitioned", "presample", "song-jiang"]


def test_capacity_in_vertices() -> None:
    assert capacity_in_vertices(4000, feat_dim=100) == 10  # 100 floats = 400 bytes per vertex
    assert capacity_in_vertices(4000, feat_dim=100, dtype_bytes=2) == 20
    with pytest.raises(ConfigError):
        capacity_in_vertices(4000, feat_dim=0)


def test_none() -> None:
    result = PLACEMENTS.create("none").place(PlacementRequest(graph=star_graph(), num_gpus=3, capacity=2))
    assert result.cache_sizes() == [0, 0, 0]
    assert (result.home == -1).all()
    rates = result.expected_hit_rate(np.full(5, 0.2))
    assert rates.host.tolist() == [1.0, 1.0, 1.0]


def test_degree_by_hand() -> None:
    req = PlacementRequest(graph=star_graph(), num_gpus=2, capacity=2)
    # In-degrees [3, 2, 1, 0, 2]: 0 first, then 1 and 4 tie at 2 and the lower id wins.
    result = PLACEMENTS.create("degree").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 1], [0, 1]]
    assert (result.home == -1).all()
    # Out-degrees (PaGraph's ranking) [3, 2, 2, 1, 0]: 0, then 1 (ties with 2, lower id).
    result = PLACEMENTS.create("degree", direction="out").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 1], [0, 1]]
    req3 = PlacementRequest(graph=star_graph(), num_gpus=1, capacity=3)
    assert PLACEMENTS.create("degree").place(req3).gpu_vertices[0].tolist() == [0, 1, 4]
    assert PLACEMENTS.create("degree", direction="out").place(req3).gpu_vertices[0].tolist() == [0, 1, 2]
    with pytest.raises(ConfigError, match="direction"):
        PLACEMENTS.create("degree", direction="both")


def test_presample_by_brute_force(full_sampler_1hop) -> None:
    """One seed per batch, full 1-hop sampler: a vertex's frequency is the share of training seeds reading it."""
    g = star_graph()
    g.train_mask = np.array([True, True, False, False, True])
    # Brute force: seed s reads s and its in-neighbors.
    reads = {0: {0, 1, 2, 3}, 1: {1, 0, 2}, 4: {4, 0, 1}}
    freq = np.zeros(5)
    for hood in reads.values():
        freq[list(hood)] += 1 / 3
    assert freq.tolist() == pytest.approx([1, 1, 2 / 3, 1 / 3, 1 / 3])
    req = PlacementRequest(
        graph=g, num_gpus=2, capacity=3, access=AccessModel(sampler=full_sampler_1hop, batch_size=1)
    )
    result = PLACEMENTS.create("presample", epochs=2).place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 1, 2], [0, 1, 2]]
    with pytest.raises(ConfigError, match="needs a sampler"):
        PLACEMENTS.create("presample").place(PlacementRequest(graph=g, num_gpus=1, capacity=1))


def test_partitioned_by_hand() -> None:
    g = star_graph()
    owner = np.array([0, 1, 0, 1, 1])
    req = PlacementRequest(graph=g, num_gpus=2, capacity=3, owner=owner)
    result = PLACEMENTS.create("partitioned").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 2], [1, 3, 4]]
    assert result.home.tolist() == owner.tolist()
    rates = result.expected_hit_rate(np.full(5, 0.2))
    assert rates.local.tolist() == pytest.approx([0.4, 0.6])
    assert rates.peer.tolist() == pytest.approx([0.6, 0.4])
    # Capacity 2: partition 1 overflows and keeps its two most-accessed vertices (PaGraph's variant).
    prob = np.array([0.1, 0.5, 0.1, 0.2, 0.3])
    req = PlacementRequest(graph=g, num_gpus=2, capacity=2, owner=owner, access_probability=prob)
    result = PLACEMENTS.create("partitioned").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 2], [1, 4]]
    assert result.home.tolist() == [0, 1, 0, -1, 1]
    with pytest.raises(ConfigError, match="owner array or a partitioner"):
        PLACEMENTS.create("partitioned").place(PlacementRequest(graph=g, num_gpus=2, capacity=2))


def test_request_rejects_impossible_parameters() -> None:
    g = star_graph()
    with pytest.raises(ConfigError, match="larger than graph"):
        PlacementRequest(graph=g, num_gpus=1, capacity=6)
    with pytest.raises(ConfigError, match="GPUs must be >= 1"):
        PlacementRequest(graph=g, num_gpus=0, capacity=1)
    with pytest.raises(ConfigError, match="owner"):
        PlacementRequest(graph=g, num_gpus=2, capacity=1, owner=np.array([0, 1, 2, 0, 0]))


class _HalvesResult:
    def __init__(self, owner: np.ndarray) -> None:
        self.owner = owner


class _HalvesPartitioner:
    """First half of the vertices to part 0, the rest spread over the other parts (test stand-in)."""

    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> _HalvesResult:
        n = graph.num_nodes
        owner = np.zeros(n, dtype=np.int64)
        owner[n // 2 :] = 1 + np.arange(n - n // 2) % max(num_parts - 1, 1)
        return _HalvesResult(np.minimum(owner, num_parts - 1))


def test_partitioned_resolves_a_partitioner_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.registry import PARTITIONERS

    PARTITIONERS.names()  # load the real partitioners first; add the stand-in for this test only
    monkeypatch.setitem(PARTITIONERS._entries, "halves-test", _HalvesPartitioner)
    req = PlacementRequest(graph=star_graph(), num_gpus=2, capacity=3)
    result = PLACEMENTS.create("partitioned", partitioner="halves-test").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 1], [2, 3, 4]]
    assert result.home.tolist() == [0, 0, 1, 1, 1]
    with pytest.raises(UnknownNameError, match="unknown partition strategy"):
        PLACEMENTS.create("partitioned", partitioner="no-such").place(req)
