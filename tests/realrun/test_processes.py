"""Workers are forks of one server that started with the launcher's environment of that moment
(realrun.processes); each must still run in the launcher's environment of its own start."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from realrun.processes import in_environment, worker_context, worker_process


def _run_worker(target: Callable[..., Any], *args: Any) -> int:
    """``target(*args)`` in a worker process; its exit code."""
    process = worker_process(worker_context(), target, args)
    process.start()
    process.join(120)
    return process.exitcode


def _run(command: str) -> int:
    """``command`` in a shell started by a worker process (os.system reads the worker's environment)."""
    return _run_worker(os.system, command)


def test_a_worker_sees_the_environment_of_its_start_not_the_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GNNWB_PROBE_KEPT", "before")
    monkeypatch.setenv("GNNWB_PROBE_GONE", "before")
    assert _run("true") == 0  # the server runs now, with both variables as they were
    monkeypatch.setenv("GNNWB_PROBE_KEPT", "after")
    monkeypatch.delenv("GNNWB_PROBE_GONE")
    out = tmp_path / "seen"
    assert _run(f'printf "%s|%s" "$GNNWB_PROBE_KEPT" "${{GNNWB_PROBE_GONE-unset}}" > {out}') == 0
    assert out.read_text() == "after|unset"


def test_in_environment_replaces_the_whole_environment_then_runs_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GNNWB_PROBE_GONE", "1")
    saved = dict(os.environ)  # in_environment is a worker's first step: here it must be undone
    try:
        seen = in_environment({"ONLY": "this"}, lambda k: (dict(os.environ), k), 7)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert seen == ({"ONLY": "this"}, 7)


def test_workers_wait_passively_unless_the_user_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    worker_context()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    worker_context()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


PRELOADED = "import sys\nsys.exit(0 if 'torch' in sys.modules and 'dgl' in sys.modules else 3)"

AFTER_A_STUDY = """
import sys
from pathlib import Path

from realrun.processes import worker_context, worker_process
from studies.runner import Point, Study, run_study


def config(workers):
    return {{
        "name": f"tiny-{{workers}}",
        "graph": {{"name": "er:n=300,deg=4"}},
        "hardware": {{"name": "hopgnn-4xa100-10gbe"}},
        "model": {{"name": "sage", "hidden": 8, "num_layers": 2}},
        "training": {{"batch_size": 16, "iterations": 1, "workers": workers}},
        "partition": {{"name": "random"}},
        "sampling": {{"name": "neighbor", "fanouts": [2, 2]}},
    }}


def main():
    points = lambda full: [Point("tiny", {{"workers": w}}, config(w)) for w in (1, 2)]
    study = Study("tiny", "a tiny study", "none", "none", points, lambda results, folder: None)
    run_study(study, reports=Path(sys.argv[1]), jobs=2, progress=False)  # its pool starts the server
    worker = worker_process(worker_context(), exec, ({code!r},))
    worker.start()
    worker.join(120)
    sys.exit(worker.exitcode)


if __name__ == "__main__":
    main()
"""


def test_a_worker_forks_with_pytorch_and_dgl_imported() -> None:
    assert _run_worker(exec, PRELOADED) == 0


def test_a_study_pool_that_started_the_server_first_leaves_it_preloaded_for_real_runs(tmp_path: Path) -> None:
    """A process has one fork server, started with the preload of its first fork: the study
    runner's pool (``gnnwb run`` starts studies before the fidelity study's real runs) must start
    it preloaded, or every later real-run worker imports PyTorch and DGL itself."""
    import subprocess
    import sys

    script = tmp_path / "after_a_study.py"
    script.write_text(AFTER_A_STUDY.format(code=PRELOADED))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "reports")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _make_a_named_lock_then_exit(name_file: str) -> None:
    """What a bulk-pipeline worker does: a library makes a named semaphore (numba's thread-pool
    start lock), then the worker ends through realrun.worker's exit."""
    import multiprocessing

    from realrun.worker import exit_worker

    lock = multiprocessing.get_context("forkserver").RLock()
    Path(name_file).write_text(lock._semlock.name)
    exit_worker(0)


def test_a_worker_that_made_a_named_semaphore_unlinks_it_when_it_exits(tmp_path: Path) -> None:
    name_file = tmp_path / "name"
    assert _run_worker(_make_a_named_lock_then_exit, str(name_file)) == 0
    name = name_file.read_text().lstrip("/")
    # Left to the resource tracker, the semaphore would stay until the launcher's process ends
    # (and be reported as leaked then).
    assert name and not Path(f"/dev/shm/sem.{name}").exists()
