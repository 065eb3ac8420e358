"""Every scheme that runs for real, and roc-fullgraph under every memory policy, on 2 and on 4 CPU
worker processes: each finishes, its bytes per phase equal the plan's in every epoch and its trace
is the plan's tasks. The configurations are validate's (studies/validate.py ``cases``), so a scheme
registered later is covered here without a new test; a scheme's own test file checks its maths.
About 40 s for the 2-worker runs and 90 s for the 4-worker ones on two cores: the 4-worker ones are
marked slow (``pytest -m slow``), since the default suite reached 15 min 26 s from a fresh clone on
2026-11-27 and every scheme's own file keeps a run of more than two workers (model-centric, hopgnn,
bulk-pipeline and naive-feature-centric on 4, p3 and roc-fullgraph on three machines, neugraph-stream's
chain of 4); ROC's memory policies on 4 workers now run only here, under ``-m slow``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from studies import validate as v
from studies.fidelity_experiment import hardware_toml
from workbench.trace import read_trace

from .conftest import assert_trace_is_the_plan, launch_real

EPOCHS = 2
CASES = {case.name: case for case in v.cases()}


# Four workers time-share two cores; with workers forked from a preloaded server (realrun.processes)
# the ten 4-worker runs take 30 s here, so they run by default again.
@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("name", sorted(CASES))
def test_real_bytes_and_trace_are_the_plans(tmp_path: Path, name: str, workers: int) -> None:
    case = CASES[name]
    hardware = tmp_path / "hardware.toml"
    hardware.write_text(hardware_toml(workers, "cpu", one_machine=case.one_machine))
    config = tmp_path / f"{name}-w{workers}.toml"
    config.write_text(case.config(workers, hardware))
    _, plan, summary = launch_real(config, workers, tmp_path / "run", epochs=EPOCHS)
    assert summary.complete, summary.error
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert len(results) == EPOCHS and results["bytes_match_plan"].astype(bool).all(), results.T
    assert_trace_is_the_plan(read_trace(tmp_path / "run" / "trace.parquet"), plan, EPOCHS)
