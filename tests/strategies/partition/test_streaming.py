"""LDG and Fennel, stepped through by hand in natural order, plus capacity, seeds and bad parameters."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.fennel import fennel_assign
from workbench.strategies.partition.ldg import ldg_assign

RNG = np.random.default_rng


def test_ldg_path_by_hand(undirected: Callable[..., CSRGraph]) -> None:
    # path 0-1-2-3-4-5, k = 2, capacity 3. v0: no placed neighbor, tie -> part 0.
    # v1: 1*(1-1/3) > 0 -> 0; v2: 1*(1-2/3) > 0 -> 0 (now full); v3..v5: part 0 is full -> 1.
    g = undirected([(i, i + 1) for i in range(5)], 6)
    r = PARTITIONERS.create("ldg", order="natural").partition(g, 2, RNG(0))
    assert r.owner.tolist() == [0, 0, 0, 1, 1, 1]
    assert r.details["capacity"] == 3
    assert r.edge_cut == 2


def test_ldg_two_cliques_by_hand(two_cliques: CSRGraph) -> None:
    # scores 0.8, 1.2, 1.2, 0.8 keep 1..4 with 0; part 0 is then full and 5..9 fill part 1
    r = PARTITIONERS.create("ldg", order="natural").partition(two_cliques, 2, RNG(0))
    assert r.owner.tolist() == [0] * 5 + [1] * 5
    assert r.edge_cut == 2


def test_ldg_no_neighbors_goes_to_the_smallest_part() -> None:
    indptr = np.zeros(8, dtype=np.int64)
    owner = ldg_assign(indptr, np.zeros(0, np.int64), np.arange(7, dtype=np.int64), 3, 3)
    assert owner.tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_fennel_two_cliques_by_hand(two_cliques: CSRGraph) -> None:
    # alpha = 0.1, gamma = 1.5: the cost of joining a part of size s is 0.15 * sqrt(s).
    # v0 -> 0; v1..v4 have 1..4 neighbors in part 0, worth more than 0.15*sqrt(s) -> 0.
    # v5: 1 neighbor in part 0 (1 - 0.15*sqrt(5) = 0.66 > 0) -> 0, which reaches the cap ceil(1.1*5) = 6.
    # v6..v9: part 0 is full -> 1. The cap cuts 5's four edges into the second clique.
    r = PARTITIONERS.create("fennel", order="natural", alpha=0.1).partition(two_cliques, 2, RNG(0))
    assert r.owner.tolist() == [0] * 6 + [1] * 4
    assert r.details["capacity"] == 6
    assert r.edge_cut == 8


def test_fennel_default_alpha(two_cliques: CSRGraph) -> None:
    # 21 undirected edges, n = 10, k = 2: alpha = sqrt(2) * 21 / 10**1.5
    r = PARTITIONERS.create("fennel").partition(two_cliques, 2, RNG(0))
    assert r.details["alpha"] == pytest.approx(math.sqrt(2) * 21 / 10**1.5, abs=1e-6)
    # large alpha: pure balancing, strict alternation by size then index
    indptr = np.zeros(5, dtype=np.int64)
    owner = fennel_assign(indptr, np.zeros(0, np.int64), np.arange(4, dtype=np.int64), 2, 3, 100.0, 1.5)
    assert owner.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("name", ["ldg", "fennel"])
def test_streaming_seeded_and_capped(name: str) -> None:
    rng = RNG(2)
    src, dst = rng.integers(0, 500, 4000), rng.integers(0, 500, 4000)
    g = CSRGraph.from_edges(src, dst, 500)
    part = PARTITIONERS.create(name)
    a = part.partition(g, 6, RNG(11))
    assert np.array_equal(a.owner, part.partition(g, 6, RNG(11)).owner)
    assert not np.array_equal(a.owner, part.partition(g, 6, RNG(12)).owner)
    assert a.vertex_counts.max() <= a.details["capacity"]
    random_cut = PARTITIONERS.create("random").partition(g, 6, RNG(11)).edge_cut
    assert a.edge_cut < random_cut


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("ldg", {"order": "bfs"}, "order 'bfs'"),
        ("ldg", {"slack": 0.5}, "slack must be"),
        ("fennel", {"gamma": 1.0}, "gamma must be a number > 1"),
        ("fennel", {"nu": 0.9}, "nu must be"),
        ("fennel", {"alpha": -1}, "alpha must be"),
    ],
)
def test_bad_parameters(name: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PARTITIONERS.create(name, **params)
