"""LAS raises the share of cached vertices among the sampled ones by what its factor predicts.

The prediction (:func:`expected_cached_share`) is exact for successive sampling; the
test compares it with the share measured over ``R`` independent draws of one layer.
Tolerance: the measured share is a mean over R draws, so its standard error is the
standard deviation of the per-draw shares over sqrt(R); we allow 5 standard errors
(a false failure about once in 1.7 million runs) plus nothing else.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.locality_aware import expected_cached_share

from .conftest import graph_from_in_neighbors

ROUNDS = 200
FANOUT = 4


def measured_shares(graph: CSRGraph, seeds: np.ndarray, cached: np.ndarray, factor: float) -> np.ndarray:
    sampler = SAMPLERS.create("locality-aware", fanouts=[FANOUT], cached=cached, factor=factor)
    mbs = sampler.sample_many(graph, [seeds] * ROUNDS, np.random.default_rng(21))
    shares = []
    for mb in mbs:
        b = mb.blocks[-1]
        shares.append(cached[b.src_nodes[b.edge_src]].mean())
    return np.array(shares)


def test_prediction_by_hand_for_one_draw() -> None:
    """Fanout 1, 2 cached and 3 other in-neighbors, factor 4: P(cached) = 4*2 / (4*2 + 3) = 8/11."""
    graph = graph_from_in_neighbors([[1, 2, 3, 4, 5], [], [], [], [], []])
    cached = np.zeros(6, dtype=bool)
    cached[[1, 2]] = True
    assert expected_cached_share(graph, np.array([0]), cached, 4.0, 1) == pytest.approx(8 / 11)
    # Two draws: first cached w.p. 8/11 then 4/(4+3); first other w.p. 3/11 then 8/(8+2).
    want = (8 / 11 * (1 + 4 / 7) + 3 / 11 * (8 / 10)) / 2
    assert expected_cached_share(graph, np.array([0]), cached, 4.0, 2) == pytest.approx(want)


@pytest.mark.parametrize("factor", [1.0, 3.0, 10.0, 0.5])
def test_cached_share_matches_prediction(factor: float) -> None:
    graph = erdos_renyi(3000, 12.0, seed=4)
    rng = np.random.default_rng(0)
    cached = rng.random(graph.num_nodes) < 0.2
    seeds = rng.choice(graph.num_nodes, 300, replace=False)
    shares = measured_shares(graph, seeds, cached, factor)
    predicted = expected_cached_share(graph, seeds, cached, factor, FANOUT)
    stderr = shares.std(ddof=1) / np.sqrt(ROUNDS)
    assert abs(shares.mean() - predicted) < 5 * stderr, (factor, shares.mean(), predicted, stderr)


def test_factor_raises_cached_share_by_the_predicted_amount() -> None:
    graph = erdos_renyi(3000, 12.0, seed=4)
    rng = np.random.default_rng(1)
    cached = rng.random(graph.num_nodes) < 0.2
    seeds = rng.choice(graph.num_nodes, 300, replace=False)
    plain = measured_shares(graph, seeds, cached, 1.0)
    favored = measured_shares(graph, seeds, cached, 4.0)
    predicted_gain = expected_cached_share(graph, seeds, cached, 4.0, FANOUT) - expected_cached_share(
        graph, seeds, cached, 1.0, FANOUT
    )
    stderr = np.sqrt(plain.var(ddof=1) / ROUNDS + favored.var(ddof=1) / ROUNDS)
    gain = favored.mean() - plain.mean()
    assert predicted_gain > 0.15  # the factor matters here: ~20% -> ~38% cached
    assert abs(gain - predicted_gain) < 5 * stderr, (gain, predicted_gain, stderr)


def test_cached_given_as_mask_or_ids_alike() -> None:
    graph = erdos_renyi(100, 6.0, seed=2)
    mask = np.arange(100) % 4 == 0
    a = SAMPLERS.create("locality-aware", fanouts=[3], cached=mask, factor=5.0)
    b = SAMPLERS.create("locality-aware", fanouts=[3], cached=np.flatnonzero(mask), factor=5.0)
    ma = a.sample(graph, np.arange(20), np.random.default_rng(3))
    mb = b.sample(graph, np.arange(20), np.random.default_rng(3))
    assert np.array_equal(ma.blocks[0].src_nodes, mb.blocks[0].src_nodes)


def test_bad_cache() -> None:
    graph = erdos_renyi(10, 2.0, seed=0)
    with pytest.raises(ConfigError, match="covers 5 vertices but graph"):
        SAMPLERS.create("locality-aware", fanouts=[2], cached=np.ones(5, dtype=bool)).sample(
            graph, np.array([0]), np.random.default_rng(0)
        )
    with pytest.raises(ConfigError, match="outside graph"):
        SAMPLERS.create("locality-aware", fanouts=[2], cached=[3, 12]).sample(
            graph, np.array([0]), np.random.default_rng(0)
        )
    for factor in (0, -1.0, float("nan"), float("inf"), "2"):
        with pytest.raises(ConfigError, match="factor"):
            SAMPLERS.create("locality-aware", fanouts=[2], factor=factor)
    with pytest.raises(ConfigError, match=">= 0"):
        SAMPLERS.create("locality-aware", fanouts=[2], cached=[-1, 2])
