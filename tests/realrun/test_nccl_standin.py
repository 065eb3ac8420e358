"""NCCL's point-to-point semantics on the CPU: ``batch_isend_irecv`` returns one work for the
whole batch under NCCL (gloo: one per operation). Real runs whose exchanges are batched (p3's
and roc-fullgraph's pairwise exchanges, the feature store's remote and peer-cache reads) run
with a stand-in that gives gloo NCCL's return value (:func:`realrun.p2p.install_nccl_standin`),
so code that indexes a work per operation fails here, not on the first GPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from realrun.p2p import NCCL_STANDIN_ENV, completions

from .conftest import launch_real

CONFIG = """
name = "standin"
seed = 3

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
iterations = 2

[cache]
capacity = "10%"

[partition]
name = "{partition}"

[placement]
name = "{placement}"

[sampling]
name = "neighbor"
fanouts = [4, 4]

[execution]
name = "{scheme}"
"""

CASES = {
    # p3's structure/partial exchanges and remote slice reads between three machines
    "p3": dict(
        scheme="p3", hardware="hopgnn-4xa100-10gbe", model="sage", partition="random", placement="degree"
    ),
    # roc-fullgraph's halo exchange and its gradients
    "roc-fullgraph": dict(
        scheme="roc-fullgraph",
        hardware="hopgnn-4xa100-10gbe",
        model="gcn",
        partition="equal-edge",
        placement="none",
    ),
    # the feature store's reads from a peer GPU's cache (one machine, distributed cache)
    "model-centric peer cache": dict(
        scheme="model-centric",
        hardware="v100x8-nvswitch",
        model="sage",
        partition="random",
        placement="song-jiang",
    ),
}


class Work:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def wait(self) -> bool:
        self.log.append(self.name)
        return True


def test_completions_with_a_work_per_operation_waits_each_in_order() -> None:
    log: list[str] = []
    seen = []
    for k in completions([Work(log, "a"), Work(log, "b")], 2):
        seen.append((k, list(log)))
    assert seen == [(0, ["a"]), (1, ["a", "b"])]


def test_completions_with_one_work_for_the_batch_completes_every_operation_at_once() -> None:
    log: list[str] = []
    seen = [(k, list(log)) for k in completions([Work(log, "batch")], 3)]
    assert seen == [(0, ["batch"]), (1, ["batch"]), (2, ["batch"])]


def test_completions_refuses_a_batch_it_cannot_read() -> None:
    with pytest.raises(RuntimeError, match="3 point-to-point operations returned 2 works"):
        list(completions([Work([], "a"), Work([], "b")], 3))


@pytest.mark.parametrize("case", sorted(CASES))
def test_batched_exchanges_run_under_nccls_semantics(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")  # the spawned workers inherit it
    config = tmp_path / "standin.toml"
    options = CASES[case]
    if options["placement"] == "none":
        text = CONFIG.format(**{**options, "placement": "degree"}).replace(
            '[placement]\nname = "degree"\n', ""
        )
        text = text.replace('[cache]\ncapacity = "10%"\n', "")
    else:
        text = CONFIG.format(**options)
    config.write_text(text)
    workers = 2 if options["hardware"] == "v100x8-nvswitch" else 3
    _, _, summary = launch_real(config, workers, tmp_path / "run", epochs=1, layers="torch")
    assert summary.complete, summary.error
    assert all(row["bytes_match_plan"] for row in summary.results)


def test_hopgnn_migrates_its_models_without_hanging_under_nccls_semantics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under NCCL an unbatched send waits for the peer's receive; hopgnn's two workers each send their
    model before either receives, so migrating over the main group hangs on GPUs."""
    from .test_hopgnn_real import tiny_hopgnn

    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")
    config = tmp_path / "hop.toml"
    config.write_text(tiny_hopgnn(merge="false"))  # merging can leave one step: no migration
    prepared, plan, summary = launch_real(
        config, 2, tmp_path / "run", epochs=1, layers="torch", collective_timeout=20
    )
    assert any(t.phase == "migrate" for t in plan.tasks)
    assert summary.complete, summary.error
    assert all(row["bytes_match_plan"] for row in summary.results)


def test_a_hung_worker_is_named_when_the_collective_returns_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NCCL's all-reduce returns before the peers have joined; the wait comes at the next device
    synchronisation. Unless that wait is inside the communication window, the waiting worker looks
    busy and the launcher cannot tell who hung (it ran into its time limit)."""
    from realrun.faults import FAULT_ENV
    from realrun.launcher import WorkerFailure, launch, prepare_real_run

    from .conftest import tiny_config

    monkeypatch.setenv(NCCL_STANDIN_ENV, "1")
    monkeypatch.setenv(FAULT_ENV, "hang:1:2")
    config = tmp_path / "tiny.toml"
    # One machine, each GPU caching the same vertices: no feature exchange, so the all-reduce is
    # the first call that waits for the hung worker.
    config.write_text(tiny_config(hardware="v100x8-nvswitch"))
    prepared, plan, _ = prepare_real_run(config, 2, "cpu")
    assert not any(t.phase in ("d2d", "gather_remote") for t in plan.tasks)
    with pytest.raises(WorkerFailure) as failure:
        launch(prepared, plan, config, out=tmp_path / "run", collective_timeout=2, time_limit=40)
    assert str(failure.value).startswith("worker 1 hung (epoch 0 iteration 2"), str(failure.value)
