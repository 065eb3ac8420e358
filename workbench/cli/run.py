"""``gnnwb run``: the main job.

Runs every study in quick mode and writes its report under ``reports/``. Until the
paper studies land, that is the quick simulation demo (``studies/demo.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the main job (all studies, quick mode) and write reports/")
    p.add_argument("--reports", default="reports", help="folder for reports (default: reports/)")
    p.add_argument("--seed", type=int, default=0, help="seed for every random decision")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from studies.demo import DemoSettings, run_demo

    table = run_demo(Path(args.reports) / "demo", DemoSettings(seed=args.seed), progress=not args.quiet)
    cols = ["hardware", "placement", "per_iteration_ms", "feature_bytes_moved"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"report: {Path(args.reports) / 'demo' / 'index.html'}")
    return 0
