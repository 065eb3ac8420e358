"""Calibration: measured traces in, a hardware profile out (``gnnwb calibrate``).

::

    from sim.calibrate import calibrate, read_sources, load_profile
    profile = calibrate(read_sources(["reports/microbench/cpu"]), load_hardware("h100-1x"))
    profile.write("profile.toml")
    simulate(plan, profile.cluster, cost_model=profile.cost_model)

What is fitted (scikit-learn, relative least squares, non-negative coefficients):

* **links** (:mod:`sim.calibrate.links`): latency per link kind and bandwidth per link
  kind and direction, from transfer rows' bytes against ``end - start`` over the routes
  their ``src`` and ``dst`` take on the given hardware;
* **compute** (:mod:`sim.calibrate.compute`): ROC-style linear coefficients per device
  model and phase (intercept: the fixed cost of a task, i.e. the host's overhead per
  kernel or per minibatch; per FLOP, byte, edge, vertex), with gradient-boosted trees
  tried beside them and kept only when clearly better on held-out rows; ``sample`` on
  a host gives the cost per minibatch and per sampled edge.

Which traces (:mod:`sim.calibrate.sources`): trace files or folders of them, with their
compute features and the hardware they were measured on. Bad input raises
:class:`CalibrationError` (a one-line message naming the trace and the parameter): an
empty trace, a phase calibration does not know, traces from different hardware mixed
without ``allow_mixed``, too few rows to fit a parameter.

The profile (:mod:`sim.calibrate.profile`) holds the calibrated cluster, the cost model,
fit quality and provenance, the machine's load around each trace included. Traces taken under
loads that differ by more than :data:`OTHERS_LIMIT` of the machine's CPU time taken by other
processes while they ran (or, for traces that did not record it, by more than :data:`LOAD_LIMIT`
in the 1-minute load average) give the profile a warning (``Profile.warnings``,
``provenance.load_warning``): it fits their mix.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sim.calibrate.compute import MIN_ROWS_TO_COMPARE, NONLINEAR_MARGIN, GroupFit, compute_rows, fit_compute
from sim.calibrate.costmodel import PhaseCostModel, TreeEnsemble
from sim.calibrate.links import LinkCalibration, fit_links, transfer_rows
from sim.calibrate.noise import compute_jitter
from sim.calibrate.profile import (
    FORMAT,
    Profile,
    cluster_table,
    is_profile,
    load_hardware_or_profile,
    load_profile,
    prepared_cost_model,
    profile_from_dict,
    provenance,
)
from sim.calibrate.sources import (
    CalibrationError,
    TraceSource,
    attribute_gaps,
    check_same_hardware,
    expand,
    features_from_plan,
    read_source,
)
from sim.costmodel import LinearCostModel
from workbench.hardware.spec import ClusterSpec

__all__ = [
    "FORMAT",
    "LOAD_LIMIT",
    "OTHERS_LIMIT",
    "CalibrationError",
    "PhaseCostModel",
    "Profile",
    "TraceSource",
    "TreeEnsemble",
    "calibrate",
    "features_from_plan",
    "is_profile",
    "load_hardware_or_profile",
    "load_profile",
    "load_warning",
    "prepared_cost_model",
    "profile_from_dict",
    "read_sources",
]

REGRESSOR_RULE = (
    f"per compute group with at least {MIN_ROWS_TO_COMPARE} rows: linear vs gradient-boosted trees correcting it "
    "(fitted to log(time / linear prediction)), 5-fold "
    "held-out mean |relative error| on the same folds; trees are used only if their error is below "
    f"{NONLINEAR_MARGIN:g} x the linear model's (more than 10% lower); otherwise, and with fewer rows, linear"
)

# Traces whose median 1-minute load averages differ by more than this were taken under different
# load. 1.0 is one more runnable process: one core's worth of other work, which on the 2-core
# machine the real runs are measured on takes a whole core from a worker; earlier sessions measured
# such load inflating real epoch times 2x or more, far more than the fit's residuals. On a machine
# with spare cores the same difference may cost the run nothing, so there the warning is cautious.
LOAD_LIMIT = 1.0
# Traces during whose runs other processes took shares of the machine's CPU time more than this apart
# were taken under different load. The load average above cannot tell: it lags a minute, so runs
# taken back to back read as loaded by their predecessors' workers (realrun.machine_cpu). A fifth
# of the machine is 0.4 of a core on the 2-core machine the real runs are measured on, where a
# worker that loses that much of its core slows by about as much.
OTHERS_LIMIT = 0.2


def read_sources(paths: list[str], *, rebuild_plans: bool = True) -> list[TraceSource]:
    """Trace files (or folders holding ``trace.parquet`` files) with their metadata."""
    return [read_source(p, rebuild_plans=rebuild_plans) for p in expand(paths)]


def calibrate(
    sources: list[TraceSource],
    cluster: ClusterSpec,
    *,
    allow_mixed: bool = False,
    keep_overlapping: bool = False,
    gaps: bool = False,
    seed: int = 0,
    command: str | None = None,
) -> Profile:
    """Fit ``cluster``'s links and a cost model to ``sources``; see the module docstring.

    ``gaps``: attribute each worker's idle gaps to the activity that follows
    (:func:`sim.calibrate.sources.attribute_gaps`: host overheads of a real run's serial workers).
    """
    if not sources:
        raise CalibrationError("no traces given")
    check_same_hardware(sources, allow_mixed)
    noise = compute_jitter(sources)  # the rows as timed, before any gap is counted to them
    if gaps:
        sources = [dataclasses.replace(s, trace=attribute_gaps(s.trace)) for s in sources]
    links = fit_links(transfer_rows(sources), cluster, keep_overlapping=keep_overlapping)
    rows, missing = compute_rows(sources, cluster)
    fits, compute_skipped = fit_compute(rows, seed) if len(rows) else ([], {})
    if not links.rows_used and not fits:
        names = ", ".join(s.name for s in sources[:3]) + (" and more" if len(sources) > 3 else "")
        if links.notes:  # rows there were, but none could fit a parameter: say why
            raise CalibrationError(f"nothing to calibrate: {'; '.join(links.notes)}")
        raise CalibrationError(
            f"{names}: no transfer between two memories and no compute row with features: nothing to calibrate "
            f"(transfers left out: {_counts(links.skipped)}; compute rows without features: {sum(missing.values())})"
        )
    cost_model = _cost_model(len(sources), fits, links)
    warning = load_warning(sources)
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": f"{cluster.name}-calibrated",
        "hardware": cluster.name,
        "provenance": provenance(sources, command, allow_mixed),
        "links": {k: v for k, v in links.kinds.items() if not k.startswith("_")},
        "sampling": _sampling_table(fits),
        "cost_model": cost_model.to_dict(),
        "fit": _fit_report(links, fits, compute_skipped, missing, gaps),
        "cluster": cluster_table(links.cluster, links.link_flags),
    }
    if noise is not None:
        data["noise"] = noise
    if warning is not None:
        data["provenance"]["load_warning"] = warning
    return Profile(links.cluster, cost_model, data, [warning] if warning else [])


def load_warning(sources: list[TraceSource]) -> str | None:
    """One line naming the least and the most loaded trace when other processes' shares of the
    machine's CPU time during their runs differ by more than :data:`OTHERS_LIMIT` (where every
    compared trace recorded it), else when their median load averages differ by more than
    :data:`LOAD_LIMIT`; None otherwise. Traces without load data are not compared: microbenchmark
    folders never have it, so naming them would be a line on nearly every mixed call."""
    recorded = [s for s in sources if s.load is not None]
    if len(recorded) < 2:
        return None
    if all(s.load.others_cpu is not None for s in recorded):
        shares = [(s.load.others_cpu, s.name) for s in recorded]
        (low, low_name), (high, high_name) = min(shares), max(shares)
        if high - low <= OTHERS_LIMIT:
            return None
        return (
            f"traces taken under different load: other processes took {low:.0%} of the machine's CPU "
            f"time while {low_name} ran and {high:.0%} while {high_name} ran, more than "
            f"{OTHERS_LIMIT:.0%} apart; the profile fits their mix, not either machine state: retake "
            "them under one load"
        )
    loaded = [(s.load.median, s.name) for s in recorded]
    (low, low_name), (high, high_name) = min(loaded), max(loaded)
    if high - low <= LOAD_LIMIT:
        return None
    return (
        f"traces taken under different load: {low_name} (load {low:.2f}) and {high_name} "
        f"(load {high:.2f}), median 1-minute load averages more than {LOAD_LIMIT:g} apart; "
        "the profile fits their mix, not either machine state: retake them under one load"
    )


def _cost_model(num_sources: int, fits: list[GroupFit], links: LinkCalibration) -> PhaseCostModel:
    """The fitted phases' models per device model, the exchange overheads, and the defaults elsewhere."""
    phases: dict[str, dict[str, Any]] = {}
    for f in fits:
        phases.setdefault(f.phase, {})[f.device_model] = f.chosen
    base = LinearCostModel()
    return PhaseCostModel(
        base.coefficients,
        f"gnnwb calibrate on {num_sources} trace(s), fallback: sim/costmodel.py defaults",
        {phase: value for phase, (value, _) in links.overheads.items()},
        phases=phases,
    )


def _sampling_table(fits: list[GroupFit]) -> dict[str, dict[str, Any]]:
    """Per host device model, what a minibatch's sampling costs (the profile's ``sampling``)."""
    return {
        f.device_model: {
            "per_minibatch": f.linear.intercept,
            "per_edge": f.linear.per_edge,
            "per_vertex": f.linear.per_vertex,
            "model": f.quality["model"],
        }
        for f in fits
        if f.phase == "sample"
    }


def _fit_report(
    links: LinkCalibration,
    fits: list[GroupFit],
    compute_skipped: dict[str, int],
    missing: dict[str, int],
    gaps: bool,
) -> dict[str, Any]:
    """The profile's ``fit``: how it was fitted, notes, rows left out and each fit's quality."""
    notes = list(links.notes)
    for name, n in missing.items():
        notes.append(
            f"{name}: {n} compute row(s) carry no features (no feature_* columns, plan.json or config.toml beside "
            "the trace): left out"
        )
    compute: dict[str, dict[str, Any]] = {}
    for f in fits:
        compute.setdefault(f.phase, {})[f.device_model] = {
            **f.quality,
            "linear": {
                k: getattr(f.linear, k)
                for k in ("intercept", "per_flop", "per_byte", "per_edge", "per_vertex")
            },
        }
    return {
        "regressor_rule": REGRESSOR_RULE,
        "weights": "relative least squares (each row weighted 1/time^2, the time the fit's own "
        "prediction, iteratively reweighted), coefficients >= 0",
        "gaps_attributed": gaps,
        "notes": notes,
        "links": links.kinds.get("_overall", {"rows": 0}),
        "skipped": {
            **{f"links_{k}": v for k, v in links.skipped.items()},
            **{f"compute_{k}": v for k, v in compute_skipped.items()},
            "compute_without_features": sum(missing.values()),
        },
        "compute": compute,
    }


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in d.items() if v) or "none"
