"""The launcher: a worker that raises, dies or hangs ends the run within the collective timeout,
with one line naming it, the rows written so far kept and no process left behind; bad input
fails before anything starts."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from realrun.faults import FAULT_ENV, check_fault
from realrun.launcher import WorkerFailure, check_device, free_port, launch, prepare_real_run
from workbench.config import load_config
from workbench.errors import ConfigError, UnknownNameError
from workbench.plan import Plan
from workbench.trace import read_trace

from .conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]


def run_with_fault(config: Path, out: Path, fault: str, monkeypatch: pytest.MonkeyPatch, timeout: float):
    monkeypatch.setenv(FAULT_ENV, fault)
    prepared, plan, _ = prepare_real_run(config, 2, "cpu")
    began = time.monotonic()
    with pytest.raises(WorkerFailure) as failure:
        launch(prepared, plan, config, out=out, collective_timeout=timeout, time_limit=120)
    return str(failure.value), time.monotonic() - began


def assert_partial_run_kept(out: Path, failed_worker: int, at_iteration: int) -> None:
    trace = read_trace(out / "trace.parquet")
    assert len(trace)
    # The failed worker recorded its iterations before the fault, none after.
    mine = trace[(trace["worker"] == failed_worker) & (trace["kind"] != "collective")]
    assert mine["iteration"].max() == at_iteration - 1
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and f"worker {failed_worker}" in meta["error"]
    # No epoch finished: the file is a header a reader loads as an empty table, not an error.
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 0 and "epoch" in results.columns


def test_a_worker_that_raises_ends_the_run_naming_it(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message, seconds = run_with_fault(config, tmp_path / "run", "raise:1:2", monkeypatch, timeout=30)
    assert message.startswith("worker 1 raised RuntimeError: injected fault")
    assert "iteration 2" in message and "\n" not in message
    # Startup (two interpreters importing torch on two cores) is most of it: the failure
    # itself ends the run well within the 30 s collective timeout.
    assert seconds < 25
    assert multiprocessing.active_children() == []
    assert_partial_run_kept(tmp_path / "run", failed_worker=1, at_iteration=2)


def test_a_worker_that_hangs_is_named_after_the_collective_timeout(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message, seconds = run_with_fault(config, tmp_path / "run", "hang:1:2", monkeypatch, timeout=2)
    assert message.startswith("worker 1 hung (epoch 0 iteration 2")
    assert "worker(s) 0 waited" in message
    assert seconds < 25
    assert multiprocessing.active_children() == []
    assert_partial_run_kept(tmp_path / "run", failed_worker=1, at_iteration=2)


@pytest.mark.slow
def test_a_worker_that_dies_without_a_word_is_named(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message, _ = run_with_fault(config, tmp_path / "run", "exit:0:3", monkeypatch, timeout=30)
    assert message.startswith("worker 0 died (exit code 17) at epoch 0 iteration 3")
    assert multiprocessing.active_children() == []
    assert_partial_run_kept(tmp_path / "run", failed_worker=0, at_iteration=3)


@pytest.mark.slow
def test_workers_end_when_their_launcher_is_killed(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**os.environ, FAULT_ENV: "hang:1:2"}
    cmd = [
        sys.executable,
        "-m",
        "workbench.cli.main",
        "realrun",
        str(config),
        "--workers",
        "2",
        "--out",
        str(out),
    ]
    launcher = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    deadline = time.monotonic() + 60
    while len(pids) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        pids = []
        for part in sorted((out / "parts").glob("rank*.jsonl")) if (out / "parts").exists() else []:
            for line in part.read_text().splitlines():
                if '"t":"start"' in line:
                    pids.append(json.loads(line)["pid"])
    assert len(pids) == 2, "the workers did not start"
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if _alive(p)]
    assert alive == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has ended; only its parent (gone) would reap it.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


# ---- bad input, before any process starts ------------------------------------------------------
def test_a_port_in_use_is_a_one_line_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--port {port}: in use"):
            free_port(port)
    assert free_port() > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="no CUDA device"):
        check_device("cuda", 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_is_refused_before_the_run_is_prepared(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.run

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the run was prepared before the device was checked")

    monkeypatch.setattr(workbench.run, "prepare_run", never)
    with pytest.raises(ConfigError, match="no CUDA device"):
        prepare_real_run(config, 2, "cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_more_cuda_workers_than_gpus_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="need .* GPUs"):
        check_device("cuda", torch.cuda.device_count() + 1)


def test_more_workers_than_the_clusters_gpus(config: Path) -> None:
    with pytest.raises(ConfigError, match="5 workers but cluster 'hopgnn-4xa100-10gbe' has 4 GPUs"):
        prepare_real_run(config, 5, "cpu")


def test_the_run_plan_follows_the_real_executors_order(config: Path) -> None:
    """The real model-centric worker samples after the previous step and reads sources in stages:
    the run's plan says so, so the simulator is scored against the order the workers keep."""
    _, plan, _ = prepare_real_run(config, 2, "cpu")
    assert plan.meta["prefetch"] == 0 and plan.meta["overlap_reads"] is False
    deps = {t.id: t.deps for t in plan.tasks}
    assert set(deps["i1.w0.sample"]) == {"i0.w0.sample", "i0.w0.update"}


def test_a_plan_parameter_the_real_executor_cannot_follow_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "ahead.toml"
    path.write_text(tiny_config(execution="prefetch = 2\n"))
    with pytest.raises(
        ConfigError, match=r"prefetch = 2: the real 'model-centric' executor runs with prefetch = 0"
    ):
        prepare_real_run(path, 2, "cpu")


def test_a_scheme_without_a_real_executor_names_the_ones_that_have_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from realrun.schemes import REAL_EXECUTORS

    # Every registered scheme runs for real: the test takes one executor away.
    REAL_EXECUTORS.names()  # loaded first, so the removal is not undone by the first lookup
    monkeypatch.delitem(REAL_EXECUTORS._entries, "neugraph-stream")
    path = tmp_path / "neugraph.toml"
    path.write_text(tiny_config("neugraph-stream"))
    with pytest.raises(UnknownNameError, match="real runs support: bulk-pipeline, hopgnn, model-centric"):
        prepare_real_run(path, 2, "cpu")


def test_the_command_line_prints_one_line_and_exits_2(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workbench.cli.main import main

    assert main(["realrun", str(config), "--workers", "5"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the preparation's progress lines
    assert last.startswith("gnnwb realrun: error: tiny-launch: 5 workers but cluster")


def test_fault_specs_are_checked() -> None:
    assert check_fault("hang:1:2") == "hang:1:2"
    assert check_fault(None) is None
    with pytest.raises(ValueError, match="KIND:RANK:ITERATION"):
        check_fault("explode:1")


@pytest.mark.slow
def test_the_worker_runs_under_torchrun(config: Path, tmp_path: Path) -> None:
    """The command the launcher's docstring gives for many machines, on one: two CPU workers."""
    out = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2"]
    torchrun += ["--master-port", str(free_port())]
    cmd = [*torchrun, "-m", "realrun.torchrun", str(config), "--device", "cpu", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "run.json").read_text())
    assert results["status"] == "complete" and results["workers"] == 2
    trace = read_trace(out / "trace.parquet")
    assert set(trace["worker"]) == {0, 1}
    assert "bytes match plan: True" in done.stdout
    # Rank 0 writes the folder through the launcher's finish_run: the same files, the same plan.
    assert {"config.toml", "config.given.toml", "plan.json", "hardware.toml"} <= set(
        results["files"].values()
    )
    _, plan, executed = prepare_real_run(config, 2, "cpu")
    assert Plan.load(out / "plan.json").to_dict() == json.loads(json.dumps(plan.to_dict()))
    assert load_config(out / "config.toml") == executed


UNGUARDED = """
from pathlib import Path
from realrun.launcher import launch, prepare_real_run
cfg = Path({config!r})
prepared, plan, _ = prepare_real_run(cfg, 2, "cpu")
launch(prepared, plan, cfg, out=Path({out!r}), collective_timeout=5)
"""


@pytest.mark.slow
def test_a_worker_that_dies_while_starting_does_not_block_the_launcher(config: Path, tmp_path: Path) -> None:
    """A script without a main guard: each spawned worker re-runs it and dies while starting,
    before it has read its setup. The launcher must not wait for it (spawn's pipe would block)."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(config=str(config), out=str(tmp_path / "run")))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "WorkerFailure: worker" in done.stderr and "died (exit code 1)" in done.stderr
