"""``p3`` for real: P3's model-parallel first layer over feature slices and data-parallel
remaining layers across worker processes, as the plan
(:mod:`workbench.strategies.execution.p3`) describes it.

Worker ``r`` keeps slice ``r`` of every vertex's input features (the plan's slice widths)
in its host memory, and on its device the slice of the vertices the placement caches for
it. Its model copy holds layers 2..L whole and, of the first layer, only the weights that
multiply its slice (:func:`slice_conv`: a layer of the same kind with the slice as input;
the first layer's bias goes with slice 0, so the slices' outputs sum to the whole layer's
output before its nonlinearity). Per iteration ``i``, worker ``r``:

1. takes its minibatch ``epoch[i][r]`` as model-centric does (``sample``) and sends the
   structure of its first block (source and destination ids, local edge endpoints: int64)
   to every other worker, receiving theirs (``graph-to-w{q}``, point-to-point);
2. for every minibatch ``j``: reads slice ``r`` of ``j``'s input vertices (its cache,
   ``gather_local``; its host memory, ``h2d``) and computes the partial first layer of
   ``j``'s block over that slice (``mb{j}.fwd0-partial``), the block built from the
   structure it received;
3. sends each ``j`` its partial (``mb{j}.partial-to-w{j}``, all pairs at once); sums the
   partials of its own minibatch and applies the nonlinearity (``fwd0-combine``);
4. runs layers 2..L forward and one backward pass through them and the combine, timed by
   layer (``fwd{l}``, ``bwd{l}``, ``bwd0-combine``); the gradient of the summed partials is
   the gradient of each partial, so it sends it to every other worker (``grad0-to-w{q}``)
   and receives theirs;
5. back-propagates each received gradient through its partial of that minibatch
   (``mb{j}.bwd0-partial``) and steps its slice's optimizer on the sum divided by the
   workers (``update-slice``: the same mean as the all-reduce gives the other layers;
   no one else holds the slice);
6. all-reduces layers 2..L's gradients and steps their optimizer (``allreduce``, ``update``).

With the same seeds it trains the model that ``model-centric`` trains on the same
minibatches (the first layer's sums are split over slices: equal up to summation order).
Edge weights of importance samplers are not part of the structure the plan sends; a remote
minibatch's are taken from the run's prepared epoch. At the end of every epoch the workers
sum their zero-padded slices (an all-reduce outside the plan, like evaluation's reads) so
every model copy holds the whole first layer for :func:`evaluate`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.layers import GraphConv, SAGEConv, TensorBlock, build_layers, edge_weight
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    WorkerContext,
    all_reduce_and_step,
    backward_by_layer,
    exchange_pairwise,
    legacy_executor,
    link_engine,
    make_optimizer,
)
from realrun.schemes.model_centric import evaluate, forward_by_layer
from workbench.errors import ConfigError
from workbench.model import LayerSpec
from workbench.strategies.execution.p3 import SPLITTABLE_FIRST_LAYERS, slice_widths
from workbench.strategies.sampling.base import Block

__all__ = ["PLAN_PARAMS", "evaluate", "run_epoch", "setup"]

# As model-centric's: an iteration's minibatch is handed over after the previous step.
PLAN_PARAMS = {"prefetch": 0, "feature_service": False}  # no feature service in the real store


def slice_conv(spec: LayerSpec, whole: nn.Module, begin: int, end: int, with_bias: bool) -> nn.Module:
    """The first layer restricted to input dimensions ``begin:end`` of ``whole`` (a plain-PyTorch
    ``SAGEConv`` or ``GraphConv``): its output summed over a partition of the dimensions, plus
    the bias once, is ``whole``'s output."""
    width = end - begin
    with torch.no_grad():
        if spec.kind == "sage":
            part = SAGEConv(width, spec.out_dim, bias=with_bias)
            part.fc_self.weight.copy_(whole.fc_self.weight[:, begin:end])
            part.fc_neigh.weight.copy_(whole.fc_neigh.weight[:, begin:end])
            if with_bias:
                part.fc_self.bias.copy_(whole.fc_self.bias)
        elif spec.kind == "gcn":
            part = GraphConv(width, spec.out_dim, norm=whole._norm, bias=with_bias)
            part.weight.copy_(whole.weight[begin:end])
            if with_bias:
                part.bias.copy_(whole.bias)
        else:
            raise ConfigError(
                f"p3: the first layer is split over feature slices only for {', '.join(SPLITTABLE_FIRST_LAYERS)}"
            )
    return part


def _padded(spec: LayerSpec, part: nn.Module, begin: int, end: int, feat_dim: int) -> dict[str, torch.Tensor]:
    """``part``'s weights in the whole first layer's state-dict layout, zero outside ``begin:end``."""
    out: dict[str, torch.Tensor] = {}
    for name, value in part.state_dict().items():
        if name.endswith("bias"):
            out[name] = value.clone()
            continue
        axis = 1 if spec.kind == "sage" else 0  # nn.Linear is (out, in); GraphConv's weight (in, out)
        shape = list(value.shape)
        shape[axis] = feat_dim
        whole = torch.zeros(shape, dtype=value.dtype, device=value.device)
        whole.narrow(axis, begin, end - begin).copy_(value)
        out[name] = whole
    return out


def setup(ctx: WorkerContext) -> None:
    """The model copy (layers 2..L whole, the first layer's slice), optimizers and feature slice."""
    if "model" in ctx.state:
        return
    spec = ctx.inputs.model
    first = spec.layers[0]
    if first.kind not in SPLITTABLE_FIRST_LAYERS or first.residual or spec.num_layers < 2:
        raise ConfigError(
            f"p3 for real: the first layer must be a non-residual {' or '.join(SPLITTABLE_FIRST_LAYERS)} "
            f"layer followed by at least one more; model {spec.name!r} has {first.kind} first"
        )
    seed, r = ctx.config.seed, ctx.rank
    widths = slice_widths(first.in_dim, ctx.world)
    begin = sum(widths[:r])
    end = begin + widths[r]
    model = ctx.layers.build(spec, seed).to(ctx.device)
    # The slice from the same initial weights as every other layer (the plain-PyTorch stack's layout).
    part = slice_conv(first, build_layers(spec, seed=seed).convs[0], begin, end, with_bias=r == 0).to(
        ctx.device
    )
    params = [p for name, p in model.named_parameters() if not name.startswith(("convs.0.", "residuals.0."))]
    for p in model.convs[0].parameters():
        p.requires_grad_(False)
    training = ctx.config.training
    ctx.state.update(
        model=model,
        params=params,
        optimizer=make_optimizer(training.optimizer, params, training.learning_rate),
        slice=part,
        slice_params=list(part.parameters()),
        slice_optimizer=make_optimizer(training.optimizer, part.parameters(), training.learning_rate),
        slice_range=(begin, end),
    )
    graph = ctx.inputs.graph
    host = torch.from_numpy(np.ascontiguousarray(graph.features()[:, begin:end], dtype=np.float32))
    ctx.state["feature_slice"] = host
    masks = ctx.inputs.cached_masks
    cached = np.flatnonzero(masks[r]) if masks is not None else np.empty(0, dtype=np.int64)
    slot = np.full(graph.num_nodes, -1, dtype=np.int64)
    slot[cached] = np.arange(cached.shape[0], dtype=np.int64)
    ctx.state["cache_slot"] = slot
    ctx.state["cache"] = host[torch.from_numpy(cached)].to(ctx.device)


def run_epoch(ctx: WorkerContext, epoch: int) -> dict[str, Any]:
    """Train one epoch; returns this worker's loss sum, correct predictions and seed count."""
    setup(ctx)
    totals = {"loss_sum": 0.0, "correct": 0, "seeds": 0}
    for it in range(ctx.inputs.num_iterations):
        loss, correct, seeds = iteration(ctx, it)
        totals["loss_sum"] += loss * seeds
        totals["correct"] += correct
        totals["seeds"] += seeds
    assemble_first_layer(ctx)
    return totals


def structure(block: Block) -> torch.Tensor:
    """A block's structure as the plan counts it: source ids, destination ids, then the local
    source and destination of every edge (int64)."""
    return torch.from_numpy(
        np.concatenate(
            [
                np.asarray(a, dtype=np.int64)
                for a in (block.src_nodes, block.dst_nodes, block.edge_src, block.edge_dst)
            ]
        )
    )


def structure_len(block: Block) -> int:
    """Entries of :func:`structure` for ``block``."""
    return block.num_src + block.num_dst + 2 * block.num_edges


def from_structure(
    flat: torch.Tensor, like: Block, weight: torch.Tensor | None
) -> tuple[torch.Tensor, TensorBlock]:
    """Input vertex ids and the block, read back from :func:`structure`'s layout (``like``:
    the sizes, which every worker knows from the run's prepared epoch)."""
    s, d, e = like.num_src, like.num_dst, like.num_edges
    src_ids = flat[:s]
    edges = flat[s + d :]
    return src_ids, TensorBlock(edges[:e], edges[e:], s, d, weight)


def read_slice(ctx: WorkerContext, vertices: torch.Tensor, prefix: str) -> torch.Tensor:
    """Slice ``ctx.rank`` of ``vertices``' features: cached rows from the device, the rest from
    host memory; recorded as the plan's ``{prefix}.local`` and ``{prefix}.host``."""
    ids = vertices.cpu().numpy()
    slots = ctx.state["cache_slot"][ids]
    hit = slots >= 0
    miss = np.flatnonzero(~hit)
    host: torch.Tensor = ctx.state["feature_slice"]
    x: torch.Tensor | None = None
    if miss.shape[0] < ids.shape[0]:  # some rows are cached
        x = torch.empty((ids.shape[0], host.shape[1]), dtype=host.dtype, device=ctx.device)
        start = ctx.now()
        local = ctx.state["cache"][torch.from_numpy(slots[hit]).to(ctx.device)]
        x[torch.from_numpy(np.flatnonzero(hit)).to(ctx.device)] = local
        ctx.counter.add("gather_local", tensor_bytes(local))
        ctx.row(f"{prefix}.local", "gather_local", start, ctx.now())
    if x is None or miss.shape[0]:
        start = ctx.now()
        rows = host[torch.from_numpy(ids[miss])].to(ctx.device)
        if x is None:  # all from host memory: the read is the output as it is, in the request's order
            x = rows
        else:
            x[torch.from_numpy(miss).to(ctx.device)] = rows
        nbytes = tensor_bytes(rows)
        ctx.counter.add("h2d", nbytes)
        ctx.row(f"{prefix}.host", "h2d", start, ctx.now(), nbytes)
    return x


def iteration(ctx: WorkerContext, it: int) -> tuple[float, int, int]:
    inputs, r, device = ctx.inputs, ctx.rank, ctx.device
    model, part = ctx.state["model"], ctx.state["slice"]
    prefix = f"i{it}.w{r}"
    num_layers = inputs.model.num_layers
    others = [q for q in range(ctx.world) if q != r]
    minibatches = inputs.epoch[it]

    ctx.begin_iteration(it)
    start = ctx.now()
    mb = minibatches[r]
    blocks = [None] + [ctx.layers.block(b, device) for b in mb.blocks[1:]]
    weights = [edge_weight(b, device) for b in mb.blocks]
    labels = torch.as_tensor(np.asarray(inputs.graph.labels[mb.blocks[-1].dst_nodes], dtype=np.int64)).to(
        device
    )
    mine = structure(mb.blocks[0])
    ctx.row(f"{prefix}.sample", "sample", start, ctx.now(), device=ctx.host)

    # 1. Every first block's structure to every other worker.
    shapes = {q: ((structure_len(minibatches[q].blocks[0]),), torch.int64) for q in others}
    received, _, sent, start = exchange_pairwise(ctx, dict.fromkeys(others, mine), shapes)
    nbytes = tensor_bytes(mine)
    for q in others:
        ctx.counter.add("sample", nbytes)
        ctx.row(
            f"{prefix}.graph-to-w{q}", "sample", start, sent[q], nbytes, engine=link_engine(ctx.inputs, r, q)
        )
    firsts: dict[int, tuple[torch.Tensor, TensorBlock]] = {}
    for j, other in enumerate(minibatches):
        flat = mine.to(device) if j == r else received[j]
        w = weights[0] if j == r else edge_weight(other.blocks[0], device)
        firsts[j] = from_structure(flat, other.blocks[0], w)

    # 2. Slice r of every minibatch's first layer.
    partials: dict[int, torch.Tensor] = {}
    for j, (vertices, block) in firsts.items():
        ctx.status.phase("gather", it)
        x = read_slice(ctx, vertices, f"{prefix}.mb{j}")
        ctx.status.phase("forward", it)
        start = ctx.now()
        partials[j] = part(block, x, edge_weight=block.edge_weight)
        ctx.row(f"{prefix}.mb{j}.fwd0-partial", "forward", start, ctx.now())

    # 3. Partials to their minibatch's worker; the sum and the nonlinearity.
    width = int(partials[r].shape[1])
    shapes = {q: ((mb.blocks[0].num_dst, width), torch.float32) for q in others}
    arrived, _, sent, start = exchange_pairwise(ctx, {q: partials[q].detach() for q in others}, shapes)
    for q in others:
        nbytes = tensor_bytes(partials[q])
        ctx.counter.add("alltoall", nbytes)
        ctx.row(
            f"{prefix}.mb{q}.partial-to-w{q}",
            "alltoall",
            start,
            sent[q],
            nbytes,
            engine=link_engine(ctx.inputs, r, q),
        )
    ctx.status.phase("forward", it)
    start = ctx.now()
    summed = partials[r].detach().clone()
    for q in others:
        summed += arrived[q]
    summed.requires_grad_(True)
    h = F.relu(summed)
    ctx.row(f"{prefix}.fwd0-combine", "forward", start, ctx.now())

    # 4. Layers 2..L, data parallel; backward through them and the combine.
    ins, loss, correct = forward_by_layer(
        ctx, model, blocks, weights, h, labels, prefix, it, range(1, num_layers)
    )
    tasks = [f"{prefix}.bwd0-combine", *(f"{prefix}.bwd{layer}" for layer in range(1, num_layers))]
    backward_by_layer(ctx, loss, [summed, *ins], prefix, it, tasks=tasks)
    grad = summed.grad

    shapes = {q: ((minibatches[q].blocks[0].num_dst, width), torch.float32) for q in others}
    grads, _, sent, start = exchange_pairwise(ctx, dict.fromkeys(others, grad), shapes)
    nbytes = tensor_bytes(grad)
    for q in others:
        ctx.counter.add("alltoall", nbytes)
        ctx.row(
            f"{prefix}.grad0-to-w{q}",
            "alltoall",
            start,
            sent[q],
            nbytes,
            engine=link_engine(ctx.inputs, r, q),
        )
    grads[r] = grad

    # 5. Each partial's backward, then the slice's own step (the mean over the workers' losses).
    ctx.status.phase("backward", it)
    for j in range(ctx.world):
        start = ctx.now()
        partials[j].backward(grads[j])
        ctx.row(f"{prefix}.mb{j}.bwd0-partial", "backward", start, ctx.now())
    ctx.status.phase("update", it)
    start = ctx.now()
    for p in ctx.state["slice_params"]:
        p.grad /= ctx.world
    ctx.state["slice_optimizer"].step()
    ctx.state["slice_optimizer"].zero_grad(set_to_none=False)
    ctx.row(f"{prefix}.update-slice", "update", start, ctx.now())

    # 6. Layers 2..L's gradients.
    all_reduce_and_step(
        ctx,
        it,
        torch.cat([p.grad.reshape(-1) for p in ctx.state["params"]]),
        ctx.state["params"],
        ctx.state["optimizer"],
    )
    return float(loss.detach()), correct, int(labels.shape[0])


@torch.no_grad()
def assemble_first_layer(ctx: WorkerContext) -> None:
    """Every worker's model copy gets the whole first layer: the sum of the slices, each zero
    outside its dimensions (evaluation's, outside the plan's transfers)."""
    spec = ctx.inputs.model.layers[0]
    begin, end = ctx.state["slice_range"]
    whole = ctx.state["model"].convs[0].state_dict()
    padded = _padded(spec, ctx.state["slice"], begin, end, spec.in_dim)
    for name, value in whole.items():  # the bias, on every slice but 0
        padded.setdefault(name, torch.zeros_like(value))
    names_order = sorted(whole)
    flat = torch.cat([padded[n].reshape(-1) for n in names_order])
    ctx.comm(True)
    dist.all_reduce(flat, group=ctx.group)
    ctx.comm(False)
    state, offset = {}, 0
    for n in names_order:
        size = padded[n].numel()
        state[n] = flat[offset : offset + size].view_as(padded[n])
        offset += size
    ctx.state["model"].convs[0].load_state_dict(state)


# TEMPORARY (issue 24): registered through the module adapter until this executor is a class.
REAL_EXECUTORS.register("p3")(legacy_executor(sys.modules[__name__]))
