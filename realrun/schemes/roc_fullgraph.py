"""``roc-fullgraph`` for real: ROC's full-graph training across worker processes, as the plan
(:mod:`workbench.strategies.execution.roc_fullgraph`) describes it with parts resident.

Worker ``p`` owns part ``p`` of the run's partition (its vertices, with their input
features in its host memory) and a full copy of the model. Per training iteration:

1. its part's input features go to its device (``i{it}.w{p}.features``, ``h2d``);
2. for each layer ``l``: the **halo exchange**: from every other part ``q``, the layer-``l``
   inputs of the in-neighbours of ``p``'s vertices that ``q`` owns (for ``l = 0`` the input
   features, from ``q``'s host memory), point-to-point, every pair at once
   (``batch_isend_irecv``); then layer ``l`` over ``p``'s vertices, its sources being its own
   vertices followed by each part's halo (``fwd{l}``);
3. the loss over ``p``'s training vertices, weighted so that the summed gradients are those
   of the whole graph's mean loss; one backward pass, each layer timed by a hook on its input
   (``bwd{l}``); the backward of a halo exchange sends the gradients of ``p``'s halo
   activations back to their owners and adds those it receives into its own
   (``halograd{l}.to{q}``, ``l > 0``: input features take no gradient);
4. the gradients all-reduced (summed, divided by the workers) and the optimizer step.

The partition is the plan's. ``gnnwb realrun --online`` runs ROC's online loop for real
(:mod:`realrun.online`): one iteration per launch, the partitioner refit to the layer times the
workers measured before the next is planned, the model carried over. Memory policies other
than ``resident`` have no real executor (``PLAN_PARAMS``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.layers import TensorBlock
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    WorkerContext,
    all_reduce_and_step,
    backward_by_layer,
    exchange_pairwise,
    legacy_executor,
)
from realrun.schemes.model_centric import evaluate
from realrun.schemes.model_centric import setup as setup_model
from workbench.strategies.execution.roc_fullgraph import RESIDENT, _phase

__all__ = ["PLAN_PARAMS", "evaluate", "run_epoch", "setup"]

# Parts stay on their device for the iteration, and every iteration trains.
PLAN_PARAMS = {"memory_policy": RESIDENT, "training": True}


@dataclass
class Part:
    """What worker ``p`` holds and exchanges, the same on every worker for the same partition."""

    vertices: np.ndarray  # the part's vertices, sorted
    halo: dict[int, np.ndarray]  # other part q -> the in-neighbours of p's vertices q owns, sorted
    send: dict[int, np.ndarray]  # other part q -> positions in ``vertices`` of what q's halo takes from p
    block: Any  # sources: the part's vertices, then each part's halo in part order; destinations: the part's
    train: np.ndarray  # positions in ``vertices`` of the part's training vertices
    features: torch.Tensor  # the part's input features, in its host memory


def build_part(ctx: WorkerContext) -> Part:
    """Part ``ctx.rank`` of the run's partition, from the graph's in-neighbour lists."""
    graph, owner, p = ctx.inputs.graph, ctx.inputs.partition.owner, ctx.rank
    dst = graph.edge_dst()
    src = graph.indices.astype(np.int64, copy=False)
    dst_part, src_part = owner[dst], owner[src]
    mine = np.flatnonzero(owner == p)
    halo, send = {}, {}
    for q in range(ctx.world):
        if q == p:
            continue
        into_me = np.unique(src[(dst_part == p) & (src_part == q)])
        if into_me.size:
            halo[q] = into_me
        from_me = np.unique(src[(dst_part == q) & (src_part == p)])
        if from_me.size:
            send[q] = np.searchsorted(mine, from_me)
    local = np.full(graph.num_nodes, -1, dtype=np.int64)
    local[mine] = np.arange(mine.shape[0], dtype=np.int64)
    offset = mine.shape[0]
    for q in sorted(halo):
        local[halo[q]] = offset + np.arange(halo[q].shape[0], dtype=np.int64)
        offset += halo[q].shape[0]
    edges = dst_part == p  # in CSR order: grouped by destination
    block = TensorBlock(
        torch.from_numpy(local[src[edges]]).to(ctx.device),
        torch.from_numpy(local[dst[edges]]).to(ctx.device),
        int(offset),
        int(mine.shape[0]),
    )
    train_mask = graph.train_mask if graph.train_mask is not None else np.ones(graph.num_nodes, dtype=bool)
    features = torch.from_numpy(np.ascontiguousarray(graph.features(mine), dtype=np.float32))
    return Part(
        mine, halo, send, ctx.layers.block(block, ctx.device), np.flatnonzero(train_mask[mine]), features
    )


def setup(ctx: WorkerContext) -> None:
    """The model copy and optimizer (as model-centric's), and this worker's part, once per run."""
    setup_model(ctx)
    if "part" not in ctx.state:
        ctx.state["part"] = build_part(ctx)
        train = ctx.inputs.graph.train_mask
        ctx.state["train_total"] = int(train.sum()) if train is not None else ctx.inputs.graph.num_nodes


class Halo:
    """One iteration's halo exchanges of worker ``p``: rows to and from every other part."""

    def __init__(self, ctx: WorkerContext, part: Part, it: int) -> None:
        self.ctx, self.part, self.it = ctx, part, it
        self.resume: dict[int, float] = {}  # layer -> when its halo gradients were exchanged

    def exchange(
        self, outgoing: dict[int, torch.Tensor], sizes: dict[int, int], width: int
    ) -> tuple[dict[int, torch.Tensor], dict[int, float], dict[int, float], float]:
        """Send ``outgoing[q]`` to each q and receive ``sizes[q]`` rows of ``width`` from each q.
        Returns the rows received, when each receive and each send completed, and the start."""
        shapes = {q: ((n, width), torch.float32) for q, n in sizes.items()}
        return exchange_pairwise(self.ctx, outgoing, shapes)

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Layer ``layer``'s sources: ``h`` (this part's rows) and each part's halo rows after it."""
        ctx, part, it = self.ctx, self.part, self.it
        width = int(h.shape[1])
        outgoing = {q: h.detach()[torch.from_numpy(rows).to(h.device)] for q, rows in part.send.items()}
        sizes = {q: int(v.shape[0]) for q, v in part.halo.items()}
        incoming, received, _, start = self.exchange(outgoing, sizes, width)
        for q in sorted(incoming):
            src = ctx.inputs.host_of_worker(q) if layer == 0 else ctx.inputs.workers[q]
            nbytes = tensor_bytes(incoming[q])
            ctx.counter.add(_phase(ctx.inputs, src, ctx.gpu), nbytes)
            task = f"i{it}.w{ctx.rank}.halo{layer}.from{q}"
            ctx.row(task, _phase(ctx.inputs, src, ctx.gpu), start, received[q], nbytes)
        halo = [incoming[q] for q in sorted(incoming)]
        if layer == 0 or not h.requires_grad:
            return torch.cat([h, *halo])
        return _HaloRows.apply(h, self, layer, *halo)

    def backward(self, grads: dict[int, torch.Tensor], layer: int, width: int) -> dict[int, torch.Tensor]:
        """Send each part the gradients of its rows in this part's halo; receive the gradients
        of this part's rows in theirs (to add into its own)."""
        ctx, part = self.ctx, self.part
        sizes = {q: int(rows.shape[0]) for q, rows in part.send.items()}
        incoming, _, sent, start = self.exchange(grads, sizes, width)
        for q in sorted(grads):
            nbytes = tensor_bytes(grads[q])
            phase = _phase(ctx.inputs, ctx.gpu, ctx.inputs.workers[q])
            ctx.counter.add(phase, nbytes)
            ctx.row(f"i{self.it}.w{ctx.rank}.halograd{layer}.to{q}", phase, start, sent[q], nbytes)
        self.resume[layer] = ctx.now()
        return incoming


class _HaloRows(torch.autograd.Function):
    """``cat(h, *halo)`` whose backward returns the halo rows' gradients to their owners."""

    @staticmethod
    def forward(fctx: Any, h: torch.Tensor, exchange: Halo, layer: int, *halo: torch.Tensor) -> torch.Tensor:
        fctx.exchange, fctx.layer, fctx.rows = exchange, layer, h.shape[0]
        fctx.sizes = [t.shape[0] for t in halo]
        return torch.cat([h, *halo])

    @staticmethod
    def backward(fctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        exchange: Halo = fctx.exchange
        part = exchange.part
        own = grad[: fctx.rows].clone()
        pieces = torch.split(grad[fctx.rows :], fctx.sizes)
        outgoing = {q: g.contiguous() for q, g in zip(sorted(part.halo), pieces, strict=True)}
        for q, g in exchange.backward(outgoing, fctx.layer, int(grad.shape[1])).items():
            own.index_add_(0, torch.from_numpy(part.send[q]).to(own.device), g)
        return (own, None, None, *([None] * len(fctx.sizes)))


def plan_iterations(ctx: WorkerContext) -> list[int]:
    """The iterations the run's plan has: all of the run's, or one (the online loop plans and
    launches one iteration at a time, ``workbench.online.train_online``)."""
    return sorted({int(task.split(".", 1)[0][1:]) for task in ctx.task_index if task[:1] == "i"})


def run_epoch(ctx: WorkerContext, epoch: int) -> dict[str, Any]:
    """Train the plan's iterations, each over the whole graph; returns this worker's loss sum,
    correct predictions and training-vertex count."""
    setup(ctx)
    totals = {"loss_sum": 0.0, "correct": 0, "seeds": 0}
    for it in plan_iterations(ctx):
        loss, correct, seeds = iteration(ctx, it)
        totals["loss_sum"] += loss
        totals["correct"] += correct
        totals["seeds"] += seeds
    return totals


def iteration(ctx: WorkerContext, it: int) -> tuple[float, int, int]:
    part: Part = ctx.state["part"]
    model = ctx.state["model"]
    prefix = f"i{it}.w{ctx.rank}"
    num_layers = ctx.inputs.model.num_layers
    ctx.begin_iteration(it)

    ctx.status.phase("gather", it)
    start = ctx.now()
    h = part.features.to(ctx.device, copy=True)
    nbytes = tensor_bytes(h)
    ctx.counter.add("h2d", nbytes)
    ctx.row(f"{prefix}.features", "h2d", start, ctx.now(), nbytes)

    halo = Halo(ctx, part, it)
    inputs: list[torch.Tensor] = []
    for layer in range(num_layers):
        ctx.status.phase("gather", it)
        x = halo.forward(h, layer)
        ctx.status.phase("forward", it)
        start = ctx.now()
        inputs.append(x)
        h = model.layer_forward(layer, part.block, x)
        ctx.row(f"{prefix}.fwd{layer}", "forward", start, ctx.now())

    labels = torch.as_tensor(np.asarray(ctx.inputs.graph.labels[part.vertices[part.train]], dtype=np.int64))
    train = torch.from_numpy(part.train).to(ctx.device)
    logits = h[train]
    labels = labels.to(ctx.device)
    # Summed over the workers and divided by them (the all-reduce), these are the gradients of
    # the mean loss over every training vertex of the graph.
    summed = F.cross_entropy(logits, labels, reduction="sum")
    loss = summed * (ctx.world / max(ctx.state["train_total"], 1))
    correct = int((logits.argmax(dim=1) == labels).sum())
    loss_sum = float(summed.detach()) if labels.numel() else 0.0
    # A layer's halo gradients go back between its backward and the next one down (their own tasks).
    backward_by_layer(ctx, loss, inputs, prefix, it, resume=halo.resume)
    all_reduce_and_step(
        ctx,
        it,
        torch.cat([p.grad.reshape(-1) for p in ctx.state["params"]]),
        ctx.state["params"],
        ctx.state["optimizer"],
    )
    return loss_sum, correct, int(labels.shape[0])


# TEMPORARY (issue 24): registered through the module adapter until this executor is a class.
REAL_EXECUTORS.register("roc-fullgraph")(legacy_executor(sys.modules[__name__]))
