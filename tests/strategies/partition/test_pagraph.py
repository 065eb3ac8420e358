"""PaGraph's greedy training-vertex assignment, stepped through by hand."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS

# training vertices 0..3 (TV_avg = 2 for k = 2), the rest are not
EDGES = [(0, 1), (0, 4), (1, 4), (1, 3), (2, 5), (3, 5), (6, 7)]


@pytest.fixture
def hand_graph(undirected: Callable[..., CSRGraph]) -> CSRGraph:
    return undirected(EDGES, 8, train_mask=np.arange(8) < 4)


def run(graph: CSRGraph, **params: object):  # type: ignore[no-untyped-def]
    return PARTITIONERS.create("pagraph", **params).partition(graph, 2, np.random.default_rng(0))


def test_one_hop_by_hand(hand_graph: CSRGraph) -> None:
    # v0: IN = {1, 4}; every part scores 0 -> part 0.        PV0 = {0,1,4}, TV0 = 1
    # v1: IN = {0, 3, 4}; part 0: 1 * (2 - 1) / 3 = 1/3 > 0 -> part 0.  PV0 = {0,1,3,4}, TV0 = 2
    # v2: IN = {5}; both 0, part 1 has fewer training vertices -> 1.    PV1 = {2,5}, TV1 = 1
    # v3: IN = {1, 5}; part 0: 1 * (2 - 2) / 4 = 0, part 1: 0 -> tie, fewer TV -> 1.  PV1 = {1,2,3,5}
    # rest: 4 is read by 0 and 1 (part 0) -> 0; 5 by 2 and 3 -> 1; 6, 7 held nowhere -> least loaded
    r = run(hand_graph)
    assert r.owner.tolist() == [0, 0, 1, 1, 0, 1, 0, 1]
    assert r.details["held_per_part"] == [4, 4]
    assert r.details["replication"] == 1.0
    assert r.train_counts.tolist() == [2, 2]


def test_two_hops_by_hand(hand_graph: CSRGraph) -> None:
    # v0: IN2 = {1, 3, 4} -> part 0 (all 0).              PV0 = {0,1,3,4}
    # v1: IN2 = {0, 3, 4, 5}; part 0: 1 * (2 - 1) / 4 > 0 -> 0.   PV0 = {0,1,3,4,5}, TV0 = 2
    # v2: IN2 = {3, 5}; no training vertex placed there -> part 1 (fewer TV).  PV1 = {2,3,5}
    # v3: IN2 = {0, 1, 2, 4, 5}; part 0: 2 * (2 - 2) / 5 = 0, part 1: 1 * (2 - 1) / 3 = 1/3 -> 1
    #     PV1 = {0,1,2,3,4,5}
    r = run(hand_graph, hops=2)
    assert r.owner.tolist() == [0, 0, 1, 1, 0, 1, 0, 1]
    assert r.details["held_per_part"] == [5, 6]
    assert r.details["replication"] == pytest.approx(11 / 8)


def test_in_neighborhood_follows_edge_direction() -> None:
    # directed: 0 -> 1 and 0 -> 2 (0 is an in-neighbor of 1 and 2); training 1, 2; k = 2.
    # v1: IN = {0}, all zero -> part 0, PV0 = {0, 1}.  v2: IN = {0}: no training vertex -> part 1.
    # 0 is read by 1 (part 0) and 2 (part 1), held by both: one reader each, equal sizes -> part 0.
    g = CSRGraph.from_edges(np.array([0, 0]), np.array([1, 2]), 3, train_mask=np.array([0, 1, 1], bool))
    r = run(g)
    assert r.owner.tolist() == [0, 0, 1]
    assert r.details["held_per_part"] == [2, 2]


def test_balances_training_vertices_on_random_graphs() -> None:
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 400, 3000), rng.integers(0, 400, 3000)
    g = CSRGraph.from_edges(src, dst, 400, train_mask=rng.random(400) < 0.3)
    part = PARTITIONERS.create("pagraph", order="random")
    r = part.partition(g, 4, np.random.default_rng(1))
    assert r.train_balance <= 1.05
    assert np.array_equal(r.owner, part.partition(g, 4, np.random.default_rng(1)).owner)


def test_bad_parameters() -> None:
    with pytest.raises(ConfigError, match="hops must be an integer >= 1"):
        PARTITIONERS.create("pagraph", hops=0)
    with pytest.raises(ConfigError, match="order 'dfs'"):
        PARTITIONERS.create("pagraph", order="dfs")
