"""Generator statistics: R-MAT is heavy-tailed, SBM keeps the asked share of edges inside blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from workbench.errors import ConfigError
from workbench.graph.generators import erdos_renyi, rmat, sbm


def _no_loops_or_duplicates(g) -> None:
    g.validate()
    dst = g.edge_dst()
    assert not np.any(g.indices == dst)
    key = dst * g.num_nodes + g.indices
    assert np.all(np.diff(key) > 0)


def _is_symmetric(g) -> bool:
    fwd = np.sort(g.edge_dst() * g.num_nodes + g.indices)
    rev = np.sort(g.indices * g.num_nodes + g.edge_dst())
    return np.array_equal(fwd, rev)


def _tail_exponent(degrees: np.ndarray, d_min: int) -> float:
    """Maximum-likelihood (Hill) power-law exponent of the degrees >= d_min (Clauset et al. 2009)."""
    tail = degrees[degrees >= d_min].astype(float)
    return 1.0 + tail.size / np.sum(np.log(tail / (d_min - 0.5)))


def test_rmat_exact_size_simple_and_symmetric() -> None:
    g = rmat(5000, 60_000, seed=1)
    assert g.num_nodes == 5000 and g.num_edges == 60_000
    _no_loops_or_duplicates(g)
    assert _is_symmetric(g)
    d = rmat(5000, 30_001, seed=1, symmetric=False)
    assert d.num_edges == 30_001
    _no_loops_or_duplicates(d)


def test_rmat_is_deterministic_per_seed() -> None:
    a, b, c = rmat(3000, 20_000, seed=7), rmat(3000, 20_000, seed=7), rmat(3000, 20_000, seed=8)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.indptr, b.indptr)
    assert not np.array_equal(a.indices, c.indices)


def test_rmat_degree_distribution_is_heavy_tailed() -> None:
    n, m = 20_000, 200_000
    power_law = rmat(n, m, seed=0).in_degrees()
    uniform = erdos_renyi(n, m / n, seed=0).in_degrees()
    # Same mean degree; R-MAT's hubs are tens of times the mean, G(n, m)'s max is ~2x.
    assert power_law.mean() == pytest.approx(uniform.mean(), rel=0.01)
    assert power_law.max() > 20 * power_law.mean()
    assert uniform.max() < 3 * uniform.mean()
    assert np.percentile(power_law, 99) > 2 * np.percentile(uniform, 99)
    # A power-law tail: a finite Hill exponent in the range real graphs show (2..4).
    assert 1.5 < _tail_exponent(power_law, d_min=20) < 4.0


def test_rmat_ids_carry_no_degree_order() -> None:
    # Without the permutation, low ids are the hubs (R-MAT's recursive bias).
    raw = rmat(8192, 80_000, seed=3, permute=False).in_degrees()
    shuffled = rmat(8192, 80_000, seed=3).in_degrees()
    half = 4096
    assert raw[:half].sum() > 2 * raw[half:].sum()
    assert 0.8 < shuffled[:half].sum() / shuffled[half:].sum() < 1.25


def _intra_share(g) -> float:
    return float(np.mean(g.communities[g.indices] == g.communities[g.edge_dst()]))


@pytest.mark.parametrize("p_in", [0.3, 0.6, 0.9])
@pytest.mark.parametrize("exponent", [None, 2.5])
def test_sbm_intra_community_share_matches_p_in(p_in: float, exponent: float | None) -> None:
    g = sbm(10_000, 20, 10.0, p_in, seed=2, degree_exponent=exponent)
    _no_loops_or_duplicates(g)
    assert _is_symmetric(g)
    assert g.num_edges == 100_000
    # Sampling noise is ~sqrt(p(1-p)/50k undirected edges) < 0.003; deduplication drops
    # intra-block pairs a little more often (blocks are denser), worth up to ~0.02 here.
    assert _intra_share(g) == pytest.approx(p_in, abs=0.03)
    assert np.bincount(g.communities).min() > 0


def test_degree_corrected_sbm_is_heavy_tailed_and_plain_sbm_is_not() -> None:
    plain = sbm(20_000, 10, 10.0, 0.8, seed=0).in_degrees()
    corrected = sbm(20_000, 10, 10.0, 0.8, seed=0, degree_exponent=2.5).in_degrees()
    assert plain.max() < 4 * plain.mean()  # Poisson-like: the max of 20k draws of mean 10 is ~25-30
    assert corrected.max() > 20 * corrected.mean()


def test_rmat_planted_communities_are_local() -> None:
    g = rmat(20_000, 200_000, seed=0, num_communities=40, p_in=0.8)
    chance = float(np.sum((np.bincount(g.communities) / g.num_nodes) ** 2))
    # Deduplication among hub pairs costs some intra edges; still far above chance.
    assert _intra_share(g) > 0.6 > 10 * chance
    assert g.in_degrees().max() > 20 * g.in_degrees().mean()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: rmat(100, 1000, 0, a=0.6, b=0.3, c=0.2), "a \\+ b \\+ c < 1"),
        (lambda: rmat(10, 1000, 0), "denser"),
        (lambda: rmat(1, 0, 0), "at least 2"),
        (lambda: sbm(100, 0, 5, 0.5, 0), "num_blocks"),
        (lambda: sbm(100, 4, 5, 1.5, 0), "p_in_fraction"),
        (lambda: sbm(100, 4, 5, 0.5, 0, degree_exponent=1.5), "degree_exponent"),
    ],
)
def test_bad_parameters_raise_config_error(call, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call()


@pytest.mark.slow
def test_rmat_one_million_vertices_twenty_million_edges_under_30_s() -> None:
    import time

    start = time.perf_counter()
    g = rmat(1_000_000, 20_000_000, seed=0)
    assert g.num_edges == 20_000_000
    assert time.perf_counter() - start < 30.0


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(8, 400),
    degree=st.floats(0.5, 6.0),
    seed=st.integers(0, 2**16),
    symmetric=st.booleans(),
    kind=st.sampled_from(["rmat", "sbm", "sbm-dc", "rmat-communities"]),
)
def test_generators_always_give_simple_graphs_of_the_asked_size(n, degree, seed, symmetric, kind) -> None:
    m = int(n * degree) // 2 * 2
    assume(m <= n * (n - 1) // 4)  # denser graphs are refused (see test_bad_parameters_raise_config_error)
    if kind == "rmat":
        g = rmat(n, m, seed, symmetric=symmetric)
    elif kind == "rmat-communities":
        g = rmat(n, m, seed, symmetric=symmetric, num_communities=max(1, n // 10), p_in=0.7)
    else:
        exponent = 2.5 if kind == "sbm-dc" else None
        g = sbm(n, max(1, n // 20), m / n, 0.7, seed, degree_exponent=exponent, symmetric=symmetric)
    _no_loops_or_duplicates(g)
    assert g.num_nodes == n
    assert g.num_edges == m
    if symmetric:
        assert _is_symmetric(g)
    if g.communities is not None:
        assert g.communities.shape == (n,) and g.communities.min() >= 0


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("communities", [0, 16])
def test_connect_isolated_keeps_the_count_and_leaves_almost_no_isolated_vertex(
    symmetric, communities
) -> None:
    kwargs = {"num_communities": communities, "p_in": 0.8, "symmetric": symmetric}
    raw = rmat(20_000, 100_000, seed=5, **kwargs)
    fixed = rmat(20_000, 100_000, seed=5, connect_isolated=True, **kwargs)
    _no_loops_or_duplicates(fixed)
    assert fixed.num_edges == raw.num_edges == 100_000
    isolated_before = raw.summary()["isolated"]
    assert isolated_before > 2000
    assert fixed.summary()["isolated"] < 0.01 * isolated_before
    if not symmetric:  # directed: the new edges point into the formerly isolated vertices
        assert np.count_nonzero(fixed.in_degrees() == 0) < np.count_nonzero(raw.in_degrees() == 0)
    # The heavy tail survives.
    assert fixed.in_degrees().max() > 20 * fixed.in_degrees().mean()
