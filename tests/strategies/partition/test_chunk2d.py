"""NeuGraph's chunk grid: P worked out by hand on a 12-cycle, the grid's edge counts, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS

# feat 4, hidden 4, 4-byte floats and ids: a source vertex costs 16 bytes, a destination
# vertex 16 + 16 + 4 (column pointer) = 36, plus 4 for the last pointer and 4 per edge.
SMALL = {"feat_dim": 4, "hidden_dim": 4}


@pytest.fixture
def cycle12() -> CSRGraph:
    """Directed cycle 0 -> 1 -> ... -> 11 -> 0."""
    return CSRGraph.from_edges(np.arange(12), (np.arange(12) + 1) % 12, 12)


def chunks(graph: CSRGraph, memory: int, parts: int = 2, **params: object):  # type: ignore[no-untyped-def]
    part = PARTITIONERS.create("chunk2d", gpu_memory_bytes=memory, **SMALL, **params)
    return part.partition(graph, parts, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("memory", "parts", "expected_p", "need"),
    [
        # P = 2: chunks of 6, 5 edges inside a chunk: 6*16 + 6*36 + 4 + 5*4 = 336
        (1000, 2, 2, 336),
        # P = 2 does not fit 200; P = 4: 3*16 + 3*36 + 4 + 2*4 = 168
        (200, 2, 4, 168),
        # P = 6: 2*16 + 2*36 + 4 + 1*4 = 112, exactly the budget
        (112, 2, 6, 112),
        # 111: P = 8 and P = 10 keep a 2-vertex chunk with its inner edge (112); P = 12: 16 + 36 + 4 + 4 = 60
        (111, 2, 12, 60),
        # 3 GPUs: P in 3, 6, ...; P = 3 needs 4*16 + 4*36 + 4 + 3*4 = 224 > 200, P = 6 needs 112
        (200, 3, 6, 112),
    ],
)
def test_smallest_fitting_p_by_hand(
    cycle12: CSRGraph, memory: int, parts: int, expected_p: int, need: int
) -> None:
    r = chunks(cycle12, memory, parts)
    assert r.chunk_grid is not None
    assert r.chunk_grid.num_chunks == expected_p
    assert r.details["working_set_bytes"] == need
    assert r.details["chunks_per_part"] == expected_p // parts
    assert r.vertex_counts.tolist() == [12 // parts] * parts


def test_grid_edge_counts(cycle12: CSRGraph) -> None:
    grid = chunks(cycle12, 200).chunk_grid
    assert grid is not None
    assert grid.boundaries.tolist() == [0, 3, 6, 9, 12]
    expected = np.zeros((4, 4), dtype=np.int64)
    for i in range(4):
        expected[i, i] = 2  # 3i -> 3i+1 -> 3i+2
        expected[i, (i + 1) % 4] = 1  # 3i+2 -> 3i+3: source chunk i, destination chunk i+1
    assert grid.edge_counts.tolist() == expected.tolist()
    assert grid.edge_counts.sum() == cycle12.num_edges


def test_edge_sizing_and_edge_data(cycle12: CSRGraph) -> None:
    # every vertex has in-degree 1: equal-edge chunks are equal-vertex chunks here
    assert chunks(cycle12, 200, sizing="edge").chunk_grid.boundaries.tolist() == [0, 3, 6, 9, 12]
    # 4 floats of edge data per edge: P = 4 needs 168 + 2*16 = 200
    assert chunks(cycle12, 200, edge_data_dim=4).details["working_set_bytes"] == 200


def test_nothing_fits(cycle12: CSRGraph) -> None:
    # one-vertex chunks need 16 + 36 + 4 = 56 bytes before any edge
    with pytest.raises(ConfigError, match="cannot hold even 12 vertex chunks"):
        chunks(cycle12, 50)
    # 59 holds a one-vertex chunk pair, but not with the edge between them (60)
    with pytest.raises(ConfigError, match="any grid up to 12 chunks"):
        chunks(cycle12, 59)


def test_parameters(cycle12: CSRGraph) -> None:
    part = PARTITIONERS.create("chunk2d", gpu_memory_bytes="1kB", feat_dim=4)
    assert part.gpu_memory_bytes == 1000
    with pytest.raises(ConfigError, match="no feature dimension; give feat_dim"):
        PARTITIONERS.create("chunk2d").partition(cycle12, 2, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="sizing 'row'"):
        PARTITIONERS.create("chunk2d", sizing="row")
    with pytest.raises(ConfigError, match="hidden_dim must be an integer >= 0"):
        PARTITIONERS.create("chunk2d", hidden_dim=-1)
    with pytest.raises(ConfigError, match="cannot read .lots."):
        PARTITIONERS.create("chunk2d", gpu_memory_bytes="lots")
