"""The real-execution interface: what a scheme's executor gets from its worker process (the run,
the device, the feature store, communication groups, a clock, one call to record each planned
task it ran) and what it must do (:class:`RealExecutor`).

An executor's :meth:`RealExecutor.run_epoch` trains one epoch on worker ``ctx.rank`` and calls
:meth:`WorkerContext.row` once per plan task it carried out (a collective: once per
worker, each for its own device). Rows go to the worker's part file as each iteration
begins (:class:`PartLog`), so a run that fails later keeps them. Times come from
:meth:`WorkerContext.now`, which synchronises the device first on a GPU, so a row's end
is when its work really finished.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from realrun import p2p
from realrun.faults import inject_fault
from realrun.feature_store import ByteCounter, FeatureStore, tensor_bytes
from realrun.layers import LayerBackend
from workbench.config import RunConfig
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import ExecutionScheme, SchemeInputs

# What a worker is doing, as the launcher's watchdog sees it (the status array's phase code).
STATUS_PHASES = (
    "starting",
    "joining",
    "setup",
    "sample",
    "gather",
    "forward",
    "backward",
    "allreduce",
    "update",
    "evaluate",
    "barrier",
    "done",
    "migrate",  # hopgnn: a model arriving from another worker
)
PHASE_CODE = {name: code for code, name in enumerate(STATUS_PHASES)}  # the status array's phase code
# Long local work the others may wait for in a collective without it being a hang (the
# time limit still bounds it).
UNWATCHED_PHASES = ("starting", "setup", "evaluate", "done")
STATUS_FIELDS = ("phase", "iteration", "epoch", "in_comm", "since", "joined")
# Engine of each phase's rows, in the simulator's vocabulary (workbench/trace.py).
PHASE_ENGINE = {
    "sample": "cpu",
    "gather_local": "compute",
    "h2d": "h2d",
    "d2h": "d2h",
    "d2d": "d2d",
    "gather_remote": "net",
    "forward": "compute",
    "backward": "compute",
    "allreduce": "collective",
    "update": "compute",
}


class Status:
    """One worker's slot in the launcher's shared status array (no-op without one: torchrun)."""

    def __init__(self, array: Any | None, rank: int) -> None:
        self.array = array
        self.base = rank * len(STATUS_FIELDS)
        self.slot = {name: self.base + k for k, name in enumerate(STATUS_FIELDS)}
        # The worker's own copy: an error report says where the worker was.
        self.where = "starting"
        self.iteration = -1
        self.epoch = 0
        self.in_comm = False

    def _put(self, name: str, value: float) -> None:
        if self.array is not None:
            self.array[self.slot[name]] = float(value)

    def phase(self, name: str, iteration: int | None = None, epoch: int | None = None) -> None:
        self.where = name
        self._put("phase", PHASE_CODE[name])
        if iteration is not None:
            self.iteration = iteration
            self._put("iteration", iteration)
        if epoch is not None:
            self.epoch = epoch
            self._put("epoch", epoch)
        self._put("since", time.monotonic())

    def comm(self, busy: bool) -> None:
        """Entering (True) or leaving (False) a call that waits for other workers."""
        self.in_comm = busy
        self._put("in_comm", 1.0 if busy else 0.0)
        self._put("since", time.monotonic())

    def joined(self) -> None:
        self._put("joined", 1.0)


def read_status(array: Any, rank: int) -> dict[str, float]:
    base = rank * len(STATUS_FIELDS)
    return {name: float(array[base + k]) for k, name in enumerate(STATUS_FIELDS)}


class PartLog:
    """The worker's part file: one JSON object per line, written and flushed as it goes.

    Rows (:meth:`add_row`) wait in memory until the next :meth:`flush`, which the worker's
    context calls as each iteration begins, and every other record (:meth:`write`) comes
    after them at once: one write per iteration instead of one per phase (a write per row
    cost about 2% of a small CPU epoch, ``benchmarks/bench_realrun.py``). A worker that
    raises keeps every row (its error line flushes them); one killed outright loses only
    the rows of the iteration it was in.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = path.open("w", buffering=1)
        self.pending: list[str] = []
        self._quoted: dict[str, str] = {}  # device name -> its JSON string

    def add_row(
        self, task: int, device: str, engine: str, start: float, end: float, nbytes: int, epoch: int
    ) -> None:
        """One trace row, as the JSON object ``{"t": "row", "task": ..., "epoch": ...}`` (formatted
        here rather than by ``json.dumps``: a row per phase made the encoder a visible share of a
        small CPU iteration, ``benchmarks/bench_realrun.py``; a test holds the two equal)."""
        quoted = self._quoted.get(device)
        if quoted is None:
            quoted = self._quoted[device] = json.dumps(device)
        self.pending.append(
            f'{{"t":"row","task":{task:d},"device":{quoted},"engine":"{engine}",'
            f'"start":{float(start)!r},"end":{float(end)!r},"bytes":{nbytes:d},"epoch":{epoch:d}}}'
        )

    def flush(self) -> None:
        if self.pending:
            self.file.write("\n".join(self.pending) + "\n")
            self.pending.clear()

    def write(self, record: dict[str, Any]) -> None:
        self.flush()
        self.file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self.flush()
        self.file.close()


@dataclass
class WorkerContext:
    """Everything a real scheme needs on worker ``rank``."""

    rank: int
    world: int
    device: torch.device
    config: RunConfig
    inputs: SchemeInputs
    scheme: ExecutionScheme  # the run's scheme: its schedule is what the executor carries out
    task_index: dict[str, int]  # plan task id -> its position in the plan
    store: FeatureStore | None  # set once the context exists (the store reads its clock)
    counter: ByteCounter
    log: PartLog
    status: Status
    t0: float  # perf_counter at the run's start (after every worker joined)
    group: dist.ProcessGroup | None = None  # the main group (gradients): gloo or NCCL
    # A gloo group beside an NCCL main group (CUDA runs, and CPU runs under the NCCL stand-in), for
    # host-to-host transfers and unbatched sends; None where the main group is gloo already.
    host_group: dist.ProcessGroup | None = None
    epoch: int = 0
    fault: str | None = None  # test-only fault injection (realrun.worker.FAULT_ENV)
    layers: LayerBackend = field(default_factory=lambda: LayerBackend("torch"))  # which layers train

    def __post_init__(self) -> None:
        # now() and row() run a few times per phase: what they look up, looked up once.
        # NCCL's collectives return at once (the NCCL stand-in's too): the device is synchronised
        # before reading the clock.
        self._sync = self.device.type == "cuda" or p2p.standin_installed()
        self._gpu = self.inputs.workers[self.rank]

    def begin_iteration(self, iteration: int) -> None:
        """Schemes call this first in every iteration."""
        self.log.flush()  # the previous iteration's rows
        self.status.phase("sample", iteration, self.epoch)
        if self.fault:
            inject_fault(self.fault, self.rank, self.epoch, iteration)

    @property
    def gpu(self) -> str:
        """The plan's name of this worker's GPU."""
        return self._gpu

    @property
    def host(self) -> str:
        return self.inputs.host_of_worker(self.rank)

    def now(self) -> float:
        """Seconds since the run's start, after the device has finished what was queued."""
        if self._sync:
            p2p.synchronize(self.device)
        return time.perf_counter() - self.t0

    def row(
        self,
        task: str,
        phase: str,
        start: float,
        end: float,
        nbytes: int = 0,
        device: str | None = None,
        engine: str | None = None,
    ) -> None:
        """Record plan task ``task`` as run from ``start`` to ``end``, having moved ``nbytes``
        (``engine``: where the phase alone does not say, e.g. a GPU-to-GPU copy within a machine
        or across the network)."""
        index = self.task_index.get(task)
        if index is None:
            raise RuntimeError(f"worker {self.rank} ran task {task!r}, which the plan does not have")
        self.log.add_row(
            index,
            device or self._gpu,
            engine or PHASE_ENGINE.get(phase, "compute"),
            start,
            end,
            int(nbytes),
            self.epoch,
        )

    def comm(self, busy: bool) -> None:
        """Entering (True) or leaving (False) a call that waits for other workers. Leaving waits for
        the device first: an NCCL collective returns before the peers have joined, and a wait after
        the window would look like local work to the launcher's hang diagnosis."""
        if not busy and self._sync:
            p2p.synchronize(self.device)
        self.status.comm(busy)


def link_engine(inputs: SchemeInputs, a: int, b: int) -> str:
    """The trace engine of a copy between workers ``a`` and ``b``: the network across machines,
    GPU to GPU within one."""
    return "net" if inputs.worker_machine[a] != inputs.worker_machine[b] else "d2d"


def make_optimizer(name: str, params: Any, lr: float) -> torch.optim.Optimizer:
    """The optimizer the configuration names (its state is what the plan keeps resident)."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.SGD(params, lr=lr)


def all_reduce_and_step(
    ctx: WorkerContext,
    iteration: int,
    flat: torch.Tensor,
    params: Sequence[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
) -> None:
    """All-reduce ``flat`` (this worker's gradients, flattened in ``params``' order), divide by the
    workers, give each parameter its share as its gradient and step ``optimizer``; recorded as
    plan tasks ``i{iteration}.allreduce`` and ``i{iteration}.w{rank}.update``. Gradients are
    zeroed after the step, so the next backward starts from nothing."""
    ctx.status.phase("allreduce", iteration)
    start = ctx.now()
    ctx.comm(True)
    dist.all_reduce(flat, group=ctx.group)
    ctx.comm(False)
    flat /= ctx.world
    nbytes = tensor_bytes(flat)
    ctx.counter.add("allreduce", nbytes)
    ctx.row(task_ids.allreduce_task(iteration), "allreduce", start, ctx.now(), nbytes)

    ctx.status.phase("update", iteration)
    start = ctx.now()
    offset = 0
    for p in params:
        n = p.numel()
        share = flat[offset : offset + n].view_as(p)
        if p.grad is None:
            p.grad = share.clone()
        else:
            p.grad.copy_(share)
        offset += n
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    ctx.row(task_ids.update_task(iteration, ctx.rank), "update", start, ctx.now())


def exchange_pairwise(
    ctx: WorkerContext,
    outgoing: Mapping[int, torch.Tensor],
    incoming: Mapping[int, tuple[tuple[int, ...], torch.dtype]],
) -> tuple[dict[int, torch.Tensor], dict[int, float], dict[int, float], float]:
    """Send ``outgoing[q]`` to each worker q and receive a tensor of ``incoming[q]``'s shape and
    dtype from each q, every pair at once (``batch_isend_irecv``; every worker calls it with its
    side of the same exchange). Returns the tensors received (on the worker's device), when
    each receive and each send completed, and when the exchange started."""
    comm = ctx.device if dist.get_backend(ctx.group) == "nccl" else torch.device("cpu")
    peers = sorted(set(outgoing) | set(incoming))
    ops, buffers = [], {}
    done_by: list[tuple[dict[int, float], int]] = []  # per operation: which record it completes
    received: dict[int, float] = {}
    sent: dict[int, float] = {}
    for q in peers:
        if q in outgoing:
            ops.append(dist.P2POp(dist.isend, outgoing[q].to(comm).contiguous(), q, group=ctx.group))
            done_by.append((sent, q))
        if q in incoming:
            shape, dtype = incoming[q]
            buffers[q] = torch.empty(shape, dtype=dtype, device=comm)
            ops.append(dist.P2POp(dist.irecv, buffers[q], q, group=ctx.group))
            done_by.append((received, q))
    start = ctx.now()
    works = p2p.start(ops)
    ctx.comm(True)
    for k in p2p.completions(works, len(ops)):  # one work per operation (gloo) or per batch (NCCL)
        record, q = done_by[k]
        record[q] = ctx.now()
    ctx.comm(False)
    return {q: t.to(ctx.device) for q, t in buffers.items()}, received, sent, start


def receive_migration(
    ctx: WorkerContext,
    src: int,
    group: dist.ProcessGroup | None,
    announcement: tuple[torch.Tensor, int],
    parts: Sequence[tuple[str, torch.Tensor, int]],
) -> None:
    """Receive a migration from worker ``src`` over ``group`` and record it (``hopgnn``,
    ``naive-feature-centric``). A gloo send waits for its receive, so no byte moves before the
    receive is posted: first the sender's ``announcement`` (buffer, tag), counted as
    ``migrate_index``; the wait for a sender not there yet ends with it, in no row. Then each of
    ``parts`` (plan task, buffer, tag), its receive posted once the one before has arrived, recorded
    as its ``migrate`` task from posting to arrival on this worker's clock: a transfer of its own
    bytes, with its own latency, none overlapping another."""
    buffer, tag = announcement
    dist.irecv(buffer, src, group=group, tag=tag).wait()
    spans = []
    for _, buffer, tag in parts:
        start = ctx.now()
        dist.irecv(buffer, src, group=group, tag=tag).wait()
        spans.append((start, ctx.now()))
    ctx.counter.add("migrate_index", tensor_bytes(announcement[0]))
    engine = link_engine(ctx.inputs, src, ctx.rank)
    for (task, buffer, _), (start, end) in zip(parts, spans, strict=True):
        nbytes = tensor_bytes(buffer)
        ctx.counter.add("migrate", nbytes)
        ctx.row(task, "migrate", start, end, nbytes, engine=engine)


def backward_by_layer(
    ctx: WorkerContext,
    loss: torch.Tensor,
    inputs: list[torch.Tensor],
    prefix: str,
    iteration: int,
    finish: Callable[[], None] | None = None,
    resume: Mapping[int, float] | None = None,
    tasks: Sequence[str] | None = None,
) -> None:
    """One backward pass from ``loss`` through the layers whose inputs are ``inputs`` (layer 0
    first), each layer's share recorded as plan task ``{prefix}.bwd{l}``.

    A hook on each later layer's input notes when its gradient is complete, which is when
    that layer's backward is done and the one below starts (the clock synchronises the
    device first on a GPU, so the note is when the work finished). ``finish`` runs at the
    end of layer 0's share (hopgnn adds the gradient to its model's accumulator there).
    ``resume[l]``, filled during the pass: when the layer below ``l`` starts, where work between
    them is recorded as tasks of its own (roc-fullgraph's halo gradient exchange).
    ``tasks[l]``: the plan task of ``inputs[l]``'s layer, where it is not ``{prefix}.bwd{l}``.
    """
    stamps: dict[int, float] = {}

    def note(layer: int) -> Callable[[torch.Tensor], None]:
        def hook(_grad: torch.Tensor) -> None:
            stamps[layer] = ctx.now()

        return hook

    handles = [h.register_hook(note(layer)) for layer, h in enumerate(inputs) if layer and h.requires_grad]
    ctx.status.phase("backward", iteration)
    start = ctx.now()
    try:
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    if finish is not None:
        finish()
    end = ctx.now()
    top = len(inputs) - 1
    begin = start
    for layer in range(top, -1, -1):
        done = stamps.get(layer, begin) if layer else end
        task = tasks[layer] if tasks is not None else task_ids.backward_task(prefix, layer)
        ctx.row(task, "backward", begin, done)
        begin = resume.get(layer, done) if resume is not None else done


EpochTotals = dict[str, float]  # a worker's loss_sum, correct predictions and seeds of one epoch


def epoch_totals(iterations: Iterable[tuple[float, int, int]]) -> EpochTotals:
    """A worker's epoch from its iterations' (loss summed over their seeds, correct, seeds), in order."""
    totals = {"loss_sum": 0.0, "correct": 0, "seeds": 0}
    for loss_sum, correct, seeds in iterations:
        totals["loss_sum"] += loss_sum
        totals["correct"] += correct
        totals["seeds"] += seeds
    return totals


class RealExecutor(ABC):
    """One worker's real run of an execution scheme: it does what the scheme's plan says, with
    real tensors and real communication, and records every planned task it ran under the
    plan's task id (:meth:`WorkerContext.row`).

    Built once per run on each worker (its model and state), before the workers' first
    barrier. Registers beside the others in :data:`realrun.schemes.REAL_EXECUTORS` under its
    scheme's name; the scheme declares the plan parameters a real run needs
    (``real_run_params``).
    """

    registered_name: ClassVar[str]

    @classmethod
    def check(cls, config: RunConfig, inputs: SchemeInputs) -> None:
        """Refuse, in one line (a ``ConfigError``), a prepared run (its configuration as executed and
        its inputs) this executor cannot carry out as planned; called before any worker starts.
        Nothing to refuse by default."""
        return None

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train one epoch; returns this worker's ``loss_sum``, ``correct`` and ``seeds``."""

    @abstractmethod
    def evaluate(self) -> float:
        """Test accuracy of this worker's model."""

    @abstractmethod
    def checkpoint(self) -> dict[str, Any]:
        """The state a later run resumes from (``gnnwb realrun --state``)."""

    @abstractmethod
    def restore(self, saved: dict[str, Any]) -> None:
        """Resume from :meth:`checkpoint`'s state."""
