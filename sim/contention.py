"""Worker processes that outnumber the cores they share: a CPU contention model.

The simulator gives every worker its own device. Where a run's workers are processes on the
cores of one machine (``gnnwb fidelity`` on CPU worker processes: single-threaded each once
there are as many as cores, ``realrun.worker``), ``W`` workers on ``C < W`` cores time-share
them: the operating system runs ``C`` of the runnable processes at a time, so whatever a worker
does (compute, a copy, its end of a gloo exchange: all CPU work there) stretches while more than
``C`` are runnable.

The model is processor sharing in the mean: every duration of the run stretches by one factor
``f``, so the contended run is the uncontended simulation with its timeline scaled by ``f`` (the
simulator has no time constant of its own: scaling every duration and latency scales every event
time alike). ``f`` is the work per core the uncontended run asks for::

    f = max(1, busy / (efficiency x cores x span))

with ``busy`` the simulated run's compute seconds (its compute rows, summed: the CPU work the cost
model prices) and ``span`` its makespan: the work-conserving bound (``cores`` cannot finish
``busy`` seconds of work in less than ``busy / cores``) taken as the estimate. It is its own fixed
point: the stretched run's busy time and span both grow by ``f``. ``efficiency`` is fitted
(:func:`fit_efficiency`) on measured runs with more workers than cores: the compute seconds the
cores turn out per second of their time, below 1 because they also carry the workers' copies,
exchanges, collectives and Python between kernels. Transfers and collectives are left out of
``busy`` because their rows are mostly waiting (on the network, on a peer): measured on the scheme
grid's 4-worker runs on 2 cores (27 fitted, 33 held out, 2 repeats), counting every row gave fitted
efficiencies spread 0.77-2.99 and a held-out median error of 28%; compute rows alone 0.21-0.81
and 23% (34% without the model).

With ``W <= C`` each single-threaded worker has a core of its own and the model changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import ConfigError


@dataclass(frozen=True)
class SharedCores:
    """``cores`` that every worker process of a run shares, and the fitted ``efficiency`` of their
    time-sharing (module docstring)."""

    cores: int
    efficiency: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            raise ConfigError(f"contention: cores must be a whole number of at least 1, got {self.cores!r}")
        good = isinstance(self.efficiency, (int, float)) and not isinstance(self.efficiency, bool)
        if not (good and math.isfinite(self.efficiency) and self.efficiency > 0):
            raise ConfigError(f"contention: efficiency must be a positive number, got {self.efficiency!r}")

    def applies(self, workers: int) -> bool:
        return workers > self.cores

    def factor(self, trace: pd.DataFrame, workers: int) -> float:
        """How much ``trace`` (an uncontended simulated run of ``workers`` workers) stretches."""
        if not self.applies(workers) or not len(trace):
            return 1.0
        return self.stretch_of(*demand(trace))

    def stretch_of(self, busy: float, span: float) -> float:
        """The stretch of a contended run whose uncontended simulation computes ``busy`` seconds
        in ``span`` (module docstring)."""
        return max(1.0, busy / (self.efficiency * self.cores * span)) if span > 0 else 1.0

    def stretch(self, trace: pd.DataFrame, workers: int) -> tuple[pd.DataFrame, float]:
        """``trace`` with its timeline scaled by :meth:`factor` from its first start, and the factor."""
        f = self.factor(trace, workers)
        if f == 1.0:
            return trace, f
        t0 = float(trace["start"].min())
        out = trace.copy()
        for column in [c for c in ("ready", "start", "end") if c in out.columns]:
            out[column] = t0 + (out[column].to_numpy(dtype=float) - t0) * f
        return out, f

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "efficiency": self.efficiency}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> SharedCores:
        if not isinstance(data, dict) or "cores" not in data or "efficiency" not in data:
            raise ConfigError(f"{where}: [contention] needs cores and efficiency")
        return cls(data["cores"], data["efficiency"])


def demand(trace: pd.DataFrame) -> tuple[float, float]:
    """The compute rows' seconds summed (every row's where the trace has no ``kind``), and the makespan."""
    start = trace["start"].to_numpy(dtype=float)
    end = trace["end"].to_numpy(dtype=float)
    compute = (
        (trace["kind"] == "compute").to_numpy() if "kind" in trace.columns else np.ones(len(trace), bool)
    )
    return float((end - start)[compute].sum()), float(end.max() - start.min())


@dataclass(frozen=True)
class ContendedRun:
    """One measured epoch of a run with more workers than cores, beside its uncontended simulation."""

    name: str
    busy: float  # simulated compute seconds, summed over rows
    span: float  # simulated makespan
    measured: float  # measured epoch seconds

    def implied_efficiency(self, cores: int) -> float:
        """The efficiency under which the model predicts ``measured`` exactly."""
        return self.busy / (cores * self.measured)


def fit_efficiency(runs: Sequence[ContendedRun], cores: int) -> tuple[SharedCores, dict[str, Any]]:
    """The model that fits ``runs`` and how well: the efficiency is the median of the runs' implied
    efficiencies (one parameter; the median keeps one noisy repeat from moving it); the quality is
    the fitted runs' own relative errors (in-sample), with and without the model."""
    if not runs:
        raise ConfigError("contention: no measured run with more workers than cores to fit the efficiency on")
    implied = np.array([r.implied_efficiency(cores) for r in runs], dtype=float)
    model = SharedCores(cores, float(np.median(implied)))
    fitted = np.array([r.span * model.stretch_of(r.busy, r.span) for r in runs])
    measured = np.array([r.measured for r in runs])
    spans = np.array([r.span for r in runs])
    return model, {
        "runs": len(runs),
        "implied_efficiency_min": float(implied.min()),
        "implied_efficiency_max": float(implied.max()),
        "median_abs_error": float(np.median(np.abs(fitted / measured - 1))),
        "median_abs_error_uncontended": float(np.median(np.abs(spans / measured - 1))),
    }
