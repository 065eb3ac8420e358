"""METIS through pymetis: the obvious cut of two joined cliques, seeds, training balance, k = 1."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS


def test_two_cliques_cut_one_undirected_edge(two_cliques: CSRGraph) -> None:
    g = two_cliques
    r = PARTITIONERS.create("metis").partition(g, 2, np.random.default_rng(0))
    # the joining edge is stored in both directions: 2 cut stored edges, 1 for METIS
    assert r.edge_cut == 2
    assert r.details["metis_cut"] == 1
    assert len(set(r.owner[:5].tolist())) == 1 and len(set(r.owner[5:].tolist())) == 1
    assert r.owner[0] != r.owner[5]


def test_directed_graph_and_self_loops_are_accepted() -> None:
    # a directed cycle with self loops: METIS sees the undirected cycle
    n = 12
    src = np.concatenate([np.arange(n), np.arange(n)])
    dst = np.concatenate([(np.arange(n) + 1) % n, np.arange(n)])
    g = CSRGraph.from_edges(src, dst, n)
    r = PARTITIONERS.create("metis").partition(g, 3, np.random.default_rng(1))
    assert r.vertex_counts.tolist() == [4, 4, 4]
    assert r.edge_cut == 3  # three arcs of four consecutive vertices


def test_same_seed_same_parts_and_k1() -> None:
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    g = CSRGraph.from_edges(src, dst, 300)
    part = PARTITIONERS.create("metis")
    a = part.partition(g, 4, np.random.default_rng(7)).owner
    assert np.array_equal(a, part.partition(g, 4, np.random.default_rng(7)).owner)
    one = part.partition(g, 1, np.random.default_rng(7))
    assert one.owner.tolist() == [0] * 300 and one.edge_cut == 0


def test_balance_train_spreads_training_vertices() -> None:
    # two dense communities, every training vertex in the first: plain METIS keeps them together
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 400, 4000), rng.integers(0, 400, 4000)
    src, dst = np.concatenate([src, src + 400, [0]]), np.concatenate([dst, dst + 400, [700]])
    g = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), 800)
    g.train_mask = np.arange(800) < 400
    plain = PARTITIONERS.create("metis").partition(g, 2, np.random.default_rng(0))
    balanced = PARTITIONERS.create("metis", balance_train=True).partition(g, 2, np.random.default_rng(0))
    assert plain.train_balance == pytest.approx(2.0)
    assert balanced.train_balance < 1.5 and balanced.vertex_balance < 1.5


def test_bad_ufactor() -> None:
    with pytest.raises(ConfigError, match="ufactor"):
        PARTITIONERS.create("metis", ufactor=0)


def test_a_graph_too_large_for_metis_is_refused_naming_what_can(two_cliques: CSRGraph, monkeypatch) -> None:
    import workbench.graph.specs as specs

    # two_cliques' edges at 130 bytes each need more than 100 bytes
    monkeypatch.setattr(specs, "available_memory", lambda: 100)
    with pytest.raises(ConfigError, match=r"metis.*GiB to partition.*ldg, fennel.*random"):
        PARTITIONERS.create("metis").partition(two_cliques, 2, np.random.default_rng(0))
    monkeypatch.setattr(specs, "available_memory", lambda: None)  # unknown: no refusal
    assert PARTITIONERS.create("metis").partition(two_cliques, 2, np.random.default_rng(0)).num_parts == 2
