"""The fidelity study: its page from a stored result, and its points kept on this machine."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from studies import measures
from studies.runner import Study, run_study
from workbench.errors import WorkbenchError

from .test_runner import tiny_study


def stored_result() -> dict:
    """What measure_fidelity stores, for a grid whose forward is 20% over and all-reduce 20% under."""
    from sim.calibrate.fidelity import Measured, compare, summarize

    measured = {
        "a": Measured([1.00, 1.02, 0.98], [{"forward": 0.5, "allreduce": 0.5}] * 3),
        "b": Measured([2.0, 2.0, 2.0], [{"forward": 1.0, "allreduce": 1.0}] * 3),
    }
    predicted = {
        "a": (1.0, {"forward": 0.6, "allreduce": 0.4}),
        "b": (2.16, {"forward": 1.2, "allreduce": 0.8}),
    }
    table = compare(measured, predicted, {k: {"workers": 2} for k in measured})
    summary = summarize(table)
    # Through JSON, as the runner stores and loads it.
    return json.loads(json.dumps({"summary": summary, "table": table.to_dict("records"), "grid": "quick"}))


def test_the_page_states_the_target_the_figure_and_the_phases_that_miss(tmp_path):
    from studies.study_fidelity import analyze

    page = analyze(pd.DataFrame([stored_result()]), tmp_path)
    text = " ".join(s.text for s in page.sections)
    # Epoch errors 0% and 8%: median 4.0% (within 5%), worst 8% (within 15%).
    assert "median 4.0%, worst 8.0%" in text and "target met" in text
    # Both phases miss by 20% with no run-to-run spread; each is named with its own sign.
    assert "forward (+20% mean signed" in text and "allreduce (-20% mean signed" in text
    assert "allreduce: without point-to-point rows" in text  # and what the model leaves out there
    assert (tmp_path / "scatter.png").exists() and (tmp_path / "phase_errors.png").exists()
    held_out = next(s.table for s in page.sections if s.title == "Held-out epochs")
    assert list(held_out["configuration"]) == ["a", "b"]


def test_a_local_only_study_ignores_the_scheduler(tmp_path):
    tiny = tiny_study(2)
    study = Study(tiny.name, tiny.title, tiny.paper, tiny.claim, tiny.points, tiny.analyze, local_only=True)
    # Nothing answers at this address: a Dask study would fail, a local-only one runs here.
    done = run_study(study, reports=tmp_path, scheduler="tcp://127.0.0.1:9", progress=False)
    assert done.computed == 2


def test_the_fidelity_measure_refuses_a_daemonic_worker(monkeypatch):
    import multiprocessing

    from studies.study_fidelity import points

    class Daemon:
        daemon = True

    monkeypatch.setattr(multiprocessing, "current_process", lambda: Daemon())
    with pytest.raises(WorkbenchError, match="run it on this machine"):
        measures.measure_fidelity(points(False)[0])
