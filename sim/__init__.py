"""The simulator: GPUs, copy engines, host memory, PCIe trees, NVLink/NVSwitch and networks.

One call runs a plan::

    from sim import simulate
    result = simulate(plan, load_hardware("neugraph-8xp100-pcie"), run_id="demo", seed=0)
    result.makespan, result.trace, result.phase_summary(), result.memory

Modules: ``clock`` (simpy environment with a callback fast path), ``topology``
(directed links, the routes the hardware takes), ``flows`` (max-min fair bandwidth
sharing), ``resources`` (compute streams, copy engine pools, CPU cores),
``collectives`` (ring schedules), ``costmodel`` (compute times), ``memory`` (live
bytes per memory over simulated time), ``executor`` (runs the plan). The trace table
comes from ``workbench.trace.build_trace``, shared with the real executor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sim.costmodel import LinearCoefficients, LinearCostModel
from sim.executor import PlanExecutor, TaskEndHook, paused_gc
from sim.memory import MemoryTimeline
from sim.topology import Route, Topology
from workbench.hardware.spec import ClusterSpec
from workbench.plan import CheckedPlan, Plan
from workbench.trace import build_trace, task_table

__all__ = [
    "LinearCoefficients",
    "LinearCostModel",
    "MemoryTimeline",
    "PlanExecutor",
    "Route",
    "SimResult",
    "TaskEndHook",
    "Topology",
    "simulate",
]


@dataclass
class SimResult:
    plan_name: str
    run_id: str
    makespan: float  # seconds from 0 to the last task's end
    trace: pd.DataFrame  # workbench.trace schema, one row per task (per device for collectives)
    memory: dict[str, int] = field(default_factory=dict)  # each memory's peak live bytes
    # tasks, events (queue entries), rebalances (max-min recomputations), validate_s,
    # setup_s (reading the plan into the run's lists), execute_s, wall_s (the three;
    # building the trace table is not included)
    stats: dict[str, float] = field(default_factory=dict)

    def phase_summary(self) -> pd.DataFrame:
        from workbench.trace import phase_summary

        return phase_summary(self.trace)


def simulate(
    plan: Plan | CheckedPlan,
    cluster: ClusterSpec | str | Path,
    cost_model: LinearCostModel | None = None,
    run_id: str = "sim",
    seed: int = 0,
    jitter: float = 0.0,
    on_task_end: TaskEndHook | None = None,
    iteration_jitter: float = 0.0,
) -> SimResult:
    """Run ``plan`` on ``cluster`` (a spec, a preset name or a TOML path).

    Raises :class:`~workbench.errors.PlanError` for a malformed plan (naming the task)
    and :class:`~workbench.errors.InfeasiblePlanError` when some memory overflows at
    some moment (naming it, the moment, the peak and the tensors live then).
    ``jitter``: relative noise on compute durations (lognormal sigma), drawn from ``seed``;
    ``iteration_jitter``: the same, one draw shared by the compute tasks of each worker's iteration.
    ``on_task_end(task, ready, start, end)``, when given, is called as each task ends.
    ``plan`` may be a snapshot (``plan.checked()``): simulated under several hardware files
    or seeds, it is validated once and its per-task trace columns are built once.
    """
    if not isinstance(cluster, ClusterSpec):
        from workbench.hardware import load_hardware

        cluster = load_hardware(cluster)
    executor = PlanExecutor(cluster, cost_model, seed=seed, jitter=jitter, iteration_jitter=iteration_jitter)
    with paused_gc():
        t0 = time.perf_counter()
        times = executor.run(plan, on_task_end)
        wall = time.perf_counter() - t0
        checked = times.checked
        workers = checked.plan.device_workers(cluster.gpu_nodes(), cluster.host_nodes())
        table = checked.derived.get("trace.table")
        if table is None:
            table = checked.derived["trace.table"] = task_table(checked.columns.tasks, checked.columns.fields)
        trace = build_trace(checked.columns.tasks, times.rows, run_id, "sim", workers, table=table)
        result = SimResult(
            checked.name,
            run_id,
            max(times.end, default=0.0),
            trace,
            times.memory,
            {**executor.stats, "wall_s": wall},
        )
        # Free the run's lists (and a snapshot taken for this call alone) while the collector
        # is paused: alive when it resumes, the first allocation after would start a pass
        # over the millions of references they hold, only to find them garbage at return.
        del times, checked, table, trace
    return result
