"""CSR invariants: construction and transforms keep a valid CSR and the right edge set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.errors import GraphFormatError
from workbench.graph.csr import CSRGraph


@st.composite
def edge_lists(draw, max_nodes: int = 30, max_edges: int = 120):
    n = draw(st.integers(1, max_nodes))
    m = draw(st.integers(0, max_edges))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    return n, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def edge_set(g: CSRGraph) -> set[tuple[int, int]]:
    return set(zip(g.indices.tolist(), g.edge_dst().tolist(), strict=True))


def assert_invariants(g: CSRGraph) -> None:
    g.validate()
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32  # ids below 2**31: int32
    assert g.indptr[0] == 0 and g.indptr[-1] == g.num_edges
    for v in range(g.num_nodes):
        row = g.in_neighbors(v)
        assert np.all(np.diff(row) > 0), "rows are sorted and free of duplicates"


@settings(max_examples=60, deadline=None)
@given(edge_lists())
def test_from_edges_keeps_the_edge_set(case) -> None:
    n, src, dst = case
    g = CSRGraph.from_edges(src, dst, n)
    assert_invariants(g)
    assert edge_set(g) == set(zip(src.tolist(), dst.tolist(), strict=True))


@settings(max_examples=40, deadline=None)
@given(edge_lists())
def test_weights_follow_their_edges(case) -> None:
    n, src, dst = case
    weight = np.arange(src.size, dtype=np.float32)
    g = CSRGraph.from_edges(src, dst, n, weight=weight, dedup=False)
    assert g.num_edges == src.size
    got = sorted(zip(g.indices.tolist(), g.edge_dst().tolist(), g.edge_weight.tolist(), strict=True))
    want = sorted(zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True))
    assert got == want


@settings(max_examples=60, deadline=None)
@given(edge_lists())
def test_symmetrize_adds_every_reverse_edge(case) -> None:
    n, src, dst = case
    g = CSRGraph.from_edges(src, dst, n).symmetrize()
    assert_invariants(g)
    expected = set(zip(src.tolist(), dst.tolist(), strict=True))
    assert edge_set(g) == expected | {(d, s) for s, d in expected}


@settings(max_examples=60, deadline=None)
@given(edge_lists())
def test_add_self_loops_gives_exactly_one_loop_each(case) -> None:
    n, src, dst = case
    g = CSRGraph.from_edges(src, dst, n).add_self_loops()
    assert_invariants(g)
    edges = edge_set(g)
    assert {(v, v) for v in range(n)} <= edges
    non_loops = {(s, d) for s, d in zip(src.tolist(), dst.tolist(), strict=True) if s != d}
    assert edges == non_loops | {(v, v) for v in range(n)}
    assert edge_set(g.remove_self_loops()) == non_loops


@settings(max_examples=60, deadline=None)
@given(edge_lists(), st.randoms(use_true_random=False))
def test_relabel_maps_edges_and_node_data(case, random) -> None:
    n, src, dst = case
    labels = np.arange(n, dtype=np.int64) * 7
    g = CSRGraph.from_edges(src, dst, n, labels=labels)
    new_id = np.array(random.sample(range(n), n), dtype=np.int64)
    r = g.relabel(new_id)
    assert_invariants(r)
    assert edge_set(r) == {(int(new_id[s]), int(new_id[d])) for s, d in edge_set(g)}
    assert np.array_equal(r.labels[new_id], labels)


def test_bad_input_raises_graph_format_error() -> None:
    with pytest.raises(GraphFormatError, match="outside"):
        CSRGraph.from_edges(np.array([0, 5]), np.array([1, 1]), 3)
    with pytest.raises(GraphFormatError, match="differ in length"):
        CSRGraph.from_edges(np.array([0, 1]), np.array([1]), 3)
    with pytest.raises(GraphFormatError, match="permutation"):
        CSRGraph.from_edges(np.array([0]), np.array([1]), 2).relabel(np.array([0, 0]))
    bad = CSRGraph(indptr=np.array([0, 2, 1]), indices=np.array([0]))
    with pytest.raises(GraphFormatError):
        bad.validate()


def test_many_duplicates_collapse_to_one_edge() -> None:
    # 256 copies would sum to 0 in an 8-bit counter; the edge must survive.
    g = CSRGraph.from_edges(np.zeros(256, dtype=np.int64), np.ones(256, dtype=np.int64), 3)
    assert g.indptr.tolist() == [0, 0, 1, 1] and g.indices.tolist() == [0]


def test_row_lengths_read_from_indptr_equal_the_diff() -> None:
    from workbench.graph.csr import RowLengths

    indptr = np.array([0, 3, 3, 7, 8, 12], dtype=np.int64)
    lengths = RowLengths(indptr)
    full = np.diff(indptr)  # [3, 0, 4, 1, 4]
    assert len(lengths) == 5 and lengths.sum() == 12
    ids = np.array([4, 0, 1, 4, 2], dtype=np.int32)
    assert lengths[ids].tolist() == [4, 3, 0, 4, 4]
    for lo, hi in [(0, 5), (1, 3), (2, 2), (3, 99), (4, 1)]:
        assert lengths[lo:hi].tolist() == full[lo:hi].tolist()
    with pytest.raises(ValueError, match="step 1"):
        lengths[::2]
