"""The fitted compute jitter: a hand-worked pooled estimate, and the profile's [noise] table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
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


def _grouped(name: str, rows: list[tuple[str, int, int, int, float]]) -> TraceSource:
    """Compute rows (task, epoch, worker, iteration, log seconds)."""
    return TraceSource(
        name,
        pd.DataFrame(
            {
                "task": [r[0] for r in rows],
                "kind": "compute",
                "start": 0.0,
                "end": [math.exp(r[4]) for r in rows],
                "epoch": [r[1] for r in rows],
                "worker": [r[2] for r in rows],
                "iteration": [r[3] for r in rows],
                "phase": "forward",
            }
        ),
    )


def test_shared_and_per_task_sigma_split_by_hand() -> None:
    # One worker's iteration, tasks a and b, in epochs 0 and 1 (E = 2): logs a 0.0 / 0.4, b 1.0 / 1.2.
    # Deviations from each task's mean: epoch 0 -0.2, -0.1 (group mean -0.15), epoch 1 +0.2, +0.1
    # (+0.15); around the group means +-0.05. Degrees of freedom (E-1)/E (n-1) = 0.5 per group:
    # sigma_e^2 = 4 x 0.0025 / 1 = 0.01; sigma_s^2 = 0.15^2 x 2 - 0.01 / 2 = 0.04. Together they are
    # the pooled within-task variance, 0.1 / (4 rows - 2 tasks) = 0.05.
    rows = [("a", 0, 0, 3, 0.0), ("b", 0, 0, 3, 1.0), ("a", 1, 0, 3, 0.4), ("b", 1, 0, 3, 1.2)]
    fit = compute_jitter([_grouped("run", rows)])
    assert fit is not None
    assert fit["compute_jitter"] == pytest.approx(0.1, rel=1e-9)
    assert fit["iteration_jitter"] == pytest.approx(0.2, rel=1e-9)


def test_the_split_recovers_the_sigmas_it_was_drawn_with() -> None:
    """Log durations drawn as mu[task] + s[epoch, worker, iteration] + eps, sigma_s 0.15, sigma_e 0.2:
    4 workers x 30 iterations x 3 epochs = 360 groups of 20 tasks. The group sigma's estimate has a
    relative standard error of about 1/sqrt(2 x 360 x 2/3) = 4.6% on its square, 2.3% on itself;
    the per-task one, from 7,200 rows, under 1%. Tolerances: 10% and 3%."""
    rng = np.random.default_rng(11)
    rows = []
    for w in range(4):
        for i in range(30):
            mu = rng.normal(-5.0, 1.0, 20)
            for e in range(3):
                shared = rng.normal(0.0, 0.15)
                for k in range(20):
                    rows.append((f"i{i}.w{w}.t{k}", e, w, i, mu[k] + shared + rng.normal(0.0, 0.2)))
    fit = compute_jitter([_grouped("run", rows)])
    assert fit is not None
    assert fit["iteration_jitter"] == pytest.approx(0.15, rel=0.10)
    assert fit["compute_jitter"] == pytest.approx(0.2, rel=0.03)


def test_a_trace_without_workers_and_iterations_keeps_all_of_it_per_task() -> None:
    rows = [("a", 0, 0, 3, 0.0), ("b", 0, 0, 3, 1.0), ("a", 1, 0, 3, 0.4), ("b", 1, 0, 3, 1.2)]
    source = _grouped("run", rows)
    source.trace.drop(columns=["worker", "iteration"], inplace=True)
    fit = compute_jitter([source])
    assert fit is not None
    assert fit["iteration_jitter"] == 0.0 and fit["compute_jitter"] == pytest.approx(math.sqrt(0.05))


def test_the_simulator_stretches_a_workers_iteration_together() -> None:
    """With only the shared jitter, every compute task of one worker's iteration gets one factor,
    the factors differ between iterations and average to one (mean-one lognormal: 200 groups of
    sigma 0.3, standard error of their mean about 0.022; tolerance 0.07)."""
    from sim import simulate
    from workbench.plan import Plan

    plan = Plan("iterations")
    for w in range(2):
        for i in range(100):
            for k in range(3):
                plan.compute(f"i{i}.w{w}.c{k}", f"m0.gpu{w}", "forward", worker=w, iteration=i,
                             features={"seconds": 0.001 * (k + 1)})  # fmt: skip
    trace = simulate(plan, "v100x8-nvswitch", iteration_jitter=0.3).trace
    base = trace["task"].str.extract(r"c(\d)$")[0].astype(int).add(1) * 0.001
    factor = (trace["end"] - trace["start"]) / base
    per_group = factor.groupby([trace["worker"], trace["iteration"]])
    assert (per_group.max() - per_group.min()).max() < 1e-9
    assert per_group.first().std() > 0.2 and abs(per_group.first().mean() - 1.0) < 0.07


def test_a_bad_iteration_jitter_is_one_line_naming_it() -> None:
    data = read_toml(GPU_PROFILE, "profile")
    data["noise"] = {"compute_jitter": 0.2, "iteration_jitter": -1}
    with pytest.raises(ConfigError) as error:
        profile_from_dict(data, "p.toml")
    assert str(error.value) == "p.toml: noise.iteration_jitter must be at least 0, got -1"
    data["noise"] = {"compute_jitter": 0.2, "iteration_jitter": 0.1}
    assert profile_from_dict(data, "p.toml").iteration_jitter == 0.1
