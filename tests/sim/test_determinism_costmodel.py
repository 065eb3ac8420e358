"""Same plan, hardware and seed: a bit-identical trace. The cost model and its files."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim import LinearCoefficients, LinearCostModel, simulate
from workbench.errors import ConfigError
from workbench.plan import Plan, Task


def busy_plan(gpus: list[str], iterations: int = 6) -> Plan:
    """Copies that share uplinks, computes from the cost model, host sampling and all-reduces."""
    p = Plan("busy")
    prev_ar: list[str] = []
    for it in range(iterations):
        finals = []
        for w, g in enumerate(gpus):
            s = p.compute(
                f"{it}.{w}.s", "m0.host", "sample", worker=w, iteration=it, features={"edges": 1e5 * (w + 1)}
            )
            t = p.transfer(
                f"{it}.{w}.h2d",
                "m0.host",
                g,
                3_000_000 + 77_777 * w * it,
                "h2d",
                [s.id],
                worker=w,
                iteration=it,
            )
            f = p.compute(
                f"{it}.{w}.f",
                g,
                "forward",
                [t.id, *prev_ar],
                worker=w,
                iteration=it,
                features={"flops": 1e9, "bytes": 1e8},
            )
            b = p.compute(
                f"{it}.{w}.b",
                g,
                "backward",
                [f.id],
                worker=w,
                iteration=it,
                features={"flops": 2e9, "bytes": 2e8},
            )
            finals.append(b.id)
        p.collective(f"{it}.ar", "allreduce", gpus, 10_000_000, "allreduce", finals, iteration=it)
        p.collective(f"{it}.a2a", "alltoall", gpus, 1_000_000, "alltoall", finals, iteration=it)
        prev_ar = [f"{it}.ar"]
    return p


@pytest.mark.parametrize("jitter", [0.0, 0.1])
def test_same_seed_gives_a_bit_identical_trace(neugraph, jitter):
    plan = busy_plan(neugraph.gpu_nodes())
    a = simulate(plan, neugraph, seed=3, jitter=jitter).trace
    b = simulate(
        Plan.from_dict(json.loads(json.dumps(plan.to_dict()))), neugraph, seed=3, jitter=jitter
    ).trace
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.equals(b)


@pytest.mark.parametrize("jitter", [0.0, 0.1])
def test_the_hook_sees_each_task_as_the_trace_does(neugraph, jitter):
    """on_task_end is called once per task as it ends, with the times its trace rows carry."""
    plan = busy_plan(neugraph.gpu_nodes(), 3)
    plan.collective("solo", "allreduce", ["m0.gpu0"], 1000, "allreduce", ["2.ar"], iteration=3)
    plan.transfer("same", "m0.gpu1", "m0.gpu1", 1000, "d2d", ["solo"], worker=1)
    plan.compute("stated", "m0.gpu2", "update", ["2.a2a"], features={"seconds": 0.001})
    seen: list[tuple] = []
    result = simulate(plan, neugraph, seed=3, jitter=jitter, on_task_end=lambda *row: seen.append(row))
    assert len(seen) == len(plan.tasks)
    rows = result.trace.drop_duplicates("task")  # a collective has a row per device, same times
    assert [(t.id, r, s, e) for t, r, s, e in seen] == list(
        rows[["task", "ready", "start", "end"]].itertuples(index=False, name=None)
    )
    assert result.makespan == max(e for *_, e in seen)


def test_engine_subclasses_take_the_general_path(neugraph, monkeypatch):
    """Engines that override the FIFO hook are asked through request/release, with the same result here."""
    import sim.executor
    from sim.resources import Engine, MachineEngines

    class Counting(Engine):
        __slots__ = ()
        asked = 0

        def _can_grant(self) -> bool:
            Counting.asked += 1
            return super()._can_grant()

    class Engines(MachineEngines):
        def __init__(self, cluster):
            super().__init__(cluster)
            self.compute = {k: Counting(e.name, e.slots) for k, e in self.compute.items()}

    plan = busy_plan(neugraph.gpu_nodes(), 3)
    plain = simulate(plan, neugraph, seed=3, jitter=0.1)
    monkeypatch.setattr(sim.executor, "MachineEngines", Engines)
    hooked = simulate(plan, neugraph, seed=3, jitter=0.1)
    assert Counting.asked > 0
    pd.testing.assert_frame_equal(plain.trace, hooked.trace, check_exact=True)


def test_an_executor_runs_plans_again_with_the_same_result(neugraph):
    from sim import PlanExecutor

    plan = busy_plan(neugraph.gpu_nodes(), 2)
    executor = PlanExecutor(neugraph, seed=4, jitter=0.1)
    first = executor.run(plan)
    second = executor.run(plan)
    assert (first.ready, first.start, first.end) == (second.ready, second.start, second.end)


def test_a_run_leaves_no_reference_cycles(neugraph):
    """Freed by reference counting when simulate() returns, not by a later (costly) GC pass."""
    import gc

    plan = busy_plan(neugraph.gpu_nodes(), 2)
    simulate(plan, neugraph, jitter=0.1)  # warm caches and imports
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        result = simulate(plan, neugraph, jitter=0.1)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
    assert len(result.trace)


def test_cost_model_seconds_many_is_seconds_per_task(neugraph):
    tasks = [t for t in busy_plan(neugraph.gpu_nodes(), 2).tasks if t.kind == "compute"]
    tasks.append(Task("x", "compute", device="m0.gpu3", features={"seconds": 2, "flops": 1}))
    tasks.append(Task("y", "compute", device="m0.gpu3", features={"flops": 10**20, "edges": True}))
    for m in (LinearCostModel(), LinearCostModel({"default": LinearCoefficients(1, 2, 3, 4, 5)})):
        assert m.seconds_many(tasks, neugraph).tolist() == [m.seconds(t, neugraph) for t in tasks]


def test_jitter_draws_from_the_seed(neugraph):
    plan = busy_plan(neugraph.gpu_nodes(), 2)
    a = simulate(plan, neugraph, seed=1, jitter=0.2).makespan
    b = simulate(plan, neugraph, seed=2, jitter=0.2).makespan
    assert a != b
    assert simulate(plan, neugraph, seed=1).makespan == simulate(plan, neugraph, seed=2).makespan


def test_trace_follows_the_schema(neugraph):
    r = simulate(busy_plan(neugraph.gpu_nodes(), 2), neugraph, run_id="r1")
    t = r.trace
    assert set(t["executor"]) == {"sim"} and set(t["run_id"]) == {"r1"}
    assert set(t["engine"]) == {"cpu", "h2d", "compute", "collective"}
    assert (t.loc[t["kind"] == "compute", "bytes"] == 0).all()
    assert len(t) == 2 * 8 * 4 + 2 * 2 * 8  # per task, per device for the collectives
    assert r.makespan == t["end"].max()
    summary = r.phase_summary()
    assert list(summary["phase"]) == sorted({"sample", "h2d", "forward", "backward", "allreduce", "alltoall"})


def test_the_hook_sees_every_row(h100):
    p = Plan("hook")
    p.compute("k", "m0.gpu0", "forward", features={"seconds": 1})
    seen = []
    simulate(
        p,
        h100,
        on_task_end=lambda task, ready, start, end: seen.append((task.id, ready, start, end)),
    )
    assert seen == [("k", 0.0, 0.0, 1.0)]


def test_linear_cost_model_by_hand(h100, neugraph):
    m = LinearCostModel()
    gpu = Task("k", "compute", device="m0.gpu0", features={"flops": 67e12, "bytes": 3350e9 * 0.7})
    # H100: 5 us + 2 * (67e12 / 67e12) + (1 / 0.7) * (0.7 * 3350e9 / 3350e9) = 3.000005 s
    assert m.seconds(gpu, h100) == pytest.approx(3.000005, rel=1e-12)
    host = Task("s", "compute", device="m0.host", features={"edges": 1e6, "vertices": 1e5})
    # CPU: 20 us + 1e-7 * 1e6 + 2e-7 * 1e5 = 0.12002 s
    assert m.seconds(host, h100) == pytest.approx(0.12002, rel=1e-12)
    fixed = Task("f", "compute", device="m0.gpu0", features={"seconds": 0.25, "flops": 1e20})
    assert m.seconds(fixed, h100) == 0.25
    tuned = LinearCostModel({"P100": LinearCoefficients(intercept=1.0), "default": LinearCoefficients()})
    assert tuned.seconds(Task("k", "compute", device="m0.gpu0"), neugraph) == 1.0
    assert tuned.seconds(Task("k", "compute", device="m0.gpu0"), h100) == 0.0


def test_cost_model_round_trips_through_json(tmp_path):
    m = LinearCostModel(
        {"P100": LinearCoefficients(1e-5, 1.5, 1.2, 1e-9, 2e-9), "default": LinearCoefficients(2e-6)},
        "fit on x",
    )
    path = tmp_path / "cm.json"
    m.to_json(path)
    assert LinearCostModel.from_json(path) == m
    assert LinearCostModel.from_json(m.to_json()) == m
    with pytest.raises(ConfigError, match="coefficients.P100 has unknown field"):
        LinearCostModel.from_dict({"coefficients": {"P100": {"slope": 1}}})
