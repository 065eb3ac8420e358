"""Training that learns while it runs: partition, plan one iteration, run it, measure, repartition.

ROC (paper 000, section 4) refits its partitioner's cost model after every training
iteration from the measured time of each layer on each part, and repartitions with it
(Fig. 8: the partition changes during training). :func:`train_online` is that loop,
for any executor: ``run`` takes one iteration's plan and returns its trace, so the
simulator (``lambda plan: simulate(plan, cluster).trace``) and the real executor feed
the partitioner through the same call, :meth:`Partitioner.observe`, with the same
measurements: the forward time of each layer on each part (trace rows with the
``layer`` column, by ``worker``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.errors import ConfigError
from workbench.plan import Plan
from workbench.run import PreparedRun


@dataclass(frozen=True)
class OnlineIteration:
    """What one iteration used and measured."""

    iteration: int
    boundaries: tuple[int, ...]  # the parts' first vertices and the vertex count (contiguous parts)
    seconds: float  # the iteration's time, as ``run`` measured it
    layer_seconds: np.ndarray  # (layers, parts): forward time of each layer on each part


def layer_part_seconds(trace: pd.DataFrame, num_layers: int, num_parts: int) -> np.ndarray:
    """Forward seconds per (layer, part) from a trace: its compute rows with a layer, by worker."""
    rows = trace[(trace["phase"] == "forward") & (trace["layer"] >= 0)]
    out = np.zeros((num_layers, num_parts))
    np.add.at(
        out, (rows["layer"].to_numpy(), rows["worker"].to_numpy()), (rows["end"] - rows["start"]).to_numpy()
    )
    return out


def train_online(
    prepared: PreparedRun, run: Callable[[Plan], pd.DataFrame], iterations: int | None = None
) -> tuple[list[OnlineIteration], pd.DataFrame]:
    """Run ``iterations`` (default: the run's) one at a time, repartitioning between them.

    Returns what each iteration used and measured, and the iterations' traces as one
    table (each shifted to start when the previous one ended).
    """
    from workbench.strategies.partition.roc import RangeMeasurement

    scheme = prepared.scheme
    if not scheme.plans_per_iteration:
        raise ConfigError(f"execution scheme {scheme.registered_name!r} does not train online")
    inputs = prepared.inputs
    partitioner = prepared.partitioner
    rng = np.random.default_rng([prepared.config.seed, 3])
    count = iterations if iterations is not None else inputs.num_iterations
    records: list[OnlineIteration] = []
    traces = []
    offset = 0.0
    for it in range(count):
        if it:  # the first iteration uses the run's partition; later ones what the partitioner learned
            inputs.partition = partitioner.partition(inputs.graph, inputs.num_workers, rng)
        plan = scheme.plan_iteration(inputs, it)  # type: ignore[attr-defined]
        trace = run(plan)
        seconds = float(trace["end"].max()) if len(trace) else 0.0
        per = layer_part_seconds(trace, inputs.model.num_layers, inputs.num_workers)
        owner = inputs.partition.owner
        contiguous = not owner.size or bool(np.all(np.diff(owner) >= 0))
        if contiguous:
            starts = np.searchsorted(owner, np.arange(inputs.num_workers))
            boundaries = (*starts.tolist(), int(owner.size))
            partitioner.observe(RangeMeasurement.from_partition(inputs.partition, per))
        else:
            boundaries = ()
        records.append(OnlineIteration(it, boundaries, seconds, per))
        shifted = trace.copy()
        for column in ("ready", "start", "end"):
            shifted[column] = shifted[column] + offset
        traces.append(shifted)
        offset += seconds
        inputs.planned(it)
    return records, pd.concat(traces, ignore_index=True) if traces else pd.DataFrame()
