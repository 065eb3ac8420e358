"""The bulk-sampling study's critical path of a sampling step, on a plan worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from sim import simulate
from studies.measures import sampling_step_figures
from workbench.hardware import load_hardware
from workbench.plan import Plan


def test_critical_path_splits_communication_from_compute() -> None:
    """a (compute) -> b (100 MB over NVLink, 100 GB/s: 1 ms and 1 us) -> c (compute), and a side
    transfer d of 10 MB that ends early: the path is a, b, c; d's bytes count, its time does not."""
    cluster = load_hardware("perlmutter-4xa100-slingshot")
    g0, g1 = cluster.gpu_nodes()[:2]
    plan = Plan(name="step")
    plan.compute("b0.l0.a", g0, "sample", features={"edges": 1e6})
    plan.transfer("b0.l0.b", g0, g1, 100_000_000, "sample", deps=["b0.l0.a"], carries="adjacency")
    plan.transfer("b0.l0.d", g1, g0, 10_000_000, "sample", carries="indices")
    plan.compute("b0.l1.c", g1, "sample", deps=["b0.l0.b", "b0.l0.d"], features={"edges": 1e6})
    trace = simulate(plan, cluster).trace
    span = trace.groupby("task").agg(start=("start", "min"), end=("end", "max"))
    length = span["end"] - span["start"]
    figures = sampling_step_figures(plan, trace, workers=2)
    assert figures["critical_comm_ms"] == pytest.approx(1e3 * length["b0.l0.b"])
    assert figures["critical_comm_ms"] == pytest.approx(1.0, rel=0.02)
    assert figures["critical_comm_seed_layer_ms"] == pytest.approx(figures["critical_comm_ms"])
    assert figures["critical_compute_ms"] == pytest.approx(1e3 * (length["b0.l0.a"] + length["b0.l1.c"]))
    assert figures["step_ms"] == pytest.approx(1e3 * span["end"].max())
    assert figures["rows_MB_per_process"] == pytest.approx(50.0)
    assert figures["request_MB_per_process"] == pytest.approx(5.0)
    assert figures["MB_per_process"] == pytest.approx(55.0)


def test_the_page_shows_the_recorded_real_runs_beside_the_simulated(tmp_path) -> None:
    """The recorded real runs (studies/measured/bulk-sampling-real.json) become a section with the
    measured and simulated bytes per process against c; a run whose bytes missed its plan says so."""
    import json

    from studies.report import ReportPage
    from studies.study_bulk_sampling import REAL_RECORD, _real_section

    record = json.loads(REAL_RECORD.read_text())
    assert {row["layout"] for row in record["rows"]} == {"replicated", "1.5D c=1", "1.5D c=2"}
    for row in record["rows"]:
        assert row["real_MB_per_process"] == row["sim_MB_per_process"] and row["bytes_match_plan"]
    page = ReportPage("t", "s")
    _real_section(page, tmp_path, record)
    (section,) = page.sections
    assert "measured for real" in section.title and "every run moved exactly its plan's bytes" in section.text
    assert (tmp_path / "real_bytes_vs_c.png").is_file()
    record["rows"][1]["bytes_match_plan"] = False
    page = ReportPage("t", "s")
    _real_section(page, tmp_path, record)
    assert "differ from its plan's" in page.sections[0].text


def test_a_reply_queued_behind_its_owners_other_reply_counts_as_communication() -> None:
    """g0 sends 100 MB to g1 (x) and 100 MB to g2 (y) at once over NVLink (100 GB/s): a peer copy holds
    its source's one outbound copy engine (A100: two engines), so y waits ~1 ms for x, then takes ~1 ms;
    z computes on g2 after y. The path is y, z: 1 ms of transfer, 1 ms queued, both row data."""
    from studies.measures import critical_path

    cluster = load_hardware("perlmutter-4xa100-slingshot")
    g0, g1, g2 = cluster.gpu_nodes()[:3]
    plan = Plan(name="step")
    plan.transfer("b0.l0.x", g0, g1, 100_000_000, "sample", carries="adjacency")
    plan.transfer("b0.l0.y", g0, g2, 100_000_000, "sample", carries="adjacency")
    plan.compute("b0.l0.z", g2, "sample", deps=["b0.l0.y"], features={"edges": 1e6})
    trace = simulate(plan, cluster).trace
    path = critical_path(plan, trace)
    assert list(path["task"]) == ["b0.l0.y", "b0.l0.z"]
    assert list(path["term"]) == ["rows", "compute"]
    assert path["queued"].iloc[0] == pytest.approx(1e-3, rel=0.02)
    figures = sampling_step_figures(plan, trace, workers=3)
    assert figures["critical_comm_ms"] == pytest.approx(1.0, rel=0.02)
    assert figures["critical_comm_queued_ms"] == pytest.approx(2.0, rel=0.02)
    assert figures["critical_wait_ms"] == pytest.approx(1.0, rel=0.02)
    assert figures["path_rows_ms"] == pytest.approx(1.0, rel=0.02)
    assert figures["path_rows_queued_ms"] == pytest.approx(1.0, rel=0.02)
    assert figures["path_allreduce_ms"] == figures["path_request_ms"] == 0.0
    # Durations plus queues cover the whole step.
    covered = (
        figures["critical_comm_queued_ms"] + figures["path_compute_ms"] + figures["path_compute_queued_ms"]
    )
    assert covered == pytest.approx(figures["step_ms"])


def _paper_points() -> pd.DataFrame:
    """Two GPU counts of the paper's schedule, by hand: P=4 with c=1, 2; P=8 with c=1, 2."""
    rows = []
    for gpus, c, rows_ms, queued, allreduce in ((4, 1, 2.0, 3.0, 0.0), (4, 2, 1.0, 0.0, 4.0), (8, 1, 8.0, 0.0, 0.0),
                                                (8, 2, 2.0, 0.0, 1.0)):  # fmt: skip
        rows.append(
            {
                "gpus": gpus, "c": c, "step_ms": 10.0, "path_request_ms": 0.1, "path_request_queued_ms": 0.0,
                "path_rows_ms": rows_ms, "path_rows_queued_ms": queued, "path_allreduce_ms": allreduce,
                "path_allreduce_queued_ms": 0.0, "path_compute_ms": 0.5, "path_compute_queued_ms": 0.0,
                "edges": 1_000_000, "vertices": 100_000, "batch_size": 100, "iterations": 2,
                "rows_MB_per_process": 3.6 / c,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def test_path_terms_by_hand() -> None:
    """Row data is its transfers plus their queue (2 + 3 ms at P=4, c=1); a process fetches 3.6/c MB of
    the paper's 3 layers x 1e6/c nonzeros x 12 B = 36/c MB: 10%; the paper's rows / all-reduce at c=2 is
    n / (b * iterations * c^2) = 1e5 / 800 = 125, the simulated 1 ms / 4 ms."""
    from studies.study_bulk_sampling import path_terms, term_findings

    terms = path_terms(_paper_points())
    first = terms.iloc[0]
    assert first["rows_ms"] == 5.0 and first["rows_queued_ms"] == 3.0 and first["request_ms"] == 0.1
    assert terms["rows fetched / paper's n d / c"].tolist() == pytest.approx([0.1] * 4)
    assert terms["rows / all-reduce, paper"].iloc[1] == pytest.approx(125.0)
    assert terms["rows / all-reduce, simulated"].tolist()[1::2] == pytest.approx([0.25, 2.0])
    assert pd.isna(terms["rows / all-reduce, simulated"].iloc[0])
    text = term_findings(terms)
    assert "4 GPUs, c=1 -> c=2: row data 5 -> 1 ms (5.00x lower; the paper's n d / c: 2x)" in text
    assert "queued for the owner's copy engine 3 -> 0 ms" in text
    assert (
        "8 GPUs, c=1 -> c=2: row data 8 -> 2 ms (4.00x lower; the paper's n d / c: 2x); row all-reduce"
        in text
    )
    assert "outweighs the row data at 4 GPUs c=2." in text and "125x the all-reduce" in text
    assert "0.25-2x" in text and "10.0%-10.0%" in text


def test_element_table_names_the_element_that_turns_the_verdict() -> None:
    """Each element's figure (c=1 over the largest c) before and after; only counting the queue flips
    P=4 from 0.5x to 1.25x here, so it alone changes the verdict."""
    from studies.study_bulk_sampling import (
        PAPER_SCHEDULE,
        SCHEDULES,
        element_findings,
        element_table,
        paper_model_ratio,
    )

    rows = []
    for schedule in SCHEDULES:
        for gpus, c, comm, queued, seed in ((4, 1, 1.0, 2.5, 0.5), (4, 2, 2.0, 2.0, 0.1), (8, 1, 4.0, 4.0, 1.0),
                                            (8, 2, 2.0, 2.0, 0.5)):  # fmt: skip
            rows.append(
                {
                    "schedule": SCHEDULES[schedule], "gpus": gpus, "c": c, "critical_comm_ms": comm,
                    "critical_comm_queued_ms": queued, "critical_comm_queued_seed_layer_ms": seed,
                }
            )  # fmt: skip
    table = element_table(pd.DataFrame(rows))
    assert len(table) == 8
    queue = table[table["element"].str.contains("copy engine")].set_index("point")
    assert queue.loc["4 GPUs, c=1 vs c=2", "before"] == pytest.approx(0.5)
    assert queue.loc["4 GPUs, c=1 vs c=2", "after"] == pytest.approx(1.25)
    text = element_findings(table)
    assert "counted as communication: 0.5-2x (contradicted) -> 1.25-2x (reproduced)" in text
    assert text.endswith(
        "The element that changes the verdict: a transfer's wait for its copy engine counted as communication "
        "(contradicted -> reproduced)."
    )
    assert PAPER_SCHEDULE in SCHEDULES
    assert paper_model_ratio(1000, 10, 2, 2) == pytest.approx(1000 / (500 + 40))


def test_the_large_setting_runs_papers_like_at_full_size_on_128_gpus_one_point_at_a_time() -> None:
    """Full mode extends the scaling grid to paper 004's largest setting; quick mode scales it down."""
    from studies.study_bulk_sampling import PAPER_SCHEDULE, points
    from workbench.config import config_from_dict

    for full, gpus, scale, cs in ((True, 128, 1.0, [1, 2, 4, 8]), (False, 32, 0.01, [1, 2, 4])):
        large = [p for p in points(full) if p.config["graph"]["name"] == "papers-like"]
        assert [p.label["layout"] for p in large] == ["replicated"] + [f"1.5D c={c}" for c in cs]
        for p in large:
            cfg = config_from_dict(p.config, "point")
            assert (cfg.graph.scale, cfg.training.workers, cfg.hardware.machines) == (scale, gpus, gpus // 4)
            assert p.alone is full
            if p.label["c"] > 1:
                assert (
                    p.config["execution"]["schedule"],
                    p.config["execution"]["row_allreduce"],
                ) == PAPER_SCHEDULE
        assert not any(p.alone for p in points(full) if p not in large)
