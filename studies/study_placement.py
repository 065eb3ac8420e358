"""``placement``: Song & Jiang's data placement against naive, random, METIS and PaGraph (paper 002).

The slides' setup: one server of 8 V100 GPUs, NVLink-bridged pairs or an NVSwitch,
GraphSAGE with minibatch sampling; every GPU caches features, peers read each other
over NVLink, the rest comes from host memory. The workbench runs the same grid as
model-centric training on the matching presets and measures the *data loading time*:
per iteration and GPU, the time spent gathering input features (own cache, peers,
host), from the simulated trace.

* placements: naive (equal-vertex parts, each GPU caching its part), random (random
  parts), METIS (METIS parts; DGL's layout), PaGraph (PaGraph's partition and its
  degree cache), and the slides' Rule 1 / Algorithm 1 (``song-jiang``);
* 2, 4 and 8 GPUs on NVLink bridges and on NVSwitch;
* alpha sensitivity of Algorithm 1 on NVSwitch; locality-aware sampling on top;
* preprocessing time of the placement (probability estimate included) against METIS.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.plots import bar_chart, save
from studies.report import ReportPage
from studies.runner import Point, Study, register_study
from studies.verdict import SIZE_TOLERANCE, Claim, judge

LESS_LOADING = Claim(
    "Song & Jiang's placement loads features faster than random",
    "evaluation slides, 'Speedup'",
    "random / song-jiang loading time",
    paper=(2.4, 4.0),
)
WITH_LAS = Claim(
    "with locality-aware sampling, data loading falls further below random's",
    "evaluation slides",
    "random / (song-jiang + LAS) loading time",
    paper=(4.4, 4.4),
    up_to=True,
)
PREPROCESS = Claim(
    "the placement is computed far faster than METIS partitions (Reddit: 0.49 s vs 17 s)",
    "evaluation slides",
    "METIS seconds / song-jiang seconds",
    paper=(17 / 0.49, 17 / 0.49),
)

NAME = "placement"
HARDWARE = {"NVLink bridge": "v100x8-nvlink-bridge", "NVSwitch": "v100x8-nvswitch"}
# label -> (partitioner, placement table)
PLACEMENTS = {
    "naive": ("equal-vertex", {"name": "partitioned"}),
    "random": ("random", {"name": "partitioned"}),
    "METIS": ("metis", {"name": "partitioned"}),
    "PaGraph": ("pagraph", {"name": "degree", "direction": "out"}),
    "song-jiang": ("random", {"name": "song-jiang"}),
}
LOADING = ("gather_local", "d2d", "h2d", "gather_remote")
# Per GPU: small enough that which vertices a GPU caches matters (8 GPUs hold 24% of the graph).
CACHE = "3%"
# The slides' Motivation slide: "we can only store 20% of nodes ... on each GPU".
PAPER_CACHE = "20%"
# The LAS slide's factors run "1 2 4 ... Maximum": a factor this large stands in for "Maximum"
# (a cached neighbour is drawn before any other whenever one is left).
LAS_MAXIMUM = 1e6
# The preprocessing slide times Reddit (233K vertices, 11.6M edges) into four parts: reddit-like at
# full size keeps a tenth of Reddit's stored degree, about the slide's edge count, in both modes.
PREPROCESS_GRAPH = {"name": "reddit-like", "scale": 1.0}
# Algorithm 1's alpha in the slides' worked example ("p_4 > 0.3 * p_2 (alpha = 0.3)").
EXAMPLE_ALPHA = 0.3


def _config(
    graph: dict[str, Any],
    hardware: str,
    workers: int,
    partition: str,
    placement: dict[str, Any],
    sampling: dict[str, Any] | None = None,
    iterations: int = 4,
    cache: str = CACHE,
) -> dict[str, Any]:
    return {
        "name": f"{NAME}-{hardware}-{workers}-{partition}-{placement['name']}",
        "graph": graph,
        "hardware": {"name": hardware},
        "model": {"name": "sage", "hidden": 256, "num_layers": 3},
        "training": {"batch_size": 256, "workers": workers, "iterations": iterations},
        "cache": {"capacity": cache},
        "partition": {"name": partition},
        "placement": placement,
        "sampling": sampling or {"name": "neighbor", "fanouts": [15, 10, 5]},
        "execution": {"name": "model-centric"},
    }


def points(full: bool) -> list[Point]:
    graph = {"name": "products-like", "scale": 0.5 if full else 0.1}
    # Both modes run 2 GPUs: there the bridge joins the pair directly, as NVSwitch does, and the
    # placement ties random; without it quick mode's verdict on the bridge differed from full's.
    gpus = (2, 4, 8)
    out = []
    for link, hardware in HARDWARE.items():
        for n in gpus:
            for label, (partition, placement) in PLACEMENTS.items():
                out.append(
                    Point(
                        NAME,
                        {"part": "grid", "interconnect": link, "gpus": n, "placement": label},
                        _config(graph, hardware, n, partition, placement),
                    )
                )
    nvswitch = HARDWARE["NVSwitch"]
    for alpha in (0.1, 0.3, 0.5, 0.7, 1.0) if full else (0.1, 0.5, 1.0):
        placement = {"name": "song-jiang", "alpha": alpha, "mode": "algorithm1"}
        out.append(
            Point(NAME, {"part": "alpha", "alpha": alpha}, _config(graph, nvswitch, 8, "random", placement))
        )
    for factor in (1.0, 4.0) if not full else (1.0, 2.0, 4.0, 8.0):
        sampling = {"name": "locality-aware", "fanouts": [15, 10, 5], "factor": factor}
        out.append(
            Point(
                NAME,
                {"part": "las", "factor": factor},
                _config(graph, nvswitch, 8, "random", {"name": "song-jiang"}, sampling),
            )
        )
    for label in ("METIS", "song-jiang"):
        partition, placement = PLACEMENTS[label]
        cfg = _config(PREPROCESS_GRAPH, nvswitch, 4, partition, placement)
        out.append(Point(NAME, {"part": "preprocess", "placement": label}, cfg, measure="preprocess"))
    return out + _element_points(graph)


def _las(factor: float) -> dict[str, Any]:
    return {"name": "locality-aware", "fanouts": [15, 10, 5], "factor": factor}


RANDOM = ("random", {"name": "partitioned"})
SONG_JIANG = ("random", {"name": "song-jiang"})
# element -> (claim, interconnects, (baseline partition, placement, sampling, cache),
#             (scheme partition, placement, sampling, cache)): one element changed at a time, 8 GPUs.
ELEMENTS: dict[str, tuple[Claim, tuple[str, ...], tuple[Any, ...], tuple[Any, ...]]] = {
    "random's cache fill": (
        LESS_LOADING,
        ("NVLink bridge", "NVSwitch"),
        ("random", {"name": "partitioned", "fill": "random"}, None, CACHE),
        (*SONG_JIANG, None, CACHE),
    ),
    "cache size": (
        LESS_LOADING,
        ("NVLink bridge", "NVSwitch"),
        (*RANDOM, None, PAPER_CACHE),
        (*SONG_JIANG, None, PAPER_CACHE),
    ),
    "alpha": (
        LESS_LOADING,
        ("NVSwitch",),
        (*RANDOM, None, CACHE),
        ("random", {"name": "song-jiang", "alpha": EXAMPLE_ALPHA}, None, CACHE),
    ),
    "LAS factor": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, CACHE),
        (*SONG_JIANG, _las(LAS_MAXIMUM), CACHE),
    ),
    "cache size (LAS)": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, PAPER_CACHE),
        (*SONG_JIANG, _las(4.0), PAPER_CACHE),
    ),
    "graph size": (
        LESS_LOADING,
        ("NVLink bridge", "NVSwitch"),
        (*RANDOM, None, CACHE),
        (*SONG_JIANG, None, CACHE),
    ),
    "GPUs (LAS)": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, CACHE),
        (*SONG_JIANG, _las(4.0), CACHE),
    ),
    "graph (LAS)": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, CACHE),
        (*SONG_JIANG, _las(4.0), CACHE),
    ),
    "slides' setting, no LAS": (
        LESS_LOADING,
        ("NVSwitch",),
        (*RANDOM, None, PAPER_CACHE),
        (*SONG_JIANG, None, PAPER_CACHE),
    ),
    "slides' setting, LAS factor 4": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, PAPER_CACHE),
        (*SONG_JIANG, _las(4.0), PAPER_CACHE),
    ),
    "slides' LAS setting": (
        WITH_LAS,
        ("NVSwitch",),
        (*RANDOM, None, PAPER_CACHE),
        (*SONG_JIANG, _las(LAS_MAXIMUM), PAPER_CACHE),
    ),
}
# Elements run on another graph than the grid's: products-like at Products' size (Papers100M's 111M
# vertices do not fit this machine), so that a minibatch reads a smaller share of the graph.
# The LAS slides train Reddit on 2 GPUs (and 2+2): the slides' only setting shown with LAS.
REDDIT = {"name": "reddit-like", "scale": 1.0}
ELEMENT_GRAPH = {
    "graph size": {"name": "products-like", "scale": 1.0},
    "graph (LAS)": REDDIT,
    "slides' LAS setting": REDDIT,
    "slides' setting, no LAS": REDDIT,
    "slides' setting, LAS factor 4": REDDIT,
}
# Elements run on fewer GPUs than the grid's 8.
ELEMENT_GPUS = {
    "GPUs (LAS)": 2,
    "slides' LAS setting": 2,
    "slides' setting, no LAS": 2,
    "slides' setting, LAS factor 4": 2,
}
ELEMENT_CHANGE = {
    "random's cache fill": "random's cache fill: most-accessed of its part -> random vertices of its part "
    "(the slides are silent)",
    "cache size": f"cache per GPU: {CACHE} -> {PAPER_CACHE} of the vertices (Motivation slide)",
    "alpha": f"alpha: C_gpu / C_cpu of the preset (about 0.08) -> {EXAMPLE_ALPHA} (the slides' worked example)",
    "LAS factor": "LAS factor: 4 -> 'Maximum' (LAS slide; 1e6 here)",
    "cache size (LAS)": f"cache per GPU: {CACHE} -> {PAPER_CACHE}, LAS factor 4 (Motivation slide)",
    "graph size": "graph: products-like at the grid's scale -> scale 1.0 (Products' 2.4M vertices; Papers100M "
    "has 111M)",
    "GPUs (LAS)": "GPUs: 8 -> 2 on NVSwitch, LAS factor 4 (the LAS slides' 'Reddit (2GPU)')",
    "graph (LAS)": "graph: products-like -> reddit-like at full size, LAS factor 4 (the LAS slides' Reddit)",
    "slides' LAS setting": f"all four together: reddit-like, 2 GPUs, cache {PAPER_CACHE}, LAS 'Maximum'",
    "slides' setting, no LAS": f"graph, GPUs and cache as the LAS slides': reddit-like, 2 GPUs, cache {PAPER_CACHE}",
    "slides' setting, LAS factor 4": f"graph, GPUs and cache as the LAS slides': reddit-like, 2 GPUs, cache "
    f"{PAPER_CACHE}, LAS factor 4",
    "loading metric": "data loading time: own-GPU gathers counted -> left out, only copies from peers and host "
    "(the slides are silent)",
}


# Short names for the ablation chart's groups.
ELEMENT_SHORT = {
    "random's cache fill": "random's\nfill",
    "cache size": "cache\n20%",
    "alpha": "alpha\n0.3",
    "LAS factor": "LAS\nmaximum",
    "cache size (LAS)": "LAS with\ncache 20%",
    "graph size": "scale\n1.0",
    "GPUs (LAS)": "LAS on\n2 GPUs",
    "graph (LAS)": "LAS on\nreddit",
    "slides' LAS setting": "LAS in the\nslides' setting",
    "slides' setting, no LAS": "slides'\nsetting",
    "slides' setting, LAS factor 4": "slides' setting,\nLAS factor 4",
    "loading metric": "own GPU\nleft out",
}


def _element_points(graph: dict[str, Any]) -> list[Point]:
    out = []
    for element, (_, links, baseline, scheme) in ELEMENTS.items():
        for link in links:
            for variant, (partition, placement, sampling, cache) in (
                ("baseline", baseline),
                ("scheme", scheme),
            ):
                on = ELEMENT_GRAPH.get(element, graph)
                gpus = ELEMENT_GPUS.get(element, 8)
                config = _config(on, HARDWARE[link], gpus, partition, placement, sampling, cache=cache)
                label = {"part": "elements", "element": element, "interconnect": link, "variant": variant}
                out.append(Point(NAME, label, config))
    return out


def loading_ms(table: pd.DataFrame) -> pd.Series:
    """Per iteration and GPU, milliseconds spent gathering input features."""
    busy = sum(table[f"{p}_busy_s"] for p in LOADING)
    return 1e3 * busy / (table["workers"] * table["iterations"])


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    grid = results[results["part"] == "grid"].copy()
    grid["gpus"] = grid["gpus"].astype(int)
    grid["loading_ms"] = loading_ms(grid)
    page = ReportPage(
        "Placement (paper 002): where each GPU's features come from",
        "Song & Jiang's slides: their data placement 'reduces the data loading time by 2.4x to 4.0x compared "
        "to random' and data movement 'by 1.2x to 3.3x', 'up to 4.4x' with locality-aware sampling, and "
        "places Reddit in 0.49 s where METIS takes 17 s. The workbench simulates model-centric GraphSAGE "
        f"training on the 8x V100 presets (each GPU caching {CACHE} of the vertices) and measures the "
        "feature-gathering time per iteration and GPU.",
    )
    page.add(
        "Setting (paper 002's slides against this study)", _setting_text(), table=_setting_table(results)
    )
    charts = _loading_charts(grid, folder)
    ratio = _loading_ratios(charts)
    page.add(
        "Claim and figure: data loading against random",
        _why(ratio, results),
        table=ratio,
        judgement=judge(
            LESS_LOADING,
            {
                f"{r.interconnect} {int(r.gpus)} GPUs": r._3
                for r in ratio[["interconnect", "gpus", "random / song-jiang"]].itertuples()
            },
        ),
    )
    for link, name, pivot in charts:
        page.add(
            f"Data loading time, {link}",
            image=name,
            table=pivot.reset_index().rename_axis(columns=None),
            judgement=judge(
                LESS_LOADING,
                {f"{link} {int(n)} GPUs": v for n, v in (pivot["random"] / pivot["song-jiang"]).items()},
            ),
        )
    _alpha_section(page, results)
    _las_section(page, results, grid)
    _las_cause_section(page, results)
    _preprocess_section(page, results)
    _add_elements(page, results, folder)
    results.to_csv(folder / "results.csv", index=False)
    page.add(
        "Files", "results.csv (every point), the PNG charts, and points/*.json (each point's stored result)."
    )
    return page


def _loading_charts(grid: pd.DataFrame, folder: Path) -> list[tuple[str, str, pd.DataFrame]]:
    """One bar chart per interconnect of loading time by GPUs and placement: (interconnect, file, table)."""
    charts = []
    for link in grid["interconnect"].unique():
        sub = grid[grid["interconnect"] == link]
        pivot = sub.pivot_table(index="gpus", columns="placement", values="loading_ms")
        pivot = pivot[[c for c in PLACEMENTS if c in pivot.columns]]
        name = f"loading-{link.lower().replace(' ', '-')}.png"
        save(
            bar_chart(
                pivot,
                f"Data loading per iteration and GPU, {link} (paper 002, 'Speedup' slides)",
                "GPUs",
                "milliseconds per iteration per GPU",
            ),
            folder / name,
        )
        charts.append((link, name, pivot))
    return charts


def _loading_ratios(charts: list[tuple[str, str, pd.DataFrame]]) -> pd.DataFrame:
    """Each baseline's loading time over song-jiang's, per interconnect and GPU count."""
    ratios = []
    for link, _, pivot in charts:
        for n, row in pivot.iterrows():
            ratios.append(
                {
                    "interconnect": link,
                    "gpus": n,
                    "random / song-jiang": row["random"] / row["song-jiang"],
                    "METIS / song-jiang": row["METIS"] / row["song-jiang"],
                    "PaGraph / song-jiang": row["PaGraph"] / row["song-jiang"],
                }
            )
    return pd.DataFrame(ratios)


def _alpha_section(page: ReportPage, results: pd.DataFrame) -> None:
    alpha = results[results["part"] == "alpha"].copy()
    if not len(alpha):
        return
    alpha["loading_ms"] = loading_ms(alpha)
    page.add(
        "Alpha sensitivity (Algorithm 1, 8 GPUs on NVSwitch)",
        "alpha scales how much a peer GPU's read counts against a host read when distributing."
        + _alpha_note(results),
        table=alpha[["alpha", "loading_ms", "epoch_s"]],
        judgement=judge(
            Claim("loading time against alpha", "Algorithm 1", "loading time"),
            {},
            "the slides report no figure for alpha, so this sweep has nothing to be compared with",
        ),
    )


def _las_section(page: ReportPage, results: pd.DataFrame, grid: pd.DataFrame) -> None:
    las = results[results["part"] == "las"].copy()
    if not len(las):
        return
    las["loading_ms"] = loading_ms(las)
    base = float(las.loc[las["factor"] == 1.0, "loading_ms"].iloc[0])
    las["speedup vs factor 1"] = base / las["loading_ms"]
    nvswitch_random = grid[(grid["interconnect"] == "NVSwitch") & (grid["gpus"] == 8)]
    nvswitch_random = nvswitch_random[nvswitch_random["placement"] == "random"]["loading_ms"]
    random_ms = float(nvswitch_random.iloc[0]) if len(nvswitch_random) else float("nan")
    page.add(
        "Locality-aware sampling on top of the placement (8 GPUs, NVSwitch)",
        "factor 1 is plain neighbour sampling; larger factors favour cached neighbours "
        "(paper: up to 4.4x together with the placement, against random). The verdict compares the "
        "random placement's loading time (8 GPUs, NVSwitch, plain sampling) with song-jiang's under "
        "each factor above 1 (factor 1 is no LAS: the placement alone, judged in the first section).",
        table=las[["factor", "loading_ms", "speedup vs factor 1", "epoch_s"]],
        judgement=judge(
            WITH_LAS,
            {
                f"factor {f:g}": random_ms / ms
                for f, ms in zip(las["factor"], las["loading_ms"], strict=True)
                if f > 1.0
            },
            "the grid has no random point on 8 NVSwitch GPUs",
        ),
    )


SOURCES = {"own GPU": "gather_local", "peer GPUs": "d2d", "host": "h2d"}


def loading_sources(rows: pd.DataFrame) -> pd.DataFrame:
    """Per iteration and GPU, where the loading time goes: milliseconds per source (own GPU's cache,
    peer GPUs, host memory) and the megabytes copied from peers and the host (the trace counts an
    own-GPU gather as time only, no copy)."""
    per = rows["workers"] * rows["iterations"]
    out = pd.DataFrame(index=rows.index)
    for source, phase in SOURCES.items():
        out[f"{source} ms"] = 1e3 * rows[f"{phase}_busy_s"] / per
    out["peer GPUs MB"] = rows["d2d_bytes"] / 1e6 / per
    out["host MB"] = rows["h2d_bytes"] / 1e6 / per
    out["loading ms"] = loading_ms(rows)
    return out


def las_sources_table(results: pd.DataFrame) -> pd.DataFrame:
    """The loading time by source for random (plain sampling) and song-jiang with and without LAS, in the
    grid's setting (8 GPUs, NVSwitch) and in the slides' LAS setting; 'random / this' is the claim's figure."""
    grid = results[(results["part"] == "grid") & (results["interconnect"] == "NVSwitch")]
    grid = grid[(grid["gpus"].astype(float) == 8) & (grid["placement"] == "random")]
    las = results[results["part"] == "las"].sort_values("factor")
    elements = results[results["part"] == "elements"]

    def element(name: str, variant: str) -> pd.DataFrame:
        if not len(elements):
            return elements
        return elements[(elements["element"] == name) & (elements["variant"] == variant)]

    here = "products-like, 8 GPUs, cache " + CACHE
    slides = f"reddit-like, 2 GPUs, cache {PAPER_CACHE}"
    parts = [(here, "random, plain sampling", grid)]
    for factor, row in las.groupby("factor", sort=True):
        name = "plain sampling" if float(factor) == 1.0 else f"LAS factor {float(factor):g}"
        parts.append((here, f"song-jiang, {name}", row))
    parts.append((here, "song-jiang, LAS 'Maximum'", element("LAS factor", "scheme")))
    parts.append((slides, "random, plain sampling", element("slides' LAS setting", "baseline")))
    parts.append((slides, "song-jiang, plain sampling", element("slides' setting, no LAS", "scheme")))
    parts.append((slides, "song-jiang, LAS factor 4", element("slides' setting, LAS factor 4", "scheme")))
    parts.append((slides, "song-jiang, LAS 'Maximum'", element("slides' LAS setting", "scheme")))
    rows = []
    for setting, label, row in parts:
        if len(row):
            rows.append({"setting": setting, "run": label, **loading_sources(row.iloc[:1]).iloc[0].to_dict()})
    table = pd.DataFrame(rows)
    if len(table):
        random_ms = table[table["run"].str.startswith("random")].set_index("setting")["loading ms"]
        table["random / this"] = [
            random_ms.get(s, float("nan")) / ms
            for s, ms in zip(table["setting"], table["loading ms"], strict=True)
        ]
    return table


def _setting_sentence(sources: pd.DataFrame, setting: str) -> str:
    """Where song-jiang's loading time goes in one setting, and what its strongest LAS changes."""
    here = sources[sources["setting"] == setting].set_index("run")
    plain = "song-jiang, plain sampling"
    las = [r for r in here.index if r.startswith("song-jiang, LAS")]
    if plain not in here.index or not las:
        return ""
    a, b = here.loc[plain], here.loc[las[-1]]
    total = a[[f"{s} ms" for s in SOURCES]].sum()
    return (
        f"In {setting} (NVSwitch), song-jiang with plain sampling spends {a['host ms'] / total:.0%} of its "
        f"loading time on host reads, {a['peer GPUs ms'] / total:.0%} on peer reads and "
        f"{a['own GPU ms'] / total:.0%} on its own cache (figure {a['random / this']:.2f}x); "
        f"{las[-1].split(', ')[1]} cuts its host bytes by {1 - b['host MB'] / a['host MB']:.0%} and its peer "
        f"bytes by {1 - b['peer GPUs MB'] / a['peer GPUs MB']:.0%}: loading {a['loading ms']:.2f} -> "
        f"{b['loading ms']:.2f} ms, figure {b['random / this']:.2f}x. "
    )


def las_finding(sources: pd.DataFrame, ablation: pd.DataFrame) -> str:
    """Where LAS moves the loading time, and which element of the slides' setting moves the figure most."""
    text = "Measured: " + "".join(_setting_sentence(sources, s) for s in sources["setting"].unique())
    if not len(ablation):
        return text
    paper = WITH_LAS.paper[1]
    ranked = ablation.sort_values("figure after", ascending=False)
    rows = ranked[["element", "interconnect", "figure before", "figure after"]]
    text += "Changed to the slides' setting (largest figure first): " + "; ".join(
        f"{ELEMENT_SHORT[r.element].replace(chr(10), ' ')} {r._3:.2f}x -> {r._4:.2f}x"
        for r in rows.itertuples()
    )
    single = rows[~rows["element"].str.startswith("slides'")]
    together = rows[rows["element"] == "slides' LAS setting"]["figure after"]
    if len(single):
        best = single.iloc[0]
        side = "reaches" if best["figure after"] >= paper else "stays below"
        text += f". The largest single element ({ELEMENT_SHORT[best['element']].replace(chr(10), ' ')}, "
        text += f"{best['figure after']:.2f}x) {side} the slides' {paper:g}x"
    if len(together):
        side = "above" if float(together.iloc[0]) > paper else "at or below"
        text += f"; all together give {float(together.iloc[0]):.2f}x, {side} it"
    return text + "."


def _las_cause_section(page: ReportPage, results: pd.DataFrame) -> None:
    sources = las_sources_table(results)
    table = element_table(results)
    if not len(sources) or not len(table):
        return
    ablation = table[table["claim"] == WITH_LAS.ratio]
    page.add(
        "Why LAS stays below the slides' 4.4x: where the loading time goes",
        "The slides give 'up to 4.4x' with LAS in their summary but not its setting; the only LAS results "
        "they show are Reddit trained on 2 GPUs (and 2+2), with the 20% cache of their Motivation slide and "
        "factors up to 'Maximum'. The first table splits each run's loading time (per iteration and GPU) by "
        "source; the second changes one of those elements at a time from the grid's LAS point (song-jiang, "
        "factor 4) and then all together. " + las_finding(sources, ablation) + " The workbench's LAS "
        "favours the sampling GPU's own cache only (a reading of 'the neighbor set of B'); favouring every "
        "GPU's cache (B = {B_1, ..., B_n} in Algorithm 1) would turn host reads into peer reads, but the "
        "sampler is handed its own GPU's cache by the run, so this study cannot change it: not tried, nor "
        "the slides' fanouts and model (not given) or Papers100M (too large for this machine).",
        table=sources,
    )
    page.add(
        "LAS ablation: one element of the slides' setting at a time",
        "'figure before' is random's loading time over song-jiang's with LAS factor 4 (8 GPUs, NVSwitch, "
        "products-like, cache " + CACHE + "); 'figure after' the same ratio with the element changed, random "
        "changed alike.",
        table=ablation.drop(columns=["claim", "element", "interconnect"]),
    )


def _preprocess_section(page: ReportPage, results: pd.DataFrame) -> None:
    pre = results[results["part"] == "preprocess"]
    if not len(pre):
        return
    table = pre[["placement", "partition_s", "placement_s"]].copy()
    table["seconds"] = np.where(table["placement"] == "METIS", table["partition_s"], table["placement_s"])
    seconds = dict(zip(table["placement"], table["seconds"], strict=True))
    page.add(
        "Preprocessing time (paper: Reddit 0.49 s for the placement vs 17 s for METIS)",
        "reddit-like at full size (Reddit's 233K vertices, a tenth of its stored degree: about the "
        "slide's 11.6M edges), in both modes. METIS: partitioning into 4 parts; song-jiang: the placement, "
        "its probability estimate included. Each is computed afresh (no cached partition or placement), "
        "three times in the point's process; the table shows the least (the first also pays imports and "
        "JIT cache loads, and other work on this shared 2-core machine only adds time). Even so the ratio varies "
        "between runs here (the placement's fraction of a second is the noisier term); the verdict is "
        f"'reproduced' from {math.exp(math.log(PREPROCESS.paper[0]) / SIZE_TOLERANCE):.1f}x up (within "
        f"{SIZE_TOLERANCE:g}x of the paper's in effect, the log of the ratio).",
        table=table[["placement", "seconds"]],
        judgement=judge(
            PREPROCESS,
            {
                "measured on this machine": seconds.get("METIS", float("nan"))
                / seconds.get("song-jiang", float("nan"))
            },
        ),
    )


def _setting_table(results: pd.DataFrame) -> pd.DataFrame:
    grid = results[results["part"] == "grid"]
    scale = 0.5 if len(grid) and int(grid["gpus"].min()) == 2 else 0.1
    gpus = ", ".join(str(int(n)) for n in sorted(grid["gpus"].unique())) if len(grid) else ""
    rows = [
        (
            "graph",
            "Reddit (233K vertices) and Papers100M (111M); the 2.4-4.0x is Papers100M's slide",
            f"products-like at scale {scale:g} (ogbn-products' shape; Papers100M does not fit this machine)",
        ),
        (
            "model",
            "sampling-based GNN (GraphSAGE-style); layers, hidden and fanouts not given",
            "GraphSAGE, 3 layers, hidden 256, fanouts 15, 10, 5",
        ),
        ("batch", "not given", "256 seeds per GPU, 4 iterations"),
        (
            "sampler",
            "node-wise neighbour sampling; LAS with factors 1, 2, 4, ..., Maximum",
            "node-wise neighbour sampling on the host CPU; LAS with factors 1, 4 (quick) or 1, 2, 4, 8 (full)",
        ),
        (
            "hardware",
            "1 server, 2x Xeon Gold 6248, 8x V100; NVLink bridge (2+2, 2x4) and NVSwitch (2, 4, 8)",
            f"presets v100x8-nvlink-bridge and v100x8-nvswitch; {gpus} GPUs",
        ),
        (
            "GPU cache",
            "20% of the vertices per GPU, the most frequently accessed (Motivation slide)",
            f"{CACHE} per GPU ({PAPER_CACHE} in the ablation)",
        ),
        (
            "baselines",
            "naive, random, METIS partitioning; PaGraph partitioning (how a part larger than the "
            "cache is filled is not said)",
            "naive = equal-vertex parts, random, METIS: each GPU caches the most-accessed of its part; PaGraph: "
            "its partition, out-degree cache",
        ),
        (
            "preprocessing",
            "Reddit into 4 parts: 0.49 s (placement) vs 17 s (METIS), two Xeon Gold 6248",
            "reddit-like at scale 1.0 into 4 parts on this 2-core machine",
        ),
        ("alpha", "C_gpu / C_cpu (0.3 in the worked example)", "C_gpu / C_cpu of the preset (about 0.08)"),
        (
            "data loading time",
            "not defined on the slides",
            "per iteration and GPU, busy time gathering input features: own GPU, peers (d2d), host (h2d)",
        ),
    ]
    return pd.DataFrame(rows, columns=["", "paper (slides)", "study"])


def _setting_text() -> str:
    return (
        "The slides give the platform, the graphs and the baselines but not the model, the batch, the fanouts "
        "or what 'data loading time' includes; the study's choices for those are its own. Its graph is "
        "products-like (the slides' Products has no loading figure; their 2.4-4.0x is on Papers100M, whose "
        "53 GB of features this machine cannot hold). The grid caches 3% of the vertices per GPU, less than "
        "the slides' 20%, so that which vertices a GPU caches matters (at 20%, 8 GPUs hold every vertex "
        "between them); the ablation below runs the slides' 20%."
    )


def _loading_without_local(table: pd.DataFrame) -> pd.Series:
    busy = sum(table[f"{p}_busy_s"] for p in LOADING if p != "gather_local")
    return 1e3 * busy / (table["workers"] * table["iterations"])


def element_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per element and interconnect: the claim's figure (baseline loading / scheme loading) before and after."""
    grid = results[(results["part"] == "grid") & (results["gpus"].astype(float) == 8)]
    las = results[results["part"] == "las"]
    rows = []

    def grid_ms(link: str, label: str, metric=loading_ms) -> float:
        sub = grid[(grid["interconnect"] == link) & (grid["placement"] == label)]
        return float(metric(sub).iloc[0]) if len(sub) else float("nan")

    def before(claim: Claim, link: str) -> float:
        if claim is WITH_LAS:
            factor4 = las[las["factor"].astype(float) == 4.0]
            return (
                grid_ms(link, "random") / float(loading_ms(factor4).iloc[0]) if len(factor4) else float("nan")
            )
        return grid_ms(link, "random") / grid_ms(link, "song-jiang")

    elements = results[results["part"] == "elements"]
    for (element, link), sub in elements.groupby(["element", "interconnect"], sort=False):
        if element not in ELEMENTS:
            continue
        claim = ELEMENTS[element][0]
        times = dict(zip(sub["variant"], loading_ms(sub), strict=True))
        rows.append(
            {
                "claim": claim.ratio,
                "element changed to the paper's": f"{ELEMENT_CHANGE[element]}; "
                f"{ELEMENT_GPUS.get(element, 8)} GPUs, {link}",
                "figure before": before(claim, link),
                "figure after": times.get("baseline", float("nan")) / times.get("scheme", float("nan")),
                "element": element,
                "interconnect": link,
            }
        )
    for link in grid["interconnect"].unique():
        rows.append(
            {
                "claim": LESS_LOADING.ratio,
                "element changed to the paper's": f"{ELEMENT_CHANGE['loading metric']}; 8 GPUs, {link}",
                "figure before": before(LESS_LOADING, link),
                "figure after": grid_ms(link, "random", _loading_without_local)
                / grid_ms(link, "song-jiang", _loading_without_local),
                "element": "loading metric",
                "interconnect": link,
            }
        )
    return pd.DataFrame(rows)


def _add_elements(page: ReportPage, results: pd.DataFrame, folder: Path) -> None:
    table = element_table(results)
    if not len(table):
        return
    chart = table.copy()
    chart.index = [
        f"{ELEMENT_SHORT[key]}\n{link.replace('NVLink ', '')}"
        for key, link in zip(chart["element"], chart["interconnect"], strict=True)
    ]
    save(
        bar_chart(
            chart[["figure before", "figure after"]].rename(
                columns={"figure before": "before", "figure after": "after (element changed)"}
            ),
            "Random's loading time over song-jiang's, one element changed (8 GPUs; slides: 2.4-4.0x, LAS up to 4.4x)",
            "element changed, interconnect",
            "random's loading time / song-jiang's (log scale)",
            # Ratios from 0.8x to nearly 20x: on a linear axis the small ones, most of them, are
            # unreadable; a group per 1.15 inch keeps the three-line labels apart.
            log=True,
            width=max(13.0, 1.15 * len(chart)),
        ),
        folder / "ablation.png",
    )
    page.add(
        "What moves the figures toward the slides' (ablation of one element at a time)",
        "Each row changes one element of the study's setting or of a strategy to what the slides describe "
        "(or, where they are silent, to the plausible alternative), the rest as in the grid; 'figure before' "
        "is the claim's ratio in the grid (random's loading time over song-jiang's; with LAS, song-jiang "
        "at factor 4), 'figure after' the same ratio with the element changed. " + _element_finding(table),
        table=table.drop(columns=["element", "interconnect"]),
        image="ablation.png",
    )


def _element_finding(table: pd.DataFrame) -> str:
    """Which elements move a figure toward the slides' (by more than a fifth), which leave it or move it away."""

    def name(r: Any) -> str:
        return f"{ELEMENT_SHORT[r.element].replace(chr(10), ' ')} on {r.interconnect}"

    def pair(r: Any) -> str:
        return f"{name(r)} ({r._3:.2f}x -> {r._4:.2f}x)"

    rows = table[["element", "interconnect", "figure before", "figure after"]]
    moved = rows[rows["figure after"] > 1.2 * rows["figure before"]].sort_values(
        "figure after", ascending=False
    )
    rest = rows[rows["figure after"] <= 1.2 * rows["figure before"]]
    if moved.empty:
        text = "Measured: no single element moves either figure toward the slides' by more than a fifth"
    else:
        text = "Measured: toward the slides' (more than a fifth): " + "; ".join(
            pair(r) for r in moved.itertuples()
        )
    if len(rest):
        text += ". Little or no effect, or away from them: " + "; ".join(pair(r) for r in rest.itertuples())
    return (
        text + ". On NVSwitch the tie breaks only where random's GPUs together stop holding the set "
        "song-jiang distributes (a random fill of each part) or where song-jiang's cache can also hold "
        "duplicates of the most-read vertices (a cache large enough to hold the graph on all GPUs); on the "
        "NVLink bridge random's reads from GPUs outside its pair cross PCIe, which song-jiang's per-pair "
        "placement avoids. Not tried: LAS favouring every GPU's cache rather than its own (the slides' "
        "'neighbor set of B' may mean either), Papers100M's size, the slides' model and batch (not given)."
    )


def _why(ratio: pd.DataFrame, results: pd.DataFrame) -> str:
    ties = ratio[ratio["random / song-jiang"] < 1.05]
    if ties.empty:
        return ""
    where = ", ".join(f"{r.interconnect} with {int(r.gpus)} GPUs" for r in ties.itertuples())
    text = (
        f"No clear gain ({where}): there Algorithm 1's alpha (C_gpu / C_cpu, about 0.08 for NVSwitch against "
        "PCIe) distributes the most-accessed vertices across all GPUs, and the workbench's random baseline "
        "caches the most-accessed vertices of each GPU's random part (the partitioned store's rule when a part "
        "is larger than the cache, as PaGraph does), which is nearly the same set; on NVSwitch a peer's copy "
        "costs little more than one's own, so only the set held by all GPUs together matters."
    )
    near = ratio[(ratio["random / song-jiang"] - 1.0).abs() < 0.01]
    if len(near):
        text += (
            " There the figure is 1.00 within 1% ("
            + ", ".join(
                f"{r._3:.4f}" for r in near[["interconnect", "gpus", "random / song-jiang"]].itertuples()
            )
            + "): the two placements tie, and a tie shows no effect, so the claim is contradicted there "
            "in quick and full mode alike (the rule's ties: within 0.5% of 1)."
        )
    table = element_table(results)
    fill = table[table["element changed to the paper's"].str.startswith("random's cache fill")]
    fill = fill[fill["element changed to the paper's"].str.endswith("NVSwitch")]
    if len(fill):
        text += (
            " The slides do not say how their random baseline fills a cache smaller than a part; measured in "
            "the ablation below, one that caches random vertices of its part makes the 8-GPU NVSwitch figure "
            f"{float(fill['figure after'].iloc[0]):.2f}x instead of {float(fill['figure before'].iloc[0]):.2f}x."
        )
    return text


def _alpha_note(results: pd.DataFrame) -> str:
    """Which alphas of the sweep place alike (the same loading time as the preset's C_gpu / C_cpu)."""
    alpha = results[results["part"] == "alpha"].copy()
    grid = results[(results["part"] == "grid") & (results["interconnect"] == "NVSwitch")]
    grid = grid[(grid["gpus"].astype(float) == 8) & (grid["placement"] == "song-jiang")]
    if not len(alpha) or not len(grid):
        return ""
    base = float(loading_ms(grid).iloc[0])
    same = [
        f"{a:g}"
        for a, ms in zip(alpha["alpha"], loading_ms(alpha), strict=True)
        if abs(ms - base) < 1e-9 * base + 1e-12
    ]
    if not same:
        return ""
    return (
        f" Alpha {', '.join(same)} place exactly as the preset's C_gpu / C_cpu does: on this graph every "
        "replacement Algorithm 1 can make passes p(new) > alpha p(old) at those alphas (the estimated "
        "access probabilities of the ranks it trades differ by less than that factor), so they leave the "
        "placement as it is; only a larger alpha, which stops replacements early, changes it."
    )


register_study(
    Study(
        NAME,
        "Placement: naive, random, METIS, PaGraph and Song & Jiang on 8 V100s",
        "paper 002 (Song & Jiang), evaluation slides",
        "data loading 2.4-4.0x lower than random; placement 0.49 s vs METIS 17 s on Reddit",
        points,
        analyze,
    )
)
