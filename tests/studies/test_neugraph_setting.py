"""The neugraph study's setting, its element ablation and its computed causes, on figures worked out by hand."""

from __future__ import annotations

import pandas as pd

from studies import study_neugraph as ng

DENSE, SPARSE = list(ng.GRAPHS)


def test_figs_15_16_run_on_one_gpu_and_the_elements_on_eight_and_a_larger_graph() -> None:
    points = ng.points(full=False)
    workers = {}
    for p in points:
        key = (p.label["part"], p.label.get("element"))
        workers.setdefault(key, set()).add(p.config["training"]["workers"])
    assert workers[("ablation", None)] == {ng.PAPER_GPUS} == {1}
    assert workers[("order", None)] == {1}
    assert workers[("elements", "gpus")] == {ng.OLD_GPUS}
    assert workers[("chain", None)] == {1, 2, 4, 8}
    scale = [p for p in points if p.label.get("element") == "scale"]
    assert {p.label["vertices"] for p in scale} == {48_000}  # quick's larger graph is full mode's size
    assert {p.config["partition"]["gpu_memory_bytes"] for p in scale} == {"24MiB"}
    # every other point is at the main size, but the why-ablations' larger-graph rows (full mode's size)
    larger = {"scale", ng.LARGER}
    assert {p.label["vertices"] for p in points if p.label.get("element") not in larger} == {16_000}
    assert {p.label["vertices"] for p in points if p.label.get("element") == ng.LARGER} == {48_000}
    # the order points keep the streaming optimisations off, as the paper ran Fig. 16
    for p in points:
        if p.label["part"] == "order":
            assert not any(p.config["execution"][k] for k in ("selective", "pipeline", "reorder", "chain"))


def _row(part: str, graph: str, epoch: float, **label: object) -> dict[str, object]:
    return {"part": part, "graph": graph, "epoch_s": epoch, "h2d_bytes": 0, "h2d_busy_s": 0.0, **label}


def _results() -> pd.DataFrame:
    rows = []
    # one GPU (the paper's): sparse none 2.6 s, +selective 1.0 s -> 2.6x; dense +selective 3 s, +pipeline 2 s -> 1.5x
    for graph, times in (
        (SPARSE, {"none": 2.6, "+selective": 1.0, "+pipeline": 1.0, "all (+swap)": 1.0}),
        (DENSE, {"none": 3.0, "+selective": 3.0, "+pipeline": 2.0, "all (+swap)": 1.6}),
    ):
        for variant, t in times.items():
            rows.append(_row("ablation", graph, t, variant=variant, vertices=16_000))
        rows.append(_row("order", graph, 1.0, variant="column-row", vertices=16_000))
        rows.append(_row("order", graph, 1.5, variant="row-column", vertices=16_000))
    # eight GPUs (the study's old setting): sparse 1.2x, dense pipeline 1.1x, swap 1.0x, order 1.2x
    for graph, times in (
        (SPARSE, {"none": 1.2, "+selective": 1.0, "+pipeline": 1.0, "all (+swap)": 1.0}),
        (DENSE, {"none": 2.2, "+selective": 2.2, "+pipeline": 2.0, "all (+swap)": 2.0}),
    ):
        for variant, t in {**times, "column-row": 1.0, "row-column": 1.2}.items():
            rows.append(_row("elements", graph, t, element="gpus", variant=variant, vertices=16_000))
    # Fig. 17: small graph 1 GPU 1.0 s, 2 GPUs chain off 0.8 s (1.25x), chain on 0.5 s (1.6x over off);
    # larger graph 1 GPU 4.0 s, 2 off 4.0 s (1.0x), 2 on 2.0 s (2.0x)
    for graph in (DENSE, SPARSE):
        for (gpus, chain), t in {(1, True): 1.0, (2, False): 0.8, (2, True): 0.5}.items():
            rows.append(_row("chain", graph, t, gpus=gpus, chain=chain, vertices=16_000))
        for (gpus, chain), t in {(1, True): 4.0, (2, False): 4.0, (2, True): 2.0}.items():
            rows.append(_row("elements", graph, t, element="scale", gpus=gpus, chain=chain, vertices=48_000))
    return pd.DataFrame(rows)


def test_element_table_before_and_after_by_hand() -> None:
    table = ng.element_table(_results()).set_index(["claim", "graph", "element changed to the paper's"])
    gpus = "GPUs in Figs. 15-16: 8 -> 1"
    scale = "sub-chunk bytes: graph and GPU memory x3 (16,000 -> 48,000 vertices)"
    expect = {
        (ng.SELECTIVE.statement, SPARSE, gpus): (1.2, 2.6),
        (ng.PIPELINE.statement, DENSE, gpus): (1.1, 1.5),
        (ng.SWAP, DENSE, gpus): (1.0, 1.25),
        (ng.ORDER.statement, SPARSE, gpus): (1.2, 1.5),
        (ng.NO_CHAIN_NO_GAIN.statement, DENSE, scale): (1.25, 1.0),
        (ng.CHAIN_HELPS.statement, SPARSE, scale): (1.6, 2.0),
    }
    for key, (before, after) in expect.items():
        assert abs(table.loc[key, "figure before"] - before) < 1e-9
        assert abs(table.loc[key, "figure after"] - after) < 1e-9
    assert len(table) == 2 * 3 + 2 * 2  # three Fig. 15-16 rows and two Fig. 17 rows per graph


def test_causes_are_computed_from_the_results() -> None:
    results = _results()
    sparse = (results["part"] == "ablation") & (results["graph"] == SPARSE)
    results.loc[sparse & (results["variant"] == "none"), "h2d_bytes"] = 300
    results.loc[sparse & (results["variant"] == "+selective"), "h2d_bytes"] = 100
    dense = (
        (results["part"] == "ablation") & (results["graph"] == DENSE) & (results["variant"] == "all (+swap)")
    )
    results.loc[dense, "h2d_busy_s"] = 1.2  # 75% of its 1.6 s epoch
    chain = (results["part"] == "chain") & (results["graph"] == DENSE)
    results.loc[chain & (results["gpus"] == 1), "h2d_bytes"] = 9e9  # 9 GB/s over 1 s
    results.loc[chain & (results["gpus"] == 2) & ~results["chain"].astype(bool), "h2d_bytes"] = (
        9.6e9  # 12 GB/s
    )
    text = ng.causes(results)
    assert "cuts the host-to-GPU bytes 3.00x and the epoch 2.60x" in text
    assert "busy 75% of the epoch" in text and "at most 25%" in text and "gains 1.250x" in text
    assert "at 9.0 GB/s" in text and "at 12.0 GB/s together" in text


def test_setting_table_names_the_paper_and_the_study() -> None:
    table = ng.setting_table(_results(), {DENSE: 15, SPARSE: 4}).set_index("")
    assert list(table.columns) == ["paper 001", "this study"]
    assert "16,000 vertices" in table.loc["graphs", "this study"]
    assert "dense P = 15, sparse P = 4" in table.loc["GPU memory, chunks P", "this study"]
    assert "8MiB" in table.loc["GPU memory, chunks P", "this study"]
    assert table.loc["GPUs", "this study"].startswith("Figs. 15-16: 1 (before: 8)")
