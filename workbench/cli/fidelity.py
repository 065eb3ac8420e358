"""``gnnwb fidelity``: run configurations for real, calibrate on half, predict the other half.

The experiment is :func:`studies.fidelity_experiment.fidelity` (its module docstring says what
it runs and how it scores the simulator); this command reads its options from the command line,
runs it and prints its report.

Writes ``--out`` (default ``reports/fidelity/``): ``configs/``, ``runs/<config>/r<k>/``
(real run folders; a finished one is kept and not run again), ``microbench/``,
``profile.toml``, ``table.csv`` (every held-out configuration and quantity),
``summary.json``, ``report.md``, ``scatter.png`` and ``phase_errors.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.common import (
    MAX_EPOCHS,
    accept_negative_values,
    add_out_argument,
    integer_arg,
    nonempty_arg,
    parse_layer_sizes,
    set_handler,
)


def register(sub: argparse._SubParsersAction) -> None:
    # studies.fidelity_experiment loads only the standard library at import: --help stays fast.
    from studies.fidelity_experiment import GRAPH, FidelityOptions

    p = sub.add_parser(
        "fidelity",
        help="run a grid of configurations for real, calibrate on half, and score the simulator on the rest",
        description="Run configurations (model-centric and hopgnn x partitions x placements x fanouts x worker counts) "
        "for real on CPU worker processes, several times each; calibrate on one half (a checkerboard over "
        "the grid) and simulate the other; tabulate per phase and per epoch predicted against measured "
        "with relative errors beside the measurement's run-to-run spread; plot both.",
    )
    accept_negative_values(p)
    add_out_argument(
        p,
        "fidelity output folder",
        kind="folder",
        default="reports/fidelity",
        metavar="DIR",
        help="output folder (default reports/fidelity)",
    )
    p.add_argument(
        "--workers",
        default="2",
        metavar="N,N",
        help="worker counts (default 2; runs with more workers than CPU cores fit and are scored with a "
        "contention model, sim.contention)",
    )
    p.add_argument(
        "--repeats",
        type=integer_arg(minimum=1, maximum=1000),
        default=FidelityOptions.repeats,
        help="real runs per configuration (default 5: the median of 3 still moved by several percent)",
    )
    p.add_argument(
        "--epochs",
        type=integer_arg(minimum=1, maximum=MAX_EPOCHS),
        default=FidelityOptions.epochs,
        help="epochs per run; every one after the first (cold) is measured, a run's median over them one repeat "
        "(default 4: on the scheme grid, 2 gave a held-out median error of 15.2%%, 4 gave 11.9%%, in about the same time)",
    )
    p.add_argument(
        "--iterations",
        type=integer_arg(minimum=1, maximum=100_000),
        default=8,
        help="iterations per epoch (default 8)",
    )
    p.add_argument(
        "--batch-size",
        type=integer_arg(minimum=1),
        default=256,
        help="seed vertices per minibatch (default 256)",
    )
    # the former spelling, still accepted
    p.add_argument("--batch", dest="batch_size", type=integer_arg(minimum=1), help=argparse.SUPPRESS)
    p.add_argument(
        "--graph", type=nonempty_arg("--graph"), default=GRAPH, help=f"the graph (default {GRAPH})"
    )
    p.add_argument("--quick", action="store_true", help="no placements beside 'none' (half the grid)")
    p.add_argument(
        "--grid",
        choices=("paper", "schemes"),
        default="paper",
        help="paper (default): model-centric and hopgnn over partitions, placements and fanouts; schemes: "
        "every real scheme and memory policy (validate's configurations) over SBM, R-MAT and Erdos-Renyi "
        "graphs and two feature widths, plus a second held-out set of a size and width never fitted "
        "(--iterations, --batch-size and --graph do not apply: validate's configurations fix them)",
    )
    p.add_argument(
        "--no-microbench",
        dest="microbench",
        action="store_false",
        help="calibrate on the training runs alone, without the p2p and all-reduce microbenchmarks "
        "(then an exchange's fixed cost cannot be told from the network's latency)",
    )
    set_handler(p, run_fidelity)


def run_fidelity(args: argparse.Namespace) -> int:
    from studies.fidelity_experiment import FidelityOptions, fidelity
    from studies.fidelity_grid import scheme_fidelity

    workers = tuple(sorted(set(parse_layer_sizes(args.workers, "--workers"))))
    opts = FidelityOptions(
        Path(args.out),
        workers,
        args.repeats,
        args.epochs,
        args.iterations,
        args.batch_size,
        args.graph,
        args.quick,
        args.microbench,
        args.grid,
    )
    summary = scheme_fidelity(opts) if opts.grid == "schemes" else fidelity(opts)
    print((opts.out / "report.md").read_text())
    if "second" in summary:
        print("Second held-out set (a size and width never fitted):\n")
        print((opts.out / "second" / "report.md").read_text())
    print(
        f"wrote {opts.out}/: table.csv, summary.json, report.md, {', '.join(summary['images'])}, profile.toml"
    )
    return 0
