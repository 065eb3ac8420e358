"""The trace table both executors write, and calibration, studies and reports read.

One row per timed activity::

    run_id       str    which run (a configuration hash or a name)
    worker       int    the worker that owns the activity: the task's ``worker``; for a
                        collective, one row per device, each owned by the worker that
                        drives that device (``Plan.workers``, by default a GPU's global rank)
    device       str    where it ran: a compute's device; a transfer's destination GPU,
                        else its source (a copy to host shows on its GPU); a collective's device
    iteration    int    training iteration (minibatch step or epoch)
    phase        str    sample, gather_local, gather_remote, h2d, d2h, forward, backward, allreduce, migrate, ...
    ready        float  seconds since the run's start when its inputs were ready (dependencies done)
    start        float  when it started: ``start - ready`` is time spent queueing for an engine
    end          float  when it ended (>= start >= ready)
    bytes        int    bytes this row's device actually sent: 0 for compute and for a copy
                        within one memory; a transfer's bytes; for a collective over n devices
                        of buffer B, the ring's share: all-reduce 2(n-1)/n B, reduce-scatter,
                        all-gather and all-to-all (n-1)/n B, broadcast B for every device of
                        the chain but the last (0); integer division, as whole bytes
    items        int    vertices or edges processed or carried

Optional columns (both executors write them all through :func:`build_trace`)::

    task         str    plan task id
    kind         str    compute, transfer or collective
    engine       str    compute, cpu, h2d, d2h, d2d (GPU to GPU in one machine), net, collective
    executor     str    sim or real
    src, dst     str    a transfer's source and destination memories ("" otherwise): for link calibration
    layer        int    the GNN layer a compute computes (-1 when none): for per-layer cost models
    buffer_bytes int    a transfer's or collective's buffer size (``Task.bytes``), 0 for compute

One function, :func:`build_trace`, turns a plan's tasks plus the timed rows an
executor measured (:class:`TraceRows`) into this table; the simulator calls it, and
the real executor calls the same one, so a column means the same in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.errors import TraceFormatError
from workbench.plan import Task

REQUIRED_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "worker": "int64",
    "device": "string",
    "iteration": "int64",
    "phase": "string",
    "ready": "float64",
    "start": "float64",
    "end": "float64",
    "bytes": "int64",
    "items": "int64",
}
OPTIONAL_COLUMNS: dict[str, str] = {
    "task": "string",
    "kind": "string",
    "engine": "string",
    "executor": "string",
    "src": "string",
    "dst": "string",
    "layer": "int64",
    "buffer_bytes": "int64",
}
EXECUTORS = ("sim", "real")


@dataclass
class TraceRows:
    """Timed rows an executor measured, the input of :func:`build_trace`; one entry per row.

    A compute or transfer has one row; a collective one row per device it ran on.
    """

    task: Sequence[int]  # the row's task, as its position in the plan's task list
    device: Sequence[str]  # where the row's work ran (see the ``device`` column)
    engine: Sequence[str]
    ready: Sequence[float]
    start: Sequence[float]
    end: Sequence[float]


def collective_bytes_sent(op: str, n: int, rank: int, nbytes: int) -> int:
    """Bytes device ``rank`` of an ``n``-device ring collective on a ``nbytes`` buffer sends."""
    if n < 2:
        return 0
    if op == "allreduce":
        return 2 * (n - 1) * nbytes // n
    if op == "broadcast":  # a chain from rank 0: every device forwards it but the last
        return nbytes if rank < n - 1 else 0
    return (n - 1) * nbytes // n  # reducescatter, allgather, alltoall


@dataclass
class TaskTable:
    """The per-task half of the trace, read from a plan's tasks once (:func:`task_table`).

    A plan simulated several times (under other hardware or seeds) builds it once; each
    trace then only indexes it by its rows' tasks.
    """

    n: int
    kind_uniques: list[str]
    kind_codes: np.ndarray
    phase_uniques: list[str]
    phase_codes: np.ndarray
    src_uniques: list[str]
    src_codes: np.ndarray
    dst_uniques: list[str]
    dst_codes: np.ndarray
    worker: np.ndarray
    iteration: np.ndarray
    items: np.ndarray
    sent: np.ndarray  # bytes a task's row sends (a collective's rows: per device, see build_trace)
    buffer: np.ndarray
    layer: np.ndarray
    ids: pa.Array
    collectives: dict[int, tuple[str, list[str], int]]  # task index -> (op, devices, bytes)


_TABLE_FIELDS = ("id", "kind", "phase", "worker", "iteration", "bytes", "items", "src", "dst", "layer")


def task_table(tasks: Sequence[Task], fields: Mapping[str, Sequence[Any]] | None = None) -> TaskTable:
    """The per-task trace columns of ``tasks``. ``fields``: per task (plan order) any of
    ``id``, ``kind``, ``phase``, ``worker``, ``iteration``, ``bytes``, ``items``, ``src``,
    ``dst``, ``layer`` the caller has read already; the rest are read here in one pass."""
    per_task = dict(fields or {})
    missing = [name for name in _TABLE_FIELDS if name not in per_task]
    # One attribute pass per task object for every missing field, then split into columns.
    # ("id" twice keeps attrgetter's answer a tuple when one field is missing.)
    if missing:
        read = (
            zip(*map(attrgetter(*missing, "id"), tasks), strict=True) if tasks else [[]] * (len(missing) + 1)
        )
        per_task.update(zip(missing, map(list, read), strict=False))
    n = len(tasks)
    kinds = per_task["kind"]
    kind_uniques, kind_codes = _codes(kinds)
    is_transfer = (
        kind_codes == kind_uniques.index("transfer") if "transfer" in kind_uniques else np.zeros(n, bool)
    )
    is_compute = (
        kind_codes == kind_uniques.index("compute") if "compute" in kind_uniques else np.zeros(n, bool)
    )
    buffer = np.fromiter(per_task["bytes"], dtype=np.int64, count=n)
    sent = buffer.copy()
    # A transfer's ends (and a copy within one memory sends nothing); "" for other kinds.
    src_uniques, src_codes = _codes_where(per_task["src"], is_transfer)
    dst_uniques, dst_codes = _codes_where(per_task["dst"], is_transfer)
    # src == dst compared per distinct value: each dst value's code among the src values (-1: none).
    src_index = {u: k for k, u in enumerate(src_uniques)}
    dst_as_src = np.array([src_index.get(u, -1) for u in dst_uniques], dtype=np.int64)
    same = src_codes == dst_as_src[dst_codes] if n else np.zeros(0, bool)
    sent[is_transfer & same] = 0
    sent[is_compute] = 0
    buffer[is_compute] = 0
    # A compute's layer; -1 where it names none, and for other kinds.
    layers = np.empty(n, dtype=object)
    layers[:] = per_task["layer"]
    named = is_compute & ~np.equal(layers, None)
    layer = np.full(n, -1, dtype=np.int64)
    layer[named] = layers[named].astype(np.int64)
    collectives = (
        {
            i: (tasks[i].op or "", tasks[i].devices, tasks[i].bytes)
            for i in np.flatnonzero(kind_codes == kind_uniques.index("collective")).tolist()
        }
        if "collective" in kind_uniques
        else {}
    )
    phase_uniques, phase_codes = _codes(per_task["phase"])
    return TaskTable(
        n=n,
        kind_uniques=kind_uniques,
        kind_codes=kind_codes,
        phase_uniques=phase_uniques,
        phase_codes=phase_codes,
        src_uniques=src_uniques,
        src_codes=src_codes,
        dst_uniques=dst_uniques,
        dst_codes=dst_codes,
        worker=np.fromiter(per_task["worker"], dtype=np.int64, count=n),
        iteration=np.fromiter(per_task["iteration"], dtype=np.int64, count=n),
        items=np.fromiter(per_task["items"], dtype=np.int64, count=n),
        sent=sent,
        buffer=buffer,
        layer=layer,
        ids=pa.array(per_task["id"], type=pa.large_string()),
        collectives=collectives,
    )


def build_trace(
    tasks: Sequence[Task],
    rows: TraceRows,
    run_id: str,
    executor: str,
    device_workers: Mapping[str, int],
    fields: Mapping[str, Sequence[Any]] | None = None,
    table: TaskTable | None = None,
) -> pd.DataFrame:
    """The trace table of ``rows`` measured while running ``tasks``.

    ``device_workers``: which worker drives each device (a collective row's worker).
    ``fields``: per task (in plan order) fields the caller has read already (see
    :func:`task_table`); ``table``: the tasks' :class:`TaskTable`, when the caller keeps one.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if table is None:
        table = task_table(tasks, fields)
    row_task = np.asarray(rows.task, dtype=np.int64)
    n = len(row_task)
    worker = table.worker[row_task]
    row_sent = table.sent[row_task]
    device_uniques, device_codes = _codes(list(rows.device))
    if table.collectives:
        _collective_rows(
            tasks, table, row_task, device_uniques, device_codes, device_workers, worker, row_sent
        )
    engine_uniques, engine_codes = _codes(list(rows.engine))
    frame = pd.DataFrame(
        {
            "run_id": _repeated([run_id], np.zeros(n, dtype=np.int32)),
            "worker": worker,
            "device": _repeated(device_uniques, device_codes),
            "iteration": table.iteration[row_task],
            "phase": _repeated(table.phase_uniques, table.phase_codes[row_task]),
            "ready": np.asarray(rows.ready, dtype=np.float64),
            "start": np.asarray(rows.start, dtype=np.float64),
            "end": np.asarray(rows.end, dtype=np.float64),
            "bytes": row_sent,
            "items": table.items[row_task],
            "task": table.ids.take(pa.array(row_task)).to_pandas(),
            "kind": _repeated(table.kind_uniques, table.kind_codes[row_task]),
            "engine": _repeated(engine_uniques, engine_codes),
            "executor": _repeated([executor], np.zeros(n, dtype=np.int32)),
            "src": _repeated(table.src_uniques, table.src_codes[row_task]),
            "dst": _repeated(table.dst_uniques, table.dst_codes[row_task]),
            "layer": table.layer[row_task],
            "buffer_bytes": table.buffer[row_task],
        }
    )
    return validate_trace(frame)


def _collective_rows(
    tasks: Sequence[Task],
    table: TaskTable,
    row_task: np.ndarray,
    device_uniques: list[str],
    device_codes: np.ndarray,
    device_workers: Mapping[str, int],
    worker: np.ndarray,
    row_sent: np.ndarray,
) -> None:
    """Set each collective row's worker (the one driving its device) and bytes (its rank's
    share, :func:`collective_bytes_sent`), in place, from a table per distinct collective
    (op, devices, bytes) and device: the work is per distinct collective, not per row."""
    rows = np.flatnonzero(table.kind_codes[row_task] == table.kind_uniques.index("collective"))
    if not len(rows):
        return
    shape_of: dict[tuple[str, tuple[str, ...], int], int] = {}
    task_shape = np.full(table.n, -1, dtype=np.int64)
    for i, (op, devices, nbytes) in table.collectives.items():
        task_shape[i] = shape_of.setdefault((op, tuple(devices), nbytes), len(shape_of))
    device_index = {d: k for k, d in enumerate(device_uniques)}
    shares = np.full((len(shape_of), len(device_uniques)), -1, dtype=np.int64)
    for (op, devices, nbytes), k in shape_of.items():
        for rank, d in enumerate(devices):
            if d in device_index:
                shares[k, device_index[d]] = collective_bytes_sent(op, len(devices), rank, nbytes)
    codes = device_codes[rows]
    sent = shares[task_shape[row_task[rows]], codes]
    workers = np.array([device_workers.get(d, -1) for d in device_uniques], dtype=np.int64)
    driven = workers[codes]
    bad = (sent < 0) | (driven < 0)
    if bad.any():  # the first bad row: no worker drives its device, or its collective does not name it
        r = int(rows[np.flatnonzero(bad)[0]])
        device = device_uniques[device_codes[r]]
        if device not in device_workers:
            raise ValueError(f"task {tasks[row_task[r]].id!r}: no worker drives device {device!r}")
        raise ValueError(f"{device!r} is not in list")
    worker[rows] = driven
    row_sent[rows] = sent


def _codes(values: Sequence[Any]) -> tuple[list, np.ndarray]:
    """Distinct values in order of first appearance, and each value's position among them."""
    uniques = list(dict.fromkeys(values))
    index = {u: i for i, u in enumerate(uniques)}
    return uniques, np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))


def _codes_where(values: Sequence[Any], keep: np.ndarray) -> tuple[list, np.ndarray]:
    """:func:`_codes` of ``values`` where ``keep``, and of "" elsewhere.

    The codes of every value, then "" put in where not kept and the distinct values no
    kept row uses dropped (a transfer's ends among a column that is None for other tasks):
    the table's values are the same, in any order of the distinct values.
    """
    uniques, codes = _codes(values)
    if keep.all():
        return uniques, codes
    uniques.append("")
    codes[~keep] = len(uniques) - 1
    used = np.flatnonzero(np.bincount(codes, minlength=len(uniques)))
    renumber = np.zeros(len(uniques), dtype=np.int32)
    renumber[used] = np.arange(len(used), dtype=np.int32)
    return [uniques[k] for k in used.tolist()], renumber[codes]


def _few_strings(values: Sequence[str]) -> pd.Series:
    """A string column with few distinct values, built from codes (pandas' per-item string
    conversion of 100,000 values costs tens of milliseconds a column)."""
    uniques, codes = _codes(values)
    return _repeated(uniques, codes)


def _repeated(uniques: list[str], codes: np.ndarray) -> pd.Series:
    return pa.array(uniques, type=pa.large_string()).take(pa.array(codes)).to_pandas()


def make_trace(records: Iterable[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """A validated trace with the schema's column order and dtypes."""
    df = records.copy() if isinstance(records, pd.DataFrame) else pd.DataFrame.from_records(list(records))
    if df.empty and not len(df.columns):
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in REQUIRED_COLUMNS.items()})
    return validate_trace(df)


def validate_trace(df: pd.DataFrame, source: str = "trace") -> pd.DataFrame:
    """Check the schema and return the table with canonical dtypes.

    Raises :class:`TraceFormatError` naming the first bad column.
    """
    for col in REQUIRED_COLUMNS:
        if col not in df.columns:
            raise TraceFormatError(
                f"{source}: missing column {col!r} (required: {', '.join(REQUIRED_COLUMNS)})"
            )
    out = pd.DataFrame(index=df.index)
    for col, dtype in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items():
        if col not in df.columns:
            continue
        s = df[col]
        try:
            if dtype == "string":
                if s.isna().any():
                    raise ValueError("has missing values")
                out[col] = s.astype(str)
            elif dtype == "int64":
                if not (pd.api.types.is_integer_dtype(s) or pd.api.types.is_bool_dtype(s)):
                    v = pd.to_numeric(s, errors="raise")
                    if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
                        raise ValueError("holds non-integer values")
                    s = v
                out[col] = s.astype(np.int64)
            else:
                v = pd.to_numeric(s, errors="raise").astype(np.float64)
                if not np.all(np.isfinite(v)):
                    raise ValueError("holds NaN or infinite values")
                out[col] = v
        except (ValueError, TypeError) as exc:
            raise TraceFormatError(f"{source}: column {col!r} should be {dtype}: {exc}") from None
    for col in ("bytes", "items"):
        if (out[col] < 0).any():
            raise TraceFormatError(f"{source}: column {col!r} has negative values")
    for early, late in (("ready", "start"), ("start", "end")):
        if (out[late] < out[early]).any():
            row = int(np.flatnonzero((out[late] < out[early]).to_numpy())[0])
            raise TraceFormatError(f"{source}: column {late!r} is before {early!r} in row {row}")
    extra = [c for c in df.columns if c not in out.columns]
    for c in extra:  # keep user columns, after the schema's
        out[c] = df[c]
    return out.reset_index(drop=True)


# The name of the trace in a run's folder (gnnwb sim CONFIG.toml, gnnwb realrun, microbench).
TRACE_FILE = "trace.parquet"


def write_trace(df: pd.DataFrame, path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        raise TraceFormatError(f"{p}: is a folder, expected a trace file to write")
    p.parent.mkdir(parents=True, exist_ok=True)
    validate_trace(df, str(p)).to_parquet(p, index=False)
    return p


def read_trace(path: str | Path) -> pd.DataFrame:
    """The validated trace in a Parquet file, or in the ``trace.parquet`` of a run's folder."""
    p = Path(path)
    if p.is_dir():
        if not (p / TRACE_FILE).is_file():
            raise TraceFormatError(f"{p}: is a folder with no {TRACE_FILE} in it, expected a trace file")
        p = p / TRACE_FILE
    if not p.exists():
        raise TraceFormatError(f"{p}: no such trace file")
    try:
        df = pd.read_parquet(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise TraceFormatError(f"{p}: not a Parquet trace ({type(exc).__name__})") from None
    return validate_trace(df, str(p))


def phase_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per phase: count, total busy seconds, total seconds queued (ready to start), bytes,
    and the span from first start to last end."""
    columns = ["phase", "count", "busy_s", "queued_s", "span_s", "bytes"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    g = df.assign(dur=df["end"] - df["start"], queued=df["start"] - df["ready"]).groupby("phase", sort=True)
    out = pd.DataFrame(
        {
            "count": g.size(),
            "busy_s": g["dur"].sum(),
            "queued_s": g["queued"].sum(),
            "span_s": g["end"].max() - g["start"].min(),
            "bytes": g["bytes"].sum(),
        }
    ).reset_index()
    return out[columns]


def phase_table(df: pd.DataFrame) -> list[str]:
    """:func:`phase_summary` as aligned text lines (milliseconds), for the command line."""
    summary = phase_summary(df)
    if not len(summary):
        return []
    lines = [
        f"{'phase':<14} {'count':>7} {'busy (ms)':>12} {'queued (ms)':>12} {'span (ms)':>12} {'bytes':>14}"
    ]
    for row in summary.itertuples(index=False):
        lines.append(
            f"{row.phase:<14} {row.count:>7} {row.busy_s * 1e3:>12.4f} {row.queued_s * 1e3:>12.4f} "
            f"{row.span_s * 1e3:>12.4f} {row.bytes:>14,}"
        )
    return lines


def makespan(df: pd.DataFrame) -> float:
    return float(df["end"].max() - min(0.0, float(df["start"].min()))) if len(df) else 0.0
