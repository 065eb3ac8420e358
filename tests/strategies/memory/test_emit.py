"""Schedules as plans: the simulator's memory timeline accepts them at the schedule's capacity,
rejects them on a smaller GPU, and moves exactly the schedule's bytes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import simulate
from workbench.errors import InfeasiblePlanError
from workbench.hardware.spec import ClusterSpec
from workbench.model import build_model
from workbench.plan import Plan
from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import MemorySchedule, Operator, OperatorGraph, Tensor
from workbench.strategies.memory.emit import schedule_to_plan
from workbench.strategies.memory.graphs import operator_graph

POLICIES = ("dpmm", "lru", "streaming")


def simulated(schedule: MemorySchedule, cluster: ClusterSpec):
    plan = Plan(f"{schedule.policy}-{schedule.graph.name}")
    schedule_to_plan(plan, schedule)
    result = simulate(plan, cluster)
    trace = result.trace
    by_phase = trace.groupby("phase")["bytes"].sum()
    return result, int(by_phase.get("h2d", 0)), int(by_phase.get("d2h", 0))


def check(schedule: MemorySchedule, cluster: ClusterSpec) -> None:
    result, h2d, d2h = simulated(schedule, cluster)
    assert (h2d, d2h) == (schedule.h2d_bytes, schedule.d2h_bytes)
    assert h2d + d2h == schedule.volume_bytes
    # Each step's loads wait for the previous step's releases: the GPU never holds more than
    # the schedule's peak, and reaches it.
    assert result.memory["m0.gpu0"] == schedule.peak_bytes <= schedule.capacity_bytes


@pytest.mark.parametrize("policy", POLICIES)
def test_gin_fig3_plans_fit_and_move_the_schedule_bytes(
    policy: str, gin_fig3: OperatorGraph, one_gpu: Callable[[int], ClusterSpec]
) -> None:
    schedule = MEMORY_POLICIES.create(policy).schedule(gin_fig3, 18)
    check(schedule, one_gpu(18))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    ("family", "layers", "capacity"), [("gcn", 2, 2_100_000_000), ("resgcn", 16, 4_000_000_000)]
)
def test_reddit_sized_gcn_plans_fit_and_move_the_schedule_bytes(
    policy: str, family: str, layers: int, capacity: int, one_gpu: Callable[[int], ClusterSpec]
) -> None:
    graph = operator_graph(build_model(family, 602, 41, hidden=256, num_layers=layers), 232_965, 114_848_857)
    check(MEMORY_POLICIES.create(policy).schedule(graph, capacity), one_gpu(capacity))


def test_a_plan_on_a_gpu_smaller_than_its_schedule_is_infeasible(
    gin_fig3: OperatorGraph, one_gpu: Callable[[int], ClusterSpec]
) -> None:
    schedule = MEMORY_POLICIES.create("dpmm").schedule(gin_fig3, 18)
    plan = Plan("too-small")
    schedule_to_plan(plan, schedule)
    with pytest.raises(InfeasiblePlanError, match="m0.gpu0 holds 18 B of 17 B"):
        simulate(plan, one_gpu(17))


def test_the_plan_speaks_the_tensor_vocabulary(gin_fig3: OperatorGraph) -> None:
    schedule = MEMORY_POLICIES.create("dpmm").schedule(gin_fig3, 18)
    plan = Plan("vocabulary")
    plan.compute("start", "m0.gpu0", "other", features={"seconds": 0.0})
    ends = schedule_to_plan(plan, schedule, prefix="i0.", deps=["start"], iteration=3)
    tasks = {t.id: t for t in plan.tasks}
    # w1 is loaded for step 2, released by it (it is not kept), and loaded again for step 6.
    assert tasks["i0.2 linear+relu.load.w1"].allocate == {"i0.w1": 1}
    assert "i0.w1" in tasks["i0.2 linear+relu"].free
    assert tasks["i0.6 linear+relu.bwd.load.w1"].allocate == {"i0.w1": 1}
    # a is kept from step 1 to step 7: written back once, freed by step 7 after its write-back.
    wb = tasks["i0.1 gather.wb.a"]
    assert (wb.kind, wb.src, wb.dst, wb.free, wb.allocate) == (
        "transfer",
        "m0.gpu0",
        "m0.host",
        [],
        {"i0.a@host": 2},
    )
    assert "i0.a" in tasks["i0.7 gather.bwd"].free and "i0.1 gather.wb.a" in tasks["i0.7 gather.bwd"].deps
    # An output nobody keeps is swapped out: its write-back frees the GPU copy.
    assert tasks["i0.5 linear.bwd.wb.grad_w2"].free == ["i0.grad_w2"]
    assert tasks["i0.1 gather.load.h0"].deps == ["start"]
    assert all(t.iteration == 3 for t in plan.tasks if t.id != "start")
    assert ends[0] == "i0.7 gather.bwd" and "i0.7 gather.bwd.wb.grad_h0" in ends
    plan.validate()


def test_two_steps_chained_through_the_returned_ids(
    gin_fig3: OperatorGraph, one_gpu: Callable[[int], ClusterSpec]
) -> None:
    schedule = MEMORY_POLICIES.create("dpmm").schedule(gin_fig3, 18)
    plan = Plan("two-steps")
    ends = schedule_to_plan(plan, schedule, prefix="i0.")
    schedule_to_plan(plan, schedule, prefix="i1.", deps=ends, iteration=1)
    result = simulate(plan, one_gpu(18))
    assert result.trace.query("phase == 'h2d'")["bytes"].sum() == 2 * schedule.h2d_bytes
    assert result.memory["m0.gpu0"] == schedule.peak_bytes


@st.composite
def graphs_with_capacity(draw: st.DrawFn) -> tuple[OperatorGraph, int]:
    """Random chains and DAGs with sizes >= 1 byte (a zero-byte tensor occupies nothing)."""
    tensors = [Tensor(f"in{h}", draw(st.integers(1, 5)), "features") for h in range(draw(st.integers(1, 3)))]
    available = [t.name for t in tensors]
    operators = []
    for k in range(draw(st.integers(1, 6))):
        reads = draw(st.lists(st.sampled_from(available), min_size=1, max_size=3, unique=True))
        writes = [f"t{k}.{j}" for j in range(draw(st.integers(1, 2)))]
        tensors += [Tensor(name, draw(st.integers(1, 5))) for name in writes]
        operators.append(Operator(f"op{k}", tuple(reads), tuple(writes)))
        available += writes
    graph = OperatorGraph(tuple(operators), tuple(tensors))
    low = max(graph.working_set_bytes(k) for k in range(len(operators)))
    return graph, draw(st.integers(low, low + 6))


@settings(max_examples=40, deadline=None)
@given(graphs_with_capacity(), st.sampled_from(POLICIES))
def test_random_graphs_simulate_at_their_capacity(case: tuple[OperatorGraph, int], policy: str) -> None:
    from workbench.hardware.spec import GPUSpec, LinkSpec, MachineSpec

    graph, capacity = case
    machine = MachineSpec("m0", (GPUSpec("TestGPU", capacity, 10e12, 500e9),), 2**40)
    cluster = ClusterSpec("one-gpu", (machine,), (LinkSpec("m0.host", "m0.gpu0", 16e9, 1e-6, "pcie"),))
    check(MEMORY_POLICIES.create(policy).schedule(graph, capacity), cluster)
