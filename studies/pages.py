"""Study pages and the report index, from stored results only.

Each study's page (``reports/studies/<name>/index.html``) is its analysis (plots, table,
the paper's claim beside the measured figure) plus what it ran: the grid, when each
point finished, the workbench and results versions. ``reports/index.html`` links them.

Quick mode is a scaled version of full mode, and the two can reach different verdicts on a
claim. Each page writes its verdicts to ``verdicts.quick.json`` or ``verdicts.full.json`` beside
it; under each verdict it shows the other mode's figure and verdict, read from that folder's
other file or, for full mode, from the committed record ``studies/verdicts/<name>.full.json``
(``gnnwb study run NAME --full --record`` writes it), so a quick page says what full mode
concluded without running it, and where the two disagree (and why, when the study says).
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from studies.report import ReportPage, Section, register_page, update_index
from studies.runner import (
    RESULTS_VERSION,
    Study,
    StudyRun,
    load_result,
    load_studies,
    measure_counts,
    study_folder,
)
from workbench.errors import ConfigError

# Where the committed full-mode records live; tests point it elsewhere, never at the repository.
RECORDS_ENV = "GNNWB_VERDICT_RECORDS"


def workbench_version() -> str:
    try:
        return version("gnnwb")
    except PackageNotFoundError:
        return "unknown"


def write_study_page(run: StudyRun, record: bool = False) -> Path:
    """Analyse a study's results and write its page and its verdicts file; returns the page's path.

    ``record`` (full mode only) also writes the verdicts to the committed record,
    ``studies/verdicts/<name>.full.json``, that quick pages compare against.
    """
    study = run.study
    if record and not run.full:
        raise ConfigError(f"study {study.name}: --record records full mode's verdicts; add --full")
    page: ReportPage = study.analyze(run.results, run.folder)
    page.add(
        "What ran",
        f"{mode_name(run.full).capitalize()} mode: {len(run.results)} points ({run.computed} computed in this "
        f"run, {run.reused} reused from reports/studies/{study.name}/points/); workbench {workbench_version()}, "
        f"results version {RESULTS_VERSION}; page written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
        f"{sources_sentence(run.measures)} The configuration of the first point (every point's is in its JSON "
        "file):",
    )
    if run.first_config:
        # This mode's own first point: the points folder holds both modes' results.
        page.add("Configuration of the first point", code=json.dumps(run.first_config, indent=1))
    verdicts = verdict_record(study, page, run.full, len(run.results))
    modes = compare_modes(page, study, run.full, other_mode_record(run))
    path = page.write(run.folder)
    _write_json(run.folder / f"verdicts.{mode_name(run.full)}.json", verdicts)
    if record:
        _write_json(records_folder() / f"{study.name}.full.json", verdicts)
    register_page(run.folder, f"{study.title}", f"{study.paper}: {study.claim}", page.judgements(), modes)
    update_index(run.folder.parent.parent)
    return path


def mode_name(full: bool) -> str:
    return "full" if full else "quick"


def records_folder() -> Path:
    """The committed full-mode records: ``studies/verdicts/``, or ``$GNNWB_VERDICT_RECORDS`` where set."""
    chosen = os.environ.get(RECORDS_ENV)
    return Path(chosen) if chosen else Path(__file__).resolve().parent / "verdicts"


def git_commit() -> str | None:
    """The checkout's commit (short), or None outside a git checkout or without git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def verdict_record(study: Study, page: ReportPage, full: bool, points: int) -> dict[str, Any]:
    """A page's verdicts as JSON: one entry per claim (as the index counts them: its widest section)
    and one per judged section (a claim judged in parts, one width or graph each, has several)."""
    return {
        "study": study.name,
        "mode": mode_name(full),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "results_version": RESULTS_VERSION,
        "points": points,
        "claims": [
            {
                "statement": j.claim.statement,
                "source": j.claim.source,
                "ratio": j.claim.ratio,
                "paper": j.claim.paper_text(),
                "figure": j.figure_text(),
                "verdict": str(j.verdict),
                "reason": j.reason,
            }
            for j in page.judgements()
        ],
        "sections": [
            {
                "title": s.title,
                "statement": s.judgement.claim.statement,
                "figure": s.judgement.figure_text(),
                "verdict": str(s.judgement.verdict),
            }
            for s in page.sections
            if s.judgement is not None
        ],
    }


def _write_json(path: Path, content: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=1) + "\n")


def other_mode_record(run: StudyRun) -> tuple[dict[str, Any], str] | None:
    """The other mode's verdicts and where they come from ("run": this reports folder; "recorded":
    the committed record, full mode only), or None where neither exists or parses."""
    other = mode_name(not run.full)
    sources = [(run.folder / f"verdicts.{other}.json", "run")]
    if other == "full":
        sources.append((records_folder() / f"{run.study.name}.full.json", "recorded"))
    for path, how in sources:
        try:
            content = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(content, dict) and content.get("mode") == other and "claims" in content:
            return content, how
    return None


def compare_modes(
    page: ReportPage, study: Study, full: bool, other: tuple[dict[str, Any], str] | None
) -> dict[str, Any]:
    """Put the other mode's line under each judged section of ``page``; returns the claims' count
    for the index (``compared``: judged in both modes, ``disagree``: with different verdicts)."""
    own, other_name = mode_name(full), mode_name(not full)
    modes: dict[str, Any] = {"mode": own, "other": other_name, "recorded": other is not None}
    if other is None:
        if not full:  # a full page without a quick run has nothing to say: quick is its scaled copy
            for section in _judged(page):
                section.mode_line = "Full mode not recorded."
        return modes
    record, how = other
    for section in _judged(page):
        section.mode_line, section.modes_disagree = _mode_line(section, record, how, study)
    theirs = {c.get("statement"): c.get("verdict") for c in record.get("claims", [])}
    compared = [j for j in page.judgements() if j.claim.statement in theirs]
    modes["compared"] = len(compared)
    modes["disagree"] = sum(str(j.verdict) != theirs[j.claim.statement] for j in compared)
    return modes


def _judged(page: ReportPage) -> list[Section]:
    return [s for s in page.sections if s.judgement is not None]


def sources_sentence(measures: dict[str, int]) -> str:
    """Which of a page's points were simulated and which measured for real, by measure."""
    from studies.measures import MEASURE_SOURCES

    if not measures:
        return ""
    parts = [
        f"{n} {MEASURE_SOURCES.get(m, m)} ({m})" for m, n in sorted(measures.items(), key=lambda kv: -kv[1])
    ]
    return "How the points' figures were obtained: " + "; ".join(parts) + "."


def _mode_line(section: Section, record: dict[str, Any], how: str, study: Study) -> tuple[str, bool]:
    """The other mode's figure and verdict for ``section``'s claim, and whether the verdicts differ.

    The other mode's section of the same title judges the same part of the claim; without one
    (a width or graph only one grid has) the line gives the whole claim's."""
    assert section.judgement is not None
    statement = section.judgement.claim.statement
    sections = [
        s
        for s in record.get("sections", [])
        if (s.get("title"), s.get("statement")) == (section.title, statement)
    ]
    claims = [c for c in record.get("claims", []) if c.get("statement") == statement]
    stamp = ", ".join(str(x) for x in (str(record.get("date", "?"))[:10], record.get("commit")) if x)
    if record.get("results_version") != RESULTS_VERSION:
        stamp += f", results version {record.get('results_version')} (now {RESULTS_VERSION})"
    head = f"{str(record.get('mode')).capitalize()} mode ({how} {stamp})"
    if sections:
        entry, scope = sections[0], ""
    elif claims:
        entry, scope = claims[0], "the whole claim: "
    else:
        return f"{head}: this claim is not judged there.", False
    line = f"{head}: {scope}{entry.get('figure')}, {entry.get('verdict')}"
    if entry.get("verdict") == str(section.judgement.verdict):
        return f"{line}; quick and full agree.", False
    why = study.mode_notes.get(statement)
    return f"{line}; quick and full disagree: {why or 'no reason recorded.'}", True


def rebuild(reports: Path) -> Path:
    """Every study's page from whatever results are stored (the full grid where it is complete,
    else the quick one), then the index. A study with no stored result is left out."""
    for name, study in sorted(load_studies().items()):
        folder = study_folder(reports, name)
        for full in (True, False):
            points = study.points(full)
            rows = [load_result(folder, p) for p in points]
            if all(r is not None for r in rows):
                # Each row with its own point's labels, as run_study gives them: a configuration
                # shared by two points of the grid is stored once, under the first one's labels.
                table = pd.DataFrame([{**r, **p.label} for r, p in zip(rows, points, strict=True)])  # type: ignore[dict-item]
                first = points[0].config if points else {}
                counts = measure_counts(points)
                write_study_page(StudyRun(study, table, 0, len(rows), folder, full, first, counts))
                break
    return update_index(reports)
