"""neugraph-stream for real: NeuGraph's chunks streamed through a device arena as the schedule says.

A real run must move the plan's bytes per phase (sub-chunk rows and edges host to device, the
saved tensors and gradients back, rows forwarded down a chain GPU to GPU, the all-reduce), its
trace must be the plan's tasks, and, since streaming by chunks changes the order of the sums but
not the maths, it must train what plain full-graph training of the same model trains (the same
losses within 1e-5 relative), for one worker in each streaming mode and for chains of GPUs.

The graph (an SBM of 400 vertices, 8 communities, average degree 4, in community order) is
sparse off the grid's diagonal, so the CPU filter keeps only some rows of many sub-chunks
(selective scheduling pays), with one worker and with a chain of two or four.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from realrun.launcher import prepare_real_run
from realrun.layers import TensorBlock, build_layers
from realrun.schemes.base import make_optimizer
from realrun.traces import planned_phase_bytes
from sim import simulate
from workbench.errors import ConfigError
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real

CONFIG = """
name = "neugraph-real"
seed = 1

[graph]
name = "sbm:n=400,blocks=8,deg=4"

[hardware]
name = "neugraph-8xp100-pcie"

[model]
name = "{model}"
hidden = 16
num_layers = 2

[training]
iterations = 2
learning_rate = 0.05

[partition]
name = "chunk2d"
gpu_memory_bytes = "100KiB"

[execution]
name = "neugraph-stream"
selective = {selective}
pipeline = {pipeline}
reorder = {pipeline}
chain = {chain}
{extra}
"""
EPOCHS = 2
MODES = [(True, True), (False, True), (True, False), (False, False)]  # (selective, pipeline)


def config_text(
    selective: bool = True, pipeline: bool = True, chain: bool = True, model: str = "gcn", extra: str = ""
) -> str:
    flag = {True: "true", False: "false"}
    return CONFIG.format(
        model=model, selective=flag[selective], pipeline=flag[pipeline], chain=flag[chain], extra=extra
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    """``run(workers, selective, pipeline, chain)``: one real run, launched once for the module."""

    @cache
    def launched(workers: int, selective: bool = True, pipeline: bool = True, chain: bool = True):
        folder = tmp_path_factory.mktemp(f"neugraph-{workers}-{selective}-{pipeline}-{chain}")
        config = folder / "config.toml"
        config.write_text(config_text(selective, pipeline, chain))
        prepared, plan, summary = launch_real(config, workers, folder / "run", epochs=EPOCHS)
        assert summary.complete, summary.error
        return prepared, plan, summary

    return launched


@cache
def reference_losses() -> list[float]:
    """Plain full-graph training of the same model (autograd over the whole graph, the same initial
    weights, optimizer and iterations): each epoch's mean loss."""
    import tomllib

    from workbench.config import config_from_dict
    from workbench.run import prepare_run

    config = config_from_dict(tomllib.loads(config_text()))
    inputs = prepare_run(config).inputs
    graph, n = inputs.graph, inputs.graph.num_nodes
    model = build_layers(inputs.model, seed=config.seed)
    optimizer = make_optimizer(
        config.training.optimizer, list(model.parameters()), config.training.learning_rate
    )
    block = TensorBlock(torch.from_numpy(graph.indices), torch.from_numpy(graph.edge_dst()), n, n)
    x = torch.from_numpy(np.ascontiguousarray(graph.features(), dtype=np.float32))
    train = torch.from_numpy(np.flatnonzero(graph.train_mask))
    labels = torch.as_tensor(np.asarray(graph.labels, dtype=np.int64))
    losses = []
    for _ in range(EPOCHS):
        total = 0.0
        for _ in range(inputs.num_iterations):
            loss = F.cross_entropy(model([block] * inputs.model.num_layers, x)[train], labels[train])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        losses.append(total / inputs.num_iterations)
    return losses


def assert_bytes_are_the_plans(plan, summary, feature_bytes: int) -> Counter:
    planned = planned_phase_bytes(plan, feature_bytes)
    assert len(summary.results) == EPOCHS
    for row in summary.results:  # every epoch moves the same again
        for phase in ("h2d", "d2h", "d2d", "allreduce"):
            assert row[f"measured_{phase}_bytes"] == planned[phase], phase
        assert row["bytes_match_plan"]
    return Counter(planned)


# ---- one worker, each streaming mode ---------------------------------------------------------------
@pytest.mark.parametrize(("selective", "pipeline"), MODES)
def test_one_worker_moves_the_plans_bytes_in_each_mode(run, selective: bool, pipeline: bool) -> None:
    prepared, plan, summary = run(1, selective, pipeline)
    planned = assert_bytes_are_the_plans(plan, summary, prepared.inputs.feature_bytes)
    assert planned["h2d"] > 0 and planned["d2h"] > 0 and planned["d2d"] == 0
    assert plan.meta["sub_chunks"] == (4 if pipeline else 1)
    assert (plan.meta["filtered_edge_chunks"] > 0) == selective


@pytest.mark.parametrize(("selective", "pipeline"), MODES)
def test_one_workers_trace_is_the_plans_tasks(run, selective: bool, pipeline: bool) -> None:
    prepared, plan, summary = run(1, selective, pipeline)
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=EPOCHS)
    filters = trace[trace["task"].str.endswith(".select")]  # the CPU filter runs on the host
    assert (len(filters) > 0) == selective
    assert (filters["device"] == prepared.inputs.host_of_worker(0)).all()


@pytest.mark.parametrize(("selective", "pipeline"), MODES)
def test_streaming_trains_what_full_graph_training_trains(run, selective: bool, pipeline: bool) -> None:
    losses = [row["loss"] for row in run(1, selective, pipeline)[2].results]
    assert losses == pytest.approx(reference_losses(), rel=1e-5)
    assert losses[-1] < losses[0]


def test_the_filter_loads_fewer_rows_for_real(run) -> None:
    """Selective scheduling moves fewer host-to-device bytes, measured, than loading whole sub-chunks."""
    h2d = {s: run(1, s, True)[2].results[0]["measured_h2d_bytes"] for s in (True, False)}
    assert h2d[True] < h2d[False]


@pytest.mark.parametrize(("selective", "pipeline"), MODES)
def test_the_arena_holds_no_more_than_the_plans_memory_timeline(run, selective: bool, pipeline: bool) -> None:
    """The arena's peak is at most the simulator's peak of the GPU less the training state (which the
    plan keeps there beside the streamed tensors): the plan starts a copy as soon as its buffer is
    free, so the next column's first copies may overlap this column's ApplyVertex and write-back,
    which a worker running one step after another never does. It never exceeds the capacity."""
    prepared, plan, summary = run(1, selective, pipeline)
    inputs = prepared.inputs
    state = inputs.model.training_state_bytes(inputs.optimizer)
    simulated = simulate(plan, prepared.cluster).memory[inputs.workers[0]] - state
    part = (summary.out / "parts" / "rank0.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, part) if r["t"] == "arena"]
    assert len(records) == EPOCHS * inputs.num_iterations
    capacity = inputs.partition.details["gpu_memory_bytes"]
    assert all(r["capacity"] == capacity and 0 < r["peak_bytes"] <= min(simulated, capacity) for r in records)


# ---- chains of GPUs --------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [2, 4])
def test_a_chain_forwards_the_plans_rows_gpu_to_gpu(run, workers: int) -> None:
    """Two GPUs under each PCIe switch: the first loads each sub-chunk's rows, the second gets them
    from it (d2d), and the bytes, the trace and the losses are the plan's and the reference's."""
    prepared, plan, summary = run(workers)
    assert plan.meta["chain_groups"] == [[0, 1], [2, 3]][: workers // 2]
    assert plan.meta["filtered_edge_chunks"] > 0
    planned = assert_bytes_are_the_plans(plan, summary, prepared.inputs.feature_bytes)
    assert planned["d2d"] > 0
    assert_trace_is_the_plan(read_trace(summary.out / "trace.parquet"), plan, epochs=EPOCHS)
    assert [r["loss"] for r in summary.results] == pytest.approx(reference_losses(), rel=1e-5)


def test_without_the_chain_every_gpu_reads_host(run) -> None:
    prepared, plan, summary = run(2, chain=False)
    chained = planned_phase_bytes(run(2)[1], prepared.inputs.feature_bytes)
    planned = assert_bytes_are_the_plans(plan, summary, prepared.inputs.feature_bytes)
    assert planned["d2d"] == 0 and planned["h2d"] > chained["h2d"]
    assert_trace_is_the_plan(read_trace(summary.out / "trace.parquet"), plan, epochs=EPOCHS)
    assert [r["loss"] for r in summary.results] == pytest.approx(reference_losses(), rel=1e-5)


def test_a_chain_runs_under_nccls_semantics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the NCCL stand-in (one work per batched exchange, all-reduces that return at once) the
    chain's forwards finish and move the plan's bytes."""
    from realrun.p2p import NCCL_STANDIN_ENV

    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")
    config = tmp_path / "config.toml"
    config.write_text(config_text())
    prepared, plan, summary = launch_real(config, 2, tmp_path / "run", epochs=1)
    assert summary.complete, summary.error
    assert all(row["bytes_match_plan"] for row in summary.results)
    assert summary.results[0]["measured_d2d_bytes"] > 0


# ---- what it refuses -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ("sage", "", r"plain gcn layers .* layer 0 is sage"),
        ("gcn", "index_bytes = 2", r"index_bytes 4 or 8 .* not 2"),
    ],
)
def test_what_the_executor_cannot_run_is_one_line(
    tmp_path: Path, model: str, extra: str, message: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text(model=model, extra=extra))
    with pytest.raises(ConfigError, match=message) as caught:
        prepare_real_run(config, 1, "cpu")
    assert "\n" not in str(caught.value)


def test_the_row_column_order_is_refused_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text(selective=False, chain=False, extra='order = "row-column"'))
    with pytest.raises(ConfigError, match=r"column-row order only, not 'row-column'") as caught:
        prepare_real_run(config, 1, "cpu")
    assert "\n" not in str(caught.value)
