"""Synthetic graph generators. All take an explicit seed and return a :class:`CSRGraph`."""

from __future__ import annotations

import numpy as np

from workbench.graph.csr import CSRGraph


def erdos_renyi(num_nodes: int, avg_degree: float, seed: int, *, symmetric: bool = True, name: str = "er") -> CSRGraph:
    """G(n, m) with ``m = n * avg_degree / 2`` undirected (or ``n * avg_degree`` directed) edges, no self loops."""
    rng = np.random.default_rng(seed)
    m = int(round(num_nodes * avg_degree / (2 if symmetric else 1)))
    src = rng.integers(0, num_nodes, m, dtype=np.int64)
    dst = rng.integers(0, num_nodes, m, dtype=np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    g = CSRGraph.from_edges(src, dst, num_nodes, name=name)
    g.meta = {"generator": "erdos_renyi", "num_nodes": num_nodes, "avg_degree": avg_degree, "seed": seed}
    return g
