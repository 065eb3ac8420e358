"""The fidelity experiment: run configurations for real, calibrate on half, predict the other half.

The grid is the schemes that run for real (model-centric, and hopgnn with all three switches
and ``minibatches = "as-sampled"``; both with globally random minibatches, the HopGNN paper's
setup) over partitions x placements x fanouts x worker counts, on CPU
worker processes of this machine (default 2 workers; more than the machine has cores
time-share them: fitted points of that kind fit :func:`fit_contention` rather than the profile,
and held-out ones are stretched by it, :mod:`sim.contention`). Every configuration runs
``repeats`` times for ``epochs`` epochs; every epoch after the first (cold) one is measured, and a
run's median over them is one repeat (:func:`measure`). The
configurations are split in two by a checkerboard over the grid's factors, so every level
of every factor is in both halves; calibration (``gnnwb calibrate --attribute-gaps`` on the
calibration half's warm epochs) never sees the configurations it is scored on
(with the point-to-point and all-reduce microbenchmarks between two worker processes unless
``microbench`` is off: a bare send or all-reduce over the same links is what tells a feature
exchange's fixed cost, its protocol, from the network's latency). The held-out half is simulated with
the profile and compared, per phase and per epoch, with its measurements and their
run-to-run spread (``sim.calibrate.fidelity``). Each configuration's plan is the real run's
(:func:`realrun.launcher.prepare_real_run`: the order its workers keep), so the simulator is
scored on the schedule that ran.

The modelled hardware (``hardware.toml`` in the output folder) describes what runs here:
one machine per worker, whose "GPU" is the worker process on a CPU core (``pcie``: the
copy of a host buffer into it; no copy engine: the process copies, receives and samples on its
one thread, one thing at a time, :mod:`sim.resources`), joined through a NIC (``nic``; the worker and the host
memory both reach it, as with GPUDirect RDMA, since gloo reads and writes the worker's
tensors) and the network (``network``: gloo over loopback TCP); calibration fits the values.

:func:`fidelity` is the experiment; ``gnnwb fidelity`` (:mod:`workbench.cli.fidelity`) and the
``fidelity`` study (:mod:`studies.study_fidelity`) both run it. It lives in ``studies``, the
lowest layer that may use both the simulator and the real executor. It writes its output
folder: ``configs/``, ``runs/<config>/r<k>/`` (real run folders; a finished one is kept and not
run again), ``microbench/``, ``profile.toml``, ``table.csv`` (every held-out configuration and
quantity), ``summary.json``, ``report.md``, ``scatter.png`` and ``phase_errors.png``.

Only the standard library and :mod:`workbench.errors` load with this module (the rest is
imported where it is used), so the command line can read :data:`GRAPH` for its ``--help``.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
class GridPoint:
    """One configuration of the grid, and whether it is held out of calibration."""

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


def grid(workers: list[int], quick: bool) -> list[GridPoint]:
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
        out.append(GridPoint(scheme, part, place, fan, w, bool((h + i + j + k + m) % 2)))
    return out


# A CPU worker process as a "GPU": no copy engines (it copies, sends and receives on its one thread)
CPU_WORKER = ("cpu-worker", 8 * 2**30, 50e9, 10e9, 0)


def hardware_toml(machines: int, device: str = "cpu", one_machine: bool = False) -> str:
    """The modelled cluster of this machine's CPU workers (see the module docstring); with
    ``device`` ``cuda``, this machine with ``machines`` of its GPUs (:func:`cuda_cluster`); with
    ``one_machine``, the CPU workers as ``machines`` GPUs of one machine (:func:`one_machine_cluster`)."""
    from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

    if device == "cuda":
        return cuda_cluster(machines).to_toml()
    if one_machine:
        return one_machine_cluster(machines).to_toml()
    worker = GPUSpec(*CPU_WORKER)
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


def one_machine_cluster(workers: int) -> Any:
    """The CPU worker processes as ``workers`` "GPUs" of one machine under one PCIe switch, for a
    scheme whose workers must share a server's host memory (NeuGraph's); the link kinds and the
    worker's model are :func:`hardware_toml`'s, so a profile fitted on that cluster applies here."""
    from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

    m = MachineSpec("m0", (GPUSpec(*CPU_WORKER),) * workers, 16 * 2**30, 1, 10e9)
    links = [
        LinkSpec(m.host_node, "m0.rc", 10e9, 0.0, "host"),
        LinkSpec("m0.rc", "m0.pcie0", 5e9, 1e-6, "pcie-uplink"),
    ]
    links += [LinkSpec("m0.pcie0", g, 5e9, 1e-6, "pcie") for g in m.gpu_nodes()]
    return ClusterSpec(
        "cpu-workers-one-machine",
        (m,),
        tuple(links),
        {"m0.rc": "root-complex", "m0.pcie0": "pcie-switch"},
        "CPU worker processes on one machine, modelled as the GPUs of one machine under a PCIe switch "
        "(their exchanges: gloo over loopback TCP); values are starting points that calibration replaces",
    )


def cuda_cluster(gpus: int) -> Any:
    """This machine with ``gpus`` of its GPUs (torch's first device's model and memory), each on
    PCIe to the host and, with two or more, all joined through one switch (kind ``nvswitch``: it
    stands for NVLink, NVSwitch or PCIe peer-to-peer, whichever NCCL uses here). The rates are
    starting points that calibration replaces (never run on a GPU so far)."""
    import torch

    from workbench.hardware import presets
    from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

    props = torch.cuda.get_device_properties(0)
    known = {"H200": presets.H200, "H100": presets.H100, "A100": presets.A100_40, "V100": presets.V100}
    like = next((g for key, g in known.items() if key in props.name.upper()), presets.H100)
    gpu = GPUSpec(props.name, int(props.total_memory), like.flops, like.memory_bandwidth, 2)
    m = MachineSpec("m0", (gpu,) * gpus, 64 * 2**30, os.cpu_count() or 1, 50e9)
    links = [LinkSpec(m.host_node, "m0.rc", 50e9, 0.0, "host")]
    links += [LinkSpec("m0.rc", g, 24e9, 2e-6, "pcie") for g in m.gpu_nodes()]
    transit = {"m0.rc": "root-complex"}
    if gpus > 1:
        transit["m0.peer"] = "nvswitch"
        links += [LinkSpec(g, "m0.peer", 100e9, 2e-6, "nvswitch") for g in m.gpu_nodes()]
    return ClusterSpec(
        "cuda-local",
        (m,),
        tuple(links),
        transit,
        f"this machine's {gpus} x {props.name} worker processes (NCCL between them); values are "
        "starting points that calibration replaces",
    )


@dataclass(frozen=True)
class FidelityOptions:
    """One fidelity experiment: where it writes, the grid, and how each configuration runs."""

    out: Path
    workers: tuple[int, ...] = (2,)
    repeats: int = 5  # the median of 3 still moved by several percent
    # Every epoch after the first is measured and a run's median over them is one repeat: on the
    # scheme grid (2026-11-27, quiet) 2 epochs gave a held-out median error of 15.2%, 4 gave 11.9%.
    epochs: int = 4
    iterations: int = 8
    batch: int = 256
    graph: str = GRAPH
    quick: bool = False
    microbench: bool = True
    grid: str = "paper"  # or "schemes": studies.fidelity_grid

    def check(self) -> None:
        if not self.workers or min(self.workers) < 1 or min(self.repeats, self.epochs, self.iterations) < 1:
            raise ConfigError("--workers, --repeats, --epochs and --iterations must be positive")


def fidelity(opts: FidelityOptions) -> dict[str, Any]:
    """Run the grid for real (finished runs are kept and not run again), calibrate on one half,
    score the simulator on the other; writes the output folder and returns the summary."""
    opts.check()
    if opts.grid != "paper":  # the grid of every scheme is studies.fidelity_grid.scheme_fidelity's
        raise ConfigError(f"fidelity() runs the paper grid; {opts.grid!r} is studies.fidelity_grid's")
    out = opts.out
    (out / "configs").mkdir(parents=True, exist_ok=True)
    hardware = out / "hardware.toml"
    hardware.write_text(hardware_toml(max(opts.workers)))
    points = grid(list(opts.workers), opts.quick)
    prepared, runs, sources = run_and_collect(points, opts, lambda point: write_config(point, opts, hardware))
    return _score(opts, hardware, points, prepared, runs, sources)


def run_and_collect(
    points: Sequence[Any], opts: FidelityOptions, write: Callable[[Any], Path]
) -> tuple[dict[str, tuple[Any, Any]], dict[str, list[Path]], list[Any]]:
    """Run every point (``write(point)``: its configuration file under ``configs/``) ``opts.repeats``
    times, keeping finished runs; returns the prepared runs and plans by name (built once, and only
    where something needs them), each point's run folders, and the calibration sources: the
    microbenchmarks unless turned off, and the warm epochs of the points not held out that have a
    core per worker (those with more workers than cores fit :func:`fit_contention` instead: their
    rows are stretched by time-sharing, which the links and compute costs do not describe)."""
    prepared: dict[str, tuple[Any, Any]] = {}
    runs: dict[str, list[Path]] = {}
    for n, point in enumerate(points, 1):
        runs[point.name] = _run_repeats(point, write(point), opts, prepared, f"[{n}/{len(points)}]")
    sources: list[Any] = list(microbenchmarks(opts.out / "microbench")) if opts.microbench else []
    for point in points:
        if not point.held_out and point.workers <= cores():  # contended runs fit the contention model
            plan = _plan(prepared, point, opts.out)
            sources.extend(warm_source(f, plan, first_warm(opts.epochs)) for f in runs[point.name])
    return prepared, runs, sources


def write_config(point: GridPoint, opts: FidelityOptions, hardware: Path) -> Path:
    """The point's run configuration (a TOML file under ``configs/``), on the modelled ``hardware``."""
    config = opts.out / "configs" / f"{point.name}.toml"
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
    return config


def _run_repeats(
    point: GridPoint,
    config: Path,
    opts: FidelityOptions,
    prepared: dict[str, tuple[Any, Any]],
    progress: str,
) -> list[Path]:
    """Run ``config`` ``opts.repeats`` times, skipping the runs already finished; their folders."""
    folders = []
    for r in range(opts.repeats):
        folder = opts.out / "runs" / point.name / f"r{r}"
        folders.append(folder)
        if _finished(folder, config, opts.epochs):
            continue
        if point.name not in prepared:
            prepared[point.name] = prepare(config)
        prep, plan = prepared[point.name]
        print(f"{progress} {point.name} run {r + 1}/{opts.repeats}", flush=True)
        run_real(prep, plan, config, folder, opts.epochs)
    return folders


def _finished(folder: Path, config: Path, epochs: int) -> bool:
    """A complete run of ``config`` for ``epochs`` epochs is in ``folder``. The folder's
    ``config.toml`` is the configuration as executed (every default written out), so it is compared
    with ``config`` by what they say; where the executor changed what it says, the launcher kept the
    configuration as given in ``config.given.toml``, compared as written."""
    from realrun.launcher import GIVEN_CONFIG, config_differs
    from workbench.config import load_config

    meta, executed, given = folder / "run.json", folder / "config.toml", folder / GIVEN_CONFIG
    if not meta.exists() or not executed.exists():
        return False
    done = json.loads(meta.read_text())
    if done.get("status") != "complete" or done.get("epochs_finished", 0) < epochs:
        return False
    if given.exists():
        return given.read_text() == config.read_text()
    return not config_differs(config, load_config(executed, check_strategies=False))


def prepare(config: Path, device: str = "cpu") -> tuple[Any, Any]:
    """``config``'s prepared real run and the plan its workers run, for ``device``."""
    from realrun.launcher import prepare_real_run

    prep, plan, _ = prepare_real_run(config, None, device)
    return prep, plan


def _prepared(prepared: dict[str, tuple[Any, Any]], point: GridPoint, out: Path) -> tuple[Any, Any]:
    if point.name not in prepared:
        prepared[point.name] = prepare(out / "configs" / f"{point.name}.toml")
    return prepared[point.name]


def _plan(prepared: dict[str, tuple[Any, Any]], point: GridPoint, out: Path) -> Any:
    return _prepared(prepared, point, out)[1]


def run_real(
    prep: Any, plan: Any, config: Path, folder: Path, epochs: int, device: str = "cpu", **launch_options: Any
) -> Any:
    """Run the prepared ``config`` for real into ``folder`` for ``epochs`` epochs (no evaluation)
    with ``launch_options`` (:func:`realrun.launcher.launch`'s; it writes the machine's load around
    the run to ``load.json``). A run that fails raises a one-line
    :class:`~workbench.errors.WorkbenchError`."""
    from realrun.launcher import launch

    summary = launch(
        prep, plan, config, device=device, out=folder, epochs=epochs, evaluate=False, **launch_options
    )
    if not summary.complete:
        raise ConfigError(f"{folder}: the real run failed: {summary.error}")
    return summary


COMM_BENCHMARKS = ("p2p", "allreduce")


def microbenchmarks(
    folder: Path, device: str = "cpu", benchmarks: tuple[str, ...] = COMM_BENCHMARKS, quick: bool = True
) -> list[Any]:
    """Run ``benchmarks`` on ``device`` into ``folder`` unless it holds their trace already; the
    point-to-point and all-reduce rows between two worker processes as calibration data (not
    scored; the copies, gathers and aggregations calibrate nothing of a real run's plan)."""
    from realrun.microbench import MicrobenchConfig, run_microbench

    if not (folder / "trace.parquet").exists():
        print(f"microbenchmarks: {', '.join(benchmarks)}", flush=True)
        run_microbench(MicrobenchConfig.default(device, quick=quick, benchmarks=benchmarks), folder)
    return [comm_source(folder)]


def comm_source(folder: Path) -> Any:
    """The microbenchmark trace in ``folder``, its point-to-point and all-reduce rows only."""
    import dataclasses

    from sim.calibrate import read_source

    source = read_source(folder / "trace.parquet", rebuild_plans=False)
    trace = source.trace
    if "benchmark" not in trace.columns or trace["benchmark"].isin(COMM_BENCHMARKS).all():
        return source
    comm = trace[trace["benchmark"].isin(COMM_BENCHMARKS)].reset_index(drop=True)
    return dataclasses.replace(source, trace=comm, features=None)


def warm_source(folder: Path, plan: Any, first: int) -> Any:
    """The run's epochs from ``first`` on (the warm ones) as a calibration source, with the plan's
    compute features."""
    import dataclasses

    from sim.calibrate import features_from_plan, read_source

    source = read_source(folder / "trace.parquet", rebuild_plans=False)
    trace = source.trace
    warm = trace[trace["epoch"] >= first].reset_index(drop=True) if "epoch" in trace.columns else trace
    return dataclasses.replace(source, trace=warm, features=features_from_plan(warm, plan, source.name))


def _score(
    opts: FidelityOptions,
    hardware: Path,
    points: list[GridPoint],
    prepared: dict[str, tuple[Any, Any]],
    runs: dict[str, list[Path]],
    sources: list[Any],
) -> dict[str, Any]:
    """Calibrate on ``sources``, simulate the held-out points and compare; writes the table,
    summary, report and plots into ``opts.out`` and returns the summary."""
    from sim.calibrate.fidelity import compare, plot, summarize

    out = opts.out
    print(
        f"calibrating on {len(sources)} traces (the fitted configurations' repeats and the microbenchmarks)",
        flush=True,
    )
    profile_path, profile = calibrate_profile(
        sources, hardware, out / "profile.toml", "gnnwb fidelity (calibration half)"
    )
    contention, contention_fit = fit_contention(points, prepared, runs, opts, profile_path, profile)
    held_out = [p for p in points if p.held_out]
    predicted = {
        p.name: predict(
            *_prepared(prepared, p, out),
            p.name,
            profile_path,
            profile,
            contention=contention,
            workers=p.workers,
        )
        for p in held_out
    }
    measured: dict[str, Any] = {}
    loads: list[dict[str, float]] = []
    for point in held_out:
        measured[point.name], point_loads = measure(runs[point.name], warm_epochs(opts.epochs), per_run=True)
        loads += point_loads
    table = compare(measured, predicted, {p.name: p.info() for p in held_out})
    summary = summarize(table)
    summary["machine"] = machine_load(loads)
    summary["calibration"] = {
        "profile": str(profile_path),
        "traces": len(sources),
        "noise": profile.data.get("noise"),
    }
    summary["schemes"] = per_scheme(table)
    summary["workers"] = per_scheme(table, "workers")
    summary["contention"] = contention_fit
    table.to_csv(out / "table.csv", index=False)
    summary["images"] = [p.name for p in plot(table, summary, out)]
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "report.md").write_text(_report(table, summary, opts))
    return summary


def calibrate_profile(sources: list[Any], hardware: Path, path: Path, command: str) -> tuple[Path, Any]:
    """Fit a profile of ``hardware`` to the calibration half's traces, write it to ``path``; the
    file and the profile as read back from it (as every other user of the profile sees it)."""
    from sim.calibrate import calibrate, load_profile
    from workbench.hardware import load_hardware

    profile = calibrate(sources, load_hardware(str(hardware)), gaps=True, command=command)
    written = profile.write(path)
    return written, load_profile(written)


def predict(
    prep: Any,
    plan: Any,
    name: str,
    profile_path: Path,
    profile: Any,
    *,
    contention: Any = None,
    workers: int = 1,
) -> tuple[float, dict[str, float], list[float]]:
    """The prepared run's simulated epoch span, busy seconds per phase and iteration times, on the
    calibrated profile; with ``contention`` (:class:`sim.contention.SharedCores`), a run of more
    ``workers`` than its cores is stretched as they time-share them."""
    from sim.calibrate.fidelity import epoch_span, iteration_times, phase_busy

    sim = simulated_trace(prep, plan, name, profile_path, profile)
    if contention is not None:
        sim, _ = contention.stretch(sim, workers)
    return epoch_span(sim), phase_busy(sim, gaps=False), iteration_times(sim)


def simulated_trace(prep: Any, plan: Any, name: str, profile_path: Path, profile: Any) -> Any:
    """The prepared run simulated on the calibrated profile (every worker with its own core), its
    compute tasks varied by the profile's fitted jitter, per task and per worker's iteration (seed 0)."""
    from sim import simulate
    from workbench.run import apply_profile

    cluster, _ = apply_profile(prep.cluster, str(profile_path), name)
    return simulate(
        plan,
        cluster,
        cost_model=profile.cost_model,
        run_id=name,
        jitter=profile.jitter,
        iteration_jitter=profile.iteration_jitter,
    ).trace


def cores() -> int:
    """The cores this machine's worker processes share."""
    return os.cpu_count() or 1


def fit_contention(
    points: Sequence[Any],
    prepared: dict[str, tuple[Any, Any]],
    runs: dict[str, list[Path]],
    opts: FidelityOptions,
    profile_path: Path,
    profile: Any,
) -> tuple[Any, dict[str, Any] | None]:
    """The CPU contention model (:mod:`sim.contention`) fitted on the calibration half's points
    with more workers than cores: each repeat's measured warm epoch against the point simulated on
    the profile; (None, None) without such points."""
    from sim.contention import ContendedRun, demand, fit_efficiency

    fitted = [p for p in points if not p.held_out and p.workers > cores()]
    if not fitted:
        return None, None
    contended = []
    for point in fitted:
        busy, span = demand(
            simulated_trace(*_prepared(prepared, point, opts.out), point.name, profile_path, profile)
        )
        measured, _ = measure(runs[point.name], warm_epochs(opts.epochs), per_run=True)
        contended += [ContendedRun(point.name, busy, span, m) for m in measured.epoch]
    model, quality = fit_efficiency(contended, cores())
    return model, {**model.to_dict(), **quality}


def _warm_words(epochs: int) -> str:
    warm = warm_epochs(epochs)
    return f"epoch {warm[0]}" if len(warm) == 1 else f"epochs {warm[0]}-{warm[-1]}"


def first_warm(epochs: int) -> int:
    """The first warm epoch of a run of ``epochs``: epoch 1 (epoch 0 pays the cold start: the
    schedule built, kernels compiled, buffers first touched: calibration's rule, which this one
    shares), or 0 for a one-epoch run."""
    from sim.calibrate.sources import REAL_COLD_EPOCHS

    return REAL_COLD_EPOCHS if epochs > REAL_COLD_EPOCHS else 0


def warm_epochs(epochs: int) -> range:
    """The epochs of a run of ``epochs`` that the fidelity experiment measures: every warm one."""
    return range(first_warm(epochs), epochs)


def measure(
    folders: list[Path], epochs: Sequence[int], per_run: bool = False
) -> tuple[Any, list[dict[str, float]]]:
    """The measured time, busy seconds per phase and iteration times of ``epochs`` (the warm ones) in
    each run folder, and the machine's load around each run (where recorded).

    Each epoch is one repeat, or with ``per_run`` each run folder is: its median epoch time and
    median busy seconds per phase over ``epochs``, and all their iteration times. A run's warm epochs
    differ by more than runs do (six-iteration epochs on the 2-core VM: 26-35% apart within a run,
    against a standard deviation of 9% between runs' medians, 2026-11-27), so the median of a run's
    epochs is the steadier repeat, and the spread across repeats stays a spread between runs.
    """
    import numpy as np
    import pandas as pd

    from sim.calibrate.fidelity import Measured, iteration_times, phase_busy
    from workbench.trace import read_trace

    measured = Measured()
    loads = []
    for folder in folders:
        trace = read_trace(folder / "trace.parquet")
        results = pd.read_csv(folder / "results.csv")
        times = [float(results.loc[results["epoch"] == epoch, "epoch_s"].iloc[0]) for epoch in epochs]
        phases = [phase_busy(trace[trace["epoch"] == epoch]) for epoch in epochs]
        iterations = [iteration_times(trace[trace["epoch"] == epoch]) for epoch in epochs]
        if per_run:
            names = sorted({name for busy in phases for name in busy})
            measured.epoch.append(float(np.median(times)))
            measured.phases.append(
                {name: float(np.median([busy.get(name, 0.0) for busy in phases])) for name in names}
            )
            measured.iterations.append([t for one in iterations for t in one])
        else:
            measured.epoch += times
            measured.phases += phases
            measured.iterations += iterations
        if (folder / "load.json").exists():
            loads.append(json.loads((folder / "load.json").read_text()))
    return measured, loads


def machine_load(loads: list[dict[str, float]]) -> dict[str, Any]:
    """This machine's CPU count, the 1-minute load average around the runs, and the share of the
    machine's CPU time other processes took while they ran (median and max over the runs that
    recorded it, ``others_cpu`` in their ``load.json``; None where none did)."""
    import numpy as np

    around = [x["load_before"] for x in loads] + [x["load_after"] for x in loads]
    others = [float(x["others_cpu"]) for x in loads if isinstance(x.get("others_cpu"), int | float)]
    return {
        "cpus": os.cpu_count(),
        "load_median": float(np.median(around)) if loads else None,
        "load_max": max((max(x["load_before"], x["load_after"]) for x in loads), default=None),
        "others_cpu_median": float(np.median(others)) if others else None,
        "others_cpu_max": max(others, default=None),
        "others_cpu_runs": len(others),
    }


def machine_was_shared(machine: dict[str, Any], workers: int) -> bool:
    """Whether other processes shared the cores with the runs: by their share of the CPU time where
    the runs recorded it (more than ``sim.calibrate.OTHERS_LIMIT`` in some run), else by a load
    average above the worker count (which, run after run, also counts the previous run's workers)."""
    from sim.calibrate import OTHERS_LIMIT

    if machine.get("others_cpu_max") is not None:
        return machine["others_cpu_max"] > OTHERS_LIMIT
    return machine.get("load_max") is not None and machine["load_max"] > workers


def load_sentence(machine: dict[str, Any]) -> str:
    """How loaded the machine was while the runs ran, in words, for reports and pages."""

    def number(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    average = f"median {number(machine.get('load_median'))}, max {number(machine.get('load_max'))}"
    if machine.get("others_cpu_median") is not None:
        return (
            f"other processes took {machine['others_cpu_median']:.1%} of the machine's CPU time while the "
            f"runs ran (median over {machine['others_cpu_runs']} runs; max {machine['others_cpu_max']:.1%}). "
            f"The 1-minute load average around the runs ({average}) counts the runs' own workers and, run "
            "after run, the previous run's for a minute, so it reads high on a quiet machine."
        )
    return (
        f"1-minute load average around the runs: {average} (a load above the worker count means other "
        "processes shared the cores, which inflates and scatters the measured times; run after run it also "
        "counts the previous run's workers for a minute; these runs did not record the CPU time others took)."
    )


def per_scheme(table: Any, by: str = "scheme") -> dict[str, dict[str, float]]:
    """Held-out epoch errors of each scheme (or each value of the column ``by``): median and worst
    |error|, mean signed error."""
    epoch = table[table["quantity"] == "epoch"]
    if "reliable" in epoch.columns:  # as the summary's figures: unreliable repeats are not scored
        epoch = epoch[epoch["reliable"].astype(bool)]
    return {
        str(name): {
            "median_abs_error": float(g["error"].abs().median()),
            "worst_abs_error": float(g["error"].abs().max()),
            "mean_error": float(g["error"].mean()),
        }
        for name, g in epoch.groupby(by, sort=False)
    }


def _contention_sentence(summary: dict[str, Any], cpus: int | None) -> str:
    """What the report says about workers that outnumber the cores, and the errors per worker count."""
    fit = summary.get("contention")
    by = "; ".join(
        f"{w} workers: median {v['median_abs_error']:.1%}, worst {v['worst_abs_error']:.1%}"
        for w, v in summary.get("workers", {}).items()
    )
    per_count = f" Held-out epoch error by worker count: {by}." if by else ""
    if fit is None:
        return (
            f"No fitted configuration had more workers than the {cpus} CPUs, so no contention model was fitted; "
            "a held-out one that has is simulated as if each worker had a core." + per_count
        )
    return (
        f"Contention (sim.contention): runs with more workers than the {fit['cores']} cores are simulated with a "
        f"core each and stretched by max(1, busy / (efficiency x cores x span)); efficiency {fit['efficiency']:.3f}, "
        f"the median of {fit['runs']} fitted repeats' implied values ({fit['implied_efficiency_min']:.3f}-"
        f"{fit['implied_efficiency_max']:.3f}); on those repeats the median |error| is "
        f"{fit['median_abs_error']:.1%} with it and {fit['median_abs_error_uncontended']:.1%} without."
        + per_count
    )


def noise_sentence(summary: dict[str, Any]) -> str:
    """What compute jitter the held-out runs were simulated with (``summary["calibration"]["noise"]``)."""
    calibration = summary.get("calibration") or {}
    if "noise" not in calibration:  # a summary written before the noise was fitted
        return ""
    noise = calibration["noise"]
    if not noise:
        return "Simulated without compute jitter: no compute task of the fitted runs recurred across their warm epochs."
    shared = noise.get("iteration_jitter")
    return (
        f"Simulated with the profile's compute jitter: each compute task's time scaled by a mean-one lognormal "
        f"factor of sigma {noise['compute_jitter']:.3f}"
        + (
            f" and by one of sigma {shared:.3f} shared by the tasks of a worker's iteration"
            if shared is not None
            else ""
        )
        + f" (seed 0), fitted to {noise['rows']:,} compute rows of {noise['tasks']:,} tasks that recur across the "
        "fitted runs' warm epochs (sim.calibrate.noise)."
    )


def _report(table: Any, summary: dict[str, Any], opts: FidelityOptions) -> str:
    from sim.calibrate.fidelity import tails_sentence

    epoch = table[table["quantity"] == "epoch"]
    lines = [
        "# Fidelity: simulated vs measured on held-out configurations",
        "",
        f"{', '.join(dict.fromkeys(epoch['scheme'].astype(str)))} on CPU worker processes, {opts.repeats} runs per "
        f"configuration, {_warm_words(opts.epochs)} measured (a run's median over them is one repeat); "
        f"{summary['configurations']} held-out configurations.",
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
        tails_sentence(summary),
        "",
        noise_sentence(summary),
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
        f"Machine: {machine['cpus']} CPUs; {load_sentence(machine)}",
        "",
        _contention_sentence(summary, machine["cpus"]),
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
