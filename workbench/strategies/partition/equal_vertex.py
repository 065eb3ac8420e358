"""``equal-vertex``: contiguous vertex ranges of equal size.

The first baseline of ROC (paper 000, section 7.6 "Graph Partitioning": "equal
vertex partitioning ... used in NeuGraph"), and NeuGraph's own layout (paper 001,
chunk-based dataflow translation: "P equally-sized disjoint vertex chunks"). Part ``i`` is the id range
``[floor(i * V / k), floor((i + 1) * V / k))``, so sizes differ by at most one and
the larger parts come last (V = 10, k = 4 gives 2, 3, 2, 3).
"""

from __future__ import annotations

import numpy as np

from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.base import (
    Partitioner,
    PartitionResult,
    check_num_parts,
    contiguous_owner,
)


def equal_vertex_boundaries(num_nodes: int, num_parts: int) -> np.ndarray:
    """``k + 1`` boundaries ``floor(i * V / k)``."""
    return np.arange(num_parts + 1, dtype=np.int64) * num_nodes // num_parts


@PARTITIONERS.register("equal-vertex")
class EqualVertexPartitioner(Partitioner):
    """Contiguous id ranges of floor(V/k) or ceil(V/k) vertices (ROC's and NeuGraph's baseline)."""

    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        k = check_num_parts(graph, num_parts, "equal-vertex")
        bounds = equal_vertex_boundaries(graph.num_nodes, k)
        return PartitionResult(
            graph,
            contiguous_owner(bounds, graph.num_nodes),
            k,
            strategy="equal-vertex",
            details={"boundaries": bounds.tolist()} if k <= 16 else {},
        )
