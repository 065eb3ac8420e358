"""The GPU traces committed under ``reports/traces/`` (the only CUDA measurements the project has:
no CI machine has a GPU) still read and calibrate with today's code, so a change to the trace
table, the plan format or the calibration that breaks them shows here, not on the next lent GPU."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from workbench.cli.main import main

TRACES = Path(__file__).resolve().parents[1] / "reports" / "traces"
LARGE = TRACES / "nvidia-h200-large"


def gpu_folders() -> list[Path]:
    return sorted(p.parent for p in TRACES.glob("nvidia-*/summary.json"))


def test_every_committed_gpu_validation_passed_and_says_which_machine():
    folders = gpu_folders()
    assert folders, "no committed GPU validation under reports/traces/"
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["device"] == "cuda" and summary["backend"] == "nccl", folder
        assert summary["passed"] and summary["failures"] == [], folder
        assert summary["machine"]["gpus"], folder
        for run in summary["runs"]:
            trace = folder / run["folder"] / "trace.parquet"
            assert trace.is_file(), trace


@pytest.mark.skipif(not LARGE.is_dir(), reason="the large-graph H200 traces are not committed")
def test_the_large_graph_h200_runs_calibrate(tmp_path, capsys):
    # The calibration half of that validation (summary.json names it); on the H200 a gathered
    # h2d copy (index_select into pinned staging, then the DMA) runs slower per byte than a
    # whole-tensor d2h write-back, so both directions of the PCIe link are fitted and kept.
    summary = json.loads((LARGE / "summary.json").read_text())
    runs = [str(LARGE / "runs" / name) for name in summary["calibration"]["runs"]]
    profile = tmp_path / "profile.toml"
    code = main(["calibrate", *runs, "-o", str(profile), "--hardware", str(LARGE / "hardware.toml")])
    assert code == 0, capsys.readouterr().err
    pcie = tomllib.loads(profile.read_text())["links"]["pcie"]
    assert pcie["bandwidth_fitted"] and set(pcie["directions"]) == {"h2d", "d2h"}
    for direction in pcie["directions"].values():
        # PCIe 5.0 x16 moves at most about 64 GB/s; the microbenchmark's pinned copies ran at 55.
        assert 1e9 < direction["bandwidth"] < 64e9, direction
    rows = sum(len(pd.read_parquet(Path(r) / "trace.parquet", columns=["phase"])) for r in runs)
    assert rows > 1000
