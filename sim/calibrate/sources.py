"""Traces in: reading them, the hardware each was measured on, and compute tasks' features.

A calibration source is one trace table (``workbench.trace`` schema) with what
calibration needs beside it:

* **Compute features.** The trace schema has no column for a compute task's cost
  features, so they come, in this order, from: columns ``feature_flops``,
  ``feature_bytes``, ``feature_edges``, ``feature_vertices`` in the trace itself (a
  missing one is 0; microbenchmarks can write them); a ``plan.json`` beside the trace
  (joined on the ``task`` column): the plan that ran, which ``gnnwb realrun`` and the
  microbenchmarks save; only without one, a ``config.toml`` beside it (a run folder written
  by ``gnnwb sim CONFIG``, or by a ``gnnwb realrun`` from before run folders kept their
  plan): the plan is rebuilt through the spine, with ``workers`` from the ``run.json``
  beside it when there is one. Compute rows with none of these are left out of the fit,
  and the profile says how many.
* **Hardware identity**, to refuse traces of different hardware mixed in one call: a
  ``hardware`` column in the trace (one value per trace); else the metadata beside it:
  ``run.json`` of a real run or ``config.json`` of a microbenchmark run (``"cpu on
  <host>"``, ``"cuda: <GPU name> on <host>"``: the device and the machine), or for a simulated
  trace (``executor`` all ``sim``) ``"simulated: <hardware name>"`` from its
  ``config.toml``. A trace none of these describe has an unknown identity and
  conflicts with none.
* **The modelled hardware** the trace's node names refer to (``config.toml``'s
  ``[hardware] name``), the default for ``--hardware``.
* **The machine's load** while the trace was taken: ``load.json`` beside it, which every real
  run writes (``load_before`` and ``load_after``: the 1-minute load average just before and
  after the run; ``cpus``). Microbenchmark folders and real runs from before have none; their
  load is unknown.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.plan import PHASES

FEATURES = ("flops", "bytes", "edges", "vertices")
FEATURE_PREFIX = "feature_"


class CalibrationError(WorkbenchError):
    """Traces calibration cannot use: empty, unknown phases, mixed hardware, too few rows to fit."""


@dataclass(frozen=True)
class MachineLoad:
    """The machine's 1-minute load average sampled around a trace's run, its CPU count, and the share
    of its CPU time other processes took while the run's workers ran (None where not recorded:
    before it was, or off Linux; :mod:`realrun.machine_cpu`)."""

    samples: tuple[float, ...]  # at least one
    cpus: int | None = None
    others_cpu: float | None = None

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def max(self) -> float:
        return max(self.samples)


# The samples of load.json (realrun.launcher.write_load writes them), in time order.
LOAD_SAMPLES = ("load_before", "load_after")
# A real run's first epoch is cold (its minibatches' schedules built, kernels compiled, caches and
# buffers first touched): calibration leaves it out by default, and the fidelity experiment and
# gnnwb validate measure the epochs after it (studies.fidelity_experiment.first_warm).
REAL_COLD_EPOCHS = 1


@dataclass
class TraceSource:
    """One trace and what calibration knows about it."""

    name: str  # its path (or a label): every message about it uses this
    trace: pd.DataFrame
    features: pd.DataFrame | None = None  # per row: FEATURES (NaN where unknown); None: none known
    hardware: str | None = None  # identity of the hardware it was measured on (None: unknown)
    hardware_name: str | None = None  # the modelled cluster its node names refer to
    hardware_machines: int | None = None
    sha256: str | None = None
    notes: list[str] = field(default_factory=list)
    load: MachineLoad | None = None  # None: not recorded (no load.json beside the trace)

    def __post_init__(self) -> None:
        if self.features is None:
            self.features = features_from_columns(self.trace)
        check_trace(self)


def check_trace(source: TraceSource) -> None:
    """Empty traces and phases calibration does not know are errors naming the trace."""
    df = source.trace
    if not len(df):
        raise CalibrationError(f"{source.name}: empty trace (no rows): nothing to calibrate from")
    unknown = sorted(set(df["phase"].unique()) - set(PHASES))
    if unknown:
        raise CalibrationError(
            f"{source.name}: phase {unknown[0]!r} is not one calibration knows"
            f"{f' (nor {len(unknown) - 1} other)' if len(unknown) > 1 else ''}; known: {', '.join(PHASES)}"
        )
    if "hardware" in df.columns:
        names = sorted(set(df["hardware"].astype(str)))
        if len(names) > 1:
            raise CalibrationError(
                f"{source.name}: rows from different hardware in one trace ({', '.join(names)}); "
                "split it, or pass --mixed-hardware to fit them together"
            )


def features_from_columns(df: pd.DataFrame) -> pd.DataFrame | None:
    cols = [FEATURE_PREFIX + f for f in FEATURES]
    if not any(c in df.columns for c in cols):
        return None
    return pd.DataFrame(
        {
            f: pd.to_numeric(df[c], errors="coerce") if c in df.columns else 0.0
            for f, c in zip(FEATURES, cols, strict=True)
        },
        index=df.index,
    ).fillna(0.0)


def features_from_plan(trace: pd.DataFrame, plan: Any, name: str) -> pd.DataFrame:
    """Each row's compute features from the plan task it names (``task`` column); NaN for others."""
    if "task" not in trace.columns:
        raise CalibrationError(f"{name}: no 'task' column to join the plan's features on")
    by_id = {t.id: t for t in plan.tasks}
    out = np.full((len(trace), len(FEATURES)), np.nan)
    compute = (
        (trace["kind"] == "compute").to_numpy() if "kind" in trace.columns else np.ones(len(trace), bool)
    )
    tasks = trace["task"].to_numpy()
    for i in np.flatnonzero(compute).tolist():
        t = by_id.get(tasks[i])
        if t is None:
            raise CalibrationError(
                f"{name}: row {i} names task {tasks[i]!r}, which the run's plan does not have"
            )
        out[i] = [float(t.features.get(f, 0.0)) for f in FEATURES]
    return pd.DataFrame(out, columns=list(FEATURES), index=trace.index)


def skip_epochs(source: TraceSource, skip: int | None) -> tuple[TraceSource, str]:
    """``source`` less its first ``skip`` epochs, and a line saying what was kept. ``skip`` None:
    a real run's first epoch is left out (it is cold: the first minibatches, schedules built,
    caches filled), a simulated trace keeps every epoch. A trace without epochs is kept whole."""
    trace = source.trace
    if "epoch" not in trace.columns or not len(trace):
        return source, f"{source.name}: no epochs to choose from, every row fitted"
    real = "executor" in trace.columns and bool((trace["executor"] == "real").any())
    n = (REAL_COLD_EPOCHS if real else 0) if skip is None else skip
    epochs = sorted(int(e) for e in trace["epoch"].unique())
    kept = [e for e in epochs if e >= epochs[0] + n]
    how = (
        "by default for a real run's trace, its first epoch is cold" if skip is None else f"--skip-epochs {n}"
    )
    if not kept:
        raise CalibrationError(
            f"{source.name}: only cold epochs ({len(epochs)} epoch(s), {n} left out {how}): run more epochs, "
            "or pass --skip-epochs 0"
        )
    if len(kept) == len(epochs):
        return source, f"{source.name}: every epoch fitted ({len(epochs)})"
    mask = trace["epoch"].isin(kept)
    features = source.features[mask.to_numpy()] if source.features is not None else None
    trimmed = replace(source, trace=trace[mask], features=features)
    return (
        trimmed,
        f"{source.name}: epochs {kept[0]}-{kept[-1]} fitted, {len(epochs) - len(kept)} left out ({how})",
    )


def expand(paths: list[str]) -> list[Path]:
    """Trace files: each path itself, or every ``trace.parquet`` under a folder (sorted)."""
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            found = sorted(p.rglob("trace.parquet"))
            if not found:
                raise CalibrationError(f"{p}: no trace.parquet under this folder")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise CalibrationError(f"{p}: no such trace file or folder")
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]  # type: ignore[func-returns-value]


def read_source(path: Path, *, rebuild_plans: bool = True) -> TraceSource:
    """A trace file and the metadata beside it (see the module docstring)."""
    from workbench.trace import read_trace

    trace = read_trace(path)
    name = str(path)
    folder = path.parent
    meta = _json(folder / "run.json") or {}
    bench = _json(folder / "config.json") or {}
    config = None
    if (folder / "config.toml").exists():
        from workbench.config import load_config

        config = load_config(folder / "config.toml", check_strategies=False)
    hardware_name = config.hardware.name if config is not None else None
    machines = config.hardware.machines if config is not None else None
    identity = _identity(trace, meta, bench, hardware_name)
    source = TraceSource(
        name, trace, None, identity, hardware_name, machines, hashlib.sha256(path.read_bytes()).hexdigest()
    )
    source.load = read_load(folder)
    compute = int((trace["kind"] == "compute").sum()) if "kind" in trace.columns else 0
    if source.features is None and compute:
        plan = run_plan(folder, meta, config is not None and rebuild_plans)
        if plan is not None:
            source.features = features_from_plan(trace, plan, name)
    return source


def run_plan(folder: Path, meta: dict[str, Any] | None = None, rebuild: bool = True) -> Any:
    """The plan of the run in ``folder``: its ``plan.json`` (the plan that ran) when there is one,
    never rebuilt then; else, when ``rebuild`` and a ``config.toml`` is there, the plan rebuilt from
    it (:func:`_rebuild_plan`); else None."""
    if (folder / "plan.json").exists():
        from workbench.plan import Plan

        return Plan.load(folder / "plan.json")
    if rebuild and (folder / "config.toml").exists():
        # Kept for folders written before runs saved their plan (and for gnnwb sim's, which save
        # only the configuration): the plan rebuilt from the configuration beside the trace. It is
        # the plan that ran only as far as that configuration is the one executed (an old real
        # run's config.toml is the configuration as given, before the executor's parameters).
        return _rebuild_plan(folder, meta if meta is not None else _json(folder / "run.json") or {})
    return None


def _rebuild_plan(folder: Path, meta: dict[str, Any]) -> Any:
    """The plan of the run in ``folder``: its config.toml through the spine, with run.json's workers."""
    import dataclasses

    from workbench.config import load_config
    from workbench.run import prepare_run

    config = load_config(folder / "config.toml")
    workers = meta.get("workers")
    if isinstance(workers, int) and workers > 0:
        config = dataclasses.replace(config, training=dataclasses.replace(config.training, workers=workers))
    prepared = prepare_run(config)
    if prepared.scheme.plans_per_iteration:
        raise CalibrationError(
            f"{folder}: scheme {prepared.scheme.registered_name!r} plans each iteration as it learns; its "
            "features cannot be rebuilt from config.toml: save the plan as plan.json beside the trace"
        )
    return prepared.plan()


def read_load(folder: Path) -> MachineLoad | None:
    """The load recorded in ``folder``'s ``load.json``; None without one or without a usable sample.
    A file that is not JSON is an error, as any metadata beside the trace; a sample that is not a
    load average is skipped, for the load only informs a warning and the provenance."""
    data = _json(folder / "load.json")
    if data is None:
        return None
    samples = tuple(float(data[k]) for k in LOAD_SAMPLES if _load_number(data.get(k)))
    if not samples:
        return None
    cpus = data.get("cpus")
    others = data.get("others_cpu")
    return MachineLoad(
        samples,
        int(cpus) if _load_number(cpus) and cpus == int(cpus) and cpus > 0 else None,
        float(others) if _load_number(others) and others <= 1 else None,
    )


def _load_number(value: Any) -> bool:
    """A finite number >= 0 (JSON's true and false are not)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def _json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: not readable JSON ({exc})") from None
    return data if isinstance(data, dict) else None


def _identity(
    trace: pd.DataFrame, run: dict[str, Any], bench: dict[str, Any], hardware_name: str | None
) -> str | None:
    """``"<device>[: <GPU name>] on <host>"`` from a real run's or a microbenchmark's metadata."""
    if "hardware" in trace.columns and len(trace):
        return str(trace["hardware"].iloc[0])
    if run.get("device"):
        device = str(run["device"])
        name = f": {run['device_name']}" if device == "cuda" and run.get("device_name") else ""
        hosts = run.get("hosts") or ["unknown host"]
        return f"{device}{name} on {','.join(map(str, hosts))}"
    env = bench.get("environment")
    if isinstance(env, dict):
        device = str((bench.get("config") or {}).get("device", "cpu"))
        gpus = env.get("gpus") or []
        name = f": {gpus[0]}" if device == "cuda" and gpus else ""
        return f"{device}{name} on {env.get('hostname', 'unknown host')}"
    if "executor" in trace.columns and (trace["executor"] == "sim").all():
        return f"simulated: {hardware_name}" if hardware_name else "simulated"
    return None


def check_same_hardware(sources: list[TraceSource], allow_mixed: bool) -> None:
    """Refuse traces of different hardware in one call unless ``allow_mixed``."""
    if allow_mixed:
        return
    first: dict[str, str] = {}
    for s in sources:
        if s.hardware is not None:
            first.setdefault(s.hardware, s.name)
    if len(first) > 1:
        (a, na), (b, nb) = list(first.items())[:2]
        raise CalibrationError(
            f"traces from different hardware: {na} ({a}) and {nb} ({b}); calibrate each hardware "
            "separately, or pass --mixed-hardware to fit them together"
        )


def attribute_gaps(trace: pd.DataFrame) -> pd.DataFrame:
    """The trace with each row's ``start`` moved back over the idle gap before it on the worker that
    timed it.

    In a real run whose workers do one thing at a time (a Python process on a CPU), the time
    between one timed activity's end and the next one's start is the host's overhead of
    starting the next (dispatch, bookkeeping); the simulator has no such gaps, so calibration
    can attribute each to the activity that follows it (``gnnwb calibrate --attribute-gaps``):
    a row then starts at the later of its ``ready`` and its worker's previous end. Rows that
    overlapped an earlier one of their worker keep their start.

    The worker is the one whose clock timed the row (:func:`timing_worker`): for a transfer, the
    worker its bytes arrive at, which is not always the task's owner. A migration is the
    sender's task but its receiver times it; on the sender's timeline its row would reach back
    over the sender's idle time while the receiver was still busy, a wait counted as transfer.
    """
    out = trace.copy()
    timed_by = pd.Series(timing_worker(out), index=out.index)
    for _, rows in out.groupby([out["run_id"], timed_by], sort=False):
        order = rows.sort_values(["start", "end"], kind="stable")
        start = order["start"].to_numpy()
        prev_end = np.concatenate([[-np.inf], np.maximum.accumulate(order["end"].to_numpy())[:-1]])
        earlier = np.maximum(order["ready"].to_numpy(), prev_end)
        out.loc[order.index, "start"] = np.where(prev_end <= start, np.minimum(earlier, start), start)
    out["ready"] = np.minimum(out["ready"], out["start"])
    return out


def timing_worker(trace: pd.DataFrame) -> np.ndarray:
    """Per row of ``trace``, the worker whose clock timed it. A compute or a collective's row is its
    ``worker``'s (a collective has one row per device, each its driver's). A transfer is timed
    where its bytes arrive, by the worker that waits for them (a real executor records a read, a
    fetch or a migration on the receiving side; the simulator puts a transfer's row on its
    destination): the worker of its ``dst`` memory, known from the trace's own compute and
    collective rows on that device. Where the destination is no one worker's (a host several
    workers share) or the trace has no ``dst``, the transfer's own ``worker``: the reader of a
    read, whose task it is."""
    worker = trace["worker"].to_numpy(dtype=np.int64)
    if not len(trace) or "kind" not in trace.columns or "dst" not in trace.columns:
        return worker
    transfer = (trace["kind"] == "transfer").to_numpy(dtype=bool)
    own = trace.loc[~transfer]
    span = own.groupby([own["run_id"], own["device"]], sort=False)["worker"].agg(["min", "max"])
    drivers = span.loc[span["min"] == span["max"], "min"]
    if not len(drivers):
        return worker
    dst = pd.MultiIndex.from_arrays([trace["run_id"].astype(str), trace["dst"].fillna("").astype(str)])
    drivers.index = pd.MultiIndex.from_arrays(
        [drivers.index.get_level_values(0).astype(str), drivers.index.get_level_values(1).astype(str)]
    )
    at = drivers.reindex(dst).to_numpy(dtype=float)
    use = transfer & ~np.isnan(at)
    return np.where(use, np.nan_to_num(at, nan=-1).astype(np.int64), worker)
