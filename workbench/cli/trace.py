"""``gnnwb trace``: look at trace files (simulated or measured alike).

``gnnwb trace show TRACE.parquet`` prints the per-phase summary and the makespan;
``gnnwb trace export TRACE.parquet --chrome out.json`` writes a timeline for
Perfetto or chrome://tracing. Either takes a run's folder (``reports/runs/<name>/``) for
the ``trace.parquet`` in it. ``show`` on a run's folder (or its ``trace.parquet``) also says
what the run executed (its ``run.json``: the configuration, plan and hardware files) and
checks the trace against the plan that ran (its ``plan.json``, read, never rebuilt).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

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
    for line in run_folder_lines(args.trace, df):
        print(line)
    return 0


def run_folder_lines(trace_arg: str, df: Any) -> list[str]:
    """What the run folder a trace lies in says about the run: what it executed (``run.json``) and
    how the trace's rows match the plan that ran (``plan.json``). None for a trace file elsewhere:
    a plan.json beside an arbitrary trace file need not be its plan."""
    from workbench.trace import TRACE_FILE

    path = Path(trace_arg)
    folder = path if path.is_dir() else path.parent if path.name == TRACE_FILE else None
    if folder is None:
        return []
    meta = _run_json(folder)
    files = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    lines = _executed_lines(folder, meta, files) if meta else []
    plan_path = folder / str(files.get("plan", "plan.json"))
    if plan_path.is_file():
        lines.append(_plan_line(plan_path, df))
    return lines


def _run_json(folder: Path) -> dict[str, Any]:
    """The folder's run.json; empty when there is none or it is not a JSON object (it only adds
    to what the trace shows, so a damaged one is not worth failing over)."""
    try:
        data = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _executed_lines(folder: Path, meta: dict[str, Any], files: dict[str, Any]) -> list[str]:
    """The run (how it ended, its scheme and workers) and the files that say what it executed."""
    run = (
        f"run {meta.get('run', '?')}: {meta.get('status', '?')}, scheme {meta.get('scheme', '?')}, "
        f"{meta.get('workers', '?')} workers on {meta.get('device') or '?'}"
    )
    names = [str(files[role]) for role in ("config", "plan", "hardware") if role in files]
    if not names:
        return [run, "executed: not recorded (a run folder from before run.json named its files)"]
    if "given_config" in files and "config" in files:
        names[0] += f" (as given: {files['given_config']})"
    return [run, f"executed: {', '.join(names)} (in {folder})"]


def _plan_line(plan_path: Path, df: Any) -> str:
    """How the trace's rows match the plan that ran: rows naming its tasks, tasks no row ran."""
    from workbench.errors import PlanError
    from workbench.plan import Plan

    try:
        plan = Plan.load(plan_path)
    except PlanError as exc:
        return f"plan: not readable: {exc}"
    ids = {t.id for t in plan.tasks}
    named = df["task"].isin(ids) if "task" in df.columns else None
    if named is None:
        return f"plan: {len(ids):,} tasks; the trace has no task column to match them"
    never = len(ids - set(df.loc[named, "task"]))
    return (
        f"plan: {len(ids):,} tasks; {int(named.sum()):,} of {len(df):,} trace rows name one, "
        f"{never:,} task(s) have no row"
    )


def export_trace(args: argparse.Namespace) -> int:
    from workbench.timeline import write_chrome_trace
    from workbench.trace import read_trace

    df = read_trace(args.trace)
    out = write_chrome_trace(df, args.chrome)
    print(f"wrote {out}: {len(df)} events")
    return 0
