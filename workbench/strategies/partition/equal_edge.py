"""``equal-edge``: contiguous vertex ranges holding about the same number of edges.

ROC's second baseline (paper 000, section 7.6: "equal edge partitioning ... widely
used in previous graph processing systems"). Edges are counted where the graph
stores them, at their destination (the in-degree), as :class:`PartitionResult` does.
With ``cum`` the in-degree prefix sum (``cum[0] = 0``, ``cum[V] = E``), boundary
``b_i`` is the smallest vertex id with ``cum[b_i] >= i * E / k`` (one
``searchsorted``, exact integer arithmetic). Part ``i`` is ``[b_i, b_{i+1})`` and
holds fewer than ``E / k + max in-degree`` edges. A vertex of very high in-degree can
leave a later part empty. A graph without edges falls back to equal vertex counts.
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
from workbench.strategies.partition.equal_vertex import equal_vertex_boundaries


def equal_edge_boundaries(indptr: np.ndarray, num_parts: int) -> np.ndarray:
    """``k + 1`` boundaries: ``b_i`` = smallest ``b`` with ``indptr[b] * k >= i * E``."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n, m = indptr.size - 1, int(indptr[-1])
    if m == 0:
        return equal_vertex_boundaries(n, num_parts)
    targets = np.arange(num_parts + 1, dtype=np.int64) * m
    bounds = np.searchsorted(indptr * num_parts, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n  # trailing zero-degree vertices belong to the last part
    return bounds


@PARTITIONERS.register("equal-edge")
class EqualEdgePartitioner(Partitioner):
    """Contiguous id ranges with about E/k in-edges each (ROC's equal-edge baseline)."""

    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        k = check_num_parts(graph, num_parts, "equal-edge")
        bounds = equal_edge_boundaries(graph.indptr, k)
        return PartitionResult(
            graph,
            contiguous_owner(bounds, graph.num_nodes),
            k,
            strategy="equal-edge",
            details={"boundaries": bounds.tolist()} if k <= 16 else {},
        )
