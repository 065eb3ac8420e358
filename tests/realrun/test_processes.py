"""Workers are forks of one server that started with the launcher's environment of that moment
(realrun.processes); each must still run in the launcher's environment of its own start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from realrun.processes import in_environment, worker_context, worker_process


def _run(command: str) -> int:
    """``command`` in a shell started by a worker process (os.system reads the worker's environment)."""
    context = worker_context()
    process = worker_process(context, os.system, (command,))
    process.start()
    process.join(60)
    return process.exitcode


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
