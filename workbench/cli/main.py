"""``gnnwb``: the workbench's command line.

Each subcommand lives in its own module under ``workbench/cli/`` and exposes
``register(subparsers)``; heavy imports happen inside the handlers so ``--help``
stays fast. User errors (:class:`~workbench.errors.WorkbenchError`) print one line
and exit 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from workbench.errors import WorkbenchError

# Order is the order of ``gnnwb --help``.
COMMAND_MODULES = (
    "run",
    "datasets",
    "hardware",
    "strategies",
    "partition",
    "place",
    "sample",
    "plan",
    "sim",
    "calibrate",
    "fidelity",
    "realrun",
    "trace",
    "microbench",
    "study",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnnwb",
        description="GNN systems workbench: compare partitioners, placements, samplers and execution "
        "schemes on simulated and real clusters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"workbench.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
    except WorkbenchError as exc:
        print(f"gnnwb {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gnnwb {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
