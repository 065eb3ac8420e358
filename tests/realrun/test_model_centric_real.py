"""model-centric for real: the bytes each phase really moves equal the plan's, and the trace
reads like a simulated one (the plan's tasks, the shared schema).

One two-worker CPU run (gloo) of a 600-vertex graph on HopGNN's cluster (one GPU per
machine, so the other worker is a remote machine) is shared by the tests of this module.
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from realrun.launcher import launch, prepare_real_run
from realrun.layers import layer_backend
from realrun.traces import planned_phase_bytes
from workbench.errors import ConfigError
from workbench.trace import read_trace

from .conftest import launch_real, tiny_config


def write_config(path: Path, **overrides: object) -> Path:
    path.write_text(tiny_config(**{"name": "tiny-real", **overrides}))
    return path


def run_real(tmp: Path, workers: int, epochs: int = 1, **overrides: object):
    config = write_config(tmp / "tiny.toml", **overrides)
    return launch_real(config, workers, tmp / "run", epochs=epochs)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory):
    return run_real(tmp_path_factory.mktemp("real"), workers=2, epochs=2)


def plan_bytes_by_phase(plan, feature_bytes: int) -> dict[str, int]:
    """What the plan moves per phase, counted here independently of realrun.traces."""
    out: Counter[str] = Counter()
    for t in plan.tasks:
        if t.kind == "transfer":
            out[t.phase] += t.bytes
        elif t.kind == "collective":
            out[t.phase] += t.bytes * len(t.devices)
        elif t.phase == "gather_local":
            out[t.phase] += t.items * feature_bytes
    return dict(out)


def test_real_bytes_per_phase_equal_the_plans(two_workers) -> None:
    prepared, plan, summary = two_workers
    expected = plan_bytes_by_phase(plan, prepared.inputs.feature_bytes)
    assert expected["gather_remote"] > 0 and expected["h2d"] > 0 and expected["gather_local"] > 0
    assert expected == {
        p: b for p, b in planned_phase_bytes(plan, prepared.inputs.feature_bytes).items() if b
    }
    for row in summary.results:  # every epoch moves the same minibatches' features again
        for phase in ("gather_local", "h2d", "d2d", "gather_remote", "allreduce"):
            assert row[f"measured_{phase}_bytes"] == expected.get(phase, 0), phase
        assert row["bytes_match_plan"]
        assert row["measured_gather_remote_index_bytes"] > 0  # the requests: real, unplanned traffic
    # The gradient buffer is the model's gradient bytes: the layers have the spec's parameters.
    assert (
        expected["allreduce"] == 2 * prepared.inputs.model.gradient_bytes() * prepared.inputs.num_iterations
    )


def test_trace_rows_are_the_plans_tasks(two_workers) -> None:
    prepared, plan, summary = two_workers
    trace = read_trace(summary.out / "trace.parquet")
    assert set(trace["executor"]) == {"real"}
    by_id = {t.id: t for t in plan.tasks}
    for epoch in (0, 1):
        rows = trace[trace["epoch"] == epoch]
        # Every task once (a collective once per device), nothing the plan does not have.
        expected = Counter({t.id: len(t.devices) if t.kind == "collective" else 1 for t in plan.tasks})
        assert Counter(rows["task"]) == expected
    for row in trace.itertuples(index=False):
        task = by_id[row.task]
        assert (row.kind, row.phase) == (task.kind, task.phase)
        assert row.layer == (task.layer if task.layer is not None else -1)
        assert row.iteration == task.iteration + row.epoch * prepared.inputs.num_iterations
        if task.kind == "transfer":
            assert (row.src, row.dst, row.bytes) == (task.src, task.dst, task.bytes)
        elif task.kind == "compute":
            assert row.worker == task.worker and row.device == task.device and row.bytes == 0
        else:
            assert row.worker == prepared.inputs.workers.index(row.device)
            assert row.buffer_bytes == task.bytes
    assert (trace["start"] >= trace["ready"]).all() and (trace["end"] >= trace["start"]).all()
    # Epoch 1 starts after epoch 0 ended: one timeline. Each worker's clock starts as the first
    # barrier releases it, and a loaded machine releases them some milliseconds apart.
    assert trace[trace["epoch"] == 1]["start"].min() >= trace[trace["epoch"] == 0]["end"].max() - 10e-3


def test_results_have_time_loss_and_accuracy(two_workers) -> None:
    _, _, summary = two_workers
    results = pd.read_csv(summary.out / "results.csv")
    assert list(results["epoch"]) == [0, 1]
    assert (results["executor"] == "real").all()
    assert (results["epoch_s"] > 0).all()
    assert results["loss"].map(math.isfinite).all()
    assert results["loss"].iloc[1] < results["loss"].iloc[0]  # it trains
    assert results[["train_acc", "test_acc"]].apply(lambda c: c.between(0, 1)).all().all()
    meta = (summary.out / "run.json").read_text()
    assert '"status": "complete"' in meta and '"backend": "gloo"' in meta
    assert (summary.out / "config.toml").exists()
    assert multiprocessing.active_children() == []


def test_dgl_and_plain_layers_train_alike(two_workers, tmp_path: Path) -> None:
    """On the CPU the run trains with DGL's layers (auto); the plain-PyTorch twins start from the
    same weights and give the same losses, epoch by epoch, within float rounding."""
    _, _, with_dgl = two_workers
    config = write_config(tmp_path / "tiny.toml")
    prepared, plan, _ = prepare_real_run(config, 2, "cpu")
    plain = launch(
        prepared, plan, config, out=tmp_path / "run", epochs=2, collective_timeout=60, layers="torch"
    )
    assert json.loads((with_dgl.out / "run.json").read_text())["layers"] == "dgl"
    assert json.loads((plain.out / "run.json").read_text())["layers"] == "torch"
    ours = pd.read_csv(plain.out / "results.csv")["loss"].to_numpy()
    dgls = pd.read_csv(with_dgl.out / "results.csv")["loss"].to_numpy()
    assert np.allclose(ours, dgls, rtol=1e-5, atol=1e-6), (ours, dgls)


def test_layer_choice_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match="--layers dgl: DGL's PyPI wheel has no cuda kernels"):
        layer_backend("dgl", "cuda")
    with pytest.raises(ConfigError, match="--layers 'pyg': allowed auto, dgl, torch"):
        layer_backend("pyg", "cpu")
    assert layer_backend("auto", "cuda").name == "torch" and layer_backend("torch", "cpu").name == "torch"


def test_trace_show_reads_the_real_trace(two_workers, capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli.main import main

    _, _, summary = two_workers
    assert main(["trace", "show", str(summary.out / "trace.parquet")]) == 0
    out = capsys.readouterr().out
    assert "gather_remote" in out and "allreduce" in out


@pytest.mark.slow
def test_four_remote_workers_bytes_equal_the_plans(tmp_path: Path) -> None:
    prepared, plan, summary = run_real(tmp_path, workers=4)
    expected = plan_bytes_by_phase(plan, prepared.inputs.feature_bytes)
    row = summary.results[0]
    for phase in ("gather_local", "h2d", "gather_remote", "allreduce"):
        assert row[f"measured_{phase}_bytes"] == expected.get(phase, 0), phase


@pytest.mark.slow
def test_peer_cache_reads_are_d2d_and_equal_the_plans(tmp_path: Path) -> None:
    """Two GPUs of one NVSwitch server, each caching its part: misses come from the peer's cache."""
    prepared, plan, summary = run_real(
        tmp_path, workers=2, hardware="v100x8-nvswitch", placement="partitioned", capacity="30%"
    )
    expected = plan_bytes_by_phase(plan, prepared.inputs.feature_bytes)
    assert expected["d2d"] > 0 and "gather_remote" not in expected
    row = summary.results[0]
    for phase in ("gather_local", "h2d", "d2d", "gather_remote", "allreduce"):
        assert row[f"measured_{phase}_bytes"] == expected.get(phase, 0), phase


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_one_gpu_worker_bytes_equal_the_plans(tmp_path: Path) -> None:
    config = write_config(tmp_path / "tiny.toml", hardware="h100-1x")
    prepared, plan, _ = prepare_real_run(config, 1, "cuda")
    summary = launch(prepared, plan, config, device="cuda", out=tmp_path / "run", collective_timeout=60)
    expected = plan_bytes_by_phase(plan, prepared.inputs.feature_bytes)
    assert summary.results[0]["measured_h2d_bytes"] == expected["h2d"]
    assert summary.results[0]["bytes_match_plan"]
    assert '"backend": "nccl"' in (summary.out / "run.json").read_text()
