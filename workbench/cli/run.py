"""``gnnwb run``: the main job: every paper study in quick mode, then the report.

Each study stores its points' results under ``reports/studies/<name>/points/`` (so a
second run reuses them) and writes its page; ``reports/index.html`` links them all.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from workbench.cli.common import (
    MAX_JOBS,
    accept_negative_values,
    integer_arg,
    set_handler,
    writable_folder_arg,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the main job (every study, quick mode) and write reports/")
    accept_negative_values(p)
    p.add_argument(
        "--reports",
        type=writable_folder_arg("reports folder"),
        default="reports",
        help="folder for reports (default: reports/)",
    )
    p.add_argument("--full", action="store_true", help="the studies' larger grids")
    p.add_argument(
        "--jobs",
        type=integer_arg(minimum=1, maximum=MAX_JOBS),
        default=None,
        help="local processes (default: one per core)",
    )
    p.add_argument("--scheduler", metavar="ADDRESS", default=None, help="a Dask scheduler (tcp://host:8786)")
    p.add_argument("--only", default=None, help="comma-separated study names (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    set_handler(p, _run)


def _run(args: argparse.Namespace) -> int:
    from studies.pages import write_study_page
    from studies.report import update_index
    from studies.runner import get_study, load_studies, run_study

    names = [n.strip() for n in args.only.split(",")] if args.only is not None else sorted(load_studies())
    studies = [get_study(n) for n in names]
    reports = Path(args.reports)
    t0 = time.perf_counter()
    lines = []
    for study in studies:
        start = time.perf_counter()
        done = run_study(
            study,
            full=args.full,
            reports=reports,
            jobs=args.jobs,
            scheduler=args.scheduler,
            progress=not args.quiet,
        )
        page = write_study_page(done)
        lines.append(
            f"{study.name:<15} {len(done.results):>4} points ({done.computed} computed) "
            f"{time.perf_counter() - start:7.1f} s  {page}"
        )
    index = update_index(reports)
    print("\n".join(lines))
    print(f"report: {index} ({time.perf_counter() - t0:.0f} s)")
    return 0
