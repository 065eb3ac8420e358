"""naive-feature-centric for real: the bytes each phase really moves (the models' migrations
included) equal the plan's, the trace is the plan's tasks, and with ``minibatches = "as-sampled"``
it trains the model model-centric trains on the same minibatches to the same loss.

The runs are CPU runs (gloo) of the tiny configuration with a GCN on HopGNN's cluster of one-GPU
servers, so every other worker is a remote machine and every migration crosses the network. The
schedule's stops are checked against a brute-force reading of where each vertex lives.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from realrun.launcher import prepare_real_run
from realrun.p2p import NCCL_STANDIN_ENV
from realrun.traces import read_parts
from workbench.errors import ConfigError
from workbench.strategies.execution.naive_feature_centric import home_prefix, migrate_task, tour_prefix
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real, tiny_config

EPOCHS = 2


def tiny(scheme: str, model: str = "gcn", minibatches: str | None = "as-sampled", **values: object) -> str:
    """The tiny configuration with ``model``, three iterations, and globally random seeds (so a
    minibatch's roots live on every server, in no particular order)."""
    execution = f'minibatches = "{minibatches}"\n' if minibatches else ""
    text = tiny_config(scheme, name="tiny-naive", iterations=3, execution=execution, **values)
    text = text.replace("batch_size = 32\n", 'batch_size = 32\nseeds = "global"\n')
    return text.replace('name = "sage"', f'name = "{model}"')


def plan_bytes(plan, feature_bytes: int) -> dict[str, int]:
    """What the plan moves per phase, counted here: transfers' bytes, collectives' buffers on each
    device, local cache gathers' rows."""
    out: Counter[str] = Counter()
    for t in plan.tasks:
        if t.kind == "transfer":
            out[t.phase] += t.bytes
        elif t.kind == "collective":
            out[t.phase] += t.bytes * len(t.devices)
        elif t.phase == "gather_local":
            out[t.phase] += t.items * feature_bytes
    return dict(out)


def measured_bytes(out: Path, workers: int, epoch: int) -> dict[str, int]:
    """Bytes the workers counted in ``epoch``, by phase, from their part files."""
    records = read_parts(out / "parts", workers)
    total: Counter[str] = Counter()
    for rank in range(workers):
        total.update(records.epoch_end[(rank, epoch)]["bytes"])
    return dict(total)


# Four workers time-share this machine's two cores: 5 s to set up with forked workers (27 s spawned).
@pytest.fixture(scope="module", params=[2, 4], ids=["2-workers", "4-workers"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The naive run and the model-centric run of the same configuration on ``workers`` workers."""
    workers = request.param
    tmp = tmp_path_factory.mktemp(f"naive-{workers}")
    out = {}
    for scheme in ("naive-feature-centric", "model-centric"):
        config = tmp / f"{scheme}.toml"
        config.write_text(tiny(scheme, minibatches="as-sampled" if scheme != "model-centric" else None))
        out[scheme] = launch_real(config, workers, tmp / scheme, epochs=EPOCHS)
    return workers, out


def test_real_bytes_per_phase_equal_the_plans(runs) -> None:
    workers, out = runs
    prepared, plan, summary = out["naive-feature-centric"]
    expected = plan_bytes(plan, prepared.inputs.feature_bytes)
    # The tour reads every feature where it lives: no feature crosses the network, models do.
    assert expected["migrate"] > 0 and expected["h2d"] > 0 and "gather_remote" not in expected
    hops = sum(1 for t in plan.tasks if t.phase == "migrate" and t.carries == "model")
    assert hops > 0
    for epoch in range(EPOCHS):  # every epoch moves the same minibatches again
        measured = measured_bytes(summary.out, workers, epoch)
        for phase in ("gather_local", "h2d", "d2d", "gather_remote", "allreduce", "migrate"):
            assert measured.get(phase, 0) == expected.get(phase, 0), (epoch, phase)
        assert measured["migrate_index"] == 8 * hops  # each hop's send time: real, unplanned traffic
    for row in summary.results:
        assert row["bytes_match_plan"]
        assert row["measured_migrate_bytes"] == row["planned_migrate_bytes"] == expected["migrate"]


def test_each_carried_part_moves_the_plans_bytes(runs) -> None:
    """Per migration and part (parameters, partial sums, activations, topology), the trace's bytes are
    the plan task's, and the parts are sized as the plan's formulas say, counted here from the
    schedule's subgraph sizes."""
    _, out = runs
    prepared, plan, summary = out["naive-feature-centric"]
    model = prepared.inputs.model
    trace = read_trace(summary.out / "trace.parquet")
    moved = trace[trace["phase"] == "migrate"].groupby("task")["bytes"].sum()
    schedule_bytes: dict[str, int] = {}
    for it in range(prepared.inputs.num_iterations):
        for tour in prepared.scheme.schedule(prepared.inputs, it).tours:
            assert tour is not None
            sizes = tour.micrographs.sizes
            parts = {
                "model": model.param_count() * 4,
                "partials": sizes[0][1] * model.in_dim * 4,
                "adjacency": 8 * sum(src + 2 * edges for src, _, edges in sizes),
                # GCN keeps each layer's aggregated input and its output for backward.
                "activations": 4
                * sum(
                    dst * (layer.in_dim + layer.out_dim)
                    for layer, (_, dst, _) in zip(model.layers, sizes, strict=True)
                ),
            }
            for hop in [*tour.hops, *([tour.back] if tour.back else [])]:
                for part in hop.carries:
                    schedule_bytes[f"i{it}.w{hop.src}.m{tour.model}.migrate.{part.what}"] = parts[part.what]
    planned = {t.id: t.bytes for t in plan.tasks if t.phase == "migrate"}
    assert planned == schedule_bytes
    assert {task: int(b) for task, b in moved.items()} == {t: EPOCHS * b for t, b in planned.items()}


def test_trace_rows_are_the_plans_tasks(runs) -> None:
    _, out = runs
    _, plan, summary = out["naive-feature-centric"]
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=EPOCHS)
    migrations = trace[trace["phase"] == "migrate"]
    assert set(migrations["engine"]) == {"net"}  # one GPU per server: every hop crosses the network
    assert (trace["start"] >= trace["ready"]).all()


def test_it_trains_model_centrics_model_to_the_same_loss(runs) -> None:
    """As-sampled, model d trains worker d's minibatch, and the partial sums over its stops are the
    full aggregation: the same losses as model-centric's, epoch by epoch."""
    _, out = runs
    naive = pd.read_csv(out["naive-feature-centric"][2].out / "results.csv")
    mc = pd.read_csv(out["model-centric"][2].out / "results.csv")
    assert list(naive["epoch"]) == list(mc["epoch"]) == list(range(EPOCHS))
    assert np.allclose(naive["loss"], mc["loss"], rtol=1e-5, atol=0), (naive["loss"], mc["loss"])
    assert naive["loss"].iloc[-1] < naive["loss"].iloc[0]  # it trains
    assert (
        '"scheme": "naive-feature-centric"' in (out["naive-feature-centric"][2].out / "run.json").read_text()
    )


def test_global_minibatches_migrate_under_nccls_semantics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under NCCL an unbatched send on the main group waits for its receive: the tours' migrations go
    over the gloo group kept beside it, whose sends do not, so they run with the stand-in (workers
    that send to each other in one round would hang on the main group), here with models whose
    roots come from every worker's minibatch (``global``) on three workers."""
    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")  # the spawned workers inherit it
    config = tmp_path / "naive.toml"
    config.write_text(tiny("naive-feature-centric", minibatches="global"))
    prepared, plan, summary = launch_real(
        config, 3, tmp_path / "run", epochs=1, layers="torch", collective_timeout=20
    )
    assert summary.complete, summary.error
    assert sum(1 for t in plan.tasks if t.phase == "migrate") > 0
    assert all(row["bytes_match_plan"] for row in summary.results)
    assert_trace_is_the_plan(read_trace(summary.out / "trace.parquet"), plan, epochs=1)


# ---- a migration's rows time its bytes, not the receiver's wait -----------------------------------
def test_a_migrations_rows_follow_one_another_and_exclude_the_receivers_wait(runs) -> None:
    """The receiver takes the sender's 8-byte announcement first (its wait for the sender ends there,
    in no row), then posts each carried part's receive once the one before has arrived: each row
    times its own bytes on the receiver's clock, so no row is zero-length, a hop's rows follow one
    another, and its first starts once the receiver has finished its round's stops. Before, every
    part was timed from one start (the later of the sender's stamp and the receiver's readiness:
    two workers' clocks), so a hop's rows overlapped."""
    workers, out = runs
    prepared, plan, summary = out["naive-feature-centric"]
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=EPOCHS)
    rows = trace[trace["phase"] == "migrate"]
    assert len(rows) == EPOCHS * sum(t.phase == "migrate" for t in plan.tasks) > 0
    assert (rows["end"] - rows["start"] > 1e-6).all()
    end_of = trace[trace["phase"] != "migrate"].groupby(["epoch", "task"])["end"].max()
    iterations = prepared.inputs.num_iterations
    hops = 0
    for it in range(iterations):
        schedule = prepared.scheme.schedule(prepared.inputs, it)
        for k in range(schedule.rounds):
            for r in range(workers):
                # What the receiver ran in round k before it took the models: its stops' rows.
                mine = tuple(f"{tour_prefix(it, r, t.model)}." for t in schedule.visits(r, k))
                home = tuple(f"{home_prefix(it, t.model)}." for t in schedule.visits(r, k))
                for hop in schedule.arrivals(r, k):
                    tasks = [migrate_task(it, hop.src, hop.model, part.what) for part in hop.carries]
                    for epoch in range(EPOCHS):
                        hop_rows = rows[(rows["epoch"] == epoch) & rows["task"].isin(tasks)]
                        hop_rows = hop_rows.sort_values("start")
                        assert len(hop_rows) == len(tasks)
                        start, end = hop_rows["start"].to_numpy(), hop_rows["end"].to_numpy()
                        assert (start[1:] >= end[:-1]).all(), hop_rows[["task", "start", "end"]]
                        ran = end_of[epoch]
                        ready = ran[[t for t in ran.index if t.startswith(mine) and not t.startswith(home)]]
                        if len(ready):
                            assert start[0] >= ready.max()
                        hops += 1
    assert hops == EPOCHS * sum(1 for t in plan.tasks if t.phase == "migrate" and t.carries == "model")


# ---- the schedule, read by brute force ------------------------------------------------------------
def test_each_vertex_is_read_at_the_first_stop_in_rotation_that_holds_it(tmp_path: Path) -> None:
    config = tmp_path / "naive.toml"
    config.write_text(tiny("naive-feature-centric", minibatches="global"))
    prepared, _, _ = prepare_real_run(config, 4, "cpu")
    inputs = prepared.inputs
    owner, n = inputs.partition.owner, inputs.num_workers
    cached = [inputs.placement.cached_mask(w) for w in range(n)]
    for it in range(inputs.num_iterations):
        for d, tour in enumerate(prepared.scheme.schedule(inputs, it).tours):
            assert tour is not None and tour.model == d and tour.stops[0].server == d
            read = np.concatenate([stop.vertices for stop in tour.stops])
            assert np.array_equal(np.sort(read), tour.micrographs.input_nodes)  # each vertex once
            for stop in tour.stops:
                for v in stop.vertices.tolist():
                    holders = [
                        (d + k) % n for k in range(n) if cached[(d + k) % n][v] or owner[v] == (d + k) % n
                    ]
                    assert holders[0] == stop.server
            assert sum(stop.edges for stop in tour.stops) == tour.micrographs.sizes[0][2]
            route = [stop.server for stop in tour.stops] + ([d] if len(tour.stops) > 1 else [])
            hops = [*tour.hops, *([tour.back] if tour.back else [])]
            assert [(h.src, h.dst) for h in hops] == list(zip(route, route[1:], strict=False))


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("sage", "layer 0 \\(sage\\) adds each destination's own features"),
        ("gat", "layer 0 \\(gat\\) weighs each edge by an attention"),
        ("resgcn", "layer 0 \\(gcn\\) adds each destination's own input \\(a residual\\)"),
    ],
)
def test_models_whose_layer_0_is_not_a_sum_are_refused_in_one_line(
    tmp_path: Path, model: str, why: str
) -> None:
    config = tmp_path / "naive.toml"
    config.write_text(tiny("naive-feature-centric", model=model))
    # Refused as the run is prepared, before any worker process starts.
    with pytest.raises(ConfigError, match=f"plain gcn layers only: model '{model}' {why}") as caught:
        prepare_real_run(config, 2, "cpu")
    assert "\n" not in str(caught.value)
