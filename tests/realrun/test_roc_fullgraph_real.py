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


class _Counter:
    def __init__(self) -> None:
        self.bytes: Counter[str] = Counter()

    def add(self, phase: str, nbytes: int) -> None:
        self.bytes[phase] += nbytes


class _Ctx:
    """What HaloExchange.forward reads of a worker's context: rank, device, clock, counter, rows."""

    def __init__(self, rank: int) -> None:
        import torch

        self.rank, self.device = rank, torch.device("cpu")
        self.counter, self.rows = _Counter(), []

    def now(self) -> float:
        return 0.0

    def row(self, task, phase, start, end, nbytes=0) -> None:
        self.rows.append((task, phase, nbytes))


def test_within_one_machine_the_layer0_halo_is_read_from_host_memory_and_nothing_is_sent(
    tmp_path, monkeypatch
):
    """ROC reads input features from host DRAM: within one machine the plan's layer-0 halo is an
    h2d copy on the reader (its GPU from its machine's host), so the owner's GPU sends nothing; a
    layer above 0 is still exchanged GPU to GPU. Before, the owner sent its GPU's rows (a peer
    copy) that the trace labelled a host read."""
    import numpy as np
    import torch

    from realrun.schemes import roc_fullgraph as roc
    from workbench.strategies.execution.roc_fullgraph import FORWARD

    config = tmp_path / "roc-one-machine.toml"
    config.write_text(CONFIG.format(hardware="v100x8-nvswitch", execution=""))
    prepared, _, _ = prepare_real_run(config, 2, "cpu")
    inputs, scheme = prepared.inputs, prepared.scheme
    layouts = scheme.layouts(inputs)
    schedule = scheme.schedule(inputs, 0, layouts)
    layer0 = [t for t in schedule.exchanges(FORWARD, 0) if t.reader == 0]
    assert layer0 and all(t.host_read and t.phase == "h2d" for t in layer0)
    assert not any(t.host_read for t in schedule.exchanges(FORWARD, 1))

    exchanged: list[tuple[dict, dict]] = []

    def fake_exchange(ctx, outgoing, incoming):
        exchanged.append((dict(outgoing), dict(incoming)))
        rows = {q: torch.zeros(shape, dtype=dtype) for q, (shape, dtype) in incoming.items()}
        return rows, dict.fromkeys(incoming, 0.0), dict.fromkeys(outgoing, 0.0), 0.0

    monkeypatch.setattr(roc, "exchange_pairwise", fake_exchange)
    features = inputs.graph.features
    lay = layouts[0]
    host_halo = {
        q: torch.from_numpy(np.asarray(features(rows), dtype=np.float32)) for q, rows in lay.halo_rows.items()
    }
    ctx = _Ctx(rank=0)
    halo = roc.HaloExchange(ctx, lay, schedule, host_halo)
    h = torch.from_numpy(np.asarray(features(lay.vertices), dtype=np.float32))
    out = halo.forward(h, 0)
    assert exchanged == []  # layer 0 within one machine: no send, no receive
    expected = torch.cat([h, *(host_halo[q] for q in sorted(host_halo))])
    assert torch.equal(out, expected)
    assert ctx.counter.bytes["h2d"] == sum(t.nbytes for t in layer0)
    assert sorted(r[0] for r in ctx.rows) == sorted(t.task for t in layer0)
    halo.forward(h, 1)  # layer 1: the halo activations are exchanged with the owner
    assert len(exchanged) == 1 and exchanged[0][1]
