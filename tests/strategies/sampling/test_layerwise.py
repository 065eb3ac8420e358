"""LADIES and FastGCN against distributions worked out by hand on a four-vertex graph.

The graph (``ladies_graph``): in-neighbors 0: {1, 2}, 1: {0, 2}, 2: {3}, 3: {0}. With
self loops added and rows normalized, ``A_hat`` is::

    row 0: cols 0, 1, 2 -> 1/3 each        row 2: cols 2, 3 -> 1/2 each
    row 1: cols 0, 1, 2 -> 1/3 each        row 3: cols 0, 3 -> 1/2 each

LADIES for the batch {0, 3}: squared column norms over rows 0 and 3 are
``(1/9 + 1/4, 1/9, 1/9, 1/4) = (13, 4, 4, 9) / 36``, so ``p = (13, 4, 4, 9) / 30``.
FastGCN, over all rows: ``(2/9 + 1/4, 2/9, 2/9 + 1/4, 1/4 + 1/4) = (17, 8, 17, 18) / 36``,
so ``p = (17, 8, 17, 18) / 60``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.fastgcn import fastgcn_distribution
from workbench.strategies.sampling.ladies import ladies_layer_distribution, normalized_adjacency

LADIES_P = np.array([13, 4, 4, 9]) / 30
FASTGCN_P = np.array([17, 8, 17, 18]) / 60
DRAWS = 1500


def successive_inclusion(p: np.ndarray, size: int) -> np.ndarray:
    """Inclusion probability of each item when ``size`` are drawn one by one, proportional to p, without replacement."""
    incl = np.zeros(p.shape[0])
    for order in itertools.permutations(range(p.shape[0]), size):
        prob, left = 1.0, 1.0
        for i in order:
            prob *= p[i] / left
            left -= p[i]
        incl[list(order)] += prob
    return incl


def test_normalized_adjacency_by_hand(ladies_graph: CSRGraph) -> None:
    a = normalized_adjacency(ladies_graph).toarray()
    third, half = 1 / 3, 1 / 2
    want = np.array(
        [[third, third, third, 0], [third, third, third, 0], [0, 0, half, half], [half, 0, 0, half]]
    )
    assert np.allclose(a, want)


def test_ladies_distribution_by_hand(ladies_graph: CSRGraph) -> None:
    candidates, p = ladies_layer_distribution(normalized_adjacency(ladies_graph), np.array([0, 3]))
    assert candidates.tolist() == [0, 1, 2, 3]
    assert np.allclose(p, LADIES_P)


def test_fastgcn_distribution_by_hand(ladies_graph: CSRGraph) -> None:
    a = normalized_adjacency(ladies_graph)
    candidates, p = fastgcn_distribution(a.multiply(a))
    assert candidates.tolist() == [0, 1, 2, 3]
    assert np.allclose(p, FASTGCN_P)


@pytest.mark.parametrize(
    "name,params",
    [
        ("ladies", {}),
        ("bulk-matrix", {"algorithm": "ladies", "bulk": 64}),
        ("bulk-matrix", {"algorithm": "ladies", "bulk": 64, "spgemm": "torch"}),
    ],
    ids=["ladies", "bulk-matrix-ladies", "bulk-matrix-ladies-torch"],
)
@pytest.mark.parametrize("size", [1, 2])
def test_ladies_layer_matches_formula(ladies_graph: CSRGraph, name: str, params: dict, size: int) -> None:
    """Vertices 1 and 2 (not in the batch) enter the layer as often as successive sampling from p predicts."""
    sampler = SAMPLERS.create(name, layer_sizes=[size], **params)
    mbs = sampler.sample_many(ladies_graph, [np.array([0, 3])] * DRAWS, np.random.default_rng(5))
    hits = np.zeros(4)
    for mb in mbs:
        hits[mb.blocks[0].src_nodes] += 1
    want = successive_inclusion(LADIES_P, size)
    for v in (1, 2):
        # Binomial count: fail below a two-sided p-value of 1e-4.
        assert stats.binomtest(int(hits[v]), DRAWS, want[v]).pvalue > 1e-4, (
            name,
            size,
            v,
            hits[v] / DRAWS,
            want[v],
        )


def test_ladies_block_weights(ladies_graph: CSRGraph) -> None:
    """Edge weights are A_hat[i, j] / p_j, normalized per destination."""
    mb = SAMPLERS.create("ladies", layer_sizes=[3]).sample(
        ladies_graph, np.array([0, 3]), np.random.default_rng(0)
    )
    b = mb.blocks[0]
    a = normalized_adjacency(ladies_graph).toarray()
    dense = np.zeros((b.num_dst, b.num_src))
    dense[b.edge_dst, b.edge_src] = b.edge_weight
    raw = a[np.ix_(b.dst_nodes, b.src_nodes)] / LADIES_P[b.src_nodes]
    want = raw / raw.sum(axis=1, keepdims=True)
    assert np.allclose(dense, want, atol=1e-6)


def test_fastgcn_layer_matches_formula(ladies_graph: CSRGraph) -> None:
    sampler = SAMPLERS.create("fastgcn", layer_sizes=[1])
    mbs = sampler.sample_many(ladies_graph, [np.array([1])] * DRAWS, np.random.default_rng(8))
    drawn = np.zeros(4)
    for mb in mbs:
        b = mb.blocks[0]
        # The drawn vertex is the one with edges (or vertex 1 itself when it drew itself).
        drawn[np.unique(b.src_nodes[b.edge_src])] += 1
    # Vertex 1's only possible edge sources are its in-neighbors and itself: 0, 1, 2.
    for v in (0, 1, 2):
        assert stats.binomtest(int(drawn[v]), DRAWS, FASTGCN_P[v]).pvalue > 1e-4, (v, drawn[v] / DRAWS)
    assert drawn[3] == 0
