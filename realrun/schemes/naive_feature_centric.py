"""``naive-feature-centric`` for real: each model tours the worker processes that hold its
subgraph's input features, carrying its parameters, layer 0's partial sums and the subgraph's
topology, and comes home with the activations backward needs, as the plan
(:mod:`workbench.strategies.execution.naive_feature_centric`, paper 003 section 3.2) describes it.

Every worker process is one server and holds a copy of the model, built from the run's seed, so
every copy starts equal; model ``d`` is at home on worker ``d``. Per iteration each worker takes
the iteration's schedule from the run's scheme, the very object the plan was built from
(:meth:`NaiveFeatureCentricScheme.schedule
<workbench.strategies.execution.naive_feature_centric.NaiveFeatureCentricScheme.schedule>`:
every model's roots, stops, the vertices it reads at each and its hops), and:

1. at home builds its model's subgraph from the sampled epoch every worker holds (the plan's cut,
   :func:`workbench.strategies.execution.micrographs.cell_blocks`), packed as the topology the
   model carries (per layer the sources' vertex ids and the edges' endpoints, int64: the plan's
   ``adjacency`` bytes) (``sample``: this handover, timed on the host);
2. runs the schedule's rounds: stop ``k`` of every tour is round ``k``. At each stop it hosts, the
   worker reads the stop's vertices through its feature store, locally (its cache,
   ``gather_local``; its host memory, ``h2d``; never the network), and adds each layer-0 edge
   whose source it read into the model's partial sums (``aggregate``). At a model's last stop it
   finishes layer 0 and runs the other layers' forward (``fwd{l}``), keeping what backward needs.
   After its round's stops it sends each model on to its next stop, or home after its last
   (``migrate``: sends that do not block, posted before it takes a model, so no round
   deadlocks), and takes the models that arrive, one at a time, over gloo (the main group on
   CPU; beside NCCL the gloo group a worker keeps for host transfers, so the carried tensors go
   through host memory on GPUs);
3. when its model is home (at once if its only stop was home), runs backward from what the model
   brought back, and after the rounds all-reduces the gradient and steps the optimizer, as
   ``model-centric`` does (a worker whose model has no roots adds zeros).

A migration is recorded by its receiver, one row per plan transfer (``model``: the flat
parameters, loaded into the receiver's copy where the model computes; ``partials``: layer 0's
sums, ``num_dst(layer 0) x in_dim`` float32; ``activations``; ``adjacency``), each timing its own
bytes, as ``hopgnn`` records its migrations (:func:`realrun.schemes.base.receive_migration`). A
gloo send waits for its receive, so the receiver first takes an 8-byte stamp announcing the
model (the sender's send time, counted as ``migrate_index``: real traffic the plan does not
model), then posts each part's receive once the one before has arrived: each row runs from
posting to arrival on the receiver's clock, none zero-length, none overlapping another. The
receiver's wait for a model not yet sent ends with the stamp and is in no row.

**Which models.** A partial sum over stops is the full aggregation only where a layer-0 output is
a function of the sum over its in-edges of something of the source alone. GCN (norm ``both``, as
real runs build it) is: ``out_v = in(v)^-1/2 sum_u out(u)^-1/2 x_u W + b``, so the partials are
``sum_u out(u)^-1/2 x_u`` (``in_dim`` wide, the plan's size) and the forward equals model-centric's
on the same subgraph up to float summation order. SAGE adds each destination's own features
(``fc_self``), GIN ``(1 + eps)`` times them (and eps's gradient needs them at home), GAT weighs
each edge by an attention over them, a residual adds them: the tour does not carry them, so those
models are refused (one line) rather than trained with other maths. GCN's backward needs, per
layer, what autograd keeps (:meth:`workbench.model.LayerSpec.saved_for_backward_bytes`): the
aggregated input of its transform and its output; those are the ``activations`` carried home, and
backward runs from them by hand (the transform's gradients, the activation's mask, the
transposed aggregation over the carried topology), with no forward recomputed.

With ``minibatches = "as-sampled"`` model ``d`` trains worker ``d``'s minibatch exactly, so the
run trains the model model-centric trains, to the same loss (tests/realrun). With ``global`` each
model's subgraph holds trees of several minibatches side by side, and GCN's out-degree norm sees
the subgraph's edges (as in hopgnn's micrographs).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from realrun.feature_store import peer_reads_possible
from realrun.layers import TensorBlock, aggregate_sum, edge_sum
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    WorkerContext,
    all_reduce_and_step,
    epoch_totals,
    receive_migration,
)
from realrun.schemes.model_centric import ModelCentricExecutor, seed_labels
from workbench.config import RunConfig
from workbench.errors import ConfigError
from workbench.model import ModelSpec
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.execution.micrographs import CellBlocks, cell_blocks
from workbench.strategies.execution.naive_feature_centric import (
    Hop,
    NaiveFeatureCentricScheme,
    NaiveSchedule,
    Stop,
    Tour,
    aggregate_task,
    backward_prefix,
    migrate_task,
    tour_prefix,
)

# Point-to-point tags of a hop (model d: MIGRATE_TAG + 4 d + part), apart from the feature store's
# exchanges (tag 0); a model makes one hop per round, so its tags never meet twice in one round.
MIGRATE_TAG = 1 << 13
PARTS = 4  # the sender's stamp, then the hop's three carried tensors (HOP_PARTS or RETURN_PARTS)
# Why each refused layer kind cannot be summed over stops: it reads the destination's own features.
NOT_A_SUM = {
    "sage": "adds each destination's own features (fc_self) to its neighbours' mean",
    "gin": "adds (1 + eps) times each destination's own features, and eps's gradient needs them at home",
    "gat": "weighs each edge by an attention over the destination's own features",
}


def check_runs_for_real(inputs: SchemeInputs) -> None:
    """Refuse, in one line, a run whose tours could not compute what the plan says."""
    model = inputs.model
    for k, layer in enumerate(model.layers):
        if layer.kind == "gcn" and not layer.residual:
            continue
        if layer.residual:
            why = "adds each destination's own input (a residual)"
        else:
            why = NOT_A_SUM.get(layer.kind, "has no hand-written backward from carried activations")
        raise ConfigError(
            f"naive-feature-centric runs for real with plain gcn layers only: model {model.name!r} "
            f"layer {k} ({layer.kind}) {why}, which the partial sums a tour carries do not hold; "
            "use model gcn, or simulate it (gnnwb sim)"
        )
    if any(b.edge_weight is not None for row in inputs.epoch for mb in row for b in mb.blocks):
        raise ConfigError(
            "naive-feature-centric runs for real with unweighted samples only: the topology a tour "
            "carries has no edge weights; use a sampler without weights, or simulate it (gnnwb sim)"
        )
    if peer_reads_possible(inputs):
        raise ConfigError(
            "naive-feature-centric runs for real without reads from a peer GPU's cache (the feature "
            "store's peer exchange joins every worker, a stop only its own): use a placement that "
            "does not share caches, or simulate it (gnnwb sim)"
        )


# ---- what a model carries ---------------------------------------------------------------------
@dataclass(eq=False)
class Topology:
    """A model's subgraph as it travels: ``packed`` (int64, on the CPU) holds per layer, input layer
    first, the sources' vertex ids, the edges' source positions and their destination positions;
    ``blocks`` are the same edges on the device, ``input_ids`` the layer-0 sources' vertex ids."""

    packed: torch.Tensor
    blocks: list[TensorBlock]
    input_ids: np.ndarray

    @classmethod
    def of_cut(cls, cut: CellBlocks, tour: Tour, device: torch.device) -> Topology:
        """The topology of ``tour``'s subgraph, ``cut`` from the iteration's minibatches."""
        cut_sizes = [(b.num_src, b.num_dst, int(b.edge_src.shape[0])) for b in cut.blocks]
        if cut_sizes != tour.micrographs.sizes:  # the plan counted the schedule's cut
            raise RuntimeError(
                f"model {tour.model}: cut {cut_sizes}, the schedule's {tour.micrographs.sizes}"
            )
        ids = cut.input_nodes[cut.input_index]
        # A layer's sources are the prefix of the layer below's (destinations first, DGL's convention).
        layers = [
            (ids[: b.num_src], np.asarray(b.edge_src, np.int64), np.asarray(b.edge_dst, np.int64))
            for b in cut.blocks
        ]
        packed = torch.from_numpy(np.concatenate([part for layer in layers for part in layer]))
        return cls.unpack(packed, tour, device)

    @classmethod
    def unpack(cls, packed: torch.Tensor, tour: Tour, device: torch.device) -> Topology:
        """The topology of ``tour`` (its subgraph's sizes) from its packed form."""
        flat = packed.numpy()
        blocks, at = [], 0
        for src, dst, edges in tour.micrographs.sizes:
            edge_src = torch.from_numpy(flat[at + src : at + src + edges]).to(device)
            edge_dst = torch.from_numpy(flat[at + src + edges : at + src + 2 * edges]).to(device)
            blocks.append(TensorBlock(edge_src, edge_dst, src, dst))
            at += src + 2 * edges
        if at != flat.shape[0]:
            raise RuntimeError(f"model {tour.model}'s topology has {flat.shape[0]} ids, its sizes {at}")
        return cls(packed, blocks, flat[: tour.micrographs.sizes[0][0]])


@dataclass(eq=False)
class Travelling:
    """A model on its way to a feature stop: its flat parameters, its partial sums, its topology."""

    tour: Tour
    params: torch.Tensor
    partials: torch.Tensor
    topology: Topology

    def carried(self) -> list[torch.Tensor]:
        return [self.params, self.partials.reshape(-1), self.topology.packed]


@dataclass(eq=False)
class Finished:
    """A model whose forward is done: its flat parameters, per layer its transform's aggregated input
    and its output (the last layer's: the logits), and its topology."""

    tour: Tour
    params: torch.Tensor
    saved: list[tuple[torch.Tensor, torch.Tensor]]
    topology: Topology

    def carried(self) -> list[torch.Tensor]:
        flat = torch.cat([t.reshape(-1) for pair in self.saved for t in pair])
        return [self.params, flat, self.topology.packed]


def saved_shapes(model: ModelSpec, tour: Tour) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Per layer, the shapes of what a gcn layer's backward needs: its transform's aggregated input
    (destinations x in_dim) and its output (destinations x out_dim)."""
    return [
        ((dst, layer.in_dim), (dst, layer.output_width))
        for layer, (_, dst, _) in zip(model.layers, tour.micrographs.sizes, strict=True)
    ]


def degree_norm(degrees: torch.Tensor) -> torch.Tensor:
    """GCN's ``both`` norm of each vertex, as a column: its degree (at least 1) to the power -1/2."""
    return degrees.to(torch.float32).clamp(min=1).pow(-0.5).reshape(-1, 1)


def prepare_aggregations(blocks: list[TensorBlock]) -> None:
    """Build the sparse patterns of the layers above the input (the input layer's sums are
    one product per stop) before the timed layers, as the layers' blocks are built when handed over
    (:meth:`realrun.layers.LayerBackend.block`): the pattern's sorts are not a layer's work."""
    for block in blocks[1:]:
        _ = block.pattern


def transposed_sum(block: TensorBlock, grad: torch.Tensor) -> torch.Tensor:
    """``A^T grad``: each source's sum of its out-edges' destination rows (the aggregation's backward)."""
    _, a_t = block.adjacency
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta": it is what we use
        warnings.simplefilter("ignore", UserWarning)
        return a_t @ grad.contiguous()


def _tag(model: int, part: int) -> int:
    return MIGRATE_TAG + PARTS * model + part


@REAL_EXECUTORS.register("naive-feature-centric")
class NaiveFeatureCentricExecutor(ModelCentricExecutor):
    """Naive feature-centric on this worker: it hosts the stops the run's scheme's schedule puts here,
    sends and takes the models between them, and runs its own model's backward at home."""

    @classmethod
    def check(cls, config: RunConfig, inputs: SchemeInputs) -> None:
        check_runs_for_real(inputs)

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        if not isinstance(ctx.scheme, NaiveFeatureCentricScheme):
            raise TypeError(
                f"this executor runs a naive-feature-centric scheme, not {type(ctx.scheme).__name__}"
            )
        for conv in self.model.convs:  # the norm this executor's sums apply (real runs build "both")
            norm = getattr(conv, "norm", None) or getattr(conv, "_norm", None)
            if norm != "both":
                raise ConfigError(f"naive-feature-centric runs for real with gcn norm 'both', not {norm!r}")
        self.scheme: NaiveFeatureCentricScheme = ctx.scheme
        self.num_params = sum(p.numel() for p in self.params)
        # Gloo: the main group on the CPU; beside NCCL (GPUs, the NCCL stand-in) the host group, where
        # an unbatched send does not wait for its receive before returning.
        self.comm_group = ctx.host_group if ctx.host_group is not None else ctx.group
        self.schedules: dict[int, NaiveSchedule] = {}  # every epoch trains the same minibatches
        self.labels = torch.zeros(0, dtype=torch.int64)  # this worker's model's roots' labels
        # Each vertex's position among a stop's vertices (-1: not read at this stop), set and
        # cleared by aggregate(): finding a stop's layer-0 edges is then one lookup per edge.
        self.stop_slot = np.full(ctx.inputs.graph.num_nodes, -1, dtype=np.int64)

    def schedule(self, it: int) -> NaiveSchedule:
        if it not in self.schedules:
            self.schedules[it] = self.scheme.schedule(self.ctx.inputs, it)
        return self.schedules[it]

    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train one epoch; returns this worker's model's loss sum, correct predictions and roots."""
        return epoch_totals(map(self.iteration, range(self.ctx.inputs.num_iterations)))

    def iteration(self, it: int) -> tuple[float, int, int]:
        """Iteration ``it``: the rounds of the schedule's tours that touch this worker, then the sync."""
        ctx = self.ctx
        ctx.begin_iteration(it)
        start = ctx.now()
        schedule = self.schedule(it)
        here: dict[int, Travelling] = {}  # the models on this worker, by model
        mine = schedule.tours[ctx.rank]
        if mine is not None:
            here[ctx.rank] = self.set_out(it, mine)
        ctx.row(
            task_ids.sample_task(task_ids.worker_prefix(it, ctx.rank)),
            "sample",
            start,
            ctx.now(),
            device=ctx.host,
        )
        grads, totals = torch.zeros(self.num_params, device=ctx.device), (0.0, 0, 0)
        for k in range(schedule.rounds):
            leaving: list[tuple[Hop, list[torch.Tensor]]] = []
            for tour in schedule.visits(ctx.rank, k):
                model = here.pop(tour.model)
                self.aggregate(it, tour.stops[k], model)
                if k < len(tour.hops):
                    leaving.append((tour.hops[k], model.carried()))
                    continue
                done = self.forward(it, model)
                if tour.back is None:
                    grads, totals = self.backward(it, done)
                else:
                    leaving.append((tour.back, done.carried()))
            for hop, tensors in self.migrate(it, schedule, k, leaving):
                tour = schedule.tours[hop.model]
                assert tour is not None  # a hop belongs to a model with roots
                if hop.back:
                    grads, totals = self.backward(it, self.finished(tour, tensors))
                else:
                    here[hop.model] = self.travelling(tour, tensors)
        all_reduce_and_step(ctx, it, grads, self.params, self.optimizer)
        return totals

    # ---- the model's states ---------------------------------------------------------------------
    def set_out(self, it: int, tour: Tour) -> Travelling:
        """This worker's model at home, before its first stop: its subgraph and its roots' labels (in
        the order of its last layer's destinations) from the sampled epoch, its parameters, and
        empty partial sums."""
        ctx = self.ctx
        cut = cell_blocks(ctx.inputs.epoch[it], tour.rows)
        self.labels = seed_labels(ctx, cut.roots)
        params = torch.cat([p.detach().reshape(-1) for p in self.params])
        dst0 = tour.micrographs.sizes[0][1]
        partials = torch.zeros((dst0, ctx.inputs.model.in_dim), dtype=torch.float32, device=ctx.device)
        return Travelling(tour, params, partials, Topology.of_cut(cut, tour, ctx.device))

    def travelling(self, tour: Tour, tensors: list[torch.Tensor]) -> Travelling:
        """``tour``'s model arrived at its next stop with ``tensors`` (what :meth:`Travelling.carried` sent)."""
        device = self.ctx.device
        params, partials, packed = tensors
        dst0 = tour.micrographs.sizes[0][1]
        partials = partials.to(device).reshape(dst0, self.ctx.inputs.model.in_dim)
        return Travelling(tour, params, partials, Topology.unpack(packed, tour, device))

    def finished(self, tour: Tour, tensors: list[torch.Tensor]) -> Finished:
        """``tour``'s model back home with ``tensors`` (what :meth:`Finished.carried` sent)."""
        device = self.ctx.device
        params, flat, packed = tensors
        saved, at = [], 0
        for shapes in saved_shapes(self.ctx.inputs.model, tour):
            pair = []
            for rows, cols in shapes:
                pair.append(flat[at : at + rows * cols].reshape(rows, cols).to(device))
                at += rows * cols
            saved.append((pair[0], pair[1]))
        return Finished(tour, params, saved, Topology.unpack(packed, tour, device))

    def load(self, params: torch.Tensor) -> None:
        """Take the travelling model's parameters into this worker's copy, where the model computes
        (the copies are equal within an iteration: a real load all the same)."""
        with torch.no_grad():
            offset = 0
            for p in self.params:
                p.copy_(params[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    # ---- a stop ---------------------------------------------------------------------------------
    def aggregate(self, it: int, stop: Stop, model: Travelling) -> None:
        """At ``stop`` (on this worker): read its vertices' features locally and add every layer-0 edge
        whose source is among them into the model's partial sums, scaled by the source's norm."""
        ctx = self.ctx
        prefix = tour_prefix(it, ctx.rank, model.tour.model)
        ctx.status.phase("gather", it)
        x, reads = ctx.store.gather(stop.vertices, prefix, remote=False)
        for read in reads:
            ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)
        ctx.status.phase("forward", it)
        start = ctx.now()
        block = model.topology.blocks[0]
        sources = model.topology.input_ids[block.edge_src.cpu().numpy()]  # each edge's source vertex
        # A lookup per edge, not a binary search of the stop's vertices per edge: on a 150,000-edge
        # minibatch at a 20,000-vertex stop 0.9 ms instead of 13 ms, inside this timed row, which
        # the plan prices as the edges' sums alone.
        self.stop_slot[stop.vertices] = np.arange(stop.vertices.shape[0], dtype=np.int64)
        position = self.stop_slot[sources]
        self.stop_slot[stop.vertices] = -1
        local = np.flatnonzero(position >= 0)
        if local.shape[0] != stop.edges:  # the schedule's count of the edges read here
            raise RuntimeError(
                f"{prefix}: {local.shape[0]} layer-0 edges read here, the schedule says {stop.edges}"
            )
        edges = torch.from_numpy(local).to(ctx.device)
        weight = degree_norm(block.out_degrees)[block.edge_src[edges]].reshape(-1)
        slots = torch.from_numpy(position[local]).to(ctx.device)
        model.partials += edge_sum(block.edge_dst[edges], slots, weight, block.num_dst, x)
        ctx.row(aggregate_task(prefix), "forward", start, ctx.now())

    @torch.no_grad()
    def forward(self, it: int, model: Travelling) -> Finished:
        """Layer 0's sums are complete: its norm and transform, then the other layers, each timed as
        its plan task; keeps each layer's aggregated input and output for backward."""
        ctx, blocks = self.ctx, model.topology.blocks
        self.load(model.params)
        prepare_aggregations(blocks)
        prefix = tour_prefix(it, ctx.rank, model.tour.model)
        last = len(blocks) - 1
        saved, h = [], model.partials
        for layer, block in enumerate(blocks):
            ctx.status.phase("forward", it)
            start = ctx.now()
            if layer == 0:
                agg = model.partials * degree_norm(block.in_degrees)
            else:
                agg = aggregate_sum(block, h * degree_norm(block.out_degrees)) * degree_norm(block.in_degrees)
            conv = self.model.convs[layer]
            h = agg @ conv.weight + conv.bias
            if layer < last:
                h = F.relu(h)
            saved.append((agg, h))
            ctx.row(task_ids.forward_task(prefix, layer), "forward", start, ctx.now())
        return Finished(model.tour, model.params, saved, model.topology)

    # ---- home -----------------------------------------------------------------------------------
    def backward(self, it: int, model: Finished) -> tuple[torch.Tensor, tuple[float, int, int]]:
        """This worker's model is home: the loss of its roots from the carried logits, then each layer's
        backward from what it saved, last layer first, each timed as its plan task. Returns the flat
        gradient (in the parameters' order) and the loss sum, correct predictions and roots."""
        ctx, blocks = self.ctx, model.topology.blocks
        self.load(model.params)
        prepare_aggregations(blocks)
        prefix = backward_prefix(it, model.tour)
        ctx.status.phase("backward", it)
        start = ctx.now()
        logits = model.saved[-1][1].detach().requires_grad_(True)
        loss = F.cross_entropy(logits, self.labels)
        (grad,) = torch.autograd.grad(loss, logits)
        correct = int((logits.detach().argmax(dim=1) == self.labels).sum())
        grads: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for layer in range(len(blocks) - 1, -1, -1):
                agg, out = model.saved[layer]
                if layer < len(blocks) - 1:
                    grad = grad * (out > 0)  # the ReLU's gradient, from its saved output
                conv = self.model.convs[layer]
                grads[id(conv.weight)] = agg.t() @ grad
                grads[id(conv.bias)] = grad.sum(dim=0)
                if layer:
                    block = blocks[layer]
                    scaled = (grad @ conv.weight.t()) * degree_norm(block.in_degrees)
                    grad = transposed_sum(block, scaled) * degree_norm(block.out_degrees)
                end = ctx.now()
                ctx.row(task_ids.backward_task(prefix, layer), "backward", start, end)
                start = end
        flat = torch.cat([grads[id(p)].reshape(-1) for p in self.params])
        roots = int(self.labels.shape[0])
        return flat, (float(loss.detach()) * roots, correct, roots)

    # ---- migration ------------------------------------------------------------------------------
    def migrate(
        self, it: int, schedule: NaiveSchedule, k: int, leaving: list[tuple[Hop, list[torch.Tensor]]]
    ) -> list[tuple[Hop, list[torch.Tensor]]]:
        """After round ``k``: send the models ``leaving`` (each a stamp, then its carried tensors; the
        sends do not block), take those the schedule brings here one after the other, recording each
        arrival's transfers, then wait for the sends to be taken. Returns the arrivals with what
        they carried."""
        ctx = self.ctx
        if [hop for hop, _ in leaving] != schedule.departures(ctx.rank, k):
            raise RuntimeError(f"worker {ctx.rank} round {k}: its departures are not the schedule's")
        arriving = schedule.arrivals(ctx.rank, k)
        if not leaving and not arriving:
            return []
        ctx.status.phase("migrate", it)
        cpu = torch.device("cpu")
        sends, kept = [], []  # kept: the send buffers, alive until their sends end
        for hop, tensors in leaving:
            stamp = torch.tensor([ctx.now()], dtype=torch.float64)
            for part, t in enumerate([stamp, *tensors]):
                kept.append(t.detach().to(cpu).contiguous())
                sends.append(dist.isend(kept[-1], hop.dst, group=self.comm_group, tag=_tag(hop.model, part)))
        ctx.comm(True)
        # Every worker posts its round's sends before it takes a model, so each receive finds its send.
        arrived = [(hop, self.receive(it, schedule.tours[hop.model], hop)) for hop in arriving]
        for work in sends:
            work.wait()
        ctx.comm(False)
        return arrived

    def receive(self, it: int, tour: Tour | None, hop: Hop) -> list[torch.Tensor]:
        """Take ``hop``'s model: the sender's stamp, then each carried tensor once the one before has
        arrived (:func:`realrun.schemes.base.receive_migration`); records one row per plan transfer,
        from posting its receive to its arrival, with the bytes it really moved. Returns the carried
        tensors."""
        stamp, *carried = self.buffers(tour, hop)
        parts = zip(hop.carries, carried, strict=True)
        receive_migration(
            self.ctx,
            hop.src,
            self.comm_group,
            (stamp, _tag(hop.model, 0)),
            [
                (migrate_task(it, hop.src, hop.model, p.what), t, _tag(hop.model, k))
                for k, (p, t) in enumerate(parts, 1)
            ],
        )
        return carried

    def buffers(self, tour: Tour | None, hop: Hop) -> list[torch.Tensor]:
        """Receive buffers of ``hop`` (the stamp, then its carried tensors), shaped from the tour's sizes."""
        assert tour is not None  # a hop belongs to a model with roots
        sizes, model = tour.micrographs.sizes, self.ctx.inputs.model
        if hop.back:
            values = sum(r * c for shapes in saved_shapes(model, tour) for r, c in shapes)
        else:
            values = sizes[0][1] * model.in_dim
        ids = sum(src + 2 * edges for src, _, edges in sizes)
        return [
            torch.zeros(1, dtype=torch.float64),
            torch.empty(self.num_params, dtype=torch.float32),
            torch.empty(values, dtype=torch.float32),
            torch.empty(ids, dtype=torch.int64),
        ]
