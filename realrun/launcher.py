"""``gnnwb realrun CONFIG.toml --workers N --device cpu|cuda``: real training, one process per worker.

The launcher prepares the run once through the spine (:func:`workbench.run.prepare_run`:
graph, partition, placement, the sampled epoch) and builds the scheme's plan, then starts
one process per worker (:mod:`realrun.processes`: forks of a server that imported PyTorch
once) that joins torch.distributed
over 127.0.0.1 on a free port: gloo on CPU, NCCL when each worker has its own GPU (with a
gloo group beside it for the host-to-host feature fetches). Each worker trains the
configured epochs on the prepared minibatches (:mod:`realrun.worker`, the scheme under
:mod:`realrun.schemes`) and appends its timed rows to its own part file; the launcher
merges them into the run's folder (``--out``, default ``reports/runs/<name>-real/``):

``trace.parquet``      the shared trace schema, rows named by the plan's task ids (:mod:`realrun.traces`)
``results.csv``        per epoch: time, busy seconds and bytes per phase, loss, accuracy, measured vs planned bytes
``run.json``           status (complete or the error), device, back end, library versions, limits, and
                       ``files``: which of these files hold what
``config.toml``        the configuration as executed: the one given with ``--workers`` and the parameters
                       the real executor imposes, so the plan rebuilt from it is the plan that ran
``config.given.toml``  the configuration as given, when it differs from the executed one
``plan.json``          the plan the workers ran (:meth:`workbench.plan.Plan.save`): calibration and
                       ``gnnwb trace show`` read it rather than rebuilding one that may differ
``hardware.toml``      the cluster the plan was built for (the layout ``gnnwb hardware export`` writes)
``load.json``          other processes' share of the machine's CPU time while the workers ran, and the
                       1-minute load average before and after the run, CPUs and workers (``gnnwb
                       calibrate`` warns when traces were taken under different loads)
``parts/``             each worker's raw rows

Across machines the same worker runs under torchrun (every process prepares the run
itself; rank 0 gathers the rows and writes the folder)::

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank K \\
        --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
        -m realrun.torchrun CONFIG.toml --device cuda --out reports/runs/NAME-real

Failures. A watchdog polls every worker's status (phase, iteration, whether it is inside
a call that waits for other workers) ten times a second:

* a worker that raises reports where (an ``error`` line in its part file) and exits; a
  worker that dies without a word (killed, ``os._exit``) shows by its exit code;
* a worker that hangs outside communication leaves the others waiting in their next
  collective: once one of them has waited ``--collective-timeout`` seconds, the hung
  worker is named (its last phase and iteration);
* ``--time-limit`` bounds the whole run.

``--emulate-network`` (root on Linux) runs every worker in its own network namespace,
joined through a bridge by veth links that tc shapes to the cluster's network link rate
(or ``--link-bandwidth``), so remote fetches and all-reduce cross a real bandwidth-limited
TCP network; ``run.json``'s ``network`` describes it (tc netem is missing here, so no
latency is added, and it says so). The namespaces are removed when the run ends, after
the workers are stopped, also when it fails (:mod:`realrun.network`).

On any of these the launcher stops every other worker (SIGTERM, SIGKILL a second later),
writes the trace of the rows written so far and the finished epochs' results, and
fails with one line naming the worker. A worker that outlives its launcher ends itself
(it watches its parent). The back end's own timeout is the collective timeout plus a
margin, so the launcher decides first, and names the right worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import pickle
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realrun.machine_cpu import cpu_sample, others_share
from workbench import validate
from workbench.config import RunConfig, StrategyConfig, load_config
from workbench.errors import ConfigError, WorkbenchError
from workbench.plan import Plan
from workbench.run import PreparedRun

DEFAULT_TIME_LIMIT = 3600.0
DEFAULT_COLLECTIVE_TIMEOUT = 120.0
# Seconds the back end waits beyond the collective timeout before it gives up by itself.
BACKEND_MARGIN = 30.0
POLL = 0.1
STOP_GRACE = 1.0  # seconds between SIGTERM and SIGKILL
FAILURE_SETTLE = 0.5  # after a first failure, how long to wait for the rest of the story


class WorkerFailure(WorkbenchError):
    """A worker died, raised or hung; the message names it."""


@dataclass
class RunSummary:
    out: Path
    trace_rows: int
    results: list[dict[str, Any]]
    complete: bool
    error: str | None = None

    def describe(self) -> str:
        lines = []
        for r in self.results:
            lines.append(
                f"epoch {r['epoch']}: {r['epoch_s'] * 1e3:.1f} ms, loss {r['loss']:.4f}, "
                f"train acc {r['train_acc']:.3f}, test acc {r['test_acc']:.3f}, "
                f"bytes match plan: {r['bytes_match_plan']}"
            )
        lines.append(
            f"wrote {self.out}/: trace.parquet ({self.trace_rows:,} rows), results.csv, run.json, "
            "and what ran: config.toml, plan.json, hardware.toml"
        )
        return "\n".join(lines)


def default_out(config: RunConfig) -> Path:
    return Path("reports") / "runs" / f"{config.name}-real"


def check_device(device: str, workers: int) -> None:
    """A clear error for a device request this machine cannot serve (``workers`` 0: only whether
    the device exists, before the run is prepared)."""
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"--device {device!r}; allowed: cpu, cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                "--device cuda: this machine has no CUDA device that torch can use; use --device cpu"
            )
        have = torch.cuda.device_count()
        if workers and workers > have:
            raise ConfigError(
                f"--device cuda: {workers} workers need {workers} GPUs (one per worker), this machine has {have}"
            )


def prepare_real_run(
    config_path: str | Path,
    workers: int | None,
    device: str,
    *,
    progress: bool = False,
    local_workers: int | None = None,
) -> tuple[PreparedRun, Plan, RunConfig]:
    """Load the configuration (``workers`` overrides ``[training] workers``), check the device and
    the scheme, prepare the run and build its plan. ``local_workers``: how many of the workers
    run on this machine (default all; torchrun says how many per node)."""
    from realrun.schemes import real_executor
    from workbench.registry import EXECUTION_SCHEMES
    from workbench.run import prepare_run, strategy_config

    check_device(device, 0)  # no GPU at all is refused before anything is prepared
    config = load_config(config_path)
    if workers is not None:
        if workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {workers}")
        config = dataclasses.replace(config, training=dataclasses.replace(config.training, workers=workers))
    scheme = strategy_config(config, "execution")
    assert scheme is not None  # the spine always has a default execution scheme
    executor = real_executor(scheme.name)  # a scheme without one is refused before anything is prepared
    imposed = EXECUTION_SCHEMES.get(scheme.name).real_run_params or {}
    config = as_executed(config, scheme, dict(imposed))
    prepared = prepare_run(config, progress=progress)
    check_device(device, local_workers or prepared.inputs.num_workers)
    executor.check(config, prepared.inputs)  # what the executor cannot run, refused before any worker starts
    return prepared, prepared.plan(), config


def as_executed(config: RunConfig, scheme: StrategyConfig, imposed: dict[str, Any]) -> RunConfig:
    """``config`` with the scheme parameters its real executor imposes (the scheme's declared
    ``real_run_params``), so the run's plan describes what the workers do; a configuration that
    asks for another value is an error rather than a plan the run would not follow."""
    for key, value in imposed.items():
        given = scheme.params.get(key, value)
        if given != value:
            raise ConfigError(
                f"[execution] {key} = {given!r}: the real {scheme.name!r} executor runs with "
                f"{key} = {value!r}; set that or leave {key} out for gnnwb realrun"
            )
    if not imposed:
        return config
    executed = StrategyConfig(scheme.kind, scheme.name, {**scheme.params, **imposed})
    return dataclasses.replace(config, strategies={**config.strategies, "execution": executed})


def free_port(port: int = 0) -> int:
    """``port`` if it is free on 127.0.0.1 (0: any free port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"--port {port}: in use on 127.0.0.1; pick another or leave --port out for a free one"
                ) from None
            raise
        return int(s.getsockname()[1])


def launch(
    prepared: PreparedRun,
    plan: Plan,
    config_path: str | Path,
    *,
    device: str = "cpu",
    out: Path | None = None,
    epochs: int | None = None,
    evaluate: bool = True,
    time_limit: float = DEFAULT_TIME_LIMIT,
    collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT,
    port: int = 0,
    emulate_network: bool = False,
    link_bandwidth_bps: float | None = None,
    layers: str = "auto",
    state: str | Path | None = None,
) -> RunSummary:
    """Run ``prepared`` for real with one process per worker; raises :class:`WorkerFailure` naming
    the worker when one dies or hangs (after writing what the workers recorded).

    ``layers``: ``auto`` (DGL's layers where DGL runs: the CPU; the plain-PyTorch twins on a
    GPU), ``dgl`` or ``torch`` (:func:`realrun.layers.layer_backend`; decided here, once).

    ``emulate_network``: every worker in its own network namespace, links shaped to
    ``link_bandwidth_bps`` bits/s (default: the cluster's network link), see
    :mod:`realrun.network`; the namespaces are removed when the run ends, however it ends.

    ``state``: a file the workers read the model and optimizer state from at the start (when it
    exists) and rank 0 writes at the end, so one training continues over several launches."""
    if not time_limit > 0 or not collective_timeout > 0:
        raise ConfigError("--time-limit and --collective-timeout must be positive")
    # Before any worker starts: a port beyond 65535 or an output path that is a file would
    # otherwise fail after the workers were spawned.
    validate.port(port, "--port")
    if out is not None:
        validate.writable_folder(out, "run folder")
    from realrun.layers import layer_backend

    chosen = layer_backend(layers, "cpu" if device == "cpu" else "cuda").name
    world = prepared.inputs.num_workers
    with contextlib.ExitStack() as stack:
        net = None
        if emulate_network:
            net = stack.enter_context(_network(prepared, device, world, link_bandwidth_bps))
        return _launch(
            prepared, plan, config_path, device=device, out=out, epochs=epochs, evaluate=evaluate,
            time_limit=time_limit, collective_timeout=collective_timeout, port=port, net=net, layers=chosen,
            state=state,
        )  # fmt: skip
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns or raises


def _network(prepared: PreparedRun, device: str, world: int, rate_bps: float | None) -> Any:
    """The emulated network's context for this run (checks first: device, rate, permission)."""
    from realrun.network import cluster_link_bandwidth, emulated_network

    if device != "cpu":
        raise ConfigError(
            "--emulate-network runs with --device cpu only (NCCL between GPUs of one machine would "
            "bypass the emulated links); drop --emulate-network or use --device cpu"
        )
    if rate_bps is None:
        rate_bps = cluster_link_bandwidth(prepared.cluster)
        if rate_bps is None:
            raise ConfigError(
                f"--emulate-network: cluster {prepared.cluster.name!r} has no network link to take the "
                "rate from (one machine); give one with --link-bandwidth, e.g. --link-bandwidth 10Gbit"
            )
    return emulated_network(world, rate_bps)


def _launch(
    prepared: PreparedRun,
    plan: Plan,
    config_path: str | Path,
    *,
    device: str,
    out: Path | None,
    epochs: int | None,
    evaluate: bool,
    time_limit: float,
    collective_timeout: float,
    port: int,
    net: Any,
    layers: str,
    state: str | Path | None = None,
) -> RunSummary:
    out = Path(out) if out is not None else default_out(prepared.config)
    parts = _fresh_run_folder(out)
    load_before = os.getloadavg()[0]
    cpu_before = cpu_sample()
    setup = _worker_setup(
        prepared, plan, parts, device=device, epochs=epochs, evaluate=evaluate,
        collective_timeout=collective_timeout, port=port, net=net, layers=layers, state=state,
    )  # fmt: skip
    error = _run_workers(setup, prepared.inputs.num_workers, net, time_limit, collective_timeout)
    cpu = others_share(cpu_before, cpu_sample())  # the workers have ended: their time is the run's own
    summary = finish_run(
        prepared,
        plan,
        out,
        config_path,
        complete=error is None,
        error=error,
        network=net.metadata() if net is not None else None,
    )
    write_load(out, load_before, prepared.inputs.num_workers, cpu)
    if error is not None:
        raise WorkerFailure(
            f"{error}; stopped the other workers; kept {summary.trace_rows} trace rows and "
            f"{len(summary.results)} finished epoch(s) in {out}/"
        )
    return summary


def write_load(out: Path, before: float, workers: int, cpu: dict[str, Any] | None = None) -> None:
    """``load.json``: what else ran on the machine, so calibration can say when traces were taken
    under different loads: the share of the machine's CPU time other processes took while the
    workers ran (``others_cpu``, ``steal``, ``window_s``: :mod:`realrun.machine_cpu`, Linux only),
    and the 1-minute load average just before and just after the run with the CPU and worker
    counts (the average lags: before a run it counts the previous run's workers, after it this
    run's own)."""
    load = {
        "load_before": before,
        "load_after": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "workers": workers,
        **(cpu or {}),
    }
    (out / "load.json").write_text(json.dumps(load) + "\n")


def _fresh_run_folder(out: Path) -> Path:
    """``out`` emptied of an earlier run's outputs (its ``config.toml`` may be the one this run was
    given, so :func:`finish_run` overwrites that rather than it going now); its empty ``parts/``."""
    parts = out / "parts"
    if parts.exists():
        shutil.rmtree(parts)
    parts.mkdir(parents=True)
    for stale in ("trace.parquet", "results.csv", "run.json", "plan.json", "hardware.toml", "load.json"):
        (out / stale).unlink(missing_ok=True)
    return parts


def _worker_setup(
    prepared: PreparedRun,
    plan: Plan,
    parts: Path,
    *,
    device: str,
    epochs: int | None,
    evaluate: bool,
    collective_timeout: float,
    port: int,
    net: Any,
    layers: str,
    state: str | Path | None,
) -> Any:
    """What every worker is handed (:class:`realrun.worker.WorkerSetup`)."""
    from realrun.faults import FAULT_ENV, check_fault
    from realrun.worker import WorkerSetup

    return WorkerSetup(
        prepared=prepared,
        task_index={t.id: k for k, t in enumerate(plan.tasks)},
        device=device,
        parts=str(parts),
        epochs=epochs or prepared.config.training.epochs,
        evaluate=evaluate,
        backend_timeout=collective_timeout + BACKEND_MARGIN,
        # Emulated: rank 0's address in its own namespace, where every port is free.
        init_method=f"tcp://{net.addresses[0]}:{port or 29500}"
        if net is not None
        else f"tcp://127.0.0.1:{free_port(port)}",
        fault=check_fault(os.environ.get(FAULT_ENV)),
        layers=layers,
        state=str(state) if state is not None else None,
    )


def _run_workers(
    setup: Any, world: int, net: Any, time_limit: float, collective_timeout: float
) -> str | None:
    """Start ``world`` workers on ``setup``, watch them until they finish (None) or one fails (the
    reason), and leave none running."""
    from realrun.processes import worker_context
    from realrun.schemes.base import STATUS_FIELDS

    # The workers load the setup (graph, epoch, plan index: megabytes) from a file. Handed
    # through the start method's pipe instead, a worker that dies while starting would leave the launcher
    # blocked in Process.start() writing the rest of it (the parent holds the pipe's read end
    # until the write returns).
    scratch = Path(tempfile.mkdtemp(prefix="gnnwb-realrun-"))
    setup_path = scratch / "setup.pickle"
    with setup_path.open("wb") as f:
        pickle.dump(setup, f, protocol=pickle.HIGHEST_PROTOCOL)
    context = worker_context()
    status = context.Array("d", world * len(STATUS_FIELDS), lock=False)
    procs = _worker_processes(context, world, str(setup_path), status, net)
    started = time.monotonic()
    try:
        for p in procs:
            p.start()
        return _watch(procs, status, Path(setup.parts), started, time_limit, collective_timeout)
    finally:
        _stop(procs)
        shutil.rmtree(scratch, ignore_errors=True)


def _worker_processes(context: Any, world: int, setup_path: str, status: Any, net: Any) -> list[Any]:
    """One (unstarted) process per worker; under an emulated network each enters its namespace first."""
    from realrun.processes import worker_process
    from realrun.worker import spawned

    if net is None:
        return [
            worker_process(context, spawned, (rank, world, setup_path, status), name=f"gnnwb-worker-{rank}")
            for rank in range(world)
        ]
    return [
        worker_process(
            context,
            spawned_in_namespace,
            (net.worker_ns[rank], net.ifname, rank, world, setup_path, status),
            name=f"gnnwb-worker-{rank}",
        )
        for rank in range(world)
    ]


def spawned_in_namespace(
    netns: str, ifname: str, rank: int, world: int, setup_path: str, status_array: Any
) -> None:
    """The process target under ``--emulate-network``: enter the worker's network namespace
    before anything opens a socket (gloo's threads, started later, inherit it), then run
    :func:`realrun.worker.spawned`."""
    from realrun.network import enter
    from realrun.worker import spawned

    enter(netns)
    os.environ["GLOO_SOCKET_IFNAME"] = ifname
    spawned(rank, world, setup_path, status_array)


def _watch(
    procs: list[Any], status: Any, parts: Path, started: float, time_limit: float, collective_timeout: float
) -> str | None:
    """Poll the workers until all finish (None) or one fails, hangs or time runs out (the reason)."""
    from realrun.schemes.base import STATUS_PHASES, read_status

    world = len(procs)
    while True:
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return None
        if any(c not in (None, 0) for c in codes):
            time.sleep(FAILURE_SETTLE)  # let the others' reports of the same failure arrive
            return _diagnose_failure(procs, status, parts)
        now = time.monotonic()
        if now - started > time_limit:
            states = [read_status(status, w) for w in range(world)]
            where = ", ".join(
                f"worker {w}: {STATUS_PHASES[int(s['phase'])]} iteration {int(s['iteration'])}"
                for w, s in enumerate(states)
            )
            return f"time limit of {time_limit:g} s reached ({where})"
        states = [read_status(status, w) for w in range(world)]
        if all(s["joined"] for s in states):
            waiting = [
                w
                for w, s in enumerate(states)
                if codes[w] is None and s["in_comm"] and now - s["since"] > collective_timeout
            ]
            hung = _diagnose_hang(states, codes, waiting, now, collective_timeout) if waiting else None
            if hung is not None:
                return hung
        time.sleep(POLL)


def _where(state: dict[str, float]) -> str:
    from realrun.schemes.base import STATUS_PHASES

    return f"epoch {int(state['epoch'])} iteration {int(state['iteration'])}, {STATUS_PHASES[int(state['phase'])]}"


def _diagnose_hang(
    states: list[dict[str, float]], codes: list[int | None], waiting: list[int], now: float, timeout: float
) -> str | None:
    """Name the worker(s) the others wait for: alive and not in a communication call; if every
    live worker waits, the one that got least far."""
    from realrun.schemes.base import STATUS_PHASES, UNWATCHED_PHASES

    alive = [w for w, c in enumerate(codes) if c is None]
    stuck = [w for w in alive if not states[w]["in_comm"]]
    exempt = [w for w in stuck if STATUS_PHASES[int(states[w]["phase"])] in UNWATCHED_PHASES]
    if stuck and len(exempt) == len(stuck):
        return None  # they wait for long local work (evaluation): the time limit bounds it
    if not stuck:
        progress = {w: (states[w]["epoch"], states[w]["iteration"]) for w in alive}
        least = min(progress.values())
        stuck = [w for w in alive if progress[w] == least]
    names = ", ".join(f"worker {w}" for w in stuck)
    idle = max(now - states[w]["since"] for w in stuck)
    return (
        f"{names} hung ({_where(states[stuck[0]])}; no progress for {idle:.1f} s) while worker(s) "
        f"{', '.join(map(str, waiting))} waited for it over {timeout:g} s in a collective"
    )


def _diagnose_failure(procs: list[Any], status: Any, parts: Path) -> str:
    """The first worker that failed on its own (raised outside communication, or died), else the
    first that failed at all."""
    from realrun.schemes.base import read_status
    from realrun.traces import read_parts

    world = len(procs)
    records = read_parts(parts, world)
    codes = [p.exitcode for p in procs]
    reports = []
    for w, code in enumerate(codes):
        if code in (None, 0):
            continue
        err = records.errors.get(w)
        if err is None:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            reports.append((0, w, f"worker {w} died ({how}) at {_where(read_status(status, w))}"))
        else:
            where = f"epoch {err['epoch']} iteration {err['iteration']}, {err['where']}"
            text = f"worker {w} raised {err['type']}: {err['message']} ({where})"
            reports.append((1 if err["in_comm"] else 0, w, text))
    reports.sort()
    return reports[0][2]


def _stop(procs: list[Any]) -> None:
    """SIGTERM every live worker, SIGKILL the ones still there a moment later, reap them all."""
    procs = [p for p in procs if p.pid is not None]  # one that never started has nothing to stop
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()


def finish_run(
    prepared: PreparedRun,
    plan: Plan,
    out: Path,
    config_path: str | Path,
    *,
    complete: bool,
    error: str | None = None,
    network: dict[str, Any] | None = None,
) -> RunSummary:
    """Merge the part files into ``trace.parquet``, ``results.csv`` and ``run.json`` under ``out``,
    beside what the run executed (:func:`save_run_inputs`): the launcher and, under torchrun, rank 0
    both end here, so their folders hold the same files (``network``: the emulated network's
    description, :meth:`realrun.network.EmulatedNetwork.metadata`)."""
    import pandas as pd

    from realrun.traces import build_real_trace, epoch_results, read_parts
    from workbench.trace import write_trace

    inputs = prepared.inputs
    records = read_parts(out / "parts", inputs.num_workers)
    device_workers = {gpu: w for w, gpu in enumerate(inputs.workers)}
    trace = build_real_trace(plan, records, prepared.config.name, device_workers)
    write_trace(trace, out / RUN_FILES["trace"])
    results = epoch_results(prepared, plan, trace, records) if len(trace) else []
    # With no finished epoch the file still has a header, so a reader gets an empty table, not an error.
    table = pd.DataFrame(results) if results else pd.DataFrame(columns=list(EMPTY_RESULTS_COLUMNS))
    table.to_csv(out / RUN_FILES["results"], index=False)
    files = save_run_inputs(prepared, plan, out, config_path)
    meta = _run_meta(prepared, records, results, complete=complete, error=error, network=network)
    meta["files"] = files
    (out / "run.json").write_text(json.dumps(meta, indent=1, default=str))
    return RunSummary(out, len(trace), results, complete, error)


# The columns of a results.csv without a finished epoch (a run that failed in its first).
EMPTY_RESULTS_COLUMNS = ("epoch", "loss", "train_acc", "test_acc", "bytes_match_plan")

# What a run folder holds beside run.json (run.json's "files" names them, "given_config" only
# when the configuration as given differs from the one executed).
RUN_FILES = {
    "trace": "trace.parquet",
    "results": "results.csv",
    "config": "config.toml",
    "plan": "plan.json",
    "hardware": "hardware.toml",
}
GIVEN_CONFIG = "config.given.toml"


def save_run_inputs(prepared: PreparedRun, plan: Plan, out: Path, config_path: str | Path) -> dict[str, str]:
    """Write what the run executed into ``out``: ``config.toml`` (``prepared.config``: the given
    configuration as the real executor rewrote it), ``plan.json`` and ``hardware.toml``, and keep
    the configuration as given (``config.given.toml``) when it says something else. Returns
    run.json's ``files``: what each file holds, by name."""
    from workbench.tomlfile import toml_text

    files = dict(RUN_FILES)
    given = Path(config_path)
    kept = out / GIVEN_CONFIG
    same_file = given.resolve() == kept.resolve()
    # Before config.toml is written: the given file may be the config.toml of this folder.
    if given.is_file() and config_differs(given, prepared.config):
        if not same_file:
            shutil.copyfile(given, kept)
        files["given_config"] = GIVEN_CONFIG
    elif not same_file:
        kept.unlink(missing_ok=True)  # an earlier run's, which this run's config.toml contradicts
    (out / RUN_FILES["config"]).write_text(toml_text(prepared.config.to_dict()))
    plan.save(out / RUN_FILES["plan"])
    (out / RUN_FILES["hardware"]).write_text(prepared.cluster.to_toml())
    return files


def config_differs(given: Path, executed: RunConfig) -> bool:
    """Whether the configuration file ``given`` says anything other than ``executed`` does."""
    try:
        return load_config(given, check_strategies=False) != executed
    except WorkbenchError:
        return True  # changed since the run began, into something unreadable: keep it as it is


def _run_meta(
    prepared: PreparedRun,
    records: Any,
    results: list[dict[str, Any]],
    *,
    complete: bool,
    error: str | None,
    network: dict[str, Any] | None,
) -> dict[str, Any]:
    """run.json's fields but ``files``: how the run ended and what it ran on, from the workers' start rows."""
    first = records.starts.get(0, {})
    return {
        "status": "complete" if complete else "failed",
        "error": error,
        "run": prepared.config.name,
        "scheme": prepared.scheme.registered_name,
        "workers": prepared.inputs.num_workers,
        "epochs_finished": len(results),
        "device": first.get("device"),
        "device_name": first.get("device_name"),
        "backend": first.get("backend"),
        "layers": first.get("layers"),
        "torch": first.get("torch"),
        "cuda": first.get("cuda"),
        "hosts": sorted({s.get("host", "") for s in records.starts.values()}),
        "errors": {str(w): {k: v for k, v in e.items() if k != "t"} for w, e in records.errors.items()},
        "network": network or {"emulated": False},
    }
