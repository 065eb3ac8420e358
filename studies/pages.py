"""Study pages and the report index, from stored results only.

Each study's page (``reports/studies/<name>/index.html``) is its analysis (plots, table,
the paper's claim beside the measured figure) plus what it ran: the grid, when each
point finished, the workbench and results versions. ``reports/index.html`` links them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd

from studies.report import ReportPage, register_page, update_index
from studies.runner import RESULTS_VERSION, StudyRun, load_result, load_studies, study_folder


def workbench_version() -> str:
    try:
        return version("gnnwb")
    except PackageNotFoundError:
        return "unknown"


def write_study_page(run: StudyRun) -> Path:
    """Analyse a study's results and write its page; returns the page's path."""
    study = run.study
    page: ReportPage = study.analyze(run.results, run.folder)
    configs = _point_configs(run.folder)
    page.add(
        "What ran",
        f"{len(run.results)} points ({run.computed} computed in this run, {run.reused} reused from "
        f"reports/studies/{study.name}/points/); workbench {workbench_version()}, results version "
        f"{RESULTS_VERSION}; page written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. The configuration of the "
        "first point (every point's is in its JSON file):",
    )
    if configs:
        page.add("Configuration of the first point", code=json.dumps(configs[0], indent=1))
    path = page.write(run.folder)
    register_page(run.folder, f"{study.title}", f"{study.paper}: {study.claim}", page.judgements())
    update_index(run.folder.parent.parent)
    return path


def _point_configs(folder: Path) -> list[dict]:
    out = []
    for path in sorted((folder / "points").glob("*.json"))[:1]:
        try:
            out.append(json.loads(path.read_text())["point"]["config"])
        except (OSError, KeyError, json.JSONDecodeError):
            continue
    return out


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
                write_study_page(StudyRun(study, table, 0, len(rows), folder))
                break
    return update_index(reports)
