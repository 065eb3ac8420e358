"""The bulk-sampling study's critical path of a sampling step, on a plan worked out by hand."""

from __future__ import annotations

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
