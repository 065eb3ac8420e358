"""The default trace hook: collects one trace row per ``on_task_end`` call.

The executor feeds a :class:`TraceRecorder` in bulk instead (:meth:`TraceRecorder.add_run`):
the task indices in the order they ended and per-task start and end times, from which
the columns are built with numpy indexing into per-task arrays (one pass over the plan
per column rather than a tuple per row). Both ways give the same table.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.plan import Task
from workbench.trace import make_trace


class _RunRows:
    """One run's rows in bulk: ``order`` (task indices as they ended) and per-task arrays."""

    __slots__ = ("tasks", "order", "starts", "ends", "devices", "engines", "columns")

    def __init__(
        self,
        tasks: Sequence[Task],
        order: list[int],
        starts: list[float],
        ends: list[float],
        devices: list[str | None],
        engines: list[str],
        columns: dict[str, list] | None = None,
    ) -> None:
        self.tasks = tasks
        self.columns = dict(columns or {})
        self.order = order
        self.starts = starts
        self.ends = ends
        self.devices = devices  # None for a collective: a row per device of ``task.devices``
        self.engines = engines

    def column(self, name: str) -> list:
        """Per task, its field ``name``: as given, else read from the tasks."""
        values = self.columns.get(name)
        if values is None:
            values = self.columns[name] = list(map(attrgetter(name), self.tasks))
        return values

    def __bool__(self) -> bool:
        return bool(self.order)

    def __len__(self) -> int:
        devices = self.devices
        tasks = self.tasks
        return sum(1 if devices[i] is not None else len(tasks[i].devices) for i in self.order)


class TraceRecorder:
    """``on_task_end(task, worker, device, engine, start, end)``: keeps the row for :meth:`to_frame`."""

    def __init__(self, run_id: str = "sim") -> None:
        self.run_id = run_id
        # One tuple per row; columns are split out once, at the end (cheaper per call).
        self.rows: list[tuple[Task, int, str, str, float, float]] = []
        # Rows in the order they came: per-call row lists and bulk runs.
        self._parts: list[list[tuple[Task, int, str, str, float, float]] | _RunRows] = [self.rows]

    def __call__(self, task: Task, worker: int, device: str, engine: str, start: float, end: float) -> None:
        self.rows.append((task, worker, device, engine, start, end))

    def add_run(
        self,
        tasks: Sequence[Task],
        order: list[int],
        starts: list[float],
        ends: list[float],
        devices: list[str | None],
        engines: list[str],
        columns: dict[str, list] | None = None,
    ) -> None:
        """Record a run's rows at once, as if ``on_task_end`` had been called for each.

        ``order``: indices into ``tasks`` in the order they ended. Per task index:
        ``starts``, ``ends``, ``devices`` (the row's device, ``None`` for a collective,
        whose rows are one per device of ``task.devices`` with worker = rank) and
        ``engines``. A non-collective row's worker is ``task.worker``. ``columns``: task
        fields (``id``, ``kind``, ``phase``, ``worker``, ``iteration``, ``bytes``, ``items``)
        as per-task lists when the caller has them already; the others are read here.
        """
        self._parts.append(_RunRows(tasks, order, starts, ends, devices, engines, columns))
        self.rows = []
        self._parts.append(self.rows)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)

    def to_frame(self) -> pd.DataFrame:
        """The rows in the order tasks ended, as a validated trace."""
        frames = [self._frame(p) for p in self._parts if p]
        if not frames:
            return make_trace([])
        return make_trace(frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True))

    def _frame(self, part: list[tuple[Task, int, str, str, float, float]] | _RunRows) -> pd.DataFrame:
        if isinstance(part, _RunRows):
            return self._bulk_frame(part)
        n = len(part)
        tasks, workers, devices, engines, starts, ends = zip(*part, strict=True)
        kinds = list(map(attrgetter("kind"), tasks))
        nbytes = np.fromiter(map(attrgetter("bytes"), tasks), dtype=np.int64, count=n)
        nbytes[np.asarray(kinds, dtype=object) == "compute"] = 0  # compute moves no bytes
        return pd.DataFrame(
            {
                "run_id": _repeated([self.run_id], np.zeros(n, dtype=np.int32)),
                "worker": np.fromiter(workers, dtype=np.int64, count=n),
                "device": _few_strings(devices),
                "iteration": np.fromiter(map(attrgetter("iteration"), tasks), dtype=np.int64, count=n),
                "phase": _few_strings(list(map(attrgetter("phase"), tasks))),
                "start": np.fromiter(starts, dtype=np.float64, count=n),
                "end": np.fromiter(ends, dtype=np.float64, count=n),
                "bytes": nbytes,
                "items": np.fromiter(map(attrgetter("items"), tasks), dtype=np.int64, count=n),
                "task": list(map(attrgetter("id"), tasks)),
                "engine": _few_strings(engines),
                "executor": _repeated(["sim"], np.zeros(n, dtype=np.int32)),
                "kind": _few_strings(kinds),
            }
        )

    def _bulk_frame(self, part: _RunRows) -> pd.DataFrame:
        tasks = part.tasks
        n_tasks = len(tasks)
        order = np.array(part.order, dtype=np.int64)
        # Per task: codes and values, computed once; rows pick them by task index.
        kind_uniques, kind_codes = _codes(part.column("kind"))
        dev_uniques, dev_codes = _codes(part.devices)
        eng_uniques, eng_codes = _codes(part.engines)
        workers = np.fromiter(part.column("worker"), dtype=np.int64, count=n_tasks)
        starts = np.array(part.starts, dtype=np.float64)
        ends = np.array(part.ends, dtype=np.float64)
        if None in dev_uniques:  # collectives: one row per device, worker = rank
            collective = dev_codes == dev_uniques.index(None)
            counts = np.ones(n_tasks, dtype=np.int64)
            where = np.flatnonzero(collective)
            counts[where] = [len(tasks[i].devices) for i in where.tolist()]
            rows = np.repeat(order, counts[order])
            first = np.repeat(np.cumsum(counts[order]) - counts[order], counts[order])
            rank = np.arange(len(rows), dtype=np.int64) - first
            worker = workers[rows]
            device = dev_codes[rows]
            coll_rows = np.flatnonzero(collective[rows])
            worker[coll_rows] = rank[coll_rows]
            index = {d: k for k, d in enumerate(dev_uniques)}
            names = []
            for i in order[collective[order]].tolist():
                for d in tasks[i].devices:
                    code = index.get(d)
                    if code is None:
                        code = index[d] = len(dev_uniques)
                        dev_uniques.append(d)
                    names.append(code)
            device[coll_rows] = names
        else:
            rows = order
            worker = workers[rows]
            device = dev_codes[rows]
        n = len(rows)
        phase_uniques, phase_codes = _codes(part.column("phase"))
        nbytes = np.fromiter(part.column("bytes"), dtype=np.int64, count=n_tasks)
        if "compute" in kind_uniques:
            nbytes[kind_codes == kind_uniques.index("compute")] = 0  # compute moves no bytes
        ids = pa.array(part.column("id"), type=pa.large_string())
        return pd.DataFrame(
            {
                "run_id": _repeated([self.run_id], np.zeros(n, dtype=np.int32)),
                "worker": worker,
                "device": _repeated(dev_uniques, device.astype(np.int32)),
                "iteration": np.fromiter(part.column("iteration"), dtype=np.int64, count=n_tasks)[rows],
                "phase": _repeated(phase_uniques, phase_codes[rows]),
                "start": starts[rows],
                "end": ends[rows],
                "bytes": nbytes[rows],
                "items": np.fromiter(part.column("items"), dtype=np.int64, count=n_tasks)[rows],
                "task": ids.take(pa.array(rows)).to_pandas(),
                "engine": _repeated(eng_uniques, eng_codes[rows]),
                "executor": _repeated(["sim"], np.zeros(n, dtype=np.int32)),
                "kind": _repeated(kind_uniques, kind_codes[rows]),
            }
        )


def _codes(values: Sequence[str | None]) -> tuple[list, np.ndarray]:
    """Distinct values in order of first appearance, and each value's position among them."""
    uniques = list(dict.fromkeys(values))
    index = {u: i for i, u in enumerate(uniques)}
    return uniques, np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))


def _few_strings(values: Sequence[str]) -> pd.Series:
    """A string column with few distinct values, built from codes (pandas' per-item string
    conversion of 100,000 values costs tens of milliseconds a column)."""
    uniques, codes = _codes(values)
    return _repeated(uniques, codes)


def _repeated(uniques: list[str], codes: np.ndarray) -> pd.Series:
    return pa.array(uniques, type=pa.large_string()).take(pa.array(codes)).to_pandas()
