"""``hopgnn`` for real: micrograph training with the models migrating between the worker
processes, pre-gathering and micrograph merging, as the plan
(:mod:`workbench.strategies.execution.hopgnn`, paper 003 sections 4-5) describes it.

Every worker process is one of HopGNN's servers and holds a full copy of the model, built
from the run's seed, so every copy starts equal. Per iteration ``i``, worker ``r``:

1. computes the iteration's schedule exactly as the plan does (the roots of every model
   grouped by home server, :func:`._micrographs.model_roots`; the time steps merging
   keeps, :func:`._micrographs.merge_time_steps`), then cuts, from the sampled epoch every
   worker holds, the micrographs of its own cells: model ``d = (r - t) mod N`` in kept time
   step ``t``. A cell's micrographs are one set of blocks, the union of its roots' trees
   side by side (a vertex in two trees is computed twice, as the plan counts it), with the
   root's own computation intact, so each root's logits are those of its full minibatch
   (for layers that normalise by destination: SAGE, GAT, GIN; GCN's symmetric norm reads
   the sources' out-degrees, which a micrograph has fewer of) (``sample``: this handover
   of the sampled micrographs, timed on the host);
2. with ``pregather``, fetches once the remote features every cell it runs needs, from
   their owners into its host memory (``gather_remote``, one task per source machine:
   :meth:`realrun.feature_store.FeatureStore.fetch_remote`);
3. runs its cells in kept time-step order. A cell first reads its input features: its
   cache (``gather_local``), its host (``h2d``), a peer's cache (``d2d``) and, without
   pre-gathering, the other machines' host memory (``gather_remote``); with it, the
   remote rows come from the pre-gathered host buffer (``h2d``, task ``pregathered``).
   Then it takes the model: if the model is not here yet, it receives it from the worker
   that ran the model's previous cell (``migrate``: the parameters, task ``.model``, and
   the accumulated gradients, ``.gradients``, real point-to-point over the main group),
   and loads the parameters into its copy. Forward and backward run layer by layer, as in
   ``model-centric``; the loss is the cross entropy summed over the cell's roots divided
   by the model's roots in the whole iteration, so a model's accumulated gradient is that
   of the mean over its minibatch. The gradient is added to the model's accumulator;
   when the model's next cell is on another worker, it is sent there at once
   (non-blocking) and the worker goes on with its next cell;
4. after its last cell waits for its sends, all-reduces the sum of the accumulated
   gradients of the models it holds (zeros if none: a model whose last cells are empty
   stays where it was), divides by ``N`` and steps its optimizer; every copy gets the
   same gradient, so all copies are equal again, and the next iteration's model ``d``
   is simply the copy at server ``(d + first kept step) mod N``. Optimizer state never
   travels (the plan's choice).

Without ``micrographs`` the plan is the model-centric one and so is the run
(:mod:`realrun.schemes.model_centric`).

Two things differ from the plan's timing, not its bytes. Without pre-gathering, a cell's
remote read is one exchange that all workers take part in (the feature store's), so the
workers move through the kept time steps together: one with no cell in a step still joins
that step's exchange. And every worker holds the sampled epoch, so a micrograph trained
away from home (merging) needs no topology transfer; the plan does not move topology
either. A migration is recorded by its receiver: from the later of the sender's send and
its own readiness to take the model (its features read) to the model's arrival; the
sender's send time travels in an 8-byte message counted as ``migrate_index`` (real
traffic the plan does not model), the parameters and gradients as ``migrate``.

Why migrations neither deadlock nor cross: sends never block the sender, and a receive
before kept step ``j`` waits for a send issued after the sender's cell of an earlier step.
A model goes from server ``a`` to ``b`` in exactly ``(b - a) mod N`` time steps, so two
models sent from ``a`` to ``b`` arrive in the order they left (tags keep them apart on gloo;
NCCL, which has no tags, gets them in order as well).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.layers import TensorBlock
from realrun.schemes import REAL_EXECUTORS, model_centric
from realrun.schemes.base import (
    WorkerContext,
    all_reduce_and_step,
    backward_by_layer,
    legacy_executor,
    link_engine,
)
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import strategy_config
from workbench.strategies.execution._micrographs import _edges_into, distinct, merge_time_steps, model_roots
from workbench.strategies.execution.base import SchemeInputs, feature_reads
from workbench.strategies.execution.hopgnn import HopGNNScheme
from workbench.strategies.sampling.base import Minibatch

# The plan parameters this executor follows, as model-centric's (realrun.schemes.model_centric):
# an iteration's handover and reads start after the previous step; the store reads in stages.
PLAN_PARAMS = model_centric.PLAN_PARAMS

# Point-to-point tags of a migration (model d: MIGRATE_TAG + 3 d + part), apart from the
# feature store's exchanges (tag 0) on the same group.
MIGRATE_TAG = 1 << 12
MIGRATE_PARTS = ("stamp", "model", "gradients")


# ---- the iteration's schedule ---------------------------------------------------------------
@dataclass(frozen=True)
class Hop:
    """Model ``model`` migrates from ``src`` to ``dst``: sent after ``src``'s cell in kept step
    ``leave`` (-1: at the iteration's start), received before ``dst``'s cell in kept step ``arrive``."""

    model: int
    src: int
    dst: int
    leave: int
    arrive: int


@dataclass(frozen=True)
class Schedule:
    """One iteration's time steps and cells, as :meth:`HopGNNScheme.schedule` has them (without
    cutting every cell's micrographs: each worker cuts only its own)."""

    kept: list[int]  # the time steps merging keeps, original numbers (task ids name them)
    cells: list[list[np.ndarray]]  # cells[d][j]: rows (worker, position) model d trains in kept step j
    n: int

    def server(self, d: int, j: int) -> int:
        """Where model ``d`` is in kept step ``j``."""
        return (d + self.kept[j]) % self.n

    def model_at(self, s: int, j: int) -> int:
        """The model at server ``s`` in kept step ``j``."""
        return (s - self.kept[j]) % self.n

    def roots(self, d: int) -> int:
        return sum(int(c.shape[0]) for c in self.cells[d])

    def route(self, d: int) -> list[Hop]:
        """Model ``d``'s migrations: it starts at its kept step 0's server and moves to each of its
        non-empty cells in turn (empty ones it skips); after its last one it stays."""
        at, after, hops = self.server(d, 0), -1, []
        for j, cell in enumerate(self.cells[d]):
            if not cell.shape[0]:
                continue
            s = self.server(d, j)
            if s != at:
                hops.append(Hop(d, at, s, after, j))
            at, after = s, j
        return hops

    def migrations(self, rank: int) -> tuple[dict[int, list[Hop]], dict[int, Hop]]:
        """Worker ``rank``'s sends, by the kept step after which it sends (-1: at the start), and
        its receives, by the kept step before which it receives (one model a step at most)."""
        sends: dict[int, list[Hop]] = {}
        receives: dict[int, Hop] = {}
        for d in range(self.n):
            for hop in self.route(d):
                if hop.src == rank:
                    sends.setdefault(hop.leave, []).append(hop)
                if hop.dst == rank:
                    receives[hop.arrive] = hop
        return sends, receives


def iteration_schedule(scheme: HopGNNScheme, inputs: SchemeInputs, it: int) -> Schedule:
    """The plan's schedule of iteration ``it`` (the same calls, in the same order)."""
    n = inputs.num_workers
    roots = model_roots(inputs, inputs.epoch[it], scheme.minibatches)
    cells = [[roots[d][(d + t) % n] for t in range(n)] for d in range(n)]
    kept, cells = merge_time_steps(cells, scheme.merges if scheme.merge else 0, scheme.merge_to)
    return Schedule(kept, cells, n)


# ---- a cell's micrographs as tensors --------------------------------------------------------
@dataclass
class CellGraph:
    """A cell's micrographs: the union of its roots' trees, block by block (input layer first)."""

    blocks: list[TensorBlock]
    input_nodes: np.ndarray  # the distinct vertices whose features layer 0 reads, sorted
    input_index: np.ndarray  # per source of blocks[0], its row in input_nodes
    roots: np.ndarray  # the roots' vertex ids, in the order of blocks[-1]'s destinations


def cut_cell(row: list[Minibatch], rows: np.ndarray, device: torch.device | str = "cpu") -> CellGraph:
    """The micrographs of ``rows`` (``(worker, position)`` of roots in ``row[worker]``'s seeds).

    As :func:`._micrographs.cut_subtree` does per minibatch, each layer keeps the edges into
    the destinations kept so far, and the next layer down keeps those destinations and the
    edges' sources. Several minibatches' trees sit side by side: a layer's sources are its
    destinations (of every tree, in order: DGL's destinations-first convention) followed by
    each tree's new sources.
    """
    parts = distinct(rows[:, 0]).tolist()
    # The current layer's destinations, as (tree, position in that tree's block) pairs in order.
    part = np.concatenate([np.full(int((rows[:, 0] == w).sum()), w, dtype=np.int64) for w in parts])
    pos = np.concatenate([distinct(rows[rows[:, 0] == w, 1]) for w in parts])
    roots = np.concatenate([row[w].blocks[-1].dst_nodes[pos[part == w]] for w in parts])
    blocks: list[TensorBlock] = []
    for layer in reversed(range(len(row[parts[0]].blocks))):
        edge_src, edge_dst, weights, new_part, new_pos = [], [], [], [], []
        num_src = part.shape[0]
        for w in parts:
            block = row[w].blocks[layer]
            mine = np.flatnonzero(part == w)
            kept = pos[mine]
            edges = _edges_into(block, np.sort(kept))
            sources = block.edge_src[edges]
            fresh = distinct(sources)
            fresh = fresh[~np.isin(fresh, kept)]
            # Block position -> position in the cell's layer (a destination is its own source).
            local = np.full(block.num_src, -1, dtype=np.int64)
            local[kept] = mine
            local[fresh] = num_src + np.arange(fresh.shape[0], dtype=np.int64)
            num_src += fresh.shape[0]
            edge_src.append(local[sources])
            edge_dst.append(local[block.edge_dst[edges]])
            if block.edge_weight is not None:
                weights.append(np.asarray(block.edge_weight, dtype=np.float32)[edges])
            new_part.append(np.full(fresh.shape[0], w, dtype=np.int64))
            new_pos.append(fresh)
        weight = torch.from_numpy(np.concatenate(weights)).to(device) if weights else None
        blocks.append(
            TensorBlock(
                torch.from_numpy(np.concatenate(edge_src)).to(device),
                torch.from_numpy(np.concatenate(edge_dst)).to(device),
                num_src,
                int(part.shape[0]),
                weight,
            )
        )
        part = np.concatenate([part, *new_part])
        pos = np.concatenate([pos, *new_pos])
    blocks.reverse()
    ids = np.empty(part.shape[0], dtype=np.int64)
    for w in parts:
        ids[part == w] = row[w].blocks[0].src_nodes[pos[part == w]]
    input_nodes = distinct(ids)
    return CellGraph(blocks, input_nodes, np.searchsorted(input_nodes, ids), roots)


@dataclass
class Cell:
    """A cell this worker runs: model ``model``'s micrographs in kept step ``index`` (time step ``step``)."""

    model: int
    index: int
    step: int
    graph: CellGraph
    labels: torch.Tensor
    input_index: torch.Tensor
    blocks: list[Any]  # graph.blocks as the run's layers take them (realrun.layers.LayerBackend)


# ---- setup, epoch, iteration ----------------------------------------------------------------
def setup(ctx: WorkerContext) -> None:
    """The model copy, its optimizer and the scheme's switches, once per run."""
    model_centric.setup(ctx)
    if "scheme" not in ctx.state:
        chosen = strategy_config(ctx.config, "execution")
        assert chosen is not None and chosen.name == "hopgnn"
        ctx.state["scheme"] = EXECUTION_SCHEMES.create(chosen.name, **chosen.params)
        ctx.state["num_params"] = sum(p.numel() for p in ctx.state["params"])
        group = ctx.group
        nccl = dist.is_initialized() and dist.get_backend(group) == "nccl"
        ctx.state["comm_device"] = ctx.device if nccl else torch.device("cpu")


def run_epoch(ctx: WorkerContext, epoch: int) -> dict[str, Any]:
    """Train one epoch; returns this worker's loss sum, correct predictions and roots trained."""
    setup(ctx)
    if not ctx.state["scheme"].micrographs:  # the plan is model-centric's, and so is the run
        return model_centric.run_epoch(ctx, epoch)
    totals = {"loss_sum": 0.0, "correct": 0, "seeds": 0}
    for it in range(ctx.inputs.num_iterations):
        loss_sum, correct, seeds = iteration(ctx, it)
        totals["loss_sum"] += loss_sum
        totals["correct"] += correct
        totals["seeds"] += seeds
    return totals


def evaluate(ctx: WorkerContext) -> float:
    """Test accuracy of this worker's copy (all copies are equal after each iteration)."""
    return model_centric.evaluate(ctx)


def iteration(ctx: WorkerContext, it: int) -> tuple[float, int, int]:
    scheme: HopGNNScheme = ctx.state["scheme"]
    rank = ctx.rank
    ctx.begin_iteration(it)
    start = ctx.now()
    schedule = iteration_schedule(scheme, ctx.inputs, it)
    cells = my_cells(ctx, schedule, it)
    ctx.row(f"i{it}.w{rank}.sample", "sample", start, ctx.now(), device=ctx.host)

    sends, receives = schedule.migrations(rank)
    # The models this worker holds, each with its accumulated gradients: at the start, the copy
    # that plays the model of its first kept step.
    held = {schedule.model_at(rank, 0): torch.zeros(ctx.state["num_params"], device=ctx.device)}
    pending: list[tuple[list[Any], list[torch.Tensor]]] = []  # sends in flight and their buffers
    for hop in sends.get(-1, []):
        pending.append(send_model(ctx, hop, held.pop(hop.model)))

    pregathered = pregather(ctx, it, cells) if scheme.pregather else None
    loss_sum, correct, seeds = 0.0, 0, 0
    for j, step in enumerate(schedule.kept):
        cell = cells.get(j)
        x = read_features(ctx, it, step, cell, pregathered)
        if cell is None:
            continue
        if j in receives:
            held[cell.model] = receive_model(ctx, it, receives[j])
        cell_loss, cell_correct = train_cell(ctx, it, cell, x, held[cell.model], schedule.roots(cell.model))
        loss_sum += cell_loss
        correct += cell_correct
        seeds += int(cell.labels.shape[0])
        for hop in sends.get(j, []):
            pending.append(send_model(ctx, hop, held.pop(hop.model)))
    finish_sends(ctx, it, pending)
    synchronise_and_step(ctx, it, list(held.values()))
    return loss_sum, correct, seeds


def my_cells(ctx: WorkerContext, schedule: Schedule, it: int) -> dict[int, Cell]:
    """This worker's non-empty cells by kept step, their micrographs and labels on the device."""
    row = ctx.inputs.epoch[it]
    labels = ctx.inputs.graph.labels
    out = {}
    for j, step in enumerate(schedule.kept):
        d = schedule.model_at(ctx.rank, j)
        rows = schedule.cells[d][j]
        if not rows.shape[0]:
            continue
        graph = cut_cell(row, rows, ctx.device)
        out[j] = Cell(
            d,
            j,
            step,
            graph,
            torch.as_tensor(np.asarray(labels[graph.roots], dtype=np.int64)).to(ctx.device),
            torch.from_numpy(graph.input_index).to(ctx.device),
            [ctx.layers.block(b, ctx.device) for b in graph.blocks],
        )
    return out


# ---- features --------------------------------------------------------------------------------
@dataclass
class PreGathered:
    """What this worker pre-gathered for the iteration: vertices (sorted) and their rows in host memory."""

    vertices: np.ndarray
    rows: torch.Tensor


def pregather(ctx: WorkerContext, it: int, cells: dict[int, Cell]) -> PreGathered:
    """One deduplicated fetch of the remote features of every cell this worker runs (every worker
    takes part, with or without cells)."""
    ctx.status.phase("gather", it)
    empty = np.zeros(0, dtype=np.int64)
    wanted = distinct(np.concatenate([c.graph.input_nodes for c in cells.values()] or [empty]))
    prefix = f"i{it}.w{ctx.rank}.pregather"
    vertices, rows, timings = ctx.store.fetch_remote(wanted, prefix)
    for read in timings:
        # A host-to-host copy: the simulator names its source (task {prefix}.{source}) as the row's device.
        ctx.row(read.task, read.phase, read.start, read.end, read.nbytes, device=read.task[len(prefix) + 1 :])
    return PreGathered(vertices, rows)


def read_features(
    ctx: WorkerContext, it: int, step: int, cell: Cell | None, pregathered: PreGathered | None
) -> torch.Tensor:
    """The cell's input features on the device, in ``input_nodes`` order. Every worker calls this
    in every kept step (the feature store's exchanges are collective), with or without a cell."""
    ctx.status.phase("gather", it)
    prefix = f"i{it}.w{ctx.rank}.t{step}"
    vertices = cell.graph.input_nodes if cell is not None else np.zeros(0, dtype=np.int64)
    if pregathered is None:
        x, timings = ctx.store.gather(vertices, prefix)
        for read in timings:
            ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)
        return x
    # The near reads land in their rows of x as they are read (inside their timed rows: an
    # untimed copy of them afterwards is work the plan has no task for); the far rows follow.
    x, timings = ctx.store.gather(vertices, prefix, remote=False, leave_remote=True)
    for read in timings:
        ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)
    far = [r.vertices for r in feature_reads(ctx.inputs, ctx.rank, vertices) if r.kind == "remote"]
    if far:
        # The cell's share of the pre-gathered rows: from host memory to the device.
        start = ctx.now()
        far_vertices = np.concatenate(far)
        index = torch.from_numpy(np.searchsorted(pregathered.vertices, far_vertices))
        moved = pregathered.rows.index_select(0, index).to(ctx.device, non_blocking=True)
        x[torch.from_numpy(np.searchsorted(vertices, far_vertices)).to(ctx.device)] = moved
        nbytes = tensor_bytes(moved)
        ctx.counter.add("h2d", nbytes)
        ctx.row(f"{prefix}.pregathered", "h2d", start, ctx.now(), nbytes)
    return x


# ---- training a cell -------------------------------------------------------------------------
def train_cell(
    ctx: WorkerContext, it: int, cell: Cell, x: torch.Tensor, grads: torch.Tensor, model_roots: int
) -> tuple[float, int]:
    """Forward and backward of the cell's micrographs, layer by layer, each layer timed on its own
    (as ``model-centric``); the gradient is added to ``grads``. Returns the summed loss and the
    correct predictions of the cell's roots."""
    model = ctx.state["model"]
    params = ctx.state["params"]
    prefix = f"i{it}.w{ctx.rank}.t{cell.step}"
    blocks = cell.graph.blocks
    num_layers = len(blocks)
    for p in params:
        p.grad = None
    ins: list[torch.Tensor] = []
    loss = torch.zeros(())
    scaled = torch.zeros(())
    correct = 0
    h = x
    for layer in range(num_layers):
        ctx.status.phase("forward", it)
        start = ctx.now()
        if layer == 0:  # the cell's sources in its own order
            h = x.index_select(0, cell.input_index)
        ins.append(h)
        h = model.layer_forward(layer, cell.blocks[layer], h, blocks[layer].edge_weight)
        if layer == num_layers - 1:
            loss = F.cross_entropy(h, cell.labels, reduction="sum")
            # The model's minibatch is all its roots of the iteration, over all its cells.
            scaled = loss / model_roots
            correct = int((h.argmax(dim=1) == cell.labels).sum())
        ctx.row(f"{prefix}.fwd{layer}", "forward", start, ctx.now())

    def accumulate() -> None:  # the model's gradient over its cells so far
        grads.add_(
            torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        )

    backward_by_layer(ctx, scaled, ins, prefix, it, finish=accumulate)
    return float(loss.detach()), correct


# ---- migration ---------------------------------------------------------------------------------
def _tag(model: int, part: str) -> int:
    return MIGRATE_TAG + len(MIGRATE_PARTS) * model + MIGRATE_PARTS.index(part)


def send_model(ctx: WorkerContext, hop: Hop, grads: torch.Tensor) -> tuple[list[Any], list[torch.Tensor]]:
    """Start sending model ``hop.model`` (its send time, parameters and accumulated gradients) to
    ``hop.dst``; returns the works and the buffers, which must live until the works end."""
    comm = ctx.state["comm_device"]
    params = torch.cat([p.detach().reshape(-1) for p in ctx.state["params"]]).to(comm)
    stamp = torch.tensor([ctx.now()], dtype=torch.float64, device=comm)
    buffers = [stamp, params, grads.to(comm)]
    works = [
        dist.isend(t, hop.dst, group=ctx.group, tag=_tag(hop.model, part))
        for t, part in zip(buffers, MIGRATE_PARTS, strict=True)
    ]
    return works, buffers


def receive_model(ctx: WorkerContext, it: int, hop: Hop) -> torch.Tensor:
    """Take model ``hop.model`` from ``hop.src``: load its parameters into this worker's copy and
    return its accumulated gradients. Records the plan's two migrate transfers."""
    ctx.status.phase("migrate", it)
    comm = ctx.state["comm_device"]
    n = ctx.state["num_params"]
    buffers = [
        torch.zeros(1, dtype=torch.float64, device=comm),
        torch.empty(n, dtype=torch.float32, device=comm),
        torch.empty(n, dtype=torch.float32, device=comm),
    ]
    ready = ctx.now()
    ctx.comm(True)
    works = [
        dist.irecv(t, hop.src, group=ctx.group, tag=_tag(hop.model, part))
        for t, part in zip(buffers, MIGRATE_PARTS, strict=True)
    ]
    ends = []
    for work in works:
        work.wait()
        ends.append(ctx.now())
    ctx.comm(False)
    stamp, params, grads = buffers
    start = max(ready, float(stamp.item()))  # it could not start before both sides were there
    ctx.counter.add("migrate_index", tensor_bytes(stamp))
    base = f"i{it}.w{hop.src}.m{hop.model}.migrate"
    engine = link_engine(ctx.inputs, hop.src, hop.dst)
    for part, tensor, end in zip(MIGRATE_PARTS[1:], (params, grads), ends[1:], strict=True):
        nbytes = tensor_bytes(tensor)
        ctx.counter.add("migrate", nbytes)
        ctx.row(f"{base}.{part}", "migrate", min(start, end), end, nbytes, engine=engine)
    with torch.no_grad():  # the copies' parameters are equal within an iteration: a real load all the same
        offset = 0
        for p in ctx.state["params"]:
            p.copy_(params[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
    return grads.to(ctx.device)


def finish_sends(ctx: WorkerContext, it: int, pending: list[tuple[list[Any], list[torch.Tensor]]]) -> None:
    """Wait for this worker's migrations to be taken (every receiver takes its models before its
    own all-reduce, so this ends)."""
    if not pending:
        return
    ctx.status.phase("migrate", it)
    ctx.comm(True)
    for works, _buffers in pending:
        for work in works:
            work.wait()
    ctx.comm(False)


def synchronise_and_step(ctx: WorkerContext, it: int, held: list[torch.Tensor]) -> None:
    """All-reduce of the held models' gradients (their sum; zeros for a worker that holds none),
    divided by the workers, then the optimizer step on this worker's copy."""
    flat = torch.zeros(ctx.state["num_params"], device=ctx.device)
    for grads in held:
        flat += grads
    all_reduce_and_step(ctx, it, flat, ctx.state["params"], ctx.state["optimizer"])


# TEMPORARY (issue 24): registered through the module adapter until this executor is a class.
REAL_EXECUTORS.register("hopgnn")(legacy_executor(sys.modules[__name__]))
