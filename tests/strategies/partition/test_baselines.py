"""random, equal-vertex and equal-edge on graphs whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.equal_edge import equal_edge_boundaries
from workbench.strategies.partition.equal_vertex import equal_vertex_boundaries

RNG = np.random.default_rng


def graph_with_in_degrees(degrees: list[int]) -> CSRGraph:
    """Vertex v has in-degree degrees[v] (sources are taken round robin from the other vertices)."""
    n = len(degrees)
    dst = np.repeat(np.arange(n), degrees)
    src = np.concatenate([(v + 1 + np.arange(d)) % n for v, d in enumerate(degrees)]).astype(np.int64)
    g = CSRGraph.from_edges(src, dst, n)
    assert g.in_degrees().tolist() == degrees
    return g


def test_equal_vertex_boundaries_by_hand() -> None:
    # floor(i * 10 / 4) = 0, 2, 5, 7, 10: sizes 2, 3, 2, 3
    assert equal_vertex_boundaries(10, 4).tolist() == [0, 2, 5, 7, 10]
    assert equal_vertex_boundaries(7, 7).tolist() == list(range(8))
    assert equal_vertex_boundaries(5, 1).tolist() == [0, 5]
    g = graph_with_in_degrees([1] * 10)
    r = PARTITIONERS.create("equal-vertex").partition(g, 4, RNG(0))
    assert r.owner.tolist() == [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    assert r.vertex_counts.tolist() == [2, 3, 2, 3]


def test_equal_edge_boundaries_by_hand() -> None:
    # in-degrees 3 1 1 1 2 0 -> prefix sums 0 3 4 5 6 8 8, E = 8
    g = graph_with_in_degrees([3, 1, 1, 1, 2, 0])
    # k = 2: first prefix >= 4 is at vertex 2 -> [0, 2) holds 4 edges, [2, 6) holds 4
    assert equal_edge_boundaries(g.indptr, 2).tolist() == [0, 2, 6]
    # k = 3: targets 8/3 and 16/3 -> first prefix >= 2.67 at 1, first >= 5.33 at 4
    assert equal_edge_boundaries(g.indptr, 3).tolist() == [0, 1, 4, 6]
    r = PARTITIONERS.create("equal-edge").partition(g, 3, RNG(0))
    assert r.owner.tolist() == [0, 1, 1, 1, 2, 2]
    assert r.edge_counts.tolist() == [3, 3, 2]
    # one vertex with every edge: the parts after it are empty, none is lost
    assert equal_edge_boundaries(graph_with_in_degrees([0, 4, 0, 0, 0]).indptr, 2).tolist() == [0, 2, 5]


def test_equal_edge_without_edges_falls_back_to_equal_vertex() -> None:
    g = CSRGraph.from_edges(np.array([], np.int64), np.array([], np.int64), 10)
    assert equal_edge_boundaries(g.indptr, 4).tolist() == [0, 2, 5, 7, 10]


@pytest.mark.parametrize("method", ["deal", "uniform", "hash"])
def test_random_methods(method: str) -> None:
    g = graph_with_in_degrees([1] * 103)
    part = PARTITIONERS.create("random", method=method)
    a = part.partition(g, 4, RNG(5)).owner
    assert np.array_equal(a, part.partition(g, 4, RNG(5)).owner)
    assert a.min() >= 0 and a.max() < 4
    if method == "deal":
        assert sorted(np.bincount(a, minlength=4).tolist()) == [25, 26, 26, 26]
        assert not np.array_equal(a, part.partition(g, 4, RNG(6)).owner)
    if method == "hash":
        assert np.array_equal(a, part.partition(g, 4, RNG(99)).owner)  # the rng plays no part
        assert a[:4].tolist() == [(v * 2654435761 % 2**32) % 4 for v in range(4)]


def test_bad_parameters_and_part_counts() -> None:
    with pytest.raises(ConfigError, match="method 'coin'"):
        PARTITIONERS.create("random", method="coin")
    g = graph_with_in_degrees([1, 1, 1])
    for name in ("random", "equal-vertex", "equal-edge"):
        with pytest.raises(ConfigError, match="4 parts is more than the 3 vertices"):
            PARTITIONERS.create(name).partition(g, 4, RNG(0))
        with pytest.raises(ConfigError, match="at least 1"):
            PARTITIONERS.create(name).partition(g, 0, RNG(0))
