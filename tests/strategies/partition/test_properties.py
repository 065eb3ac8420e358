"""Every registered partitioner on random small graphs: one owner in [0, k) per vertex, same seed same
owners, and the balance each strategy promises. Names are read from the registry, so a new
partitioner is covered the day it lands (unless it cannot be built without parameters)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS


def needs_parameters(name: str) -> bool:
    params = inspect.signature(PARTITIONERS.get(name)).parameters.values()
    return any(
        p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in params
    )


NAMES = [n for n in PARTITIONERS.names() if not needs_parameters(n)]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[CSRGraph, int]:
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 4 * n))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    if draw(st.booleans()):  # symmetric, like most studied graphs
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    mask = rng.random(n) < draw(st.floats(0.0, 1.0)) if draw(st.booleans()) else None
    graph = CSRGraph.from_edges(src, dst, n, train_mask=mask, feat_dim=8, name="hypothesis")
    return graph, draw(st.integers(1, min(n, 6)))


def test_the_strategies_of_the_mission_are_registered() -> None:
    expected = {"random", "equal-vertex", "equal-edge", "metis", "ldg", "fennel", "pagraph", "chunk2d"}
    assert expected <= set(PARTITIONERS.names())
    assert expected <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(case=graphs(), seed=st.integers(0, 2**32 - 1))
def test_owners_valid_and_deterministic(name: str, case: tuple[CSRGraph, int], seed: int) -> None:
    graph, k = case
    result = PARTITIONERS.create(name).partition(graph, k, np.random.default_rng(seed))
    owner = result.owner
    assert owner.shape == (graph.num_nodes,) and owner.dtype == np.int64
    assert owner.min() >= 0 and owner.max() < k
    assert result.num_parts == k
    again = PARTITIONERS.create(name).partition(graph, k, np.random.default_rng(seed))
    assert np.array_equal(owner, again.owner)
    counts = result.vertex_counts
    assert counts.sum() == graph.num_nodes
    if name in ("equal-vertex", "equal-edge", "chunk2d"):
        assert np.all(np.diff(owner) >= 0), "contiguous ranges in id order"
    if name in ("equal-vertex", "random"):
        assert counts.max() - counts.min() <= 1
    if name == "equal-edge":
        max_deg = int(graph.in_degrees().max(initial=0))
        if graph.num_edges:
            assert np.all(result.edge_counts * k <= graph.num_edges + k * max_deg)
        else:
            assert counts.max() - counts.min() <= 1
    if name in ("ldg", "fennel"):
        assert counts.max() <= result.details["capacity"]
    if name == "ldg":
        assert counts.max() <= -(-graph.num_nodes // k)  # slack 1: perfectly balanced up to rounding
    if name == "pagraph":
        train = result.train_counts
        assert train.max() - train.min() <= max(1, int(np.ceil(train.sum() / k)))
    if name == "chunk2d":
        grid = result.chunk_grid
        assert grid is not None and grid.num_chunks % k == 0
        assert grid.edge_counts.sum() == graph.num_edges
