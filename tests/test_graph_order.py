"""The ``[graph] order`` renumberings, on graphs whose right numbering is known by construction."""

from __future__ import annotations

import numpy as np

from workbench.graph.csr import CSRGraph
from workbench.run import _rank, metis_order_parts


def _cliques(count: int, size: int, seed: int) -> tuple[CSRGraph, np.ndarray]:
    """``count`` cliques of ``size`` vertices joined in a ring by one edge each, ids shuffled;
    returns the graph and each (shuffled) vertex's clique."""
    src, dst = [], []
    for c in range(count):
        members = np.arange(c * size, (c + 1) * size)
        a, b = np.meshgrid(members, members)
        keep = a != b
        src.append(a[keep])
        dst.append(b[keep])
        bridge = np.array([c * size, ((c + 1) % count) * size + 1])
        src.append(bridge)
        dst.append(bridge[::-1])
    perm = np.random.default_rng(seed).permutation(count * size)  # vertex v becomes perm[v]
    clique = np.empty(count * size, dtype=np.int64)
    clique[perm] = np.arange(count * size) // size
    graph = CSRGraph.from_edges(perm[np.concatenate(src)], perm[np.concatenate(dst)], count * size)
    return graph, clique


def test_rank_orders_by_key_and_breaks_ties_by_id():
    assert list(_rank(np.array([3, 1, 3, 0]))) == [2, 1, 3, 0]


def test_metis_order_numbers_each_clique_in_one_interval_of_consecutive_ids():
    # 4 cliques of 32 vertices: the minimum cut at every level of the bisection falls between
    # cliques (a clique split would cut about 256 edges, a bridge 1-2), so with 64 parts of 2
    # vertices each clique is 16 consecutive parts, i.e. 32 consecutive new ids.
    graph, clique = _cliques(4, 32, seed=3)
    new_id = _rank(metis_order_parts(graph, seed=0))
    for c in range(4):
        ids = np.sort(new_id[clique == c])
        assert ids[-1] - ids[0] == 31, f"clique {c} spread over ids {ids[0]}..{ids[-1]}"
        assert ids[0] % 32 == 0  # and aligned to the intervals a 4-chunk split cuts
