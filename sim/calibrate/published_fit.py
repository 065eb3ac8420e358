"""Fit a testbed to a paper's published figures (``gnnwb calibrate --published``).

Each setting of the figures file (:mod:`sim.calibrate.published`) is prepared once
(graph, partition, sampled epoch, plan); a candidate set of parameters is a cost model
and, where link parameters are fitted, clusters with those links, and every setting is
simulated with them. The fit minimises, over the fitted (non-headline, not held-out)
figures, the sum of squared residuals

    r = log(simulated / target) / tolerance

(the target is the value, or a range's geometric midpoint; the tolerance is a range's
half-width on the log scale, or log 1.1 for one value read off a paper: see
:class:`~sim.calibrate.published.Figure`). Why this method: the figures are times,
shares, byte counts and ratios spanning orders of magnitude, so their errors are
relative, and a log residual weighs an over- and an under-estimate by the same factor
alike; the parameters are positive and of unknown size, so they are fitted as
``log(value / start)`` within a factor of 1000 of the start. With a handful of
parameters and each evaluation a full simulation, scipy's trust-region least squares
(``least_squares``, ``trf``, bounded) with a forward-difference Jacobian is the
cheapest reliable choice; its step is 5% of a parameter, not machine precision,
because a simulated schedule is piecewise smooth (a max over paths) and a tiny step can
land on a flat piece.

Headline and held-out figures never enter the residuals: after the fit they are
simulated with the fitted parameters and their errors reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.calibrate.costmodel import PhaseCostModel
from sim.calibrate.published import NEEDS_BASELINE, Figure, Parameter, PublishedFigures
from sim.costmodel import LinearCoefficients, LinearCostModel
from workbench.errors import ConfigError
from workbench.hardware.spec import ClusterSpec

BOUND = math.log(1e3)  # parameters stay within a factor of 1000 of their start
DIFF_STEP = 0.05  # 5% steps for the finite-difference Jacobian (module docstring)


@dataclass
class Setting:
    """A prepared setting: what the scheme needs to plan, and its plan on the unchanged testbed."""

    name: str
    prepared: Any  # workbench.run.PreparedRun
    plan: Any


@dataclass
class Metrics:
    """What a simulated epoch gives the figures: time, per-phase busy seconds and bytes."""

    epoch_s: float
    iterations: int
    workers: int
    busy: dict[str, float]
    bytes: dict[str, float]


@dataclass
class FitResult:
    """The fitted parameters, every figure's simulated value, and how the fit went."""

    published: PublishedFigures
    start: dict[str, float]
    values: dict[str, float]
    rows: list[dict[str, Any]]  # one per used figure: target, simulated, error, role
    cost: float
    evaluations: int
    seconds: float
    status: str
    notes: list[str] = field(default_factory=list)


def prepare_settings(
    pub: PublishedFigures, progress: Callable[[str], None] | None = None
) -> dict[str, Setting]:
    """Prepare every setting a used figure names (figures' settings and baselines)."""
    from workbench.config import config_from_dict
    from workbench.run import prepare_run

    names = []
    for f in pub.figures:
        if f.use:
            names += [f.setting] + ([f.baseline] if f.quantity in NEEDS_BASELINE else [])
    out = {}
    for name in dict.fromkeys(names):
        if progress:
            progress(f"preparing setting {name}")
        prepared = prepare_run(config_from_dict(pub.settings[name], f"{pub.path}: settings.{name}"))
        out[name] = Setting(name, prepared, prepared.plan())
    return out


def start_values(pub: PublishedFigures, settings: dict[str, Setting]) -> dict[str, float]:
    """Each parameter's start: ``[fit] start``, else the testbed's own value (never 0: a log fit)."""
    from workbench.hardware import load_hardware

    testbed = load_hardware(pub.hardware, machines=pub.machines)
    clusters = [testbed, *(s.prepared.cluster for s in settings.values())]
    base = LinearCostModel()
    out = {}
    for i, p in enumerate(pub.parameters):
        where = f"{pub.path}: fit.parameters[{i}]"
        value = pub.start.get(p.name)
        given = _testbed_value(p, clusters, base, where)
        value = value if value is not None else given
        if not value > 0:
            raise ConfigError(f"{where}: {p.name} is 0 on the testbed; give a positive start in [fit] start")
        out[p.name] = value
    return out


def _testbed_value(p: Parameter, clusters: list[ClusterSpec], base: LinearCostModel, where: str) -> float:
    if p.family == "cost":
        _, model, coefficient = p.parts
        models = {"cpu", "default"} | {g.model for c in clusters for m in c.machines for g in m.gpus}
        if model not in models:
            raise ConfigError(
                f"{where}: no device model {model!r} in the settings; allowed: {', '.join(sorted(models))}"
            )
        return 1.0 if coefficient == "scale" else float(getattr(base.coefficients_for(model), coefficient))
    if p.family == "link":
        kinds = {link.kind for c in clusters for link in c.links}
        missing = [k for k in p.targets if k not in kinds]
        if missing:
            raise ConfigError(
                f"{where}: no link of kind {missing[0]!r} in the settings; kinds: {', '.join(sorted(kinds))}"
            )
        first = next(link for c in clusters for link in c.links if link.kind in p.targets)
        return float(getattr(first, p.parts[1]))
    return 0.0  # transfer_overhead: none unless a profile says so


def cost_model_for(pub: PublishedFigures, values: dict[str, float]) -> PhaseCostModel:
    """The default cost model with the candidate's cost coefficients and transfer overheads."""
    base = LinearCostModel()
    phases: dict[str, dict[str, Any]] = {}
    overhead: dict[str, float] = {}
    for p in pub.parameters:
        if p.family == "cost" and p.parts[2] != "scale":
            for phase in p.targets:
                model, coefficient = p.parts[1], p.parts[2]
                current = phases.setdefault(phase, {}).get(model, base.coefficients_for(model))
                phases[phase][model] = dataclasses.replace(current, **{coefficient: values[p.name]})
        elif p.family == "transfer_overhead":
            for phase in p.targets:
                overhead[phase] = values[p.name]
    for p in pub.parameters:  # a scale multiplies the coefficients, fitted ones included
        if p.family == "cost" and p.parts[2] == "scale":
            for phase in p.targets:
                model = p.parts[1]
                current = phases.setdefault(phase, {}).get(model, base.coefficients_for(model))
                scaled = (values[p.name] * x for x in dataclasses.astuple(current))
                phases[phase][model] = LinearCoefficients(*scaled)
    provenance = f"gnnwb calibrate --published {pub.path.name}; fallback: sim/costmodel.py defaults"
    return PhaseCostModel(base.coefficients, provenance, overhead, phases=phases)


def cluster_for(
    cluster: ClusterSpec, pub: PublishedFigures, values: dict[str, float], start: dict[str, float]
) -> ClusterSpec:
    """``cluster`` with each fitted link kind scaled by value / start (its links keep their ratios)."""
    scale: dict[tuple[str, str], float] = {}
    for p in pub.parameters:
        if p.family == "link":
            for kind in p.targets:
                scale[(kind, p.parts[1])] = values[p.name] / start[p.name]
    if not scale:
        return cluster
    links = tuple(
        dataclasses.replace(
            link,
            bandwidth=link.bandwidth * scale.get((link.kind, "bandwidth"), 1.0),
            latency=link.latency * scale.get((link.kind, "latency"), 1.0),
        )
        for link in cluster.links
    )
    return dataclasses.replace(cluster, links=links)


def simulate_setting(setting: Setting, cluster: ClusterSpec, costs: PhaseCostModel, replan: bool) -> Metrics:
    """One epoch of ``setting`` on ``cluster`` with ``costs``; ``replan`` when links changed, since a
    scheme may choose by link speed (NeuGraph's selective threshold)."""
    from sim import simulate
    from workbench.trace import makespan, phase_summary

    plan = setting.plan
    if replan:
        inputs = dataclasses.replace(setting.prepared.inputs, cluster=cluster)
        plan = setting.prepared.scheme.build(inputs)
    trace = simulate(plan, cluster, costs).trace
    summary = phase_summary(trace).set_index("phase")
    inputs = setting.prepared.inputs
    return Metrics(
        float(makespan(trace)),
        max(int(inputs.num_iterations), 1),
        int(inputs.num_workers),
        {str(k): float(v) for k, v in summary["busy_s"].items()},
        {str(k): float(v) for k, v in summary["bytes"].items()},
    )


def figure_value(f: Figure, metrics: dict[str, Metrics]) -> float:
    """The workbench's figure for ``f`` from the simulated settings (:data:`QUANTITIES`)."""
    m = metrics[f.setting]
    if f.quantity == "epoch_s":
        return m.epoch_s
    if f.quantity == "iteration_s":
        return m.epoch_s / m.iterations
    if f.quantity == "phase_s":
        return sum(m.busy.get(p, 0.0) for p in f.phases) / m.workers
    if f.quantity == "share":
        total = sum(m.busy.values())
        return sum(m.busy.get(p, 0.0) for p in f.phases) / total if total > 0 else math.nan
    if f.quantity == "bytes":
        return sum(m.bytes.get(p, 0.0) for p in f.phases)
    if f.quantity == "phase_ratio":
        own = sum(m.busy.get(p, 0.0) for p in f.phases)
        return sum(metrics[f.baseline].busy.get(p, 0.0) for p in f.phases) / own if own > 0 else math.nan
    return metrics[f.baseline].epoch_s / m.epoch_s  # speedup


def log_error(f: Figure, simulated: float) -> float:
    """log(simulated / target): 0 is exact; a range's figure is measured from its geometric midpoint."""
    if not simulated > 0:
        return math.inf
    return math.log(simulated / f.target)


def outside_range(f: Figure, simulated: float) -> float:
    """How far (log scale) ``simulated`` lies outside the figure's range; 0 inside it."""
    if not simulated > 0:
        return math.inf
    low, high = f.value
    return max(0.0, math.log(low / simulated), math.log(simulated / high))


class Evaluator:
    """Simulates every prepared setting for a candidate's parameters; caches by candidate."""

    def __init__(self, pub: PublishedFigures, settings: dict[str, Setting], start: dict[str, float]) -> None:
        self.pub = pub
        self.settings = settings
        self.start = start
        self.replan = any(p.family == "link" for p in pub.parameters)
        self.count = 0
        self._cache: dict[tuple[float, ...], dict[str, Metrics]] = {}

    def values(self, x: np.ndarray) -> dict[str, float]:
        """Parameter values from the fit's variables ``log(value / start)``."""
        return {
            p.name: self.start[p.name] * math.exp(float(v))
            for p, v in zip(self.pub.parameters, x, strict=True)
        }

    def metrics(self, x: np.ndarray) -> dict[str, Metrics]:
        key = tuple(np.round(np.asarray(x, dtype=float), 12))
        if key not in self._cache:
            values = self.values(x)
            costs = cost_model_for(self.pub, values)
            self._cache[key] = {
                name: simulate_setting(
                    s, cluster_for(s.prepared.cluster, self.pub, values, self.start), costs, self.replan
                )
                for name, s in self.settings.items()
            }
            self.count += 1
        return self._cache[key]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """Each fitted figure's log error over its tolerance (headline and held-out figures never)."""
        metrics = self.metrics(x)
        out = []
        for f in self.pub.fitted():
            error = log_error(f, figure_value(f, metrics))
            out.append(error / f.tolerance if math.isfinite(error) else 1e3)
        return np.array(out, dtype=float)


def fit_published(
    pub: PublishedFigures, progress: Callable[[str], None] | None = None, max_evaluations: int = 60
) -> FitResult:
    """Fit ``pub``'s parameters to its fitted figures; simulate every used figure with the result.
    With nothing to fit (a file read with ``require_fit=False`` that names no parameter or no
    non-headline figure) every used figure is simulated on the testbed as it is."""
    from scipy.optimize import least_squares

    t0 = time.perf_counter()
    settings = prepare_settings(pub, progress)
    start = start_values(pub, settings)
    evaluator = Evaluator(pub, settings, start)
    if progress:
        progress(f"fitting {len(pub.parameters)} parameter(s) to {len(pub.fitted())} figure(s)")
    n = len(pub.parameters)
    if n == 0 or not pub.fitted():  # nothing to fit: the testbed as it is
        rows = figure_rows(pub, evaluator.metrics(np.zeros(n)))
        why = "no parameter named" if n == 0 else "no non-headline figure to fit"
        return FitResult(
            pub,
            start,
            dict(start),
            rows,
            math.nan,
            evaluator.count,
            time.perf_counter() - t0,
            f"not fitted: {why}",
        )
    result = least_squares(
        evaluator.residuals,
        np.zeros(n),
        bounds=(np.full(n, -BOUND), np.full(n, BOUND)),
        method="trf",
        diff_step=DIFF_STEP,
        max_nfev=max_evaluations,
        xtol=1e-4,  # log parameters: a 0.01% change, far below any figure's tolerance
        ftol=1e-6,
        x_scale=1.0,
    )
    values = evaluator.values(result.x)
    rows = figure_rows(pub, evaluator.metrics(result.x))
    notes = []
    hit = [p.name for p, v in zip(pub.parameters, result.x, strict=True) if abs(v) >= BOUND * 0.999]
    if hit:
        notes.append(
            f"at the bound of a factor 1000 from the start: {', '.join(hit)} (the figures pull it further)"
        )
    return FitResult(
        pub,
        start,
        values,
        rows,
        float(2 * result.cost),
        evaluator.count,
        time.perf_counter() - t0,
        str(result.message),
        notes,
    )


def figure_rows(pub: PublishedFigures, metrics: dict[str, Metrics]) -> list[dict[str, Any]]:
    """Every figure, in the file's order, with its role (fitted, headline, held out, not used) and the
    workbench's value under ``metrics``; a figure not used carries its reason instead."""
    rows = []
    for f in pub.figures:
        row: dict[str, Any] = {
            "id": f.id,
            "role": "fitted"
            if f.fitted
            else ("headline" if f.headline else "held out")
            if f.use
            else "not used",
            "source": f.source,
            "quantity": f.quantity + (f" ({'+'.join(f.phases)})" if f.phases else ""),
            "setting": f.setting + (f" vs {f.baseline}" if f.baseline else ""),
            "paper": f.value_text(),
            "low": f.value[0],
            "high": f.value[1],
        }
        if f.use:
            simulated = figure_value(f, metrics)
            error = log_error(f, simulated)
            row.update(
                {
                    "workbench": simulated,
                    "ratio": math.exp(error) if math.isfinite(error) else math.nan,
                    "outside_range": outside_range(f, simulated),
                    "residual": error / f.tolerance if math.isfinite(error) else math.nan,
                }
            )
        else:
            row["reason"] = f.reason
        rows.append(row)
    return rows


def published_profile(result: FitResult, command: str | None = None) -> Any:
    """The fit as a calibrated profile (:mod:`sim.calibrate.profile`'s layout): the testbed cluster
    with fitted links, the cost model, the fit's quality and provenance (the figures file's sha256,
    which figures were fitted and which held out)."""
    from sim.calibrate.profile import FORMAT, Profile, cluster_table, provenance
    from workbench.hardware import load_hardware

    pub = result.published
    testbed = load_hardware(pub.hardware, machines=pub.machines)
    cluster = cluster_for(testbed, pub, result.values, result.start)
    costs = cost_model_for(pub, result.values)
    fitted_kinds = {(kind, p.parts[1]) for p in pub.parameters if p.family == "link" for kind in p.targets}
    flags = [
        ((link.kind, "bandwidth") in fitted_kinds, (link.kind, "latency") in fitted_kinds)
        for link in cluster.links
    ]
    source = provenance([], command, False)
    for key in ("traces", "sha256", "rows", "measured_on", "mixed_hardware"):
        source.pop(key, None)
    source.update(
        {
            "figures_file": str(pub.path),
            "figures_sha256": pub.sha256,
            "paper": pub.paper,
            "fitted": [f.id for f in pub.fitted()],
            "held_out": [f.id for f in pub.held_out()],
            "not_used": [f.id for f in pub.unused()],
        }
    )
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": f"{testbed.name}-published-{pub.paper or pub.path.stem}",
        "hardware": testbed.name,
        "provenance": source,
        "links": _links_table(pub, cluster, result),
        "cost_model": costs.to_dict(),
        "fit": _fit_table(result),
        "cluster": cluster_table(cluster, flags),
    }
    return Profile(cluster, costs, data)


def _links_table(pub: PublishedFigures, cluster: ClusterSpec, result: FitResult) -> dict[str, Any]:
    """Per fitted link kind what ``[hardware] profile`` applies (workbench.run.apply_profile): the scale
    of a bandwidth, and its absolute value where every link of the kind has one; a latency as a value
    (the kind's first link's, where they differ: apply_profile takes no latency scale)."""
    out: dict[str, Any] = {}
    for p in pub.parameters:
        if p.family != "link":
            continue
        what = p.parts[1]
        for kind in p.targets:
            entry = out.setdefault(kind, {"bandwidth_fitted": False, "latency_fitted": False})
            entry[f"{what}_fitted"] = True
            values = [getattr(link, what) for link in cluster.links if link.kind == kind]
            if len(set(values)) == 1 or what == "latency":
                entry[what] = float(values[0])
            if what == "bandwidth":
                entry["bandwidth_scale"] = result.values[p.name] / result.start[p.name]
    return out


def _fit_table(result: FitResult) -> dict[str, Any]:
    pub = result.published
    return {
        "method": "scipy.optimize.least_squares (trf, bounded, forward differences with 5% steps) on "
        "log(value / start) of each parameter; residual per fitted figure log(simulated / target) / "
        "tolerance (a range: its geometric midpoint, tolerance its log half-width; one value: log 1.1)",
        "status": result.status,
        "evaluations": result.evaluations,
        "seconds": result.seconds,
        "sum_squared_residuals": result.cost,
        "notes": list(result.notes),
        "parameters": {
            p.name: {"start": result.start[p.name], "value": result.values[p.name]} for p in pub.parameters
        },
        "figures": [{k: v for k, v in row.items() if not _is_nan(v)} for row in result.rows],
    }


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
