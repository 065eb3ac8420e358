"""The 1.5D product's schedules (paper 004, section 5.2.1; CAGNET's dist_saspgemm15D and csr_allreduce):
the paper's P/c^2 dependent steps and the log2(c)-round pairwise sparse all-reduce, against cases
worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from sim import simulate
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.hardware import load_hardware
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.bulk_matrix_plan import bulk_sampling_plan, sampled_bulk_plan

CLUSTER = "perlmutter-4xa100-slingshot"
IB, VB = 8, 4


@pytest.fixture(scope="module")
def graph() -> CSRGraph:
    return erdos_renyi(120, 5.0, seed=7)


def minibatches(graph: CSRGraph, k: int, size: int, fanouts: list[int]) -> list:
    rng = np.random.default_rng(0)
    seeds = [rng.choice(graph.num_nodes, size, replace=False) for _ in range(k)]
    return SAMPLERS.create("bulk-matrix", fanouts=fanouts, bulk=k).sample_many(graph, seeds, rng)


def transfers(plan) -> dict[str, tuple[str, str, int, str]]:
    return {t.id: (t.src, t.dst, t.bytes, t.carries) for t in plan.tasks if t.kind == "transfer"}


def test_stepped_moves_the_same_rows_in_dependent_steps(graph: CSRGraph) -> None:
    """8 GPUs, c = 2: 4 process rows; column 0 multiplies blocks 0 and 2, column 1 blocks 1 and 3.
    Stepped, a column's step for block 2 (3) waits for every reply of its step for block 0 (1)."""
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()[:8]
    mbs = minibatches(graph, 8, 5, [3, 2])
    args = dict(mode="partitioned-1.5d", replication=2, devices=devs)
    overlapped = sampled_bulk_plan(graph, mbs, cluster, **args)
    stepped = sampled_bulk_plan(graph, mbs, cluster, schedule="stepped", **args)
    assert transfers(stepped.plan) == transfers(overlapped.plan)
    assert stepped.bytes_by_kind == overlapped.bytes_by_kind
    tasks = {t.id: t for t in stepped.plan.tasks}
    for layer in ("l0", "l1"):
        for j, (first, second) in enumerate([(0, 2), (1, 3)]):
            replies = [i for i in tasks if i.startswith(f"{layer}.") and i.endswith(f".P.p{j}.t{first}.rows")]
            requests = [
                i for i in tasks if i.startswith(f"{layer}.") and i.endswith(f".P.p{j}.t{second}.request")
            ]
            assert replies and requests
            for rid in requests:
                assert sorted(tasks[rid].deps) == sorted(replies)
                assert tasks[rid].dst == devs[second * 2 + j]  # one owner per step: process (t, j)
    # Overlapped, the same requests wait only for their own process's previous layer.
    first_layer = [t for t in overlapped.plan.tasks if t.id.startswith("l0.") and t.kind == "transfer"]
    assert all(t.deps == [] or t.carries == "adjacency" for t in first_layer)


def test_stepped_steps_do_not_overlap_in_simulation(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()[:8]
    result = sampled_bulk_plan(
        graph, minibatches(graph, 8, 5, [3, 2]), cluster, mode="partitioned-1.5d", replication=2,
        devices=devs, schedule="stepped",
    )  # fmt: skip
    trace = simulate(result.plan, cluster).trace
    spans = trace.groupby("task").agg(start=("start", "min"), end=("end", "max"))
    first = spans[spans.index.str.match(r"l0\.r\d\.P\.p0\.t0\.")]
    second = spans[spans.index.str.match(r"l0\.r\d\.P\.p0\.t2\.")]
    assert len(first) and len(second)
    assert second["start"].min() >= first["end"].max()


def test_pairwise_allreduce_bytes_by_hand(graph: CSRGraph) -> None:
    """16 GPUs, c = 4: 4 process rows, process (i, j) multiplies block j (vertices [30 j, 30 j + 30)).
    Round 0 swaps j with j +- 2 and sends its own partial; round 1 swaps j with j +- 1 and sends the
    sum of two partials. A partial's nnz is the degree sum of Q_i's rows in its block (rows disjoint)."""
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()
    mbs = minibatches(graph, 8, 6, [2])
    result = sampled_bulk_plan(
        graph, mbs, cluster, mode="partitioned-1.5d", replication=4, devices=devs, row_allreduce="pairwise"
    )
    deg = graph.in_degrees()
    moved = transfers(result.plan)
    assert not [t for t in result.plan.tasks if t.kind == "collective"]
    total = 0
    for i in range(4):
        seeds = np.concatenate([mbs[b].seeds for b in (2 * i, 2 * i + 1)])
        partial = [int(deg[seeds[seeds // 30 == j]].sum()) for j in range(4)]
        rows = seeds.shape[0]
        for j, (p0, p1) in enumerate([(2, 1), (3, 0), (0, 3), (1, 2)]):
            r0 = moved[f"l0.r{i}.P.allreduce.r0.p{j}"]
            assert r0 == (
                devs[4 * i + j],
                devs[4 * i + p0],
                partial[j] * (IB + VB) + (rows + 1) * IB,
                "probabilities",
            )
            r1 = moved[f"l0.r{i}.P.allreduce.r1.p{j}"]
            held = partial[j] + partial[p0]
            assert r1 == (
                devs[4 * i + j],
                devs[4 * i + p1],
                held * (IB + VB) + (rows + 1) * IB,
                "probabilities",
            )
            total += r0[2] + r1[2]
    assert result.bytes_by_kind["allreduce"] == total


def test_pairwise_round_waits_for_the_partner(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    result = sampled_bulk_plan(
        graph, minibatches(graph, 4, 6, [2]), cluster, mode="partitioned-1.5d", replication=4,
        devices=cluster.gpu_nodes(), row_allreduce="pairwise",
    )  # fmt: skip
    tasks = {t.id: t for t in result.plan.tasks}
    assert sorted(tasks["l0.r0.P.allreduce.r1.p0"].deps) == [
        "l0.r0.P.allreduce.r0.p0",
        "l0.r0.P.allreduce.r0.p2",
    ]
    assert tasks["l0.r0.p0.sample"].deps == ["l0.r0.P.allreduce.r1.p0", "l0.r0.P.allreduce.r1.p1"]


def test_schedule_bad_values(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    mbs = minibatches(graph, 6, 3, [2])
    devs = cluster.gpu_nodes()[:6]
    with pytest.raises(ConfigError, match="unknown schedule 'eager'; allowed: overlapped, stepped"):
        sampled_bulk_plan(
            graph, mbs, cluster, mode="partitioned-1.5d", replication=3, devices=devs, schedule="eager"
        )
    with pytest.raises(ConfigError, match="unknown row_allreduce 'tree'; allowed: ring, pairwise"):
        sampled_bulk_plan(graph, mbs, cluster, row_allreduce="tree")
    with pytest.raises(ConfigError, match="needs c a power of two, got c=3"):
        sampled_bulk_plan(
            graph,
            mbs,
            cluster,
            mode="partitioned-1.5d",
            replication=3,
            devices=devs,
            row_allreduce="pairwise",
        )
    ladies = SAMPLERS.create("bulk-matrix", algorithm="ladies", layer_sizes=[4])
    with pytest.raises(ConfigError, match="schedule='stepped' is planned for GraphSAGE only"):
        bulk_sampling_plan(
            graph, [m.seeds for m in mbs], cluster, sampler=ladies, rng=np.random.default_rng(0),
            mode="partitioned-1.5d", replication=2, devices=cluster.gpu_nodes()[:4], schedule="stepped",
        )  # fmt: skip
