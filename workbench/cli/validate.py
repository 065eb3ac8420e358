"""``gnnwb validate --device cpu|cuda [--out DIR]``: validate the workbench on this machine.

The microbenchmarks, every scheme that runs for real on one worker and on all (gloo between
CPU worker processes, NCCL between GPUs), calibration on half of those runs, the fidelity of
the other half and a summary page: :mod:`studies.validate` (its docstring says what each step
does). This command checks the options, runs it, shows each step as it goes and prints what it
found. Exit 0 when everything passed, 1 when a run or a step failed (the summary names it), 2
for options it refuses before any work.

Writes ``--out`` (default ``reports/traces/<device>/``: ``cpu`` or the GPU's model): small
enough to commit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.common import add_out_argument, examples, set_handler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="validate the workbench on this machine: microbenchmarks, every real scheme, calibration, fidelity",
        description="What a machine runs first: the microbenchmarks, every scheme that runs for real on one "
        "worker and on all (--device cpu: 2 worker processes over gloo; --device cuda: every GPU, NCCL), "
        "calibration on half of those runs and the simulator's fidelity on the other half, and a summary page "
        "(index.html, summary.json) with the traces and the profile, small enough to commit. About 2 minutes "
        "on 2 CPU cores.",
        **examples("gnnwb validate --device cpu --out validate-cpu"),
    )
    p.add_argument(
        "--device",
        required=True,
        choices=("cpu", "cuda"),
        help="cpu: worker processes over gloo (what a machine without GPUs can check); cuda: every GPU, NCCL",
    )
    add_out_argument(
        p,
        "validation output folder",
        kind="folder",
        metavar="DIR",
        help="output folder (default reports/traces/<device>/: cpu, or the GPU model such as "
        "nvidia-h100-80gb-hbm3)",
    )
    p.add_argument(
        "--schemes",
        metavar="NAMES",
        help="comma-separated real schemes to validate (default: every scheme that runs for real)",
    )
    p.add_argument(
        "--workers",
        metavar="COUNTS",
        help="comma-separated worker counts (default: 1 and all: 2 CPU processes, or every GPU)",
    )
    p.add_argument(
        "--graph",
        metavar="SPEC",
        help="the graph every case runs on (default: the small SBM of studies/validate.py GRAPH; "
        "roc-fullgraph's memory-policy arenas and NeuGraph's chunk budget, sized for that one, grow "
        "with a larger graph's feature and edge bytes)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a run that takes longer and record it as failed (default 600; a lent GPU's "
        "minutes are few)",
    )
    set_handler(p, run_validate)


def _names(text: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None


def _counts(text: str | None) -> tuple[int, ...] | None:
    from workbench.errors import ConfigError

    names = _names(text)
    if names is None:
        return None
    try:
        return tuple(int(x) for x in names)
    except ValueError:
        raise ConfigError(f"--workers {text!r}: give worker counts as integers, such as 1,2") from None


def run_validate(args: argparse.Namespace) -> int:
    from studies.validate import GRAPH, TIME_LIMIT_S, ValidateOptions, validate

    opts = ValidateOptions(
        args.device,
        Path(args.out) if args.out else None,
        schemes=_names(args.schemes),
        workers=_counts(args.workers),
        time_limit_s=TIME_LIMIT_S if args.time_limit is None else args.time_limit,
        graph=args.graph or GRAPH,
    )
    summary = validate(opts)
    print(summary["cuda_branch"]["statement"])
    if summary["passed"]:
        print(f"validate passed: {len(summary['runs'])} real runs, calibration and fidelity ran")
        return 0
    print(f"validate FAILED: {len(summary['failures'])} problem(s):")
    for line in summary["failures"]:
        print(f"  {line}")
    return 1
