"""How much a compute task's time varies when it does the same work again: the simulator's jitter.

A real run trains the same sampled epoch every epoch, so each compute task id recurs once per
warm epoch with the same work. How its duration moves between those epochs is what no cost model
of the work can predict: the host's scheduling, caches, the other worker's traffic. Its pooled
within-task standard deviation of log duration is the sigma of the simulator's mean-one lognormal
compute jitter (:class:`sim.executor.PlanExecutor`), which the profile records as
``[noise] compute_jitter``: without it the simulated iterations of a configuration differ only by
their minibatches' work, and the simulated p95 iteration time sits below the measured one (the
scheme grid of 2026-11-27: p95 under-predicted by 25% in the median).

The pooled estimate treats each task's deviations as independent: noise shared by every task of
an iteration (a slower moment of the whole machine) is counted only as far as it moves each task.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

# Shorter rows are timer resolution and bookkeeping, whose logarithm would swamp the estimate.
MIN_DURATION_S = 1e-6


def compute_jitter(sources: list[Any]) -> dict[str, Any] | None:
    """``{"compute_jitter": sigma, "rows": n, "tasks": k, "rule": ...}`` from the compute rows of
    ``sources`` (:class:`sim.calibrate.sources.TraceSource`) whose task id recurs in the same trace,
    or None where none recurs (simulated traces, one-epoch runs)."""
    parts = []
    for source in sources:
        t = source.trace
        if not {"task", "kind", "start", "end"} <= set(t.columns):
            continue
        rows = t[t["kind"].to_numpy() == "compute"]
        seconds = (rows["end"] - rows["start"]).to_numpy(dtype=float)
        keep = seconds > MIN_DURATION_S
        parts.append(
            pd.DataFrame(
                {"source": source.name, "task": rows["task"].to_numpy()[keep], "log": np.log(seconds[keep])}
            )
        )
    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    by_task = frame.groupby(["source", "task"], sort=False)["log"]
    count = by_task.transform("size").to_numpy()
    deviation = (frame["log"] - by_task.transform("mean")).to_numpy()
    repeated = count >= 2
    rows = int(repeated.sum())
    tasks = round(float((1.0 / count[repeated]).sum()))  # a task of n rows adds n times 1/n
    if rows <= tasks:
        return None
    sigma = math.sqrt(float((deviation[repeated] ** 2).sum()) / (rows - tasks))
    return {
        "compute_jitter": sigma,
        "rows": rows,
        "tasks": tasks,
        "rule": "pooled within-task standard deviation of log duration over the compute rows whose task id "
        "recurs in its trace (the same work in another epoch); the simulator's mean-one lognormal sigma",
    }
