"""``hopgnn`` for real: micrograph training with the models migrating between the worker
processes, pre-gathering and micrograph merging, as the plan
(:mod:`workbench.strategies.execution.hopgnn`, paper 003 sections 4-5) describes it.

Every worker process is one of HopGNN's servers and holds a full copy of the model, built
from the run's seed, so every copy starts equal. Per iteration ``i``, worker ``r``:

1. takes the iteration's schedule from the run's scheme, the very object the plan was
   built from (:meth:`HopGNNScheme.schedule <workbench.strategies.execution.hopgnn.HopGNNScheme.schedule>`:
   the kept time steps, every cell's roots and micrographs, the models' route, what each
   server pre-gathers), and builds, from the sampled epoch every worker holds, the blocks of
   its own cells' micrographs (:func:`workbench.strategies.execution.micrographs.cell_blocks`,
   from the plan's cut): model ``d = (r - t) mod N`` in kept time step ``t``. A cell's micrographs are one set of blocks, the union of its roots' trees
   side by side (a vertex in two trees is computed twice, as the plan counts it), with the
   root's own computation intact, so each root's logits are those of its full minibatch
   (for layers that normalise by destination: SAGE, GAT, GIN; GCN's symmetric norm reads
   the sources' out-degrees, which a micrograph has fewer of) (``sample``: this handover
   of the sampled micrographs, timed on the host);
2. with ``pregather``, fetches once the remote features the schedule says its cells need, from
   their owners into its host memory (``gather_remote``, one task per source machine:
   :meth:`realrun.feature_store.FeatureStore.fetch_remote`);
3. runs its cells in kept time-step order. A cell first reads its input features: its
   cache (``gather_local``), its host (``h2d``), a peer's cache (``d2d``) and, without
   pre-gathering, the other machines' host memory (``gather_remote``); with it, the
   remote rows come from the pre-gathered host buffer (``h2d``, task ``pregathered``).
   Then it takes the model: if the schedule's route brings the model here, it receives it
   from the worker that ran the model's previous cell (``migrate``: the parameters, task ``.model``, and
   the accumulated gradients, ``.gradients``, real point-to-point over the host (gloo)
   group: an unbatched NCCL send would wait for its receive), and loads the parameters into its copy. Forward and backward run layer by layer, as in
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
(:class:`realrun.schemes.model_centric.ModelCentricExecutor`, which this executor extends).

Two things differ from the plan's timing, not its bytes. Without pre-gathering, a cell's
remote read is one exchange that all workers take part in (the feature store's), so the
workers move through the kept time steps together: one with no cell in a step still joins
that step's exchange. And every worker holds the sampled epoch, so a micrograph trained
away from home (merging) needs no topology transfer; the plan does not move topology
either. A migration is recorded by its receiver, one row per part, each timing its own
bytes. A gloo send waits for its receive, so the receiver calls each part in turn: first an
8-byte message announcing the model (its send time, counted as ``migrate_index``: real
traffic the plan does not model), then the parameters, then the gradients (``migrate``),
each posted once the one before it has arrived. Each row runs from posting its receive to
its arrival: a transfer with its own latency, none zero-length, none overlapping another.
The receiver's wait for a model not yet sent ends with the announcement and is in no row:
the receiver is idle until the hop ends (its next forward is ready then), as it is for any
dependency; a model sent before its receiver was ready shows as its rows' queueing
(``start - ready``, ready when the sender's cell ended), as a collective's early member does.

Why migrations neither deadlock nor cross: sends never block the sender, and a receive
before kept step ``j`` waits for a send issued after the sender's cell of an earlier step.
A model goes from server ``a`` to ``b`` in exactly ``(b - a) mod N`` time steps, so two
models sent from ``a`` to ``b`` arrive in the order they left (tags keep them apart on gloo;
NCCL, which has no tags, gets them in order as well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from realrun.feature_store import tensor_bytes
from realrun.host_rows import HostRows
from realrun.layers import TensorBlock
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    WorkerContext,
    all_reduce_and_step,
    backward_by_layer,
    epoch_totals,
    receive_migration,
)
from realrun.schemes.model_centric import ModelCentricExecutor, seed_labels
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import feature_reads
from workbench.strategies.execution.hopgnn import (
    MIGRATION_PARTS,
    Cell,
    Hop,
    HopGNNSchedule,
    HopGNNScheme,
    cell_prefix,
    migrate_task,
    pregather_task,
    pregathered_task,
)
from workbench.strategies.execution.micrographs import cell_blocks
from workbench.strategies.sampling.base import Minibatch

# Point-to-point tags of a migration (model d: MIGRATE_TAG + 3 d + part), apart from the
# feature store's exchanges (tag 0) on the same group.
MIGRATE_TAG = 1 << 12
MIGRATE_PARTS = ("stamp", *MIGRATION_PARTS)  # the sender's send time, then what the hop carries


# ---- a cell's micrographs as tensors --------------------------------------------------------
@dataclass
class CellGraph:
    """A cell's micrographs: the union of its roots' trees, block by block (input layer first)."""

    blocks: list[TensorBlock]
    input_nodes: np.ndarray  # the distinct vertices whose features layer 0 reads, sorted
    input_index: np.ndarray  # per source of blocks[0], its row in input_nodes
    roots: np.ndarray  # the roots' vertex ids, in the order of blocks[-1]'s destinations


def cut_cell(row: list[Minibatch], rows: np.ndarray, device: torch.device | str = "cpu") -> CellGraph:
    """The blocks of the micrographs of ``rows`` (``(worker, position)`` of roots in ``row[worker]``'s
    seeds) on ``device``, as :func:`workbench.strategies.execution.micrographs.cell_blocks` cuts them."""
    cut = cell_blocks(row, rows)
    blocks = [
        TensorBlock(
            torch.from_numpy(b.edge_src).to(device),
            torch.from_numpy(b.edge_dst).to(device),
            b.num_src,
            b.num_dst,
            torch.from_numpy(b.edge_weight).to(device) if b.edge_weight is not None else None,
        )
        for b in cut.blocks
    ]
    return CellGraph(blocks, cut.input_nodes, cut.input_index, cut.roots)


@dataclass
class CellTensors:
    """A cell of the schedule this worker runs, ready to train: its micrographs, labels and blocks
    on the device."""

    cell: Cell
    graph: CellGraph
    labels: torch.Tensor
    input_index: torch.Tensor
    blocks: list[Any]  # graph.blocks as the run's layers take them (realrun.layers.LayerBackend)


@dataclass
class PreGathered:
    """What this worker pre-gathered for the iteration: vertices (sorted) and their rows in host memory."""

    vertices: np.ndarray
    rows: torch.Tensor


Pending = tuple[list[Any], list[torch.Tensor]]  # a migration's send works and the buffers they read


def _tag(model: int, part: str) -> int:
    return MIGRATE_TAG + len(MIGRATE_PARTS) * model + MIGRATE_PARTS.index(part)


@REAL_EXECUTORS.register("hopgnn")
class HopGNNExecutor(ModelCentricExecutor):
    """HopGNN on this worker: it carries out the run's scheme's schedule (its cells, the models'
    route, its pre-gathering) with real tensors and point-to-point migrations; without
    micrographs, model-centric's iteration."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        if not isinstance(ctx.scheme, HopGNNScheme):
            raise TypeError(f"the hopgnn executor runs a hopgnn scheme, not {type(ctx.scheme).__name__}")
        self.scheme: HopGNNScheme = ctx.scheme
        self.num_params = sum(p.numel() for p in self.params)
        # Models migrate over gloo: an unbatched NCCL send waits for its peer's receive, and two
        # workers that send their models to each other before receiving would hang (issue 26).
        self.migrate_group = ctx.host_group if ctx.host_group is not None else ctx.group
        nccl = dist.is_initialized() and dist.get_backend(self.migrate_group) == "nccl"
        self.comm_device = ctx.device if nccl else torch.device("cpu")
        self.host_rows = HostRows(ctx.device)

    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train one epoch; returns this worker's loss sum, correct predictions and roots trained."""
        if not self.scheme.micrographs:  # the plan is model-centric's, and so is the run
            return super().run_epoch(epoch)
        return epoch_totals(map(self.micrograph_iteration, range(self.ctx.inputs.num_iterations)))

    def micrograph_iteration(self, it: int) -> tuple[float, int, int]:
        """Iteration ``it`` of the schedule on this worker: its cells in kept-step order, receiving
        and sending the models the route moves, then the gradient sync."""
        ctx, rank = self.ctx, self.ctx.rank
        ctx.begin_iteration(it)
        start = ctx.now()
        schedule = self.scheme.schedule(ctx.inputs, it)
        cells = self.my_cells(schedule)
        ctx.row(
            task_ids.sample_task(task_ids.worker_prefix(it, rank)),
            "sample",
            start,
            ctx.now(),
            device=ctx.host,
        )

        sends, receives = schedule.sends(rank), schedule.receives(rank)
        # The models this worker holds, each with its accumulated gradients: at the start, the copy
        # that plays the model of its first kept step.
        held = {schedule.model_at(rank, 0): torch.zeros(self.num_params, device=ctx.device)}
        pending = [self.send_model(hop, held.pop(hop.model)) for hop in sends.get(-1, [])]
        pregathered = self.pregather(it, schedule) if schedule.pregather is not None else None
        loss_sum, correct, seeds = 0.0, 0, 0
        for j, step in enumerate(schedule.kept):
            cell = cells.get(j)
            x = self.read_features(it, step, cell, pregathered)
            if cell is None:
                continue
            d = cell.cell.model
            if j in receives:
                held[d] = self.receive_model(it, receives[j])
            cell_loss, cell_correct = self.train_cell(it, cell, x, held[d], schedule.model_roots(d))
            loss_sum += cell_loss
            correct += cell_correct
            seeds += int(cell.labels.shape[0])
            pending += [self.send_model(hop, held.pop(hop.model)) for hop in sends.get(j, [])]
        self.finish_sends(it, pending)
        flat = torch.zeros(self.num_params, device=ctx.device)
        for grads in held.values():  # zeros for a worker that holds no model
            flat += grads
        all_reduce_and_step(ctx, it, flat, self.params, self.optimizer)
        return loss_sum, correct, seeds

    def my_cells(self, schedule: HopGNNSchedule) -> dict[int, CellTensors]:
        """This worker's cells with roots by kept step, their micrographs and labels on the device."""
        ctx = self.ctx
        row = ctx.inputs.epoch[schedule.iteration]
        out = {}
        for cell in schedule.runs(ctx.rank):
            graph = cut_cell(row, cell.rows, ctx.device)
            out[cell.index] = CellTensors(
                cell,
                graph,
                seed_labels(ctx, graph.roots),
                torch.from_numpy(graph.input_index).to(ctx.device),
                [ctx.layers.block(b, ctx.device) for b in graph.blocks],
            )
        return out

    # ---- features ---------------------------------------------------------------------------
    def pregather(self, it: int, schedule: HopGNNSchedule) -> PreGathered:
        """One deduplicated fetch of the remote features the schedule has this worker pre-gather
        (every worker takes part, with or without cells)."""
        ctx = self.ctx
        ctx.status.phase("gather", it)
        assert schedule.pregather is not None
        source_of: dict[str, str] = {}  # pre-gathering task -> the host it reads from

        def task_of(source: str) -> str:
            task = pregather_task(it, ctx.rank, source)
            source_of[task] = source
            return task

        vertices, rows, timings = ctx.store.fetch_remote(schedule.pregather[ctx.rank], task_of)
        for read in timings:
            # A host-to-host copy: the simulator names its source host as the row's device.
            ctx.row(read.task, read.phase, read.start, read.end, read.nbytes, device=source_of[read.task])
        return PreGathered(vertices, rows)

    def read_features(
        self, it: int, step: int, cell: CellTensors | None, pregathered: PreGathered | None
    ) -> torch.Tensor:
        """The cell's input features on the device, in ``input_nodes`` order. Every worker calls this
        in every kept step (the feature store's exchanges are collective), with or without a cell."""
        ctx = self.ctx
        ctx.status.phase("gather", it)
        prefix = cell_prefix(it, ctx.rank, step)
        vertices = cell.graph.input_nodes if cell is not None else np.zeros(0, dtype=np.int64)
        x, timings = ctx.store.gather(
            vertices, prefix, remote=pregathered is None, leave_remote=pregathered is not None
        )
        for read in timings:
            ctx.row(read.task, read.phase, read.start, read.end, read.nbytes)
        if pregathered is not None:
            self.copy_pregathered(prefix, vertices, x, pregathered)
        return x

    def copy_pregathered(
        self, prefix: str, vertices: np.ndarray, x: torch.Tensor, pregathered: PreGathered
    ) -> None:
        """The cell's share of the pre-gathered rows, from host memory into their rows of ``x``.

        The near reads landed in their rows of x as they were read (inside their timed rows: an
        untimed copy of them afterwards is work the plan has no task for); the far rows follow."""
        ctx = self.ctx
        far = [r.vertices for r in feature_reads(ctx.inputs, ctx.rank, vertices) if r.kind == "remote"]
        if not far:
            return
        start = ctx.now()
        far_vertices = np.concatenate(far)
        index = torch.from_numpy(np.searchsorted(pregathered.vertices, far_vertices))
        moved = self.host_rows.gather(pregathered.rows, index)  # pinned staging, one DMA copy
        x[torch.from_numpy(np.searchsorted(vertices, far_vertices)).to(ctx.device)] = moved
        nbytes = tensor_bytes(moved)
        ctx.counter.add("h2d", nbytes)
        ctx.row(pregathered_task(prefix), "h2d", start, ctx.now(), nbytes)

    # ---- training a cell --------------------------------------------------------------------
    def train_cell(
        self, it: int, cell: CellTensors, x: torch.Tensor, grads: torch.Tensor, model_roots: int
    ) -> tuple[float, int]:
        """Forward and backward of the cell's micrographs, layer by layer, each layer timed on its own
        (as ``model-centric``); the gradient is added to ``grads``. Returns the summed loss and the
        correct predictions of the cell's roots."""
        ctx, params = self.ctx, self.params
        prefix = cell_prefix(it, ctx.rank, cell.cell.step)
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
            h = self.model.layer_forward(layer, cell.blocks[layer], h, blocks[layer].edge_weight)
            if layer == num_layers - 1:
                loss = F.cross_entropy(h, cell.labels, reduction="sum")
                # The model's minibatch is all its roots of the iteration, over all its cells.
                scaled = loss / model_roots
                correct = int((h.argmax(dim=1) == cell.labels).sum())
            ctx.row(task_ids.forward_task(prefix, layer), "forward", start, ctx.now())

        def accumulate() -> None:  # the model's gradient over its cells so far
            grads.add_(
                torch.cat(
                    [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
                )
            )

        backward_by_layer(ctx, scaled, ins, prefix, it, finish=accumulate)
        return float(loss.detach()), correct

    # ---- migration --------------------------------------------------------------------------
    def send_model(self, hop: Hop, grads: torch.Tensor) -> Pending:
        """Start sending model ``hop.model`` (its send time, parameters and accumulated gradients) to
        ``hop.dst``; returns the works and the buffers, which must live until the works end."""
        comm = self.comm_device
        params = torch.cat([p.detach().reshape(-1) for p in self.params]).to(comm)
        stamp = torch.tensor([self.ctx.now()], dtype=torch.float64, device=comm)
        buffers = [stamp, params, grads.to(comm)]
        works = [
            dist.isend(t, hop.dst, group=self.migrate_group, tag=_tag(hop.model, part))
            for t, part in zip(buffers, MIGRATE_PARTS, strict=True)
        ]
        return works, buffers

    def receive_model(self, it: int, hop: Hop) -> torch.Tensor:
        """Take model ``hop.model`` from ``hop.src``: load its parameters into this worker's copy and
        return its accumulated gradients. Records the hop's transfers (the plan's migrate tasks):
        after the sender's announcement, each part's receive is posted once the one before it has
        arrived, so each row times its own bytes and none the wait for the sender (the module
        docstring)."""
        ctx, comm = self.ctx, self.comm_device
        ctx.status.phase("migrate", it)
        stamp = torch.zeros(1, dtype=torch.float64, device=comm)
        carried = {
            part.what: torch.empty(self.num_params, dtype=torch.float32, device=comm) for part in hop.carries
        }
        ctx.comm(True)
        receive_migration(
            ctx,
            hop.src,
            self.migrate_group,
            (stamp, _tag(hop.model, "stamp")),
            [
                (
                    migrate_task(it, hop.src, hop.model, part.what),
                    carried[part.what],
                    _tag(hop.model, part.what),
                )
                for part in hop.carries
            ],
        )
        ctx.comm(False)
        params = carried["model"]
        # The copies' parameters are equal within an iteration: a real load all the same.
        with torch.no_grad():
            offset = 0
            for p in self.params:
                p.copy_(params[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        return carried["gradients"].to(ctx.device)

    def finish_sends(self, it: int, pending: list[Pending]) -> None:
        """Wait for this worker's migrations to be taken (every receiver takes its models before its
        own all-reduce, so this ends)."""
        if not pending:
            return
        ctx = self.ctx
        ctx.status.phase("migrate", it)
        ctx.comm(True)
        for works, _buffers in pending:
            for work in works:
                work.wait()
        ctx.comm(False)
