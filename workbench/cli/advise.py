"""``gnnwb advise``: the best strategy combination for a graph and a cluster, with its interval.

Searches every registered combination of execution scheme, partitioner, placement and cache
capacity, memory policy and batch size (or the lists given) by simulation with successive halving
over epoch prefixes (:mod:`studies.advisor.search`), ranks them by time to train ``--epochs``
epochs including preprocessing, and writes ``--out`` (default ``reports/advise/``):
``advice.csv`` (every candidate, skipped ones with why), ``index.html`` with the ranking, the
Pareto front of time, peak GPU memory and network bytes, the top candidates' breakdown, the
winner's timeline (``winner.perfetto.json``) and, with ``--confirm K``, the top ``K`` run for
real beside their predictions.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from workbench.cli.common import (
    MAX_EPOCHS,
    add_out_argument,
    examples,
    integer_arg,
    nonempty_arg,
    number_arg,
    parse_layer_sizes,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError

BUDGET_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "advise",
        help="search strategy combinations by simulation for the fastest training on a graph and cluster",
        description="Search every registered combination of execution scheme, partitioner, placement and cache "
        "capacity, memory policy and batch size (or the lists given) by simulation, spending it where it "
        "matters (successive halving over epoch prefixes, partitions and sampled epochs shared through the "
        "caches); rank by time to train --epochs epochs including preprocessing, with an interval from the "
        "per-iteration variation and the profile's measured fidelity error; say which candidates are tied. "
        "Not searched: the roc partitioner (learns online), the fifo cache (dynamic), samplers other than "
        "--sampler (they change what is trained).",
        **examples(
            "gnnwb advise --graph rmat:n=5000,m=50000,feat=64 --hardware hopgnn-4xa100-10gbe --batch-sizes 256 "
            "--schemes model-centric,p3,hopgnn --partitioners random,metis --placements none,song-jiang",
            "gnnwb advise --graph sbm:n=4000,blocks=8,deg=8,feat=32 --hardware v100x8-nvswitch --workers 4 "
            "--schemes model-centric,roc-fullgraph --partitioners metis,equal-edge --placements none,degree "
            "--capacities 10%% --batch-sizes 128,512 --epochs 20 -o reports/advise-sbm",
        ),
    )
    _add_search_arguments(p)
    _add_space_arguments(p)
    add_out_argument(
        p,
        "advice folder",
        kind="folder",
        default="reports/advise",
        metavar="DIR",
        help="output folder (default reports/advise)",
    )
    set_handler(p, _advise)


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--graph",
        required=True,
        type=nonempty_arg("--graph"),
        help="a preset, a generator spec or a graph file",
    )
    p.add_argument("--scale", type=number_arg(positive=True), help="a preset graph's scale")
    p.add_argument(
        "--hardware", required=True, type=nonempty_arg("--hardware"), help="a hardware preset or TOML file"
    )
    p.add_argument("--profile", help="a calibrated profile (gnnwb calibrate) to simulate with")
    p.add_argument("--model", default="sage", help="GNN model (default sage)")
    p.add_argument("--hidden", type=integer_arg(minimum=1), default=256, help="hidden width (default 256)")
    p.add_argument("--fanouts", default="10,5", help="sampler fanouts, input layer first (default 10,5)")
    p.add_argument("--sampler", default="neighbor", help="minibatch sampler (default neighbor)")
    p.add_argument(
        "--workers", type=integer_arg(minimum=1), help="workers (default: every GPU of the cluster)"
    )
    p.add_argument(
        "--epochs",
        type=integer_arg(minimum=1, maximum=MAX_EPOCHS),
        default=10,
        help="epochs to train (default 10)",
    )
    p.add_argument("--budget", default="10m", help="wall time for the search: 30s, 10m, 1h (default 10m)")
    p.add_argument(
        "--confirm",
        type=integer_arg(minimum=0, maximum=20),
        default=0,
        metavar="K",
        help="run the top K for real",
    )
    p.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda"), help="where --confirm runs (default cpu)"
    )
    p.add_argument(
        "--top",
        type=integer_arg(minimum=1, maximum=50),
        default=5,
        help="candidates whose order is refined (default 5)",
    )
    p.add_argument(
        "--fidelity-error", type=number_arg(minimum=0.0), help="relative epoch error to widen intervals by"
    )
    p.add_argument(
        "--exhaustive", action="store_true", help="simulate every candidate's whole epoch instead (the check)"
    )


def _add_space_arguments(p: argparse.ArgumentParser) -> None:
    for flag, what in (
        ("--schemes", "execution schemes"),
        ("--partitioners", "partitioners"),
        ("--placements", "placements"),
        ("--capacities", "cache capacities, e.g. 5%%,20%%"),
        ("--memory-policies", "roc-fullgraph memory policies"),
    ):
        p.add_argument(flag, help=f"only these {what}, comma-separated (default: every registered one)")
    p.add_argument(
        "--batch-sizes", default="1024", help="batch sizes to search, comma-separated (default 1024)"
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="simulate the candidates on a Dask cluster (tcp://host:8786); preprocessing is still timed here",
    )
    p.add_argument("--seed", type=seed_arg(), default=0, help="random seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")


def parse_budget(text: str) -> float:
    """Seconds from ``30s``, ``10m``, ``1.5h`` or a bare number of seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"--budget {text!r}: expected a positive duration like 30s, 10m or 1h")
    return float(m.group(1)) * BUDGET_UNITS[m.group(2) or "s"]


def _names(text: str | None, flag: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(x.strip() for x in text.split(","))
    if not text.strip() or "" in names:
        raise ConfigError(f"{flag} {text!r}: expected names separated by commas, with no empty entry")
    return names


def _advise(args: argparse.Namespace) -> int:
    from studies.advisor.run import Request, advise
    from studies.advisor.space import Base, Restrictions

    budget = parse_budget(args.budget)
    request = Request(
        base=Base(
            graph=args.graph,
            graph_params={"scale": args.scale} if args.scale is not None else {},
            hardware=args.hardware,
            profile=args.profile,
            model=args.model,
            hidden=args.hidden,
            fanouts=tuple(parse_layer_sizes(args.fanouts, "--fanouts")),
            sampler=args.sampler,
            workers=args.workers,
            seed=args.seed,
        ),
        epochs=args.epochs,
        budget_s=budget,
        confirm=args.confirm,
        device=args.device,
        top=args.top,
        fidelity_error=args.fidelity_error,
        exhaustive=args.exhaustive,
        scheduler=args.scheduler,
        restrictions=Restrictions(
            schemes=_names(args.schemes, "--schemes"),
            partitioners=_names(args.partitioners, "--partitioners"),
            placements=_names(args.placements, "--placements"),
            capacities=_names(args.capacities, "--capacities"),
            memory_policies=_names(args.memory_policies, "--memory-policies"),
            batch_sizes=tuple(parse_layer_sizes(args.batch_sizes, "--batch-sizes")),
        ),
        command="gnnwb " + " ".join(sys.argv[1:]),
    )
    t0 = time.perf_counter()
    outcome: Any = advise(request, Path(args.out), progress=not args.no_progress)
    print(outcome.text)
    print(f"wrote {args.out}/: advice.csv, index.html ({time.perf_counter() - t0:.1f} s)")
    return 0
