"""One scheme interface: a scheme that declares real-run parameters has a registered executor, and
an executor registers under the name of a scheme that declares them."""

from __future__ import annotations

import pytest

from realrun.schemes import REAL_EXECUTORS, real_executor
from realrun.schemes.base import RealExecutor
from workbench.errors import UnknownNameError
from workbench.registry import EXECUTION_SCHEMES


def test_every_scheme_with_real_run_params_has_an_executor_and_no_other() -> None:
    declared = {n for n in EXECUTION_SCHEMES.names() if EXECUTION_SCHEMES.get(n).real_run_params is not None}
    assert declared == set(REAL_EXECUTORS.names())
    assert {"model-centric", "hopgnn", "p3", "roc-fullgraph", "bulk-pipeline", "neugraph-stream"} <= declared


def test_executors_are_real_executors() -> None:
    for name in REAL_EXECUTORS.names():
        assert issubclass(real_executor(name), RealExecutor)


def test_a_simulated_only_scheme_names_the_real_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every registered scheme runs for real: the test takes one executor away.
    REAL_EXECUTORS.names()  # loaded first, so the removal is not undone by the first lookup
    monkeypatch.delitem(REAL_EXECUTORS._entries, "neugraph-stream")
    with pytest.raises(
        UnknownNameError,
        match="'neugraph-stream' has no real executor yet; real runs support: bulk-pipeline, hopgnn",
    ):
        real_executor("neugraph-stream")
