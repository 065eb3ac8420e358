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
    assert "allreduce: a measured all-reduce row starts when its worker arrives" in text  # why it is under
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


def test_a_missed_target_names_the_phase_furthest_off_in_time(tmp_path):
    from sim.calibrate.fidelity import Measured, compare, summarize
    from studies.study_fidelity import analyze

    measured = {"a": Measured([1.0, 1.0], [{"forward": 0.5, "gather_remote": 0.5}] * 2)}
    predicted = {"a": (0.7, {"forward": 0.5, "gather_remote": 0.2})}  # 30% under, all of it fetching
    table = compare(measured, predicted, {"a": {"workers": 2, "scheme": "model-centric"}})
    result = {"summary": summarize(table), "table": table.to_dict("records")}
    text = " ".join(
        s.text for s in analyze(pd.DataFrame([json.loads(json.dumps(result))]), tmp_path).sections
    )
    assert "target NOT met" in text
    assert (
        "furthest off in time, summed over the held-out configurations: gather_remote (-300.0 ms" in text
    )  # 0.2 s simulated, 0.5 s measured


def test_the_phase_furthest_off_is_a_phase_not_an_iteration_percentile(tmp_path):
    from sim.calibrate.fidelity import Measured, compare, summarize
    from studies.study_fidelity import analyze

    # One 1 s iteration measured, two of 0.2 and 0.5 s simulated: the iteration percentiles are off by
    # 0.5-0.8 s, more than any phase, but the phase furthest off is still gather_remote's -0.3 s.
    measured = {"a": Measured([1.0, 1.0], [{"forward": 0.5, "gather_remote": 0.5}] * 2, [[1.0], [1.0]])}
    predicted = {"a": (0.7, {"forward": 0.5, "gather_remote": 0.2}, [0.2, 0.5])}
    table = compare(measured, predicted, {"a": {"workers": 2, "scheme": "model-centric"}})
    assert {"iteration_p50", "iteration_p95"} <= set(table["quantity"])
    result = {"summary": summarize(table), "table": table.to_dict("records")}
    text = " ".join(
        s.text for s in analyze(pd.DataFrame([json.loads(json.dumps(result))]), tmp_path).sections
    )
    assert "furthest off in time, summed over the held-out configurations: gather_remote (-300.0 ms" in text


def test_the_target_is_not_judged_when_every_configuration_is_too_noisy(tmp_path):
    import pandas as pd

    from studies.study_fidelity import analyze

    stored = stored_result()
    stored["summary"]["every_unreliable"] = True
    page = analyze(pd.DataFrame([stored]), tmp_path)
    text = " ".join(s.text for s in page.sections)
    assert "not judged: every configuration's repeats spread more than" in text and "target met" not in text
