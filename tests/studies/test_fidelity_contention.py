"""The fidelity experiment with more workers than cores: those fitted runs leave the profile's fit
and fit the contention model (sim.contention) instead, and held-out ones are stretched by it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sim.calibrate.fidelity import Measured
from studies import fidelity_experiment as fx


def point(name: str, workers: int, held_out: bool) -> SimpleNamespace:
    return SimpleNamespace(name=name, workers=workers, held_out=held_out)


def four_busy_workers(*_: object) -> pd.DataFrame:
    # 4 workers each computing 0 -> 1 s: busy 4 s, span 1 s
    return pd.DataFrame(
        {
            "kind": ["compute"] * 4,
            "start": [0.0] * 4,
            "end": [1.0] * 4,
            "phase": ["forward"] * 4,
            "iteration": [0] * 4,
        }
    )


def test_contended_runs_fit_the_contention_model_not_the_profile(tmp_path: Path, monkeypatch) -> None:
    points = [point("a-p2", 2, False), point("b-p4", 4, False), point("c-p4", 4, True)]
    monkeypatch.setattr(fx, "cores", lambda: 2)
    monkeypatch.setattr(
        fx, "_run_repeats", lambda p, *a: [tmp_path / p.name / "r0", tmp_path / p.name / "r1"]
    )
    monkeypatch.setattr(fx, "_plan", lambda prepared, p, out: p.name)
    monkeypatch.setattr(fx, "warm_source", lambda folder, plan, first: (plan, folder.name))
    opts = fx.FidelityOptions(tmp_path, (2, 4), repeats=2, microbench=False)
    _, runs, sources = fx.run_and_collect(points, opts, lambda p: tmp_path / f"{p.name}.toml")
    assert sources == [("a-p2", "r0"), ("a-p2", "r1")]  # never b-p4's (contended) nor c-p4's (held out)

    # b-p4's two repeats measured 2.5 s and 2.0 s against busy 4 s, span 1 s on 2 cores: implied
    # efficiencies 0.8 and 1.0, median 0.9; c-p4 (held out) is never fitted on.
    monkeypatch.setattr(fx, "_prepared", lambda prepared, p, out: (None, None))
    monkeypatch.setattr(fx, "simulated_trace", four_busy_workers)
    monkeypatch.setattr(fx, "measure", lambda folders, epochs, per_run: (Measured(epoch=[2.5, 2.0]), []))
    model, fit = fx.fit_contention(points, {}, runs, opts, tmp_path / "p.toml", None)
    assert model.cores == 2 and model.efficiency == pytest.approx(0.9)
    assert fit["runs"] == 2 and fit["efficiency"] == pytest.approx(0.9)

    # The held-out 4-worker point is stretched by 4 / (0.9 x 2 x 1): 2.22 s; a 2-worker one is not.
    epoch, phases, iterations = fx.predict(None, None, "c-p4", tmp_path, None, contention=model, workers=4)
    assert epoch == pytest.approx(4 / 1.8) and phases == {"forward": pytest.approx(4 * 4 / 1.8)}
    assert iterations == pytest.approx([4 / 1.8])
    assert fx.predict(None, None, "a", tmp_path, None, contention=model, workers=2)[0] == 1.0


def test_without_contended_fitted_runs_there_is_no_model(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fx, "cores", lambda: 2)
    opts = fx.FidelityOptions(tmp_path)
    assert fx.fit_contention([point("a", 2, False), point("b", 4, True)], {}, {}, opts, tmp_path, None) == (
        None,
        None,
    )
    line = fx._contention_sentence({"contention": None, "workers": {}}, 2)
    assert line.startswith("No fitted configuration had more workers than the 2 CPUs")
