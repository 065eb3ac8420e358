"""Properties on random small graphs: capacity is respected, every vertex has a valid home, hit rates add up."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.graph.generators import erdos_renyi
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import (
    AccessModel,
    PlacementRequest,
    PlacementResult,
    descending_order,
)
from workbench.strategies.sampling.base import Sampler

STATIC = ["none", "degree", "presample", "partitioned", "song-jiang", "fifo"]


@st.composite
def requests(draw: st.DrawFn, sampler: Sampler) -> PlacementRequest:
    n = draw(st.integers(1, 40))
    graph = erdos_renyi(n, draw(st.floats(0.0, 4.0)), seed=draw(st.integers(0, 10_000)))
    gpus = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    prob = rng.random(n) ** 2 if draw(st.booleans()) else None
    return PlacementRequest(
        graph=graph,
        num_gpus=gpus,
        capacity=draw(st.integers(0, n)),
        access_probability=prob,
        owner=rng.integers(0, gpus, size=n),
        access=AccessModel(sampler=sampler, num_layers=2, batch_size=draw(st.integers(1, 8))),
        rng=rng,
    )


def check_result(result: PlacementResult, req: PlacementRequest) -> None:
    assert result.num_gpus == req.num_gpus
    assert result.num_nodes == req.num_nodes
    for verts in result.gpu_vertices:
        assert verts.shape[0] <= req.capacity
        assert verts.dtype == np.int64 and np.all(np.diff(verts) > 0)
    assert result.home.shape == (req.num_nodes,)
    assert result.home.min(initial=-1) >= -1 and result.home.max(initial=-1) < req.num_gpus
    for v in np.flatnonzero(result.home >= 0):
        assert result.cached_mask(int(result.home[v]))[v], "a GPU home must hold the vertex"
    rates = result.expected_hit_rate(np.random.default_rng(0).random(req.num_nodes))
    total = rates.local + rates.peer + rates.host
    assert np.allclose(total[rates.expected_reads > 0], 1.0)
    assert (rates.local >= 0).all() and (rates.peer >= -1e-12).all() and (rates.host >= 0).all()


# The sampler fixture is stateless, so sharing it across examples is safe.
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(data=st.data(), name=st.sampled_from(STATIC), alpha=st.floats(0.01, 1.0))
def test_placements_respect_capacity_and_homes(
    fanout_sampler: Sampler, data: st.DataObject, name: str, alpha: float
) -> None:
    req = data.draw(requests(fanout_sampler))
    params = {"alpha": alpha} if name == "song-jiang" else {}
    placement = PLACEMENTS.create(name, **params)
    check_result(placement.place(req), req)
    if placement.dynamic:
        rng = np.random.default_rng(1)
        for _ in range(5):
            batch = rng.integers(0, req.num_nodes, size=rng.integers(0, 2 * req.num_nodes + 1))
            stats = placement.update(batch, gpu=int(rng.integers(0, req.num_gpus)))
            assert stats.hits + stats.misses == np.unique(batch).shape[0]
            assert stats.evicted <= min(stats.misses, req.capacity)
            check_result(placement.state(), req)


@SETTINGS
@given(data=st.data(), alpha=st.floats(0.01, 1.0))
def test_song_jiang_keeps_a_copy_of_the_top(
    fanout_sampler: Sampler, data: st.DataObject, alpha: float
) -> None:
    """Algorithm 1 only replaces duplicates: the group still holds every one of the top-capacity vertices."""
    req = data.draw(requests(fanout_sampler))
    prob = req.access_probability if req.access_probability is not None else np.ones(req.num_nodes)
    req = PlacementRequest(
        graph=req.graph, num_gpus=req.num_gpus, capacity=req.capacity, access_probability=prob
    )
    result = PLACEMENTS.create("song-jiang", alpha=alpha).place(req)
    union = np.unique(np.concatenate(result.gpu_vertices))
    assert set(descending_order(prob)[: req.capacity].tolist()) <= set(union.tolist())
    assert all(v.shape[0] == req.capacity for v in result.gpu_vertices)
    # Distinct vertices held by the group never drop below Rule 1's and never exceed n * capacity.
    assert (
        req.capacity <= union.shape[0] <= min(req.num_nodes, req.num_gpus * req.capacity) or req.capacity == 0
    )
