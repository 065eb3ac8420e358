"""``gnnwb``: the workbench's command line.

Each subcommand lives in its own module under ``workbench/cli/`` and exposes
``register(subparsers)``; heavy imports happen inside the handlers so ``--help``
stays fast. User errors (:class:`~workbench.errors.WorkbenchError`) print one line
and exit 2; anything else is a bug and keeps its traceback. Ctrl-C prints one line and
exits 130; in the commands that run study points (:data:`INTERRUPTIBLE`), SIGTERM too
(exit 143), after stopping their worker processes, with what was kept and how to resume.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import Any

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
    "validate",
    "study",
    "advise",
)

# Commands that run study points in a process pool: within them SIGINT and SIGTERM raise
# studies.runner.Interrupted, so the pool's workers are stopped instead of orphaned.
INTERRUPTIBLE = ("run", "study")


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
        with _interruptible(args):
            result = args.handler(args)
    except WorkbenchError as exc:
        print(f"gnnwb {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # Ctrl-C, or studies.runner.Interrupted: the signal (SIGINT or SIGTERM) and what was kept.
        signum = getattr(exc, "signum", signal.SIGINT)
        detail = getattr(exc, "detail", "")
        name = signal.Signals(signum).name
        print(
            f"gnnwb {args.command}: interrupted ({name})" + (f": {detail}" if detail else ""), file=sys.stderr
        )
        return 128 + signum
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        # A machine installed without the extra "cpu" (its own CUDA torch expected): real runs need one.
        print(
            f"gnnwb {args.command}: error: torch is not installed; install the project's CPU build with "
            "pip install -e '.[cpu]', or a CUDA build of torch",
            file=sys.stderr,
        )
        return 2
    return int(result or 0)


def _interruptible(args: argparse.Namespace) -> Any:
    """studies.runner.interruptible() around a study command, else nothing."""
    if args.command not in INTERRUPTIBLE:
        return contextlib.nullcontext()
    from studies.runner import interruptible

    reports = getattr(args, "reports", "reports")
    return interruptible(
        f"finished points are kept under {reports}/studies; run the same command again to resume"
    )


if __name__ == "__main__":
    sys.exit(main())
