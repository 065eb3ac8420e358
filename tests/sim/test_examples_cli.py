"""Every shipped example plan reproduces its hand-derived makespan; the sim and trace commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim import simulate
from workbench.cli.main import main
from workbench.hardware import PRESETS, load_hardware
from workbench.plan import Plan
from workbench.timeline import chrome_trace_events
from workbench.trace import read_trace

PLANS = sorted((Path(__file__).resolve().parents[2] / "examples" / "plans").glob("*.json"))
EXPECTED = {"one_transfer", "shared_uplink", "narrow_link", "overlap", "chain", "ring_allreduce", "swap"}


def hardware_of(plan_path: Path):
    name = json.loads(plan_path.read_text())["meta"]["hardware"]
    return load_hardware(name if name in PRESETS else plan_path.parent / name)


def test_one_example_per_analytic_case():
    assert EXPECTED <= {p.stem for p in PLANS}


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_example_plan_makespan(path):
    plan = Plan.load(path)
    assert plan.meta["why"]
    result = simulate(plan, hardware_of(path))
    assert result.makespan == pytest.approx(plan.meta["expected_makespan"], rel=1e-9, abs=1e-15)


def test_sim_command_prints_phases_and_makespan_and_writes_a_trace(tmp_path, capsys):
    plan = [p for p in PLANS if p.stem == "shared_uplink"][0]
    out = tmp_path / "t.parquet"
    assert (
        main(["sim", str(plan), "--hardware", "neugraph-8xp100-pcie", "--trace", str(out), "--seed", "1"])
        == 0
    )
    text = capsys.readouterr().out
    assert "h2d" in text and "makespan: 2.006000 ms" in text
    trace = read_trace(out)
    assert len(trace) == 2 and set(trace["run_id"]) == {"shared_uplink"}

    assert main(["trace", "show", str(out)]) == 0
    assert "makespan: 2.006000 ms" in capsys.readouterr().out

    chrome = tmp_path / "t.json"
    assert main(["trace", "export", str(out), "--chrome", str(chrome)]) == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == 2 and {e["pid"] for e in spans} == {0, 1}
    assert spans[0]["dur"] == pytest.approx(2006.0)
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"m0.gpu0 h2d", "m0.gpu1 h2d"}


def test_sim_command_uses_the_plans_hardware_by_default(capsys):
    plan = [p for p in PLANS if p.stem == "ring_allreduce"][0]
    assert main(["sim", str(plan)]) == 0
    assert "makespan: 6.000000 ms" in capsys.readouterr().out


def test_chrome_export_reads_traces_without_optional_columns():
    import pandas as pd

    df = pd.DataFrame(
        {
            "run_id": ["real"],
            "worker": [3],
            "device": ["m0.gpu3"],
            "iteration": [0],
            "phase": ["forward"],
            "ready": [0.25],
            "start": [0.5],
            "end": [0.75],
            "bytes": [0],
            "items": [10],
        }
    )
    events = chrome_trace_events(df)["traceEvents"]
    span = [e for e in events if e["ph"] == "X"][0]
    assert (span["name"], span["pid"], span["ts"], span["dur"]) == ("forward", 3, 5e5, 2.5e5)
    assert span["args"]["queued_us"] == 2.5e5  # ready at 0.25 s, started at 0.5 s


def test_trace_commands_report_bad_files(tmp_path, capsys):
    assert main(["trace", "show", str(tmp_path / "missing.parquet")]) == 2
    assert "no such trace file" in capsys.readouterr().err
