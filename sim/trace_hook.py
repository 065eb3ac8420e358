"""The default trace hook: collects one trace row per ``on_task_end`` call."""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.plan import Task
from workbench.trace import make_trace


class TraceRecorder:
    """``on_task_end(task, worker, device, engine, start, end)``: appends a row (kept as columns)."""

    def __init__(self, run_id: str = "sim") -> None:
        self.run_id = run_id
        self.worker: list[int] = []
        self.device: list[str] = []
        self.iteration: list[int] = []
        self.phase: list[str] = []
        self.start: list[float] = []
        self.end: list[float] = []
        self.bytes: list[int] = []
        self.items: list[int] = []
        self.task: list[str] = []
        self.engine: list[str] = []
        self.kind: list[str] = []

    def __call__(self, task: Task, worker: int, device: str, engine: str, start: float, end: float) -> None:
        self.worker.append(worker)
        self.device.append(device)
        self.iteration.append(task.iteration)
        self.phase.append(task.phase)
        self.start.append(start)
        self.end.append(end)
        self.bytes.append(task.bytes if task.kind != "compute" else 0)
        self.items.append(task.items)
        self.task.append(task.id)
        self.engine.append(engine)
        self.kind.append(task.kind)

    def __len__(self) -> int:
        return len(self.start)

    def to_frame(self) -> pd.DataFrame:
        """The rows in the order tasks ended, as a validated trace."""
        n = len(self.start)
        df = pd.DataFrame(
            {
                "run_id": [self.run_id] * n,
                "worker": np.asarray(self.worker, dtype=np.int64),
                "device": self.device,
                "iteration": np.asarray(self.iteration, dtype=np.int64),
                "phase": self.phase,
                "start": np.asarray(self.start, dtype=np.float64),
                "end": np.asarray(self.end, dtype=np.float64),
                "bytes": np.asarray(self.bytes, dtype=np.int64),
                "items": np.asarray(self.items, dtype=np.int64),
                "task": self.task,
                "engine": self.engine,
                "executor": ["sim"] * n,
                "kind": self.kind,
            }
        )
        return make_trace(df)
