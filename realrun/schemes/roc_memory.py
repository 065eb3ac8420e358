"""roc-fullgraph's part step under a memory policy (``dpmm``, ``lru``, ``streaming``), for real.

ROC (paper 000, section 5) keeps every tensor of a part's training step in host DRAM and
caches some on the GPU, as its memory manager decides. The plan builder emits a part's step
from the policy's schedule (:class:`~workbench.strategies.memory.base.MemorySchedule`, in the
iteration's :class:`~workbench.strategies.execution.roc_fullgraph.IterationSchedule`); this
module carries out the same schedule, step by step, on worker ``p``:

* before operator ``op``: each tensor the step loads is copied from host memory into the
  device arena (:class:`realrun.arena.Arena`, exactly the policy's capacity), plan task
  ``{prefix}.{op}.load.{x}`` (``h2d``); the outputs get room there;
* ``op`` runs on the arena's views (:mod:`realrun.operator_kernels`), plan task ``{prefix}.{op}``;
* each output is copied back to host memory, ``{prefix}.{op}.wb.{y}`` (``d2h``); then the arena
  keeps what the step keeps and lets the rest go.

So the bytes loaded and written back, and what the arena holds while each operator runs, are
the schedule's: the arena records its live bytes at every operator (an ``arena`` record in
the worker's part file), and the run's loads, write-backs and their trace rows are the plan's.

Between parts the halo moves host to host: the owner's rows of ``h{l}`` once it wrote them back,
into the reader's ``halo{l}`` (layer 0: the input features, at the start); the gradients a reader
wrote back in ``grad_halo{l}``, into the owner's ``grad_readers{l}``, which its ``halo_grad{l}``
adds into its own. Between machines that is the plan's host copy (``gather_remote``, timed and
counted); within one machine ROC's parts share the host's DRAM, and the plan has no copy: the
worker processes still exchange the rows (they do not share memory), uncounted and untimed.
Every worker exchanges at the same points (after the step that writes ``h{l}``, after the one
that writes its own share of ``grad_h{l}``), even with nothing to send.

The weights' host copy ``W{l}`` is the model's parameters after the last optimizer step (the
training state stays on the device, as the plan keeps it); the gradients written back
(``grad_W{l}``) are all-reduced as every data-parallel scheme's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from realrun.arena import Arena
from realrun.feature_store import tensor_bytes
from realrun.host_rows import pinned
from realrun.operator_kernels import IGNORED_LABEL, LossFigures, PartKernels
from realrun.schemes.base import WorkerContext, exchange_pairwise
from workbench.strategies.execution.roc_fullgraph import (
    BACKWARD,
    FORWARD,
    IterationSchedule,
    PartLayout,
    PartSchedule,
    RocTaskIds,
)
from workbench.strategies.memory.base import MemorySchedule, Operator, OperatorGraph, ScheduleStep

__all__ = ["PolicyStep", "local_edges"]


def local_edges(ctx: WorkerContext, lay: PartLayout) -> tuple[np.ndarray, np.ndarray, int]:
    """The part's in-edges in CSR order (grouped by destination) as positions in its block:
    sources are its vertices, then each owner's halo rows in owner order (the order the halo
    rows arrive in), destinations its vertices. Returns ``(src, dst, num_src)``."""
    graph = ctx.inputs.graph
    mine = lay.vertices
    local = np.full(graph.num_nodes, -1, dtype=np.int64)
    local[mine] = np.arange(mine.shape[0], dtype=np.int64)
    offset = mine.shape[0]
    for q in sorted(lay.halo_rows):
        rows = lay.halo_rows[q]
        local[rows] = offset + np.arange(rows.shape[0], dtype=np.int64)
        offset += rows.shape[0]
    dst = graph.edge_dst()
    src = graph.indices.astype(np.int64, copy=False)
    owned = np.zeros(graph.num_nodes, dtype=bool)
    owned[mine] = True
    edges = owned[dst]
    return local[src[edges]], local[dst[edges]], int(offset)


class PolicyStep:
    """Worker ``ctx.rank``'s part step under its memory policy, iteration after iteration."""

    def __init__(self, ctx: WorkerContext, lay: PartLayout, model: Any, memory: MemorySchedule) -> None:
        self.ctx, self.lay, self.model = ctx, lay, model
        graph = ctx.inputs.graph
        train = graph.train_mask if graph.train_mask is not None else np.ones(graph.num_nodes, dtype=bool)
        params = [[(n, tuple(p.shape)) for n, p in conv.named_parameters()] for conv in model.convs]
        self.kernels = PartKernels(
            ctx.inputs.model, params, lay.num_vertices, ctx.world / max(int(train.sum()), 1)
        )
        self.arena = Arena(memory.capacity_bytes, ctx.device, where=f"worker {ctx.rank}'s device arena")
        self.static = self._static_host_tensors(train)

    def _static_host_tensors(self, train: np.ndarray) -> dict[str, torch.Tensor]:
        """What the host holds before every step and never changes: the part's CSR, labels
        (``IGNORED_LABEL`` off the training set), own input features and the rows it sends."""
        ctx, lay = self.ctx, self.lay
        graph = ctx.inputs.graph
        src, dst, _ = local_edges(ctx, lay)
        crow = np.zeros(lay.num_vertices + 1, dtype=np.int64)
        crow[1:] = np.cumsum(np.bincount(dst, minlength=lay.num_vertices))
        labels = np.asarray(graph.labels[lay.vertices], dtype=np.int64).copy()
        labels[~train[lay.vertices]] = IGNORED_LABEL
        features = np.ascontiguousarray(graph.features(lay.vertices), dtype=np.float32)
        sent = [lay.send_rows[q] for q in sorted(lay.send_rows)]
        rows = np.concatenate(sent).astype(np.int64) if sent else np.zeros(0, np.int64)
        tensors = {
            "graph": np.concatenate([crow, src]),
            "labels": labels,
            "own_features": features,
            "sent_rows": rows,
        }
        return {name: self._host(torch.from_numpy(array)) for name, array in tensors.items()}

    def _host(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in host memory as loads read it: pinned on CUDA, so a load is a DMA copy as the
        plan's h2d is, not a pageable one."""
        return pinned(t, self.ctx.device)

    # ---- one iteration ---------------------------------------------------------------------------
    def run(self, schedule: IterationSchedule) -> tuple[LossFigures, torch.Tensor]:
        """The part's step as ``schedule`` says; returns the loss figures and the flattened gradients
        written back (for the all-reduce)."""
        ctx = self.ctx
        part = schedule.parts[ctx.rank]
        memory: MemorySchedule = part.memory  # type: ignore[assignment]
        host = dict(self.static)
        for layer, conv in enumerate(self.model.convs, start=1):
            host[f"W{layer}"] = self._host(
                torch.cat([p.detach().reshape(-1) for p in conv.parameters()]).cpu()
            )
        ctx.status.phase("gather", schedule.iteration)
        self._exchange(schedule, host, FORWARD, 0)
        points = _exchange_points(memory.graph, ctx.inputs.model.num_layers)
        operators = {op.name: op for op in memory.graph.operators}
        sizes = {t.name: t.bytes for t in memory.graph.tensors}
        figures, peaks = LossFigures(0.0, 0, 0), []
        for step in memory.steps:
            op = operators[step.operator]
            ctx.status.phase("backward" if op.phase == "backward" else "forward", schedule.iteration)
            loss, live = self._step(part, step, op, host, sizes)
            peaks.append(live)
            figures = loss or figures
            for direction, layer in points.get(op.name, ()):
                self._exchange(schedule, host, direction, layer)
        self._record(schedule.iteration, peaks)
        flat = torch.cat([host[f"grad_W{layer}"] for layer in range(1, len(self.model.convs) + 1)])
        return figures, flat.to(ctx.device)

    def _step(
        self, part: PartSchedule, step: ScheduleStep, op: Operator, host: dict[str, torch.Tensor],
        sizes: Mapping[str, int],
    ) -> tuple[LossFigures | None, int]:  # fmt: skip
        """One operator: its loads, the operator on the arena, its write-backs, the releases.
        Returns what the loss found (None for the others) and the arena's bytes while it ran."""
        ctx, arena = self.ctx, self.arena
        for name in step.load:
            start = ctx.now()
            nbytes = arena.load(name, host[name])
            _check(name, nbytes, sizes)
            ctx.counter.add("h2d", nbytes)
            ctx.row(RocTaskIds.load(part.prefix, op.name, name), "h2d", start, ctx.now(), nbytes)
        halo = self.lay.halo_vertices
        for name in op.writes:
            arena.allocate(name, self.kernels.output_shape(name, halo), torch.float32)
            _check(name, tensor_bytes(arena.view(name)), sizes)
        live = arena.live_bytes
        views = {name: arena.view(name) for name in (*op.reads, *op.writes)}
        start = ctx.now()
        figures = self.kernels.run(op.name, views)
        ctx.row(RocTaskIds.operator(part.prefix, op.name), op.phase, start, ctx.now())
        for name in step.write_back:
            start = ctx.now()
            host[name] = arena.write_back(name)
            nbytes = tensor_bytes(host[name])
            ctx.counter.add("d2h", nbytes)
            ctx.row(RocTaskIds.write_back(part.prefix, op.name, name), "d2h", start, ctx.now(), nbytes)
        for name in arena.holds() - set(step.keep):
            arena.release(name)
        return figures, live

    # ---- the halo, host to host ----------------------------------------------------------------
    def _exchange(
        self, schedule: IterationSchedule, host: dict[str, torch.Tensor], direction: str, layer: int
    ) -> None:
        """This worker's side of the layer's halo exchange in ``direction`` (the schedule's pairs):
        forward, its rows of ``h{l}`` (features) out and the halo in; backward, its ``grad_halo{l}``
        out by owner and the readers' gradients of its rows in, as ``grad_readers{l}``."""
        ctx, lay, rank = self.ctx, self.lay, self.ctx.rank
        transfers = schedule.exchanges(direction, layer)
        width = ctx.inputs.model.layers[layer].in_dim
        if direction == FORWARD:
            source = host["own_features"] if layer == 0 else host[f"h{layer}"]
            outgoing = {
                t.reader: source[torch.from_numpy(lay.send_rows[t.reader])]
                for t in transfers
                if t.owner == rank
            }
            mine = {t.owner: t for t in transfers if t.reader == rank}
        else:
            pieces = (
                host[f"grad_halo{layer}"].split([lay.halo[q] for q in sorted(lay.halo)]) if lay.halo else ()
            )
            outgoing = dict(zip(sorted(lay.halo), pieces, strict=True))
            mine = {t.reader: t for t in transfers if t.owner == rank}
        shapes = {q: ((t.rows, width), torch.float32) for q, t in mine.items()}
        incoming, received, _, start = exchange_pairwise(ctx, outgoing, shapes)
        for q in sorted(incoming):
            t = mine[q]
            if t.task is not None:  # between machines: the plan's host copy
                nbytes = tensor_bytes(incoming[q])
                ctx.counter.add(t.phase, nbytes)
                ctx.row(t.task, t.phase, start, received[q], nbytes)
        arrived = [incoming[q].cpu() for q in sorted(incoming)]
        if direction == BACKWARD:
            if arrived:
                host[f"grad_readers{layer}"] = self._host(torch.cat(arrived))
        elif layer == 0:
            host["features"] = self._host(torch.cat([host["own_features"].cpu(), *arrived]))
        elif arrived:
            host[f"halo{layer}"] = self._host(torch.cat(arrived))

    def _record(self, iteration: int, peaks: list[int]) -> None:
        """The arena's bytes while each operator ran, in the worker's part file (what the plan's
        memory timeline says of the part's GPU, less its training state)."""
        arena = self.arena
        self.ctx.log.write(
            {
                "t": "arena", "rank": self.ctx.rank, "epoch": self.ctx.epoch, "iteration": iteration,
                "capacity": arena.capacity, "peak_bytes": max(peaks, default=0), "step_bytes": peaks,
                "compactions": arena.compactions,
            }
        )  # fmt: skip


def _exchange_points(graph: OperatorGraph, num_layers: int) -> dict[str, list[tuple[str, int]]]:
    """After which operator each halo exchange happens: forward layer ``l`` once ``h{l}`` is written,
    backward layer ``l`` once the part's own share of ``grad_h{l}`` is (``grad_local{l}`` where
    readers add theirs, else ``grad_h{l}`` itself); every part has both operators."""
    points: dict[str, list[tuple[str, int]]] = {}
    for layer in range(1, num_layers):
        for direction, names in (
            (FORWARD, (f"h{layer}",)),
            (BACKWARD, (f"grad_local{layer}", f"grad_h{layer}")),
        ):
            writer = next(op.name for op in graph.operators if set(names) & set(op.writes))
            points.setdefault(writer, []).append((direction, layer))
    return points


def _check(name: str, nbytes: int, sizes: Mapping[str, int]) -> None:
    """A tensor's real bytes are the operator graph's (a mismatch is a bug, not an input error)."""
    if nbytes != sizes[name]:
        raise RuntimeError(f"tensor {name!r}: {nbytes:,} bytes for real, {sizes[name]:,} in the plan")
