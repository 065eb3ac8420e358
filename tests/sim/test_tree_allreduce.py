"""Tree all-reduce beside the ring (``sim.collectives``, ``algorithm="tree"``).

Times worked out by hand on a full mesh: every pair of GPUs has its own link of
``BW`` bytes/s and latency ``A`` each way, so no two tree edges share a link and a
step moving chunks of ``c`` bytes takes ``A + c / BW``. Steps run one after another
on the simulator's flow network, as the executor runs a collective's steps.
"""

from __future__ import annotations

import math
from functools import partial

import pytest

from sim.clock import SimClock
from sim.collectives import TREE_CHUNK, Step, collective_steps
from sim.flows import FlowNetwork
from sim.topology import Topology
from workbench.hardware.generate import generate_cluster

from .conftest import make_cluster

BW = 10e9
A = 5e-6


def mesh(n: int) -> Topology:
    links = [(f"m0.gpu{i}", f"m0.gpu{j}", BW, A) for i in range(n) for j in range(i + 1, n)]
    # Host memory on its own PCIe link to gpu0, so every memory has a link.
    return Topology(make_cluster(n, [("m0.host", "m0.gpu0", BW, A), *links]))


def run(steps: list[Step], topo: Topology) -> float:
    """Time of the steps one after another, each waiting its latency then draining (as the executor)."""
    clock = SimClock()
    flows = FlowNetwork(clock, topo.capacity)
    done: list[float] = []

    def step(k: int) -> None:
        if k == len(steps):
            done.append(clock.now)
            return
        s = steps[k]
        clock.call_later(s.latency, partial(flows.start, s.links, s.chunk_bytes, partial(step, k + 1)))

    step(0)
    clock.run_all()
    return done[0]


def gpus(n: int) -> list[str]:
    return [f"m0.gpu{i}" for i in range(n)]


def test_four_gpus_one_chunk():
    # Tree 0 <- {1, 2}, 1 <- 3: depth D = 2. One chunk (B <= TREE_CHUNK): 2D = 4 steps,
    #   step 0: 3 -> 1 (up), step 1: 1 -> 0 and 2 -> 0, step 2: 0 -> 1 and 0 -> 2, step 3: 1 -> 3,
    # each moving all of B: 4 (A + B / BW). The ring: 2(n-1) = 6 steps of B/4.
    topo, b = mesh(4), 2**20
    tree = collective_steps("allreduce", gpus(4), b, topo, "t", algorithm="tree")
    assert len(tree) == 4
    assert run(tree, topo) == pytest.approx(4 * (A + b / BW))
    ring = collective_steps("allreduce", gpus(4), b, topo, "t")
    assert run(ring, topo) == pytest.approx(6 * (A + b / 4 / BW))


def test_four_gpus_pipelined_in_four_chunks():
    # B = 4 chunks: 2D + k - 1 = 4 + 3 = 7 steps of B/4: 7 (A + B / (4 BW)).
    topo, b = mesh(4), 4 * TREE_CHUNK
    tree = collective_steps("allreduce", gpus(4), b, topo, "t", algorithm="tree")
    assert len(tree) == 7 and {s.chunk_bytes for s in tree} == {b / 4}
    assert run(tree, topo) == pytest.approx(7 * (A + b / 4 / BW))


def test_eight_gpus():
    # Depth D = 3 (gpu7 is a child of gpu3, a child of gpu1). One chunk: 6 steps of B;
    # three chunks: 6 + 2 = 8 steps of B/3. Ring: 14 steps of B/8.
    topo = mesh(8)
    b = TREE_CHUNK // 2
    assert run(collective_steps("allreduce", gpus(8), b, topo, "t", algorithm="tree"), topo) == pytest.approx(
        6 * (A + b / BW)
    )
    b = 3 * TREE_CHUNK
    tree = collective_steps("allreduce", gpus(8), b, topo, "t", algorithm="tree")
    assert len(tree) == 8
    assert run(tree, topo) == pytest.approx(8 * (A + b / 3 / BW))
    assert run(collective_steps("allreduce", gpus(8), b, topo, "t"), topo) == pytest.approx(
        14 * (A + b / 8 / BW)
    )
    # Step 3 moves three chunks at once, one hop each: chunk 2 up from depth 2 (3, 4, 5, 6
    # to their parents), chunk 1 up from depth 1 (1, 2 to 0), chunk 0 down to depth 1.
    assert len(tree[3].links) == 4 + 2 + 2


def test_at_512_gpus_small_messages_the_tree_wins():
    # 64 x 8 fat-tree, 64 KiB: the ring pays 2(n-1) = 1022 latencies, the tree 2 log2(512) = 18.
    cluster = generate_cluster(64, 8, "fat-tree")
    topo = Topology(cluster)
    devices = cluster.gpu_nodes()
    b = 64 * 2**10
    tree = collective_steps("allreduce", devices, b, topo, "t", algorithm="tree")
    ring = collective_steps("allreduce", devices, b, topo, "t")
    assert len(tree) == 2 * int(math.log2(512)) and len(ring) == 2 * 511
    t_tree, t_ring = run(tree, topo), run(ring, topo)
    assert t_tree < t_ring / 5


def test_unknown_algorithm_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid: ring, tree"):
        collective_steps("allreduce", gpus(4), 1, mesh(4), "t", algorithm="butterfly")
    with pytest.raises(ValueError, match="all-reduce"):
        collective_steps("allgather", gpus(4), 1, mesh(4), "t", algorithm="tree")


def test_a_plan_asks_for_the_tree_with_its_op() -> None:
    """``allreduce-tree`` in a plan runs the tree's steps: on 8 GPUs of one NVSwitch machine and a
    small message, its makespan is the tree's (2 log2(8) = 6 latency-bound steps), shorter than the
    ring's 14."""
    from sim import simulate
    from workbench.hardware import load_hardware
    from workbench.plan import Plan

    cluster = load_hardware("v100x8-nvswitch")
    gpus = cluster.gpu_nodes()
    times = {}
    for op in ("allreduce", "allreduce-tree"):
        plan = Plan(op)
        plan.collective("ar", op, gpus, 4096, "allreduce")
        times[op] = simulate(plan, cluster).makespan
    assert times["allreduce-tree"] < times["allreduce"]
    assert times["allreduce"] / times["allreduce-tree"] == pytest.approx(14 / 6, rel=0.05)
