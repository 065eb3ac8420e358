"""Worker part files -> the run's trace (the shared trace builder) and its per-epoch results.

Each worker wrote ``parts/rank{R}.jsonl`` (:mod:`realrun.worker`): a line per plan task
it ran (the task's position in the plan, device, engine, start, end, bytes moved, epoch),
epoch starts and ends, and an error line if it failed. This module turns them into:

* ``trace.parquet``: :func:`workbench.trace.build_trace` over the plan's tasks, so task,
  kind, phase, src, dst, layer, worker and iteration mean what they mean in a simulated
  trace. A row's ``ready`` is when its plan dependencies had ended (as measured; the same
  device's end for a collective), never later than its start. Epoch ``e`` of a run of the
  same minibatches every epoch has its iterations numbered ``e * iterations + i``, in an
  extra ``epoch`` column too, on one timeline from the run's start. A collective's start is
  when its last member arrived (its dependencies' last end): a worker that entered it
  earlier waited, and that shows as queueing. ``bytes`` is what the
  worker really moved: where that differs from the plan the trace says what moved.
* ``results.csv``: one row per finished epoch: the simulator's results row
  (:func:`workbench.run.results_row`, the epoch's rows measured from its start) plus loss,
  train and test accuracy, and per phase the bytes measured beside the bytes planned.

A part file cut short by a failure is read up to its last whole line.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.plan import Plan
from workbench.run import PreparedRun, results_row
from workbench.trace import TraceRows, build_trace, collective_bytes_sent, make_trace

# Phases whose bytes the plan predicts; the worker counts these and the index traffic beside them.
PLANNED_PHASES = (
    "sample",
    "gather_local",
    "h2d",
    "d2h",
    "d2d",
    "gather_remote",
    "allreduce",
    "alltoall",
    "migrate",
)
MEASURED_PHASES = (*PLANNED_PHASES, "d2d_index", "gather_remote_index", "migrate_index")


@dataclass
class PartRecords:
    """Everything the workers' part files say."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    epoch_start: dict[tuple[int, int], float] = field(default_factory=dict)  # (rank, epoch) -> time
    epoch_end: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    errors: dict[int, dict[str, Any]] = field(default_factory=dict)
    starts: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)

    def finished_epochs(self, world: int) -> list[int]:
        """Epochs every worker finished."""
        epochs = sorted({e for (_r, e) in self.epoch_end})
        return [e for e in epochs if all((r, e) in self.epoch_end for r in range(world))]


def read_parts(parts: Path, world: int) -> PartRecords:
    records = PartRecords()
    for rank in range(world):
        path = parts / f"rank{rank}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # the last line of a worker that was killed while writing it
            kind = rec.get("t")
            if kind == "row":
                rec["rank"] = rank
                records.rows.append(rec)
            elif kind == "epoch_start":
                records.epoch_start[(rank, rec["epoch"])] = rec["time"]
            elif kind == "epoch_end":
                records.epoch_end[(rank, rec["epoch"])] = rec
            elif kind == "error":
                records.errors[rank] = rec
            elif kind == "start":
                records.starts[rank] = rec
            elif kind == "done":
                records.done.add(rank)
    return records


def planned_phase_bytes(plan: Plan, feature_bytes: int) -> dict[str, int]:
    """Bytes the plan moves per phase, counted as the real workers count theirs: a transfer's
    bytes; a local cache gather's rows (half its ``bytes`` feature, read and written: ``items`` x
    the bytes of a row, a whole feature vector or p3's slice of one); a collective's buffer on
    each of its devices."""
    out = dict.fromkeys(PLANNED_PHASES, 0)
    for t in plan.tasks:
        if t.kind == "transfer":
            out[t.phase] = out.get(t.phase, 0) + t.bytes
        elif t.kind == "collective":
            out[t.phase] = out.get(t.phase, 0) + t.bytes * len(t.devices)
        elif t.phase == "gather_local":  # its cost feature counts the rows read and written
            out["gather_local"] += int(t.features.get("bytes", 2.0 * t.items * feature_bytes)) // 2
    return out


def build_real_trace(
    plan: Plan, records: PartRecords, run_id: str, device_workers: dict[str, int]
) -> pd.DataFrame:
    """The trace of the rows the workers recorded (see the module docstring)."""
    rows = sorted(records.rows, key=lambda r: (r["epoch"], r["start"], r["task"]))
    if not rows:
        return make_trace([])
    tasks = plan.tasks
    position = {t.id: k for k, t in enumerate(tasks)}
    deps = [[position[d] for d in t.deps] for t in tasks]
    ends: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        ends[(r["epoch"], r["task"])][r["device"]] = r["end"]
    ready, start = [], []
    for r in rows:
        at = -math.inf
        for d in deps[r["task"]]:
            done = ends.get((r["epoch"], d))
            if done:
                at = max(at, done.get(r["device"], max(done.values())))
        begin = r["start"]
        if tasks[r["task"]].kind == "collective" and at > begin:
            # A collective begins when its last member arrives: a worker that entered it earlier
            # was waiting, which shows as queueing (ready to start), not as communication.
            begin = min(at, r["end"])
        # Clocks of different workers start at one barrier, a few microseconds apart: a
        # dependency that seems to end after its reader started is taken as ready at the start.
        ready.append(min(at, begin) if at > -math.inf else begin)
        start.append(begin)
    frame = build_trace(
        tasks,
        TraceRows(
            task=[r["task"] for r in rows],
            device=[r["device"] for r in rows],
            engine=[r["engine"] for r in rows],
            ready=ready,
            start=start,
            end=[r["end"] for r in rows],
        ),
        run_id,
        "real",
        device_workers,
    )
    epoch = np.array([r["epoch"] for r in rows], dtype=np.int64)
    iterations = max((t.iteration for t in tasks), default=0) + 1
    frame["iteration"] = frame["iteration"].to_numpy() + epoch * iterations
    frame["epoch"] = epoch
    # The bytes column says what really moved.
    measured = np.array([r["bytes"] for r in rows], dtype=np.int64)
    kinds = frame["kind"].to_numpy()
    transfer = kinds == "transfer"
    frame.loc[transfer, "bytes"] = measured[transfer]
    for k in np.flatnonzero(
        (kinds == "collective") & (measured != frame["buffer_bytes"].to_numpy())
    ).tolist():
        task = tasks[rows[k]["task"]]
        frame.loc[k, "buffer_bytes"] = measured[k]
        frame.loc[k, "bytes"] = collective_bytes_sent(
            task.op or "", len(task.devices), task.devices.index(rows[k]["device"]), int(measured[k])
        )
    return frame


def epoch_results(
    prepared: PreparedRun, plan: Plan, trace: pd.DataFrame, records: PartRecords
) -> list[dict[str, Any]]:
    """One results row per epoch every worker finished."""
    world = prepared.inputs.num_workers
    planned = planned_phase_bytes(plan, prepared.inputs.feature_bytes)
    out = []
    for epoch in records.finished_epochs(world):
        begin = min(records.epoch_start.get((r, epoch), 0.0) for r in range(world))
        rows = trace[trace["epoch"] == epoch].copy()
        for col in ("ready", "start", "end"):
            rows[col] = (rows[col] - begin).clip(lower=0.0)
        row = results_row(prepared, rows, executor="real")
        ends = [records.epoch_end[(r, epoch)] for r in range(world)]
        seeds = sum(e["seeds"] for e in ends)
        row["epoch"] = epoch
        row["loss"] = sum(e["loss_sum"] for e in ends) / max(seeds, 1)
        row["train_acc"] = sum(e["correct"] for e in ends) / max(seeds, 1)
        test = [e["test_acc"] for e in ends if e.get("test_acc") is not None]
        row["test_acc"] = float(test[0]) if test else float("nan")
        measured: dict[str, int] = defaultdict(int)
        for e in ends:
            for phase, n in e["bytes"].items():
                measured[phase] += int(n)
        for phase in MEASURED_PHASES:
            row[f"measured_{phase}_bytes"] = measured.get(phase, 0)
        for phase in PLANNED_PHASES:
            row[f"planned_{phase}_bytes"] = planned.get(phase, 0)
        row["bytes_match_plan"] = all(measured.get(p, 0) == planned.get(p, 0) for p in PLANNED_PHASES)
        out.append(row)
    return out
