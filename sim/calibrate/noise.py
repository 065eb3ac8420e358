"""How much a compute task's time varies when it does the same work again: the simulator's jitter.

A real run trains the same sampled epoch every epoch, so each compute task id recurs once per
warm epoch with the same work. How its duration moves between those epochs is what no cost model
of the work can predict: the host's scheduling, caches, the other worker's traffic. Its pooled
within-task standard deviation of log duration is the sigma of the simulator's mean-one lognormal
compute jitter (:class:`sim.executor.PlanExecutor`), which the profile records as
``[noise] compute_jitter``: without it the simulated iterations of a configuration differ only by
their minibatches' work, and the simulated p95 iteration time sits below the measured one (the
scheme grid of 2026-11-27: p95 under-predicted by 25% in the median).

Noise shared by every task of one worker's iteration (a slower moment of that worker) stretches
those tasks together, which independent per-task factors average away: the simulated iterations
then vary less than the measured ones and the simulated p95 iteration time sits low (2026-11-28:
-11.9% mean signed on the scheme grid's held-out configurations). Where the traces say each
row's epoch, worker and iteration, the deviations are split as in a one-way random-effects
analysis of variance, the groups being one worker's iteration in one epoch::

    log t[k, e] = mu[k] + s[g(k, e)] + eps[k, e]

A task's deviation from its mean over the ``E`` epochs it recurs in removes ``mu[k]`` and, for
a group, the mean of its ``s`` over the epochs: a group mean ``m`` of ``n`` such deviations has
variance ``(E - 1) / E * (sigma_s^2 + sigma_e^2 / n)`` and the deviations around it
``(E - 1) / E * (n - 1) / n * sigma_e^2``. So ``sigma_e^2`` (``compute_jitter``) is the pooled
within-group variance over those degrees of freedom, and ``sigma_s^2`` (``iteration_jitter``) the
mean of ``m^2 * E / (E - 1) - sigma_e^2 / n`` over the groups, at least 0. Without those columns
(or with no group of two tasks), all of it is per task, as before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

# Shorter rows are timer resolution and bookkeeping, whose logarithm would swamp the estimate.
MIN_DURATION_S = 1e-6


def compute_jitter(sources: list[Any]) -> dict[str, Any] | None:
    """``{"compute_jitter": sigma_e, "iteration_jitter": sigma_s, "rows": n, "tasks": k, "rule": ...}``
    from the compute rows of ``sources`` (:class:`sim.calibrate.sources.TraceSource`) whose task id
    recurs in the same trace (module docstring), or None where none recurs (simulated traces,
    one-epoch runs)."""
    frame = _recurring_rows(sources)
    if frame is None:
        return None
    by_task = frame.groupby(["source", "task"], sort=False)["log"]
    count = by_task.transform("size").to_numpy()
    deviation = (frame["log"] - by_task.transform("mean")).to_numpy()
    repeated = count >= 2
    rows = int(repeated.sum())
    tasks = round(float((1.0 / count[repeated]).sum()))  # a task of n rows adds n times 1/n
    if rows <= tasks:
        return None
    total = float((deviation[repeated] ** 2).sum()) / (rows - tasks)
    split = _split(frame[repeated].assign(deviation=deviation[repeated], epochs=count[repeated]))
    sigma_e2, sigma_s2 = split if split is not None else (total, 0.0)
    return {
        "compute_jitter": math.sqrt(sigma_e2),
        "iteration_jitter": math.sqrt(sigma_s2),
        "rows": rows,
        "tasks": tasks,
        "rule": "one-way random-effects split of the log-duration deviations of compute rows whose task id "
        "recurs in its trace (the same work in another epoch), groups one worker's iteration in one epoch: "
        "compute_jitter the within-group sigma (per task), iteration_jitter the group sigma (shared by a "
        "worker's iteration); the simulator's mean-one lognormal factors",
    }


GROUP = ["source", "epoch", "worker", "iteration"]


def _recurring_rows(sources: list[Any]) -> pd.DataFrame | None:
    """Every source's timed compute rows: source, task, log seconds, and the group columns where
    the trace has them (else -1)."""
    parts = []
    for source in sources:
        t = source.trace
        if not {"task", "kind", "start", "end"} <= set(t.columns):
            continue
        rows = t[t["kind"].to_numpy() == "compute"]
        seconds = (rows["end"] - rows["start"]).to_numpy(dtype=float)
        keep = seconds > MIN_DURATION_S
        part = {"source": source.name, "task": rows["task"].to_numpy()[keep], "log": np.log(seconds[keep])}
        for column in GROUP[1:]:
            part[column] = rows[column].to_numpy()[keep] if column in rows.columns else -1
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True) if parts else None


def _split(frame: pd.DataFrame) -> tuple[float, float] | None:
    """(sigma_e^2, sigma_s^2) from the deviations of the groups of two or more rows (module
    docstring); None where no such group is left or the columns are missing."""
    if (frame[GROUP[1:]] < 0).any(axis=None):
        return None
    groups = frame.groupby(GROUP, sort=False)
    n = groups["deviation"].transform("size").to_numpy(dtype=float)
    frame = frame[n >= 2]
    if frame.empty:
        return None
    groups = frame.groupby(GROUP, sort=False)
    size = groups["deviation"].size().to_numpy(dtype=float)
    mean = groups["deviation"].mean().to_numpy()
    epochs = groups["epochs"].mean().to_numpy(dtype=float)  # E, the epochs each group's tasks recur in
    shrink = (epochs - 1) / epochs
    residual = frame["deviation"].to_numpy() - groups["deviation"].transform("mean").to_numpy()
    dof = float((shrink * (size - 1)).sum())
    if dof <= 0:
        return None
    sigma_e2 = float((residual**2).sum()) / dof
    sigma_s2 = float(np.mean(mean**2 / shrink - sigma_e2 / size))
    return sigma_e2, max(sigma_s2, 0.0)
