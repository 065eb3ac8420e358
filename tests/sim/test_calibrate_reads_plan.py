"""Calibration takes compute features from the plan that ran (``plan.json`` beside the trace)
and never rebuilds it when it is there; only a folder without one (``gnnwb sim``'s, or a real
run's from before runs kept their plan) has its plan rebuilt from its ``config.toml``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import sim.calibrate.sources as sources
from sim.calibrate import features_from_plan, read_source
from workbench.config import load_config
from workbench.plan import Plan
from workbench.run import prepare_run

TINY = """
name = "tiny-reads-plan"
[graph]
name = "er:n=600,deg=8"
[hardware]
name = "hopgnn-4xa100-10gbe"
[model]
name = "sage"
hidden = 16
[training]
batch_size = 32
iterations = 4
workers = 2
[partition]
name = "random"
[sampling]
name = "neighbor"
fanouts = [5, 5]
"""


@pytest.fixture(scope="module")
def sim_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan]:
    """A ``gnnwb sim CONFIG --out`` folder (trace.parquet and config.toml) and the run's plan."""
    from workbench.cli.main import main

    base = tmp_path_factory.mktemp("reads-plan")
    config = base / "tiny.toml"
    config.write_text(TINY)
    assert main(["sim", str(config), "--out", str(base / "run")]) == 0
    return base / "run", prepare_run(load_config(config)).plan()


def _folder(tmp_path: Path, sim_folder: tuple[Path, Plan], plan: Plan | None) -> Path:
    """A copy of the sim folder, with ``plan`` saved as its plan.json (none when None)."""
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("trace.parquet", "config.toml"):
        (folder / name).write_bytes((sim_folder[0] / name).read_bytes())
    if plan is not None:
        plan.save(folder / "plan.json")
    return folder


def _doubled_flops(plan: Plan) -> Plan:
    """``plan`` with every compute task's flops doubled: what no rebuild from config.toml gives."""
    tasks = [
        dataclasses.replace(t, features={**t.features, "flops": 2 * t.features.get("flops", 0.0)})
        if t.kind == "compute"
        else t
        for t in plan.tasks
    ]
    return Plan(plan.name, tasks, list(plan.resident), dict(plan.meta), dict(plan.workers))


def test_the_saved_plan_gives_the_features_and_nothing_is_rebuilt(
    sim_folder: tuple[Path, Plan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the plan was rebuilt, though plan.json is beside the trace")

    monkeypatch.setattr(sources, "_rebuild_plan", refuse)
    monkeypatch.setattr("workbench.run.prepare_run", refuse)
    saved = _doubled_flops(sim_folder[1])
    source = read_source(_folder(tmp_path, sim_folder, saved) / "trace.parquet")
    assert source.features is not None
    assert source.features.equals(features_from_plan(source.trace, saved, source.name))
    compute = source.trace["kind"] == "compute"
    rebuilt = features_from_plan(source.trace, sim_folder[1], source.name)
    assert (source.features.loc[compute, "flops"] == 2 * rebuilt.loc[compute, "flops"]).all()


def test_without_a_saved_plan_it_is_rebuilt_from_the_configuration(
    sim_folder: tuple[Path, Plan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path, sim_folder, None)
    rebuilt: list[Path] = []
    rebuild = sources._rebuild_plan

    def counted(where: Path, meta: dict[str, Any]) -> Any:
        rebuilt.append(where)
        return rebuild(where, meta)

    monkeypatch.setattr(sources, "_rebuild_plan", counted)
    source = read_source(folder / "trace.parquet")
    assert rebuilt == [folder]
    assert source.features is not None
    assert source.features.equals(features_from_plan(source.trace, sim_folder[1], source.name))
    # Asked not to rebuild (the fidelity study's own runs): no features, and no rebuild either.
    assert read_source(folder / "trace.parquet", rebuild_plans=False).features is None
    assert rebuilt == [folder]
