"""roc-partition and roc-memory pages: the setting tables, the 16-GPU breakdown and the element ablation,
on results written by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from studies import study_roc_memory as mem
from studies import study_roc_partition as roc


def test_setting_table_names_the_mode() -> None:
    quick, full = roc.setting_table(False), roc.setting_table(True)
    assert list(quick.columns) == ["", "paper", "study"]
    graph_q = quick.set_index("").loc["graph (Fig. 8)", "study"]
    assert "0.05" in graph_q and "11,648" in graph_q
    assert "0.2" in full.set_index("").loc["graph (Fig. 8)", "study"]
    assert "1, 2, 4, 8, 16" in full.set_index("").loc["hardware", "study"]
    assert "last of 5" in quick.set_index("").loc["throughput", "study"]


def _row(partition: str, **kw: float) -> dict:
    base = {
        "part": "training",
        "gpus": 16,
        "partition": partition,
        "iterations": 1,
        "epoch_s": 0.012,
        "last_iteration_s": 0.012,
        "forward_busy_s": 0.016,
        "backward_busy_s": 0.032,
        "gather_remote_bytes": 1.6e8,
        "allreduce_busy_s": 0.0016,
    }
    return {**base, **kw}


def test_breakdown_by_hand() -> None:
    # 16 GPUs, one iteration: (16 + 32) ms of compute over 16 GPUs is 3 ms a GPU of a 12 ms iteration.
    # roc: 2 iterations, so its totals are halved; its iteration is its last one (10 ms).
    train = pd.DataFrame(
        [
            _row("equal-vertex"),
            _row("roc", iterations=2, epoch_s=0.05, last_iteration_s=0.010, gather_remote_bytes=4e8),
        ]
    )
    b = roc.breakdown(train, 16).set_index("partition")
    assert b.loc["equal-vertex", "compute per GPU ms"] == pytest.approx(3.0)
    assert b.loc["equal-vertex", "compute share"] == pytest.approx(0.25)
    assert b.loc["equal-vertex", "halo MB between machines"] == pytest.approx(160.0)
    assert b.loc["equal-vertex", "all-reduce per GPU ms"] == pytest.approx(0.1)
    assert b.loc["roc", "iteration ms"] == pytest.approx(10.0)
    assert b.loc["roc", "compute per GPU ms"] == pytest.approx(1.5)
    assert b.loc["roc", "halo MB between machines"] == pytest.approx(200.0)


def test_element_table_by_hand() -> None:
    # Element "memory": equal-vertex 20 ms, roc's last iteration 25 ms -> 0.8; before: the page's 0.7.
    results = pd.DataFrame(
        [
            {"part": "elements", "element": "memory", "partition": "equal-vertex", "epoch_s": 0.020},
            {
                "part": "elements",
                "element": "memory",
                "partition": "roc",
                "epoch_s": 0.1,
                "last_iteration_s": 0.025,
            },
        ]
    )
    gain = pd.DataFrame({"gpus": [4, 16], "roc / equal-vertex": [1.2, 0.7], "roc / equal-edge": [1.0, 1.1]})
    table = roc.element_table(results, gain, full=False)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["figure before"] == pytest.approx(0.7)
    assert row["figure after"] == pytest.approx(0.8)
    assert "DPMM" in row[roc.ELEMENT_COLUMN]


def test_reddit_degree_keeps_vertices_and_takes_reddits_degree() -> None:
    from workbench.graph.datasets import resolve

    graph = {"name": "reddit-like", "scale": 0.05, "order": "degree"}
    preset = resolve("reddit-like", scale=0.05)
    dense = roc._reddit_degree(graph)
    assert dense["order"] == "degree"
    spec = resolve(dense["name"])
    assert spec is not None and preset is not None
    assert spec.structure["num_nodes"] == preset.structure["num_nodes"]
    assert spec.structure["num_edges"] == pytest.approx(10 * preset.structure["num_edges"], rel=1e-4)
    assert spec.node_data["feat_dim"] == 602


def test_element_points_change_one_element_each() -> None:
    points = [p for p in roc.points(False) if p.label["part"] == "elements"]
    assert {p.label["element"] for p in points} == {
        "online iterations",
        "graph's vertices",
        "graph's degree",
        "memory",
    }
    for p in points:
        assert p.config["training"]["workers"] == roc.ELEMENT_GPUS
        memory = p.config["execution"].get("memory_policy")
        assert (memory == "dpmm") == (p.label["element"] == "memory")


def test_memory_setting_table() -> None:
    results = pd.DataFrame({"hidden": [256, 256], "capacity_MB": [62.0, 114.0]})
    table = mem.setting_table(results).set_index("")
    assert "0.05" in table.loc["graph", "study"]
    assert "62 MB" in table.loc["GPU memory for the policy", "study"]
    assert "hidden 256" in table.loc["model", "study"]
