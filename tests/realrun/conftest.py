"""Shared by the real-run tests: a tiny configuration (600 vertices, 4 one-GPU servers) they all run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

TINY = """
name = "{name}"
seed = 0

[graph]
name = "er:n=600,deg=8"

[hardware]
name = "{hardware}"

[model]
name = "sage"
hidden = 16
num_layers = 2

[training]
batch_size = 32
iterations = {iterations}

[cache]
capacity = "{capacity}"

[partition]
name = "random"

[placement]
name = "{placement}"

[sampling]
name = "neighbor"
fanouts = [5, 5]

[execution]
name = "{scheme}"
{execution}"""


def tiny_config(scheme: str = "model-centric", **values: object) -> str:
    """The tiny configuration's text: ``scheme`` with ``execution`` (more lines of its table)
    and any of ``name``, ``hardware``, ``iterations``, ``capacity``, ``placement`` overridden."""
    defaults = {
        "name": "tiny-launch",
        "hardware": "hopgnn-4xa100-10gbe",
        "iterations": 6,
        "capacity": "10%",
        "placement": "degree",
        "execution": "",
    }
    return TINY.format(scheme=scheme, **{**defaults, **values})


def assert_trace_is_the_plan(trace: Any, plan: Any, epochs: int) -> None:
    """Each epoch's rows are the plan's tasks, each once (a collective once per device), nothing
    else; every row has its task's kind and phase, a transfer its source, destination and bytes."""
    expected = Counter({t.id: len(t.devices) if t.kind == "collective" else 1 for t in plan.tasks})
    for epoch in range(epochs):
        assert Counter(trace.loc[trace["epoch"] == epoch, "task"]) == expected, epoch
    by_id = {t.id: t for t in plan.tasks}
    for row in trace.itertuples(index=False):
        task = by_id[row.task]
        assert (row.kind, row.phase) == (task.kind, task.phase)
        if task.kind == "transfer":
            assert (row.src, row.dst, row.bytes) == (task.src, task.dst, task.bytes)
    assert (trace["end"] >= trace["start"]).all()


def launch_real(config: Path, workers: int, out: Path, **launch_options: Any) -> tuple[Any, Any, Any]:
    """``config`` prepared for ``workers`` CPU workers and run for real into ``out`` (a 60 s
    collective timeout unless ``launch_options`` says otherwise): the prepared run, its plan and
    the launcher's summary."""
    from realrun.launcher import launch, prepare_real_run

    prepared, plan, _ = prepare_real_run(config, workers, "cpu")
    options = {"collective_timeout": 60, **launch_options}
    return prepared, plan, launch(prepared, plan, config, out=out, **options)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_config())
    return path
