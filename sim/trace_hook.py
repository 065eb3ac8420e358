"""The default trace hook: collects one trace row per ``on_task_end`` call."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.plan import Task
from workbench.trace import make_trace


class TraceRecorder:
    """``on_task_end(task, worker, device, engine, start, end)``: keeps the row for :meth:`to_frame`."""

    def __init__(self, run_id: str = "sim") -> None:
        self.run_id = run_id
        # One tuple per row; columns are split out once, at the end (cheaper per call).
        self.rows: list[tuple[Task, int, str, str, float, float]] = []

    def __call__(self, task: Task, worker: int, device: str, engine: str, start: float, end: float) -> None:
        self.rows.append((task, worker, device, engine, start, end))

    def __len__(self) -> int:
        return len(self.rows)

    def to_frame(self) -> pd.DataFrame:
        """The rows in the order tasks ended, as a validated trace."""
        n = len(self.rows)
        if not n:
            return make_trace([])
        tasks, workers, devices, engines, starts, ends = zip(*self.rows, strict=True)
        kinds = list(map(attrgetter("kind"), tasks))
        nbytes = np.fromiter(map(attrgetter("bytes"), tasks), dtype=np.int64, count=n)
        nbytes[np.asarray(kinds, dtype=object) == "compute"] = 0  # compute moves no bytes
        df = pd.DataFrame(
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
        return make_trace(df)


def _few_strings(values: Sequence[str]) -> pd.Series:
    """A string column with few distinct values, built from codes (pandas' per-item string
    conversion of 100,000 values costs tens of milliseconds a column)."""
    uniques = list(dict.fromkeys(values))
    index = {u: i for i, u in enumerate(uniques)}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))
    return _repeated(uniques, codes)


def _repeated(uniques: list[str], codes: np.ndarray) -> pd.Series:
    return pa.array(uniques, type=pa.large_string()).take(pa.array(codes)).to_pandas()
