"""roc-fullgraph for real: full-graph training across worker processes with halo exchange.

Full-graph training computes the same thing whatever the partition: a run on one worker
(no halo at all) and runs on two and three workers (halo rows and their gradients
exchanged between processes) must train the same model, epoch by epoch. Each run's bytes
per phase must equal its plan's, and its trace must hold the plan's tasks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from realrun.launcher import launch, prepare_real_run
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real

CONFIG = """
name = "roc-real"
seed = 1

[graph]
name = "sbm:n=400,blocks=4,deg=8"

[hardware]
name = "{hardware}"

[model]
name = "sage"
hidden = 16
num_layers = 2

[training]
iterations = 3
learning_rate = 0.05

[partition]
name = "random"

[execution]
name = "roc-fullgraph"
{execution}"""


def run(tmp: Path, workers: int, hardware: str, epochs: int = 2):
    config = tmp / f"roc-{workers}-{hardware}.toml"
    config.write_text(CONFIG.format(hardware=hardware, execution=""))
    prepared, plan, summary = launch_real(config, workers, tmp / config.stem, epochs=epochs)
    assert summary.complete, summary.error
    return prepared, plan, summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("roc")
    return {
        "one": run(tmp, 1, "hopgnn-4xa100-10gbe"),
        "three machines": run(tmp, 3, "hopgnn-4xa100-10gbe"),  # halo over the network
        "one machine": run(tmp, 2, "v100x8-nvswitch"),  # halo between GPUs, input features from host
    }


@pytest.mark.parametrize("name", ["three machines", "one machine"])
def test_real_bytes_per_phase_equal_the_plans(runs, name: str) -> None:
    prepared, plan, summary = runs[name]
    planned = Counter()
    for t in plan.tasks:
        planned[t.phase] += t.bytes * (len(t.devices) if t.kind == "collective" else 1)
    if name == "three machines":
        assert planned["gather_remote"] > 0 and planned["d2d"] == 0
    else:
        assert planned["d2d"] > 0 and planned["gather_remote"] == 0
    for row in summary.results:  # every epoch moves the same again
        for phase in ("h2d", "d2d", "gather_remote", "allreduce"):
            assert row[f"measured_{phase}_bytes"] == planned[phase], phase
        assert row["bytes_match_plan"]


def test_trace_rows_are_the_plans_tasks(runs) -> None:
    prepared, plan, summary = runs["three machines"]
    trace = read_trace(summary.out / "trace.parquet")
    for kind in (".halo0.from", ".halo1.from", ".halograd1.to"):  # the exchanges are in the plan
        assert any(kind in t.id for t in plan.tasks), kind
    assert_trace_is_the_plan(trace, plan, epochs=2)


def test_every_partition_trains_the_same_model(runs) -> None:
    """Full-graph training does not depend on the partition: the halo exchange and its gradients
    make two and three workers compute what one computes alone (up to summation order)."""
    alone = runs["one"][2].results
    for name in ("three machines", "one machine"):
        rows = runs[name][2].results
        assert len(rows) == len(alone) == 2
        for mine, theirs in zip(rows, alone, strict=True):
            assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-5, abs=1e-6), name
            assert mine["train_acc"] == pytest.approx(theirs["train_acc"], abs=1e-9), name
            assert mine["test_acc"] == pytest.approx(theirs["test_acc"], abs=1e-9), name
    assert alone[-1]["loss"] < alone[0]["loss"]  # and it trains


def test_the_online_loop_trains_one_model_over_its_launches(tmp_path: Path) -> None:
    """``--online``: ROC's loop for real, one launch per iteration with the partitioner refit in
    between. The model carries over, so its losses are those of one run training as many steps
    (full-graph training does not depend on the partition), and every launch moves its plan's bytes."""
    import pandas as pd

    from realrun.online import run_online

    text = CONFIG.format(hardware="hopgnn-4xa100-10gbe", execution="").replace(
        'name = "random"', 'name = "roc"'
    )
    online_config = tmp_path / "online.toml"
    online_config.write_text(text)
    prepared, _, _ = prepare_real_run(online_config, 2, "cpu")
    done = run_online(prepared, online_config, tmp_path / "online", collective_timeout=60)
    assert [r.iteration for r in done.records] == [0, 1, 2]
    assert all(s.results[-1]["bytes_match_plan"] for s in done.summaries)
    assert all((r.layer_seconds > 0).all() for r in done.records)  # what the partitioner learned from
    table = pd.read_csv(tmp_path / "online" / "online.csv")
    assert len(table) == 3 and table["bytes_match_plan"].all()

    steps = tmp_path / "steps.toml"  # the same three steps as one run: one iteration per epoch
    steps.write_text(text.replace("iterations = 3", "iterations = 1"))
    prepared, plan, _ = prepare_real_run(steps, 2, "cpu")
    alone = launch(prepared, plan, steps, out=tmp_path / "steps", epochs=3, collective_timeout=60)
    assert [s.results[-1]["loss"] for s in done.summaries] == pytest.approx(
        [row["loss"] for row in alone.results], rel=1e-5
    )
