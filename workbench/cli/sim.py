"""``gnnwb sim PLAN.json --hardware PRESET_OR_TOML``: simulate an iteration plan.

Prints per-phase busy and queued time, bytes, each GPU's memory peak and the makespan;
``--trace out.parquet`` writes the trace. A plan that overflows a memory at some moment
is reported (the memory, the moment, the peak, the tensors live then) and writes no
trace. ``--seed`` and ``--jitter`` control the noise on compute durations. Once
execution schemes exist, the same command will also build plans from a run configuration.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate an iteration plan (JSON) on a cluster and print per-phase times",
        description="Run a plan file on a simulated cluster: per-phase busy, queued and span time, "
        "bytes moved, each GPU's memory peak and the makespan. A plan that does not fit in some "
        "memory at some moment is reported and writes no trace.",
    )
    p.add_argument("plan", metavar="PLAN.json", help="plan file (see examples/plans/)")
    p.add_argument(
        "--hardware",
        metavar="PRESET_OR_TOML",
        default=None,
        help="cluster preset name or hardware TOML file (default: the plan's meta.hardware)",
    )
    p.add_argument("--trace", metavar="OUT.parquet", default=None, help="write the trace here")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the jitter draws (default 0): same seed, same trace"
    )
    p.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        metavar="SIGMA",
        help="relative noise on compute durations: each is scaled by a mean-one lognormal factor "
        "with this sigma (default 0: none)",
    )
    p.add_argument("--run-id", default=None, help="run id in the trace (default: the plan's name)")
    p.add_argument("--cost-model", metavar="JSON", default=None, help="a saved LinearCostModel")
    p.set_defaults(handler=run_sim)


def run_sim(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sim import LinearCostModel, simulate
    from sim.memory import capacities, format_bytes
    from workbench.errors import PlanError
    from workbench.hardware import load_hardware
    from workbench.plan import Plan
    from workbench.trace import phase_table, write_trace

    if not args.jitter >= 0:
        raise PlanError(f"--jitter must be a non-negative number, got {args.jitter}")
    plan = Plan.load(args.plan)
    hardware = args.hardware or plan.meta.get("hardware")
    if not hardware:
        raise PlanError(f"{args.plan}: no --hardware given and the plan has no meta.hardware")
    if args.hardware is None and str(hardware) not in _preset_names():
        # a hardware file named in the plan is relative to the plan's folder
        candidate = Path(args.plan).parent / str(hardware)
        if candidate.exists():
            hardware = str(candidate)
    cluster = load_hardware(hardware)
    cost_model = LinearCostModel.from_json(Path(args.cost_model)) if args.cost_model else None
    result = simulate(
        plan,
        cluster,
        cost_model=cost_model,
        run_id=args.run_id or plan.name,
        seed=args.seed,
        jitter=args.jitter,
    )
    print(f"plan {plan.name!r} on {cluster.name}: {len(plan.tasks)} tasks")
    for line in phase_table(result.trace):
        print(line)
    caps = capacities(cluster)
    for node in cluster.memory_nodes():
        if node in result.memory and ".gpu" in node:
            print(f"memory peak {node}: {format_bytes(result.memory[node])} of {format_bytes(caps[node])}")
    print(f"makespan: {result.makespan * 1e3:.6f} ms ({result.makespan:.9g} s)")
    if args.trace:
        out = write_trace(result.trace, args.trace)
        print(f"trace: {out} ({len(result.trace)} rows)")
    return 0


def _preset_names() -> set[str]:
    from workbench.hardware import PRESETS

    return set(PRESETS)
