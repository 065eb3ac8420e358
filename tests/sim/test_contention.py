"""The CPU contention model (sim.contention), on traces and runs worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.contention import ContendedRun, SharedCores, demand, fit_efficiency
from workbench.errors import ConfigError


def busy_trace(busy_per_worker: list[float], span: float = 1.0) -> pd.DataFrame:
    """One compute row per worker from 0.5 s, ``busy`` long, and a transfer making the span ``span``
    (not counted: a transfer's row is mostly waiting)."""
    rows = [
        {"kind": "compute", "device": f"m{i}.gpu0", "start": 0.5, "end": 0.5 + b}
        for i, b in enumerate(busy_per_worker)
    ]
    rows.append({"kind": "transfer", "device": "m0.gpu0", "start": 0.5, "end": 0.5 + span})
    return pd.DataFrame(rows)


def test_workers_that_fit_the_cores_are_not_stretched():
    # 2 workers, 2 cores: each has a core, whatever the efficiency.
    trace = busy_trace([1.0, 1.0])
    out, f = SharedCores(2, 0.5).stretch(trace, workers=2)
    assert f == 1.0 and out is trace


def test_four_busy_workers_on_two_cores_take_twice_as_long():
    # 4 workers each computing the whole 1 s span (the transfer's second not counted): busy 4 s,
    # span 1 s. f = 4 / (1.0 x 2 x 1) = 2: every time stretches from the first start (0.5 s).
    trace = busy_trace([1.0, 1.0, 1.0, 1.0])
    assert demand(trace) == (4.0, 1.0)
    out, f = SharedCores(2, 1.0).stretch(trace, workers=4)
    assert f == pytest.approx(2.0)
    assert out["start"].tolist() == [0.5] * 5
    assert out["end"].tolist() == pytest.approx([0.5 + 2.0] * 5)
    # An efficiency of 0.5 (the cores also carry uncounted work) makes the same compute 4 s.
    assert SharedCores(2, 0.5).factor(trace, workers=4) == pytest.approx(4.0)


def test_workers_that_wait_more_than_they_work_are_not_slowed():
    # 4 workers computing 0.1 s each in a 1 s span: 0.4 s over 2 cores is under the span, so the
    # cores keep up: no stretch.
    assert SharedCores(2).factor(busy_trace([0.1] * 4), workers=4) == 1.0


def test_the_efficiency_is_the_median_implied_one():
    # busy 4 s, span 1 s, 2 cores: measured 2.5, 2.0 and 4.0 s imply 4 / (2 x m) = 0.8, 1.0, 0.5;
    # the median 0.8 predicts 4 / (0.8 x 2) = 2.5 s for all three: errors 0, 25% and 37.5%.
    runs = [ContendedRun(f"r{k}", 4.0, 1.0, m) for k, m in enumerate([2.5, 2.0, 4.0])]
    model, quality = fit_efficiency(runs, cores=2)
    assert model.cores == 2 and model.efficiency == pytest.approx(0.8)
    assert quality["runs"] == 3
    assert (quality["implied_efficiency_min"], quality["implied_efficiency_max"]) == pytest.approx((0.5, 1.0))
    assert quality["median_abs_error"] == pytest.approx(0.25)
    # Without the model each run would be predicted at its 1 s span: errors 60%, 50%, 75%.
    assert quality["median_abs_error_uncontended"] == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("cores", "efficiency", "message"),
    [
        (0, 1.0, "contention: cores must be a whole number of at least 1, got 0"),
        (2.5, 1.0, "contention: cores must be a whole number of at least 1, got 2.5"),
        (2, 0.0, "contention: efficiency must be a positive number, got 0.0"),
        (2, float("nan"), "contention: efficiency must be a positive number, got nan"),
        (2, True, "contention: efficiency must be a positive number, got True"),
    ],
)
def test_impossible_models_are_one_line(cores, efficiency, message):
    with pytest.raises(ConfigError) as err:
        SharedCores(cores, efficiency)
    assert str(err.value) == message


def test_nothing_to_fit_is_one_line():
    with pytest.raises(ConfigError, match="^contention: no measured run with more workers than cores"):
        fit_efficiency([], cores=2)
    with pytest.raises(ConfigError, match=r"^p\.toml: \[contention\] needs cores and efficiency$"):
        SharedCores.from_dict({"cores": 2}, "p.toml")
