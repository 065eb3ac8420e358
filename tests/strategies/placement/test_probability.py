"""Access probabilities: the exact full-neighborhood formula by hand and by brute force, and pre-sampling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.strategies.placement.base import AccessModel, PlacementRequest
from workbench.strategies.placement.probability import (
    batch_hit_probability,
    full_neighborhood_probability,
    presampled_probability,
    reaching_seed_counts,
    request_probability,
)


def chain_graph() -> CSRGraph:
    # Edges 0 -> 1, 1 -> 2, 3 -> 2 (row v lists v's in-neighbors); training vertices 1 and 2.
    train = np.array([False, True, True, False])
    return CSRGraph.from_edges(np.array([0, 1, 3]), np.array([1, 2, 2]), 4, train_mask=train)


def test_exact_probability_by_hand() -> None:
    g = chain_graph()
    # One layer: seed 1 reads {1, 0}; seed 2 reads {2, 1, 3}.
    assert reaching_seed_counts(g, 1).tolist() == [1, 2, 1, 1]
    # Batches of one seed out of two: p = k / 2.
    assert full_neighborhood_probability(g, 1, batch_size=1).tolist() == [0.5, 1.0, 0.5, 0.5]
    # Two layers: seed 2 also reads 0 (through 1).
    assert reaching_seed_counts(g, 2).tolist() == [2, 2, 1, 1]
    assert full_neighborhood_probability(g, 2, batch_size=1).tolist() == [1.0, 1.0, 0.5, 0.5]
    # A batch of both seeds reads everything reachable.
    assert full_neighborhood_probability(g, 1, batch_size=2).tolist() == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("seed", range(3))
def test_exact_probability_against_brute_force(seed: int) -> None:
    """Enumerate every batch of b seeds, take the union of their L-hop neighborhoods, count."""
    g = erdos_renyi(12, 1.5, seed=seed, symmetric=False)
    rng = np.random.default_rng(seed)
    train = rng.random(12) < 0.6
    train[:2] = True
    g.train_mask = train
    seeds = g.train_nids().tolist()
    layers, b = 2, 3

    def neighborhood(s: int) -> set[int]:
        reached = {s}
        for _ in range(layers):
            reached |= {int(u) for v in reached for u in g.in_neighbors(v)}
        return reached

    hoods = {s: neighborhood(s) for s in seeds}
    batches = list(itertools.combinations(seeds, b))
    counts = np.zeros(12)
    for batch in batches:
        for v in set().union(*(hoods[s] for s in batch)):
            counts[v] += 1
    np.testing.assert_allclose(full_neighborhood_probability(g, layers, b), counts / len(batches))


def test_batch_hit_probability_edges() -> None:
    # k = 0 never read; k >= T - b + 1 always read; otherwise 1 - C(T-k, b) / C(T, b).
    p = batch_hit_probability(np.array([0, 1, 2, 4]), num_seeds=4, batch_size=2)
    assert p.tolist() == pytest.approx([0.0, 0.5, 1 - 1 / 6, 1.0])
    assert batch_hit_probability(np.array([0, 3]), num_seeds=3, batch_size=10).tolist() == [0.0, 1.0]


def test_presampling_matches_exact_in_expectation(full_sampler_2hop) -> None:
    g = erdos_renyi(60, 3.0, seed=1)
    g.train_mask = np.arange(60) % 2 == 0  # 30 training vertices: 6 full batches of 5
    exact = full_neighborhood_probability(g, 2, batch_size=5)
    est = presampled_probability(g, full_sampler_2hop, batch_size=5, epochs=200, rng=np.random.default_rng(0))
    # 1200 minibatches: the standard error of a frequency is below 0.015.
    assert np.abs(est - exact).max() < 0.06
    assert est.sum() == pytest.approx(exact.sum(), rel=0.02)


def test_request_probability_uses_the_access_model(full_sampler_1hop) -> None:
    g = chain_graph()
    given = np.array([0.1, 0.2, 0.3, 0.4])
    req = PlacementRequest(graph=g, num_gpus=1, capacity=1, access_probability=given)
    assert request_probability(req).tolist() == given.tolist()
    req = PlacementRequest(graph=g, num_gpus=1, capacity=1, access=AccessModel(num_layers=1, batch_size=1))
    assert request_probability(req).tolist() == [0.5, 1.0, 0.5, 0.5]
    # Pre-sampling with the full 1-hop sampler, one seed per batch: the same numbers, exactly.
    model = AccessModel(sampler=full_sampler_1hop, batch_size=1, epochs=3)
    req = PlacementRequest(graph=g, num_gpus=1, capacity=1, access=model)
    assert request_probability(req).tolist() == [0.5, 1.0, 0.5, 0.5]
