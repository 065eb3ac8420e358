"""Helpers several partitioners share (private: the registry does not import ``_`` modules).

``undirected_adjacency`` is what METIS and the streaming heuristics read: both
directions of every edge, self loops dropped, built in one sort instead of the two
that ``graph.symmetrize().remove_self_loops()`` would take. ``vertex_order`` is the
order a one-pass algorithm visits vertices in, and ``streaming_assign`` that one pass
for LDG and Fennel, which differ only in how they score a part.
"""

from __future__ import annotations

import numba
import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph

ORDERS = ("random", "natural")
LDG_SCORE = 0  # placed * (1 - size / capacity)
FENNEL_SCORE = 1  # placed - alpha * gamma * size ** (gamma - 1)


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


@numba.njit(cache=True)
def streaming_assign(
    indptr: np.ndarray,
    indices: np.ndarray,
    order: np.ndarray,
    k: int,
    capacity: int,
    score_kind: int,
    alpha: float,
    gamma: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """One pass in ``order``: each vertex joins the non-full part of highest score.

    ``placed[i]`` counts the vertex's neighbors already in part ``i``. Ties go to the
    smaller part, then the lower index.
    """
    n = indptr.shape[0] - 1
    owner = np.full(n, -1, dtype=np.int64)
    sizes = np.zeros(k, dtype=np.int64)
    placed = np.zeros(k, dtype=np.int64)
    for v in order:
        for e in range(indptr[v], indptr[v + 1]):
            o = owner[indices[e]]
            if o >= 0:
                placed[o] += 1
        best = -1
        best_score = 0.0
        for i in range(k):
            if sizes[i] < capacity:
                if score_kind == LDG_SCORE:
                    score = placed[i] * (1.0 - sizes[i] / capacity)
                else:
                    score = placed[i] - alpha * gamma * sizes[i] ** (gamma - 1.0)
                if best < 0 or score > best_score or (score == best_score and sizes[i] < sizes[best]):
                    best = i
                    best_score = score
            placed[i] = 0
        owner[v] = best
        sizes[best] += 1
    return owner
