"""The trace table both executors write, and calibration, studies and reports read.

One row per timed activity::

    run_id    str    which run (a configuration hash or a name)
    worker    int    worker (rank) that issued the activity
    device    str    where it ran: a GPU or host node (``m0.gpu0``), or a link route for a transfer's source
    iteration int    training iteration (minibatch step or epoch)
    phase     str    sample, gather_local, gather_remote, h2d, d2h, forward, backward, allreduce, migrate, ...
    start     float  seconds since the run's start
    end       float  seconds since the run's start (>= start)
    bytes     int    bytes moved (0 for compute)
    items     int    vertices or edges processed or carried

Optional columns: ``task`` (plan task id), ``engine`` (``compute``, ``h2d``, ``d2h``,
``link``, ... for timeline rows), ``executor`` (``sim`` or ``real``), ``kind``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import TraceFormatError

REQUIRED_COLUMNS: dict[str, str] = {
    "run_id": "string",
    "worker": "int64",
    "device": "string",
    "iteration": "int64",
    "phase": "string",
    "start": "float64",
    "end": "float64",
    "bytes": "int64",
    "items": "int64",
}
OPTIONAL_COLUMNS: dict[str, str] = {
    "task": "string",
    "engine": "string",
    "executor": "string",
    "kind": "string",
}


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
    if (out["end"] < out["start"]).any():
        row = int(np.flatnonzero((out["end"] < out["start"]).to_numpy())[0])
        raise TraceFormatError(f"{source}: column 'end' is before 'start' in row {row}")
    extra = [c for c in df.columns if c not in out.columns]
    for c in extra:  # keep user columns, after the schema's
        out[c] = df[c]
    return out.reset_index(drop=True)


def write_trace(df: pd.DataFrame, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    validate_trace(df, str(p)).to_parquet(p, index=False)
    return p


def read_trace(path: str | Path) -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(f"{p}: no such trace file")
    try:
        df = pd.read_parquet(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise TraceFormatError(f"{p}: not a Parquet trace ({type(exc).__name__})") from None
    return validate_trace(df, str(p))


def phase_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per phase: count, total busy seconds, bytes, and the span from first start to last end."""
    if df.empty:
        return pd.DataFrame(columns=["phase", "count", "busy_s", "span_s", "bytes"])
    g = df.assign(dur=df["end"] - df["start"]).groupby("phase", sort=True)
    out = pd.DataFrame(
        {
            "count": g.size(),
            "busy_s": g["dur"].sum(),
            "span_s": g["end"].max() - g["start"].min(),
            "bytes": g["bytes"].sum(),
        }
    ).reset_index()
    return out


def makespan(df: pd.DataFrame) -> float:
    return float(df["end"].max() - min(0.0, float(df["start"].min()))) if len(df) else 0.0
