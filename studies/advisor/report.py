"""The ``gnnwb advise`` page: the recommendation, the ranking, the Pareto front, where the time
goes, the winner's timeline, the real runs that confirm it and what was not simulated.

Reads only the advice table (:func:`studies.advisor.advice.advice_table`'s columns), the winner's
trace (the trace schema) and the run's description, so a page can be rewritten from the files
``gnnwb advise`` keeps. Every figure is written beside ``index.html``; no cell or sentence may say
NaN: a missing figure reads as a dash or says why it is missing.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.plots import pyplot, save
from studies.report import ReportPage
from workbench.plan import PHASES
from workbench.timeline import write_chrome_trace

DASH = "—"
TOP = 15  # rows of the ranking table: the rest are in advice.csv
BREAKDOWN_TOP = 5
TIMELINE_ITERATIONS = 3
TIMELINE_ROWS = 48  # beyond this a Gantt chart's rows are too thin to read
PARETO_LABELS = 8
# The advice table's columns that end in _s but are not a phase's busy seconds.
NOT_PHASES = {
    "epoch_s",
    "epoch_low_s",
    "epoch_high_s",
    "preprocess_s",
    "train_s",
    "train_low_s",
    "train_high_s",
}
PHASE_WORDS = {
    "sample": "sampling",
    "gather_local": "local feature gather",
    "gather_remote": "remote feature gather",
    "h2d": "host-to-GPU copy",
    "d2h": "GPU-to-host copy",
    "d2d": "GPU-to-GPU copy",
    "forward": "forward",
    "backward": "backward",
    "allreduce": "gradient all-reduce",
    "alltoall": "all-to-all",
    "migrate": "migration",
    "update": "optimizer update",
    "swap": "swap",
    "other": "other",
}
# The page's tables put the candidate second and a word last; those read left to right like the words tables.
_EXTRA_STYLE = (
    "td:nth-child(2), th:nth-child(2) { text-align: left; }\n"
    # Figures and intervals on one line each, so the candidate's name gets the width it needs.
    "table:not(.words) td:not(:nth-child(2)):not(:last-child) { white-space: nowrap; }\n"
    "table:not(.words) td:nth-child(2) { min-width: 15rem; }\n"
    # The last column of these tables is a word (tied, a trade-off, the order's note), not a figure.
    "table:not(.words) td:last-child, table:not(.words) th:last-child { text-align: left; }\n"
)
# Files this page writes only sometimes: a stale one from an earlier run must not look current.
_OPTIONAL_FILES = ("pareto.png", "breakdown.png", "timeline.png", "winner.perfetto.json", "confirm.png")


def write_report(
    table: pd.DataFrame,
    winner_trace: pd.DataFrame | None,
    meta: dict[str, Any],
    out: Path,
    confirm: pd.DataFrame | None = None,
) -> Path:
    """Write ``out/index.html`` and its figures; return the page's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in _OPTIONAL_FILES:
        (out / name).unlink(missing_ok=True)
    table = _normalised(table)
    sim = table[table["skipped"] == ""].sort_values("rank", kind="stable")
    skipped = table[table["skipped"] != ""]
    epochs = _epochs(meta)
    page = ReportPage(
        f"gnnwb advise: {_meta(meta, 'graph')} on {_meta(meta, 'hardware')}", _summary(sim, skipped, meta)
    )
    page.add("Recommendation", _recommendation(sim, epochs))
    _add_ranking(page, sim, epochs)
    _add_pareto(page, sim, epochs, out)
    _add_breakdown(page, sim, out)
    _add_timeline(page, winner_trace, out)
    if confirm is not None:
        _add_confirm(page, confirm, out)
    _add_not_simulated(page, skipped)
    _add_how_searched(page, meta)
    text = page.render().replace("</style>", _EXTRA_STYLE + "</style>", 1)
    path = out / "index.html"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- reading the inputs


def _normalised(table: pd.DataFrame) -> pd.DataFrame:
    """The table with ``skipped`` as text ("" when simulated: a CSV reads it back as NaN) and the
    flags as booleans (a skipped row's are missing)."""
    t = table.copy()
    t["skipped"] = t["skipped"].fillna("").astype(str).str.strip() if "skipped" in t else ""
    for flag in ("tied_with_first", "pareto", "exact"):
        t[flag] = t[flag].fillna(False).astype(bool) if flag in t else False
    if "rank" not in t:
        t["rank"] = 0
    t["rank"] = pd.to_numeric(t["rank"], errors="coerce").fillna(0).astype(int)
    if "label" not in t:
        t["label"] = [f"candidate {i + 1}" for i in range(len(t))]
    t["label"] = t["label"].fillna("").astype(str)
    return t


def _meta(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return "not given" if value is None or str(value).strip() == "" else str(value)


def _epochs(meta: dict[str, Any]) -> int | None:
    try:
        return int(meta["epochs"])
    except (KeyError, TypeError, ValueError):
        return None


def _train_words(epochs: int | None) -> str:
    if epochs is None:
        return "time to train (epochs not given)"
    return f"time to train {epochs} epoch{'s' if epochs != 1 else ''}"


def phase_columns(table: pd.DataFrame) -> list[str]:
    """The phase busy-seconds columns with any time in them, in the plan's phase order."""
    found = [c for c in table.columns if c.endswith("_s") and c not in NOT_PHASES]
    found = [c for c in found if (pd.to_numeric(table[c], errors="coerce").fillna(0) > 0).any()]
    order = {f"{p}_s": i for i, p in enumerate(PHASES)}
    return sorted(found, key=lambda c: (order.get(c, len(order)), c))


def _phase_name(phase: str) -> str:
    return PHASE_WORDS.get(phase, phase.replace("_", " "))


def _phase_colour(phase: str) -> Any:
    """One colour per phase, the same in the breakdown and the timeline."""
    cmap = pyplot().get_cmap("tab20")
    index = PHASES.index(phase) if phase in PHASES else len(PHASES) + sum(map(ord, phase)) % 6
    return cmap(index % 20)


# ---------------------------------------------------------------- numbers in words


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def num(value: Any, digits: int = 3) -> str:
    """``digits`` significant figures without exponents (0.000502, 23.1, 1,140); a dash when missing."""
    if not _finite(value):
        return DASH
    v = float(value)
    if abs(v) >= 10**digits:
        return f"{v:,.0f}"
    return str(np.format_float_positional(v, precision=digits, unique=False, fractional=False, trim="-"))


def duration(seconds: Any) -> str:
    """A time in the unit that reads best: 238 ms, 12.3 s, 4.1 min, 2.5 h."""
    if not _finite(seconds):
        return "not known"
    s = float(seconds)
    for limit, scale, unit in ((1.0, 1e3, "ms"), (120.0, 1.0, "s"), (7200.0, 1 / 60, "min")):
        if abs(s) < limit:
            return f"{num(s * scale)} {unit}"
    return f"{num(s / 3600)} h"


def _interval(low: Any, high: Any, scale: float = 1.0) -> str:
    if not (_finite(low) and _finite(high)):
        return DASH
    return f"{num(float(low) * scale)}–{num(float(high) * scale)}"


def _percent(value: Any) -> str:
    return f"{num(100 * float(value), 2)}%" if _finite(value) else DASH


def _iterations(row: pd.Series) -> str:
    if bool(row.get("exact", False)):
        return "whole epoch"
    done, total = row.get("iterations_simulated"), row.get("epoch_iterations")
    if not (_finite(done) and _finite(total)):
        return DASH
    return f"{int(done)} of {int(total)}"


def _short(label: str, rank: int) -> str:
    return f"#{rank} {label}"


# ---------------------------------------------------------------- the words


def _summary(sim: pd.DataFrame, skipped: pd.DataFrame, meta: dict[str, Any]) -> str:
    first = f" First choice: {sim.iloc[0]['label']}." if len(sim) else " No candidate could be simulated."
    return (
        f"Training {_meta(meta, 'model')} on {_meta(meta, 'graph')} with {_meta(meta, 'hardware')}: "
        f"{len(sim)} candidate{'s' if len(sim) != 1 else ''} simulated and ranked by the time to train "
        f"{_meta(meta, 'epochs')} epochs, {len(skipped)} not simulated.{first}"
    )


def _recommendation(sim: pd.DataFrame, epochs: int | None) -> str:
    if sim.empty:
        return "No candidate was simulated, so there is nothing to recommend: see 'Not simulated' for why."
    first = sim.iloc[0]
    batch = first.get("batch_size")
    batch_words = "full-graph training" if _finite(batch) and int(batch) == 0 else f"batch size {num(batch)}"
    words = [
        f"First choice: {first['label']} ({batch_words}).",
        f"Its {_train_words(epochs)} is {duration(first.get('train_s'))} (interval "
        f"{duration(first.get('train_low_s'))} to {duration(first.get('train_high_s'))}): preprocessing "
        f"{duration(first.get('preprocess_s'))} plus {duration(first.get('epoch_s'))} per epoch, the epoch "
        + ("simulated whole." if first["exact"] else f"estimated from {_iterations(first)} iterations."),
        _interval_words(first),
        _ties_words(sim),
    ]
    return " ".join(words)


def _interval_words(row: pd.Series) -> str:
    variation, fidelity = row.get("variation"), row.get("fidelity_error")
    measured = _finite(fidelity) and float(fidelity) > 0
    fid = f"the simulator's measured fidelity error ({_percent(fidelity)})"
    timed = "preprocessing is timed, not estimated"
    if bool(row.get("exact", False)):
        if not measured:
            return (
                "The interval is empty: the epoch was simulated whole and no profile gave the simulator's "
                "measured fidelity error, so nothing here bounds the simulator's own error."
            )
        return (
            f"The interval is {fid} over the epochs (the epoch was simulated whole, so no per-iteration "
            f"variation adds to it; {timed})."
        )
    fid = fid if measured else "no measured fidelity error (no profile gave one)"
    return (
        f"The interval combines the prefix's error (the whole epoch may be up to {_percent(row.get('prefix_up'))} "
        f"longer or {_percent(row.get('prefix_down'))} shorter than the estimate from {_iterations(row)} "
        f"iterations: their variation, {_percent(variation)}, and the bias measured for prefixes of that "
        f"length on other graphs) with {fid}, in quadrature, over the epochs ({timed})."
    )


def _ties_words(sim: pd.DataFrame) -> str:
    if len(sim) == 1:
        return "It is the only candidate simulated."
    first, rest = sim.iloc[0], sim.iloc[1:]
    tied = rest[rest["tied_with_first"]]
    if tied.empty:
        runner = rest.iloc[0]
        ahead = (
            f"{num(100 * (float(runner['train_s']) / float(first['train_s']) - 1), 2)}%"
            if _finite(runner.get("train_s"))
            and _finite(first.get("train_s"))
            and float(first["train_s"]) > 0
            else "an unknown margin"
        )
        return (
            f"No candidate is tied with it: it is ahead of the runner-up, {runner['label']} "
            f"({duration(runner.get('train_s'))}), by {ahead}, and their intervals do not overlap."
        )
    names = [f"{r['label']} ({duration(r.get('train_s'))})" for _, r in tied.head(3).iterrows()]
    more = f", and {len(tied) - 3} more (see the ranking)" if len(tied) > 3 else ""  # a sentence, not a list
    verb = "is" if len(tied) == 1 else "are"
    return (
        f"Tied with it: {len(tied)} candidate{'s' if len(tied) != 1 else ''} {verb} tied, their intervals "
        f"overlapping its own, so the simulation cannot tell them apart: {'; '.join(names)}{more}. "
        "Choose among the tied ones on memory, network or convenience."
    )


# ---------------------------------------------------------------- the tables


def _add_ranking(page: ReportPage, sim: pd.DataFrame, epochs: int | None) -> None:
    if sim.empty:
        page.add("Ranking", "No candidate was simulated.")
        return
    top = sim.head(TOP)
    # Each column in the unit its own values read best in: a preprocessing of 0.5 ms is 0.5, not 0.000502.
    pre, pre_unit = _column_unit(top, "preprocess_s")
    train, train_unit = _column_unit(top, "train_s")
    rows = [
        {
            "rank": str(int(r["rank"])),
            "candidate": r["label"],
            "epoch (ms)": num(1e3 * float(r.get("epoch_s", math.nan))),
            "interval (ms)": _interval(r.get("epoch_low_s"), r.get("epoch_high_s"), 1e3),
            f"pre-processing ({pre_unit})": num(float(r.get("preprocess_s", math.nan)) * pre),
            f"{_train_words(epochs)} ({train_unit})": num(float(r.get("train_s", math.nan)) * train),
            f"its interval ({train_unit})": _interval(r.get("train_low_s"), r.get("train_high_s"), train),
            "peak GPU memory (MiB)": num(float(r.get("peak_gpu_bytes", math.nan)) / 2**20),
            "network (MB)": num(float(r.get("network_bytes", math.nan)) / 1e6),
            "simulated iterations": _iterations(r),
            "tied with #1": _tie_word(r, k == 0),
        }
        for k, (_, r) in enumerate(top.iterrows())
    ]
    shown = f"the first {len(top)} of {len(sim)}" if len(sim) > len(top) else f"all {len(sim)}"
    page.add(
        "Ranking",
        f"The simulated candidates by {_train_words(epochs)}, {shown} (advice.csv has every one). Peak GPU "
        "memory is the busiest GPU's; network is the bytes that cross machines in one epoch. Tied: its "
        "interval overlaps the first choice's.",
        table=pd.DataFrame(rows),
    )


def _column_unit(table: pd.DataFrame, column: str) -> tuple[float, str]:
    """Milliseconds when every value of ``column`` is under a second, else seconds."""
    values = pd.to_numeric(table[column], errors="coerce") if column in table else pd.Series(dtype=float)
    largest = values.abs().max()
    return (1e3, "ms") if _finite(largest) and largest < 1.0 else (1.0, "s")


def _tie_word(row: pd.Series, first: bool) -> str:
    if first:
        return "first choice"
    return "tied" if bool(row["tied_with_first"]) else "slower"


def _front_reasons(front: pd.DataFrame) -> dict[Any, str]:
    """Why each front point is there: the best at one objective, or a trade-off between them."""
    reasons: dict[Any, list[str]] = {i: [] for i in front.index}
    for column, words in (
        ("train_s", "fastest"),
        ("peak_gpu_bytes", "least GPU memory"),
        ("network_bytes", "least network"),
    ):
        values = pd.to_numeric(front[column], errors="coerce")
        if values.notna().any():
            for i in front.index[values == values.min()]:
                reasons[i].append(words)
    return {i: ", ".join(r) if r else "a trade-off" for i, r in reasons.items()}


def _add_not_simulated(page: ReportPage, skipped: pd.DataFrame) -> None:
    if skipped.empty:
        page.add("Not simulated", "Every candidate in the search space was simulated.")
        return
    # Reasons that differ only in their figures (bytes needed, a GPU's size) are one reason.
    key = skipped["skipped"].map(lambda s: re.sub(r"\d+(?:[.,]\d+)*", "#", s))
    rows = []
    for _, group in skipped.groupby(key, sort=False):
        rows.append(
            {
                "why (an example)": group["skipped"].iloc[0],
                "candidate (an example)": group["label"].iloc[0],
                "candidates": str(len(group)),
            }
        )
    rows.sort(key=lambda r: -int(r["candidates"]))
    page.add(
        "Not simulated",
        f"{len(skipped)} candidate{'s' if len(skipped) != 1 else ''} of the search space "
        f"{'were' if len(skipped) != 1 else 'was'} not simulated, grouped by why (advice.csv lists each).",
        table=pd.DataFrame(rows),
    )
    page.sections[-1].words = True


def _add_how_searched(page: ReportPage, meta: dict[str, Any]) -> None:
    rows = [
        ("graph", _meta(meta, "graph")),
        ("hardware", _meta(meta, "hardware")),
        ("model", _meta(meta, "model")),
        ("epochs", _meta(meta, "epochs")),
        ("search", _meta(meta, "search")),
        ("fidelity error from", _meta(meta, "fidelity_source")),
    ]
    not_searched = meta.get("not_searched")
    if isinstance(not_searched, str):
        not_searched = [not_searched]
    for sentence in not_searched or ["not given"]:
        rows.append(("not searched", str(sentence)))
    page.add(
        "How this was searched",
        "The command below rewrites this page.",
        table=pd.DataFrame(rows, columns=["what", "detail"]),
        code=_meta(meta, "command"),
    )
    page.sections[-1].words = True


# ---------------------------------------------------------------- the Pareto front


def _add_pareto(page: ReportPage, sim: pd.DataFrame, epochs: int | None, out: Path) -> None:
    front = sim[sim["pareto"]]
    if sim.empty or front.empty:
        why = "no candidate was simulated" if sim.empty else "the table marks no candidate on it"
        page.add("Pareto front", f"There is no Pareto front to show: {why}.")
        return
    labelled = _pick_labels(front)
    _pareto_figure(sim, front, labelled, epochs, out / "pareto.png")
    reasons = _front_reasons(front)
    rows = [
        {
            "rank": str(int(r["rank"])),
            "candidate": r["label"],
            f"{_train_words(epochs)} (s)": num(r.get("train_s")),
            "peak GPU memory (MiB)": num(float(r.get("peak_gpu_bytes", math.nan)) / 2**20),
            "network (MB)": num(float(r.get("network_bytes", math.nan)) / 1e6),
            "on the front as": reasons[i],
        }
        for i, r in front.iterrows()
    ]
    numbered = (
        "every front point is numbered by its rank"
        if len(labelled) == len(front)
        else f"{len(labelled)} of the {len(front)} front points are numbered by rank (the fastest, the "
        "leanest in memory and in network, and some between); the table lists them all"
    )
    page.add(
        "Pareto front",
        f"{len(front)} of {len(sim)} candidates are on the Pareto front: no other candidate is at least as "
        "good in time to train, peak GPU memory and network traffic together and better in one. The plot "
        f"shows two of the three; colour is the third; {numbered}.",
        image="pareto.png",
        table=pd.DataFrame(rows),
    )


def _pick_labels(front: pd.DataFrame, limit: int = PARETO_LABELS) -> pd.DataFrame:
    """At most ``limit`` front points to number: the best at each objective, then evenly by time."""
    if len(front) <= limit:
        return front
    must = [
        pd.to_numeric(front[c], errors="coerce").idxmin()
        for c in ("train_s", "peak_gpu_bytes", "network_bytes")
    ]
    must = list(dict.fromkeys(i for i in must if i in front.index))
    rest = [i for i in front.sort_values("train_s").index if i not in must]
    k = limit - len(must)
    picks = [rest[round(j * (len(rest) - 1) / (k - 1))] for j in range(k)] if k > 1 else rest[:k]
    return front.loc[list(dict.fromkeys(must + picks))].sort_values("rank")


def _pareto_figure(
    sim: pd.DataFrame, front: pd.DataFrame, labelled: pd.DataFrame, epochs: int | None, path: Path
) -> None:
    plt = pyplot()
    fig = plt.figure(figsize=(10, 6.4))
    ax = fig.add_axes((0.08, 0.33, 0.74, 0.61))  # fixed: the labels are placed in these pixels
    cax = fig.add_axes((0.84, 0.33, 0.02, 0.61))
    x = pd.to_numeric(sim["train_s"], errors="coerce").to_numpy(dtype=float)
    y = pd.to_numeric(sim["peak_gpu_bytes"], errors="coerce").to_numpy(dtype=float) / 2**20
    net = pd.to_numeric(sim["network_bytes"], errors="coerce").to_numpy(dtype=float) / 1e6
    on = sim["pareto"].to_numpy(dtype=bool)
    known = net[np.isfinite(net)]
    low, high = (known.min(), known.max()) if known.size else (0.0, 1.0)
    norm = plt.Normalize(low, high if high > low else low + 1)
    style = {"c": np.nan_to_num(net, nan=low), "cmap": "viridis", "norm": norm}
    ax.scatter(x[~on], y[~on], **{**style, "c": style["c"][~on]}, s=22, alpha=0.55, linewidths=0)
    points = ax.scatter(
        x[on], y[on], **{**style, "c": style["c"][on]}, s=75, edgecolors="black", linewidths=1.2
    )
    fig.colorbar(points, cax=cax, label="network traffic per epoch (MB)")
    _set_limits(ax, x, y)
    ax.set_xlabel(f"{_train_words(epochs)} (s)")
    ax.set_ylabel("peak GPU memory, busiest GPU (MiB)")
    ax.set_title("Time to train against peak GPU memory (colour: network traffic)", fontsize=10)
    ax.grid(alpha=0.3)
    _place_labels(fig, ax, labelled, np.column_stack([x, y]))
    _pareto_key(fig, labelled)
    save(fig, path)


def _pareto_key(fig: Any, labelled: pd.DataFrame) -> None:
    """Below the axes, where it covers no point: what the markers mean and which candidate each number is."""
    from matplotlib.lines import Line2D

    front = Line2D([], [], marker="o", linestyle="none", markerfacecolor="#bbb", markeredgecolor="black")
    other = Line2D([], [], marker="o", linestyle="none", markerfacecolor="#bbb", markeredgewidth=0, alpha=0.6)
    markers = fig.legend(
        [front, other],
        ["on the Pareto front (#: its rank)", "other simulated candidates"],
        loc="upper left",
        bbox_to_anchor=(0.08, 0.215),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    fig.add_artist(markers)
    key = [f"#{int(r['rank'])}: {r['label']}" for _, r in labelled.iterrows()]
    fig.legend(
        [Line2D([], [], linestyle="none")] * len(key),
        key,
        loc="upper left",
        bbox_to_anchor=(0.08, 0.165),
        ncol=2,
        fontsize=8,
        handlelength=0,
        handletextpad=0,
        frameon=False,
    )


def _set_limits(ax: Any, x: np.ndarray, y: np.ndarray) -> None:
    """Limits with room for the numbers around the outermost points."""
    for values, setter in ((x, ax.set_xlim), (y, ax.set_ylim)):
        finite = values[np.isfinite(values)]
        low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
        pad = 0.08 * (high - low) if high > low else 0.1 * max(abs(high), 1e-9)
        setter(low - pad, high + pad)


def _place_labels(fig: Any, ax: Any, labelled: pd.DataFrame, points: np.ndarray) -> None:
    """Number the chosen points, each where its text covers no point and no other number: tried at
    growing distances in eight directions, with a line back to the point when it had to move away."""
    to_px = ax.transData.transform
    scale = fig.dpi / 72.0
    finite = points[np.isfinite(points).all(axis=1)]
    dots = to_px(finite) if len(finite) else np.empty((0, 2))
    box = ax.get_window_extent()
    placed: list[tuple[float, float, float, float]] = []
    for _, r in labelled.iterrows():
        text = f"#{int(r['rank'])}"
        xy = (float(r["train_s"]), float(r["peak_gpu_bytes"]) / 2**20)
        if not all(map(math.isfinite, xy)):
            continue
        px, py = to_px(xy)
        w, h = 0.62 * 8 * len(text) * scale, 1.3 * 8 * scale
        best = None
        for radius in (7, 12, 18, 26, 36, 48):
            for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0)):
                ox, oy = dx * radius * scale, dy * radius * scale
                left = px + ox - (w if dx < 0 else 0 if dx > 0 else w / 2)
                bottom = py + oy - (h if dy < 0 else 0 if dy > 0 else h / 2)
                rect = (left, bottom, left + w, bottom + h)
                if _free(rect, dots, placed, box):
                    best = (ox / scale, oy / scale, rect, dx, dy)
                    break
            if best:
                break
        if best is None:  # crowded everywhere: the nearest spot, overlapping
            best = (6.0, 6.0, (px + 6 * scale, py + 6 * scale, px + 6 * scale + w, py + 6 * scale + h), 1, 1)
        ox, oy, rect, dx, dy = best
        placed.append(rect)
        ax.annotate(
            text,
            xy,
            xytext=(ox, oy),
            textcoords="offset points",
            ha="right" if dx < 0 else "left" if dx > 0 else "center",
            va="top" if dy < 0 else "bottom" if dy > 0 else "center",
            fontsize=8,
            # Always a line back to the point: with points close together, nearness alone is ambiguous.
            arrowprops={"arrowstyle": "-", "color": "#555", "lw": 0.7, "shrinkA": 0, "shrinkB": 4.5},
        )


def _free(rect: tuple[float, float, float, float], dots: np.ndarray, placed: list, box: Any) -> bool:
    left, bottom, right, top = rect
    if left < box.x0 or right > box.x1 or bottom < box.y0 or top > box.y1:
        return False
    margin = 4.0
    if (
        len(dots)
        and (
            (dots[:, 0] > left - margin)
            & (dots[:, 0] < right + margin)
            & (dots[:, 1] > bottom - margin)
            & (dots[:, 1] < top + margin)
        ).any()
    ):
        return False
    return not any(left < r[2] and r[0] < right and bottom < r[3] and r[1] < top for r in placed)


# ---------------------------------------------------------------- where the time goes


def _add_breakdown(page: ReportPage, sim: pd.DataFrame, out: Path) -> None:
    top = sim.head(BREAKDOWN_TOP)
    phases = phase_columns(top)
    if top.empty or not phases:
        page.add("Where the time goes", "No phase times were recorded for the simulated candidates.")
        return
    _breakdown_figure(top, phases, out / "breakdown.png")
    page.add(
        "Where the time goes",
        f"Busy time per phase over one epoch for the first {len(top)} candidates. Busy seconds are summed "
        "over workers (and over a worker's engines, which run at once), so a bar can be longer than the "
        "epoch itself (the black tick: the epoch's wall-clock time); what matters is which phases dominate.",
        image="breakdown.png",
    )


def _time_unit(seconds: float) -> tuple[float, str]:
    return (1e3, "ms") if seconds < 1.0 else (1.0, "s")


def _breakdown_figure(top: pd.DataFrame, phases: list[str], path: Path) -> None:
    plt = pyplot()
    values = top[phases].apply(pd.to_numeric, errors="coerce").fillna(0.0).to_numpy(dtype=float)
    epoch = pd.to_numeric(top["epoch_s"], errors="coerce").to_numpy(dtype=float)
    scale, unit = _time_unit(float(np.nanmax([values.sum(axis=1).max(), np.nanmax(epoch)])))
    fig, ax = plt.subplots(figsize=(11, 1.3 + 0.62 * len(top)))
    y = np.arange(len(top))
    left = np.zeros(len(top))
    for k, column in enumerate(phases):
        phase = column[: -len("_s")]
        ax.barh(y, values[:, k] * scale, 0.6, left=left, color=_phase_colour(phase), label=_phase_name(phase))
        left += values[:, k] * scale
    ax.scatter(
        epoch * scale, y, marker="|", s=500, color="black", linewidths=2, label="epoch (wall clock)", zorder=3
    )
    labels = [textwrap.fill(_short(r["label"], int(r["rank"])), 42) for _, r in top.iterrows()]
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()  # the first choice on top
    ax.set_xlabel(f"busy time over one epoch, summed over workers ({unit})")
    ax.set_title(f"Where the time goes: the first {len(top)} candidates' phases", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save(fig, path)


# ---------------------------------------------------------------- the winner's timeline


def _add_timeline(page: ReportPage, trace: pd.DataFrame | None, out: Path) -> None:
    if trace is None or len(trace) == 0:
        page.add("Timeline of the winner", "No trace of the first choice was given, so there is no timeline.")
        return
    write_chrome_trace(trace, out / "winner.perfetto.json")
    shown = _timeline_figure(trace, out / "timeline.png")
    link = "<a href='winner.perfetto.json'>winner.perfetto.json</a>"
    how = html.escape(
        "Open https://ui.perfetto.dev, choose 'Open trace file' and pick this file (it stays on your "
        "machine: Perfetto reads it in the browser). One process per worker, one row per device and engine; "
        "click a slice for its phase, iteration, bytes and queueing time."
    )
    page.add(
        "Timeline of the winner",
        f"The first choice's simulated trace, {shown}: one row per worker, device and engine, coloured by "
        "phase; overlapping slices on one row are transfers in flight together. The whole trace is in the "
        "file below, for zooming in.",
        image="timeline.png",
        table=pd.DataFrame([{"file": link, "how to open it": how}]),
        escape=False,
    )
    page.sections[-1].words = True


def _timeline_figure(trace: pd.DataFrame, path: Path) -> str:
    """The Gantt chart of the first iterations; returns what it shows, in words."""
    plt = pyplot()
    df = trace.copy()
    df["engine"] = df["engine"].astype(str) if "engine" in df else df["phase"].astype(str)
    iterations = sorted(df["iteration"].unique())
    keep = iterations[:TIMELINE_ITERATIONS]
    df = df[df["iteration"].isin(keep)]
    rows = sorted(set(zip(df["worker"].astype(int), df["device"].astype(str), df["engine"], strict=True)))
    workers = sorted({w for w, _, _ in rows})
    shown_workers = workers
    while len(rows) > TIMELINE_ROWS and len(shown_workers) > 1:  # fewer workers, rows still readable
        shown_workers = shown_workers[:-1]
        rows = [r for r in rows if r[0] in shown_workers]
    df = df[df["worker"].isin(shown_workers)]
    t0 = float(df["start"].min())
    scale, unit = _time_unit(float(df["end"].max()) - t0)
    fig, ax = plt.subplots(figsize=(12, 1.6 + 0.3 * len(rows)))
    index = {r: k for k, r in enumerate(rows)}
    for phase, group in df.groupby("phase", sort=False):
        for row, part in group.groupby(
            [group["worker"].astype(int), group["device"].astype(str), group["engine"]]
        ):
            if row not in index:
                continue
            spans = [
                ((s - t0) * scale, (e - s) * scale) for s, e in zip(part["start"], part["end"], strict=True)
            ]
            ax.broken_barh(spans, (index[row] - 0.38, 0.76), facecolors=_phase_colour(str(phase)), alpha=0.8)
    _iteration_marks(ax, df, t0, scale)
    _timeline_legend(ax, df)
    ax.set_yticks(range(len(rows)), [f"worker {w} · {d} · {e}" for w, d, e in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(f"time since the first task started ({unit})")
    words = _iteration_words(keep, len(iterations))
    ax.set_title(f"Timeline of the first choice: {words}", fontsize=10, pad=14)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save(fig, path)
    if len(shown_workers) < len(workers):
        words += f", workers {shown_workers[0]} to {shown_workers[-1]} of {len(workers)}"
    return words


def _iteration_words(keep: list, total: int) -> str:
    """Which iterations the chart shows; a sampled estimate's iterations need not be consecutive."""
    of = f" of the {total} simulated" if total > len(keep) else ""
    numbers = [int(i) for i in keep]
    if len(numbers) == 1:
        return f"iteration {numbers[0]}{of}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"iterations {numbers[0]} to {numbers[-1]}{of}"
    return f"iterations {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}{of}"


def _iteration_marks(ax: Any, df: pd.DataFrame, t0: float, scale: float) -> None:
    """A dashed line where each iteration's first task starts, when more than one is shown."""
    starts = df.groupby("iteration")["start"].min().sort_index()
    if len(starts) < 2:
        return
    for iteration, start in starts.items():
        ax.axvline((start - t0) * scale, color="#444", linestyle="--", linewidth=0.8)
        ax.annotate(
            f"iteration {int(iteration)}",
            ((start - t0) * scale, 1),  # above the axes: inside, it would cover the first row's slices
            xycoords=("data", "axes fraction"),
            xytext=(2, 2),
            textcoords="offset points",
            va="bottom",
            fontsize=7,
            color="#444",
        )


def _timeline_legend(ax: Any, df: pd.DataFrame) -> None:
    from matplotlib.patches import Patch

    present = set(df["phase"].astype(str))
    ordered = [p for p in PHASES if p in present] + sorted(present - set(PHASES))
    handles = [Patch(facecolor=_phase_colour(p), alpha=0.8, label=_phase_name(p)) for p in ordered]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


# ---------------------------------------------------------------- confirmed by real runs


def _add_confirm(page: ReportPage, confirm: pd.DataFrame, out: Path) -> None:
    if confirm.empty:
        page.add("Confirmed by real runs", "No candidate was run for real.")
        return
    c = confirm.sort_values("predicted_rank", kind="stable") if "predicted_rank" in confirm else confirm
    _confirm_figure(c, out / "confirm.png")
    rows = []
    for _, r in c.iterrows():
        pred, meas = r.get("predicted_s"), r.get("measured_s")
        error = (
            f"{num(100 * (float(pred) / float(meas) - 1), 2)}%"
            if _finite(pred) and _finite(meas) and float(meas) > 0
            else DASH
        )
        rows.append(
            {
                "predicted rank": num(r.get("predicted_rank")),
                "candidate": str(r.get("label", DASH)),
                "predicted epoch (s)": num(pred),
                "its interval (s)": _interval(r.get("predicted_low_s"), r.get("predicted_high_s")),
                "measured epoch (s)": num(meas),
                "run-to-run spread": f"±{_percent(r.get('measured_spread'))}"
                if _finite(r.get("measured_spread"))
                else DASH,
                "prediction error": error,
                "measured rank": num(r.get("measured_rank")),
                "order": _order_words(r.get("order_note")),
            }
        )
    wrong = sum(str(r.get("order_note", "")).startswith("wrong") for _, r in c.iterrows())
    verdict = (
        "The measured order agrees with the predicted one (or differs only within noise)."
        if not wrong
        else f"The measured order contradicts the predicted one for {wrong} "
        f"candidate{'s' if wrong != 1 else ''}: marked 'wrong' below and in red in the plot."
    )
    page.add(
        "Confirmed by real runs",
        f"The first {len(c)} candidates run for real and timed: one epoch's time, the median of the warm "
        f"epochs (the first left out), against the simulated epoch. Prediction error is predicted / "
        f"measured - 1. {verdict}",
        image="confirm.png",
        table=pd.DataFrame(rows),
    )


def _order_words(note: Any) -> str:
    text = "" if note is None or (isinstance(note, float) and math.isnan(note)) else str(note).strip()
    return text or "not judged"


def _confirm_figure(c: pd.DataFrame, path: Path) -> None:
    plt = pyplot()
    n = len(c)
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.55 * n))
    y = np.arange(n)
    pred = pd.to_numeric(c.get("predicted_s"), errors="coerce").to_numpy(dtype=float)
    low = pd.to_numeric(c.get("predicted_low_s"), errors="coerce").to_numpy(dtype=float)
    high = pd.to_numeric(c.get("predicted_high_s"), errors="coerce").to_numpy(dtype=float)
    meas = pd.to_numeric(c.get("measured_s"), errors="coerce").to_numpy(dtype=float)
    spread = pd.to_numeric(c.get("measured_spread"), errors="coerce").fillna(0.0).to_numpy(dtype=float)
    pred_err = np.nan_to_num(np.vstack([pred - low, high - pred]).clip(min=0))
    ax.errorbar(
        pred, y - 0.12, xerr=pred_err, fmt="o", color="#1f77b4", capsize=4, label="predicted (interval)"
    )
    ax.errorbar(
        meas,
        y + 0.12,
        xerr=meas * spread,
        fmt="s",
        color="#d62728",
        capsize=4,
        label="measured (run-to-run spread)",
    )
    wrong = [str(v).startswith("wrong") for v in c.get("order_note", pd.Series([""] * n))]
    labels = [
        textwrap.fill(str(r.get("label", DASH)), 46) + ("\n(order wrong)" if bad else "")
        for (_, r), bad in zip(c.iterrows(), wrong, strict=True)
    ]
    ax.set_yticks(y, labels, fontsize=8)
    for tick, bad in zip(ax.get_yticklabels(), wrong, strict=True):
        tick.set_color("#b22222" if bad else "black")
    ax.invert_yaxis()
    ax.set_xlabel("epoch time (s)")
    ax.set_title("Predicted against measured epoch time (first choice on top)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save(fig, path)
