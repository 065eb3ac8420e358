"""``gnnwb realrun CONFIG.toml --workers N --device cpu|cuda``: train a configuration for real.

One process per worker with torch.distributed between them (gloo on CPU, NCCL on GPUs);
writes the run's folder (``--out``, default ``reports/runs/<name>-real/``): the trace
(the simulator's schema, rows named by the plan's tasks), per-epoch results (time,
bytes by phase measured and planned, loss, accuracy), ``run.json`` and the configuration.
See :mod:`realrun.launcher` for failure handling and the torchrun command across machines,
and :mod:`realrun.network` for ``--emulate-network`` (namespaces, tc-shaped links).
The executor is imported only when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import (
    MAX_EPOCHS,
    MAX_JOBS,
    accept_negative_values,
    add_out_argument,
    examples,
    existing_file_arg,
    integer_arg,
    number_arg,
    port_arg,
    set_handler,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "realrun",
        help="train a run configuration for real: one process per worker, torch.distributed",
        description="Train CONFIG.toml for real with one process per worker (gloo on CPU, NCCL on "
        "GPUs) on the same minibatches as its plan, and write a trace and per-epoch results that "
        "read like a simulated run's. A worker that dies or hangs ends the run with an error that "
        "names it; the rows written so far are kept.",
        **examples("gnnwb realrun examples/configs/roc-sbm-real.toml -o real-run"),
    )
    accept_negative_values(p)
    _add_what_runs(p)
    _add_limits(p)
    _add_training_options(p)
    _add_network_emulation(p)
    p.add_argument(
        "--online",
        action="store_true",
        help="ROC's online loop (roc-fullgraph): one launch per iteration, the partitioner refit to the "
        "layer times the workers measured before the next iteration is planned, the model carried over",
    )
    set_handler(p, run_realrun)


def _add_what_runs(p: argparse.ArgumentParser) -> None:
    """The configuration, its workers and device, where the run writes and for how many epochs."""
    p.add_argument(
        "config",
        metavar="CONFIG.toml",
        type=existing_file_arg("run configuration"),
        help="a run configuration (examples/configs/)",
    )
    p.add_argument(
        "--workers",
        type=integer_arg(minimum=1, maximum=MAX_JOBS),
        default=None,
        metavar="N",
        help="worker processes, one per GPU of the configured cluster in its order "
        "(default: [training] workers, else every GPU)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the workers train: cpu (gloo) or cuda (one GPU per worker, NCCL)",
    )
    add_out_argument(
        p,
        "run folder",
        kind="folder",
        metavar="DIR",
        help="the run's folder (default reports/runs/<name>-real/)",
    )
    p.add_argument(
        "--epochs",
        type=integer_arg(minimum=1, maximum=MAX_EPOCHS),
        default=None,
        help="epochs over the same sampled minibatches (default: [training] epochs)",
    )


def _add_limits(p: argparse.ArgumentParser) -> None:
    """How long the run and a collective may take, and where the workers meet."""
    p.add_argument(
        "--time-limit",
        type=number_arg(positive=True),
        default=None,
        metavar="S",
        help="seconds the whole run may take before it is stopped (default 3600)",
    )
    p.add_argument(
        "--collective-timeout",
        type=number_arg(positive=True),
        default=None,
        metavar="S",
        help="seconds a worker may wait for the others in a collective before the run is stopped "
        "and the worker they wait for is named (default 120)",
    )
    p.add_argument(
        "--port",
        type=port_arg(),
        default=0,
        help="TCP port on 127.0.0.1 for the workers' rendezvous (default: a free one)",
    )


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """Evaluation and which layers train."""
    p.add_argument(
        "--no-eval", action="store_true", help="skip the test accuracy evaluation after each epoch"
    )
    p.add_argument(
        "--layers",
        choices=("auto", "dgl", "torch"),
        default="auto",
        help="the layers that train: DGL's (dgl.nn on DGL blocks; its wheel runs on the CPU only) or the "
        "plain-PyTorch twins that match them (any device); auto (default): DGL's where DGL runs",
    )


def _add_network_emulation(p: argparse.ArgumentParser) -> None:
    """The emulated network between the workers (network namespaces shaped with tc)."""
    p.add_argument(
        "--emulate-network",
        action="store_true",
        help="run every worker in its own network namespace, joined through a bridge by veth links "
        "shaped with tc to the cluster's network link rate (needs root on Linux, --device cpu; "
        "everything is removed when the run ends; tc netem is missing here, so no latency is added)",
    )
    p.add_argument(
        "--link-bandwidth",
        metavar="RATE",
        default=None,
        help="with --emulate-network: each link's rate, e.g. 100Mbit, 1Gbit, 12.5MB/s "
        "(default: the configured cluster's network link)",
    )


def run_realrun(args: argparse.Namespace) -> int:
    from realrun.launcher import (
        DEFAULT_COLLECTIVE_TIMEOUT,
        DEFAULT_TIME_LIMIT,
        launch,
        prepare_real_run,
    )
    from workbench.errors import ConfigError
    from workbench.trace import phase_table, read_trace

    if args.online and args.epochs is not None:
        raise ConfigError("--online trains the configuration's iterations, one launch each; drop --epochs")
    link_bandwidth = None
    if args.link_bandwidth is not None:
        from realrun.network import parse_link_bandwidth

        if not args.emulate_network:
            raise ConfigError("--link-bandwidth applies only with --emulate-network")
        link_bandwidth = parse_link_bandwidth(args.link_bandwidth)
    if args.emulate_network:
        from realrun.network import check_available

        check_available()  # before the run is prepared: say at once why it cannot run here
    prepared, plan, config = prepare_real_run(args.config, args.workers, args.device, progress=True)
    inputs = prepared.inputs
    print(
        f"{config.name}: {prepared.scheme.registered_name} for real on {args.device}, {inputs.graph.name} "
        f"({inputs.graph.num_nodes:,} vertices), {inputs.num_workers} workers x {inputs.num_iterations} "
        f"iterations, {len(plan.tasks):,} planned tasks",
        flush=True,
    )
    options = {  # every launch's, the online loop's included
        "device": args.device,
        "evaluate": not args.no_eval,
        "time_limit": args.time_limit or DEFAULT_TIME_LIMIT,
        "collective_timeout": args.collective_timeout or DEFAULT_COLLECTIVE_TIMEOUT,
        "port": args.port,
        "emulate_network": args.emulate_network,
        "link_bandwidth_bps": link_bandwidth,
        "layers": args.layers,
    }
    if args.online:
        return _run_online(args, prepared, config, options)
    summary = launch(prepared, plan, args.config, out=args.out, epochs=args.epochs, **options)
    for line in phase_table(read_trace(summary.out / "trace.parquet")):
        print(line)
    print(summary.describe())
    return 0


def _run_online(args: argparse.Namespace, prepared: Any, config: Any, options: dict[str, Any]) -> int:
    from pathlib import Path

    from realrun.launcher import default_out
    from realrun.online import run_online

    out = Path(args.out) if args.out else default_out(config)
    done = run_online(prepared, args.config, out, **options)
    for record, summary in zip(done.records, done.summaries, strict=True):
        result = summary.results[-1]
        bounds = " ".join(map(str, record.boundaries)) or "not contiguous"
        print(
            f"iteration {record.iteration}: {record.seconds * 1e3:.1f} ms, loss {result['loss']:.4f}, "
            f"parts {bounds}, bytes match plan: {result['bytes_match_plan']}"
        )
    test = done.summaries[-1].results[-1].get("test_acc") if done.summaries else None
    if test is not None and test == test:
        print(f"test accuracy after the last iteration: {test:.3f}")
    print(f"wrote {out}/: online.csv, trace.parquet, one folder per iteration (i0/, i1/, ...)")
    return 0
