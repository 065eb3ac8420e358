"""Small hand-made graphs the partition tests share (fixtures: ``--import-mode=importlib`` forbids sibling imports)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph

Builder = Callable[..., CSRGraph]


def _undirected(edges: list[tuple[int, int]], num_nodes: int, **node_data: object) -> CSRGraph:
    src = np.array([u for u, v in edges] + [v for u, v in edges], dtype=np.int64)
    dst = np.array([v for u, v in edges] + [u for u, v in edges], dtype=np.int64)
    return CSRGraph.from_edges(src, dst, num_nodes, **node_data)


@pytest.fixture
def undirected() -> Builder:
    """``undirected(edges, num_nodes, **node_data)``: both directions of every pair in ``edges``."""
    return _undirected


@pytest.fixture
def two_cliques() -> CSRGraph:
    """Two 5-cliques (0..4 and 5..9) joined by the one edge 4 - 5."""
    edges = [(a, b) for c in (0, 5) for a in range(c, c + 5) for b in range(a + 1, c + 5)]
    return _undirected([*edges, (4, 5)], 10, name="two-cliques")
