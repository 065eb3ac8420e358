"""roc-fullgraph for real under a memory policy: each part's step streams through a device arena.

Under ``dpmm``, ``lru`` and ``streaming`` every tensor of a part's step lives in host memory and
the device holds what the policy's schedule says, in an arena of exactly ``gpu_memory`` bytes.
A real run must load and write back the plan's bytes, its trace must be the plan's tasks, the
arena must hold, while each operator runs, what the plan's memory timeline says (the simulator's
peak of the part's GPU, less the training state the plan keeps there), and, since where a tensor
sits does not change what is computed, it must train the model the parts-resident run trains.

The capacities (200 KiB for 2 parts, 150 KiB for 4) sit between the largest operator's needs and
the whole step, so the policies differ: streaming loads every input of every operator, lru evicts,
dpmm loads least.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from realrun.arena import Arena
from realrun.launcher import prepare_real_run
from realrun.layers import TensorBlock, build_layers
from realrun.operator_kernels import IGNORED_LABEL, PartKernels
from sim import simulate
from workbench.errors import ConfigError
from workbench.model import build_model
from workbench.strategies.memory.graphs import operator_graph
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real

CONFIG = """
name = "roc-memory-real"
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
iterations = 2
learning_rate = 0.05

[partition]
name = "random"

[execution]
name = "roc-fullgraph"
memory_policy = "{policy}"
{capacity}
"""
POLICIES = ("dpmm", "lru", "streaming")
CAPACITY_KIB = {2: 200, 4: 150}
EPOCHS = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    """``run(policy, workers, hardware)``: one real run, each launched once for the module (its
    prepared run, plan and summary)."""

    @cache
    def launched(policy: str, workers: int, hardware: str = "hopgnn-4xa100-10gbe"):
        return _launch(tmp_path_factory.mktemp(f"roc-{policy}-{workers}"), policy, workers, hardware)

    return launched


def _launch(folder: Path, policy: str, workers: int, hardware: str):
    capacity = "" if policy == "resident" else f'gpu_memory = "{CAPACITY_KIB[workers]}KiB"'
    config = folder / "config.toml"
    config.write_text(CONFIG.format(hardware=hardware, policy=policy, capacity=capacity))
    prepared, plan, summary = launch_real(config, workers, folder / "run", epochs=EPOCHS)
    assert summary.complete, summary.error
    return prepared, plan, summary


def planned_bytes(plan) -> Counter:
    """Bytes per phase the plan moves: its transfers', and the all-reduce's buffer on each device."""
    out: Counter = Counter()
    for t in plan.tasks:
        out[t.phase] += t.bytes * (len(t.devices) if t.kind == "collective" else 1)
    return out


def arena_records(summary) -> list[dict]:
    records = []
    for part in sorted((summary.out / "parts").glob("rank*.jsonl")):
        records += [r for r in map(json.loads, part.read_text().splitlines()) if r["t"] == "arena"]
    return records


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("policy", POLICIES)
def test_loads_write_backs_and_host_copies_are_the_plans(run, policy: str, workers: int) -> None:
    _, plan, summary = run(policy, workers)
    planned = planned_bytes(plan)
    assert planned["h2d"] > 0 and planned["d2h"] > 0 and planned["gather_remote"] > 0
    assert planned["d2d"] == 0  # nothing moves GPU to GPU: every part's tensors go through its host
    assert len(summary.results) == EPOCHS
    for row in summary.results:  # every epoch moves the same again
        for phase in ("h2d", "d2h", "gather_remote", "allreduce"):
            assert row[f"measured_{phase}_bytes"] == planned[phase], phase
        assert row["bytes_match_plan"]


@pytest.mark.parametrize("workers", [2, 4])
def test_the_policies_load_what_they_schedule_for_real(run, workers: int) -> None:
    """Every output is written back once whatever the policy; loads are what a policy decides:
    streaming reloads every input, lru keeps what fits, dpmm keeps what saves the most."""
    loads = {p: run(p, workers)[2].results[0]["measured_h2d_bytes"] for p in POLICIES}
    written = {p: run(p, workers)[2].results[0]["measured_d2h_bytes"] for p in POLICIES}
    assert loads["dpmm"] < loads["lru"] < loads["streaming"]
    assert len(set(written.values())) == 1


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("policy", POLICIES)
def test_the_trace_is_the_plans_tasks(run, policy: str, workers: int) -> None:
    _, plan, summary = run(policy, workers)
    ids = {t.id for t in plan.tasks}
    # The tasks the plan gained: each owner loads its readers' halo gradients and adds them in.
    assert {"i0.w0.halo_grad1", "i0.w0.halo_grad1.load.grad_readers1", "i0.w1.halo_grad1"} <= ids
    assert_trace_is_the_plan(read_trace(summary.out / "trace.parquet"), plan, epochs=EPOCHS)


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("policy", POLICIES)
def test_the_arena_holds_what_the_plan_says(run, policy: str, workers: int) -> None:
    prepared, plan, summary = run(policy, workers)
    inputs = prepared.inputs
    simulated = simulate(plan, prepared.cluster).memory
    state = inputs.model.training_state_bytes(inputs.optimizer)  # kept on the GPU beside the policy's
    records = arena_records(summary)
    assert len(records) == workers * EPOCHS * inputs.num_iterations
    for r in records:
        assert r["capacity"] == CAPACITY_KIB[workers] * 1024
        assert r["peak_bytes"] == simulated[inputs.workers[r["rank"]]] - state
        steps = prepared.scheme.schedule(inputs, r["iteration"]).parts[r["rank"]].memory.steps
        assert r["step_bytes"] == [s.peak_bytes for s in steps]


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("policy", POLICIES)
def test_memory_placement_does_not_change_what_is_trained(run, policy: str, workers: int) -> None:
    resident = run("resident", workers)[2].results
    rows = run(policy, workers)[2].results
    for mine, theirs in zip(rows, resident, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-5)
        assert mine["train_acc"] == pytest.approx(theirs["train_acc"], abs=1e-9)
        assert mine["test_acc"] == pytest.approx(theirs["test_acc"], abs=1e-9)
    assert rows[-1]["loss"] < rows[0]["loss"]


@pytest.mark.slow
def test_parts_on_one_machine_share_its_host_memory(run) -> None:
    """Two GPUs of one server: the owners' write-backs are the halo exchange (no host copy in the
    plan), so the workers' exchange is neither timed nor counted, and the rest is the plan's."""
    _, plan, summary = run("lru", 2, "v100x8-nvswitch")
    planned = planned_bytes(plan)
    assert planned["gather_remote"] == 0 and planned["h2d"] > 0
    for row in summary.results:
        assert row["bytes_match_plan"] and row["measured_gather_remote_bytes"] == 0
    assert_trace_is_the_plan(read_trace(summary.out / "trace.parquet"), plan, epochs=EPOCHS)
    resident = run("resident", 2)[2].results
    assert [r["loss"] for r in summary.results] == pytest.approx([r["loss"] for r in resident], rel=1e-5)


def test_a_capacity_below_one_tensor_is_one_line_naming_it(tmp_path: Path) -> None:
    # A part's input features, its own vertices' and its halo's (64 floats each), are far more than 4 KiB.
    config = tmp_path / "small.toml"
    config.write_text(
        CONFIG.format(hardware="hopgnn-4xa100-10gbe", policy="dpmm", capacity='gpu_memory = "4KiB"')
    )
    with pytest.raises(ConfigError) as caught:
        prepare_real_run(config, 2, "cpu")
    message = str(caught.value)
    assert "\n" not in message and "gpu_memory" in message
    assert "its tensor 'features' alone is" in message


# ---- the arena alone -------------------------------------------------------------------------------
def test_the_arena_copies_bytes_in_and_out_and_counts_what_it_holds() -> None:
    arena = Arena(64, torch.device("cpu"))
    assert arena.buffer.numel() == 64  # preallocated, whatever it will hold
    x = torch.arange(3, dtype=torch.float32)  # 12 bytes
    assert arena.load("x", x) == 12
    arena.allocate("y", (2,), torch.int64)  # 16 bytes, aligned to 8: at 16
    arena.view("y").copy_(torch.tensor([5, 6]))
    assert (arena.live_bytes, arena.peak_bytes) == (28, 28)
    back = arena.write_back("x")
    assert torch.equal(back, x) and back.data_ptr() != arena.view("x").data_ptr()
    x += 1  # the arena holds a copy, not the host tensor
    assert torch.equal(arena.view("x"), torch.arange(3, dtype=torch.float32))
    arena.release("x")
    assert arena.live_bytes == 16 and arena.peak_bytes == 28


def test_the_arena_packs_what_it_holds_when_no_gap_fits() -> None:
    arena = Arena(64, torch.device("cpu"))
    arena.load("a", torch.ones(4))  # 16 bytes at 0
    arena.load("b", torch.full((2,), 7, dtype=torch.int64))  # 16 bytes at 16
    arena.load("c", torch.ones(8))  # 32 bytes at 32: full
    arena.release("a")
    arena.release("c")
    arena.load("d", torch.full((10,), 2.0))  # 40 bytes: 48 free, but only in two gaps of 16 and 32
    assert arena.compactions == 1
    assert torch.equal(arena.view("b"), torch.tensor([7, 7])) and torch.equal(
        arena.view("d"), torch.full((10,), 2.0)
    )
    assert arena.live_bytes == 56


def test_a_tensor_larger_than_the_arenas_free_bytes_is_named() -> None:
    arena = Arena(32, torch.device("cpu"), where="worker 0's device arena")
    arena.load("a", torch.ones(4))
    with pytest.raises(
        ConfigError, match=r"worker 0's device arena: tensor 'big' \(24 bytes\) does not fit.*gpu_memory"
    ):
        arena.allocate("big", (6,), torch.float32)


def test_an_arena_the_device_cannot_hold_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"cannot allocate .* on cpu .*gpu_memory"):
        Arena(2**62, torch.device("cpu"))


# ---- the operators alone -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sage", "gcn"])
def test_the_operators_compute_what_the_layers_and_autograd_compute(kind: str) -> None:
    """A part of 6 vertices with 3 halo rows, every operator of its step run in order on plain
    tensors: the logits, the weights' gradients and the halo's gradients are those of the model's
    layers differentiated by autograd (a multi-edge and a vertex without in-edges included)."""

    model = build_model(kind, 8, 3, hidden=5, num_layers=2)
    stack = build_layers(model, seed=0)
    n, halo = 6, 3
    dst = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 4, 4, 4])  # vertex 5 has no in-edge; 0 <- 7 twice
    src = torch.tensor([1, 7, 7, 6, 0, 8, 2, 5, 6, 7, 3])
    crow = torch.zeros(n + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    gen = torch.Generator().manual_seed(3)
    features = torch.randn(n + halo, 8, generator=gen)
    halo1 = torch.randn(halo, 5, generator=gen)
    labels = torch.tensor([0, 2, IGNORED_LABEL, 1, IGNORED_LABEL, 2])
    t = {"graph": torch.cat([crow, src]), "features": features, "labels": labels, "halo1": halo1}
    params = [[(name, tuple(p.shape)) for name, p in conv.named_parameters()] for conv in stack.convs]
    for layer, conv in enumerate(stack.convs, start=1):
        t[f"W{layer}"] = torch.cat([p.detach().reshape(-1) for p in conv.parameters()])
    kernels = PartKernels(model, params, n, loss_scale=1.0)
    step = operator_graph(model, n, int(dst.shape[0]), num_src=n + halo)
    for op in step.operators:
        for name in op.writes:
            t[name] = torch.zeros(kernels.output_shape(name, halo))
        kernels.run(op.name, t)

    block = TensorBlock(src, dst, n + halo, n)
    h1 = stack.layer_forward(0, block, features)
    h1.retain_grad()
    halo_leaf = halo1.clone().requires_grad_(True)
    logits = stack.layer_forward(1, block, torch.cat([h1, halo_leaf]))
    train = labels != IGNORED_LABEL
    F.cross_entropy(logits[train], labels[train], reduction="sum").backward()
    assert torch.allclose(t["h2"], logits.detach(), atol=1e-5)
    for layer, conv in enumerate(stack.convs, start=1):
        want = torch.cat([p.grad.reshape(-1) for p in conv.parameters()])
        assert torch.allclose(t[f"grad_W{layer}"], want, atol=1e-5), layer
    assert torch.allclose(t["grad_halo1"], halo_leaf.grad, atol=1e-5)
    assert torch.allclose(t["grad_h1"], h1.grad, atol=1e-5)


def test_the_readers_halo_gradients_are_added_at_the_rows_they_read() -> None:
    model = build_model("sage", 4, 2, hidden=3, num_layers=2)
    kernels = PartKernels(model, [[], []], 4, loss_scale=1.0)
    # Rows 1 and 3 went to one reader, row 1 to another: row 1 gets both of their gradients.
    t = {
        "grad_local1": torch.ones(4, 3),
        "sent_rows": torch.tensor([1, 3, 1]),
        "grad_readers1": torch.tensor([[1.0, 2, 3], [4, 5, 6], [10, 20, 30]]),
        "grad_h1": torch.zeros(4, 3),
    }
    kernels.run("halo_grad1", t)
    assert t["grad_h1"].tolist() == [[1, 1, 1], [12, 23, 34], [1, 1, 1], [5, 6, 7]]


@pytest.mark.parametrize(
    ("family", "named"), [("gin", "layer 0 is gin"), ("resgcn", "layer 0 is residual gcn")]
)
def test_layers_without_written_out_operators_are_refused_in_one_line(family: str, named: str) -> None:
    with pytest.raises(ConfigError, match=f"runs sage and gcn layers without residuals for real; {named}"):
        PartKernels(build_model(family, 4, 2, hidden=4, num_layers=3), [[], [], []], 4, loss_scale=1.0)


def test_a_policy_step_runs_under_nccls_semantics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the NCCL stand-in (one work per batched exchange, all-reduces that return at once) a
    dpmm run finishes and moves the plan's bytes."""
    from realrun.p2p import NCCL_STANDIN_ENV

    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")
    prepared, plan, summary = _launch(tmp_path, "dpmm", 2, "hopgnn-4xa100-10gbe")
    assert summary.complete, summary.error
    assert all(row["bytes_match_plan"] for row in summary.results)
