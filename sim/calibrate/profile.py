"""Calibrated profiles: what ``gnnwb calibrate`` writes and the simulator reads back.

A profile is one TOML file (written by :mod:`sim.calibrate.tomlwrite`)::

    format = "gnnwb-profile/1"
    name = "<hardware>-calibrated"
    hardware = "<the hardware it was calibrated on>"

    [provenance]        traces (paths, sha256, rows), what they were measured on, the
                        command, the date (UTC), the workbench's version, library versions;
                        load_warning when the traces' loads differ (see sim.calibrate)
    [[provenance.load]] per trace with a load.json beside it: trace, the median and max
                        of its 1-minute load averages, cpus, others_cpu (the share of the
                        machine's CPU time other processes took while it ran, where recorded;
                        profiles from before have no load at all)
    [links.<kind>]      per link kind: bandwidth_fitted, bandwidth_scale (against the given
                        hardware), bandwidth (bytes/s, when all links of the kind had one),
                        latency_fitted, latency (s), latency_stderr, and per direction
                        (links.<kind>.directions.<h2d|d2h|d2d|h2h>) rows, bandwidth, R^2,
                        residual spread (median and 95th percentile of |relative residual|,
                        their standard deviation) and the bandwidth's relative standard error
    [sampling.<model>]  per_minibatch, per_edge, per_vertex (s) of the sample phase, read off
                        its linear fit
    [noise]             compute_jitter: how much a compute task's time varies when it does the
                        same work again, iteration_jitter: how much all of one worker's iteration
                        varies together (sim.calibrate.noise; the sigmas the fidelity experiment and
                        gnnwb validate simulate with), the rows and tasks they were read from
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
from sim.calibrate.costmodel import FEATURE_COLUMNS, PhaseCostModel
from sim.costmodel import coefficients_from_dict
from workbench import validate
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
    # For the caller to show (gnnwb calibrate prints them on stderr); the profile's own record of
    # them is in ``data`` (provenance.load_warning).
    warnings: list[str] = field(default_factory=list)

    @property
    def jitter(self) -> float:
        """The fitted compute jitter per task (``[noise] compute_jitter``); 0 where none was fitted."""
        return float((self.data.get("noise") or {}).get("compute_jitter", 0.0))

    @property
    def iteration_jitter(self) -> float:
        """The fitted jitter shared by a worker's iteration (``[noise] iteration_jitter``); 0 where none
        was fitted (profiles written before it was)."""
        return float((self.data.get("noise") or {}).get("iteration_jitter", 0.0))

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
    table: dict[str, Any] = {
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
    loads = load_table(sources)
    if loads:  # no empty table: a profile fitted to traces without load data reads as before
        table["load"] = loads
    return table


def load_table(sources: list[Any]) -> list[dict[str, Any]]:
    """The machine's load around each trace that recorded one (``TraceSource.load``): under
    what load the profile was fitted. Traces without are left out, each entry names its trace."""
    return [
        {"trace": s.name, "median": s.load.median, "max": s.load.max, "cpus": s.load.cpus}
        | ({} if s.load.others_cpu is None else {"others_cpu": s.load.others_cpu})
        for s in sources
        if s.load is not None
    ]


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
    """A profile from its TOML table; every error is one line naming ``source`` and the field."""
    validate.table(data, source)
    fmt = data.get("format", "")
    if not isinstance(fmt, str) or not fmt.startswith("gnnwb-profile"):
        raise ConfigError(
            f'{source}: not a calibrated profile (no format = "{FORMAT}"; gnnwb calibrate writes them)'
        )
    if fmt != FORMAT:
        raise ConfigError(f"{source}: profile format {fmt!r}; this workbench reads {FORMAT!r}")
    table = dict(validate.table(data.get("cluster") or {}, f"{source}: cluster"))
    if not table:
        raise ConfigError(f"{source}: profile has no [cluster] table")
    table["links"] = [
        _strip_fit_flags(link, f"{source}: cluster.links[{i}]")
        for i, link in enumerate(validate.array(table.get("links", []), f"{source}: cluster.links"))
    ]
    cluster = cluster_from_dict(table, f"{source}: cluster")
    cost = data.get("cost_model")
    if not isinstance(cost, dict):
        raise ConfigError(f"{source}: profile has no [cost_model] table")
    _check_noise(data.get("noise"), f"{source}: noise")
    return Profile(cluster, phase_cost_model(cost, source), data)


def _check_noise(raw: Any, where: str) -> None:
    if raw is None:
        return
    table = validate.table(raw, where)
    validate.finite_number(table.get("compute_jitter"), f"{where}.compute_jitter", minimum=0)
    if "iteration_jitter" in table:
        validate.finite_number(table["iteration_jitter"], f"{where}.iteration_jitter", minimum=0)


def _strip_fit_flags(link: Any, where: str) -> Any:
    """A calibrated link without its bandwidth_fitted and latency_fitted flags (booleans),
    which the hardware layout does not have; a link that is not a table is left to
    :func:`cluster_from_dict` to name."""
    if not isinstance(link, dict):
        return link
    for flag in ("bandwidth_fitted", "latency_fitted"):
        if flag in link:
            validate.boolean(link[flag], f"{where}.{flag}")
    return {k: v for k, v in link.items() if k not in ("bandwidth_fitted", "latency_fitted")}


_COST_FIELDS = frozenset({"kind", "provenance", "transfer_overhead", "fallback", "phases"})
_TREE_ARRAYS = ("roots", "feature", "threshold", "left", "right", "value")
_TREE_FIELDS = frozenset({"model", "init", "learning_rate", "log_target", "base", *_TREE_ARRAYS})


def phase_cost_model(cost: Any, source: str) -> PhaseCostModel:
    """A profile's ``[cost_model]`` table, its shape and numbers checked (finite coefficients
    and trees whose every path ends at a leaf), as a :class:`PhaseCostModel`."""
    where = f"{source}: cost_model"
    validate.table(cost, where)
    unknown = set(cost) - _COST_FIELDS
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_COST_FIELDS))}"
        )
    for phase, entry in validate.table(cost.get("phases", {}), f"{where}.phases").items():
        for model, raw in validate.table(entry, f"{where}.phases.{phase}").items():
            _check_fitted(raw, f"{where}.phases.{phase}.{model}")
    return PhaseCostModel.from_dict(cost, source)


def _check_fitted(raw: Any, where: str) -> None:
    validate.table(raw, where)
    kind = raw.get("model", "linear")
    if kind == "linear":
        coefficients_from_dict({k: v for k, v in raw.items() if k != "model"}, where)
    elif kind == "trees":
        _check_trees(raw, where)
    else:
        raise ConfigError(f"{where}: model {kind!r}; allowed: linear, trees")


def _check_trees(raw: dict[str, Any], where: str) -> None:
    """Node arrays of one length, finite numbers, and children after their parents, so
    :meth:`TreeEnsemble.predict` always reaches a leaf (a child pointing back would loop)."""
    unknown = set(raw) - _TREE_FIELDS
    if unknown:
        raise ConfigError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}")
    for key in ("init", "learning_rate"):
        if key not in raw:
            raise ConfigError(f"{where}: missing field {key!r}")
        validate.finite_number(raw[key], f"{where}.{key}")
    validate.boolean(raw.get("log_target", True), f"{where}.log_target")
    if "base" in raw:  # the linear model the trees correct
        coefficients_from_dict(validate.table(raw["base"], f"{where}.base"), f"{where}.base")
    arrays = {}
    for key in _TREE_ARRAYS:
        if key not in raw:
            raise ConfigError(f"{where}: missing field {key!r}")
        arrays[key] = validate.array(raw[key], f"{where}.{key}")
    n = len(arrays["feature"])
    for key in ("threshold", "left", "right", "value"):
        if len(arrays[key]) != n:
            raise ConfigError(f"{where}: {key} has {len(arrays[key])} nodes, feature has {n}")
    for key in ("threshold", "value"):
        for j, x in enumerate(arrays[key]):
            validate.finite_number(x, f"{where}.{key}[{j}]")
    roots = [
        validate.integer(r, f"{where}.roots[{t}]", minimum=0, maximum=max(n - 1, 0))
        for t, r in enumerate(arrays["roots"])
    ]
    if roots and (roots[0] != 0 or roots != sorted(set(roots)) or n == 0):
        raise ConfigError(f"{where}.roots must start at 0 and increase, got {validate.short_repr(roots)}")
    ends = [*roots[1:], n]
    for root, end in zip(roots, ends, strict=True):
        for j in range(root, end):
            left = validate.integer(arrays["left"][j], f"{where}.left[{j}]", minimum=-1)
            right = validate.integer(arrays["right"][j], f"{where}.right[{j}]", minimum=-1)
            feature = validate.integer(arrays["feature"][j], f"{where}.feature[{j}]")
            if left == -1:
                continue
            if not (j < root + left < end and j < root + right < end):
                raise ConfigError(f"{where}: node {j}'s children must come after it within its tree")
            if not 0 <= feature < len(FEATURE_COLUMNS):
                raise ConfigError(
                    f"{where}.feature[{j}] must be from 0 to {len(FEATURE_COLUMNS) - 1}, got {feature}"
                )


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
    return phase_cost_model(table, str(prepared.config.hardware.profile))
