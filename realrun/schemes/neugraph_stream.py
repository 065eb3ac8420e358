"""``neugraph-stream`` for real: NeuGraph's chunk streaming (paper 001, sections 3.2 and 3.3), as the
plan (:mod:`workbench.strategies.execution.neugraph_stream`) describes it in the ``column-row``
order, on one worker or several GPUs of one server.

Every decision comes from the scheme's schedule (:meth:`NeuGraphStreamScheme.schedule`, a
:class:`StreamSchedule`): the columns (rows in backward) each virtual GPU walks, the sub-chunks
they stream and in which order, which sub-chunks the CPU filters and which rows it keeps, how far
down a chain each sub-chunk's rows go. Worker ``r`` carries out its part of it, per iteration:

* **forward**, layer by layer, column by column: each streamed sub-chunk's vertex rows are copied
  from host memory into the worker's device arena (:class:`realrun.arena.Arena`, the grid's
  ``gpu_memory_bytes``), after the CPU filter copied the useful rows out where the schedule
  filters (``.select``, then ``.rows``, ``h2d``); in a chain the first GPU loads them and each
  member receives them from the one before (``.fwd``, ``d2d``, real point-to-point) and passes
  them on as far as the schedule says; each member's edges of the sub-chunk (the adjacency as
  streamed: pointers over its outer chunk, then each edge's position in the loaded rows, with
  the plan's ``index_bytes``) follow (``.adj``), and the edge compute adds the rows into the
  column's accumulation, which stays in the arena for the whole column (``.edge``). With the
  pipeline on, a sub-chunk is copied before the one ``window - 1`` back is computed (two buffers
  live, as the plan's window); ApplyVertex (``.vertex``) then writes its saved tensors to host
  (``.save``, ``d2h``);
* **backward**: the top layer's ApplyVertex backward per owned chunk (its saved tensors swapped
  in, ``.swapin``; the loss; the weights' gradient; ``dA`` written to host, ``.write``), then
  each layer above the first by rows, streaming ``dA`` as forward streams activations, each row
  ending in the layer below's ApplyVertex backward;
* the weights' gradients (kept on the device all iteration, as the plan's training state)
  all-reduced, and the optimizer step.

The maths is GCN's (``norm="both"``, degrees of the whole graph), the paper's model: NeuGraph's
dataflow optimisation moves the per-vertex degree scalings into ApplyVertex, so what a layer
streams is its input already scaled by ``D_out^-1/2`` (``dA`` by ``D_in^-1/2``) and an edge
compute is a plain sum. The degree scalings and the labels (two floats and an integer per vertex)
stay on the device beside the training state; the plan counts neither. Other layer kinds and
the ``row-column`` order are refused before any worker starts.

Host memory is the one server's, shared by every worker process (a file mapped by all, as the
GPUs of NeuGraph's server share its DRAM): a chunk's saved tensors and gradients are written
once by their owner and read by every worker that streams them. A barrier before each pass that
reads what other workers wrote stands for the plan's dependencies on those writes.

On the CPU copies and computes run one after another: the order, the bytes and what the arena
holds are the plan's, the overlap of copies with compute is not.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from realrun import p2p
from realrun.arena import Arena
from realrun.feature_store import tensor_bytes
from realrun.host_rows import pin_in_place
from realrun.operator_kernels import IGNORED_LABEL, LossFigures, PartKernels, edge_chunk_sum
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import EpochTotals, WorkerContext, epoch_totals
from realrun.schemes.model_centric import ModelCentricExecutor
from workbench.config import RunConfig
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.execution.neugraph_stream import (
    ColumnSchedule,
    NeuGraphStreamScheme,
    NeuGraphTaskIds,
    StreamedSubChunk,
    StreamSchedule,
)

__all__ = ["NeuGraphStreamExecutor", "SharedHost", "gcn_scales"]

Ids = NeuGraphTaskIds
INDEX_DTYPES = {4: torch.int32, 8: torch.int64}  # index_bytes -> the streamed adjacency's dtype


def gcn_scales(graph: CSRGraph) -> tuple[np.ndarray, np.ndarray]:
    """GCN's ``norm="both"`` per vertex: ``in-degree^-1/2`` and ``out-degree^-1/2``, degrees of the
    whole graph clamped to at least 1 (as the model's layers count them on the full graph)."""
    in_deg = np.diff(graph.indptr).astype(np.float64)
    out_deg = np.bincount(graph.indices, minlength=graph.num_nodes).astype(np.float64)
    return (
        np.maximum(in_deg, 1.0) ** -0.5,
        np.maximum(out_deg, 1.0) ** -0.5,
    )


class SharedHost:
    """The server's host memory the workers share: per layer ``l`` its aggregation ``agg[l]``
    (``n x in``), its output ``out[l]`` (``n x out``; scaled by ``D_out^-1/2`` below the top, what the
    next layer streams) and, above the first, ``grad[l]``, the gradient of its aggregation
    (``dA``, scaled by ``D_in^-1/2``, what its backward pass streams)."""

    def __init__(self, ctx: WorkerContext, group: Any) -> None:
        n = ctx.inputs.graph.num_nodes
        shapes: list[tuple[str, int, int]] = []
        for layer, spec in enumerate(ctx.inputs.model.layers):
            shapes += [("agg", layer, spec.in_dim), ("out", layer, spec.output_width)]
            if layer:
                shapes.append(("grad", layer, spec.in_dim))
        flat = _shared_floats(ctx, group, sum(n * w for _, _, w in shapes))
        self.agg: dict[int, torch.Tensor] = {}
        self.out: dict[int, torch.Tensor] = {}
        self.grad: dict[int, torch.Tensor] = {}
        offset = 0
        for kind, layer, width in shapes:
            getattr(self, kind)[layer] = flat[offset : offset + n * width].view(n, width)
            offset += n * width


def _shared_floats(ctx: WorkerContext, group: Any, count: int) -> torch.Tensor:
    """``count`` float32 of host memory every worker of the run maps (one worker: its own), pinned
    on a GPU run."""
    # Every save, swap-in and gradient write copies between this memory and the GPU: pinned, as
    # every scheme's host rows are (realrun/host_rows.py). Unpinned, the H200 ran them at 11-13 GB/s
    # where roc-fullgraph's pinned write-backs ran at 41-53 GB/s.
    if ctx.world == 1:
        return torch.zeros(count, dtype=torch.float32, pin_memory=ctx.device.type == "cuda")
    name = [None]
    if ctx.rank == 0:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="gnnwb-neugraph-", dir=folder)
        os.ftruncate(fd, max(count, 1) * 4)
        os.close(fd)
        name = [path]
    dist.broadcast_object_list(name, src=0, group=group)
    try:
        flat = torch.from_file(str(name[0]), shared=True, size=max(count, 1), dtype=torch.float32)
        dist.barrier(group=group)  # every worker mapped it: the name can go
    finally:
        if ctx.rank == 0:
            os.unlink(str(name[0]))
    pin_in_place(flat, ctx.device)
    return flat[:count]


class EdgeChunks:
    """The edge (sub-)chunks in host memory as the schedule streams them, built once: for a column
    member's outer chunk and a sub-chunk, ``n_outer + 1`` pointers over the outer chunk's vertices
    and each edge's position in the sub-chunk's loaded rows (forward: CSC over destinations, rows
    the sources; backward: CSR over sources, rows the destinations), in the plan's index width."""

    def __init__(self, ctx: WorkerContext, schedule: StreamSchedule, pin: bool) -> None:
        graph = ctx.inputs.graph
        self.indptr, self.src, self.dst = graph.indptr, graph.indices.astype(np.int64), graph.edge_dst()
        self.setup = schedule.setup
        self.dtype = INDEX_DTYPES[self.setup.index_bytes]
        self.pin = pin
        self.chunks: dict[tuple[bool, int, int, int, int, bool], torch.Tensor] = {}
        for kind, layer in schedule.passes():  # built before the run: NeuGraph's preprocessing
            if kind == "top":
                continue
            for column in schedule.columns(layer, kind == "backward"):
                if ctx.rank in column.group:
                    m = column.group.index(ctx.rank)
                    for sub in column.items:
                        if sub.edges[m] and self._key(column, m, sub) not in self.chunks:
                            self.chunks[self._key(column, m, sub)] = self._build(column, m, sub)

    @staticmethod
    def _key(column: ColumnSchedule, m: int, sub: StreamedSubChunk) -> tuple[bool, int, int, int, int, bool]:
        # The filter's choice and the rows it keeps do not change with the layer: one copy serves all.
        return (column.backward, column.group_index, column.c, m, sub.q, sub.filtered)

    def get(self, column: ColumnSchedule, m: int, sub: StreamedSubChunk) -> torch.Tensor:
        return self.chunks[self._key(column, m, sub)]

    def _build(self, column: ColumnSchedule, m: int, sub: StreamedSubChunk) -> torch.Tensor:
        bounds, sub_bounds = self.setup.bounds, column.sub_bounds
        o = column.outers[m]
        if column.backward:  # edges from outer chunk o into the destinations of sub-chunk q
            lo, hi = self.indptr[sub_bounds[sub.q]], self.indptr[sub_bounds[sub.q + 1]]
            outer, inner = self.src[lo:hi], self.dst[lo:hi]
            keep = (outer >= bounds[o]) & (outer < bounds[o + 1])
            order = np.argsort(outer[keep], kind="stable")
            outer, inner = outer[keep][order], inner[keep][order]
        else:  # edges into outer chunk o from the sources of sub-chunk q
            lo, hi = self.indptr[bounds[o]], self.indptr[bounds[o + 1]]
            outer, inner = self.dst[lo:hi], self.src[lo:hi]
            keep = (inner >= sub_bounds[sub.q]) & (inner < sub_bounds[sub.q + 1])
            outer, inner = outer[keep], inner[keep]
        loaded = column.row_vertices(sub)
        position = np.searchsorted(loaded, inner)
        n_outer = int(bounds[o + 1] - bounds[o])
        if inner.size != sub.edges[m] or not np.array_equal(loaded[position], inner):
            raise RuntimeError(f"edge chunk ({o}, {sub.q}): its edges are not the schedule's")
        pointers = np.zeros(n_outer + 1, dtype=np.int64)
        np.cumsum(np.bincount(outer - bounds[o], minlength=n_outer), out=pointers[1:])
        host = torch.from_numpy(np.concatenate([pointers, position])).to(self.dtype)
        return host.pin_memory() if self.pin else host


@dataclass
class Pending:
    """A sub-chunk a member has copied in and not yet computed (its buffers in the arena)."""

    sub: StreamedSubChunk
    rows: str | None  # the arena's name for its rows (None: not on this member)
    adjacency: str | None  # ... for its edges (None: no edge into this member's chunk)


@REAL_EXECUTORS.register("neugraph-stream")
class NeuGraphStreamExecutor(ModelCentricExecutor):
    """Worker ``ctx.rank``'s share of NeuGraph's streaming schedule, a model copy (model-centric's:
    the same initial weights, the same all-reduce and step)."""

    @classmethod
    def check(cls, config: RunConfig, inputs: SchemeInputs) -> None:
        from workbench.run import strategy_config

        execution = strategy_config(config, "execution")
        order = execution.params.get("order", "column-row") if execution is not None else "column-row"
        if order != "column-row":
            raise ConfigError(
                f"neugraph-stream runs for real in the column-row order only, not {order!r}; "
                "simulate the row-column order (gnnwb sim)"
            )
        index_bytes = execution.params.get("index_bytes", 4) if execution is not None else 4
        if index_bytes not in INDEX_DTYPES:
            raise ConfigError(
                f"neugraph-stream runs for real with index_bytes 4 or 8 (int32 or int64 edges), not {index_bytes!r}"
            )
        for k, layer in enumerate(inputs.model.layers):
            if layer.kind != "gcn" or layer.residual:
                raise ConfigError(
                    f"neugraph-stream runs for real with plain gcn layers (the paper's model): model "
                    f"{inputs.model.name!r} layer {k} is {'residual ' if layer.residual else ''}{layer.kind}, "
                    "whose backward needs more per chunk than the one gradient (dA) the plan streams; "
                    "use model gcn, or simulate it (gnnwb sim)"
                )

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        if not isinstance(ctx.scheme, NeuGraphStreamScheme):
            raise TypeError(f"neugraph-stream's executor needs its scheme, got {type(ctx.scheme).__name__}")
        for conv in self.model.convs:  # the norm the scalings below apply (real runs build "both")
            norm = getattr(conv, "norm", None) or getattr(conv, "_norm", None)
            if norm != "both":
                raise ConfigError(f"neugraph-stream runs for real with gcn norm 'both', not {norm!r}")
        self.schedule = ctx.scheme.schedule(ctx.inputs)
        self.setup = self.schedule.setup
        self.sync_group = ctx.host_group or ctx.group
        self.host = SharedHost(ctx, self.sync_group)
        self._resident(ctx)
        capacity = int(ctx.inputs.partition.details["gpu_memory_bytes"])
        self.arena = Arena(capacity, ctx.device, where=f"worker {ctx.rank}'s device arena")
        params = [[(n, tuple(p.shape)) for n, p in conv.named_parameters()] for conv in self.model.convs]
        train = int(self.labels.ne(IGNORED_LABEL).sum())
        self.kernels = PartKernels(ctx.inputs.model, params, 0, ctx.world / max(train, 1))

    def _resident(self, ctx: WorkerContext) -> None:
        """What the worker builds once: the input features in host memory (scaled by ``D_out^-1/2``,
        as layer 0 streams them), the edge chunks, and on the device the degree scalings and labels."""
        graph = ctx.inputs.graph
        pin = ctx.device.type == "cuda"
        nin, nout = gcn_scales(graph)
        features = np.asarray(graph.features(), dtype=np.float32) * nout[:, None].astype(np.float32)
        self.features = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
        if pin:
            self.features = self.features.pin_memory()
        self.edges = EdgeChunks(ctx, self.schedule, pin)
        self.nin = torch.from_numpy(nin.astype(np.float32)).to(ctx.device)
        self.nout = torch.from_numpy(nout.astype(np.float32)).to(ctx.device)
        labels = np.asarray(graph.labels, dtype=np.int64).copy()
        if graph.train_mask is not None:
            labels[~graph.train_mask] = IGNORED_LABEL
        self.labels = torch.from_numpy(labels).to(ctx.device)

    # ---- an iteration --------------------------------------------------------------------------
    def run_epoch(self, epoch: int) -> EpochTotals:
        """Train the run's iterations, each over the whole graph; returns this worker's loss sum,
        correct predictions and training vertices (those of the chunks it owns)."""
        results = map(self.run_iteration, range(max(1, self.ctx.inputs.num_iterations)))
        return epoch_totals((f.loss_sum, f.correct, f.seeds) for f in results)

    def run_iteration(self, it: int) -> LossFigures:
        """The schedule's passes, then the all-reduce and the step."""
        ctx = self.ctx
        ctx.begin_iteration(it)
        self.weights = {
            layer: torch.cat([p.detach().reshape(-1) for p in conv.parameters()])
            for layer, conv in enumerate(self.model.convs)
        }
        self.gradients = {layer: torch.zeros_like(w) for layer, w in self.weights.items()}
        self.figures = LossFigures(0.0, 0, 0)
        for kind, layer in self.schedule.passes():
            if kind == "top":
                ctx.status.phase("backward", it)
                for o in self.setup.owned[ctx.rank]:
                    self.vertex_backward(it, layer, o, None)
                continue
            if layer or kind == "backward":  # reads what every worker wrote in the pass before
                self._barrier()
            ctx.status.phase("backward" if kind == "backward" else "forward", it)
            for column in self.schedule.columns(layer, kind == "backward"):
                if ctx.rank in column.group:
                    self.walk(it, column, column.group.index(ctx.rank))
        self._record(it)
        self.step(it, torch.cat([self.gradients[layer] for layer in sorted(self.gradients)]))
        return self.figures

    def _barrier(self) -> None:
        if self.ctx.world > 1:
            self.ctx.comm(True)
            dist.barrier(group=self.sync_group)
            self.ctx.comm(False)

    def _record(self, iteration: int) -> None:
        """The arena's capacity and peak so far, in the worker's part file."""
        arena = self.arena
        self.ctx.log.write(
            {
                "t": "arena", "rank": self.ctx.rank, "epoch": self.ctx.epoch, "iteration": iteration,
                "capacity": arena.capacity, "peak_bytes": arena.peak_bytes, "compactions": arena.compactions,
            }
        )  # fmt: skip

    # ---- a column --------------------------------------------------------------------------------
    def walk(self, it: int, column: ColumnSchedule, m: int) -> None:
        """Member ``m``'s share of ``column``: its sub-chunks copied in and computed in the schedule's
        order (a copy once the compute ``window`` places back has freed its buffer), then its chunk
        finished."""
        prefix = Ids.column_prefix(it, column.tag, column.group[m], column.outers[m])
        acc = Ids.accumulation(prefix, column.backward)
        pending: deque[Pending] = deque()
        for sub in self._mine(column, m):
            while len(pending) >= self.setup.window:
                self.compute(column, m, prefix, acc, pending.popleft())
            pending.append(self.acquire(it, column, m, prefix, sub))
        while pending:
            self.compute(column, m, prefix, acc, pending.popleft())
        if column.backward:
            self.vertex_backward(
                it, column.layer - 1, column.outers[m], acc if acc in self.arena.holds() else None
            )
        else:
            self.apply_vertex(column, m, prefix, acc)

    @staticmethod
    def _mine(column: ColumnSchedule, m: int) -> Iterator[StreamedSubChunk]:
        """The sub-chunks whose rows reach member ``m`` (down the chain as far as a member has edges)."""
        return (sub for sub in column.items if sub.needed >= m)

    def _source(self, column: ColumnSchedule) -> torch.Tensor:
        """The host rows a column streams: the layer's input (forward), its ``dA`` (backward)."""
        if column.backward:
            return self.host.grad[column.layer]
        return self.features if column.layer == 0 else self.host.out[column.layer - 1]

    def acquire(self, it: int, column: ColumnSchedule, m: int, prefix: str, sub: StreamedSubChunk) -> Pending:
        """Sub-chunk ``sub``'s rows into member ``m``'s arena (from host at the chain's head, else from
        the member before), passed on down the chain, and this member's edges of it."""
        ctx, arena = self.ctx, self.arena
        rows = f"rows.{sub.q}"
        if m == 0:
            self.load_rows(it, column, prefix, sub, rows)
        else:
            start = ctx.now()
            arena.allocate(rows, (sub.rows, int(self._source(column).shape[1])), torch.float32)
            view = arena.view(rows)
            p2p.wait_all([dist.P2POp(dist.irecv, view, column.group[m - 1], group=ctx.group)])
            nbytes = tensor_bytes(view)
            ctx.counter.add("d2d", nbytes)
            ctx.row(Ids.forward(prefix, sub.q), "d2d", start, ctx.now(), nbytes)
        if sub.needed > m:  # the next member's row (its receive) times this send
            p2p.wait_all([dist.P2POp(dist.isend, arena.view(rows), column.group[m + 1], group=ctx.group)])
        adjacency = None
        if sub.edges[m]:
            adjacency = f"adj.{sub.q}"
            host = self.edges.get(column, m, sub)
            start = ctx.now()
            nbytes = arena.load(adjacency, host)
            ctx.counter.add("h2d", nbytes)
            ctx.row(Ids.adjacency(prefix, sub.q), "h2d", start, ctx.now(), nbytes)
        return Pending(sub, rows, adjacency)

    def load_rows(
        self, it: int, column: ColumnSchedule, prefix: str, sub: StreamedSubChunk, rows: str
    ) -> None:
        """At the chain's head: the CPU filter's copy of the useful rows where the schedule filters,
        then the rows host -> arena."""
        ctx = self.ctx
        source = self._source(column)
        if sub.filtered:
            start = ctx.now()
            staged = source[torch.from_numpy(column.row_vertices(sub))]
            if ctx.device.type == "cuda":
                staged = staged.pin_memory()
            select = Ids.select(it, column.tag, column.group[0], column.c, sub.q)
            ctx.row(select, "other", start, ctx.now(), device=self.setup.host, engine="cpu")
        else:
            lo, hi = column.sub_bounds[sub.q], column.sub_bounds[sub.q + 1]
            staged = source[int(lo) : int(hi)]
        start = ctx.now()
        nbytes = self.arena.load(rows, staged)
        ctx.counter.add("h2d", nbytes)
        ctx.row(Ids.rows(prefix, sub.q), "h2d", start, ctx.now(), nbytes)

    def compute(self, column: ColumnSchedule, m: int, prefix: str, acc: str, pending: Pending) -> None:
        """The edge compute of a sub-chunk into the column's accumulation (made by the first one),
        then its buffers freed."""
        ctx, arena, sub = self.ctx, self.arena, pending.sub
        if pending.adjacency is not None:
            start = ctx.now()
            if acc not in arena.holds():
                self._zeros(acc, column.outers[m], int(arena.view(pending.rows).shape[1]))  # type: ignore[arg-type]
            edge_chunk_sum(arena.view(acc), arena.view(pending.adjacency), arena.view(pending.rows))  # type: ignore[arg-type]
            ctx.row(Ids.edge(prefix, sub.q), "backward" if column.backward else "forward", start, ctx.now())
            arena.release(pending.adjacency)
        if pending.rows is not None:
            arena.release(pending.rows)

    def _zeros(self, name: str, chunk: int, width: int) -> None:
        """A chunk's accumulation, zero, in the arena."""
        n = int(self.setup.sizes[chunk])
        self.arena.allocate(name, (n, width), torch.float32)
        self.arena.view(name).zero_()

    # ---- ApplyVertex and its backward -------------------------------------------------------------
    def _chunk(self, chunk: int) -> slice:
        return slice(int(self.setup.bounds[chunk]), int(self.setup.bounds[chunk + 1]))

    def apply_vertex(self, column: ColumnSchedule, m: int, prefix: str, acc: str) -> None:
        """ApplyVertex of member ``m``'s chunk: ``Z = D_in^-1/2 A`` in place, the layer's transform
        (ReLU below the top), the output scaled by ``D_out^-1/2`` for the next layer's stream; then
        ``Z`` and the output to host (the plan's saved tensors)."""
        ctx, arena, layer = self.ctx, self.arena, column.layer
        o, spec = column.outers[m], self.setup.model.layers[column.layer]
        rows = self._chunk(o)
        start = ctx.now()
        if acc not in arena.holds():  # no edge into the chunk
            self._zeros(acc, o, spec.in_dim)
        out = f"{prefix}.out"
        arena.allocate(out, (int(self.setup.sizes[o]), spec.output_width), torch.float32)
        t = {
            f"W{layer + 1}": self.weights[layer],
            f"agg{layer + 1}": arena.view(acc),
            f"h{layer + 1}": arena.view(out),
        }
        t[f"agg{layer + 1}"].mul_(self.nin[rows, None])
        self.kernels.run(f"update{layer + 1}", t)
        if layer + 1 < self.setup.model.num_layers:
            t[f"h{layer + 1}"].mul_(self.nout[rows, None])
        ctx.row(Ids.apply_vertex(prefix), "forward", start, ctx.now())
        start = ctx.now()
        arena.write_back(acc, into=self.host.agg[layer][rows])
        arena.write_back(out, into=self.host.out[layer][rows])
        nbytes = tensor_bytes(arena.view(acc)) + tensor_bytes(arena.view(out))
        ctx.counter.add("d2h", nbytes)
        ctx.row(Ids.save(prefix), "d2h", start, ctx.now(), nbytes)
        arena.release(acc)
        arena.release(out)

    def vertex_backward(self, it: int, layer: int, chunk: int, grad: str | None) -> None:
        """ApplyVertex backward of ``layer`` for ``chunk``: its saved tensors swapped in; the output's
        gradient (the loss's at the top, else ``D_out^-1/2 G`` from the row pass, in the arena); the
        weights' gradient accumulated; below the top ... ``dA`` scaled by ``D_in^-1/2`` to host."""
        ctx, arena = self.ctx, self.arena
        prefix = Ids.vertex_prefix(it, layer, ctx.rank, chunk)
        rows, top = self._chunk(chunk), layer == self.setup.model.num_layers - 1
        start = ctx.now()
        saved_agg, saved_out = f"{prefix}.agg", f"{prefix}.h"
        nbytes = arena.load(saved_agg, self.host.agg[layer][rows]) + arena.load(
            saved_out, self.host.out[layer][rows]
        )
        ctx.counter.add("h2d", nbytes)
        ctx.row(Ids.swap_in(prefix), "h2d", start, ctx.now(), nbytes)
        start = ctx.now()
        keeps = layer >= 1
        dacc = Ids.gradient_tensor(prefix)
        if keeps:
            arena.allocate(
                dacc, (int(self.setup.sizes[chunk]), self.setup.model.layers[layer].in_dim), torch.float32
            )
        self._update_backward(layer, rows, top, saved_agg, saved_out, grad, dacc if keeps else None)
        ctx.row(Ids.apply_vertex(prefix), "backward", start, ctx.now())
        for name in (grad, saved_agg, saved_out):
            if name is not None:
                arena.release(name)
        if keeps:
            start = ctx.now()
            arena.write_back(dacc, into=self.host.grad[layer][rows])
            nbytes = tensor_bytes(arena.view(dacc))
            ctx.counter.add("d2h", nbytes)
            ctx.row(Ids.gradient_write(prefix), "d2h", start, ctx.now(), nbytes)
            arena.release(dacc)

    def _update_backward(
        self,
        layer: int,
        rows: slice,
        top: bool,
        saved_agg: str,
        saved_out: str,
        grad: str | None,
        dacc: str | None,
    ) -> None:
        """The kernels of an ApplyVertex backward on the arena's views (the output's gradient and the
        weights' gradient of this chunk are workspace, the latter added to the iteration's)."""
        arena, k = self.arena, layer + 1
        out = arena.view(saved_out)
        if top:
            t = {f"h{k}": out, "labels": self.labels[rows], f"grad_h{k}": torch.empty_like(out)}
            figures = self.kernels.run("loss", t)
            assert figures is not None
            self.figures = LossFigures(
                self.figures.loss_sum + figures.loss_sum,
                self.figures.correct + figures.correct,
                self.figures.seeds + figures.seeds,
            )
            gradient = t[f"grad_h{k}"]
        elif grad is None:  # no edge out of the chunk: nothing above reads it
            gradient = torch.zeros_like(out)
        else:
            gradient = arena.view(grad) * self.nout[rows, None]
        share = torch.empty_like(self.gradients[layer])
        t = {
            f"grad_h{k}": gradient, f"h{k}": out, f"W{k}": self.weights[layer], f"grad_W{k}": share,
            f"agg{k}": arena.view(saved_agg),
        }  # fmt: skip
        if dacc is not None:
            t[f"grad_agg{k}"] = arena.view(dacc)
        self.kernels.run(f"update{k}.bwd", t)
        self.gradients[layer] += share
        if dacc is not None:
            t[f"grad_agg{k}"].mul_(self.nin[rows, None])
