"""The quick demo behind ``gnnwb run``: it writes every file it promises, and they read back."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from studies.demo import DemoSettings, run_demo
from workbench.trace import read_trace


def test_demo_writes_traces_table_figure_and_pages(tmp_path: Path) -> None:
    settings = DemoSettings(scale=0.004, iterations=2, batch_size=64)
    table = run_demo(tmp_path / "demo", settings, progress=False)

    assert len(table) == len(settings.hardware) * len(settings.placements)
    assert (table["makespan_s"] > 0).all()
    # A GPU cache can only remove feature traffic, never add it.
    for hw in settings.hardware:
        moved = table[table["hardware"] == hw].set_index("placement")["feature_bytes_moved"]
        assert moved["degree"] <= moved["none"]

    out = tmp_path / "demo"
    for _, row in table.iterrows():
        trace = read_trace(out / "traces" / f"{row['hardware']}.{row['placement']}.parquet")
        assert abs(trace["end"].max() - row["makespan_s"]) < 1e-9
    assert pd.read_csv(out / "results.csv").shape == table.shape
    assert (out / "phases.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "timeline.json").read_text())["traceEvents"]
    assert "<img" in (out / "index.html").read_text()
    assert "href='demo/index.html'" in (tmp_path / "index.html").read_text()


def test_demo_is_deterministic(tmp_path: Path) -> None:
    settings = DemoSettings(scale=0.004, iterations=1, batch_size=32, hardware=("hopgnn-4xa100-10gbe",))
    a = run_demo(tmp_path / "a", settings, progress=False)
    b = run_demo(tmp_path / "b", settings, progress=False)
    pd.testing.assert_frame_equal(a, b)
