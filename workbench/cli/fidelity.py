"""``gnnwb fidelity``: run configurations for real, calibrate on half, predict the other half.

The grid is the schemes that run for real (model-centric, and hopgnn with all three switches
and ``minibatches = "as-sampled"``; both with globally random minibatches, the HopGNN paper's
setup) over partitions x placements x fanouts x worker counts, on CPU
worker processes of this machine (default 2 workers: more than the machine has cores
time-share them, which the simulator does not model). Every configuration runs
``--repeats`` times for ``--epochs`` epochs (the last one, warm, is the one measured). The
configurations are split in two by a checkerboard over the grid's factors, so every level
of every factor is in both halves; calibration (``gnnwb calibrate --attribute-gaps`` on the
calibration half's warm epochs) never sees the configurations it is scored on
(with the point-to-point and all-reduce microbenchmarks between two worker processes unless
``--no-microbench``: a bare send or all-reduce over the same links is what tells a feature
exchange's fixed cost, its protocol, from the network's latency). The held-out half is simulated with
the profile and compared, per phase and per epoch, with its measurements and their
run-to-run spread (``sim.calibrate.fidelity``). Each configuration's plan is the real run's
(:func:`realrun.launcher.prepare_real_run`: the order its workers keep), so the simulator is
scored on the schedule that ran.

The modelled hardware (``hardware.toml`` in the output folder) describes what runs here:
one machine per worker, whose "GPU" is the worker process on a CPU core (``pcie``: the
copy of a host buffer into it), joined through a NIC (``nic``; the worker and the host
memory both reach it, as with GPUDirect RDMA, since gloo reads and writes the worker's
tensors) and the network (``network``: gloo over loopback TCP); calibration fits the values.

:func:`fidelity` is the experiment (the ``fidelity`` study runs it too).
Writes ``--out`` (default ``reports/fidelity/``): ``configs/``, ``runs/<config>/r<k>/``
(real run folders; a finished one is kept and not run again), ``microbench/``,
``profile.toml``, ``table.csv`` (every held-out configuration and quantity),
``summary.json``, ``report.md``, ``scatter.png`` and ``phase_errors.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.cli.common import (
    MAX_EPOCHS,
    accept_negative_values,
    add_out_argument,
    integer_arg,
    nonempty_arg,
    parse_layer_sizes,
    set_handler,
)
from workbench.errors import ConfigError

SCHEMES = ("model-centric", "hopgnn")
# hopgnn's extra table: HopGNN's model d trains worker d's minibatch, cut into micrographs at the
# roots' home servers (the paper's setup, with globally random minibatches for both schemes).
SCHEME_TABLE = {"model-centric": "", "hopgnn": 'minibatches = "as-sampled"\n'}
SHORT = {"model-centric": "mc", "hopgnn": "hop"}
PARTITIONS = ("random", "metis")
PLACEMENTS = ("none", "degree")
FANOUTS = ((5, 5), (10, 10))
GRAPH = "sbm:n=20000,blocks=8,deg=10,feat=128"

CONFIG = """name = "{name}"
seed = 0

[graph]
name = "{graph}"

[hardware]
name = "{hardware}"

[model]
name = "sage"
hidden = 64
num_layers = 2

[training]
batch_size = {batch}
iterations = {iterations}
workers = {workers}
seeds = "global"

[cache]
capacity = "20%"

[partition]
name = "{partition}"
{placement}
[sampling]
name = "neighbor"
fanouts = [{fanouts}]

[execution]
name = "{scheme}"
{scheme_table}"""


@dataclass(frozen=True)
class Point:
    scheme: str
    partition: str
    placement: str
    fanouts: tuple[int, ...]
    workers: int
    held_out: bool

    @property
    def name(self) -> str:
        f = "-".join(map(str, self.fanouts))
        return f"{SHORT[self.scheme]}-{self.partition}-{self.placement}-f{f}-w{self.workers}"

    def info(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "partition": self.partition,
            "placement": self.placement,
            "fanouts": "-".join(map(str, self.fanouts)),
            "workers": self.workers,
        }


def grid(workers: list[int], quick: bool) -> list[Point]:
    """Every combination; held out where the levels' indices sum to an odd number (a checkerboard)."""
    placements = PLACEMENTS[:1] if quick else PLACEMENTS
    out = []
    for (h, scheme), (i, w), (j, part), (k, place), (m, fan) in itertools.product(
        enumerate(SCHEMES),
        enumerate(workers),
        enumerate(PARTITIONS),
        enumerate(placements),
        enumerate(FANOUTS),
    ):
        out.append(Point(scheme, part, place, fan, w, bool((h + i + j + k + m) % 2)))
    return out


def hardware_toml(machines: int) -> str:
    """The modelled cluster of this machine's CPU workers (see the module docstring)."""
    from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

    worker = GPUSpec("cpu-worker", 8 * 2**30, 50e9, 10e9, 2)
    ms, links, transit = [], [], {"net": "network"}
    for i in range(machines):
        # gloo reads and writes the worker's own tensors: "GPUDirect RDMA", and a direct link
        # from the worker to the NIC, so communication does not cross the host-copy link.
        m = MachineSpec(f"m{i}", (worker,), 16 * 2**30, 1, 10e9, gpudirect_rdma=True)
        ms.append(m)
        transit.update({f"m{i}.rc": "root-complex", f"m{i}.nic": "nic"})
        links += [
            LinkSpec(m.host_node, f"m{i}.rc", 10e9, 0.0, "host"),
            LinkSpec(f"m{i}.rc", f"m{i}.gpu0", 5e9, 1e-6, "pcie"),
            LinkSpec(f"m{i}.rc", f"m{i}.nic", 5e9, 1e-6, "nic"),
            LinkSpec(f"m{i}.gpu0", f"m{i}.nic", 5e9, 1e-6, "nic"),
            LinkSpec(f"m{i}.nic", "net", 1e9, 20e-6, "network"),
        ]
    spec = ClusterSpec(
        "cpu-workers-loopback",
        tuple(ms),
        tuple(links),
        transit,
        "CPU worker processes on one machine, each modelled as a machine with one 'GPU' (the worker) "
        "joined over loopback TCP (gloo); values are starting points that calibration replaces",
    )
    return spec.to_toml()


def register(sub: argparse._SubParsersAction) -> None:
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
        help="worker counts (default 2: more workers than CPU cores time-share them, which the simulator does not model)",
    )
    p.add_argument(
        "--repeats",
        type=integer_arg(minimum=1, maximum=1000),
        default=5,
        help="real runs per configuration (default 5: the median of 3 still moved by several percent)",
    )
    p.add_argument(
        "--epochs",
        type=integer_arg(minimum=1, maximum=MAX_EPOCHS),
        default=2,
        help="epochs per run; the last is measured (default 2)",
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
        "--no-microbench",
        dest="microbench",
        action="store_false",
        help="calibrate on the training runs alone, without the p2p and all-reduce microbenchmarks "
        "(then an exchange's fixed cost cannot be told from the network's latency)",
    )
    set_handler(p, run_fidelity)


@dataclass(frozen=True)
class FidelityOptions:
    """One fidelity experiment: where it writes, the grid, and how each configuration runs."""

    out: Path
    workers: tuple[int, ...] = (2,)
    repeats: int = 5
    epochs: int = 2
    iterations: int = 8
    batch: int = 256
    graph: str = GRAPH
    quick: bool = False
    microbench: bool = True

    def check(self) -> None:
        if not self.workers or min(self.workers) < 1 or min(self.repeats, self.epochs, self.iterations) < 1:
            raise ConfigError("--workers, --repeats, --epochs and --iterations must be positive")


def run_fidelity(args: argparse.Namespace) -> int:
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
    )
    summary = fidelity(opts)
    print((opts.out / "report.md").read_text())
    print(
        f"wrote {opts.out}/: table.csv, summary.json, report.md, {', '.join(summary['images'])}, profile.toml"
    )
    return 0


def fidelity(opts: FidelityOptions) -> dict[str, Any]:
    """Run the grid for real (finished runs are kept and not run again), calibrate on one half,
    score the simulator on the other; writes the output folder and returns the summary."""
    opts.check()
    out = opts.out
    (out / "configs").mkdir(parents=True, exist_ok=True)
    hardware = out / "hardware.toml"
    hardware.write_text(hardware_toml(max(opts.workers)))
    points = grid(list(opts.workers), opts.quick)
    prepared: dict[str, tuple[Any, Any]] = {}
    runs: dict[str, list[Path]] = {}
    for n, point in enumerate(points, 1):
        config = out / "configs" / f"{point.name}.toml"
        placement = "" if point.placement == "none" else f'\n[placement]\nname = "{point.placement}"\n'
        config.write_text(
            CONFIG.format(
                name=point.name,
                graph=opts.graph,
                hardware=hardware.resolve(),
                batch=opts.batch,
                iterations=opts.iterations,
                workers=point.workers,
                partition=point.partition,
                placement=placement,
                fanouts=", ".join(map(str, point.fanouts)),
                scheme=point.scheme,
                scheme_table=SCHEME_TABLE[point.scheme],
            )
        )
        runs[point.name] = []
        for r in range(opts.repeats):
            folder = out / "runs" / point.name / f"r{r}"
            runs[point.name].append(folder)
            if _finished(folder, config, opts.epochs):
                continue
            if point.name not in prepared:
                prepared[point.name] = _prepare(config)
            prep, plan = prepared[point.name]
            print(f"[{n}/{len(points)}] {point.name} run {r + 1}/{opts.repeats}", flush=True)
            _run(prep, plan, config, folder, opts.epochs)
    sources: list[Any] = []
    if opts.microbench:
        sources.extend(_microbench(out / "microbench"))
    for point in points:
        if not point.held_out:
            plan = _plan(prepared, point, out)
            sources.extend(_warm_source(f, plan, opts.epochs) for f in runs[point.name])
    return _score(opts, out, hardware, points, prepared, runs, sources)


def _finished(folder: Path, config: Path, epochs: int) -> bool:
    meta = folder / "run.json"
    if not meta.exists() or not (folder / "config.toml").exists():
        return False
    done = json.loads(meta.read_text())
    return (
        done.get("status") == "complete"
        and done.get("epochs_finished", 0) >= epochs
        and (folder / "config.toml").read_text() == config.read_text()
    )


def _prepare(config: Path) -> tuple[Any, Any]:
    from realrun.launcher import prepare_real_run

    prep, plan, _ = prepare_real_run(config, None, "cpu")
    return prep, plan


def _plan(prepared: dict[str, tuple[Any, Any]], point: Point, out: Path) -> Any:
    if point.name not in prepared:
        prepared[point.name] = _prepare(out / "configs" / f"{point.name}.toml")
    return prepared[point.name][1]


def _run(prep: Any, plan: Any, config: Path, folder: Path, epochs: int) -> None:
    import os

    from realrun.launcher import launch

    before = os.getloadavg()[0]
    summary = launch(prep, plan, config, device="cpu", out=folder, epochs=epochs, evaluate=False)
    if not summary.complete:
        raise ConfigError(f"{folder}: the real run failed: {summary.error}")
    # What else ran on the machine: the 1-minute load average before and after the run.
    load = {"load_before": before, "load_after": os.getloadavg()[0], "cpus": os.cpu_count()}
    (folder / "load.json").write_text(json.dumps(load) + "\n")


def _microbench(folder: Path) -> list[Any]:
    """Point-to-point and all-reduce between two worker processes: calibration data (not scored)."""
    from realrun.microbench import MicrobenchConfig, run_microbench
    from sim.calibrate import read_source

    if not (folder / "trace.parquet").exists():
        print("microbenchmarks: p2p and allreduce between two worker processes", flush=True)
        run_microbench(MicrobenchConfig.default("cpu", quick=True, benchmarks=("p2p", "allreduce")), folder)
    return [read_source(folder / "trace.parquet", rebuild_plans=False)]


def _warm_source(folder: Path, plan: Any, epochs: int) -> Any:
    """The run's last epoch as a calibration source, with the plan's compute features."""
    import dataclasses

    from sim.calibrate import features_from_plan, read_source

    source = read_source(folder / "trace.parquet", rebuild_plans=False)
    trace = source.trace
    warm = trace[trace["epoch"] == epochs - 1].reset_index(drop=True) if "epoch" in trace.columns else trace
    return dataclasses.replace(source, trace=warm, features=features_from_plan(warm, plan, source.name))


def _score(
    opts: FidelityOptions,
    out: Path,
    hardware: Path,
    points: list[Point],
    prepared: dict[str, tuple[Any, Any]],
    runs: dict[str, list[Path]],
    sources: list[Any],
) -> dict[str, Any]:
    import os

    import numpy as np
    import pandas as pd

    from sim import simulate
    from sim.calibrate import calibrate, load_profile
    from sim.calibrate.fidelity import Measured, compare, epoch_span, phase_busy, plot, summarize
    from workbench.hardware import load_hardware
    from workbench.run import apply_profile
    from workbench.trace import read_trace

    print(
        f"calibrating on {sum(not p.held_out for p in points)} configurations ({len(sources)} traces)",
        flush=True,
    )
    profile = calibrate(
        sources, load_hardware(str(hardware)), gaps=True, command="gnnwb fidelity (calibration half)"
    )
    profile_path = profile.write(out / "profile.toml")
    profile = load_profile(profile_path)
    measured: dict[str, Measured] = {}
    predicted: dict[str, tuple[float, dict[str, float]]] = {}
    loads: list[dict[str, float]] = []
    info = {}
    for point in (p for p in points if p.held_out):
        prep, plan = prepared.get(point.name) or _prepare(out / "configs" / f"{point.name}.toml")
        cluster, _ = apply_profile(prep.cluster, str(profile_path), point.name)
        sim = simulate(plan, cluster, cost_model=profile.cost_model, run_id=point.name).trace
        predicted[point.name] = (epoch_span(sim), phase_busy(sim, gaps=False))
        m = measured[point.name] = Measured()
        for folder in runs[point.name]:
            trace = read_trace(folder / "trace.parquet")
            warm = trace[trace["epoch"] == opts.epochs - 1]
            results = pd.read_csv(folder / "results.csv")
            m.epoch.append(float(results.loc[results["epoch"] == opts.epochs - 1, "epoch_s"].iloc[0]))
            m.phases.append(phase_busy(warm))
            if (folder / "load.json").exists():
                loads.append(json.loads((folder / "load.json").read_text()))
        info[point.name] = point.info()
    table = compare(measured, predicted, info)
    summary = summarize(table)
    summary["machine"] = {
        "cpus": os.cpu_count(),
        "load_median": float(np.median([x["load_before"] for x in loads] + [x["load_after"] for x in loads]))
        if loads
        else None,
        "load_max": max((max(x["load_before"], x["load_after"]) for x in loads), default=None),
    }
    summary["calibration"] = {"profile": str(profile_path), "traces": len(sources)}
    summary["schemes"] = per_scheme(table)
    table.to_csv(out / "table.csv", index=False)
    summary["images"] = [p.name for p in plot(table, summary, out)]
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "report.md").write_text(_report(table, summary, opts))
    return summary


def per_scheme(table: Any) -> dict[str, dict[str, float]]:
    """Held-out epoch errors of each scheme: median and worst |error|, mean signed error."""
    epoch = table[table["quantity"] == "epoch"]
    return {
        str(name): {
            "median_abs_error": float(g["error"].abs().median()),
            "worst_abs_error": float(g["error"].abs().max()),
            "mean_error": float(g["error"].mean()),
        }
        for name, g in epoch.groupby("scheme", sort=False)
    }


def _report(table: Any, summary: dict[str, Any], opts: FidelityOptions) -> str:
    epoch = table[table["quantity"] == "epoch"]
    lines = [
        "# Fidelity: simulated vs measured on held-out configurations",
        "",
        f"model-centric and hopgnn on CPU worker processes, {opts.repeats} runs per configuration, epoch {opts.epochs - 1} "
        f"measured; {summary['configurations']} held-out configurations.",
        "",
        f"Epoch time: median |error| {summary['epoch_median_abs_error']:.1%}, worst {summary['epoch_worst_abs_error']:.1%}, "
        f"mean signed {summary['epoch_mean_error']:+.1%}; the measurement's own run-to-run spread (median) "
        f"{summary['epoch_median_spread']:.1%}. By scheme: "
        + "; ".join(
            f"{name} median {v['median_abs_error']:.1%}, worst {v['worst_abs_error']:.1%}, "
            f"mean signed {v['mean_error']:+.1%}"
            for name, v in summary["schemes"].items()
        )
        + ".",
        "",
        "| configuration | measured (ms) | spread | simulated (ms) | error |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in epoch.itertuples(index=False):
        lines.append(
            f"| {r.config} | {r.measured_s * 1e3:.2f} | {r.spread:.1%} | {r.predicted_s * 1e3:.2f} | {r.error:+.1%} |"
        )
    machine = summary["machine"]
    lines += [
        "",
        f"Machine: {machine['cpus']} CPUs; 1-minute load average around the runs: median "
        + (
            f"{machine['load_median']:.2f}, max {machine['load_max']:.2f}"
            if machine["load_median"] is not None
            else "n/a"
        )
        + " (other processes on the machine inflate and scatter the measured times; more workers than CPUs "
        "time-share them, which the simulator does not model).",
    ]
    lines += [
        "",
        "Per phase (busy seconds summed over workers; idle gaps counted to the activity after them):",
        "",
        "| phase | share of busy | median abs error | worst | mean signed | run-to-run spread |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phase, v in summary["phases"].items():
        lines.append(
            f"| {phase} | {v['share_of_busy']:.1%} | {v['median_abs_error']:.1%} | {v['worst_abs_error']:.1%} | "
            f"{v['mean_error']:+.1%} | {v['median_spread']:.1%} |"
        )
    rank = summary["ranking"]
    lines += [
        "",
        f"Ranking: of {rank['pairs']} pairs, {rank['within_noise']} differ by less than their measured spread; "
        f"{rank['discordant']} of the others are ordered differently by the simulator"
        + (f" ({'; '.join(rank['discordant_pairs'])})" if rank["discordant_pairs"] else "")
        + ".",
        "",
    ]
    return "\n".join(lines)
