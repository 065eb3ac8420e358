"""song-jiang: the slides' worked example by hand, the cluster cost model, and a reference implementation."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.generators import erdos_renyi
from workbench.hardware import load_hardware
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import PlacementRequest, descending_order
from workbench.strategies.placement.song_jiang import algorithm1, peer_groups_and_alpha

# Vertex v's sampling probability; sorted descending the vertices read [1, 2, 3, 4, 5, 0],
# the order of the slides' "Case2 Example".
SLIDE_PROB = np.array([0.05, 0.40, 0.30, 0.20, 0.15, 0.10])


def slide_request(**kw: object) -> PlacementRequest:
    graph = erdos_renyi(6, 2.0, seed=0)
    return PlacementRequest(graph=graph, num_gpus=2, capacity=2, access_probability=SLIDE_PROB, **kw)


def test_slides_worked_example() -> None:
    """Two GPUs, BSIZE 2, order [1, 2, 3, 4, 5, 0], alpha 0.3: GPU0 holds 1 and 3, GPU1 holds 4 and 2.

    Steps (our reading of Algorithm 1, see song_jiang's docstring):
      start:  GPU0 = [1, 2], GPU1 = [1, 2], p_sum = [0, 0];
              at most min(N, n*BSIZE) - BSIZE = min(6, 4) - 2 = 2 replacements.
      j = 0:  round 0 replaces duplicate old = V[BSIZE-1-0] = 2 with new = V[2] = 3;
              p(3) = 0.20 > 0.3 * p(2) = 0.09, beneficial. GPUs by p_sum: [0, 1] (tie: lower index);
              GPU0 takes it: GPU0 = [1, 3]; GPU1, the last of the round, keeps 2. p_sum = [0.20, 0].
      j = 1:  round 1 replaces old = V[BSIZE-1-1] = 1 with new = V[3] = 4;
              p(4) = 0.15 > 0.3 * p(1) = 0.12, beneficial. GPUs by p_sum: [1, 0];
              GPU1 takes it: GPU1 = [4, 2]; GPU0 keeps 1. p_sum = [0.20, 0.15].
      end:    replacements exhausted; one copy of 1 (GPU0) and of 2 (GPU1) kept; 5 and 0 stay on host.
    """
    result = PLACEMENTS.create("song-jiang", alpha=0.3).place(slide_request())
    slots = algorithm1(descending_order(SLIDE_PROB), SLIDE_PROB, 2, 2, 0.3)
    assert slots.tolist() == [[1, 3], [4, 2]]  # slot positions exactly as the slide draws them
    assert [v.tolist() for v in result.gpu_vertices] == [[1, 3], [2, 4]]
    assert result.home.tolist() == [-1, 0, 1, 0, 1, -1]
    assert result.peer_groups == ((0, 1),)
    rates = result.expected_hit_rate(SLIDE_PROB)
    total = SLIDE_PROB.sum()
    # GPU0 holds p(1) + p(3) = 0.60, GPU1 p(2) + p(4) = 0.45; 5 and 0 (0.15) come from host.
    assert rates.local == pytest.approx([0.60 / total, 0.45 / total])
    assert rates.peer == pytest.approx([0.45 / total, 0.60 / total])
    assert rates.host == pytest.approx([0.15 / total, 0.15 / total])


def test_alpha_stops_replacing() -> None:
    # alpha 0.4: j = 0 passes (0.20 > 0.12); j = 1 fails (0.15 > 0.4 * 0.40 = 0.16 is false), and stops.
    result = PLACEMENTS.create("song-jiang", alpha=0.4).place(slide_request())
    assert [v.tolist() for v in result.gpu_vertices] == [[1, 3], [1, 2]]
    assert result.home.tolist() == [-1, 0, 1, 0, -1, -1]


def test_rule1_replicates_the_top() -> None:
    result = PLACEMENTS.create("song-jiang", mode="rule1").place(slide_request())
    assert [v.tolist() for v in result.gpu_vertices] == [[1, 2], [1, 2]]
    assert (result.home == -1).all()
    # Without cluster and alpha, auto means Rule 1 too.
    auto = PLACEMENTS.create("song-jiang").place(slide_request())
    assert [v.tolist() for v in auto.gpu_vertices] == [[1, 2], [1, 2]]


def test_cluster_decides_the_case() -> None:
    nvswitch = load_hardware("v100x8-nvswitch")
    groups, alphas = peer_groups_and_alpha(nvswitch, 8)
    assert groups == [list(range(8))]
    assert alphas == pytest.approx([12 / 150])  # C_gpu / C_cpu = B_host / B_peer

    bridge = load_hardware("v100x8-nvlink-bridge")
    groups, alphas = peer_groups_and_alpha(bridge, 8)
    assert groups == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert alphas == pytest.approx([12 / 50] * 4)

    ethernet = load_hardware("hopgnn-4xa100-10gbe")
    groups, _ = peer_groups_and_alpha(ethernet, 4)
    assert groups == [[0], [1], [2], [3]]

    graph = erdos_renyi(6, 2.0, seed=0)
    req = PlacementRequest(graph=graph, num_gpus=4, capacity=2, access_probability=SLIDE_PROB, cluster=bridge)
    result = PLACEMENTS.create("song-jiang").place(req)
    # alpha 0.24 within each NVLink pair: both replacements pass, the slide's picture per pair.
    assert [v.tolist() for v in result.gpu_vertices] == [[1, 3], [2, 4], [1, 3], [2, 4]]
    assert result.peer_groups == ((0, 1), (2, 3))
    req = PlacementRequest(
        graph=graph, num_gpus=2, capacity=2, access_probability=SLIDE_PROB, cluster=ethernet
    )
    result = PLACEMENTS.create("song-jiang").place(req)
    assert [v.tolist() for v in result.gpu_vertices] == [[1, 2], [1, 2]]


def test_bad_parameters() -> None:
    for alpha in (0.0, -0.1, 1.5):
        with pytest.raises(ConfigError, match="alpha"):
            PLACEMENTS.create("song-jiang", alpha=alpha)
    with pytest.raises(ConfigError, match="mode"):
        PLACEMENTS.create("song-jiang", mode="both")
    with pytest.raises(ConfigError, match="needs alpha"):
        PLACEMENTS.create("song-jiang", mode="algorithm1").place(slide_request())


def reference_algorithm1(
    order: list[int], p: np.ndarray, n: int, bsize: int, alpha: float
) -> list[list[int]]:
    """Plain-Python transcription of the reading in song_jiang's docstring, duplicate by duplicate."""
    buffers = [list(order[:bsize]) for _ in range(n)]
    p_sum = [0.0] * n
    next_new = bsize
    for old_idx in range(bsize - 1, -1, -1):
        ranked = sorted(range(n), key=lambda d: (p_sum[d], d))
        for device in ranked[:-1]:  # the last GPU of the round keeps its copy
            if next_new >= len(order):
                return buffers
            new, old = order[next_new], order[old_idx]
            if not p[new] > alpha * p[old]:
                return buffers
            buffers[device][old_idx] = new
            p_sum[device] += p[new]
            next_new += 1
    return buffers


@pytest.mark.parametrize("seed", range(30))
def test_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(1, 40))
    n = int(rng.integers(1, 6))
    bsize = int(rng.integers(0, num_nodes + 1))
    alpha = float(rng.uniform(0.01, 1.0))
    p = rng.random(num_nodes) ** 3
    order = descending_order(p)
    got = algorithm1(order, p, n, bsize, alpha)
    want = reference_algorithm1(order.tolist(), p, n, bsize, alpha)
    assert got.tolist() == want


@pytest.mark.slow
def test_scales_to_a_million_vertices() -> None:
    """O(N) after the sort: 1.2M vertices on 8 NVSwitch GPUs place well under a second (3 s allows a busy machine)."""
    import time

    n = 1_224_514
    graph = erdos_renyi(n, 1.0, seed=0)
    prob = np.random.default_rng(0).pareto(1.5, n)
    req = PlacementRequest(
        graph=graph,
        num_gpus=8,
        capacity=n // 5,
        access_probability=prob,
        cluster=load_hardware("v100x8-nvswitch"),
    )
    placement = PLACEMENTS.create("song-jiang")
    placement.place(req)  # compile (or load) the numba loop
    start = time.perf_counter()
    result = placement.place(req)
    assert time.perf_counter() - start < 3.0
    assert result.cache_sizes() == [n // 5] * 8
    assert np.unique(np.concatenate(result.gpu_vertices)).shape[0] > 2 * (n // 5)
