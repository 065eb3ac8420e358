"""Every example configuration with an [execution] table runs through `gnnwb plan` and `gnnwb sim` in seconds."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from workbench.cli.main import main
from workbench.trace import read_trace

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIGS = sorted(p for p in EXAMPLES.rglob("*.toml") if "execution" in tomllib.loads(p.read_text()))


def test_there_is_an_example_per_minibatch_scheme():
    schemes = {tomllib.loads(p.read_text())["execution"]["name"] for p in CONFIGS}
    assert "model-centric" in schemes


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_example_config_simulates_in_seconds(path, tmp_path, capsys):
    t0 = time.perf_counter()
    assert main(["sim", str(path), "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    assert time.perf_counter() - t0 < 60
    out = capsys.readouterr().out
    assert "epoch time:" in out and "phase" in out
    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    trace = read_trace(tmp_path / "trace.parquet")
    assert row["epoch_s"] == pytest.approx(trace["end"].max())
    assert (tmp_path / "config.toml").read_text() == path.read_text()
    assert main(["plan", str(path), "-o", str(tmp_path / "plan.json")]) == 0
    assert (tmp_path / "plan.json").stat().st_size > 0
