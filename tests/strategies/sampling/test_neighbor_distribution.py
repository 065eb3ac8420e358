"""Node-wise sampling draws every in-edge with probability min(1, fanout / degree), and bulk-matrix draws like neighbor.

Why a chi-square with a correction: with a uniform ``k``-subset of a row of ``d``
entries, each entry's count over ``N`` draws has mean ``N p`` (``p = k / d``) and
variance ``N p (1 - p)``, and two entries of a row covary by ``-N p (1 - p) / (d - 1)``
(the row's total is fixed at ``N k``). So ``(d - 1) / d * sum (c - N p)^2 / (N p (1 - p))``
over a row is chi-square with ``d - 1`` degrees of freedom, and rows are independent.
The test fails when the p-value is below 1e-4: with the fixed seeds it either passes
or fails deterministically, and a correct sampler fails for one seed in ten thousand.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.base import Sampler

from .conftest import graph_from_in_neighbors

DRAWS = 3000
FANOUT = 4
NODEWISE_UNIFORM = {
    "neighbor": ("neighbor", {}),
    "bulk-matrix-fused": ("bulk-matrix", {"spgemm": "fused", "bulk": 50}),
    "bulk-matrix-scipy": ("bulk-matrix", {"spgemm": "scipy", "bulk": 50}),
    "bulk-matrix-torch": ("bulk-matrix", {"spgemm": "torch", "bulk": 50}),
    "locality-aware-factor-1": ("locality-aware", {"cached": [1, 4, 5], "factor": 1.0}),
}


def make(config: str, fanouts: list[int]) -> Sampler:
    name, params = NODEWISE_UNIFORM[config]
    return SAMPLERS.create(name, fanouts=fanouts, **params)


def edge_counts(sampler: Sampler, graph: CSRGraph, seeds: np.ndarray, draws: int) -> np.ndarray:
    """How often each edge of the graph (in CSR order) was sampled in the seeds' layer."""
    rng = np.random.default_rng(12345)
    counts = np.zeros(graph.num_edges, dtype=np.int64)
    mbs = sampler.sample_many(graph, [seeds] * draws, rng)
    for mb in mbs:
        b = mb.blocks[-1]
        v = b.dst_nodes[b.edge_dst]
        u = b.src_nodes[b.edge_src]
        # CSR position of edge u -> v: rows are sorted, so search within row v.
        pos = np.array(
            [graph.indptr[y] + np.searchsorted(graph.in_neighbors(y), x) for x, y in zip(u, v, strict=True)]
        )
        np.add.at(counts, pos, 1)
    return counts


@pytest.mark.parametrize("config", sorted(NODEWISE_UNIFORM))
def test_edge_inclusion_frequency_is_fanout_over_degree(config: str, star_graph: CSRGraph) -> None:
    seeds = np.array([0, 1, 2, 3])
    counts = edge_counts(make(config, [FANOUT]), star_graph, seeds, DRAWS)
    statistic, dof = 0.0, 0
    for v in seeds:
        row = counts[star_graph.indptr[v] : star_graph.indptr[v + 1]]
        d = row.shape[0]
        if d <= FANOUT:
            assert np.all(row == DRAWS), "a vertex with at most fanout in-neighbors keeps all of them"
            continue
        p = FANOUT / d
        assert row.sum() == DRAWS * FANOUT, "exactly fanout distinct neighbors per draw"
        statistic += (d - 1) / d * np.sum((row - DRAWS * p) ** 2) / (DRAWS * p * (1 - p))
        dof += d - 1
    assert dof == 9 + 5 + 4
    assert stats.chi2.sf(statistic, dof) > 1e-4, f"{config}: chi2={statistic:.1f} on {dof} dof"


@pytest.mark.parametrize("config", sorted(NODEWISE_UNIFORM))
def test_sampled_subsets_are_uniform(config: str) -> None:
    """Inclusion rates alone do not show uniform subsets: all 10 pairs of a 5-neighbor row are equally likely."""
    graph = graph_from_in_neighbors([[1, 2, 3, 4, 5], [], [], [], [], []])
    rng = np.random.default_rng(7)
    mbs = make(config, [2]).sample_many(graph, [np.array([0])] * DRAWS, rng)
    pairs = list(itertools.combinations(range(1, 6), 2))
    freq = np.zeros(len(pairs))
    for mb in mbs:
        b = mb.blocks[-1]
        freq[pairs.index(tuple(sorted(b.src_nodes[b.edge_src].tolist())))] += 1
    assert stats.chisquare(freq).pvalue > 1e-4, f"{config}: subset counts {freq}"


def test_bulk_matrix_and_neighbor_agree_on_multi_layer_sizes() -> None:
    """Two layers on a random graph: per-layer source counts have the same mean (5 standard errors)."""
    from workbench.graph.generators import erdos_renyi

    graph = erdos_renyi(400, 6.0, seed=11)
    seeds = np.arange(0, 400, 20)
    sizes = {}
    for config in ("neighbor", "bulk-matrix-fused", "bulk-matrix-scipy"):
        mbs = make(config, [3, 2]).sample_many(graph, [seeds] * 600, np.random.default_rng(3))
        sizes[config] = np.array([[b.num_src for b in mb.blocks] for mb in mbs], dtype=np.float64)
    base = sizes["neighbor"]
    for config, s in sizes.items():
        se = np.sqrt(base.var(axis=0) / base.shape[0] + s.var(axis=0) / s.shape[0])
        assert np.all(np.abs(s.mean(axis=0) - base.mean(axis=0)) < 5 * se + 1e-9), (config, s.mean(axis=0))
