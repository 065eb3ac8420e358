"""Helpers several partitioners share (private: the registry does not import ``_`` modules).

``undirected_adjacency`` is what METIS and the streaming heuristics read: both
directions of every edge, self loops dropped, built in one sort instead of the two
that ``graph.symmetrize().remove_self_loops()`` would take. ``vertex_order`` is the
order a one-pass algorithm visits vertices in.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph

ORDERS = ("random", "natural")


def undirected_adjacency(graph: CSRGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of the symmetrized graph without self loops (rows sorted, no duplicates)."""
    src = graph.indices
    dst = graph.edge_dst()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    g = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), graph.num_nodes)
    return g.indptr, g.indices


def check_order(order: str, strategy: str) -> str:
    if order not in ORDERS:
        raise ConfigError(f"partitioner {strategy!r}: order {order!r}; allowed: {', '.join(ORDERS)}")
    return order


def vertex_order(vertices: np.ndarray, order: str, rng: np.random.Generator) -> np.ndarray:
    """``vertices`` as given (``natural``) or shuffled by ``rng`` (``random``)."""
    vertices = np.asarray(vertices, dtype=np.int64)
    return rng.permutation(vertices) if order == "random" else vertices
