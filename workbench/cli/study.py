"""``gnnwb study list|run NAME`` and ``gnnwb report``: the paper studies and their report pages."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.common import (
    MAX_JOBS,
    accept_negative_values,
    examples,
    existing_folder_arg,
    integer_arg,
    set_handler,
    writable_folder_arg,
)
from workbench.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("study", help="list the paper studies or run one (results resume where they stopped)")
    inner = p.add_subparsers(dest="study_command", metavar="SUBCOMMAND")
    inner.required = True
    listing = inner.add_parser(
        "list", help="every study, the paper it reproduces and its claim", **examples("gnnwb study list")
    )
    set_handler(listing, list_studies)
    run = inner.add_parser(
        "run",
        help="run a study's points that have no stored result, then write its page",
        description="Each point's result is stored under a hash of its configuration, so an interrupted "
        "study resumes where it stopped and an unchanged point is never computed again. The page's verdicts "
        "go to reports/studies/NAME/verdicts.quick.json (or .full.json); under each verdict the page shows "
        "the other mode's verdict, read from the other file or, on a quick page where there is none, from "
        "the committed record studies/verdicts/NAME.full.json that --full --record writes (commit it).",
        **examples("gnnwb study run hopgnn --jobs 2", "gnnwb report"),
    )
    accept_negative_values(run)
    run.add_argument("name", help="a study name (gnnwb study list)")
    size = run.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the small grid (default)")
    size.add_argument("--full", action="store_true", help="the larger grid")
    run.add_argument(
        "--record",
        action="store_true",
        help="with --full: also write the verdicts to studies/verdicts/NAME.full.json, the committed record "
        "of full mode that quick pages (and gnnwb run) compare their verdicts with",
    )
    run.add_argument(
        "--scheduler", metavar="ADDRESS", default=None, help="a Dask scheduler (tcp://host:8786)"
    )
    run.add_argument(
        "--jobs",
        type=integer_arg(minimum=1, maximum=MAX_JOBS),
        default=None,
        help="local processes (default: one per core)",
    )
    run.add_argument(
        "--reports",
        type=writable_folder_arg("reports folder"),
        default="reports",
        help="reports folder (default: reports/)",
    )
    set_handler(run, run_one)
    report = sub.add_parser(
        "report", help="rebuild reports/index.html and every study page from stored results"
    )
    report.add_argument(
        "--reports",
        type=existing_folder_arg("reports folder"),
        default="reports",
        help="reports folder, as gnnwb run or gnnwb study run wrote it (default: reports/)",
    )
    set_handler(report, rebuild_reports)


def list_studies(args: argparse.Namespace) -> int:
    from studies.runner import load_studies

    for name, study in sorted(load_studies().items()):
        print(f"{name:<16} {study.title}\n{'':<16} {study.paper}: {study.claim}")
    return 0


def run_one(args: argparse.Namespace) -> int:
    from studies.pages import write_study_page
    from studies.runner import get_study, run_study

    study = get_study(args.name)
    if args.record and not args.full:
        # Refused before the grid runs: a quick run is no record of full mode.
        raise ConfigError("--record records full mode's verdicts; add --full")
    done = run_study(
        study, full=args.full, reports=Path(args.reports), jobs=args.jobs, scheduler=args.scheduler
    )
    page = write_study_page(done, record=args.record)
    print(f"study {study.name}: {done.computed} points computed, {done.reused} reused -> {page}")
    if args.record:
        from studies.pages import records_folder

        print(
            f"study {study.name}: full mode's verdicts recorded in {records_folder() / f'{study.name}.full.json'}"
        )
    return 0


def rebuild_reports(args: argparse.Namespace) -> int:
    from studies.pages import rebuild

    reports = Path(args.reports)
    # An empty index is no report: say so rather than write one.
    if not any((reports / "studies").glob("*/points/*.json")):
        raise ConfigError(
            f"--reports {args.reports}: no stored study results to report "
            "(gnnwb run or gnnwb study run NAME stores them)"
        )
    index = rebuild(reports)
    print(f"report: {index}")
    return 0
