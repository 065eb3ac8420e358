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
        *roc.NUMBERINGS,
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


def test_ppi_like_sizes_from_table_4() -> None:
    from workbench.graph.datasets import resolve

    one = resolve(roc.ppi_like(1, 21, "degree")["name"])
    union = resolve(roc.ppi_like(roc.PPI_TRAINING_GRAPHS, 0, "degree")["name"])
    assert one is not None and union is not None
    # 56,944 vertices and 1,612,348 edges in 24 graphs: about 2,373 vertices and 67,190 edges a graph.
    assert one.structure["num_nodes"] == 2373
    assert one.structure["num_edges"] == pytest.approx(67_190, abs=2)
    assert one.node_data["feat_dim"] == 700 and one.node_data["num_classes"] == 121
    assert union.structure["num_nodes"] == 20 * 2373
    assert union.structure["num_communities"] == 20 and union.structure["p_in"] == 1.0
    # Trained on reddit-like, the test graphs keep its features.
    assert "feat=602" in roc.ppi_like(1, 21, "degree", (602, 41))["name"]


def _inference_row(part: str, element: str | None, gpus: int, edge: float, vertex: float) -> dict:
    return {
        "part": part,
        "element": element,
        "gpus": gpus,
        "speedup_vs_equal_edge": edge,
        "speedup_vs_equal_vertex": vertex,
    }


def test_inference_element_table_and_sentence_by_hand() -> None:
    # The study's rows (part inference) at 2, 4 and 16 GPUs; the ablation's at 4 and 16.
    results = pd.DataFrame(
        [
            _inference_row("inference", None, 2, 1.02, 1.05),
            _inference_row("inference", None, 4, 1.05, 1.06),
            _inference_row("inference", None, 16, 1.25, 0.7),
            _inference_row("inference-elements", "test graphs", 4, 1.1, 1.0),
            _inference_row("inference-elements", "test graphs", 16, 1.4, 0.9),
            _inference_row("inference-elements", "numbering", 4, 1.0, 1.0),
            _inference_row("inference-elements", "numbering", 16, 1.01, 1.0),
        ]
    )
    table = roc.inference_element_table(results, full=False)
    assert len(table) == 3
    assert table.iloc[0]["vs equal-edge, 16 GPUs"] == pytest.approx(1.25)
    assert table.iloc[1]["vs equal-vertex, 16 GPUs"] == pytest.approx(0.9)
    text = roc.inference_element_text(table)
    assert "1.25x -> 1.40x at 16 GPUs" in text
    assert "The largest figure is 1.40x (paper: up to 1.2x), at 16 GPUs" in text
    assert "smallest figures is 'and the numbering" in text and "(at most 1.01x)" in text


def test_inference_element_points() -> None:
    points = [p for p in roc.points(False) if p.label["part"] == "inference-elements"]
    assert {(p.label["element"], p.label["gpus"]) for p in points} == {
        (e, g) for e in ("test graphs", "training and test graphs", "numbering") for g in (4, 16)
    }
    for p in points:
        assert len(p.options["test_graphs"]) == 4
    inference = [p.label["gpus"] for p in roc.points(False) if p.label["part"] == "inference"]
    assert inference == [2, 4, 16]


def test_element_text_names_the_compute_share() -> None:
    table = pd.DataFrame(
        {
            roc.ELEMENT_COLUMN: ["denser", "dpmm"],
            "figure before": [0.7, 0.7],
            "figure after": [0.9, 0.8],
            "roc compute share before": [0.05, 0.05],
            "roc compute share after": [0.2, 0.03],
        }
    )
    text = roc.element_text(table)
    assert "None of these turns the direction" in text
    assert "'denser' (0.70x -> 0.90x); with it roc's compute is 5% -> 20%" in text
    assert "the largest share of any row" in text
    table.loc[1, "roc compute share after"] = 0.3
    assert "the compute share alone does not order the rows" in roc.element_text(table)


def _mode_rows(scale: float, hidden: int, steps: int, ratios: list[float]) -> list[dict]:
    rows = []
    for k, ratio in enumerate(ratios):
        for policy, loads in (("lru", 100.0 * ratio), ("dpmm", 100.0)):
            rows.append(
                {
                    "part": "modes",
                    "scale": scale,
                    "hidden": hidden,
                    "steps": steps,
                    "capacity_MB": 10.0 * (k + 1),
                    "policy": policy,
                    "h2d_bytes": loads,
                }
            )
    return rows


def test_mode_ablation_by_hand() -> None:
    # Quick: scale 0.05, hidden 256, 6 capacities; full: scale 0.2, hidden 256 and 512, 8 capacities.
    rows = []
    for scale in (0.05, 0.2):
        rows += _mode_rows(scale, 256, 6, [1.3, 1.6, 1.0, 1.0, 1.0, 1.0])
        rows += _mode_rows(scale, 256, 8, [1.35] + [1.0] * 7)
    rows += _mode_rows(0.05, 512, 6, [1.6] + [1.0] * 5) + _mode_rows(0.05, 512, 8, [1.07] + [1.0] * 7)
    rows += _mode_rows(0.2, 512, 6, [1.07] + [1.0] * 5) + _mode_rows(
        0.2, 512, 8, [1.0, 1.0, 1.83] + [1.0] * 5
    )
    table = mem.mode_ablation_table(pd.DataFrame(rows)).set_index(["scale", "hidden"])
    assert table.loc[(0.05, 256), "largest LRU / DP, quick's grid (6 capacities)"] == pytest.approx(1.6)
    assert table.loc[(0.05, 256), "at MB, quick's grid"] == pytest.approx(20.0)
    assert table.loc[(0.2, 512), "largest LRU / DP, full's grid (8 capacities)"] == pytest.approx(1.83)
    text = mem.mode_ablation_text(table.reset_index())
    assert "Quick's figure is 1.60x" in text and "full's 1.83x (scale 0.2, hidden 512, 8 capacities)" in text
    assert "scale moves the largest LRU / DP by at most 0.00 and the capacity steps by up to 0.25" in text
    assert "from 1.07x to 1.83x" in text


def test_memory_main_grid_is_unchanged_by_the_mode_ablation() -> None:
    main = [p for p in mem.points(False) if "part" not in p.label]
    assert len(main) == 6 * 3 and {p.label["hidden"] for p in main} == {256}
    modes = [p for p in mem.points(False) if p.label.get("part") == "modes"]
    assert {(p.label["scale"], p.label["hidden"], p.label["steps"]) for p in modes} == {
        (s, h, k) for s in (0.05, 0.2) for h in (256, 512) for k in (6, 8)
    }


def test_machine_once_halo_bytes_by_hand() -> None:
    # 4 vertices, parts 0 and 1 on machine 0, part 2 on machine 1; in-neighbours: v0 <- {2, 3},
    # v1 <- {2}, v2 <- {0}, v3 <- {0}. Machine 0 fetches rows 2 and 3 once (v2 is read by two of its
    # parts), machine 1 fetches row 0 once. Widths 2 and 1: 12 bytes a row forward, 4 back.
    from types import SimpleNamespace

    import numpy as np

    graph = SimpleNamespace(num_nodes=4, indptr=np.array([0, 2, 3, 4, 5]), indices=np.array([2, 3, 2, 0, 0]))
    owner = np.array([0, 1, 2, 2])
    sent, received = roc.machine_once_halo_bytes(graph, owner, np.array([0, 0, 1]), [2, 1])
    assert sent.tolist() == [1 * 12 + 2 * 4, 2 * 12 + 1 * 4]
    assert received.tolist() == [2 * 12 + 1 * 4, 1 * 12 + 2 * 4]
    sent, received = roc.machine_once_halo_bytes(graph, owner, np.array([0, 0, 1]), [2, 1], training=False)
    assert sent.tolist() == [12, 24] and received.tolist() == [24, 12]


def test_halo_model_text_by_hand() -> None:
    labels = list(roc.HALO_MODELS)
    models = pd.DataFrame(
        [
            {"partition": "equal-vertex", **dict.fromkeys(labels, 40.0)},
            {"partition": "equal-edge", **dict.fromkeys(labels, 60.0)},
        ]
    )
    models.loc[1, labels[1]] = 50.0
    text = roc.halo_model_text(models)
    assert "1.50x" in text and f"least in '{labels[1]}', 1.25x" in text and "no halo model" in text
    models.loc[1, labels[3]] = 30.0
    assert "decides the port imbalance" in roc.halo_model_text(models)
