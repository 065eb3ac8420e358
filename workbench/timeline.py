"""Chrome trace-event JSON from a trace table, for Perfetto or chrome://tracing.

Reads only the trace schema (``workbench.trace``), so simulated and real traces look
alike. One process per worker, one thread per (device, engine) of that worker: a
worker's compute stream, copy engines and collectives each get a row. Events are
complete events (``"ph": "X"``) with microsecond ``ts`` and ``dur``; their name is
the plan task id when the trace has one, else the phase; ``args`` carry phase,
iteration, bytes, items and ``queued_us``, the time it waited between being ready
and starting (queueing for an engine or a CPU core).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.trace import validate_trace


def chrome_trace_events(trace: pd.DataFrame) -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object (``{"traceEvents": [...]}``)."""
    df = validate_trace(trace)
    engine = df["engine"] if "engine" in df.columns else df["phase"]
    name = df["task"] if "task" in df.columns else df["phase"]
    rows = sorted(set(zip(df["worker"].tolist(), df["device"].tolist(), engine.tolist(), strict=True)))
    tid_of: dict[tuple[int, str, str], int] = {}
    events: list[dict[str, Any]] = []
    for worker in sorted({w for w, _, _ in rows}):
        events.append(
            {"ph": "M", "name": "process_name", "pid": worker, "tid": 0, "args": {"name": f"worker {worker}"}}
        )
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": worker, "tid": 0, "args": {"sort_index": worker}}
        )
    for w, device, eng in rows:
        tid = len(tid_of) + 1
        tid_of[(w, device, eng)] = tid
        events.append(
            {"ph": "M", "name": "thread_name", "pid": w, "tid": tid, "args": {"name": f"{device} {eng}"}}
        )
        events.append(
            {"ph": "M", "name": "thread_sort_index", "pid": w, "tid": tid, "args": {"sort_index": tid}}
        )
    order = df.assign(timeline_engine=engine.to_numpy(), timeline_name=name.to_numpy()).sort_values(
        ["start", "end", "worker", "device", "timeline_engine"], kind="stable"
    )
    for r in order.itertuples(index=False):
        events.append(
            {
                "ph": "X",
                "name": str(r.timeline_name),
                "cat": str(r.phase),
                "pid": int(r.worker),
                "tid": tid_of[(int(r.worker), str(r.device), str(r.timeline_engine))],
                "ts": float(r.start) * 1e6,
                "dur": (float(r.end) - float(r.start)) * 1e6,
                "args": {
                    "phase": str(r.phase),
                    "iteration": int(r.iteration),
                    "bytes": int(r.bytes),
                    "items": int(r.items),
                    "queued_us": (float(r.start) - float(r.ready)) * 1e6,
                    "run_id": str(r.run_id),
                },
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(trace: pd.DataFrame, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(chrome_trace_events(trace)))
    return p
