"""Distributed bulk sampling plans: byte counts against a brute-force count, structure, and a simulated run."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.hardware import load_hardware
from workbench.plan import Plan
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.base import Minibatch, check_block_invariants
from workbench.strategies.sampling.bulk_matrix_plan import bulk_sampling_plan

CLUSTER = "perlmutter-4xa100-slingshot"
IB, VB = 8, 4


def row_nnz(graph: CSRGraph, ladies: bool) -> list[int]:
    """Entries per row of the right operand: A's in-degree, or A_hat's (A plus a self loop)."""
    out = []
    for v in range(graph.num_nodes):
        nbrs = set(graph.in_neighbors(v).tolist())
        out.append(len(nbrs | {v}) if ladies else len(nbrs))
    return out


def brute_force_bytes(
    graph: CSRGraph, mbs: list[Minibatch], devices: list[str], c: int, ladies: bool
) -> dict[tuple[int, str, str, str], int]:
    """(layer step, from, to, carries) -> bytes, by the definitions in bulk_matrix_plan's docstring, with loops."""
    nnz = row_nnz(graph, ladies)
    rows = len(devices) // c
    n, k = graph.num_nodes, len(mbs)

    def block_of(v: int) -> int:
        return next(t for t in range(rows) if t * n // rows <= v < (t + 1) * n // rows)

    out: dict[tuple[int, str, str, str], int] = defaultdict(int)
    layers = len(mbs[0].blocks)
    for step, layer in enumerate(range(layers - 1, -1, -1)):
        for i in range(rows):
            vertices: set[int] = set()
            for b in range(k):
                if b * rows // k == i:
                    vertices |= set(mbs[b].blocks[layer].dst_nodes.tolist())
            # LADIES runs the exchange twice: for P = Q (A_hat o A_hat) and for the row extraction Q_R A_hat.
            for _ in range(2 if ladies else 1):
                for j in range(c):
                    me = devices[i * c + j]
                    for t in range(rows):
                        if t % c != j or t == i:
                            continue
                        need = [v for v in vertices if block_of(v) == t]
                        if not need:
                            continue
                        owner = devices[t * c + j]
                        out[(step, me, owner, "indices")] += IB * len(need)
                        out[(step, owner, me, "adjacency")] += sum(nnz[v] * (IB + VB) + IB for v in need)
    return dict(out)


def plan_bytes(plan: Plan) -> dict[tuple[int, str, str, str], int]:
    out: dict[tuple[int, str, str, str], int] = defaultdict(int)
    for t in plan.tasks:
        if t.kind == "transfer":
            step = int(t.id.split(".")[0][1:])
            out[(step, t.src, t.dst, t.carries)] += t.bytes
    return dict(out)


@pytest.fixture(scope="module")
def graph() -> CSRGraph:
    return erdos_renyi(120, 5.0, seed=7)


def batches(graph: CSRGraph, k: int, size: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.choice(graph.num_nodes, size, replace=False) for _ in range(k)]


@pytest.mark.parametrize("algorithm", ["graphsage", "ladies"])
@pytest.mark.parametrize("devices,c", [(4, 1), (4, 2), (8, 2), (4, 4), (6, 3)])
def test_partitioned_bytes_match_brute_force(graph: CSRGraph, algorithm: str, devices: int, c: int) -> None:
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()[:devices]
    params = (
        {"fanouts": [3, 2]} if algorithm == "graphsage" else {"algorithm": "ladies", "layer_sizes": [6, 4]}
    )
    sampler = SAMPLERS.create("bulk-matrix", bulk=8, **params)
    result = bulk_sampling_plan(
        graph, batches(graph, 8, 5), cluster, sampler=sampler, rng=np.random.default_rng(3),
        mode="partitioned-1.5d", replication=c, devices=devs,
    )  # fmt: skip
    for mb in result.minibatches:
        check_block_invariants(mb)
    want = brute_force_bytes(graph, result.minibatches, devs, c, algorithm == "ladies")
    assert bool(want) == (devices // c > 1)  # more than one process row: something moves
    assert plan_bytes(result.plan) == want
    assert result.bytes_by_kind["rows"] == sum(
        v for (_, _, _, kind), v in want.items() if kind == "adjacency"
    )
    result.plan.validate(cluster.nodes())


def test_graphsage_allreduce_bytes_by_hand(graph: CSRGraph) -> None:
    """c = 2 on 4 devices: each process row all-reduces the CSR of its P_i, nnz = sum of degrees of its rows."""
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()[:4]
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[2], bulk=4)
    result = bulk_sampling_plan(
        graph, batches(graph, 4, 6), cluster, sampler=sampler, rng=np.random.default_rng(1),
        mode="partitioned-1.5d", replication=2, devices=devs,
    )  # fmt: skip
    deg = graph.in_degrees()
    collectives = {t.id: t for t in result.plan.tasks if t.kind == "collective"}
    assert set(collectives) == {"l0.r0.P.allreduce", "l0.r1.P.allreduce"}
    for i in range(2):
        rows = np.concatenate([result.minibatches[b].seeds for b in (2 * i, 2 * i + 1)])
        want = int(deg[rows].sum()) * (IB + VB) + (rows.shape[0] + 1) * IB
        task = collectives[f"l0.r{i}.P.allreduce"]
        assert task.bytes == want
        assert task.devices == devs[2 * i : 2 * i + 2]


def test_replicated_has_no_communication(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    for params in ({"fanouts": [3, 2]}, {"algorithm": "ladies", "layer_sizes": [6, 4]}):
        sampler = SAMPLERS.create("bulk-matrix", **params)
        result = bulk_sampling_plan(
            graph, batches(graph, 8, 5), cluster, sampler=sampler, rng=np.random.default_rng(0)
        )
        kinds = {t.kind for t in result.plan.tasks}
        assert kinds == {"compute"}
        assert sum(result.bytes_by_kind.values()) == 0
        # A replicated on every GPU; every device computes for its own batches (8 batches on 16 GPUs: 8 busy).
        assert len(result.plan.resident) == cluster.num_gpus
        assert len({t.device for t in result.plan.tasks}) == 8
        result.plan.validate(cluster.nodes())


def test_replication_reduces_row_traffic(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    devs = cluster.gpu_nodes()[:8]
    volumes = []
    for c in (1, 2, 8):
        sampler = SAMPLERS.create("bulk-matrix", fanouts=[3, 2], bulk=16)
        result = bulk_sampling_plan(
            graph, batches(graph, 16, 5), cluster, sampler=sampler, rng=np.random.default_rng(2),
            mode="partitioned-1.5d", replication=c, devices=devs,
        )  # fmt: skip
        volumes.append(result.bytes_by_kind["rows"])
    assert volumes[0] > volumes[1] > volumes[2] == 0


def test_plan_simulates(graph: CSRGraph) -> None:
    from sim import simulate

    cluster = load_hardware(CLUSTER)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[3, 2], bulk=8)
    result = bulk_sampling_plan(
        graph, batches(graph, 8, 5), cluster, sampler=sampler, rng=np.random.default_rng(0),
        mode="partitioned-1.5d", replication=2, devices=cluster.gpu_nodes()[:8],
    )  # fmt: skip
    sim = simulate(result.plan, cluster)
    assert sim.makespan > 0
    assert set(sim.trace["phase"]) == {"sample"}


def test_bad_arguments(graph: CSRGraph) -> None:
    cluster = load_hardware(CLUSTER)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[2])
    b = batches(graph, 2, 3)
    rng = np.random.default_rng(0)
    with pytest.raises(
        ConfigError, match="unknown mode 'partitioned'; allowed: replicated, partitioned-1.5d"
    ):
        bulk_sampling_plan(graph, b, cluster, sampler=sampler, rng=rng, mode="partitioned")
    with pytest.raises(ConfigError, match="must divide"):
        bulk_sampling_plan(
            graph, b, cluster, sampler=sampler, rng=rng, mode="partitioned-1.5d", replication=3
        )
    with pytest.raises(ConfigError, match="replication is a parameter"):
        bulk_sampling_plan(graph, b, cluster, sampler=sampler, rng=rng, replication=2)
    with pytest.raises(ConfigError, match="no device 'm9.gpu0'"):
        bulk_sampling_plan(graph, b, cluster, sampler=sampler, rng=rng, devices=["m9.gpu0"])
    with pytest.raises(ConfigError, match="bulk-matrix sampler"):
        bulk_sampling_plan(graph, b, cluster, sampler=SAMPLERS.create("neighbor", fanouts=[2]), rng=rng)  # type: ignore[arg-type]


@pytest.mark.parametrize("num_nodes,rows", [(111_000_000, 64), (1000, 7), (5, 5), (3, 8), (17, 16)])
def test_grid_blocks_by_arithmetic_match_a_search_of_the_bounds(num_nodes: int, rows: int) -> None:
    """block_of's formula and positions_by_block's one sort against a binary search of the
    boundaries and one mask per block, brute force: random vertices and every block's first and
    last vertex (empty blocks included when there are more blocks than vertices)."""
    from workbench.strategies.sampling.bulk_matrix_schedule import ProcessGrid

    grid = ProcessGrid.of("replicated", 1, [f"d{i}" for i in range(rows)], num_nodes)
    rng = np.random.default_rng(0)
    edges = np.concatenate([grid.bounds[:-1], grid.bounds[1:] - 1])
    vertices = np.concatenate([rng.integers(0, num_nodes, 2000), edges[(edges >= 0) & (edges < num_nodes)]])
    for ids in (vertices, vertices.astype(np.int32), vertices[:0]):
        searched = np.searchsorted(grid.bounds, ids, side="right") - 1
        assert np.array_equal(grid.block_of(ids), searched)
        by_block = grid.positions_by_block(ids)
        assert list(by_block) == sorted(set(searched.tolist()))
        for t, at in by_block.items():
            assert np.array_equal(at, np.flatnonzero(searched == t))
