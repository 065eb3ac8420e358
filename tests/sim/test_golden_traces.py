"""Traces stay bit-identical when the simulator's fixed costs change (issue 28).

The golden traces in ``tests/sim/golden/`` were written by the simulator *before* its
validation, setup and trace building were reworked; every case is simulated again and
compared column by column, exactly, with its memory peaks and makespan. Cases: every
example plan on its hardware, three plans the spine built from example configurations
(saved as plan files, so changes to the plan builders do not move them), and the
simulator benchmark's plan at 3,000 tasks, with and without compute jitter.

Regenerate (only when a change of the simulated behaviour is intended)::

    GNNWB_WRITE_GOLDEN=1 .venv/bin/pytest tests/sim/test_golden_traces.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sim import simulate
from workbench.hardware import PRESETS, load_hardware
from workbench.plan import Plan

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = ROOT / "examples" / "plans"


def _bench_plan(tasks: int) -> Plan:
    """The plan of ``benchmarks/bench_sim.py`` (a script, not a package: loaded by path)."""
    if str(ROOT / "benchmarks") not in sys.path:  # the script imports its neighbour benchmarks/machine.py
        sys.path.append(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("bench_sim", ROOT / "benchmarks" / "bench_sim.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.build_plan(tasks, load_hardware("neugraph-8xp100-pcie").gpu_nodes(), 1)


def _hardware(plan: Plan, folder: Path) -> Any:
    name = plan.meta["hardware"]
    return load_hardware(name if name in PRESETS else folder / name)


def cases() -> Iterator[tuple[str, Plan, Any, dict[str, Any]]]:
    """(case name, plan, hardware, simulate() keywords)."""
    for path in sorted(EXAMPLES.glob("*.json")):
        plan = Plan.load(path)
        yield path.stem, plan, _hardware(plan, EXAMPLES), {}
    for path in sorted(GOLDEN.glob("*.plan.json")):
        plan = Plan.load(path)
        yield path.name.removesuffix(".plan.json"), plan, _hardware(plan, GOLDEN), {}
    plan = _bench_plan(3000)
    hardware = load_hardware("neugraph-8xp100-pcie")
    yield "bench-sim-3000", plan, hardware, {}
    yield "bench-sim-3000-jitter", plan, hardware, {"seed": 3, "jitter": 0.2}


CASES = list(cases())


def _rtol(kw: dict[str, Any]) -> float:
    """Exact, except where jitter is drawn: its lognormal factors come from numpy's ``exp``, whose
    last bit differs between processors' SIMD paths (an AVX2-only EPYC moved 14 of the
    3,000-task jitter trace's times by 2.8e-17 s against the golden written elsewhere)."""
    return 1e-12 if kw.get("jitter") else 0.0


def _assert_golden(trace: pd.DataFrame, golden: pd.DataFrame, kw: dict[str, Any]) -> None:
    rtol = _rtol(kw)
    pd.testing.assert_frame_equal(trace, golden, check_exact=not rtol, rtol=rtol or 1e-5, atol=rtol * 1e-3)


@pytest.mark.parametrize("name,plan,hardware,kw", CASES, ids=[c[0] for c in CASES])
def test_trace_matches_golden(name: str, plan: Plan, hardware: Any, kw: dict[str, Any]) -> None:
    result = simulate(plan, hardware, run_id="golden", **kw)
    trace_path = GOLDEN / f"{name}.trace.parquet"
    summary_path = GOLDEN / f"{name}.summary.json"
    summary = {"makespan": result.makespan, "memory": result.memory}
    if os.environ.get("GNNWB_WRITE_GOLDEN"):
        result.trace.to_parquet(trace_path, index=False)
        summary_path.write_text(json.dumps(summary, indent=1, sort_keys=True))
    golden = pd.read_parquet(trace_path)
    _assert_golden(result.trace, golden, kw)
    recorded = json.loads(summary_path.read_text())
    assert json.loads(json.dumps(summary["memory"])) == recorded["memory"]
    assert summary["makespan"] == pytest.approx(recorded["makespan"], rel=_rtol(kw), abs=0)


@pytest.mark.parametrize("name,plan,hardware,kw", CASES, ids=[c[0] for c in CASES])
def test_a_checked_plan_simulated_again_gives_the_golden_trace(
    name: str, plan: Plan, hardware: Any, kw: dict[str, Any]
) -> None:
    """A snapshot (validated once, its setup and trace columns derived on the first run)
    gives the same trace on every run, also after a run on other hardware in between."""
    checked = plan.checked()
    golden = pd.read_parquet(GOLDEN / f"{name}.trace.parquet")
    for _ in range(2):
        result = simulate(checked, hardware, run_id="golden", **kw)
        _assert_golden(result.trace, golden, kw)
        if name.startswith("bench-sim"):  # the same snapshot on another cluster in between
            simulate(checked, load_hardware("v100x8-nvswitch"), run_id="other", **kw)


def test_a_checked_plan_refuses_hardware_without_its_nodes_as_the_plan_does() -> None:
    from workbench.errors import PlanError

    plan = _bench_plan(200)
    hardware = load_hardware("hopgnn-4xa100-10gbe")  # one GPU per machine
    with pytest.raises(PlanError) as direct:
        simulate(plan, hardware)
    with pytest.raises(
        PlanError, match="task 'i0.w1.h2d': the hardware has no device or memory 'm0.gpu1'"
    ) as snap:
        simulate(plan.checked(), hardware)
    assert str(snap.value) == str(direct.value)
