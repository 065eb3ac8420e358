"""How loaded the machine was around real runs, as reports and pages say it (studies.fidelity_experiment)."""

from __future__ import annotations

from studies.fidelity_experiment import load_sentence, machine_load, machine_was_shared


def _load(before: float, after: float, others: float | None = None) -> dict[str, float]:
    data = {"load_before": before, "load_after": after, "cpus": 2, "workers": 2}
    return data if others is None else {**data, "others_cpu": others, "steal": 0.0, "window_s": 5.0}


def test_back_to_back_quiet_runs_read_as_quiet_by_the_cpu_others_took() -> None:
    """Load averages of 3.7 (the previous run's 4 workers) but others took 0.5-1%: not shared."""
    machine = machine_load([_load(3.7, 2.2, 0.005), _load(2.2, 2.1, 0.01), _load(2.1, 2.0, 0.007)])
    assert machine["others_cpu_median"] == 0.007 and machine["others_cpu_max"] == 0.01
    assert machine["others_cpu_runs"] == 3
    assert not machine_was_shared(machine, workers=2)
    text = load_sentence(machine)
    assert text.startswith("other processes took 0.7% of the machine's CPU time while the runs ran")
    assert "median over 3 runs; max 1.0%" in text and "median 2.15, max 3.70" in text


def test_a_run_others_took_a_third_of_the_machine_from_is_shared() -> None:
    assert machine_was_shared(machine_load([_load(0.5, 0.6, 0.02), _load(0.6, 0.9, 0.34)]), workers=2)


def test_runs_without_the_count_fall_back_to_the_load_average() -> None:
    old = machine_load([_load(0.4, 0.5), _load(2.5, 2.6)])
    assert old["others_cpu_median"] is None and old["others_cpu_runs"] == 0
    assert machine_was_shared(old, workers=2) and not machine_was_shared(old, workers=4)
    assert "did not record the CPU time others took" in load_sentence(old)
    assert "median n/a, max n/a" in load_sentence(machine_load([]))


def test_a_runs_warm_epochs_make_one_repeat_per_run() -> None:
    """The recorded run has epochs 0 (cold), 1 and 2: per run, one repeat with the median epoch
    time and median busy seconds per phase of epochs 1-2 and both epochs' iteration times; per
    epoch, two repeats."""
    from pathlib import Path

    import numpy as np

    from studies.fidelity_experiment import measure, warm_epochs

    folder = Path(__file__).resolve().parents[1] / "data" / "hopgnn-migrating"
    assert list(warm_epochs(3)) == [1, 2] and list(warm_epochs(1)) == [0]
    each, loads = measure([folder], warm_epochs(3))
    run, _ = measure([folder], warm_epochs(3), per_run=True)
    assert len(each.epoch) == 2 and len(run.epoch) == 1 and loads == []
    assert run.epoch[0] == np.median(each.epoch)
    for phase, busy in run.phases[0].items():
        assert busy == np.median([p.get(phase, 0.0) for p in each.phases])
    assert run.iterations[0] == each.iterations[0] + each.iterations[1]
