"""``fidelity``: the calibrated simulator against real runs on this machine (the calibration issue's table).

One point: ``gnnwb fidelity``'s experiment (:func:`studies.fidelity_experiment.fidelity`).
model-centric and hopgnn configurations (partitions x placements x fanouts) run for real on CPU
worker processes of this machine, each several times; the simulator is calibrated on one
half of the grid (a checkerboard) and predicts the other half, whose measurements it
never saw. The page puts the held-out epoch errors beside the measurement's own
run-to-run spread, and each phase's error on its own (errors of opposite sign in two
phases must not hide each other).

The quick grid keeps one placement (8 configurations, 4 held out); the full grid has both
placements (16, 8 held out) and adds 4 workers where the machine has the cores for them
(more workers than cores time-share them: the fidelity experiment's contention model,
:mod:`sim.contention`, covers those runs where the grid has fitted ones).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from sim.calibrate.fidelity import NOT_PHASES, tails_sentence
from studies.fidelity_experiment import load_sentence, noise_sentence
from studies.report import ReportPage
from studies.runner import Point, Study, register_study
from studies.study_published import overview
from studies.study_published import points as published_points
from studies.verdict import Claim, judge

NAME = "fidelity"
# Published calibrated simulators of distributed training report 3-9% average error; the
# calibration issue asks for 5% median and 15% worst on held-out configurations.
TARGET_MEDIAN, TARGET_WORST = 0.05, 0.15


def points(full: bool) -> list[Point]:
    from studies.fidelity_experiment import GRAPH, FidelityOptions

    workers = [2, 4] if full and (os.cpu_count() or 1) >= 4 else [2]
    settings = {
        "workers": workers,
        "repeats": FidelityOptions.repeats,
        "epochs": FidelityOptions.epochs,
        "iterations": 8,
        "batch": 256,
        "graph": GRAPH,
        "quick": not full,
    }
    real = Point(
        NAME,
        {"part": "real", "grid": "full" if full else "quick"},
        {"fidelity": settings},
        measure="fidelity",
    )
    # The papers' testbeds fitted to their published figures, headlines held out (the published
    # study's points: a few seconds to a minute each), so their errors are on this page too.
    fits = [
        Point(NAME, {**p.label, "part": "published"}, p.config, p.measure) for p in published_points(full)
    ]
    return [real, *fits]


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    from sim.calibrate.fidelity import plot

    parts = results["part"] if "part" in results.columns else pd.Series("real", index=results.index)
    published = results[parts == "published"]
    row = results[parts == "real"].iloc[0]
    summary, table = row["summary"], pd.DataFrame(row["table"])
    folder.mkdir(parents=True, exist_ok=True)
    images = plot(table, summary, folder)
    phases = _phase_errors(summary)
    page = ReportPage(
        "Fidelity: the calibrated simulator against real runs on this machine",
        "Published calibrated simulators of distributed training report 3-9% average error; the workbench "
        f"asks for a held-out epoch error within {TARGET_MEDIAN:.0%} in median and {TARGET_WORST:.0%} at worst. "
        f"{summary['configurations']} held-out configurations of model-centric and hopgnn on CPU worker processes "
        "(gloo over loopback), calibrated on the other half of the grid.",
    )
    page.add("Claim and figure", _claim_text(summary, table, phases))
    page.add(
        "Held-out epochs",
        table=_held_out_epochs(table),
        judgement=judge(
            Claim("the calibrated simulator predicts held-out epochs", "none of the papers", "|error|"),
            {},
            "the error target is the workbench's own (the published simulators' 3-9%), not a paper's claim; "
            "the section above says whether it is met",
        ),
    )
    shown = phases.copy()
    for column in ("share of measured busy time", "median |error|", "worst |error|", "run-to-run spread"):
        shown[column] = shown[column].map(lambda x: f"{x:.1%}")
    shown["mean signed error"] = shown["mean signed error"].map(_percent)
    page.add("Per phase (busy seconds summed over workers)", table=shown)
    for image in images:
        page.add(
            "Simulated against measured" if image.name == "scatter.png" else "Error per phase",
            image=image.name,
        )
    machine = summary.get("machine", {})
    if machine:
        page.add(
            "Machine",
            f"{machine.get('cpus')} CPUs; {load_sentence(machine)}",
        )
    page.add(
        "The papers' testbeds: held-out headline errors per paper",
        "The sections above score the simulator against this machine. The papers' own testbeds are fitted to "
        "the figures each paper published besides its headline (gnnwb calibrate --published "
        "studies/published/<paper>.toml), and each headline figure, held out of that fit, is simulated on the "
        "fitted testbed; the error is max(workbench / paper, paper / workbench). Each figure, its source and "
        "its verdict are on the 'published' study's page (reports/studies/published/index.html).",
        table=overview(published) if len(published) else None,
    )
    table.to_csv(folder / "results.csv", index=False)
    return page


def _phase_errors(summary: dict[str, Any]) -> pd.DataFrame:
    """Each phase's share of the measured busy time and its errors against the run-to-run spread."""
    return pd.DataFrame(
        [
            {
                "phase": phase,
                "share of measured busy time": v["share_of_busy"],
                "median |error|": v["median_abs_error"],
                "worst |error|": v["worst_abs_error"],
                "mean signed error": v["mean_error"],
                "run-to-run spread": v["median_spread"],
            }
            for phase, v in summary["phases"].items()
        ]
    )


def _held_out_epochs(table: pd.DataFrame) -> pd.DataFrame:
    held = table[table["quantity"] == "epoch"]
    return pd.DataFrame(
        {
            "configuration": held["config"],
            "measured (ms)": held["measured_s"] * 1e3,
            "run-to-run spread": held["spread"].map(lambda x: f"{x:.1%}"),
            "simulated (ms)": held["predicted_s"] * 1e3,
            "error": held["error"].map(_percent),
        }
    )


def _claim_text(summary: dict[str, Any], table: pd.DataFrame, phases: pd.DataFrame) -> str:
    """The target against the figure, per scheme, the ranking, and the phases that miss (with why)."""
    median, worst = summary["epoch_median_abs_error"], summary["epoch_worst_abs_error"]
    holds = median <= TARGET_MEDIAN and worst <= TARGET_WORST
    rank = summary["ranking"]
    return (
        f"Target: median |error| <= {TARGET_MEDIAN:.0%}, worst <= {TARGET_WORST:.0%}. Workbench: median "
        f"{median:.1%}, worst {worst:.1%}, mean signed {summary['epoch_mean_error']:+.1%}, against the "
        f"measurement's own run-to-run spread of {summary['epoch_median_spread']:.1%} (median) "
        f"({_target_words(holds, summary)}). "
        + "".join(
            f"{name}: median {v['median_abs_error']:.1%}, worst {v['worst_abs_error']:.1%}, mean signed "
            f"{v['mean_error']:+.1%}. "
            for name, v in summary.get("schemes", {}).items()
        )
        + f"Ranking: of {rank['pairs']} pairs of held-out "
        f"configurations, {rank['within_noise']} differ by less than their measured spread and "
        f"{rank['discordant']} of the others are ordered differently by the simulator. "
        + tails_sentence(summary)
        + " "
        + noise_sentence(summary)
        + " "
        + _phase_misses(summary, table, phases, holds)
    )


def _target_words(holds: bool, summary: dict[str, Any]) -> str:
    if summary.get("every_unreliable"):
        return "not judged: every configuration's repeats spread more than the 10% a judgement needs"
    return "target met" if holds else "target NOT met"


def _phase_misses(summary: dict[str, Any], table: pd.DataFrame, phases: pd.DataFrame, holds: bool) -> str:
    """The phases whose error exceeds their spread and, where the target is missed, the phase
    furthest off in time."""
    misses = phases[phases["median |error|"] > phases["run-to-run spread"]].sort_values(
        "share of measured busy time", ascending=False
    )
    # Where the gap comes from: each phase's simulated minus measured busy time, summed over the
    # held-out configurations; the largest in size says where the epoch error lies.
    per_phase = table[~table["quantity"].isin(NOT_PHASES)]  # iteration percentiles are not phases
    gap = (per_phase["predicted_s"] - per_phase["measured_s"]).groupby(per_phase["quantity"]).sum()
    widest = str(gap.abs().idxmax()) if len(gap) else ""
    return (
        "Phases whose median error exceeds their run-to-run spread: "
        + "; ".join(
            f"{r['phase']} ({r['mean signed error']:+.0%} mean signed, "
            f"{r['share of measured busy time']:.0%} of busy time)"
            for r in misses.to_dict("records")
        )
        + ". "
        + " ".join(why(r["phase"], r["mean signed error"]) for r in misses.to_dict("records"))
        if len(misses)
        else "Every phase's error is within its run-to-run spread."
    ) + (
        f" The phase furthest off in time, summed over the held-out configurations: {widest} "
        f"({gap[widest] * 1e3:+.1f} ms simulated against measured busy time). "
        + (why(widest, gap[widest]) if widest not in set(misses["phase"]) else "")
        if not holds and widest
        else ""
    )


# What the simulator's model of a phase leaves out of the real executor, as far as the traces
# show (the closing note of the calibration issue has the measurements behind each), by phase
# and by the sign of the miss ("+": simulated longer, "-": shorter, "": either).
WHY = {
    ("gather_remote", ""): "gather_remote: the real feature store's exchange takes three message "
    "rounds (request counts, ids, rows) and gathers the rows it serves on the same CPU; calibration "
    "fits that as a fixed cost per exchange beside the links' latency (told apart by the "
    "point-to-point microbenchmark). The workers get their rows at different times (rank 0 last, on "
    "a 2-core machine) and the iteration goes at the slowest one's pace, while the simulated workers "
    "are alike: calibration fits each exchange to its last row's end, which predicts the pace but "
    "not the spread between workers.",
    ("allreduce", "+"): "allreduce: calibration fits a collective to its last row's end (the slower "
    "worker's), so every simulated worker spends that long in it, while the measured early worker "
    "spends part of it waiting before; and without point-to-point rows (--no-microbench) the "
    "exchanges' protocol is folded into the network's latency, which the simulated ring all-reduce "
    "then pays on every step.",
    ("allreduce", "-"): "allreduce: a measured all-reduce row starts when its worker arrives, so it "
    "includes waiting for the slower worker, while the simulated collective starts when both are "
    "ready and its wait is idle time, not all-reduce.",
    ("sample", ""): "sample: a real run's sample rows time the handover of minibatches sampled before "
    "the run (hopgnn's also cuts its cells' micrographs, which the plan counts as the bytes they "
    "read and write), not sampling itself.",
    ("h2d", ""): "h2d: hopgnn's pre-gathered share is looked up by index in a host buffer before it is "
    "copied, CPU work the plan counts as a plain copy.",
}


def why(phase: str, signed: float) -> str:
    """What the model leaves out of ``phase`` when it misses by ``signed`` (empty when not known)."""
    return WHY.get((phase, "+" if signed > 0 else "-"), WHY.get((phase, ""), ""))


def _percent(x: float) -> str:
    return f"{x:+.1%}" if x == x else "n/a"


register_study(
    Study(
        NAME,
        "Fidelity: the calibrated simulator against real runs",
        "calibration issue; published calibrated simulators report 3-9% error",
        "held-out epoch time within 5% in median and 15% at worst",
        points,
        analyze,
        local_only=True,
    )
)
