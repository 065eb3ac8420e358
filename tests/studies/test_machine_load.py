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
