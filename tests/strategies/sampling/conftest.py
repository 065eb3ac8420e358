"""Small graphs worked by hand, and the sampler configurations every test runs over."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.base import Sampler


def graph_from_in_neighbors(in_neighbors: list[list[int]], name: str = "hand") -> CSRGraph:
    """Row ``v`` of the CSR lists ``in_neighbors[v]`` (the edges ``u -> v``)."""
    src = [u for v, nbrs in enumerate(in_neighbors) for u in nbrs]
    dst = [v for v, nbrs in enumerate(in_neighbors) for _ in nbrs]
    return CSRGraph.from_edges(
        np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), len(in_neighbors), name=name
    )


@pytest.fixture
def ladies_graph() -> CSRGraph:
    """Four vertices; in-neighbors 0: {1, 2}, 1: {0, 2}, 2: {3}, 3: {0} (the LADIES hand example)."""
    return graph_from_in_neighbors([[1, 2], [0, 2], [3], [0]])


@pytest.fixture
def star_graph() -> CSRGraph:
    """Destinations 0..3 with in-degrees 10, 6, 3 and 5 from leaves 4..27 (no shared neighbors)."""
    degrees = [10, 6, 3, 5]
    rows: list[list[int]] = []
    leaf = len(degrees)
    for d in degrees:
        rows.append(list(range(leaf, leaf + d)))
        leaf += d
    rows.extend([] for _ in range(leaf - len(degrees)))
    return graph_from_in_neighbors(rows, name="stars")


# Every registered sampler, built as a test would configure it (two layers).
SAMPLER_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "full": ("full", {"num_layers": 2}),
    "neighbor": ("neighbor", {"fanouts": [3, 2]}),
    "ladies": ("ladies", {"layer_sizes": [1, 1]}),
    "fastgcn": ("fastgcn", {"layer_sizes": [1, 1]}),
    "locality-aware": ("locality-aware", {"fanouts": [3, 2], "cached": [0, 1, 2], "factor": 3.0}),
    "bulk-matrix": ("bulk-matrix", {"fanouts": [3, 2], "bulk": 3}),
    "bulk-matrix-scipy": ("bulk-matrix", {"fanouts": [3, 2], "bulk": 3, "spgemm": "scipy"}),
    "bulk-matrix-torch": ("bulk-matrix", {"fanouts": [3, 2], "bulk": 3, "spgemm": "torch"}),
    "bulk-matrix-ladies": ("bulk-matrix", {"algorithm": "ladies", "layer_sizes": [1, 1], "bulk": 3}),
}


def build(config: str) -> Sampler:
    name, params = SAMPLER_CONFIGS[config]
    return SAMPLERS.create(name, **params)
