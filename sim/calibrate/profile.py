"""Calibrated profiles: what ``gnnwb calibrate`` writes and the simulator reads back.

A profile is one TOML file (written by :mod:`sim.calibrate.tomlwrite`)::

    format = "gnnwb-profile/1"
    name = "<hardware>-calibrated"
    hardware = "<the hardware it was calibrated on>"

    [provenance]        traces (paths, sha256, rows), what they were measured on, the
                        command, the date (UTC), the workbench's version, library versions
    [links.<kind>]      per link kind: bandwidth_fitted, bandwidth_scale (against the given
                        hardware), bandwidth (bytes/s, when all links of the kind had one),
                        latency_fitted, latency (s), latency_stderr, and per direction
                        (links.<kind>.directions.<h2d|d2h|d2d|h2h>) rows, bandwidth, R^2,
                        residual spread (median and 95th percentile of |relative residual|,
                        their standard deviation) and the bandwidth's relative standard error
    [sampling.<model>]  per_minibatch, per_edge, per_vertex (s) of the sample phase, read off
                        its linear fit
    [cost_model]        kind = "phase": fallback coefficients per device model, then
                        [cost_model.phases.<phase>.<model>] one fitted model per phase and
                        device model: model = "linear" with LinearCoefficients' fields, or
                        model = "trees" (see sim.calibrate.costmodel.TreeEnsemble)
    [fit]               notes, the regressor rule, rows left out and why; per group
                        [fit.compute.<phase>.<model>]: rows, R^2, residual spread, the
                        coefficients fitted, their standard errors, held-out errors of the
                        linear model and the trees, and which one the cost model uses
    [cluster]           the calibrated cluster in the hardware-file layout; each
                        [[cluster.links]] says bandwidth_fitted and latency_fitted (false: the
                        given hardware's value, kept)

``gnnwb sim PLAN --hardware profile.toml`` simulates on ``[cluster]`` with
``[cost_model]``; a run configuration's ``[hardware] profile`` applies ``[links]`` to the
configuration's own hardware (``workbench.run.apply_profile``) and hands ``[cost_model]``
to the simulator (:func:`prepared_cost_model`).
"""

from __future__ import annotations

import hashlib
import platform
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from sim.calibrate import tomlwrite
from sim.calibrate.costmodel import PhaseCostModel
from workbench.errors import ConfigError
from workbench.hardware.spec import ClusterSpec, cluster_from_dict
from workbench.tomlfile import read_toml

FORMAT = "gnnwb-profile/1"
LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn", "pyarrow", "simpy")


@dataclass
class Profile:
    cluster: ClusterSpec
    cost_model: PhaseCostModel
    data: dict[str, Any] = field(default_factory=dict)  # the whole table, as written

    def to_toml(self) -> str:
        return tomlwrite.dumps(self.data, header="A calibrated hardware profile, written by gnnwb calibrate.")

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_toml())
        return p


def cluster_table(cluster: ClusterSpec, flags: list[tuple[bool, bool]]) -> dict[str, Any]:
    """The cluster in the hardware-file layout, links with full-precision numbers and their flags."""
    table = cluster.to_dict()
    table["links"] = [
        {
            "a": link.a,
            "b": link.b,
            "kind": link.kind,
            "bandwidth": float(link.bandwidth),
            "latency": float(link.latency),
            "bandwidth_fitted": bw,
            "latency_fitted": lat,
        }
        for link, (bw, lat) in zip(cluster.links, flags, strict=True)
    ]
    return table


def provenance(sources: list[Any], command: str | None, allow_mixed: bool) -> dict[str, Any]:
    try:
        version = metadata.version("gnnwb")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    libraries = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "workbench": version,
        "command": command or " ".join(sys.argv),
        "traces": [s.name for s in sources],
        "sha256": [s.sha256 or _digest(s) for s in sources],
        "rows": [len(s.trace) for s in sources],
        "measured_on": [s.hardware or "unknown" for s in sources],
        "mixed_hardware": allow_mixed and len({s.hardware for s in sources if s.hardware}) > 1,
        "libraries": libraries,
    }


def _digest(source: Any) -> str:
    """A digest of an in-memory trace's table (a source not read from a file)."""
    import pandas as pd

    return hashlib.sha256(pd.util.hash_pandas_object(source.trace, index=False).values.tobytes()).hexdigest()


def is_profile(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix != ".toml" or not p.is_file():
        return False
    return str(read_toml(p, "hardware file").get("format", "")).startswith("gnnwb-profile")


def profile_from_dict(data: dict[str, Any], source: str) -> Profile:
    if not str(data.get("format", "")).startswith("gnnwb-profile"):
        raise ConfigError(
            f'{source}: not a calibrated profile (no format = "{FORMAT}"; gnnwb calibrate writes them)'
        )
    if data["format"] != FORMAT:
        raise ConfigError(f"{source}: profile format {data['format']!r}; this workbench reads {FORMAT!r}")
    table = dict(data.get("cluster") or {})
    if not table:
        raise ConfigError(f"{source}: profile has no [cluster] table")
    table["links"] = [
        {k: v for k, v in link.items() if k not in ("bandwidth_fitted", "latency_fitted")}
        for link in table.get("links", [])
    ]
    cluster = cluster_from_dict(table, f"{source}: cluster")
    cost = data.get("cost_model")
    if not isinstance(cost, dict):
        raise ConfigError(f"{source}: profile has no [cost_model] table")
    return Profile(cluster, PhaseCostModel.from_dict(cost, source), data)


def load_profile(path: str | Path) -> Profile:
    return profile_from_dict(read_toml(path, "calibrated profile"), str(path))


def load_hardware_or_profile(name_or_path: str | Path) -> tuple[ClusterSpec, PhaseCostModel | None]:
    """A preset, a hardware file, or a profile's calibrated cluster and its cost model."""
    from workbench.hardware import load_hardware

    if is_profile(name_or_path):
        profile = load_profile(name_or_path)
        return profile.cluster, profile.cost_model
    return load_hardware(name_or_path), None


def prepared_cost_model(prepared: Any) -> PhaseCostModel | None:
    """The cost model of a prepared run's profile (``PreparedRun.cost_model``: its [cost_model] table)."""
    table = getattr(prepared, "cost_model", None)
    if table is None:
        return None
    return PhaseCostModel.from_dict(table, str(prepared.config.hardware.profile))
