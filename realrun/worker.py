"""One training worker: joins torch.distributed, builds its feature store, trains the epochs.

The same :func:`run_worker` runs under the launcher (:mod:`realrun.launcher`, one
process per worker on one machine, :mod:`realrun.processes`) and under ``torchrun`` across machines
(:mod:`realrun.torchrun`). Under torchrun every process prepares the run itself from the configuration (graph,
partition, placement, the sampled epoch: all deterministic for the configuration's
seed, and cached on disk), ranks come from torchrun's environment, and rank 0 gathers
every worker's trace rows (``torch.distributed.gather_object``) and writes the run's
folder. torchrun's own agent stops the other workers when one fails; the launcher's
watchdog (hang detection naming the worker) is the single-machine launcher's.

A worker writes its part file ``parts/rank{R}.jsonl`` as it goes: a line per timed plan
task (``row``), per epoch start and end (with the bytes it moved and its loss and
accuracy), and, if it fails, an ``error`` line saying what and where (inside a
communication call or not, which tells the launcher a worker that failed from one that
only gave up waiting for it).

Test-only fault injection: the environment variable ``GNNWB_REALRUN_FAULT`` set to
``KIND:RANK:ITERATION`` (``KIND``: ``raise``, ``hang`` or ``exit``) makes worker ``RANK``
raise, sleep forever, or die without a word at the start of that iteration of its first
epoch. The launcher's tests use it to check that failures end the run cleanly.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from realrun import p2p
from realrun.feature_store import ByteCounter, FeatureStore
from realrun.layers import layer_backend
from realrun.schemes import real_executor
from realrun.schemes.base import PartLog, RealExecutor, Status, WorkerContext
from workbench.run import PreparedRun


@dataclass
class WorkerSetup:
    """What every worker needs (pickled to each spawned process)."""

    prepared: PreparedRun
    task_index: dict[str, int]  # plan task id -> position in the plan
    device: str  # "cpu" or "cuda"
    parts: str  # folder of the part files
    epochs: int
    evaluate: bool
    backend_timeout: float  # seconds a collective may wait before the back end gives up
    init_method: str  # "tcp://127.0.0.1:PORT" (launcher) or "env://" (torchrun)
    fault: str | None = None
    collect: bool = False  # gather every part file to rank 0 at the end (torchrun)
    layers: str = "auto"  # realrun.layers.LAYER_CHOICES: DGL's layers where DGL runs, else plain PyTorch
    # The model and optimizer state, read at the start when the file exists and written by rank 0
    # at the end: one training continued over several launches (the online ROC loop).
    state: str | None = None


def part_path(parts: str | Path, rank: int) -> Path:
    return Path(parts) / f"rank{rank}.jsonl"


def spawned(rank: int, world: int, setup_path: str, status_array: Any) -> None:
    """The launcher's process target: worker ``rank`` of ``world`` on this machine, its
    :class:`WorkerSetup` pickled at ``setup_path``."""
    _exit_with_parent()
    with open(setup_path, "rb") as f:
        setup = pickle.load(f)
    exit_worker(run_worker(rank, world, rank, setup, Status(status_array, rank)))


def exit_worker(code: int) -> None:
    """End this worker process with ``code`` without the interpreter's teardown (gloo's threads can
    make it slow), but with multiprocessing's exit finalizers: a named semaphore a library made here
    (numba's thread-pool start lock, on the bulk sampler's first parallel call) is otherwise never
    unlinked by its owner, and the resource tracker warns of it as leaked when the launcher's
    process ends (76 after the 272 launches of a scheme fidelity grid)."""
    from multiprocessing import util

    sys.stdout.flush()
    sys.stderr.flush()
    util._run_finalizers(0)  # what a normal exit runs first: the finalizers of priority 0 and up
    os._exit(code)


def _exit_with_parent() -> None:
    """End this worker if the launcher dies (no orphan keeps a port or a core)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_worker(rank: int, world: int, local_rank: int, setup: WorkerSetup, status: Status) -> int:
    """Train as worker ``rank``; 0 when it finished, 1 when it failed (an ``error`` line says why)."""
    log = PartLog(part_path(setup.parts, rank))
    p2p.install_standins_from_environment()
    try:
        _train(rank, world, local_rank, setup, status, log)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then the worker ends
        log.write(
            {
                "t": "error",
                "rank": rank,
                "wall": time.time(),
                "type": type(exc).__name__,
                "message": str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                "in_comm": status.in_comm,
                "where": status.where,
                "epoch": status.epoch,
                "iteration": status.iteration,
                "traceback": traceback.format_exc(),
            }
        )
        return 1
    finally:
        log.close()
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a broken group may not tear down cleanly
                pass


def _train(rank: int, world: int, local_rank: int, setup: WorkerSetup, status: Status, log: PartLog) -> None:
    device = _device(setup, world, local_rank)
    executor_class = real_executor(setup.prepared.scheme.registered_name)
    remote_group = _join(rank, world, setup, status, device)
    status.phase("setup")
    ctx = _context(rank, world, device, setup, status, log, remote_group)
    executor = executor_class(ctx)
    if setup.state and Path(setup.state).exists():
        executor.restore(torch.load(setup.state, map_location=device))
    _barrier(status)
    status.joined()
    ctx.t0 = time.perf_counter()  # every worker's clock starts as the barrier releases them
    log.write(_start_record(rank, world, device, ctx))
    ctx.counter.take()  # setup moved nothing the plan counts
    for epoch in range(setup.epochs):
        _train_epoch(ctx, executor, setup, epoch)
    _barrier(status)
    if setup.state and rank == 0:  # every worker holds the same model after the last step
        torch.save(executor.checkpoint(), setup.state + ".tmp")
        os.replace(setup.state + ".tmp", setup.state)
    log.write({"t": "done", "rank": rank})
    status.phase("done")
    if setup.collect:
        log.file.flush()
        _collect_parts(rank, world, setup.parts)


def _device(setup: WorkerSetup, world: int, local_rank: int) -> torch.device:
    """This worker's device (its own GPU under CUDA), and its share of the CPU threads."""
    cuda = setup.device == "cuda"
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(local_world, 1)))
    return device


def _join(
    rank: int, world: int, setup: WorkerSetup, status: Status, device: torch.device
) -> dist.ProcessGroup | None:
    """Join the run's process group; returns the gloo group for feature fetches under CUDA. Under
    NCCL the group is bound to this worker's GPU (``device_id``): without it NCCL guesses the GPU
    from the global rank, which hangs where ranks do not map to GPUs that way (torch warns)."""
    cuda = setup.device == "cuda"
    status.phase("joining")
    status.comm(True)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=setup.init_method,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=setup.backend_timeout),
        **({"device_id": device} if cuda else {}),
    )
    # Feature fetches are host memory to host memory (over TCP), so they take a gloo group
    # even when gradients go over NCCL.
    # The NCCL stand-in (CPU tests) keeps the same two groups, the main one taking NCCL's semantics.
    remote_group = dist.new_group(backend="gloo") if cuda or p2p.standin_installed() else None
    status.comm(False)
    return remote_group


def _context(
    rank: int,
    world: int,
    device: torch.device,
    setup: WorkerSetup,
    status: Status,
    log: PartLog,
    remote_group: dist.ProcessGroup | None,
) -> WorkerContext:
    """What the executor gets: the run, the device, the feature store, the clock and the log."""
    prepared = setup.prepared
    inputs = prepared.inputs
    counter = ByteCounter()
    ctx = WorkerContext(
        rank=rank,
        world=world,
        device=device,
        config=prepared.config,
        inputs=inputs,
        scheme=prepared.scheme,
        task_index=setup.task_index,
        store=None,
        counter=counter,
        log=log,
        status=status,
        t0=time.perf_counter(),
        fault=setup.fault,
        layers=layer_backend(setup.layers, device),
        host_group=remote_group,
    )
    ctx.store = FeatureStore(
        inputs,
        rank,
        device,
        inputs.graph.features,
        counter,
        ctx.now,
        remote_group=remote_group,
        on_comm=ctx.comm,
    )
    return ctx


def _barrier(status: Status) -> None:
    status.phase("barrier")
    status.comm(True)
    dist.barrier()
    status.comm(False)


def _start_record(rank: int, world: int, device: torch.device, ctx: WorkerContext) -> dict[str, Any]:
    cuda = device.type == "cuda"
    return {
        "t": "start",
        "rank": rank,
        "pid": os.getpid(),
        "world": world,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "backend": dist.get_backend(),
        "layers": ctx.layers.name,
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
    }


def _train_epoch(ctx: WorkerContext, executor: RealExecutor, setup: WorkerSetup, epoch: int) -> None:
    """One epoch from a barrier, then worker 0's evaluation outside the timed epoch."""
    status, log = ctx.status, ctx.log
    ctx.epoch = epoch
    status.phase("barrier", epoch=epoch)
    status.comm(True)
    dist.barrier()
    status.comm(False)
    log.write({"t": "epoch_start", "epoch": epoch, "time": ctx.now()})
    totals = executor.run_epoch(epoch)
    end = ctx.now()
    test_acc = None
    if setup.evaluate and ctx.rank == 0:
        status.phase("evaluate")
        test_acc = executor.evaluate()
    log.write(
        {
            "t": "epoch_end",
            "epoch": epoch,
            "time": end,
            "bytes": ctx.counter.take(),
            "test_acc": test_acc,
            **totals,
        }
    )


def _collect_parts(rank: int, world: int, parts: str) -> None:
    """Rank 0 gets every worker's part file (machines need not share a file system)."""
    text = part_path(parts, rank).read_text()
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(text, gathered, dst=0)
    if rank == 0 and gathered is not None:
        for w, body in enumerate(gathered):
            if w != 0:
                part_path(parts, w).write_text(body)
