"""``p3`` for real: P3's model-parallel first layer over feature slices and data-parallel
remaining layers across worker processes, carrying out the scheme's schedule
(:meth:`workbench.strategies.execution.p3.P3Scheme.schedule`), the one its plan is built from.

Worker ``r`` keeps slice ``r`` of every vertex's input features (the layout's bounds) in its
host memory, and on its device its slice of the vertices the placement caches for it. Its
model copy holds layers 2..L whole and, of the first layer, only the weights that multiply
its slice (:func:`slice_conv`: a layer of the same kind with the slice as input; the first
layer's bias goes with slice 0, so the slices' outputs sum to the whole layer's output
before its nonlinearity). Per iteration, worker ``r`` does what the schedule says:

1. takes its minibatch ``epoch[i][r]`` as model-centric does (``sample``) and sends the
   structure of its first block (source and destination ids, local edge endpoints: int64)
   to every other worker, receiving theirs (the schedule's structure sends, point-to-point);
2. for every minibatch ``j``: reads slice ``r`` of ``j``'s input vertices (the schedule's
   cached rows from its cache, ``gather_local``; the others from its host memory, ``h2d``)
   and computes the partial first layer of ``j``'s block over that slice, the block built
   from the structure it received;
3. sends each ``j`` its partial (all pairs at once); sums the partials of its own minibatch
   and applies the nonlinearity (the combine);
4. runs layers 2..L forward and one backward pass through them and the combine, timed by
   layer; the gradient of the summed partials is the gradient of each partial, so it sends
   it to every other worker and receives theirs;
5. back-propagates each received gradient through its partial of that minibatch and steps
   its slice's optimizer on the sum divided by the workers (the same mean as the all-reduce
   gives the other layers; no one else holds the slice);
6. all-reduces layers 2..L's gradients and steps their optimizer (``allreduce``, ``update``).

With the same seeds it trains the model that ``model-centric`` trains on the same
minibatches (the first layer's sums are split over slices: equal up to summation order).
Edge weights of importance samplers are not part of the structure the plan sends; a remote
minibatch's are taken from the run's prepared epoch. At the end of every epoch the workers
sum their zero-padded slices (an all-reduce outside the plan, like evaluation's reads) so
every model copy holds the whole first layer for :meth:`P3Executor.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.host_rows import HostRows, host_features
from realrun.layers import GraphConv, SAGEConv, TensorBlock, build_layers, edge_weight
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    WorkerContext,
    backward_by_layer,
    exchange_pairwise,
    link_engine,
    make_optimizer,
)
from realrun.schemes.model_centric import ModelCentricExecutor, forward_by_layer, seed_labels
from workbench.errors import ConfigError
from workbench.model import LayerSpec
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.p3 import (
    SPLITTABLE_FIRST_LAYERS,
    P3Layout,
    P3Schedule,
    P3Scheme,
    SliceRead,
)
from workbench.strategies.sampling.base import Block

__all__ = ["P3Executor", "from_structure", "slice_conv", "structure"]


class _Send(Protocol):
    """A scheduled transfer between two workers (a structure, a partial, a gradient)."""

    task: str
    sender: int
    receiver: int


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
            part = GraphConv(width, spec.out_dim, norm=whole.norm, bias=with_bias)
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


def structure(block: Block) -> torch.Tensor:
    """A block's structure as the schedule counts it (``structure_entries``): source ids,
    destination ids, then the local source and destination of every edge (int64)."""
    return torch.from_numpy(
        np.concatenate(
            [
                np.asarray(a, dtype=np.int64)
                for a in (block.src_nodes, block.dst_nodes, block.edge_src, block.edge_dst)
            ]
        )
    )


def from_structure(
    flat: torch.Tensor, like: Block, weight: torch.Tensor | None
) -> tuple[torch.Tensor, TensorBlock]:
    """Input vertex ids and the block, read back from :func:`structure`'s layout (``like``:
    the sizes, which every worker knows from the run's prepared epoch)."""
    s, d, e = like.num_src, like.num_dst, like.num_edges
    src_ids = flat[:s]
    edges = flat[s + d :]
    return src_ids, TensorBlock(edges[:e], edges[e:], s, d, weight)


def _check_splittable(ctx: WorkerContext) -> None:
    """What the real layers add to the scheme's own checks: no residual around the first layer."""
    spec = ctx.inputs.model
    first = spec.layers[0]
    if first.kind not in SPLITTABLE_FIRST_LAYERS or first.residual or spec.num_layers < 2:
        raise ConfigError(
            f"p3 for real: the first layer must be a non-residual {' or '.join(SPLITTABLE_FIRST_LAYERS)} "
            f"layer followed by at least one more; model {spec.name!r} has {first.kind} first"
        )


@REAL_EXECUTORS.register("p3")
class P3Executor(ModelCentricExecutor):
    """P3 on this worker: the model copy's layers 2..L trained data parallel (``self.params``,
    ``self.optimizer``), its slice of the first layer (``self.slice``) trained on its own, every
    iteration as the run's scheme schedules it."""

    def __init__(self, ctx: WorkerContext) -> None:
        _check_splittable(ctx)
        if not isinstance(ctx.scheme, P3Scheme):
            raise TypeError(
                f"the p3 executor carries out a P3Scheme's schedule, not {type(ctx.scheme).__name__}"
            )
        self.scheme: P3Scheme = ctx.scheme
        self.layout: P3Layout = self.scheme.layout(ctx.inputs)
        super().__init__(ctx)
        # Layer 1 trains as the slice below; the copy's whole layer 1 is assembled for evaluation.
        for p in self.model.convs[0].parameters():
            p.requires_grad_(False)
        self.params = [
            p
            for name, p in self.model.named_parameters()
            if not name.startswith(("convs.0.", "residuals.0."))
        ]
        training = ctx.config.training
        self.optimizer = make_optimizer(training.optimizer, self.params, training.learning_rate)
        self.bounds = self.layout.bounds(ctx.rank)
        self.slice = self._build_slice()
        self.slice_params = list(self.slice.parameters())
        self.slice_optimizer = make_optimizer(training.optimizer, self.slice_params, training.learning_rate)
        self._load_features()

    def _build_slice(self) -> nn.Module:
        """This worker's slice of the first layer, from the same initial weights as every other
        layer (the plain-PyTorch stack's layout); the bias goes with slice 0."""
        ctx = self.ctx
        spec, seed = ctx.inputs.model, ctx.config.seed
        whole = build_layers(spec, seed=seed).convs[0]
        begin, end = self.bounds
        return slice_conv(spec.layers[0], whole, begin, end, with_bias=ctx.rank == 0).to(ctx.device)

    def _load_features(self) -> None:
        """The worker's slice of every vertex's features in host memory, and on the device its slice
        of the rows the placement caches for it (``cache_slot[v]``: v's row there, -1: none)."""
        ctx = self.ctx
        graph = ctx.inputs.graph
        begin, end = self.bounds
        self.feature_slice = host_features(graph.features()[:, begin:end], ctx.device)
        self.host_rows = HostRows(ctx.device)
        placement = ctx.inputs.placement
        # A copy: a cached placement's arrays are read-only, and torch wants writable ones.
        cached = (
            placement.gpu_vertices[ctx.rank].copy() if placement is not None else np.empty(0, dtype=np.int64)
        )
        self.cache_slot = np.full(graph.num_nodes, -1, dtype=np.int64)
        self.cache_slot[cached] = np.arange(cached.shape[0], dtype=np.int64)
        self.cache = self.feature_slice[torch.from_numpy(cached)].to(ctx.device)

    def run_epoch(self, epoch: int) -> EpochTotals:
        totals = super().run_epoch(epoch)
        self.assemble_first_layer()
        return totals

    def iteration(self, it: int) -> tuple[float, int, int]:
        """Iteration ``it`` as the scheme schedules it; returns the loss, correct predictions and seeds."""
        schedule = self.scheme.schedule(self.ctx.inputs, it)
        mine, blocks, weights, labels = self._handover(schedule)
        firsts = self._exchange_structure(schedule, mine, weights[0])
        partials = self._partials(schedule, firsts)
        summed, h = self._combine(schedule, partials)
        loss, correct = self._data_parallel(schedule, blocks, weights, summed, h, labels)
        grads = self._exchange_gradients(schedule, summed.grad)
        self._slice_backward_and_step(schedule, partials, grads)
        self.step(it, self.flat_gradients())
        return float(loss.detach()), correct, int(labels.shape[0])

    def _handover(self, schedule: P3Schedule) -> tuple[torch.Tensor, list[Any], list[Any], torch.Tensor]:
        """This worker's minibatch on the device: its first block's structure, the later blocks, the
        edge weights and the seeds' labels (the schedule's sampling task)."""
        ctx, r = self.ctx, self.ctx.rank
        ctx.begin_iteration(schedule.iteration)
        start = ctx.now()
        mb = ctx.inputs.epoch[schedule.iteration][r]
        blocks = [None] + [ctx.layers.block(b, ctx.device) for b in mb.blocks[1:]]
        weights = [edge_weight(b, ctx.device) for b in mb.blocks]
        labels = seed_labels(ctx, mb.blocks[-1].dst_nodes)
        mine = structure(mb.blocks[0])
        ctx.row(schedule.samples[r], "sample", start, ctx.now(), device=ctx.host)
        return mine, blocks, weights, labels

    def _exchange(
        self,
        sends: Sequence[_Send],
        payload: Callable[[Any], torch.Tensor],
        shape: Callable[[Any], tuple[int, ...]],
        dtype: torch.dtype,
        phase: str,
    ) -> dict[int, torch.Tensor]:
        """The scheduled ``sends`` this worker takes part in, all at once: it sends ``payload(s)``
        where it is the sender and receives a ``shape(s)`` tensor where it is the receiver; each
        send recorded under its task id with the bytes it really moved."""
        ctx, r = self.ctx, self.ctx.rank
        out = {s.receiver: s for s in sends if s.sender == r}
        into = {s.sender: (shape(s), dtype) for s in sends if s.receiver == r}
        tensors = {q: payload(s) for q, s in out.items()}
        received, _, sent, start = exchange_pairwise(ctx, tensors, into)
        for q, s in out.items():
            nbytes = tensor_bytes(tensors[q])
            ctx.counter.add(phase, nbytes)
            ctx.row(s.task, phase, start, sent[q], nbytes, engine=link_engine(ctx.inputs, r, q))
        return received

    def _exchange_structure(
        self, schedule: P3Schedule, mine: torch.Tensor, weight: torch.Tensor | None
    ) -> dict[int, tuple[torch.Tensor, TensorBlock]]:
        """Step 1: every first block's structure to every other worker; returns each minibatch's
        input vertices and first block as this worker sees them."""
        ctx, r = self.ctx, self.ctx.rank
        received = self._exchange(
            schedule.structure, lambda s: mine, lambda s: (s.entries,), torch.int64, "sample"
        )
        firsts: dict[int, tuple[torch.Tensor, TensorBlock]] = {}
        for j, other in enumerate(ctx.inputs.epoch[schedule.iteration]):
            flat = mine.to(ctx.device) if j == r else received[j]
            w = weight if j == r else edge_weight(other.blocks[0], ctx.device)
            firsts[j] = from_structure(flat, other.blocks[0], w)
        return firsts

    def _partials(
        self, schedule: P3Schedule, firsts: dict[int, tuple[torch.Tensor, TensorBlock]]
    ) -> dict[int, torch.Tensor]:
        """Step 2: this worker's slice of every minibatch's first layer."""
        ctx, it = self.ctx, schedule.iteration
        partials: dict[int, torch.Tensor] = {}
        for j, (vertices, block) in firsts.items():
            step = schedule.partial(ctx.rank, j)
            ctx.status.phase("gather", it)
            x = self._read_slice(vertices, step.read)
            ctx.status.phase("forward", it)
            start = ctx.now()
            partials[j] = self.slice(block, x, edge_weight=block.edge_weight)
            ctx.row(step.forward, "forward", start, ctx.now())
        return partials

    def _read_slice(self, vertices: torch.Tensor, read: SliceRead) -> torch.Tensor:
        """This worker's slice of ``vertices``' features as ``read`` schedules it: the cached rows
        from the device, the rest from host memory."""
        ctx = self.ctx
        ids = vertices.cpu().numpy()
        if read.local_task is None:  # all from host memory: the read is the output as it is
            if read.host_task is None:
                return torch.empty((0, self.feature_slice.shape[1]), device=ctx.device)
            return self._host_rows(ids, read.host_task)
        hit = np.flatnonzero(read.cached)
        slots = self.cache_slot[ids[hit]]
        if (slots < 0).any():
            raise RuntimeError(f"worker {ctx.rank}: {read.local_task} gathers rows its cache does not hold")
        x = torch.empty((ids.shape[0], self.feature_slice.shape[1]), device=ctx.device)
        start = ctx.now()
        local = self.cache[torch.from_numpy(slots).to(ctx.device)]
        x[torch.from_numpy(hit).to(ctx.device)] = local
        ctx.counter.add("gather_local", tensor_bytes(local))
        ctx.row(read.local_task, "gather_local", start, ctx.now())
        if read.host_task is not None:
            miss = np.flatnonzero(~read.cached)
            x[torch.from_numpy(miss).to(ctx.device)] = self._host_rows(ids[miss], read.host_task)
        return x

    def _host_rows(self, ids: np.ndarray, task: str) -> torch.Tensor:
        """This worker's slice of vertices ``ids`` copied from host memory, recorded as ``task``."""
        ctx = self.ctx
        start = ctx.now()
        rows = self.host_rows.gather(self.feature_slice, torch.from_numpy(ids))
        nbytes = tensor_bytes(rows)
        ctx.counter.add("h2d", nbytes)
        ctx.row(task, "h2d", start, ctx.now(), nbytes)
        return rows

    def _combine(
        self, schedule: P3Schedule, partials: dict[int, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Step 3: the partials to their minibatch's worker; the sum of this worker's minibatch's
        (a leaf: its gradient is what goes back) and the nonlinearity."""
        ctx, r = self.ctx, self.ctx.rank
        combine = schedule.combines[r]
        arrived = self._exchange(
            schedule.partial_sends(),
            lambda s: partials[s.receiver].detach(),
            lambda s: (s.rows, s.width),
            torch.float32,
            "alltoall",
        )
        ctx.status.phase("forward", schedule.iteration)
        start = ctx.now()
        summed = partials[r].detach().clone()
        for s in combine.partials_in:
            summed += arrived[s.sender]
        summed.requires_grad_(True)
        h = F.relu(summed)
        ctx.row(combine.forward, "forward", start, ctx.now())
        return summed, h

    def _data_parallel(
        self,
        schedule: P3Schedule,
        blocks: list[Any],
        weights: list[Any],
        summed: torch.Tensor,
        h: torch.Tensor,
        labels: torch.Tensor,
    ) -> tuple[torch.Tensor, int]:
        """Step 4: layers 2..L forward, then one backward pass through them and the combine."""
        ctx, it = self.ctx, schedule.iteration
        combine = schedule.combines[ctx.rank]
        prefix = combine.prefix
        layers = schedule.dp_layers
        ins, loss, correct = forward_by_layer(ctx, self.model, blocks, weights, h, labels, prefix, it, layers)
        tasks = [combine.backward, *(task_ids.backward_task(prefix, layer) for layer in layers)]
        backward_by_layer(ctx, loss, [summed, *ins], prefix, it, tasks=tasks)
        return loss, correct

    def _exchange_gradients(self, schedule: P3Schedule, grad: torch.Tensor) -> dict[int, torch.Tensor]:
        """Step 5's exchange: this minibatch's gradient of the sum to every other slice's worker;
        returns the gradient of every minibatch's sum, this one's included."""
        grads = self._exchange(
            schedule.gradient_sends(), lambda s: grad, lambda s: (s.rows, s.width), torch.float32, "alltoall"
        )
        grads[self.ctx.rank] = grad
        return grads

    def _slice_backward_and_step(
        self, schedule: P3Schedule, partials: dict[int, torch.Tensor], grads: dict[int, torch.Tensor]
    ) -> None:
        """Step 5: each partial's backward, then the slice's own step (the mean over the workers'
        losses, as the all-reduce gives the other layers)."""
        ctx, it = self.ctx, schedule.iteration
        ctx.status.phase("backward", it)
        for j in range(ctx.world):
            start = ctx.now()
            partials[j].backward(grads[j])
            ctx.row(schedule.partial(ctx.rank, j).backward, "backward", start, ctx.now())
        ctx.status.phase("update", it)
        start = ctx.now()
        for p in self.slice_params:
            p.grad /= ctx.world
        self.slice_optimizer.step()
        self.slice_optimizer.zero_grad(set_to_none=False)
        ctx.row(schedule.slice_updates[ctx.rank], "update", start, ctx.now())

    @torch.no_grad()
    def assemble_first_layer(self) -> None:
        """Every worker's model copy gets the whole first layer: the sum of the slices, each zero
        outside its dimensions (evaluation's, outside the plan's transfers)."""
        ctx = self.ctx
        spec = ctx.inputs.model.layers[0]
        begin, end = self.bounds
        whole = self.model.convs[0].state_dict()
        padded = _padded(spec, self.slice, begin, end, spec.in_dim)
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
        self.model.convs[0].load_state_dict(state)

    def checkpoint(self) -> dict[str, Any]:
        return {
            **super().checkpoint(),
            "slice": self.slice.state_dict(),
            "slice_optimizer": self.slice_optimizer.state_dict(),
        }

    def restore(self, saved: dict[str, Any]) -> None:
        super().restore(saved)
        if "slice" in saved:  # a state saved before the slice was part of it holds the model alone
            self.slice.load_state_dict(saved["slice"])
            self.slice_optimizer.load_state_dict(saved["slice_optimizer"])
