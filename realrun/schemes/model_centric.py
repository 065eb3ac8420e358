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
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    RealExecutor,
    WorkerContext,
    all_reduce_and_step,
    backward_by_layer,
    epoch_totals,
    make_optimizer,
)
from workbench.strategies.execution import task_ids


@REAL_EXECUTORS.register("model-centric")
class ModelCentricExecutor(RealExecutor):
    """Data parallel training on this worker's copy of the model (the same initial weights on
    every worker: the layers are built from the run's seed). The schemes that keep a model copy
    per worker (hopgnn, p3, roc-fullgraph) build on it."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.model = ctx.layers.build(ctx.inputs.model, ctx.config.seed).to(ctx.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(
            ctx.config.training.optimizer, self.params, ctx.config.training.learning_rate
        )

    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train one epoch; returns this worker's loss sum, correct predictions and seed count."""
        results = map(self.iteration, range(self.ctx.inputs.num_iterations))
        return epoch_totals((loss * seeds, correct, seeds) for loss, correct, seeds in results)

    def iteration(self, it: int) -> tuple[float, int, int]:
        ctx = self.ctx
        inputs, rank, device = ctx.inputs, ctx.rank, ctx.device
        prefix = task_ids.worker_prefix(it, rank)

        ctx.begin_iteration(it)
        start = ctx.now()
        mb = inputs.epoch[it][rank]
        blocks = [ctx.layers.block(b, device) for b in mb.blocks]
        weights = [edge_weight(b, device) for b in mb.blocks]
        labels = seed_labels(ctx, mb.blocks[-1].dst_nodes)
        ctx.row(task_ids.sample_task(prefix), "sample", start, ctx.now(), device=ctx.host)

        ctx.status.phase("gather", it)
        x, reads = ctx.store.gather(mb.input_nodes, prefix)
        for read in reads:
            ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)

        layers = range(inputs.model.num_layers)
        ins, loss, correct = forward_by_layer(ctx, self.model, blocks, weights, x, labels, prefix, it, layers)
        backward_by_layer(ctx, loss, ins, prefix, it)
        self.step(it, self.flat_gradients())
        return float(loss.detach()), correct, int(labels.shape[0])

    def flat_gradients(self) -> torch.Tensor:
        return torch.cat([p.grad.reshape(-1) for p in self.params])

    def step(self, it: int, flat: torch.Tensor) -> None:
        """All-reduce the flattened gradients ``flat`` and step the optimizer."""
        all_reduce_and_step(self.ctx, it, flat, self.params, self.optimizer)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Test accuracy of this worker's model copy over the whole graph (every layer on every
        vertex's full in-neighbourhood). Reads the graph's full feature matrix: evaluation is
        outside the run's accounted transfers and timed phases."""
        ctx = self.ctx
        graph = ctx.inputs.graph
        if graph.test_mask is None or not graph.test_mask.any():
            return float("nan")
        n = graph.num_nodes
        full = TensorBlock(
            torch.from_numpy(graph.indices.astype(np.int64)).to(ctx.device),
            torch.from_numpy(graph.edge_dst()).to(ctx.device),
            n,
            n,
        )
        x = torch.from_numpy(np.ascontiguousarray(graph.features(), dtype=np.float32)).to(ctx.device)
        block = ctx.layers.block(full, ctx.device)
        num_layers = ctx.inputs.model.num_layers
        out = self.model([block] * num_layers, x, [None] * num_layers)
        test = torch.from_numpy(np.flatnonzero(graph.test_mask)).to(ctx.device)
        labels = torch.as_tensor(np.asarray(graph.labels, dtype=np.int64)).to(ctx.device)
        return float((out[test].argmax(dim=1) == labels[test]).float().mean())

    def checkpoint(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def restore(self, saved: dict[str, Any]) -> None:
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])


def seed_labels(ctx: WorkerContext, seeds: np.ndarray) -> torch.Tensor:
    """The labels of ``seeds`` on the worker's device."""
    return torch.as_tensor(np.asarray(ctx.inputs.graph.labels[seeds], dtype=np.int64)).to(ctx.device)


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
        ctx.row(task_ids.forward_task(prefix, layer), "forward", start, ctx.now())
    return ins, loss, correct
