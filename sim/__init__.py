"""The simulator: GPUs, copy engines, host memory, PCIe trees, NVLink/NVSwitch and networks.

One call runs a plan::

    from sim import simulate
    result = simulate(plan, load_hardware("neugraph-8xp100-pcie"), run_id="demo", seed=0)
    result.makespan, result.trace, result.phase_summary()

Modules: ``clock`` (simpy environment with a callback fast path), ``topology``
(directed links, widest-path routes), ``flows`` (max-min fair bandwidth sharing),
``resources`` (compute streams, copy engines, CPU cores), ``collectives`` (ring
schedules), ``costmodel`` (compute times), ``memory`` (does the plan fit),
``executor`` (runs the plan), ``trace_hook`` (collects trace rows).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sim.costmodel import LinearCoefficients, LinearCostModel
from sim.executor import PlanExecutor, TaskEndHook, paused_gc
from sim.memory import check_memory, memory_needs
from sim.topology import Route, Topology
from sim.trace_hook import TraceRecorder
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan

__all__ = [
    "LinearCoefficients",
    "LinearCostModel",
    "PlanExecutor",
    "Route",
    "SimResult",
    "TaskEndHook",
    "Topology",
    "TraceRecorder",
    "check_memory",
    "memory_needs",
    "simulate",
]


@dataclass
class SimResult:
    plan_name: str
    run_id: str
    makespan: float  # seconds from 0 to the last task's end
    trace: pd.DataFrame  # workbench.trace schema, one row per task (per device for collectives)
    memory: dict[str, int] = field(default_factory=dict)  # peak bytes needed per memory
    # tasks, events (queue entries), rebalances (max-min recomputations), validate_s,
    # execute_s, wall_s (validate + execute; building the trace table is not included)
    stats: dict[str, float] = field(default_factory=dict)

    def phase_summary(self) -> pd.DataFrame:
        from workbench.trace import phase_summary

        return phase_summary(self.trace)


def simulate(
    plan: Plan,
    cluster: ClusterSpec | str | Path,
    cost_model: LinearCostModel | None = None,
    run_id: str = "sim",
    seed: int = 0,
    jitter: float = 0.0,
    on_task_end: TaskEndHook | None = None,
) -> SimResult:
    """Run ``plan`` on ``cluster`` (a spec, a preset name or a TOML path).

    Raises :class:`~workbench.errors.PlanError` for a malformed plan (naming the task)
    and :class:`~workbench.errors.InfeasiblePlanError` when it does not fit in memory.
    ``on_task_end``, when given, is called for every trace row besides the recorder.
    """
    if not isinstance(cluster, ClusterSpec):
        from workbench.hardware import load_hardware

        cluster = load_hardware(cluster)
    recorder = TraceRecorder(run_id)
    hook: TaskEndHook = recorder
    if on_task_end is not None:
        extra = on_task_end

        def hook(task, worker, device, engine, start, end):  # type: ignore[no-redef]
            recorder(task, worker, device, engine, start, end)
            extra(task, worker, device, engine, start, end)

    executor = PlanExecutor(cluster, cost_model, seed=seed, jitter=jitter)
    with paused_gc():
        t0 = time.perf_counter()
        makespan = executor.run(plan, hook)
        wall = time.perf_counter() - t0
        trace = recorder.to_frame()
    return SimResult(
        plan.name,
        run_id,
        makespan,
        trace,
        executor.memory,
        {**executor.stats, "wall_s": wall},
    )
