"""``roc-fullgraph`` for real: ROC's full-graph training across worker processes, as the plan
(:mod:`workbench.strategies.execution.roc_fullgraph`) describes it with parts resident.

Worker ``p`` owns part ``p`` of the run's partition (its vertices, with their input
features in its host memory) and a full copy of the model. Per training iteration:

1. its part's input features go to its device (``i{it}.w{p}.features``, ``h2d``);
2. for each layer ``l``: the **halo exchange**: from every other part ``q``, the layer-``l``
   inputs of the in-neighbours of ``p``'s vertices that ``q`` owns, point-to-point, every pair
   at once (``batch_isend_irecv``); for ``l = 0`` the input features, from host memory: within
   one machine ``p`` copies them from it itself (``h2d``, ``HaloTransfer.host_read``; ``q``
   sends nothing), across machines ``q`` sends them; then layer ``l`` over ``p``'s vertices,
   its sources being its own vertices followed by each part's halo (``fwd{l}``);
3. the loss over ``p``'s training vertices, weighted so that the summed gradients are those
   of the whole graph's mean loss; one backward pass, each layer timed by a hook on its input
   (``bwd{l}``); the backward of a halo exchange sends the gradients of ``p``'s halo
   activations back to their owners and adds those it receives into its own
   (``halograd{l}.to{q}``, ``l > 0``: input features take no gradient);
4. the gradients all-reduced (summed, divided by the workers) and the optimizer step.

The partition is the plan's. ``gnnwb realrun --online`` runs ROC's online loop for real
(:mod:`realrun.online`): one iteration per launch, the partitioner refit to the layer times the
workers measured before the next is planned, the model carried over.

Under a memory policy (``dpmm``, ``lru``, ``streaming``) the part's tensors live in host
memory and its step runs operator by operator through a device arena of the policy's
capacity, as the policy's schedule says (:mod:`realrun.schemes.roc_memory`).

Every decision above (the part's vertices, its halo, who sends what to whom, the phase and
task id of each exchange) is the scheme's schedule
(:meth:`~workbench.strategies.execution.roc_fullgraph.RocFullGraphScheme.schedule`), read
from the run's scheme (``ctx.scheme``): the executor carries it out and times it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.host_rows import host_features
from realrun.layers import TensorBlock
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    WorkerContext,
    backward_by_layer,
    epoch_totals,
    exchange_pairwise,
)
from realrun.schemes.model_centric import ModelCentricExecutor
from realrun.schemes.roc_memory import PolicyStep, local_edges
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.roc_fullgraph import (
    BACKWARD,
    FORWARD,
    HaloTransfer,
    IterationSchedule,
    PartLayout,
    RocFullGraphScheme,
    RocTaskIds,
)

__all__ = ["PartTensors", "RocFullGraphExecutor"]


@dataclass(frozen=True)
class PartTensors:
    """What worker ``p`` builds once from its part of the schedule to run layers on it."""

    block: Any  # sources: the part's vertices, then each owner's halo rows in owner order; destinations: the part's
    features: torch.Tensor  # the part's input features, in its host memory
    train: np.ndarray  # positions in the part's vertices of its training vertices
    # owner q -> the input features of the part's halo rows q owns, in this machine's host memory:
    # the owners whose layer-0 halo the schedule reads from this machine's host (h2d), not over the network
    host_halo: dict[int, torch.Tensor] = field(default_factory=dict)


def part_tensors(ctx: WorkerContext, lay: PartLayout, host_owners: Sequence[int] = ()) -> PartTensors:
    """The layer block, input features and training positions of the part ``lay`` (the schedule's),
    and the halo features of each owner in ``host_owners`` (read from host memory: ``HaloTransfer.host_read``)."""
    graph = ctx.inputs.graph
    mine = lay.vertices
    src, dst, num_src = local_edges(ctx, lay)  # halo rows in the order they arrive (HaloExchange.forward)
    block = TensorBlock(
        torch.from_numpy(src).to(ctx.device),
        torch.from_numpy(dst).to(ctx.device),
        num_src,
        int(mine.shape[0]),
    )
    train_mask = graph.train_mask if graph.train_mask is not None else np.ones(graph.num_nodes, dtype=bool)
    # Pinned on CUDA: the features task is a DMA copy, as every scheme's h2d is.
    features = host_features(graph.features(mine), ctx.device)
    host_halo = {q: host_features(graph.features(lay.halo_rows[q]), ctx.device) for q in host_owners}
    return PartTensors(
        ctx.layers.block(block, ctx.device), features, np.flatnonzero(train_mask[mine]), host_halo
    )


def copy_in(ctx: WorkerContext, host: torch.Tensor, task: str, phase: str) -> torch.Tensor:
    """``host`` (pinned on CUDA) copied to the worker's device, recorded as ``task``: the part's
    features, or a layer-0 halo read from this machine's host memory."""
    start = ctx.now()
    moved = host.to(ctx.device, non_blocking=True, copy=True)
    nbytes = tensor_bytes(moved)
    ctx.counter.add(phase, nbytes)
    ctx.row(task, phase, start, ctx.now(), nbytes)
    return moved


class HaloExchange:
    """One iteration's halo exchanges of worker ``p``, as the schedule lists them."""

    def __init__(
        self,
        ctx: WorkerContext,
        lay: PartLayout,
        schedule: IterationSchedule,
        host_halo: Mapping[int, torch.Tensor] | None = None,
    ) -> None:
        self.ctx, self.lay, self.schedule = ctx, lay, schedule
        self.host_halo = host_halo or {}  # owner -> halo rows this worker reads from host memory
        self.resume: dict[int, float] = {}  # layer -> when its halo gradients were exchanged

    def _exchange(
        self, outgoing: dict[int, torch.Tensor], sizes: dict[int, int], width: int
    ) -> tuple[dict[int, torch.Tensor], dict[int, float], dict[int, float], float]:
        """Send ``outgoing[q]`` to each q and receive ``sizes[q]`` rows of ``width`` from each q.
        Returns the rows received, when each receive and each send completed, and the start."""
        shapes = {q: ((n, width), torch.float32) for q, n in sizes.items()}
        return exchange_pairwise(self.ctx, outgoing, shapes)

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Layer ``layer``'s sources: ``h`` (this part's rows) and each owner's halo rows after it."""
        ctx, rank = self.ctx, self.ctx.rank
        transfers = self.schedule.exchanges(FORWARD, layer)
        incoming = {t.owner: self.read_host(t) for t in transfers if t.host_read and t.reader == rank}
        mine = {t.owner: t for t in transfers if t.reader == rank and not t.host_read}
        sends = [t.reader for t in transfers if t.owner == rank and not t.host_read]
        if mine or sends:
            rows = self.lay.send_rows
            outgoing = {q: h.detach()[torch.from_numpy(rows[q]).to(h.device)] for q in sends}
            sizes = {q: t.rows for q, t in mine.items()}
            exchanged, received, _, start = self._exchange(outgoing, sizes, int(h.shape[1]))
            for q in sorted(exchanged):
                t, nbytes = mine[q], tensor_bytes(exchanged[q])
                ctx.counter.add(t.phase, nbytes)
                ctx.row(t.task, t.phase, start, received[q], nbytes)  # type: ignore[arg-type]
            incoming.update(exchanged)
        halo = [incoming[q] for q in sorted(incoming)]
        if layer == 0 or not h.requires_grad:  # input features take no gradient
            return torch.cat([h, *halo])
        return _HaloRows.apply(h, self, layer, *halo)

    def read_host(self, t: HaloTransfer) -> torch.Tensor:
        """The halo rows of ``t`` from this machine's host memory to the device (one timed copy)."""
        return copy_in(self.ctx, self.host_halo[t.owner], t.task, t.phase)  # type: ignore[arg-type]

    def backward(self, grads: dict[int, torch.Tensor], layer: int, width: int) -> dict[int, torch.Tensor]:
        """Send each owner the gradients of its rows in this part's halo; receive the gradients
        of this part's rows in the readers' halos (to add into its own)."""
        ctx, rank = self.ctx, self.ctx.rank
        transfers = self.schedule.exchanges(BACKWARD, layer)
        mine = {t.owner: t for t in transfers if t.reader == rank}
        sizes = {t.reader: t.rows for t in transfers if t.owner == rank}
        incoming, _, sent, start = self._exchange(grads, sizes, width)
        for q in sorted(grads):
            t, nbytes = mine[q], tensor_bytes(grads[q])
            ctx.counter.add(t.phase, nbytes)
            ctx.row(t.task, t.phase, start, sent[q], nbytes)  # type: ignore[arg-type]
        self.resume[layer] = ctx.now()
        return incoming


class _HaloRows(torch.autograd.Function):
    """``cat(h, *halo)`` whose backward returns the halo rows' gradients to their owners."""

    @staticmethod
    def forward(
        fctx: Any, h: torch.Tensor, exchange: HaloExchange, layer: int, *halo: torch.Tensor
    ) -> torch.Tensor:
        fctx.exchange, fctx.layer, fctx.rows = exchange, layer, h.shape[0]
        fctx.sizes = [t.shape[0] for t in halo]
        return torch.cat([h, *halo])

    @staticmethod
    def backward(fctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        exchange: HaloExchange = fctx.exchange
        lay = exchange.lay
        own = grad[: fctx.rows].clone()
        pieces = torch.split(grad[fctx.rows :], fctx.sizes)
        outgoing = {q: g.contiguous() for q, g in zip(sorted(lay.halo_rows), pieces, strict=True)}
        for q, g in exchange.backward(outgoing, fctx.layer, int(grad.shape[1])).items():
            own.index_add_(0, torch.from_numpy(lay.send_rows[q]).to(own.device), g)
        return (own, None, None, *([None] * len(fctx.sizes)))


@REAL_EXECUTORS.register("roc-fullgraph")
class RocFullGraphExecutor(ModelCentricExecutor):
    """ROC's full-graph training on worker ``ctx.rank``: its part of the run's partition, the
    scheme's schedule of each iteration the plan has, a model copy (model-centric's)."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        scheme = ctx.scheme
        if not isinstance(scheme, RocFullGraphScheme):
            raise TypeError(f"roc-fullgraph's executor needs its scheme, got {type(scheme).__name__}")
        layouts = scheme.layouts(ctx.inputs)  # the run's partition: fixed for the launch
        self.layout: PartLayout = layouts[ctx.rank]
        self.schedules: dict[int, IterationSchedule] = {
            it: scheme.schedule(ctx.inputs, it, layouts) for it in self.plan_iterations()
        }
        train = ctx.inputs.graph.train_mask
        self.train_total = int(train.sum()) if train is not None else ctx.inputs.graph.num_nodes
        memory = next(iter(self.schedules.values())).parts[ctx.rank].memory if self.schedules else None
        # Under a memory policy the part's tensors stream through an arena; resident, one block holds them.
        self.policy = None if memory is None else PolicyStep(ctx, self.layout, self.model, memory)
        reads = {
            t.owner
            for schedule in self.schedules.values()
            for t in schedule.exchanges(FORWARD, 0)
            if t.host_read and t.reader == ctx.rank
        }
        self.part = part_tensors(ctx, self.layout, sorted(reads)) if memory is None else None

    def plan_iterations(self) -> list[int]:
        """The iterations the run's plan has: all of the run's, or one (the online loop plans and
        launches one iteration at a time, ``workbench.online.train_online``): those with this
        worker's features load (parts resident) or optimizer step (a memory policy's training)."""
        ctx = self.ctx
        first = {
            it: (
                RocTaskIds.features(task_ids.worker_prefix(it, ctx.rank)),
                task_ids.update_task(it, ctx.rank),
            )
            for it in range(ctx.inputs.num_iterations)
        }
        return [it for it, tasks in first.items() if any(task in ctx.task_index for task in tasks)]

    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train the plan's iterations, each over the whole graph; returns this worker's loss sum,
        correct predictions and training-vertex count."""
        return epoch_totals(map(self.run_iteration, self.schedules.values()))

    def run_iteration(self, schedule: IterationSchedule) -> tuple[float, int, int]:
        """One iteration as ``schedule`` says: features, per layer halo exchange and forward, the
        loss, backward with the halo gradients, the all-reduce and the step."""
        ctx, it = self.ctx, schedule.iteration
        prefix = task_ids.worker_prefix(it, ctx.rank)
        ctx.begin_iteration(it)
        if self.policy is not None:
            figures, flat = self.policy.run(schedule)
            self.step(it, flat)
            return figures.loss_sum, figures.correct, figures.seeds
        h = self.load_features(prefix, it)
        halo = HaloExchange(ctx, self.layout, schedule, self.part.host_halo)  # type: ignore[union-attr]
        inputs: list[torch.Tensor] = []
        for layer in range(ctx.inputs.model.num_layers):
            ctx.status.phase("gather", it)
            x = halo.forward(h, layer)
            ctx.status.phase("forward", it)
            start = ctx.now()
            inputs.append(x)
            h = self.model.layer_forward(layer, self.part.block, x)  # type: ignore[union-attr]
            ctx.row(task_ids.forward_task(prefix, layer), "forward", start, ctx.now())
        loss, loss_sum, correct, seeds = self.loss(h)
        # A layer's halo gradients go back between its backward and the next one down (their own tasks).
        backward_by_layer(ctx, loss, inputs, prefix, it, resume=halo.resume)
        self.step(it, self.flat_gradients())
        return loss_sum, correct, seeds

    def load_features(self, prefix: str, it: int) -> torch.Tensor:
        """The part's input features, host -> device (the schedule's features task)."""
        self.ctx.status.phase("gather", it)
        return copy_in(self.ctx, self.part.features, RocTaskIds.features(prefix), "h2d")  # type: ignore[union-attr]

    def loss(self, h: torch.Tensor) -> tuple[torch.Tensor, float, int, int]:
        """The loss to differentiate, this worker's loss sum, correct predictions and seeds."""
        ctx, part = self.ctx, self.part
        assert part is not None  # parts resident
        labels = torch.as_tensor(
            np.asarray(ctx.inputs.graph.labels[self.layout.vertices[part.train]], dtype=np.int64)
        )
        logits = h[torch.from_numpy(part.train).to(ctx.device)]
        labels = labels.to(ctx.device)
        # Summed over the workers and divided by them (the all-reduce), these are the gradients of
        # the mean loss over every training vertex of the graph.
        summed = F.cross_entropy(logits, labels, reduction="sum")
        loss = summed * (ctx.world / max(self.train_total, 1))
        correct = int((logits.argmax(dim=1) == labels).sum())
        loss_sum = float(summed.detach()) if labels.numel() else 0.0
        return loss, loss_sum, correct, int(labels.shape[0])
