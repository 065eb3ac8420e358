"""hopgnn for real: a cell's micrographs are the plan's and compute what the full minibatch
computes; the bytes each phase really moves (migrations included) equal the plan's for every
switch combination (+MG, +MG+PG, All); and on an SBM graph it trains to model-centric's test
accuracy while moving fewer remote feature bytes.

The runs are four-worker CPU runs (gloo) on HopGNN's cluster of four one-GPU servers, so every
other worker is a remote machine and the models migrate over the network.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from realrun.launcher import launch, prepare_real_run
from realrun.layers import TensorBlock, build_layers
from realrun.schemes.hopgnn import cut_cell
from realrun.traces import planned_phase_bytes, read_parts
from sim.calibrate import TraceSource
from sim.calibrate.links import transfer_rows
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real, tiny_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "configs" / "hopgnn-sbm-real.toml"

# Paper 003's Figure 13 variants.
SWITCHES = {
    "MG": {"pregather": "false", "merge": "false"},
    "MG+PG": {"pregather": "true", "merge": "false"},
    "All": {"pregather": "true", "merge": "true"},
}
PHASES = ("gather_local", "h2d", "d2d", "gather_remote", "allreduce", "migrate")


def tiny_hopgnn(micrographs: str = "true", pregather: str = "true", merge: str = "true") -> str:
    switches = f"micrographs = {micrographs}\npregather = {pregather}\nmerge = {merge}\n"
    return tiny_config("hopgnn", name="tiny-hopgnn", iterations=4, execution=switches)


def write_tiny(path: Path, **switches: str) -> Path:
    path.write_text(tiny_hopgnn(**switches))
    return path


def measured_bytes(out: Path, workers: int, epoch: int) -> dict[str, int]:
    """Bytes the workers counted in ``epoch``, by phase, from their part files."""
    records = read_parts(out / "parts", workers)
    total: Counter[str] = Counter()
    for rank in range(workers):
        total.update(records.epoch_end[(rank, epoch)]["bytes"])
    return dict(total)


# ---- the cells: the plan's micrographs, the minibatch's numbers -----------------------------------
def test_cells_are_the_plans_micrographs_and_compute_the_minibatchs_logits(tmp_path: Path) -> None:
    prepared, _, _ = prepare_real_run(write_tiny(tmp_path / "tiny.toml", **SWITCHES["All"]), 4, "cpu")
    inputs, scheme = prepared.inputs, prepared.scheme
    model = build_layers(inputs.model, seed=0)
    features = inputs.graph.features
    worst, mixed = 0.0, 0
    with torch.no_grad():
        for it in range(inputs.num_iterations):
            row = inputs.epoch[it]
            schedule = scheme.schedule(inputs, it)
            kept = schedule.kept
            assert len(kept) == 3  # one step merged away
            # Each root's logits in its own minibatch, by (worker, root).
            full = {}
            for w, mb in enumerate(row):
                out = model(
                    [TensorBlock.from_block(b) for b in mb.blocks], torch.from_numpy(features(mb.input_nodes))
                )
                full.update({(w, int(v)): out[k] for k, v in enumerate(mb.blocks[-1].dst_nodes)})
            for d in range(4):
                for j in range(len(kept)):
                    rows, mg = schedule.cells[d][j].rows, schedule.cells[d][j].micrographs
                    assert rows.shape[0] == mg.num_roots
                    if not mg.num_roots:
                        continue
                    cell = cut_cell(row, rows)
                    assert [(b.num_src, b.num_dst, b.num_edges) for b in cell.blocks] == mg.sizes
                    assert np.array_equal(cell.input_nodes, mg.input_nodes)
                    mixed += len(mg.sources) > 1
                    x = torch.from_numpy(features(cell.input_nodes))[torch.from_numpy(cell.input_index)]
                    out = model(cell.blocks, x)
                    home = {int(row[w].blocks[-1].dst_nodes[p]): w for w, p in rows}
                    for k, v in enumerate(cell.roots.tolist()):
                        worst = max(worst, float((out[k] - full[(home[v], v)]).abs().max()))
    assert mixed > 0  # merging put trees of two minibatches in one cell
    assert worst < 1e-5


# ---- real runs: bytes per phase and trace rows are the plan's ----------------------------------------
@pytest.fixture(scope="module", params=list(SWITCHES), ids=list(SWITCHES))
def switched_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp(re.sub(r"\W", "-", request.param))
    config = write_tiny(tmp / "tiny.toml", **SWITCHES[request.param])
    return request.param, *launch_real(config, 4, tmp / "run", epochs=2)


def test_real_bytes_per_phase_equal_the_plans(switched_run) -> None:
    variant, prepared, plan, summary = switched_run
    expected = planned_phase_bytes(plan, prepared.inputs.feature_bytes)
    assert expected["migrate"] > 0 and expected["gather_remote"] > 0
    assert any(t.id.endswith(".pregathered") for t in plan.tasks) == (variant != "MG")
    for epoch in (0, 1):  # every epoch moves the same micrographs' features again
        measured = measured_bytes(summary.out, 4, epoch)
        for phase in PHASES:
            assert measured.get(phase, 0) == expected.get(phase, 0), (variant, phase)
        # The protocol's own traffic: request ids, and each migration's send time (8 bytes).
        assert measured["gather_remote_index"] > 0
        migrations = sum(1 for t in plan.tasks if t.phase == "migrate") // 2
        assert measured["migrate_index"] == 8 * migrations
    for row in summary.results:
        assert row["bytes_match_plan"]
        assert row["measured_migrate_bytes"] == row["planned_migrate_bytes"] == expected["migrate"]


def test_trace_rows_are_the_plans_tasks(switched_run) -> None:
    _, prepared, plan, summary = switched_run
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=2)
    migrations = trace[trace["phase"] == "migrate"]
    assert set(migrations["engine"]) == {"net"}  # one GPU per server: every migration crosses the network
    assert (trace["end"] >= trace["start"]).all() and (trace["start"] >= trace["ready"]).all()


def test_results_train(switched_run) -> None:
    _, _, _, summary = switched_run
    results = pd.read_csv(summary.out / "results.csv")
    assert list(results["epoch"]) == [0, 1]
    assert results["loss"].iloc[1] < results["loss"].iloc[0]
    assert '"scheme": "hopgnn"' in (summary.out / "run.json").read_text()


# ---- a migration's rows time its bytes, not the receiver's wait -----------------------------------
@pytest.fixture(scope="module")
def migrating_run(tmp_path_factory: pytest.TempPathFactory):
    """Two workers, merging off: every model migrates in every iteration."""
    tmp = tmp_path_factory.mktemp("migrating")
    return launch_real(write_tiny(tmp / "tiny.toml", **SWITCHES["MG"]), 2, tmp / "run", epochs=2)


def test_a_migrations_rows_follow_one_another_and_exclude_the_receivers_wait(migrating_run) -> None:
    """The receiver calls a hop's parts one at a time (the parameters, then the gradients), after the
    sender's announcement: each row times its own bytes, from posting its receive to their
    arrival, so no row is zero-length, the rows do not overlap, and a hop's rows sum to no more
    than its span. The receiver's wait before (its features read, the model not sent yet) is in
    no row. Before, both rows ran from one start and the gradients' bytes came inside the
    parameters' row."""
    _, plan, summary = migrating_run
    trace = read_trace(summary.out / "trace.parquet")
    assert_trace_is_the_plan(trace, plan, epochs=2)
    by_id = {t.id: t for t in plan.tasks}
    rows = trace[trace["phase"] == "migrate"]
    assert len(rows) == 2 * sum(t.phase == "migrate" for t in plan.tasks)
    # No zero-length transfer: a row that timed only the wake-up after bytes that came inside another
    # part's row (as the gradients' did when all parts were posted at once) is well under a microsecond.
    assert (rows["end"] - rows["start"] > 1e-6).all()
    # The cell that takes the model: the compute that waits for the hop, and its feature reads.
    taker = {d: t for t in plan.tasks if t.kind == "compute" for d in t.deps if by_id[d].phase == "migrate"}
    reads = ("gather_local", "h2d", "d2d", "gather_remote")
    end_of = trace.set_index(["epoch", "task"])["end"]
    hops = rows.assign(hop=rows["task"].str.rsplit(".", n=1).str[0])
    for (epoch, _), hop in hops.groupby(["epoch", "hop"]):
        hop = hop.set_index(hop["task"].str.rsplit(".", n=1).str[1])
        model, grads = hop.loc["model"], hop.loc["gradients"]
        assert model["end"] <= grads["start"]  # one after the other: the gradients follow the parameters
        assert (hop["end"] - hop["start"]).sum() <= grads["end"] - model["start"]  # no time counted twice
        # The receiver had read its cell's features before the first byte could move.
        read = [d for d in taker[model["task"]].deps if by_id[d].phase in reads]
        assert read and model["start"] >= max(end_of[(epoch, d)] for d in read)
    # Calibration fits each row as a transfer of its own: none merged, none overlapping another part.
    fitted = transfer_rows([TraceSource("run", trace, None)])
    assert (fitted["phase"] == "migrate").sum() == len(rows)


@pytest.mark.slow
def test_without_micrographs_it_runs_model_centric(tmp_path: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(tiny_hopgnn(micrographs="false", pregather="false", merge="false"))
    prepared, plan, _ = prepare_real_run(config, 2, "cpu")
    assert not any(t.phase == "migrate" for t in plan.tasks)
    summary = launch(prepared, plan, config, out=tmp_path / "run", collective_timeout=60)
    assert summary.results[0]["bytes_match_plan"]


# ---- the comparison: same accuracy, fewer remote bytes ---------------------------------------
def run_example(tmp: Path, scheme: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shipped SBM example with ``scheme`` as its [execution]: its results and its trace."""
    text = EXAMPLE.read_text()
    if scheme != "hopgnn":
        text = text[: text.index("\n[execution]")] + f'\n[execution]\nname = "{scheme}"\n'
    config = tmp / f"{scheme}.toml"
    config.write_text(text)
    prepared, plan, _ = prepare_real_run(config, 4, "cpu")
    summary = launch(prepared, plan, config, out=tmp / scheme, collective_timeout=120)
    assert all(r["bytes_match_plan"] for r in summary.results)
    return pd.read_csv(summary.out / "results.csv"), read_trace(summary.out / "trace.parquet")


def test_hopgnn_trains_like_model_centric_and_fetches_fewer_remote_bytes(tmp_path: Path) -> None:
    mc, mc_trace = run_example(tmp_path, "model-centric")
    hop, hop_trace = run_example(tmp_path, "hopgnn")
    assert len(mc) == len(hop) == 5
    mc_acc, hop_acc = mc["test_acc"].iloc[-1], hop["test_acc"].iloc[-1]
    chance = 1 / 8  # the example graph's classes
    assert mc_acc > 5 * chance and hop_acc > 5 * chance
    assert abs(mc_acc - hop_acc) <= 0.005
    # Fewer remote feature bytes, in the results and in the traces alike.
    assert (hop["measured_gather_remote_bytes"] < mc["measured_gather_remote_bytes"]).all()
    remote = {
        name: trace[trace["phase"] == "gather_remote"].groupby("epoch")["bytes"].sum()
        for name, trace in (("mc", mc_trace), ("hop", hop_trace))
    }
    assert (remote["hop"] < remote["mc"]).all()
    assert list(remote["hop"]) == list(hop["measured_gather_remote_bytes"])


def test_near_reads_land_in_place_and_remote_rows_are_left(tmp_path: Path) -> None:
    """A pre-gathering cell's read (``leave_remote``): every vertex not on another machine gets its
    own feature row in the request's order, by the reads the plan names; no remote read is made."""
    from realrun.feature_store import ByteCounter, FeatureStore
    from workbench.strategies.execution.base import feature_reads

    prepared, _, _ = prepare_real_run(write_tiny(tmp_path / "tiny.toml", **SWITCHES["All"]), 4, "cpu")
    inputs = prepared.inputs
    features = inputs.graph.features
    store = FeatureStore(inputs, 1, torch.device("cpu"), features, ByteCounter(), lambda: 0.0)
    vertices = np.unique(np.concatenate([mb.input_nodes for mb in inputs.epoch[0]]))
    reads = feature_reads(inputs, 1, vertices)
    remote = np.concatenate([r.vertices for r in reads if r.kind == "remote"])
    assert 0 < remote.size < vertices.size  # some rows of each kind
    x, timings = store.gather(vertices, "i0.w1.t0", remote=False, leave_remote=True)
    near = ~np.isin(vertices, remote)
    assert x.shape == (vertices.size, inputs.graph.feat_dim)
    assert torch.equal(x[torch.from_numpy(near)], torch.from_numpy(features(vertices[near])))
    assert {t.task for t in timings} == {f"i0.w1.t0.{r.kind}.{r.source}" for r in reads if r.kind != "remote"}
    assert "gather_remote" not in store.counter.bytes
    with pytest.raises(RuntimeError, match="pre-gathered"):
        store.gather(vertices, "i0.w1.t0", remote=False)
