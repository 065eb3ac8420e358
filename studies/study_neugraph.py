"""``neugraph``: NeuGraph's streaming optimisations (paper 001, Figs. 15-17).

GCN streamed in 2D chunks (``chunk2d``) over NeuGraph's 8x P100 server on a two-level
PCIe switch tree, on a dense graph (reddit-full's shape: ~400 edges per vertex) and a
sparse one (amazon's: ~10 per vertex), each scaled down so it simulates in seconds,
with the GPU memory the grid must fit scaled down with it (so the graph still streams):

* Fig. 15: the optimisations turned on one at a time: none, + selective scheduling,
  + pipeline scheduling (with swap-based reordering), all;
* Fig. 16: forward/backward processing order, column-row vs row-column, with the
  streaming optimisations off (as the paper ran it);
* Fig. 17: 1, 2, 4 and 8 GPUs with chain-based scheduling on and off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from studies.plots import bar_chart, line_chart, save
from studies.report import ReportPage
from studies.runner import Point, Study, register_study
from studies.verdict import Claim, judge

SELECTIVE = Claim(
    "selective scheduling speeds up the sparse graph", "Fig. 15", "none / +selective", paper=(2.6, 2.6)
)
PIPELINE = Claim(
    "the pipeline speeds up the dense graph beyond selective scheduling", "Fig. 15", "+selective / +pipeline"
)
ORDER = Claim(
    "column-row processing beats row-column", "Fig. 16", "row-column / column-row", paper=(1.4, 1.7)
)
CHAIN_HELPS = Claim(
    "the chain makes 2 GPUs under one switch faster than without it",
    "Fig. 17",
    "chain on / chain off speedup",
)
NO_CHAIN_NO_GAIN = Claim(
    "without the chain, 2 GPUs under one switch are no faster than 1",
    "Fig. 17",
    "2-GPU speedup over 1, chain off",
    direction="at_most",
)

NAME = "neugraph"
GRAPHS = {
    "dense (reddit-full shape)": ("rmat:n={n},m={m},feat=602,classes=41", 400),
    "sparse (amazon shape)": ("rmat:n={n},m={m},feat=96,classes=22", 10),
}
ALL_ON = {"selective": True, "pipeline": True, "reorder": True, "chain": True, "order": "column-row"}
ABLATION = {
    "none": {"selective": False, "pipeline": False, "reorder": False, "chain": True},
    "+selective": {"selective": True, "pipeline": False, "reorder": False, "chain": True},
    "+pipeline": {"selective": True, "pipeline": True, "reorder": False, "chain": True},
    "all (+swap)": {"selective": True, "pipeline": True, "reorder": True, "chain": True},
}


def _config(graph: str, gpus: int, execution: dict[str, Any], memory: str) -> dict[str, Any]:
    return {
        "name": f"{NAME}-{gpus}",
        "graph": {"name": graph},
        "hardware": {"name": "neugraph-8xp100-pcie"},
        "model": {"name": "gcn", "hidden": 256, "num_layers": 2},
        "training": {"workers": gpus, "iterations": 1},
        "partition": {"name": "chunk2d", "gpu_memory_bytes": memory},
        "execution": {"name": "neugraph-stream", **execution},
    }


def points(full: bool) -> list[Point]:
    n = 48_000 if full else 16_000
    memory = "24MiB" if full else "8MiB"
    out = []
    for label, (spec, degree) in GRAPHS.items():
        graph = spec.format(n=n, m=n * degree)
        for variant, switches in ABLATION.items():
            out.append(
                Point(
                    NAME,
                    {"part": "ablation", "graph": label, "variant": variant},
                    _config(graph, 8, {**ALL_ON, **switches}, memory),
                )
            )
        for order in ("column-row", "row-column"):
            switches = {
                "selective": False,
                "pipeline": False,
                "reorder": False,
                "chain": False,
                "order": order,
            }
            out.append(
                Point(
                    NAME,
                    {"part": "order", "graph": label, "order": order},
                    _config(graph, 8, switches, memory),
                )
            )
        for gpus in (1, 2, 4, 8):
            for chain in (False, True):
                out.append(
                    Point(
                        NAME,
                        {"part": "chain", "graph": label, "gpus": gpus, "chain": chain},
                        _config(graph, gpus, {**ALL_ON, "chain": chain}, memory),
                    )
                )
    return out


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    results = results.copy()
    results["epoch_ms"] = 1e3 * results["epoch_s"]
    page = ReportPage(
        "NeuGraph (paper 001): streaming a graph through GPUs in 2D chunks",
        "NeuGraph: selective scheduling helps most on sparse graphs (2.6x on amazon), the swap-based pipeline on "
        "dense graphs with heterogeneous chunks (Fig. 15); column-row processing is 1.4-1.7x faster than "
        "row-column (Fig. 16); chain-based scheduling lets two GPUs under one PCIe switch share a chunk read, so "
        "2 GPUs speed up where without it they do not (Fig. 17). Simulated GCN on the 8x P100 PCIe tree.",
    )
    ablation = results[results["part"] == "ablation"]
    if len(ablation):
        pivot = ablation.pivot_table(index="graph", columns="variant", values="epoch_ms")[list(ABLATION)]
        speed = pivot.rdiv(pivot["none"], axis=0)
        save(
            bar_chart(
                speed,
                "Speedup of each optimisation over none (paper 001, Fig. 15)",
                "graph",
                "speedup over no optimisation",
            ),
            folder / "ablation.png",
        )
        page.add(
            "Optimisations one by one (Fig. 15): selective scheduling on the sparse graph",
            "Epoch times in ms; the chart shows each variant's speedup over none (chain on throughout).",
            image="ablation.png",
            table=pivot.reset_index().rename_axis(columns=None),
            judgement=judge(
                SELECTIVE,
                {g: pivot.loc[g, "none"] / pivot.loc[g, "+selective"] for g in pivot.index if "sparse" in g},
                "the grid has no sparse graph",
            ),
        )
        page.add(
            "Optimisations one by one (Fig. 15): the pipeline on the dense graph",
            judgement=judge(
                PIPELINE,
                {
                    g: pivot.loc[g, "+selective"] / pivot.loc[g, "+pipeline"]
                    for g in pivot.index
                    if "dense" in g
                },
                "the grid has no dense graph",
            ),
        )
    order = results[results["part"] == "order"]
    if len(order):
        pivot = order.pivot_table(index="graph", columns="order", values="epoch_ms")
        pivot["row-column / column-row"] = pivot["row-column"] / pivot["column-row"]
        page.add(
            "Processing order (Fig. 16; paper: column-row 1.4-1.7x faster)",
            "Streaming optimisations off, as in the paper.",
            table=pivot.reset_index().rename_axis(columns=None),
            judgement=judge(ORDER, pivot["row-column / column-row"].to_dict()),
        )
    chain = results[results["part"] == "chain"].copy()
    if len(chain):
        chain["gpus"] = chain["gpus"].astype(int)
        rows = []
        for graph, sub in chain.groupby("graph", sort=False):
            pivot = sub.pivot_table(index="gpus", columns="chain", values="epoch_ms")
            pivot.columns = ["chain off", "chain on"]
            one = float(pivot.loc[1, "chain on"])
            scaled = one / pivot
            save(
                line_chart(
                    scaled, f"Speedup over 1 GPU, {graph} (paper 001, Fig. 17)", "GPUs", "speedup over 1 GPU"
                ),
                folder / f"chain-{graph.split()[0]}.png",
            )
            page.add(
                f"Chain-based scheduling, {graph}",
                image=f"chain-{graph.split()[0]}.png",
                table=pivot.reset_index().rename_axis(columns=None),
                judgement=judge(CHAIN_HELPS, {graph: scaled.loc[2, "chain on"] / scaled.loc[2, "chain off"]}),
            )
            rows.append(
                {
                    "graph": graph,
                    "2 GPUs chain off": scaled.loc[2, "chain off"],
                    "2 GPUs chain on": scaled.loc[2, "chain on"],
                    "8 GPUs chain on": scaled.loc[8, "chain on"],
                }
            )
        table = pd.DataFrame(rows)
        by_graph = table.set_index("graph")
        page.add(
            "Claim and figure (Fig. 17): the chain at 2 GPUs",
            "Speedups over 1 GPU.",
            table=table,
            judgement=judge(
                CHAIN_HELPS, (by_graph["2 GPUs chain on"] / by_graph["2 GPUs chain off"]).to_dict()
            ),
        )
        page.add(
            "Claim and figure (Fig. 17): 2 GPUs without the chain",
            judgement=judge(NO_CHAIN_NO_GAIN, by_graph["2 GPUs chain off"].to_dict()),
        )
    h2d = results[results["part"] == "chain"][["graph", "gpus", "chain", "h2d_bytes", "d2d_bytes"]]
    if len(h2d):
        page.add("Host-to-GPU and GPU-to-GPU bytes with and without the chain", table=h2d)
    results.to_csv(folder / "results.csv", index=False)
    return page


register_study(
    Study(
        NAME,
        "NeuGraph: selective and pipeline scheduling, processing order, chain-based multi-GPU",
        "paper 001 (NeuGraph), Figs. 15-17",
        "selective scheduling helps sparse graphs, pipelining dense ones; column-row beats row-column "
        "1.4-1.7x; the chain makes 2 GPUs under one switch pay off",
        points,
        analyze,
    )
)
