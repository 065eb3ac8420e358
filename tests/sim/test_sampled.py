"""Sampled simulation (sim/sampled.py): the estimator on hand-made epochs whose iteration times are
known, the windows it simulates, and its interval against exhaustive simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.sampled import sampled_epoch, window_plan
from workbench.errors import ConfigError
from workbench.plan import Plan


def chain_plan(work: list[int]) -> Plan:
    """One compute per iteration on one GPU, each after the one before (``items`` its work)."""
    plan = Plan("chain")
    for k, items in enumerate(work):
        deps = [f"i{k - 1}"] if k else []
        plan.compute(f"i{k}", "m0.gpu0", "forward", deps, iteration=k, items=items)
    return plan


def sequential(durations: dict[int, float]):
    """A stand-in simulator of a chain plan: each iteration takes ``durations[k]`` after the one
    before it in the window ends; returns each iteration's end and the task count."""

    def run(plan: Plan) -> tuple[dict[int, float], int]:
        ends, clock = {}, 0.0
        for k in sorted({t.iteration for t in plan.tasks}):
            clock += durations[k]
            ends[k] = clock
        return ends, len(plan.tasks)

    return run


def test_equal_iterations_are_estimated_exactly_with_no_width() -> None:
    plan = chain_plan([10] * 60)
    est = sampled_epoch(plan, sequential(dict.fromkeys(range(60), 0.002)), samples=16)
    assert est.estimate_s == pytest.approx(0.12) and est.half_width_s == pytest.approx(0.0, abs=1e-12)
    assert est.iterations == 60 and len(est.sampled) < 60 and 0 in est.sampled


def test_strata_by_planned_work_make_two_level_epochs_exact() -> None:
    # Iterations with work 10 take 1 ms, with work 30 take 3 ms: every stratum of blocks of equal
    # work is constant, so stratified sampling finds the epoch exactly: 30 x 1 + 30 x 3 = 120 ms.
    work = [10, 30] * 30
    plan = chain_plan(work)
    durations = {k: 1e-3 * w / 10 for k, w in enumerate(work)}
    est = sampled_epoch(plan, sequential(durations), samples=16, block=2)
    assert est.estimate_s == pytest.approx(0.120)
    assert est.high_s - est.low_s == pytest.approx(0.0, abs=1e-12)


def test_the_interval_covers_the_epoch_at_its_confidence() -> None:
    # 200 independent samplings of one noisy epoch (lognormal iteration times whose mean follows
    # the planned work). A 95% interval should cover about 95% of them; 200 draws of a 0.95
    # coverage have a standard deviation of 1.5%, so below 90% (over 3 deviations) means the
    # interval is too narrow.
    rng = np.random.default_rng(7)
    work = rng.integers(5, 50, size=200).tolist()
    durations = {k: 1e-4 * w * rng.lognormal(0, 0.3) for k, w in enumerate(work)}
    plan = chain_plan(work)
    truth = sum(durations.values())
    hits = sum(
        est.low_s <= truth <= est.high_s
        for est in (sampled_epoch(plan, sequential(durations), samples=40, seed=s) for s in range(200))
    )
    assert hits >= 180, hits


def test_a_window_drops_dependencies_and_frees_from_outside_it() -> None:
    plan = Plan("w")
    plan.compute("a0", "m0.gpu0", "forward", iteration=0, allocate={"x0": 8})
    plan.compute("a1", "m0.gpu0", "forward", ["a0"], iteration=1, allocate={"x1": 8}, free=["x0"])
    plan.compute("a2", "m0.gpu0", "forward", ["a1"], iteration=2, free=["x1"])
    sub = window_plan(plan, {1, 2})
    assert [t.id for t in sub.tasks] == ["a1", "a2"]
    assert sub.tasks[0].deps == [] and sub.tasks[0].free == [] and sub.tasks[1].free == ["x1"]
    assert plan.tasks[1].deps == ["a0"]  # the plan itself is left as it was
    sub.validate()


def test_too_few_samples_or_iterations_are_one_line_errors() -> None:
    plan = chain_plan([10] * 30)
    run = sequential(dict.fromkeys(range(30), 1.0))
    with pytest.raises(ConfigError, match="at least 4 blocks of 4 iterations"):
        sampled_epoch(plan, run, samples=8)
    with pytest.raises(ConfigError, match="the plan has 30 iterations: sampling 24"):
        sampled_epoch(plan, run, samples=24)


PRODUCTS = """
name = "sampled-products"
seed = 0
[graph]
name = "products-like"
scale = 0.1
[hardware]
name = "hopgnn-4xa100-10gbe"
[model]
name = "sage"
hidden = 256
num_layers = 3
[training]
batch_size = 64
epochs = 1
[cache]
capacity = "10%"
[partition]
name = "metis"
[placement]
name = "degree"
[sampling]
name = "neighbor"
fanouts = [15, 10, 5]
[execution]
name = "{scheme}"
"""


# p3's 20 seeds take 42 s on a 2-core AVX2 EPYC (the default suite's slowest test there): slow.
@pytest.mark.parametrize("scheme", ["model-centric", pytest.param("p3", marks=pytest.mark.slow)])
def test_the_interval_contains_the_exhaustive_epoch_for_most_seeds(tmp_path: Path, scheme: str) -> None:
    """76 iterations of products-like on 4 GPUs, 16 sampled: measured 20/20 (model-centric) and
    19/20 (p3) before this test was written; at 95% confidence 20 seeds miss 1 on average, and
    3 or more misses (probability 7.5% at 0.95) would say the interval is too narrow."""
    from sim import simulate
    from sim.calibrate import prepared_cost_model
    from sim.sampled import simulator
    from workbench.config import load_config
    from workbench.run import prepare_run

    config = tmp_path / "c.toml"
    config.write_text(PRODUCTS.format(scheme=scheme))
    prepared = prepare_run(load_config(config), cache_dir=str(tmp_path / "cache"))
    plan, cost_model = prepared.plan(), prepared_cost_model(prepared)
    whole = simulate(plan, prepared.cluster, cost_model=cost_model).makespan
    run = simulator(prepared.cluster, cost_model)
    estimates = [sampled_epoch(plan, run, samples=16, seed=s) for s in range(20)]
    misses = sum(not (e.low_s <= whole <= e.high_s) for e in estimates)
    assert misses <= 2, [(e.low_s, e.estimate_s, e.high_s, whole) for e in estimates]
    assert all(abs(e.estimate_s - whole) / whole < 0.05 for e in estimates)


def test_gnnwb_sim_sampled_writes_its_estimate_and_refuses_a_sample_that_saves_nothing(
    tmp_path: Path, capsys
) -> None:
    import json

    from workbench.cli.main import main

    config = tmp_path / "c.toml"
    config.write_text(PRODUCTS.format(scheme="model-centric"))
    out = tmp_path / "run"
    assert main(["sim", str(config), "--sampled", "16", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    estimate = json.loads((out / "sampled.json").read_text())
    assert estimate["low_s"] < estimate["estimate_s"] < estimate["high_s"] and estimate["iterations"] == 76
    assert "sampled epoch:" in printed and "95% interval" in printed and not (out / "trace.parquet").exists()
    assert main(["sim", str(config), "--sampled", "70", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err
    assert "the plan has 76 iterations: sampling 70 of them saves little" in errors[0]
