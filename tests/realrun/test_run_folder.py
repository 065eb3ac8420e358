"""A real run's folder says what ran: the configuration as executed, the plan the workers ran
and the cluster it was built for, beside the trace; calibration and ``gnnwb trace show`` read
that plan and never rebuild it, and a folder from before (no plan.json) still calibrates by
rebuilding it."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from realrun.launcher import GIVEN_CONFIG, prepare_real_run, save_run_inputs
from workbench.config import RunConfig, load_config
from workbench.hardware.spec import load_cluster_toml
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES

from .conftest import launch_real, tiny_config


@dataclass
class RealRun:
    given: Path  # the configuration file the run was given
    executed: RunConfig  # the configuration prepare_real_run returned
    prepared: Any
    plan: Plan
    out: Path


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    """One tiny two-worker CPU run, shared by this module's tests (they only read its folder)."""
    base = tmp_path_factory.mktemp("run-folder")
    given = base / "tiny.toml"
    given.write_text(tiny_config())
    _, _, executed = prepare_real_run(given, 2, "cpu")
    prepared, plan, _ = launch_real(given, 2, base / "run")
    return RealRun(given, executed, prepared, plan, base / "run")


def test_the_folder_holds_the_configuration_as_executed(real_run: RealRun) -> None:
    out = real_run.out
    executed = load_config(out / "config.toml")
    assert executed == real_run.executed == real_run.prepared.config
    params = executed.strategies["execution"].params
    imposed = EXECUTION_SCHEMES.get("model-centric").real_run_params or {}
    assert imposed and {key: params[key] for key in imposed} == dict(imposed)
    assert executed.training.workers == 2
    # The configuration as given says neither: it is kept as it was written.
    assert (out / GIVEN_CONFIG).read_text() == real_run.given.read_text()


def test_the_folder_holds_the_plan_that_ran_and_its_cluster(real_run: RealRun) -> None:
    out = real_run.out
    saved = Plan.load(out / "plan.json")
    assert saved.to_dict() == json.loads(json.dumps(real_run.plan.to_dict()))
    assert load_cluster_toml(out / "hardware.toml") == real_run.prepared.cluster
    meta = json.loads((out / "run.json").read_text())
    assert meta["files"] == {
        "trace": "trace.parquet",
        "results": "results.csv",
        "config": "config.toml",
        "plan": "plan.json",
        "hardware": "hardware.toml",
        "given_config": GIVEN_CONFIG,
    }
    assert all((out / name).is_file() for name in meta["files"].values())


def _refuse_rebuilding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the plan was rebuilt, though the folder holds the one that ran")

    monkeypatch.setattr("sim.calibrate.sources._rebuild_plan", refuse)
    monkeypatch.setattr("workbench.run.prepare_run", refuse)


def test_every_real_run_records_the_machine_load_around_it(real_run: RealRun) -> None:
    import json

    load = json.loads((real_run.out / "load.json").read_text())
    averages = {"load_before", "load_after", "cpus", "workers"}
    counted = {"others_cpu", "steal", "window_s"}  # Linux only: /proc/stat
    assert set(load) == averages | (counted if Path("/proc/stat").exists() else set())
    assert load["load_before"] >= 0 and load["load_after"] >= 0 and load["cpus"] >= 1
    assert load["workers"] == real_run.prepared.inputs.num_workers
    if "others_cpu" in load:
        assert 0 <= load["others_cpu"] <= 1 and 0 <= load["steal"] <= 1 and load["window_s"] > 0


def test_calibration_reads_the_plan_that_ran_and_never_rebuilds_it(
    real_run: RealRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sim.calibrate import features_from_plan, read_source
    from workbench.cli.main import main

    _refuse_rebuilding(monkeypatch)
    source = read_source(real_run.out / "trace.parquet")
    want = features_from_plan(source.trace, real_run.plan, source.name)
    assert source.features is not None and source.features.equals(want)
    assert (
        main(["calibrate", str(real_run.out), "-o", str(tmp_path / "profile.toml"), "--skip-epochs", "0"])
        == 0
    )


def test_an_old_folder_without_its_plan_calibrates_by_rebuilding_it(
    real_run: RealRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder as runs wrote them before: the given configuration as config.toml, no plan.json,
    hardware.toml or run.json ``files``."""
    import sim.calibrate.sources as sources
    from sim.calibrate import features_from_plan, read_source
    from workbench.cli.main import main

    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(real_run.out / "trace.parquet", old)
    shutil.copy(real_run.given, old / "config.toml")
    meta = json.loads((real_run.out / "run.json").read_text())
    del meta["files"]
    (old / "run.json").write_text(json.dumps(meta))
    rebuilt: list[Path] = []
    rebuild = sources._rebuild_plan

    def counted(folder: Path, meta: dict[str, Any]) -> Any:
        rebuilt.append(folder)
        return rebuild(folder, meta)

    monkeypatch.setattr(sources, "_rebuild_plan", counted)
    source = read_source(old / "trace.parquet")
    assert rebuilt == [old]
    assert source.features is not None
    # The executor's imposed parameters change the order of tasks, not their features.
    assert source.features.equals(features_from_plan(source.trace, real_run.plan, source.name))
    assert main(["calibrate", str(old), "-o", str(tmp_path / "profile.toml"), "--skip-epochs", "0"]) == 0


def test_trace_show_names_what_the_run_executed(
    real_run: RealRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from workbench.cli.main import main

    assert main(["trace", "show", str(real_run.out)]) == 0
    out = capsys.readouterr().out
    assert "run tiny-launch: complete, scheme model-centric, 2 workers on cpu" in out
    assert f"executed: config.toml (as given: {GIVEN_CONFIG}), plan.json, hardware.toml" in out
    assert f"plan: {len(real_run.plan.tasks):,} tasks;" in out and "0 task(s) have no row" in out


def test_a_configuration_as_executed_keeps_no_given_copy(tmp_path: Path) -> None:
    """Run again from a folder's own config.toml (what it executed): nothing differs, so no
    config.given.toml, and an earlier run's is removed rather than left to contradict it."""
    given = tmp_path / "tiny.toml"
    given.write_text(tiny_config())
    prepared, plan, _ = prepare_real_run(given, 2, "cpu")
    out = tmp_path / "run"
    out.mkdir()
    assert save_run_inputs(prepared, plan, out, given)["given_config"] == GIVEN_CONFIG
    again, plan_again, _ = prepare_real_run(out / "config.toml", 2, "cpu")
    files = save_run_inputs(again, plan_again, out, out / "config.toml")
    assert "given_config" not in files and not (out / GIVEN_CONFIG).exists()
    assert load_config(out / "config.toml") == prepared.config
    assert plan_again.to_dict() == plan.to_dict()
