"""p3 for real: the first layer model parallel over feature slices, the rest data parallel.

P3 computes what data-parallel training computes (the first layer's sums are split over the
slices, then added back): on the same minibatches from the same weights it must train the
model ``model-centric`` trains, epoch by epoch. Each run's bytes per phase must equal its
plan's (the structure sent, the slices read, the partials and their gradients all-to-all,
the other layers' all-reduce), and its trace must hold the plan's tasks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from realrun.launcher import prepare_real_run
from workbench.errors import ConfigError
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real

CONFIG = """
name = "p3-real"
seed = 2

[graph]
name = "sbm:n=400,blocks=4,deg=8"

[hardware]
name = "{hardware}"

[model]
name = "{model}"
hidden = 16
num_layers = 2

[training]
batch_size = 25
iterations = 3
learning_rate = 0.05

[cache]
capacity = "10%"

[partition]
name = "random"

[placement]
name = "degree"

[sampling]
name = "neighbor"
fanouts = [4, 4]

[execution]
name = "{scheme}"
"""


def run(tmp: Path, scheme: str, workers: int, hardware: str, model: str = "sage", epochs: int = 2):
    config = tmp / f"{scheme}-{model}-{workers}-{hardware}.toml"
    config.write_text(CONFIG.format(scheme=scheme, hardware=hardware, model=model))
    prepared, plan, summary = launch_real(config, workers, tmp / config.stem, epochs=epochs, layers="torch")
    assert summary.complete, summary.error
    return prepared, plan, summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("p3")
    return {
        "p3 three machines": run(tmp, "p3", 3, "hopgnn-4xa100-10gbe"),  # exchanges over the network
        "model-centric three machines": run(tmp, "model-centric", 3, "hopgnn-4xa100-10gbe"),
        "p3 gcn one machine": run(tmp, "p3", 2, "v100x8-nvswitch", model="gcn"),  # between GPUs
        "model-centric gcn one machine": run(tmp, "model-centric", 2, "v100x8-nvswitch", model="gcn"),
    }


@pytest.mark.parametrize("name", ["p3 three machines", "p3 gcn one machine"])
def test_real_bytes_per_phase_equal_the_plans(runs, name: str) -> None:
    prepared, plan, summary = runs[name]
    planned = Counter()
    for t in plan.tasks:
        if t.kind == "transfer":
            planned[t.phase] += t.bytes
    for phase in ("sample", "alltoall", "h2d"):  # every kind of transfer p3 makes is in the plan
        assert planned[phase] > 0, phase
    assert planned["gather_remote"] == 0  # no raw feature crosses between workers
    for row in summary.results:  # every epoch moves the same again
        for phase in ("sample", "alltoall", "h2d", "gather_remote", "d2d"):
            assert row[f"measured_{phase}_bytes"] == planned[phase], phase
        assert row["measured_gather_local_bytes"] > 0  # the degree placement caches slices
        assert row["bytes_match_plan"]


def test_trace_rows_are_the_plans_tasks(runs) -> None:
    prepared, plan, summary = runs["p3 three machines"]
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=2)
    exchanges = trace[trace["phase"] == "alltoall"]
    assert set(exchanges["engine"]) == {"net"}  # every worker on its own machine


def test_the_run_carries_out_the_schemes_schedule(runs) -> None:
    """The rows are the tasks the run's scheme schedules, and every exchange moved the bytes its
    schedule entry gives (the executor reads the schedule, it does not derive one)."""
    prepared, plan, summary = runs["p3 three machines"]
    trace = read_trace(summary.out / "trace.parquet")
    scheme, inputs = prepared.scheme, prepared.inputs
    schedules = [scheme.schedule(inputs, it) for it in range(inputs.num_iterations)]
    assert set(trace["task"]) == {t for s in schedules for t in s.task_ids()}
    sends = {
        send.task: send.nbytes
        for s in schedules
        for send in (*s.structure, *s.partial_sends(), *s.gradient_sends())
    }
    exchanged = trace[trace["task"].isin(list(sends))]
    assert len(exchanged) == 2 * len(sends)  # each send once per epoch
    assert all(row.bytes == sends[row.task] for row in exchanged.itertuples(index=False))


@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_p3_trains_the_model_centric_model(runs, model: str) -> None:
    """Same minibatches, same initial weights: the losses and accuracies agree epoch by epoch
    (up to the order of the first layer's sums), and the model trains."""
    suffix = "three machines" if model == "sage" else "gcn one machine"
    p3 = runs[f"p3 {suffix}"][2].results
    mc = runs[f"model-centric {suffix}"][2].results
    assert len(p3) == len(mc) == 2
    for mine, theirs in zip(p3, mc, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-5)
        assert mine["train_acc"] == pytest.approx(theirs["train_acc"], abs=1e-9)
        assert mine["test_acc"] == pytest.approx(theirs["test_acc"], abs=1e-9)
    assert p3[-1]["loss"] < p3[0]["loss"]


def test_a_first_layer_that_does_not_split_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "p3-gat.toml"
    config.write_text(CONFIG.format(scheme="p3", hardware="hopgnn-4xa100-10gbe", model="gat"))
    with pytest.raises(ConfigError, match="p3"):
        prepare_real_run(config, 2, "cpu")
