"""``gnnwb microbench --device cpu|cuda [--out DIR] [--quick]``: measure what calibration needs.

Host-to-device and device-to-host copies (pageable and pinned), device-to-device copies,
feature gather (``index_select``), sparse aggregation over a sampled block, and all-reduce
and point-to-point between two worker processes, each over a sweep of sizes, warmed up
and then repeated. Writes ``trace.parquet`` (the shared trace schema, one row per repeat),
``plan.json`` (the measured tasks and their cost features), ``summary.csv`` and
``config.json`` to ``--out`` (default ``reports/microbench/<device>/``) and prints the
summary. On the CPU the "device" copies are host memcpy, and the run's
``config.json`` says so (see :mod:`realrun.microbench`). With ``--emulate-network
--link-bandwidth 100Mbit`` the two communicating workers sit in network namespaces
joined by tc-shaped links (:mod:`realrun.network`).
"""

from __future__ import annotations

import argparse

from workbench.cli.common import (
    MAX_JOBS,
    accept_negative_values,
    add_out_argument,
    examples,
    integer_arg,
    number_arg,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError

# More repeats or warm-up runs per size than this is hours of measuring, not a calibration.
MAX_REPEATS = 10_000
# A day: longer than that, two workers that have not finished are stuck.
MAX_TIMEOUT_S = 86_400.0

# realrun.microbench.BENCHMARKS, repeated: the command line imports no executor until it runs.
BENCHMARK_NAMES = ("h2d", "d2h", "d2d", "gather", "spmm", "allreduce", "p2p")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "microbench",
        help="measure copies, gather, sparse aggregation and worker communication; write traces",
        description="Sweep sizes of host<->device copies (pageable and pinned), device-to-device "
        "copies, index_select gathers, sparse aggregation over a sampled block, and all-reduce and "
        "point-to-point between two local worker processes (gloo on CPU, NCCL between two GPUs). "
        "Every timed repeat is a trace row. On --device cpu the copies are host memcpy.",
        **examples("gnnwb microbench --quick --only h2d,gather -o bench"),
    )
    accept_negative_values(p)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to measure (default cpu)")
    add_out_argument(
        p,
        "microbenchmark output folder",
        kind="folder",
        metavar="DIR",
        help="output folder (default reports/microbench/<device>/)",
    )
    p.add_argument(
        "--quick", action="store_true", help="a small sweep that finishes in seconds (fewer sizes, 5 repeats)"
    )
    p.add_argument(
        "--repeats",
        type=integer_arg(minimum=1, maximum=MAX_REPEATS),
        default=None,
        help="timed repeats per size (default 20, quick 5)",
    )
    p.add_argument(
        "--warmup",
        type=integer_arg(minimum=0, maximum=MAX_REPEATS),
        default=None,
        help="untimed runs before them (default 3, quick 2)",
    )
    p.add_argument(
        "--only",
        metavar="NAMES",
        default=None,
        help=f"comma-separated benchmarks to run (default all: {','.join(BENCHMARK_NAMES)})",
    )
    p.add_argument(
        "--timeout",
        type=number_arg(positive=True, maximum=MAX_TIMEOUT_S),
        default=None,
        metavar="SECONDS",
        help="seconds the two communicating worker processes may take before they are stopped "
        "(default 120, quick 60)",
    )
    p.add_argument("--seed", type=seed_arg(), default=0, help="seed of indices, features and sampled blocks")
    p.add_argument(
        "--threads",
        type=integer_arg(minimum=1, maximum=MAX_JOBS),
        default=None,
        help="torch CPU threads (default: torch's own). On a shared machine, 1 keeps a "
        "multi-threaded copy from stalling for a scheduler tick when another process holds a core",
    )
    p.add_argument(
        "--emulate-network",
        action="store_true",
        help="run all-reduce and p2p between two network namespaces joined through a bridge by veth "
        "links shaped with tc to --link-bandwidth (needs root on Linux; torn down after)",
    )
    p.add_argument(
        "--link-bandwidth",
        metavar="RATE",
        default=None,
        help="each emulated link's rate, e.g. 100Mbit, 1Gbit, 12.5MB/s (needed with --emulate-network)",
    )
    set_handler(p, run_microbench_command)


def benchmark_names(text: str) -> tuple[str, ...]:
    """``--only``'s names, each a known benchmark; an empty entry is a typo, not "all"."""
    names = tuple(n.strip() for n in text.split(","))
    for name in names:
        if name not in BENCHMARK_NAMES:
            raise ConfigError(
                f"--only {text!r}: unknown benchmark {name!r}; valid: {', '.join(BENCHMARK_NAMES)}"
            )
    return names


def run_microbench_command(args: argparse.Namespace) -> int:
    import sys

    from realrun.microbench import MicrobenchConfig, default_out_dir, run_microbench, summary_lines

    overrides: dict = {"seed": args.seed}
    if args.repeats is not None:
        overrides["repeats"] = args.repeats
    if args.warmup is not None:
        overrides["warmup"] = args.warmup
    if args.threads is not None:
        overrides["threads"] = args.threads
    if args.timeout is not None:
        overrides["comm_timeout_s"] = args.timeout
    if args.emulate_network:
        overrides["emulate_network"] = True
    if args.link_bandwidth is not None:
        from realrun.network import parse_link_bandwidth

        overrides["link_bandwidth_bps"] = parse_link_bandwidth(args.link_bandwidth)
    if args.only is not None:
        overrides["benchmarks"] = benchmark_names(args.only)
    cfg = MicrobenchConfig.default(args.device, quick=args.quick, **overrides)
    out = args.out or default_out_dir(args.device)
    result = run_microbench(cfg, out, progress=lambda m: print(m, file=sys.stderr, flush=True))
    for line in summary_lines(result.summary):
        print(line)
    for note in result.meta["notes"]:
        print(f"note: {note}")
    print(
        f"wrote {result.out_dir}: trace.parquet ({len(result.trace)} rows), plan.json, summary.csv, config.json"
    )
    return 0
