"""Quick against full mode: each page's verdicts file, the committed full-mode record
(``--full --record``), the other mode's line under each verdict and the index's count of
claims whose verdicts disagree. A fake study and a fake measure: nothing is simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from studies import measures, runner
from studies.pages import RECORDS_ENV, write_study_page
from studies.report import ReportPage
from studies.runner import Point, Study, run_study
from studies.verdict import Claim, judge
from workbench.cli.main import main
from workbench.errors import ConfigError

# Quick reproduces the paper's 1.48x at 1.6x; full's 1.83x is outside 1.5x in effect: direction only.
SHRINKS = Claim("the manager moves less", "Fig. 10", "LRU / DP", direction="at_least", paper=(1.48, 1.48))
FASTER = Claim("the scheme is faster", "Fig. 11", "old / new")  # a direction only: holds in both
FIGURES = {False: {"shrinks": [1.6], "faster": [1.2]}, True: {"shrinks": [1.7, 1.83], "faster": [1.3]}}
WHY = "the full grid has a larger graph, which leaves LRU more to reuse"


def fake_measure(point: Point) -> dict:
    return {"value": point.options["value"]}


def points(full: bool) -> list[Point]:
    return [
        Point("fake", {"claim": claim, "part": i}, {"name": f"fake-{full}-{claim}-{i}"}, "fake", {"value": v})
        for claim, values in FIGURES[full].items()
        for i, v in enumerate(values)
    ]


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    page = ReportPage("Fake study", "two claims whose figures differ by mode")
    shrinks = results[results["claim"] == "shrinks"]
    for part, value in zip(shrinks["part"], shrinks["value"], strict=True):  # the claim in parts
        page.add(f"Loads, part {part}", judgement=judge(SHRINKS, {f"part {part}": value}))
    page.add(
        "Claim: fewer loads",
        judgement=judge(SHRINKS, dict(zip(shrinks["part"], shrinks["value"], strict=True))),
    )
    faster = results[results["claim"] == "faster"]
    page.add("Claim: faster", judgement=judge(FASTER, list(faster["value"])))
    page.add("Files", "no claim here")
    return page


def fake_study(notes: dict[str, str] | None = None) -> Study:
    return Study("fake", "Fake study", "paper 9", "less", points, analyze, mode_notes=notes or {})


@pytest.fixture(autouse=True)
def records(tmp_path, monkeypatch) -> Path:
    """The committed records' folder, in tmp_path: a test never writes into the repository."""
    folder = tmp_path / "records"
    monkeypatch.setenv(RECORDS_ENV, str(folder))
    monkeypatch.setitem(measures.MEASURES, "fake", fake_measure)
    return folder


def page_of(study: Study, reports: Path, full: bool, record: bool = False) -> str:
    done = run_study(study, full=full, reports=reports, jobs=1, progress=False)
    assert done.full is full
    return write_study_page(done, record=record).read_text()


def other_mode_lines(html: str) -> list[str]:
    return [line for line in html.splitlines() if "class='other-mode" in line]


def test_each_mode_writes_its_verdicts_and_a_quick_page_without_a_record_says_so(tmp_path) -> None:
    reports = tmp_path / "reports"
    html = page_of(fake_study(), reports, full=False)
    folder = reports / "studies" / "fake"
    quick = json.loads((folder / "verdicts.quick.json").read_text())
    assert (quick["study"], quick["mode"], quick["points"]) == ("fake", "quick", 2)
    assert quick["date"][:4].isdigit() and ("commit" in quick)
    assert [(c["statement"], c["figure"], c["verdict"]) for c in quick["claims"]] == [
        ("the manager moves less", "1.6x", "reproduced"),
        ("the scheme is faster", "1.2x", "reproduced"),
    ]
    assert quick["claims"][0]["source"] == "Fig. 10" and quick["claims"][0]["ratio"] == "LRU / DP"
    assert [s["title"] for s in quick["sections"]] == ["Loads, part 0", "Claim: fewer loads", "Claim: faster"]
    assert other_mode_lines(html) == ["<p class='other-mode'>Full mode not recorded.</p>"] * 3
    assert json.loads((folder / "page.json").read_text())["modes"] == {
        "mode": "quick",
        "other": "full",
        "recorded": False,
    }
    index = (reports / "index.html").read_text()
    assert "full mode not recorded" in index and "1 with no record of the other mode" in index
    assert not (folder / "verdicts.full.json").exists() and not (tmp_path / "records").exists()


def test_full_record_is_written_and_a_fresh_quick_page_reads_it(tmp_path, records) -> None:
    study = fake_study({SHRINKS.statement: WHY})
    full_html = page_of(study, tmp_path / "ci", full=True, record=True)
    recorded = json.loads((records / "fake.full.json").read_text())
    assert recorded == json.loads((tmp_path / "ci" / "studies" / "fake" / "verdicts.full.json").read_text())
    assert [(c["figure"], c["verdict"]) for c in recorded["claims"]] == [
        ("1.7-1.83x", "direction only"),  # the whole claim, not its first part (part 0: 1.7x)
        ("1.3x", "reproduced"),
    ]
    assert [s["title"] for s in recorded["sections"]][:3] == [
        "Loads, part 0",
        "Loads, part 1",
        "Claim: fewer loads",
    ]
    assert other_mode_lines(full_html) == []  # a full page with no quick run has nothing to compare
    # A reports folder that never ran full mode (CI's gnnwb run): the line comes from the record.
    reports = tmp_path / "reports"
    lines = other_mode_lines(page_of(study, reports, full=False))
    stamp = recorded["date"][:10] + (f", {recorded['commit']}" if recorded["commit"] else "")
    assert lines == [
        f"<p class='other-mode'>Full mode (recorded {stamp}): 1.7x, reproduced; quick and full agree.</p>",
        f"<p class='other-mode disagree'>Full mode (recorded {stamp}): 1.7-1.83x, direction only; quick and "
        f"full disagree: {WHY}</p>",
        f"<p class='other-mode'>Full mode (recorded {stamp}): 1.3x, reproduced; quick and full agree.</p>",
    ]
    modes = json.loads((reports / "studies" / "fake" / "page.json").read_text())["modes"]
    # Counted by whole claim, as the index counts verdicts: part 0 agrees, the claim does not.
    assert (modes["compared"], modes["disagree"]) == (2, 1)


def test_a_disagreement_is_counted_and_said_with_no_reason_recorded(tmp_path, monkeypatch) -> None:
    reports = tmp_path / "reports"
    monkeypatch.setitem(FIGURES, True, {"shrinks": [1.83], "faster": [1.3]})
    full_html = page_of(fake_study(), reports, full=True)
    assert other_mode_lines(full_html) == []
    quick_html = page_of(fake_study(), reports, full=False)
    lines = other_mode_lines(quick_html)
    assert len(lines) == 3 and all("Full mode (run " in line for line in lines)
    assert "1.83x, direction only; quick and full disagree: no reason recorded." in lines[0]
    assert "class='other-mode disagree'" in lines[0] and "agree." in lines[2]
    folder = reports / "studies" / "fake"
    assert json.loads((folder / "page.json").read_text())["modes"]["disagree"] == 1
    index = (reports / "index.html").read_text()
    assert "1 of 2 claims disagrees" in index
    assert "Quick and full mode disagree on 1 of 2 claims compared, over 1 study." in index
    # The full page, written again, reads the quick run's file beside it.
    again = other_mode_lines(page_of(fake_study(), reports, full=True))
    assert "Quick mode (run " in again[0] and "1.6x, reproduced; quick and full disagree" in again[0]


def test_a_section_only_one_grid_has_shows_the_whole_claim(tmp_path) -> None:
    reports = tmp_path / "reports"
    page_of(fake_study(), reports, full=False)
    lines = other_mode_lines(page_of(fake_study(), reports, full=True))
    quick = json.loads((reports / "studies" / "fake" / "verdicts.quick.json").read_text())
    assert "Loads, part 1" not in [s["title"] for s in quick["sections"]]
    assert "Quick mode (run " in lines[1] and ": the whole claim: 1.6x, reproduced" in lines[1]


def test_record_needs_full_mode(tmp_path) -> None:
    done = run_study(fake_study(), full=False, reports=tmp_path, jobs=1, progress=False)
    with pytest.raises(ConfigError, match="--record"):
        write_study_page(done, record=True)


def cli_study(monkeypatch) -> None:
    study = fake_study()
    monkeypatch.setattr(runner, "STUDIES", {"fake": study})
    monkeypatch.setattr(runner, "load_studies", lambda: {"fake": study})


def test_cli_records_full_mode_and_refuses_record_without_full(
    tmp_path, records, monkeypatch, capsys
) -> None:
    cli_study(monkeypatch)
    reports = str(tmp_path / "reports")
    assert main(["study", "run", "fake", "--record", "--reports", reports]) == 2
    assert "--record records full mode's verdicts; add --full" in capsys.readouterr().err
    assert not records.exists()
    assert main(["study", "run", "fake", "--full", "--record", "--jobs", "1", "--reports", reports]) == 0
    assert str(records / "fake.full.json") in capsys.readouterr().out
    assert json.loads((records / "fake.full.json").read_text())["mode"] == "full"
    # gnnwb report rebuilds from the stored results: the full grid is complete, so a full page.
    assert main(["report", "--reports", reports]) == 0
    meta = json.loads((tmp_path / "reports" / "studies" / "fake" / "page.json").read_text())
    assert meta["modes"] == {"mode": "full", "other": "quick", "recorded": False}


def test_a_claim_judged_in_parts_first_counts_by_its_whole() -> None:
    page = ReportPage("Parts first", "a claim judged per width, then whole")
    page.add("width 256", judgement=judge(SHRINKS, {"256": 1.36}))
    page.add("width 512", judgement=judge(SHRINKS, {"512": 1.83}))
    page.add("whole", judgement=judge(SHRINKS, {"256": 1.36, "512": 1.83}))
    assert [j.figure_text() for j in page.judgements()] == ["1.36-1.83x"]
