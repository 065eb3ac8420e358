"""The fitted compute jitter: a hand-worked pooled estimate, and the profile's [noise] table."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from sim.calibrate.noise import compute_jitter
from sim.calibrate.profile import profile_from_dict
from sim.calibrate.sources import TraceSource
from workbench.errors import ConfigError
from workbench.tomlfile import read_toml

GPU_PROFILE = Path(__file__).resolve().parents[2] / "reports" / "traces" / "nvidia-h200" / "profile.toml"


def _source(name: str, rows: list[tuple[str, str, float]]) -> TraceSource:
    trace = pd.DataFrame(
        {
            "task": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "start": [0.0] * len(rows),
            "end": [r[2] for r in rows],
            "epoch": list(range(len(rows))),
            "phase": ["forward"] * len(rows),
        }
    )
    return TraceSource(name, trace)


def test_pooled_within_task_sigma_by_hand() -> None:
    # Task a: log durations 0 and 0.2 (deviations +-0.1); task b: log 1.0, 1.3, 1.6 (deviations
    # -0.3, 0, +0.3). Pooled: (0.02 + 0.18) / (5 rows - 2 tasks) = 0.2 / 3. Left out: c (once),
    # a transfer, a zero-length compute row, and a task of the same id in another trace.
    a = _source(
        "run0",
        [
            ("a", "compute", 1.0),
            ("a", "compute", math.exp(0.2)),
            ("b", "compute", math.exp(1.0)),
            ("b", "compute", math.exp(1.3)),
            ("b", "compute", math.exp(1.6)),
            ("c", "compute", 5.0),
            ("x", "transfer", 1.0),
            ("x", "transfer", 9.0),
            ("z", "compute", 0.0),
            ("z", "compute", 0.0),
        ],
    )
    other = _source("run1", [("c", "compute", 50.0)])
    fit = compute_jitter([a, other])
    assert fit is not None
    assert fit["rows"] == 5 and fit["tasks"] == 2
    assert fit["compute_jitter"] == pytest.approx(math.sqrt(0.2 / 3), rel=1e-12)


def test_no_task_that_recurs_fits_nothing() -> None:
    assert compute_jitter([_source("once", [("a", "compute", 1.0), ("b", "compute", 2.0)])]) is None


def test_a_profile_without_noise_simulates_without_jitter() -> None:
    data = read_toml(GPU_PROFILE, "profile")
    data.pop("noise", None)  # profiles written before the noise was fitted
    assert profile_from_dict(data, "p.toml").jitter == 0.0


@pytest.mark.parametrize(
    "bad,says",
    [
        (-0.1, "must be at least 0, got -0.1"),
        (float("nan"), "must be a finite number, got nan"),
        ("0.2", "must be a number, got '0.2'"),
        (True, "must be a number, got True"),
    ],
)
def test_a_bad_compute_jitter_is_one_line_naming_it(bad: object, says: str) -> None:
    data = read_toml(GPU_PROFILE, "profile")
    data["noise"] = {"compute_jitter": bad}
    with pytest.raises(ConfigError) as error:
        profile_from_dict(data, "p.toml")
    assert str(error.value) == f"p.toml: noise.compute_jitter {says}"


def test_the_fitted_jitter_is_read_back() -> None:
    data = read_toml(GPU_PROFILE, "profile")
    data["noise"] = {"compute_jitter": 0.25, "rows": 10, "tasks": 4}
    assert profile_from_dict(data, "p.toml").jitter == 0.25
