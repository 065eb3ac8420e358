"""P3's schedule on a graph small enough to work out by hand, and the plan read from it.

Two workers on one machine, 6 vertices with 5 feature dimensions (4 bytes each), a 2-layer
SAGE model with hidden width 4. Every expected number below is worked out in the comments
from the hand-made minibatches, not from the scheme's helpers.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph
from workbench.hardware import load_hardware
from workbench.model import build_model
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.execution.p3 import P3Scheme
from workbench.strategies.partition.base import PartitionResult
from workbench.strategies.placement.base import PlacementResult
from workbench.strategies.sampling.base import Block, Minibatch

ROOT = Path(__file__).resolve().parents[3]


def block(src: list[int], dst: list[int], edge_src: list[int], edge_dst: list[int]) -> Block:
    return Block(*(np.array(a, dtype=np.int64) for a in (src, dst, edge_src, edge_dst)))


def minibatches() -> list[Minibatch]:
    """Worker 0: first block 4 sources, 2 destinations, 3 edges; worker 1: 4, 3, 2."""
    mb0 = Minibatch(
        np.array([0], dtype=np.int64),
        [block([0, 1, 2, 3], [0, 1], [1, 2, 3], [0, 0, 1]), block([0, 1], [0], [1], [0])],
    )
    mb1 = Minibatch(
        np.array([5], dtype=np.int64),
        [block([4, 5, 0, 2], [4, 5, 0], [2, 3], [0, 1]), block([4, 5, 0], [5], [0], [0])],
    )
    return [mb0, mb1]


@pytest.fixture
def inputs() -> SchemeInputs:
    src = np.array([1, 2, 3, 0, 5, 4], dtype=np.int64)
    dst = np.array([0, 1, 2, 3, 4, 5], dtype=np.int64)
    graph = CSRGraph.from_edges(src, dst, 6, feat_dim=5, num_classes=2)
    cluster = load_hardware("v100x8-nvswitch")
    workers = cluster.gpu_nodes()[:2]
    owner = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    # GPU 0 caches vertices 0 and 4, GPU 1 vertex 1.
    caches = [np.array([0, 4], dtype=np.int64), np.array([1], dtype=np.int64)]
    placement = PlacementResult(caches, np.array([0, 1, -1, -1, 0, -1], dtype=np.int64))
    model = build_model("sage", 5, 2, hidden=4, num_layers=2)
    epoch = [minibatches(), minibatches()]
    return SchemeInputs(
        graph, cluster, model, workers, PartitionResult(graph, owner, 2), epoch, 5 * 4, placement
    )


def test_the_layout_gives_each_worker_its_slice(inputs: SchemeInputs) -> None:
    layout = P3Scheme().layout(inputs)
    # 5 dimensions over 2 workers: 3 (the first gets the remainder) and 2.
    assert layout.widths == (3, 2)
    assert [layout.bounds(w) for w in range(2)] == [(0, 3), (3, 5)]
    assert [layout.row_bytes(w) for w in range(2)] == [12, 8]
    assert layout.hidden == 4
    assert [layer.in_dim for layer in layout.dp_model.layers] == [4]


def test_structure_sends_by_hand(inputs: SchemeInputs) -> None:
    schedule = P3Scheme().schedule(inputs, 0)
    # Worker 0's block: 4 + 2 + 2 x 3 = 12 ids, 96 bytes; worker 1's: 4 + 3 + 2 x 2 = 11 ids, 88 bytes.
    got = [(s.task, s.sender, s.receiver, s.entries, s.nbytes, s.edges) for s in schedule.structure]
    assert got == [("i0.w0.graph-to-w1", 0, 1, 12, 96, 3), ("i0.w1.graph-to-w0", 1, 0, 11, 88, 2)]


def test_slice_reads_by_hand(inputs: SchemeInputs) -> None:
    schedule = P3Scheme().schedule(inputs, 0)
    # (worker, minibatch) -> (cached rows, rows from host): worker 0 caches {0, 4}, worker 1 {1};
    # minibatch 0 reads [0, 1, 2, 3], minibatch 1 [4, 5, 0, 2].
    want = {(0, 0): (1, 3), (0, 1): (2, 2), (1, 0): (1, 3), (1, 1): (0, 4)}
    for (i, j), (hits, misses) in want.items():
        read = schedule.partial(i, j).read
        assert (read.hits, read.misses) == (hits, misses)
        assert read.local_task == (f"i0.w{i}.mb{j}.local" if hits else None)
        assert read.host_task == f"i0.w{i}.mb{j}.host"
        assert read.serve_task is None
    assert schedule.partial(0, 1).read.cached.tolist() == [True, False, True, False]
    assert schedule.partial(1, 0).sizes == (4, 2, 3)


def test_partials_and_gradients_by_hand(inputs: SchemeInputs) -> None:
    schedule = P3Scheme().schedule(inputs, 0)
    # A partial to minibatch j's worker: j's destinations x 4 values x 4 bytes: 2 x 16, 3 x 16.
    partials = [(s.task, s.sender, s.receiver, s.nbytes) for s in schedule.partial_sends()]
    assert partials == [("i0.w1.mb0.partial-to-w0", 1, 0, 32), ("i0.w0.mb1.partial-to-w1", 0, 1, 48)]
    grads = [(s.task, s.sender, s.receiver, s.nbytes) for s in schedule.gradient_sends()]
    assert grads == [("i0.w0.grad0-to-w1", 0, 1, 32), ("i0.w1.grad0-to-w0", 1, 0, 48)]
    assert [c.forward for c in schedule.combines] == ["i0.w0.fwd0-combine", "i0.w1.fwd0-combine"]
    assert schedule.slice_updates == ("i0.w0.update-slice", "i0.w1.update-slice")
    assert schedule.previous_slice_updates == ()
    assert P3Scheme().schedule(inputs, 1).previous_slice_updates == schedule.slice_updates


def test_the_plan_moves_the_hand_counted_bytes(inputs: SchemeInputs) -> None:
    plan = P3Scheme(prefetch=0).build(inputs)
    moved: dict[tuple[str, str], int] = {}
    for t in plan.tasks:
        if t.kind == "transfer" and t.iteration == 0:
            moved[(t.phase, t.carries)] = moved.get((t.phase, t.carries), 0) + t.bytes
    # h2d: rows from host x slice bytes: worker 0 (3 + 2) x 12, worker 1 (3 + 4) x 8.
    assert moved == {
        ("sample", "adjacency"): 96 + 88,
        ("h2d", "features"): 5 * 12 + 7 * 8,
        ("alltoall", "partials"): 32 + 48,
        ("alltoall", "gradients"): 32 + 48,
    }
    # Cached rows: worker 0 caches 2 vertices x 12 bytes, worker 1 one x 8.
    cache = {r.name: r.bytes for r in plan.resident if r.name.endswith("feature-cache")}
    assert cache == {"w0.feature-cache": 24, "w1.feature-cache": 8}


def test_the_plan_has_exactly_the_tasks_the_schedule_names(inputs: SchemeInputs) -> None:
    scheme = P3Scheme(feature_service=True)
    plan = scheme.build(inputs)
    for it in range(len(inputs.epoch)):
        named = scheme.schedule(inputs, it).task_ids()
        assert len(named) == len(set(named))
        assert sorted(t.id for t in plan.tasks if t.iteration == it) == sorted(named)


def test_one_schedule_object_per_iteration_not_carried_in_a_pickle(inputs: SchemeInputs) -> None:
    scheme = P3Scheme()
    first = scheme.schedule(inputs, 0)
    assert scheme.schedule(inputs, 0) is first
    moved = pickle.loads(pickle.dumps(scheme))
    assert moved._last is None and moved._layout is None
    assert moved.schedule(inputs, 0) == first  # recomputed alike wherever the scheme goes


def test_the_real_executor_names_no_task_of_its_own() -> None:
    """Every P3 task id the real run records comes from the schedule: its source has none of
    the step names the schedule's namer writes."""
    tree = ast.parse((ROOT / "realrun" / "schemes" / "p3.py").read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and ast.get_docstring(node) is not None
    }
    literals = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]
    steps = ("graph", "-to-w", "fwd0", "bwd0", "update-slice", ".mb", ".local", ".host", "partial")
    assert not [s for s in literals if any(step in s for step in steps)]
