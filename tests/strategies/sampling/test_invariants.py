"""Every sampler returns blocks that satisfy the shared conventions, on hand graphs and random small graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.base import Minibatch, check_block_invariants

from .conftest import SAMPLER_CONFIGS, build

REGISTERED = {"full", "neighbor", "ladies", "fastgcn", "locality-aware", "bulk-matrix"}


def test_registered_names() -> None:
    assert REGISTERED <= set(SAMPLERS.names())
    for name in REGISTERED:
        assert SAMPLERS.describe(name)


def check_edges_are_graph_edges(graph: CSRGraph, mb: Minibatch) -> None:
    """Every block edge ``src -> dst`` is an edge of the graph (or a self loop, for layer-wise samplers)."""
    a = graph.to_scipy().tolil()
    for b in mb.blocks:
        u = b.src_nodes[b.edge_src]
        v = b.dst_nodes[b.edge_dst]
        for x, y in zip(u.tolist(), v.tolist(), strict=True):
            assert x == y or a[y, x] != 0, f"{x} -> {y} is not an edge"


@pytest.mark.parametrize("config", sorted(SAMPLER_CONFIGS))
def test_invariants_on_er_graph(config: str) -> None:
    graph = erdos_renyi(60, 4.0, seed=3)
    sampler = build(config)
    rng = np.random.default_rng(1)
    batches = [rng.choice(60, size=5, replace=False) for _ in range(4)]
    mbs = sampler.sample_many(graph, batches, rng)
    assert len(mbs) == 4
    for seeds, mb in zip(batches, mbs, strict=True):
        assert np.array_equal(mb.seeds, seeds)
        assert len(mb.blocks) == 2
        check_block_invariants(mb)
        check_edges_are_graph_edges(graph, mb)


def test_full_sampler_is_the_whole_neighborhood() -> None:
    graph = erdos_renyi(40, 3.0, seed=5)
    mb = SAMPLERS.create("full", num_layers=2).sample(graph, np.array([0, 7]), np.random.default_rng(0))
    a = graph.to_scipy()
    one_hop = set(np.flatnonzero(np.asarray(a[[0, 7]].sum(axis=0)).ravel()).tolist()) | {0, 7}
    assert set(mb.blocks[1].src_nodes.tolist()) == one_hop
    assert mb.blocks[1].num_edges == a[[0, 7]].nnz
    assert mb.blocks[0].num_edges == a[mb.blocks[0].dst_nodes].nnz


def test_sample_equals_sample_many_of_one_for_fixed_generator() -> None:
    graph = erdos_renyi(50, 5.0, seed=2)
    for config in ("neighbor", "bulk-matrix", "ladies"):
        sampler = build(config)
        a = sampler.sample(graph, np.array([1, 2, 3]), np.random.default_rng(9))
        b = sampler.sample_many(graph, [np.array([1, 2, 3])], np.random.default_rng(9))[0]
        for x, y in zip(a.blocks, b.blocks, strict=True):
            assert np.array_equal(x.src_nodes, y.src_nodes)
            assert np.array_equal(x.edge_src, y.edge_src)


def test_same_generator_state_same_sample() -> None:
    graph = erdos_renyi(200, 8.0, seed=2)
    for config in SAMPLER_CONFIGS:
        sampler = build(config)
        seeds = [np.arange(10), np.arange(10, 25)]
        a = sampler.sample_many(graph, seeds, np.random.default_rng(4))
        b = sampler.sample_many(graph, seeds, np.random.default_rng(4))
        for ma, mb in zip(a, b, strict=True):
            for x, y in zip(ma.blocks, mb.blocks, strict=True):
                assert np.array_equal(x.src_nodes, y.src_nodes), config
                assert np.array_equal(x.edge_src, y.edge_src), config
                assert np.array_equal(x.edge_dst, y.edge_dst), config


def test_empty_seed_list_and_isolated_seeds() -> None:
    graph = CSRGraph.from_edges(np.array([0]), np.array([1]), 4)
    for config in (
        "full",
        "neighbor",
        "locality-aware",
        "bulk-matrix",
        "bulk-matrix-scipy",
        "bulk-matrix-torch",
    ):
        sampler = build(config)
        rng = np.random.default_rng(0)
        mbs = sampler.sample_many(graph, [np.array([2, 3], dtype=np.int64), np.array([1])], rng)
        for mb in mbs:
            check_block_invariants(mb)
        assert mbs[0].blocks[-1].num_edges == 0
        assert mbs[1].blocks[-1].num_edges == 1


@st.composite
def graph_and_batches(draw: st.DrawFn) -> tuple[CSRGraph, list[np.ndarray], int]:
    n = draw(st.integers(1, 30))
    graph = erdos_renyi(
        n, draw(st.floats(0.0, 6.0)), seed=draw(st.integers(0, 10_000)), symmetric=draw(st.booleans())
    )
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    batches = [
        rng.choice(n, size=draw(st.integers(1, n)), replace=False) for _ in range(draw(st.integers(1, 4)))
    ]
    return graph, batches, seed


NODEWISE = ["full", "neighbor", "locality-aware", "bulk-matrix", "bulk-matrix-scipy", "bulk-matrix-torch"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph_and_batches())
def test_property_nodewise_invariants(case: tuple[CSRGraph, list[np.ndarray], int]) -> None:
    graph, batches, seed = case
    deg = graph.in_degrees()
    for config in NODEWISE:
        sampler = build(config)
        if config == "locality-aware":  # a cache that fits this graph: every third vertex
            sampler = sampler.with_cached(np.arange(graph.num_nodes) % 3 == 0)
        mbs = sampler.sample_many(graph, batches, np.random.default_rng(seed))
        for mb in mbs:
            check_block_invariants(mb)
            last = mb.blocks[-1]
            # Fanout 2 around the seeds: min(2, deg) edges each (everything for `full`).
            want = deg[mb.seeds] if config == "full" else np.minimum(2, deg[mb.seeds])
            assert np.array_equal(np.bincount(last.edge_dst, minlength=last.num_dst), want)
            # No edge twice within a block.
            keys = last.edge_dst * max(last.num_src, 1) + last.edge_src
            assert np.unique(keys).shape[0] == keys.shape[0]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph_and_batches())
def test_property_layerwise_invariants(case: tuple[CSRGraph, list[np.ndarray], int]) -> None:
    graph, batches, seed = case
    for config in ("ladies", "fastgcn", "bulk-matrix-ladies"):
        mbs = build(config).sample_many(graph, batches, np.random.default_rng(seed))
        for mb in mbs:
            check_block_invariants(mb)
            for b in mb.blocks:
                assert b.edge_weight is not None and b.edge_weight.shape == b.edge_src.shape
                sums = np.bincount(b.edge_dst, weights=b.edge_weight, minlength=b.num_dst)
                has = np.bincount(b.edge_dst, minlength=b.num_dst) > 0
                assert np.allclose(sums[has], 1.0, atol=1e-5)
