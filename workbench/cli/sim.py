"""``gnnwb sim PLAN.json --hardware PRESET_OR_TOML`` or ``gnnwb sim CONFIG.toml``: simulate.

With a plan file, simulates that plan. With a run configuration, builds its plan
first (``workbench.run``: graph, partition, placement, a sampled epoch, the execution
scheme) and writes the run's folder (``--out``, default ``reports/runs/<name>/``):
``trace.parquet``, a one-row ``results.csv`` (epoch time, busy seconds and bytes per
phase) and a copy of the configuration.

Prints per-phase busy and queued time, bytes, each GPU's memory peak and the makespan;
``--trace out.parquet`` writes the trace. A plan that overflows a memory at some moment
is reported (the memory, the moment, the peak, the tensors live then) and writes no
trace. ``--seed`` and ``--jitter`` control the noise on compute durations. Once
execution schemes exist, the same command will also build plans from a run configuration.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from workbench.cli.common import (
    accept_negative_values,
    add_out_argument,
    examples,
    existing_file_arg,
    integer_arg,
    nonempty_arg,
    number_arg,
    preset_or_file_arg,
    seed_arg,
    set_handler,
    writable_file_arg,
)
from workbench.errors import PlanError

# A mean-one lognormal factor with sigma above this has its median below exp(-2) = 14% of
# the mean: every task all but free and a rare one enormous, which is no model of noise.
MAX_JITTER = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate an iteration plan (JSON) on a cluster and print per-phase times",
        description="Run a plan file on a simulated cluster: per-phase busy, queued and span time, "
        "bytes moved, each GPU's memory peak and the makespan. A plan that does not fit in some "
        "memory at some moment is reported and writes no trace.",
        **examples(
            "gnnwb sim examples/plans/shared_uplink.json --trace out.parquet",
            "gnnwb sim examples/plans/chain.json --jitter 0.1 --seed 3",
            "gnnwb sim examples/configs/roc-sbm-real.toml -o run",
        ),
    )
    accept_negative_values(p)
    p.add_argument(
        "plan",
        metavar="PLAN.json|CONFIG.toml",
        type=existing_file_arg("plan file or run configuration"),
        help="a plan file (examples/plans/) or a run configuration (examples/configs/)",
    )
    add_out_argument(
        p,
        "run folder",
        kind="folder",
        metavar="DIR",
        help="with a configuration: the run's folder (default reports/runs/<config name>/)",
    )
    p.add_argument(
        "--hardware",
        metavar="PRESET_OR_TOML",
        type=preset_or_file_arg("hardware file"),
        default=None,
        help="cluster preset name, hardware TOML file or calibrated profile (gnnwb calibrate; its cost model "
        "too) (default: the plan's meta.hardware)",
    )
    p.add_argument(
        "--trace",
        metavar="OUT.parquet",
        type=writable_file_arg("trace file"),
        default=None,
        help="write the trace here (plan files; configs use --out)",
    )
    p.add_argument(
        "--seed",
        type=seed_arg(),
        default=0,
        help="seed of the jitter draws (default 0): same seed, same trace",
    )
    p.add_argument(
        "--jitter",
        type=number_arg(minimum=0, maximum=MAX_JITTER),
        default=0.0,
        metavar="SIGMA",
        help="relative noise on compute durations: each is scaled by a mean-one lognormal factor "
        f"with this sigma, 0 to {MAX_JITTER:g} (default 0: none)",
    )
    p.add_argument(
        "--run-id",
        type=nonempty_arg("the run id"),
        default=None,
        help="run id in the trace (default: the plan's name)",
    )
    p.add_argument(
        "--sampled",
        type=integer_arg(minimum=16),
        default=None,
        metavar="ITERATIONS",
        help="with a configuration: estimate the epoch from about this many of its iterations, in blocks "
        "of 4 stratified by planned work, with a 95%% interval (sim/sampled.py); writes sampled.json, no "
        "trace (default: simulate every iteration)",
    )
    p.add_argument(
        "--cost-model",
        metavar="JSON",
        type=existing_file_arg("cost model file"),
        default=None,
        help="a saved LinearCostModel",
    )
    set_handler(p, run_sim)


def run_sim(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sim import LinearCostModel, simulate
    from sim.calibrate import load_hardware_or_profile
    from workbench.plan import Plan
    from workbench.trace import write_trace

    if args.plan.endswith(".toml"):
        return _run_config(args)
    if args.out:
        raise PlanError("--out is the folder of a configuration's run; with a plan file, give --trace")
    plan = Plan.load(args.plan)
    hardware = args.hardware or plan.meta.get("hardware")
    if not hardware:
        raise PlanError(f"{args.plan}: no --hardware given and the plan has no meta.hardware")
    if args.hardware is None and str(hardware) not in _preset_names():
        # a hardware file named in the plan is relative to the plan's folder
        candidate = Path(args.plan).parent / str(hardware)
        if candidate.exists():
            hardware = str(candidate)
    # A calibrated profile (gnnwb calibrate) brings its cost model; --cost-model overrides it.
    cluster, cost_model = load_hardware_or_profile(hardware)
    if args.cost_model:
        cost_model = LinearCostModel.from_json(Path(args.cost_model))
    try:
        result = simulate(
            plan,
            cluster,
            cost_model=cost_model,
            run_id=args.run_id or plan.name,
            seed=args.seed,
            jitter=args.jitter,
        )
    except PlanError as exc:
        # Which file on which hardware: a plan that fits one cluster need not fit the one given.
        raise type(exc)(f"{args.plan} on {hardware}: {exc}") from None
    print(f"plan {plan.name!r} on {cluster.name}: {len(plan.tasks)} tasks")
    _print_result(result.trace, result.memory, cluster)
    print(f"makespan: {result.makespan * 1e3:.6f} ms ({result.makespan:.9g} s)")
    if args.trace:
        out = write_trace(result.trace, args.trace)
        print(f"trace: {out} ({len(result.trace)} rows)")
    return 0


def _print_result(trace: Any, memory: dict[str, int], cluster: Any) -> None:
    """The per-phase table and each GPU's memory peak."""
    from sim.memory import capacities, format_bytes
    from workbench.trace import phase_table

    for line in phase_table(trace):
        print(line)
    caps = capacities(cluster)
    for node in cluster.memory_nodes():
        if node in memory and ".gpu" in node:
            print(f"memory peak {node}: {format_bytes(memory[node])} of {format_bytes(caps[node])}")


def _run_config(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    import pandas as pd

    from sim import LinearCostModel, simulate
    from sim.calibrate import prepared_cost_model
    from workbench.config import load_config
    from workbench.run import prepare_run, results_row
    from workbench.trace import write_trace

    if args.hardware or args.trace:
        raise PlanError(
            "--hardware and --trace are for plan files; a configuration names its hardware "
            "and writes its trace under --out"
        )
    config = load_config(args.plan)
    prepared = prepare_run(config, progress=True)
    # The configuration's calibrated profile ([hardware] profile) brings its cost model; --cost-model overrides it.
    cost_model = (
        LinearCostModel.from_json(Path(args.cost_model)) if args.cost_model else prepared_cost_model(prepared)
    )
    results = []

    def run(plan: Any) -> Any:
        with simulation_progress(len(plan.tasks)) as on_task_end:
            result = simulate(
                plan,
                prepared.cluster,
                cost_model=cost_model,
                run_id=args.run_id or config.name,
                seed=args.seed,
                jitter=args.jitter,
                on_task_end=on_task_end,
            )
        results.append(result)
        return result.trace

    if args.sampled is not None:
        return _sampled(args, prepared, cost_model)
    trace, tasks = _simulate_epoch(prepared, run, results)
    inputs = prepared.inputs
    epoch = float(trace["end"].max()) if len(trace) else 0.0
    memory: dict[str, int] = {}
    for result in results:
        for node, peak in result.memory.items():
            memory[node] = max(memory.get(node, 0), peak)
    print(
        f"{config.name}: {prepared.scheme.registered_name} on {prepared.cluster.name}, {inputs.graph.name} "
        f"({inputs.graph.num_nodes:,} vertices), {inputs.num_workers} workers x {inputs.num_iterations} "
        f"iterations, {tasks:,} tasks"
    )
    _print_result(trace, memory, prepared.cluster)
    if getattr(prepared.scheme, "policy", None) is not None:
        _print_memory_policies(prepared)
    print(
        f"epoch time: {epoch * 1e3:.3f} ms ({epoch / max(inputs.num_iterations, 1) * 1e3:.3f} ms per iteration; "
        "every iteration simulated, so no sampling interval: --sampled N estimates from N of them)"
    )
    out = Path(args.out) if args.out else Path("reports") / "runs" / config.name
    out.mkdir(parents=True, exist_ok=True)
    write_trace(trace, out / "trace.parquet")
    pd.DataFrame([results_row(prepared, trace)]).to_csv(out / "results.csv", index=False)
    shutil.copyfile(args.plan, out / "config.toml")
    print(f"wrote {out}/: trace.parquet ({len(trace):,} rows), results.csv, config.toml")
    return 0


def _sampled(args: argparse.Namespace, prepared: Any, cost_model: Any) -> int:
    """The epoch estimated from a sample of its iterations (``--sampled``), written as sampled.json."""
    import json
    import shutil
    from dataclasses import asdict
    from pathlib import Path

    from sim.sampled import sampled_epoch, simulator

    config = prepared.config
    if prepared.scheme.plans_per_iteration:
        raise PlanError(
            f"--sampled: {prepared.scheme.registered_name} plans one iteration at a time as it learns "
            "(ROC's online loop), so there is no epoch plan to sample; simulate it whole"
        )
    plan = prepared.plan(progress=True)
    estimate = sampled_epoch(
        plan, simulator(prepared.cluster, cost_model, args.seed), samples=args.sampled, seed=args.seed
    )
    print(
        f"{config.name}: {prepared.scheme.registered_name} on {prepared.cluster.name}, {len(plan.tasks):,} tasks"
    )
    print(estimate.text())
    out = Path(args.out) if args.out else Path("reports") / "runs" / config.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "sampled.json").write_text(json.dumps(asdict(estimate), indent=1) + "\n")
    shutil.copyfile(args.plan, out / "config.toml")
    print(f"wrote {out}/: sampled.json, config.toml (no trace: the epoch was sampled, not simulated whole)")
    return 0


def _simulate_epoch(prepared: Any, run: Callable[[Any], Any], results: list[Any]) -> tuple[Any, int]:
    """The epoch's trace, ``run`` simulating each plan (and appending to ``results``), and its task count."""
    if not prepared.scheme.plans_per_iteration:
        plan = prepared.plan(progress=True)
        return run(plan), len(plan.tasks)
    # A scheme that learns while it trains (ROC): plan, simulate and measure one iteration at a
    # time, so its partitioner sees each iteration's times before the next.
    from workbench.online import train_online

    records, trace = train_online(prepared, run)
    for record in records:
        print(
            f"iteration {record.iteration}: {record.seconds * 1e3:.3f} ms, part boundaries "
            f"{list(record.boundaries) or '(not contiguous)'}"
        )
    return trace, sum(len(r.trace) for r in results)


# A plan this large shows a bar while it is simulated (a 128-GPU epoch takes minutes; the hook
# costs well under a microsecond a task).
PROGRESS_TASKS = 10_000


@contextmanager
def simulation_progress(tasks: int) -> Iterator[Callable[..., None] | None]:
    """A task-end hook that advances a bar on stderr, for a plan of at least ``PROGRESS_TASKS``
    tasks (else none: the hook is a call per task). The bar moves in steps of 1% of the tasks."""
    if tasks < PROGRESS_TASKS:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=tasks, desc="simulating", unit="task", file=sys.stderr, leave=False)
    step = max(1, tasks // 100)
    ended = [0]

    def on_task_end(task: Any, ready: float, start: float, end: float) -> None:
        ended[0] += 1
        if ended[0] % step == 0:
            bar.update(step)

    try:
        yield on_task_end
    finally:
        bar.close()


def _print_memory_policies(prepared: Any) -> None:
    """ROC Fig. 10: what each memory policy would move for the same parts at the same capacity."""
    print("memory policies, one training step over all parts (CPU-GPU bytes):")
    print(f"  {'policy':<10} {'loads (h2d)':>16} {'write-backs (d2h)':>18} {'GPU peak':>14}")
    for row in prepared.scheme.policy_volumes(prepared.inputs):
        print(
            f"  {row['policy']:<10} {row['h2d_bytes']:>16,} {row['d2h_bytes']:>18,} {row['peak_bytes']:>14,}"
        )


def _preset_names() -> set[str]:
    from workbench.hardware import PRESETS

    return set(PRESETS)
