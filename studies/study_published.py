"""``published``: testbeds fitted to what the papers published, their headline figures held out.

One point per paper: ``gnnwb calibrate --published`` on ``studies/published/<paper>.toml``
(:mod:`sim.calibrate.published_fit`). The named parameters of the paper's testbed are
fitted to its non-headline figures (DGL's time breakdown for HopGNN, streaming's epoch for
ROC, the chain's 2-GPU scaling for NeuGraph); the headline figures, never fitted, are then
simulated on the fitted testbed and their errors shown. A paper whose text gives nothing
the workbench can fit (the slides, paper 004's text) is simulated on the testbed as it is,
or listed with the reasons its figures are not used.

The page's claim per held-out ratio is the paper's, judged by studies/verdict.py on the
figure the fitted testbed gives. Quick and full mode run the same fits: a fit's settings
are the file's (a few seconds to a minute each), not the study's grid.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from studies.measures import PUBLISHED_FIGURES as FOLDER
from studies.report import ReportPage
from studies.runner import Point, Study, register_study
from studies.verdict import Claim, judge

NAME = "published"
RATIOS = ("speedup", "phase_ratio")  # quantities with a direction (above 1) the verdict rule can judge


def figure_files() -> list[Path]:
    return sorted(FOLDER.glob("*.toml"))


def points(full: bool) -> list[Point]:
    import hashlib

    out = []
    for path in figure_files():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        config = {"figures": path.name, "sha256": digest}  # an edited file is a new point
        out.append(Point(NAME, {"paper": path.stem}, config, measure="published-fit"))
    return out


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    folder.mkdir(parents=True, exist_ok=True)
    page = ReportPage(
        "Published testbeds: each paper's testbed fitted to its reported figures, headlines held out",
        "gnnwb calibrate --published fits a few parameters of a paper's testbed (a phase's cost, a link's "
        "bandwidth, a transfer's fixed cost) to the figures the paper reported besides its headline, by "
        "simulating the setting each was measured in; the headline figures are never fitted, and are simulated "
        "on the fitted testbed afterwards. Residuals are log(workbench / paper) over the figure's tolerance "
        "(a range: its log half-width around its geometric midpoint; one value: 10%).",
    )
    page.add("Per paper", table=overview(results))
    chart = _ratio_chart(results, folder / "ratios.png")
    if chart is not None:
        page.add("Workbench over paper, every figure", image=chart.name)
    for record in results.sort_values("paper").to_dict("records"):
        _paper_sections(page, record, folder)
    return page


def overview(results: pd.DataFrame) -> pd.DataFrame:
    """Per paper: its testbed, what was fitted, and the median error of fitted and held-out figures."""
    rows = []
    for r in results.sort_values("paper").to_dict("records"):
        figures = pd.DataFrame(r["rows"])
        used = figures[figures["role"] != "not used"] if len(figures) else figures
        fitted = used[used["role"] == "fitted"] if len(used) else used
        held = used[used["role"] != "fitted"] if len(used) else used
        rows.append(
            {
                "paper": r["paper"],
                "testbed": r["hardware"],
                "parameters fitted": ", ".join(r["parameters"]) if r.get("fitted") else "none",
                "fitted figures": len(fitted),
                "median |error| fitted": _median_factor(fitted),
                "held out": len(held),
                "median |error| held out": _median_factor(held),
                "not used": int((figures["role"] == "not used").sum()) if len(figures) else 0,
            }
        )
    return pd.DataFrame(rows)


def _median_factor(rows: pd.DataFrame) -> str:
    """The median of max(ratio, 1/ratio): how many times off a typical figure is."""
    if not len(rows) or "ratio" not in rows:
        return "-"
    factors = [max(x, 1 / x) for x in rows["ratio"] if isinstance(x, float) and x > 0 and math.isfinite(x)]
    return f"{pd.Series(factors).median():.2f}x" if factors else "-"


# Per paper: the study page and section whose ablation measures what moves its headline figures.
CAUSES = {
    "000_roc": ("roc-memory", "Where quick and full differ (ablation of the settings the modes differ in)"),
    "001_neugraph": ("neugraph", "What moves the figures toward the paper's (ablation of setting elements)"),
    "002_song_jiang": (
        "placement",
        "What moves the figures toward the slides' (ablation of one element at a time)",
    ),
    "003_hopgnn": ("hopgnn", "Ablation of the graph's locality and the testbed (Fig. 13's variants, GAT)"),
}


def _paper_sections(page: ReportPage, record: dict[str, Any], folder: Path) -> None:
    paper = record["paper"]
    text = f"{record['title']}. Testbed {record['hardware']}. "
    if record.get("fitted"):
        fits = "; ".join(
            f"{name}: {record['start'][name]:.4g} -> {record['values'][name]:.4g}"
            for name in record["parameters"]
        )
        text += (
            f"Fitted {fits} ({int(record['evaluations'])} simulation rounds, {record['seconds']:.0f} s; "
            f"{record['status']}). "
        )
        profile = folder / f"{paper}.profile.toml"
        profile.write_text(record["profile"])
        text += f"Profile: {profile.name} (a configuration's [hardware] profile, or gnnwb sim --hardware). "
    elif any(row["role"] != "not used" for row in record["rows"]):
        text += f"{record['status']}: the figures are simulated on the testbed as it is. "
    else:
        text += f"{record['status']}: nothing is simulated (the reasons are in the table). "
    text += " ".join(record.get("notes") or [])
    if paper in CAUSES:
        study, section = CAUSES[paper]
        text += (
            f" Where a held-out headline misses here, its cause is measured on the {study} study's page "
            f"(reports/studies/{study}/index.html), section '{section}'."
        )
    page.add(f"Paper {paper}", text, table=_figure_table(record["rows"]))
    for row in record["rows"]:
        judgement = _judgement(paper, row, bool(record.get("fitted")))
        if judgement is not None:
            page.add(f"Paper {paper}, {row['role']}: {row['id']}", judgement=judgement)


def _figure_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    columns = {
        "id": "figure",
        "role": "role",
        "quantity": "quantity",
        "setting": "setting",
        "paper": "paper",
        "workbench": "workbench",
        "ratio": "workbench / paper",
        "residual": "log error / tolerance",
        "source": "source",
        "reason": "why not used",
    }
    table = table[[c for c in columns if c in table.columns]].rename(columns=columns)
    if "why not used" in table:
        table["why not used"] = table["why not used"].fillna("")
    if "workbench / paper" in table:
        table["workbench / paper"] = table["workbench / paper"].map(
            lambda x: f"{x:.3g}x" if x == x else "n/a"
        )
    return table


def _judgement(paper: str, row: dict[str, Any], fitted: bool) -> Any:
    """The verdict on a held-out ratio (a speedup or a phase's time ratio): the paper's claim that
    it is above 1 and its size, judged on the fitted testbed's figure."""
    if row["role"] in ("fitted", "not used") or row["quantity"].split(" ")[0] not in RATIOS:
        return None
    low, high = row["low"], row["high"]
    testbed = "fitted testbed" if fitted else "unfitted testbed"
    claim = Claim(
        f"paper {paper}: {row['id']} ({row['setting']})",
        row["source"],
        f"{row['quantity']} on the {testbed}",
        direction="above" if low > 1 else "at_most",
        paper=(low, high),
    )
    return judge(claim, {row["setting"]: row.get("workbench", math.nan)})


def _ratio_chart(results: pd.DataFrame, path: Path) -> Path | None:
    """Workbench over paper for every used figure, log scale, with the 1.5x band the verdicts use."""
    rows = [
        (f"{r['paper'][:3]} {row['id']}{'' if r.get('fitted') else ' (unfitted)'}", row["ratio"], row["role"])
        for r in results.sort_values("paper").to_dict("records")
        for row in r["rows"]
        if row["role"] != "not used" and isinstance(row.get("ratio"), float) and row["ratio"] > 0
    ]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"fitted": "#4c72b0", "headline": "#dd8452", "held out": "#55a868"}
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.6))
    y = range(len(rows))
    ends = [math.log10(r[1]) for r in rows]
    ax.barh(list(y), ends, color=[colours[r[2]] for r in rows], zorder=3)
    # A tick at each bar's end, so a figure the workbench meets exactly still shows.
    ax.scatter(ends, list(y), marker="|", s=120, color="#222", zorder=5)
    ax.set_yticks(list(y), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    band = math.log10(1.5)
    ax.axvspan(-band, band, color="#999", alpha=0.2, label="within 1.5x of the paper", zorder=1)
    ax.axvline(0, color="#333", linewidth=0.8, zorder=4)
    widest = max(abs(math.log10(r[1])) for r in rows)
    ticks = [t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8) if abs(math.log10(t)) <= max(widest, band) + 0.2]
    ax.set_xlim(-max(widest, band) - 0.05, max(widest, band) + 0.05)
    ax.set_xticks([math.log10(t) for t in ticks], [f"{t:g}x" for t in ticks])
    ax.set_xlabel("workbench / paper (log scale)")
    ax.set_title("Published figures: the workbench's value over the paper's, per figure", fontsize=10)
    for role, colour in colours.items():
        ax.barh([0], [0], color=colour, label=role)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


register_study(
    Study(
        NAME,
        "Published testbeds: fitted to the papers' reported figures",
        "papers 000-004: the figures they reported besides their headlines",
        "a testbed fitted to a paper's non-headline figures predicts its headline figures",
        points,
        analyze,
    )
)
