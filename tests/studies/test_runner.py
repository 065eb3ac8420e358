"""The study runner: results stored by hash, resumed after an interruption, on a Dask cluster too."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from studies import measures
from studies.runner import RESULTS_VERSION, Point, Study, load_result, run_point, run_study
from workbench.errors import UnknownNameError, WorkbenchError


def tiny_config(workers: int) -> dict:
    return {
        "name": f"tiny-{workers}",
        "graph": {"name": "er:n=600,deg=6"},
        "hardware": {"name": "hopgnn-4xa100-10gbe"},
        "model": {"name": "sage", "hidden": 16, "num_layers": 2},
        "training": {"batch_size": 32, "iterations": 2, "workers": workers},
        "partition": {"name": "random"},
        "sampling": {"name": "neighbor", "fanouts": [3, 2]},
    }


def tiny_study(n: int = 4) -> Study:
    def points(full: bool) -> list[Point]:
        return [Point("tiny", {"workers": w}, tiny_config(w)) for w in range(1, n + 1)]

    return Study("tiny", "a tiny study", "none", "none", points, lambda results, folder: None)


def test_points_are_stored_by_hash_and_an_interrupted_study_resumes(tmp_path, monkeypatch):
    study = tiny_study()
    computed: list[int] = []
    real = measures.MEASURES["sim"]

    def interrupted_after_two(point):
        if len(computed) == 2:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C during the third point
        computed.append(point.label["workers"])
        return real(point)

    monkeypatch.setitem(measures.MEASURES, "sim", interrupted_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_study(study, reports=tmp_path, jobs=1, progress=False)
    stored = sorted((tmp_path / "studies" / "tiny" / "points").glob("*.json"))
    assert len(stored) == 2 and computed == [1, 2]
    before = {p: p.stat().st_mtime_ns for p in stored}

    def counting(point):
        computed.append(point.label["workers"])
        return real(point)

    monkeypatch.setitem(measures.MEASURES, "sim", counting)
    done = run_study(study, reports=tmp_path, jobs=1, progress=False)
    assert computed == [1, 2, 3, 4]  # only the two unfinished points ran again
    assert (done.computed, done.reused) == (2, 2)
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())  # finished files untouched
    assert done.results["workers"].tolist() == [1, 2, 3, 4] and (done.results["epoch_s"] > 0).all()
    again = run_study(study, reports=tmp_path, jobs=1, progress=False)
    assert (again.computed, again.reused) == (0, 4)
    pd.testing.assert_frame_equal(again.results, done.results)


def test_results_of_an_older_version_or_a_damaged_file_are_computed_again(tmp_path):
    study = tiny_study(1)
    point = study.points(False)[0]
    run_study(study, reports=tmp_path, jobs=1, progress=False)
    folder = tmp_path / "studies" / "tiny"
    path = folder / "points" / f"{point.key}.json"
    record = json.loads(path.read_text())
    record["results_version"] = RESULTS_VERSION - 1
    path.write_text(json.dumps(record))
    assert load_result(folder, point) is None
    path.write_text("{not json")
    assert load_result(folder, point) is None
    assert run_study(study, reports=tmp_path, jobs=1, progress=False).computed == 1
    assert load_result(folder, point) is not None


def test_the_key_follows_the_configuration():
    a = Point("s", {}, tiny_config(1))
    assert a.key == Point("s", {"other": "label"}, tiny_config(1)).key  # labels are not configuration
    assert a.key != Point("s", {}, tiny_config(2)).key
    assert a.key != Point("s", {}, tiny_config(1), measure="preprocess").key


def test_a_study_on_a_dask_local_cluster_over_loopback(tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster:
        done = run_study(tiny_study(2), reports=tmp_path, scheduler=cluster.scheduler_address, progress=False)
    assert done.computed == 2 and (done.results["epoch_s"] > 0).all()
    # The same points computed locally give the same results.
    local = [run_point(p) for p in tiny_study(2).points(False)]
    assert done.results["epoch_s"].tolist() == [r["epoch_s"] for r in local]


def test_a_scheduler_that_does_not_answer_is_a_clear_error(tmp_path):
    with pytest.raises(WorkbenchError, match=r"Dask scheduler tcp://127.0.0.1:9 did not answer within 5 s"):
        run_study(tiny_study(1), reports=tmp_path, scheduler="tcp://127.0.0.1:9", progress=False)


def test_unknown_study_is_named(capsys):
    from workbench.cli.main import main

    assert main(["study", "run", "nonesuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown study 'nonesuch'; valid: " in err and "placement" in err
    with pytest.raises(UnknownNameError):
        from studies.runner import get_study

        get_study("nonesuch")


def test_study_list_names_each_study_and_its_paper(capsys):
    from workbench.cli.main import main

    assert main(["study", "list"]) == 0
    out = capsys.readouterr().out
    assert "placement" in out and "paper 002" in out


def test_gnnwb_report_rebuilds_pages_from_stored_results(tmp_path, monkeypatch):
    from studies import runner
    from workbench.cli.main import main

    pages: list[int] = []
    labels: list[list[int]] = []

    def analyze(results, folder: Path):
        from studies.report import ReportPage

        pages.append(len(results))
        labels.append(list(results["workers"]))
        page = ReportPage("Tiny", "a tiny study")
        page.add("Results", table=results[["workers", "epoch_s"]])
        return page

    def points(full: bool) -> list[Point]:
        # The second point is the first's configuration under another label (a baseline in two plots).
        return [*tiny_study(2).points(full), Point("tiny", {"workers": 9}, tiny_config(1))]

    study = Study("tiny", "Tiny study", "none", "nothing", points, analyze)
    monkeypatch.setattr(runner, "STUDIES", {"tiny": study})
    monkeypatch.setattr(runner, "load_studies", lambda: {"tiny": study})
    run_study(study, reports=tmp_path, jobs=1, progress=False)
    assert main(["report", "--reports", str(tmp_path)]) == 0
    assert pages == [3]
    assert labels == [[1, 2, 9]]  # the shared configuration's row under each point's label
    index = (tmp_path / "index.html").read_text()
    assert "studies/tiny/index.html" in index and "Tiny study" in index
    assert "<table" in (tmp_path / "studies" / "tiny" / "index.html").read_text()


def test_a_page_says_which_points_were_simulated_and_which_measured():
    from studies.pages import sources_sentence
    from studies.runner import Point, measure_counts

    points = [Point("s", {}, {"a": k}) for k in range(3)] + [Point("s", {}, {"b": 1}, measure="preprocess")]
    text = sources_sentence(measure_counts(points))
    assert text == (
        "How the points' figures were obtained: 3 simulated (sim); 1 measured: the partitioner's or placement's "
        "wall-clock time on this machine (preprocess)."
    )
    assert sources_sentence({}) == ""


def test_points_that_need_the_machine_alone_run_after_the_others_each_in_a_fresh_process(
    tmp_path, monkeypatch
):
    from studies import runner

    calls: list[tuple[str, list[int], bool]] = []
    real_local = runner._local_executor

    def local(jobs, *, fresh=False):
        inner = real_local(jobs, fresh=fresh)

        def run(points):
            calls.append(("local", [p.label["workers"] for p in points], fresh))
            yield from inner(points)

        return run

    monkeypatch.setattr(runner, "_local_executor", local)

    def points(full: bool) -> list[Point]:
        return [Point("tiny", {"workers": w}, tiny_config(w), alone=w in (1, 3)) for w in range(1, 5)]

    study = Study("tiny", "a tiny study", "none", "none", points, lambda results, folder: None)
    done = run_study(study, reports=tmp_path, jobs=2, progress=False)
    assert calls == [("local", [2, 4], False), ("local", [1, 3], True)]
    in_process = [run_point(p)["epoch_s"] for p in points(False)]
    assert done.results["epoch_s"].tolist() == in_process
    assert Point("s", {}, tiny_config(1), alone=True).key == Point("s", {}, tiny_config(1)).key
