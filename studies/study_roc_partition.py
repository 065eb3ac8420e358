"""``roc-partition``: ROC's learned partitioner against equal-vertex and equal-edge (paper 000, Figs. 8 and 9).

Fig. 8: training throughput (full-graph epochs per second) of a GCN on 1 to 16 GPUs of
ROC's cluster (4 nodes x 4 P100, NVLink inside a node, InfiniBand between), with the
graph split into contiguous vertex ranges by equal vertex counts (NeuGraph's choice),
equal in-edge counts (graph systems' choice), or ROC's online linear-regression cost
model, which the workbench trains on the simulated per-layer, per-part times of each
iteration (:func:`workbench.online.train_online`) and which repartitions before the next.
Throughput is that of the last iteration (the learned partition settled).

Fig. 9: the cost model learned while training on one graph partitions graphs it never
saw, for inference (forward only); its latency against the two baselines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from studies.plots import bar_chart, save
from studies.report import ReportPage
from studies.runner import Point, Study, register_study

NAME = "roc-partition"
PARTITIONS = ("equal-vertex", "equal-edge", "roc")


def _config(graph: dict[str, Any], gpus: int, partition: str, model: str, iterations: int) -> dict[str, Any]:
    return {
        "name": f"{NAME}-{gpus}-{partition}",
        "graph": graph,
        "hardware": {"name": "roc-4x4p100-nvlink-ib"},
        "model": {"name": model, "hidden": 256, "num_layers": 2},
        "training": {"workers": gpus, "iterations": iterations},
        "partition": {"name": partition},
        "execution": {"name": "roc-fullgraph"},
    }


def points(full: bool) -> list[Point]:
    graph = {"name": "reddit-like", "scale": 0.2 if full else 0.05, "order": "degree"}
    iterations = 8 if full else 5
    out = []
    for gpus in (1, 2, 4, 8, 16) if full else (2, 4, 16):
        for partition in PARTITIONS:
            out.append(
                Point(
                    NAME,
                    {"part": "training", "gpus": gpus, "partition": partition},
                    _config(graph, gpus, partition, "gcn", iterations if partition == "roc" else 1),
                )
            )
    tests = [
        {"name": "reddit-like", "scale": graph["scale"], "seed": s, "order": "degree"} for s in (1, 2, 3, 4)
    ]
    for gpus in (4, 8) if full else (4,):
        out.append(
            Point(
                NAME,
                {"part": "inference", "gpus": gpus},
                _config(graph, gpus, "roc", "gin", iterations),
                measure="roc-inference",
                options={"test_graphs": tests if full else tests[:2]},
            )
        )
    return out


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    train = results[results["part"] == "training"].copy()
    train["gpus"] = train["gpus"].astype(int)
    # Static partitions: every iteration is the same, the epoch time is one iteration; roc: the last one.
    seconds = train["last_iteration_s"].where(train["partition"] == "roc", train["epoch_s"])
    train["epochs_per_s"] = 1.0 / seconds
    pivot = train.pivot_table(index="gpus", columns="partition", values="epochs_per_s")[list(PARTITIONS)]
    save(
        bar_chart(
            pivot,
            "Training throughput by partitioning (paper 000, Fig. 8)",
            "GPUs",
            "full-graph epochs per second",
        ),
        folder / "throughput.png",
    )
    gain = pd.DataFrame(
        {
            "gpus": pivot.index,
            "roc / equal-vertex": pivot["roc"] / pivot["equal-vertex"],
            "roc / equal-edge": pivot["roc"] / pivot["equal-edge"],
        }
    )
    best = gain["roc / equal-vertex"].max()
    holds = bool((gain[["roc / equal-vertex", "roc / equal-edge"]] >= 0.999).all().all())
    page = ReportPage(
        "ROC partitioning (paper 000): learned vs equal-vertex vs equal-edge",
        "ROC: the learned partitioner 'improves training throughput by up to 1.4x compared to the equal vertex "
        "partitioning' and neither baseline performs as well (Fig. 8); on unseen graphs the learned cost model "
        "cuts inference latency by up to 1.2x (Fig. 9). Simulated on ROC's 4 x 4 P100 cluster, GCN (training) "
        "and GIN (inference), 2 layers of 256, reddit-like.",
    )
    page.add(
        "Claim and figure (Fig. 8)",
        f"Paper: up to 1.4x over equal-vertex. Workbench: up to {best:.2f}x; the learned partition is "
        f"{'never' if holds else 'not always'} behind a baseline ({'direction holds' if holds else 'direction does not hold everywhere'}). "
        + (
            ""
            if holds
            else "Where it is behind, the iteration also waits on halo exchanges between machines and on the "
            "all-reduce, which ROC's cost model (the compute time of each layer on each part) does not see, so "
            "balancing compute need not shorten it; the workbench did not isolate which of the two costs the "
            "difference."
        ),
        table=gain,
    )
    page.add(
        "Training throughput", image="throughput.png", table=pivot.reset_index().rename_axis(columns=None)
    )
    roc = train[train["partition"] == "roc"][
        ["gpus", "first_iteration_s", "last_iteration_s", "boundaries_changed"]
    ]
    page.add(
        "The learned partition during training (roc)",
        "first iteration: roc's equal-edge fallback; last: the learned partition. boundaries_changed = 1 when "
        "the part boundaries moved.",
        table=roc,
    )
    inference = results[results["part"] == "inference"]
    if len(inference):
        cols = [
            "gpus",
            "test_graphs",
            "learned_s",
            "equal_edge_s",
            "equal_vertex_s",
            "speedup_vs_equal_edge",
            "speedup_vs_equal_vertex",
        ]
        s = inference["speedup_vs_equal_edge"].max()
        page.add(
            "Inference on unseen graphs (Fig. 9)",
            f"Paper: up to 1.2x lower latency with the learned cost model. Workbench: {s:.2f}x against equal-edge "
            f"({'direction holds' if s >= 1.0 else 'direction does not hold'}). Trained online on reddit-like "
            "(seed 0), tested on reddit-like graphs of other seeds.",
            table=inference[cols],
        )
    results.to_csv(folder / "results.csv", index=False)
    return page


register_study(
    Study(
        NAME,
        "ROC partitioning: learned vs equal-vertex vs equal-edge",
        "paper 000 (ROC), Figs. 8 and 9",
        "learned partitioning up to 1.4x training throughput over equal-vertex; 1.2x inference on unseen graphs",
        points,
        analyze,
    )
)
