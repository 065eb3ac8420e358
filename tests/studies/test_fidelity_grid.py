"""The fidelity grid of every real scheme (studies/fidelity_grid.py): the held-out rule sees every
level of every factor in fitting, the second set has values no fitted configuration has, and the
configurations load and prepare (the memory policies' arenas grown with the graph)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from studies import fidelity_grid as fg
from studies.validate import cases


def test_every_level_of_every_factor_is_fitted_and_held_out() -> None:
    points = fg.scheme_grid([2, 4])
    shared = [c for c in cases() if c.one_machine]
    assert shared, "validate's cases have a one-machine case (NeuGraph)"
    per_count = len(fg.FAMILIES) * len(fg.WIDTHS)
    assert len(points) == len(cases()) * per_count * 2 + len(shared) * per_count
    grid = [p for p in points if p.workers in (2, 4)]
    for attr in ("family", "width", "workers"):
        for level in {getattr(p, attr) for p in grid}:
            assert {p.held_out for p in grid if getattr(p, attr) == level} == {True, False}, (attr, level)
    for case in cases():
        # NeuGraph's workers share one server: on CPU modelled on another cluster, so held out;
        # its one-worker runs (one machine, no sharing) are fitted, on every family and width.
        several = {p.held_out for p in grid if p.case == case}
        assert several == ({True} if case.one_machine else {True, False}), case.name
        one = [p for p in points if p.case == case and p.workers == 1]
        assert len(one) == (per_count if case.one_machine else 0), case.name
        assert not any(p.held_out or p.one_machine for p in one)
        assert {(p.family, p.width) for p in one} == (
            set(itertools.product(fg.FAMILIES, fg.WIDTHS)) if case.one_machine else set()
        )
    assert all(p.one_machine == (p.case.one_machine and p.workers > 1) for p in points)
    assert len({p.name for p in points}) == len(points)
    # asked for one worker already, nothing is added
    assert len(fg.scheme_grid([1, 2])) == len(cases()) * per_count * 2


def test_the_second_set_varies_values_never_fitted() -> None:
    grid, second = fg.scheme_grid([2]), fg.second_set([2])
    fitted = [p for p in grid if not p.held_out]
    assert {p.nodes for p in second}.isdisjoint({p.nodes for p in fitted})
    assert {p.width for p in second}.isdisjoint({p.width for p in fitted})
    assert sorted(p.case.name for p in second) == sorted(c.name for c in cases())
    assert all(p.held_out and p.second for p in second)
    assert len({p.name for p in grid + second}) == len(grid) + len(second)


@pytest.mark.parametrize(
    "scheme, family, width, nodes",
    [("roc-fullgraph-lru", "er", 128, fg.NODES), ("roc-fullgraph-dpmm", "sbm", 64, 2 * fg.NODES),
     ("neugraph-stream", "rmat", 128, fg.NODES), ("bulk-pipeline", "rmat", 32, fg.NODES)],
)  # fmt: skip
def test_configurations_prepare_on_their_graphs(
    tmp_path: Path, scheme: str, family: str, width: int, nodes: int
) -> None:
    from realrun.launcher import prepare_real_run
    from studies.fidelity_experiment import hardware_toml

    case = next(c for c in cases() if c.name == scheme)
    point = fg.SchemePoint(case, family, width, 2, True, nodes, one_machine=case.one_machine)
    hardware = tmp_path / "hw.toml"
    hardware.write_text(hardware_toml(2, one_machine=case.one_machine))
    config = tmp_path / f"{point.name}.toml"
    config.write_text(point.config_text(hardware))
    prepared, plan, executed = prepare_real_run(config, None, "cpu")
    assert executed.name == point.name and prepared.inputs.graph.num_nodes == nodes
    assert prepared.inputs.graph.feat_dim == width and len(plan.tasks) > 0


def test_gnnwb_fidelity_grid_schemes_runs_the_scheme_grid(tmp_path: Path, monkeypatch, capsys) -> None:
    from studies import fidelity_experiment, fidelity_grid
    from workbench.cli.main import main

    called = {}

    def fake(opts):
        called["grid"] = opts.grid
        (opts.out / "second").mkdir(parents=True)
        for folder in (opts.out, opts.out / "second"):
            (folder / "report.md").write_text("report\n")
        return {"images": [], "second": {}}

    monkeypatch.setattr(fidelity_grid, "scheme_fidelity", fake)
    assert main(["fidelity", "--grid", "schemes", "--out", str(tmp_path / "f"), "--repeats", "1"]) == 0
    assert called == {"grid": "schemes"} and "Second held-out set" in capsys.readouterr().out
    with pytest.raises(Exception, match="fidelity_grid"):
        fidelity_experiment.fidelity(fidelity_experiment.FidelityOptions(tmp_path, grid="schemes"))


def test_a_finished_run_is_recognised_when_the_executor_rewrote_its_configuration(tmp_path: Path) -> None:
    """The folder's config.toml is the configuration as executed, every default written out; a
    rerun compares it with the given one by what they say (else every finished run ran again),
    and compares config.given.toml as written where the executor changed what it says."""
    import json

    from studies.fidelity_experiment import _finished
    from workbench.config import load_config
    from workbench.tomlfile import toml_text

    config = tmp_path / "c.toml"
    config.write_text(fg.scheme_grid([2])[0].config_text(tmp_path / "hw.toml"))
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"status": "complete", "epochs_finished": 2}))
    (folder / "config.toml").write_text(toml_text(load_config(config, check_strategies=False).to_dict()))
    assert (folder / "config.toml").read_text() != config.read_text()  # written out in full
    assert _finished(folder, config, 2) and not _finished(folder, config, 3)
    (folder / "config.toml").write_text(
        (folder / "config.toml").read_text().replace("seed = 0", "seed = 7", 1)
    )
    assert not _finished(folder, config, 2)  # the run executed something else
    (folder / "config.given.toml").write_text(config.read_text())
    assert _finished(folder, config, 2)  # ... which the executor imposed on the given configuration
