"""``gnnwb trace``: look at trace files (simulated or measured alike).

``gnnwb trace show TRACE.parquet`` prints the per-phase summary and the makespan;
``gnnwb trace export TRACE.parquet --chrome out.json`` writes a timeline for
Perfetto or chrome://tracing. Either takes a run's folder (``reports/runs/<name>/``) for
the ``trace.parquet`` in it.
"""

from __future__ import annotations

import argparse

from workbench.cli.common import examples, set_handler, writable_file_arg

TRACE_HELP = "a trace file, or a run's folder holding a trace.parquet"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="summarise a trace or export it as a Chrome/Perfetto timeline")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser(
        "show",
        help="per-phase summary and makespan of a trace",
        **examples("gnnwb trace show examples/traces/shared_uplink.parquet"),
    )
    show.add_argument("trace", metavar="TRACE.parquet", help=TRACE_HELP)
    set_handler(show, show_trace)
    export = actions.add_parser(
        "export",
        help="write a trace as Chrome trace-event JSON",
        **examples("gnnwb trace export examples/traces/shared_uplink.parquet --chrome timeline.json"),
    )
    export.add_argument("trace", metavar="TRACE.parquet", help=TRACE_HELP)
    export.add_argument(
        "--chrome",
        metavar="OUT.json",
        type=writable_file_arg("Chrome trace file"),
        required=True,
        help="output file (open in Perfetto or chrome://tracing)",
    )
    set_handler(export, export_trace)


def show_trace(args: argparse.Namespace) -> int:
    from workbench.trace import makespan, phase_table, read_trace

    df = read_trace(args.trace)
    runs = sorted(df["run_id"].unique()) if len(df) else []
    print(f"{args.trace}: {len(df)} rows, runs: {', '.join(runs) or '-'}")
    for line in phase_table(df):
        print(line)
    print(f"makespan: {makespan(df) * 1e3:.6f} ms")
    return 0


def export_trace(args: argparse.Namespace) -> int:
    from workbench.timeline import write_chrome_trace
    from workbench.trace import read_trace

    df = read_trace(args.trace)
    out = write_chrome_trace(df, args.chrome)
    print(f"wrote {out}: {len(df)} events")
    return 0
