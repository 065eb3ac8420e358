"""``model-centric`` for real: DGL-style data parallel training, as the plan
(:mod:`workbench.strategies.execution.model_centric`) describes it.

Every worker holds a full copy of the model (the same initial weights: the layers are
built from the run's seed). Per iteration ``i``, worker ``w``:

1. takes its minibatch ``epoch[i][w]`` from the run's sampled epoch (the very
   minibatches the plan was built from; the spine sampled them with the workbench's
   samplers before the run and caches them on disk) and puts its blocks and labels on
   the device (``sample``: the handover of a sampled minibatch, not the sampling);
2. gathers the input features through the feature store: its GPU cache
   (``gather_local``), its host memory (``h2d``), a peer GPU's cache (``d2d``) and
   the other machines' host memory (``gather_remote``, real point-to-point);
3. runs forward layer by layer (DGL's layers where DGL runs, on the CPU; the
   plain-PyTorch twins elsewhere: ``gnnwb realrun --layers``), each layer timed on its
   own, then one backward pass whose layers are timed by hooks on their inputs
   (:func:`realrun.schemes.base.backward_by_layer`; the loss is computed in the last
   layer's forward);
4. all-reduces the flattened gradients (``torch.distributed.all_reduce``, sum, then
   divided by the workers) and steps the optimizer the configuration names.

Loss (cross entropy) and accuracy are those of the minibatch's seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from realrun.layers import TensorBlock, edge_weight
from realrun.schemes.base import WorkerContext, all_reduce_and_step, backward_by_layer, make_optimizer

# The plan parameters this executor follows: it samples (hands over) and gathers an
# iteration's minibatch only after the previous iteration's optimizer step (no loader
# process runs ahead), and its feature store reads the sources in stages. The launcher
# builds the run's plan with them. Its feature store has no feature service (paper 003's artifact's
# gRPC path, a simulated option), so a run asking for one is refused rather than mis-planned.
PLAN_PARAMS = {"prefetch": 0, "overlap_reads": False, "feature_service": False}


def setup(ctx: WorkerContext) -> None:
    """The model copy and its optimizer, once per run."""
    if "model" in ctx.state:
        return
    model = ctx.layers.build(ctx.inputs.model, ctx.config.seed).to(ctx.device)
    params = [p for p in model.parameters() if p.requires_grad]
    ctx.state["model"] = model
    ctx.state["params"] = params
    ctx.state["optimizer"] = make_optimizer(
        ctx.config.training.optimizer, params, ctx.config.training.learning_rate
    )


def run_epoch(ctx: WorkerContext, epoch: int) -> dict[str, Any]:
    """Train one epoch; returns this worker's loss sum, correct predictions and seed count."""
    setup(ctx)
    totals = {"loss_sum": 0.0, "correct": 0, "seeds": 0}
    for it in range(ctx.inputs.num_iterations):
        loss, correct, seeds = iteration(ctx, epoch, it)
        totals["loss_sum"] += loss * seeds
        totals["correct"] += correct
        totals["seeds"] += seeds
    return totals


def iteration(ctx: WorkerContext, epoch: int, it: int) -> tuple[float, int, int]:
    inputs, rank, device = ctx.inputs, ctx.rank, ctx.device
    model = ctx.state["model"]
    prefix = f"i{it}.w{rank}"
    num_layers = inputs.model.num_layers

    ctx.begin_iteration(it)
    start = ctx.now()
    mb = inputs.epoch[it][rank]
    blocks = [ctx.layers.block(b, device) for b in mb.blocks]
    weights = [edge_weight(b, device) for b in mb.blocks]
    labels = torch.as_tensor(np.asarray(inputs.graph.labels[mb.blocks[-1].dst_nodes], dtype=np.int64)).to(
        device
    )
    ctx.row(f"{prefix}.sample", "sample", start, ctx.now(), device=ctx.host)

    ctx.status.phase("gather", it)
    x, reads = ctx.store.gather(mb.input_nodes, prefix)
    for read in reads:
        ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)

    ins, loss, correct = forward_by_layer(
        ctx, model, blocks, weights, x, labels, prefix, it, range(num_layers)
    )
    backward_by_layer(ctx, loss, ins, prefix, it)

    all_reduce_and_step(ctx, it, torch.cat([p.grad.reshape(-1) for p in ctx.state["params"]]))
    return float(loss.detach()), correct, int(labels.shape[0])


def forward_by_layer(
    ctx: WorkerContext,
    model: Any,
    blocks: list[Any],
    weights: list[torch.Tensor | None],
    h: torch.Tensor,
    labels: torch.Tensor,
    prefix: str,
    it: int,
    layers: range,
) -> tuple[list[torch.Tensor], torch.Tensor, int]:
    """``layers`` of ``model`` forward from ``h`` (the first one's input), each timed as plan task
    ``{prefix}.fwd{l}``, the loss and correct predictions over ``labels`` computed in the last
    one's. Returns each layer's input (for :func:`backward_by_layer`), the loss and the count."""
    ins: list[torch.Tensor] = []
    loss = torch.zeros(())
    correct = 0
    for layer in layers:
        ctx.status.phase("forward", it)
        start = ctx.now()
        ins.append(h)
        h = model.layer_forward(layer, blocks[layer], h, weights[layer])
        if layer == layers[-1]:
            loss = F.cross_entropy(h, labels)
            correct = int((h.argmax(dim=1) == labels).sum())
        ctx.row(f"{prefix}.fwd{layer}", "forward", start, ctx.now())
    return ins, loss, correct


@torch.no_grad()
def evaluate(ctx: WorkerContext) -> float:
    """Test accuracy of this worker's model copy over the whole graph (every layer on every
    vertex's full in-neighbourhood). Reads the graph's full feature matrix: evaluation is
    outside the run's accounted transfers and timed phases."""
    graph = ctx.inputs.graph
    if graph.test_mask is None or not graph.test_mask.any():
        return float("nan")
    setup(ctx)
    n = graph.num_nodes
    full = TensorBlock(
        torch.from_numpy(graph.indices).to(ctx.device),
        torch.from_numpy(graph.edge_dst()).to(ctx.device),
        n,
        n,
    )
    x = torch.from_numpy(np.ascontiguousarray(graph.features(), dtype=np.float32)).to(ctx.device)
    block = ctx.layers.block(full, ctx.device)
    out = ctx.state["model"]([block] * ctx.inputs.model.num_layers, x, [None] * ctx.inputs.model.num_layers)
    test = torch.from_numpy(np.flatnonzero(graph.test_mask)).to(ctx.device)
    labels = torch.as_tensor(np.asarray(graph.labels, dtype=np.int64)).to(ctx.device)
    return float((out[test].argmax(dim=1) == labels[test]).float().mean())
