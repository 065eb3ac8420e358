"""``gnnwb plan CONFIG.toml -o plan.json``: build the iteration plan of a run configuration."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.common import add_out_argument, examples, existing_file_arg, set_handler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="build the plan of a run configuration (TOML) and write it as JSON",
        description="Load the graph, partition, place, sample an epoch (cached on disk) and let the "
        "execution scheme build the plan; write it as JSON (gnnwb sim PLAN.json runs it).",
        **examples(
            "gnnwb plan examples/configs/roc-sbm-real.toml -o plan.json",
            "gnnwb sim plan.json",
        ),
    )
    p.add_argument(
        "config",
        metavar="CONFIG.toml",
        type=existing_file_arg("run configuration"),
        help="run configuration (see examples/configs/)",
    )
    add_out_argument(p, "plan file", metavar="PLAN.json", required=True, help="where to write the plan")
    p.add_argument("--no-sample-cache", action="store_true", help="sample again instead of using the cache")
    set_handler(p, run_plan)


def run_plan(args: argparse.Namespace) -> int:
    from workbench.config import load_config
    from workbench.run import prepare_run

    config = load_config(args.config)
    prepared = prepare_run(config, progress=True, sample_cache=not args.no_sample_cache)
    plan = prepared.plan(progress=True)
    plan.meta.setdefault("hardware", prepared.cluster.name)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # checked writable as it was parsed
    plan.save(args.out)
    kinds = {k: sum(t.kind == k for t in plan.tasks) for k in ("compute", "transfer", "collective")}
    print(
        f"plan {plan.name!r}: {len(plan.tasks):,} tasks ({kinds['compute']:,} compute, "
        f"{kinds['transfer']:,} transfer, {kinds['collective']:,} collective), "
        f"{prepared.inputs.num_iterations} iterations x {prepared.inputs.num_workers} workers -> {args.out}"
    )
    return 0
