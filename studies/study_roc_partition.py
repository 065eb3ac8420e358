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
from studies.verdict import Claim, judge

OVER_EQUAL_VERTEX = Claim(
    "the learned partitioner trains faster than equal-vertex",
    "Fig. 8",
    "roc / equal-vertex throughput",
    direction="at_least",
    paper=(1.4, 1.4),
    up_to=True,
)
OVER_EQUAL_EDGE = Claim(
    "neither baseline performs as well: the learned partitioner is not behind equal-edge",
    "Fig. 8",
    "roc / equal-edge throughput",
    direction="at_least",
)
INFERENCE = Claim(
    "the learned cost model lowers inference latency on unseen graphs",
    "Fig. 9",
    "equal-edge latency / learned latency",
    direction="at_least",
    paper=(1.2, 1.2),
    up_to=True,
)

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
    page = ReportPage(
        "ROC partitioning (paper 000): learned vs equal-vertex vs equal-edge",
        "ROC: the learned partitioner 'improves training throughput by up to 1.4x compared to the equal vertex "
        "partitioning' and neither baseline performs as well (Fig. 8); on unseen graphs the learned cost model "
        "cuts inference latency by up to 1.2x (Fig. 9). Simulated on ROC's 4 x 4 P100 cluster, GCN (training) "
        "and GIN (inference), 2 layers of 256, reddit-like.",
    )
    over_vertex = judge(
        OVER_EQUAL_VERTEX, {f"{g} GPUs": v for g, v in gain.set_index("gpus")["roc / equal-vertex"].items()}
    )
    over_edge = judge(
        OVER_EQUAL_EDGE, {f"{g} GPUs": v for g, v in gain.set_index("gpus")["roc / equal-edge"].items()}
    )
    behind = "contradicted" in (over_vertex.verdict, over_edge.verdict)
    page.add(
        "Claim and figure (Fig. 8): against equal-vertex",
        (
            "Where the learned partition is behind, the iteration also waits on halo exchanges between machines "
            "and on the all-reduce, which ROC's cost model (the compute time of each layer on each part) does not "
            "see, so balancing compute need not shorten it; the workbench did not isolate which of the two costs "
            "the difference."
            if behind
            else ""
        ),
        table=gain,
        judgement=over_vertex,
    )
    page.add("Claim and figure (Fig. 8): against equal-edge", judgement=over_edge)
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
        page.add(
            "Inference on unseen graphs (Fig. 9)",
            "Trained online on reddit-like (seed 0), tested on reddit-like graphs of other seeds.",
            table=inference[cols],
            judgement=judge(
                INFERENCE,
                {
                    f"{int(g)} GPUs": v
                    for g, v in zip(inference["gpus"], inference["speedup_vs_equal_edge"], strict=True)
                },
            ),
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
