"""``bulk-pipeline`` for real: paper 004's pipeline (sections 5 and 6) across worker processes,
carrying out the scheme's schedule (:mod:`workbench.strategies.execution.bulk_pipeline`), the one its
plan is built from.

Paper: ``papers/004_48b849e12cfdd076.txt`` (Tripathy, Yelick, Buluc, MLSys 2024). Per bulk step
(:meth:`~workbench.strategies.execution.bulk_pipeline.BulkPipelineScheme.sampling_step`), every
process samples its process row's minibatches layer by layer, seeds outwards, as the step's
:class:`~workbench.strategies.sampling.bulk_matrix_schedule.BulkSamplingSchedule` says:

1. ``Q_i`` stacks the row's destination vertices (the seeds, then each layer's sampled sources);
2. replicated: the process holds all of ``A`` and computes ``P_i = Q_i A`` alone. 1.5D: it holds
   block row ``A_i`` only and asks process ``(t, j)`` for the rows of ``A_t`` its columns of ``Q_i``
   need (the ids, then the rows back: lengths, column ids, values), all at once or in the paper's
   ``P/c^2`` steps, then multiplies its column blocks (a scipy SpGEMM) and sums the ``c`` partial
   products of its process row: one ring all-reduce of the CSR of ``P_i`` (row lengths, then the
   nonzeros) over the row's group, or CAGNET's ``log2(c)`` rounds of pairwise CSR exchange;
3. inverse transform sampling on ``P_i``'s rows and extraction (local ids), every process of the
   row the same, with each row's random stream as the one-process sampler drew it
   (:func:`workbench.epoch.bulk_matrix_streams`): the distributed sampler draws the run's epoch
   exactly, which the executor checks array by array before training on what it drew.

Then each iteration: the all-to-allv feature fetch across the process column (each process row
holds its block of the feature matrix ``H``; ids to the owner, rows back), forward and backward
layer by layer, and the gradient all-reduce, as ``model-centric`` trains. Every message is a
``torch.distributed`` operation between the processes (point-to-point in batches, the ring sum a
collective on a process-row group); every task runs under the plan's id with the bytes it
really sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

from realrun import p2p
from realrun.feature_store import tensor_bytes
from realrun.schemes import REAL_EXECUTORS
from realrun.schemes.base import (
    EpochTotals,
    WorkerContext,
    backward_by_layer,
    epoch_totals,
    link_engine,
)
from realrun.schemes.model_centric import ModelCentricExecutor, forward_by_layer, seed_labels
from workbench.config import RunConfig
from workbench.epoch import bulk_matrix_streams
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.execution.bulk_pipeline import BulkPipelineScheme, FeatureFetch, SamplingStep
from workbench.strategies.sampling.base import Block, Minibatch
from workbench.strategies.sampling.bulk_matrix import (
    BulkMatrixSampler,
    LayerStream,
    extract_blocks,
    its_uniform_rows,
)
from workbench.strategies.sampling.bulk_matrix_schedule import (
    BulkSamplingSchedule,
    LayerSchedule,
    RowFetch,
    RowProduct,
)

__all__ = ["BulkPipelineExecutor", "Channel", "DistributedBulkSampler"]

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]  # row pointers, column ids, values
Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # row ids, then their Csr


@dataclass
class Channel:
    """What the distributed sampler needs of its process: its rank, where tensors go to be sent (the
    GPU under NCCL, else the CPU), the clock, and how it records a task and a wait."""

    rank: int
    comm_device: torch.device
    now: Callable[[], float]
    record: Callable[[str, float, float, int, str], None]  # task, start, end, bytes sent, engine
    waiting: Callable[[bool], None]
    engine: Callable[[int], str]  # the trace engine of a message to a peer
    row_group: Any = None  # this process's row of the sampling grid (the ring sums)


def exchange(
    ch: Channel,
    outgoing: Mapping[int, Sequence[torch.Tensor]],
    incoming: Mapping[int, Sequence[tuple[int, torch.dtype]]],
) -> tuple[dict[int, list[torch.Tensor]], dict[int, float], float]:
    """Send each peer ``q`` its tensors ``outgoing[q]`` and receive from it tensors of ``incoming[q]``'s
    lengths and dtypes, every pair at once; returns what arrived, when each peer's sends completed,
    and when the exchange began. Both sides list a pair's tensors in the same order."""
    ops, done_by, buffers = [], [], {}
    for q in sorted(set(outgoing) | set(incoming)):
        for t in outgoing.get(q, ()):
            ops.append(dist.P2POp(dist.isend, t.to(ch.comm_device).contiguous(), q))
            done_by.append(q)
        buffers[q] = [torch.empty(n, dtype=dtype, device=ch.comm_device) for n, dtype in incoming.get(q, ())]
        for buf in buffers[q]:
            ops.append(dist.P2POp(dist.irecv, buf, q))
            done_by.append(-1)
    start = ch.now()
    sent: dict[int, float] = {}
    ch.waiting(True)
    for k in p2p.completions(p2p.start(ops), len(ops)):
        if done_by[k] >= 0:
            sent[done_by[k]] = ch.now()  # a peer's last send completes last: its time stays
    ch.waiting(False)
    return buffers, sent, start


def merge_disjoint(a: Csr, b: Csr) -> Csr:
    """The sum of two CSR matrices with disjoint nonempty rows (GraphSAGE's partial products)."""
    la, lb = np.diff(a[0]), np.diff(b[0])
    if np.any((la > 0) & (lb > 0)):
        raise RuntimeError("pairwise row sum: two partial products share a row (GraphSAGE's do not)")
    indptr = np.concatenate([[0], np.cumsum(la + lb)]).astype(np.int64)
    ids = np.empty(int(indptr[-1]), dtype=np.int64)
    vals = np.empty(int(indptr[-1]), dtype=np.float32)
    for (ptr, cols, data), lengths in ((a, la), (b, lb)):
        at = np.repeat(indptr[:-1] - ptr[:-1], lengths) + np.arange(cols.shape[0])
        ids[at], vals[at] = cols, data
    return indptr, ids, vals


class DistributedBulkSampler:
    """One process's part of sampling a bulk step (paper 004, section 5) as its schedule says."""

    def __init__(
        self, ch: Channel, graph: CSRGraph, fanouts: Sequence[int], schedule: BulkSamplingSchedule
    ) -> None:
        self.ch = ch
        self.grid = schedule.grid
        self.fanouts = tuple(fanouts)
        self.num_nodes = graph.num_nodes
        self.i, self.j = self.grid.process(ch.rank)
        # Replicated: all of A. 1.5D: block row A_i alone; other rows only arrive by message.
        lo, hi = (
            (int(self.grid.bounds[self.i]), int(self.grid.bounds[self.i + 1]))
            if self.grid.partitioned
            else (0, graph.num_nodes)
        )
        ptr = np.asarray(graph.indptr[lo : hi + 1], dtype=np.int64)
        cols = np.asarray(graph.indices[ptr[0] : ptr[-1]], dtype=np.int64)
        self.lo = lo
        self.a = sp.csr_matrix(
            (np.ones(cols.shape[0], np.float32), cols, ptr - ptr[0]), shape=(hi - lo, self.num_nodes)
        )

    def sample(
        self,
        schedule: BulkSamplingSchedule,
        seeds: Mapping[int, np.ndarray],
        streams: Mapping[int, Sequence[LayerStream]],
        task: Callable[[str], str],
    ) -> dict[int, Minibatch]:
        """The minibatches of this process's row (schedule indices ``b`` -> minibatch), from their
        ``seeds``; ``streams[b]``: each layer's random stream; ``task``: the pipeline's id of a task."""
        mine = schedule.batches_of_row(self.i)
        dsts = [np.asarray(seeds[b], dtype=np.int64) for b in mine]
        blocks: dict[int, list[Block]] = {b: [] for b in mine}
        for lay in schedule.layers:
            fetched = self.fetch_rows(lay, dsts, task)
            prod = lay.product(self.i)
            if prod is None:
                continue
            p = self.row_sum(prod, self.partial_product(prod, dsts, fetched, task), task)
            drawn = self.draw(prod, lay, p, dsts, [streams[b][lay.layer] for b in prod.batches], task)
            for b, block in zip(prod.batches, drawn, strict=True):
                blocks[b].append(block)
            dsts = [block.src_nodes for block in drawn]
        return {b: Minibatch(seeds=np.asarray(seeds[b]), blocks=blocks[b][::-1]) for b in mine}

    # ---- step 1: the rows of A, and the product --------------------------------------------
    def fetch_rows(
        self, lay: LayerSchedule, dsts: list[np.ndarray], task: Callable[[str], str]
    ) -> dict[int, Rows]:
        """The rows of ``A_t`` this process needs, per block ``t``, fetched as the layer's schedule says
        (all at once, or the paper's steps in its column), serving the rows of its own block it is
        asked for; returns (ids, row pointers, columns, values) per ``t``."""
        needs = self.grid.rows_needed(dsts) if self.grid.partitioned and dsts else {}
        rank = self.ch.rank
        if lay.stages:
            rounds = [list(stage) for stage in lay.stages[self.j]]
        else:
            rounds = [[f for p in lay.products for mine in p.fetches for f in mine]]
        got: dict[int, Rows] = {}
        for fetches in rounds:
            asks = [f for f in fetches if f.requester == rank]
            serves = [f for f in fetches if f.owner == rank]
            if asks or serves:
                got.update(self.fetch_round(asks, serves, needs, task))
        return got

    def fetch_round(
        self,
        asks: list[RowFetch],
        serves: list[RowFetch],
        needs: dict[int, np.ndarray],
        task: Callable[[str], str],
    ) -> dict[int, Rows]:
        """One round of fetches: the ids out and in, then the rows back and out."""
        ch = self.ch
        out: dict[int, list[torch.Tensor]] = {}
        for f in asks:
            if needs.get(f.t, np.empty(0)).shape[0] != f.rows:
                raise RuntimeError(
                    f"{f.request}: the frontier needs {needs.get(f.t, np.empty(0)).shape[0]} rows of A_{f.t}, the schedule {f.rows}"
                )
            out[f.owner] = [torch.from_numpy(needs[f.t])]
        arrived, sent, start = exchange(ch, out, {f.requester: [(f.rows, torch.int64)] for f in serves})
        for f in asks:
            ch.record(
                task(f.request), start, sent[f.owner], tensor_bytes(out[f.owner][0]), ch.engine(f.owner)
            )
        replies = {f.requester: self.serve(arrived[f.requester][0].cpu().numpy()) for f in serves}
        want = {f.owner: [(f.rows, torch.int64), (f.nnz, torch.int64), (f.nnz, torch.float32)] for f in asks}
        rows, sent, start = exchange(ch, replies, want)
        for f in serves:
            nbytes = sum(tensor_bytes(t) for t in replies[f.requester])
            ch.record(task(f.reply), start, sent[f.requester], nbytes, ch.engine(f.requester))
        got = {}
        for f in asks:
            lengths, cols, vals = (t.cpu().numpy() for t in rows[f.owner])
            got[f.t] = (needs[f.t], np.concatenate([[0], np.cumsum(lengths)]), cols, vals)
        return got

    def serve(self, ids: np.ndarray) -> list[torch.Tensor]:
        """Rows ``ids`` of this process's block of ``A``: their lengths, column ids and values."""
        rows = self.a[ids - self.lo]
        return [
            torch.from_numpy(np.diff(rows.indptr).astype(np.int64)),
            torch.from_numpy(rows.indices.astype(np.int64)),
            torch.from_numpy(rows.data.astype(np.float32)),
        ]

    def partial_product(
        self, prod: RowProduct, dsts: list[np.ndarray], fetched: dict[int, Rows], task: Callable[[str], str]
    ) -> Csr:
        """This process's partial ``sum_t Q_{i,t} A_t`` over its column blocks: a SpGEMM of the rows of
        ``Q_i`` in its blocks with the rows of ``A`` it holds or fetched."""
        start = self.ch.now()
        q = np.concatenate(dsts)
        block = self.grid.block_of(q)
        mine = (
            np.isin(block, self.grid.column_blocks(self.i, self.j))
            if self.grid.partitioned
            else np.ones(q.shape[0], bool)
        )
        local = np.unique(q[mine & (block == self.i)]) if self.grid.partitioned else np.unique(q)
        held = self.a[local - self.lo]
        ids = [local] + [fetched[t][0] for t in sorted(fetched)]
        avail = sp.vstack(
            [held]
            + [
                sp.csr_matrix(
                    (fetched[t][3], fetched[t][2], fetched[t][1]),
                    shape=(fetched[t][0].shape[0], self.num_nodes),
                )
                for t in sorted(fetched)
            ],
            format="csr",
        )
        avail_ids = np.concatenate(ids)
        order = np.argsort(avail_ids)
        rows = np.flatnonzero(mine)
        at = order[np.searchsorted(avail_ids[order], q[rows])]
        select = sp.csr_matrix(
            (np.ones(rows.shape[0], np.float32), (rows, at)), shape=(q.shape[0], avail_ids.shape[0])
        )
        p = sp.csr_matrix(select @ avail)
        p.sort_indices()  # A's rows are sorted: P's rows are A's rows in A's order
        if p.nnz != prod.partial_nnz[self.j]:
            raise RuntimeError(
                f"{prod.spgemm(self.j)}: {p.nnz} nonzeros, the schedule {prod.partial_nnz[self.j]}"
            )
        self.ch.record(task(prod.spgemm(self.j)), start, self.ch.now(), 0, "compute")
        return p.indptr.astype(np.int64), p.indices.astype(np.int64), p.data.astype(np.float32)

    # ---- the row sum -----------------------------------------------------------------------
    def row_sum(self, prod: RowProduct, partial: Csr, task: Callable[[str], str]) -> Csr:
        """``P_i``: this process's partial product summed with its row's others as the schedule says."""
        if prod.ring is not None:
            total = self.ring_sum(prod, partial, task)
        elif prod.rounds:
            total = self.pairwise_sum(prod, partial, task)
        else:
            total = partial
        if int(total[0][-1]) != prod.p_nnz:
            raise RuntimeError(
                f"{prod.prefix}: P_{prod.i} has {int(total[0][-1])} nonzeros, the schedule {prod.p_nnz}"
            )
        return total

    def ring_sum(self, prod: RowProduct, partial: Csr, task: Callable[[str], str]) -> Csr:
        """One all-reduce of the CSR of ``P_i`` over the row: the row lengths (with a leading zero: the
        row pointers' count), then the column ids and values, each process's own rows in place and
        zeros elsewhere (GraphSAGE's partial products share no row)."""
        ch, ring = self.ch, prod.ring
        assert ring is not None
        ptr, cols, vals = partial
        start = ch.now()
        lengths = torch.zeros(ring.rows + 1, dtype=torch.int64)
        lengths[1:] = torch.from_numpy(np.diff(ptr))
        ch.waiting(True)
        buffers = [lengths.to(ch.comm_device)]
        dist.all_reduce(buffers[0], group=ch.row_group)
        indptr = np.cumsum(buffers[0].cpu().numpy())
        at = np.repeat(indptr[:-1] - ptr[:-1], np.diff(ptr)) + np.arange(cols.shape[0])
        ids, values = np.zeros(int(indptr[-1]), np.int64), np.zeros(int(indptr[-1]), np.float32)
        ids[at], values[at] = cols, vals
        buffers += [torch.from_numpy(ids).to(ch.comm_device), torch.from_numpy(values).to(ch.comm_device)]
        works = [dist.all_reduce(b, group=ch.row_group, async_op=True) for b in buffers[1:]]
        for w in works:
            w.wait()
        ch.waiting(False)
        ch.record(task(ring.task), start, ch.now(), sum(tensor_bytes(b) for b in buffers), "collective")
        return indptr.astype(np.int64), buffers[1].cpu().numpy(), buffers[2].cpu().numpy()

    def pairwise_sum(self, prod: RowProduct, partial: Csr, task: Callable[[str], str]) -> Csr:
        """CAGNET's rounds: each sends its partner the CSR of the sum it holds and adds the partner's."""
        ch = self.ch
        held = partial
        for sends in prod.rounds:
            mine = next(s for s in sends if s.j == self.j)
            theirs = next(s for s in sends if s.j == mine.partner)
            out = [torch.from_numpy(np.ascontiguousarray(a)) for a in held]
            want = [(theirs.rows + 1, torch.int64), (theirs.nnz, torch.int64), (theirs.nnz, torch.float32)]
            got, sent, start = exchange(ch, {mine.receiver: out}, {theirs.sender: want})
            ch.record(
                task(mine.task),
                start,
                sent[mine.receiver],
                sum(tensor_bytes(t) for t in out),
                ch.engine(mine.receiver),
            )
            ptr, cols, vals = (t.cpu().numpy() for t in got[theirs.sender])
            held = merge_disjoint(held, (ptr, cols, vals))
        return held

    # ---- steps 2 and 3 --------------------------------------------------------------------
    def draw(
        self,
        prod: RowProduct,
        lay: LayerSchedule,
        p: Csr,
        dsts: list[np.ndarray],
        streams: list[LayerStream],
        task: Callable[[str], str],
    ) -> list[Block]:
        """ITS on ``P_i``'s rows with each row's stream, then the blocks in local ids."""
        ch = self.ch
        start = ch.now()
        sizes = np.array([d.shape[0] for d in dsts], dtype=np.int64)
        seeds = np.repeat(np.array([s.seed for s in streams], dtype=np.uint64), sizes)
        rows = np.concatenate(
            [s.first_row + np.arange(n, dtype=np.int64) for s, n in zip(streams, sizes, strict=True)]
        )
        counts, picked = its_uniform_rows(p[0], p[1], self.fanouts[lay.layer], seeds, rows)
        ch.record(task(prod.sample(self.j)), start, ch.now(), 0, "compute")
        start = ch.now()
        batch_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        parts = extract_blocks(np.concatenate(dsts), batch_ptr, counts, picked, self.num_nodes)
        blocks = [
            Block(src_nodes=src, dst_nodes=dst, edge_src=es, edge_dst=ed)
            for dst, (src, es, ed) in zip(dsts, parts, strict=True)
        ]
        ch.record(task(prod.extract(self.j)), start, ch.now(), 0, "compute")
        return blocks


def run_sampler(config: RunConfig) -> BulkMatrixSampler:
    """The run's sampler; refuses one whose draws a distributed sampler cannot repeat."""
    table = config.strategy("sampling")
    sampler = SAMPLERS.create(table.name, **table.params) if table is not None else None
    if not isinstance(sampler, BulkMatrixSampler) or sampler.algorithm != "graphsage":
        name = table.name if table is not None else "none"
        raise ConfigError(
            f"bulk-pipeline for real samples as the 'bulk-matrix' sampler's GraphSAGE does (SpGEMM and "
            f"inverse transform sampling), so the run's epoch must come from it: [sampling] name is {name!r}"
        )
    return sampler


def sampling_streams(ctx: WorkerContext) -> tuple[BulkMatrixSampler, list[list[tuple[LayerStream, ...]]]]:
    """The run's sampler and, per iteration and worker, the random streams its epoch was drawn with."""
    sampler = run_sampler(ctx.config)
    return sampler, bulk_matrix_streams([sampler] * ctx.world, ctx.inputs.epoch, ctx.config.seed)


@REAL_EXECUTORS.register("bulk-pipeline")
class BulkPipelineExecutor(ModelCentricExecutor):
    """Paper 004's pipeline on this worker: its share of each bulk sampling step, then data parallel
    training on the minibatches it drew, the features fetched across its process column."""

    @classmethod
    def check(cls, config: RunConfig, inputs: SchemeInputs) -> None:
        run_sampler(config)

    def __init__(self, ctx: WorkerContext) -> None:
        if not isinstance(ctx.scheme, BulkPipelineScheme):
            raise TypeError(
                f"the bulk-pipeline executor carries out a BulkPipelineScheme's schedule, not {type(ctx.scheme).__name__}"
            )
        self.scheme: BulkPipelineScheme = ctx.scheme
        sampler, self.streams = sampling_streams(ctx)
        super().__init__(ctx)
        inputs = ctx.inputs
        self.scheme.check(inputs)
        self.steps = [self.scheme.sampling_step(inputs, s) for s in range(len(self.scheme.steps(inputs)))]
        nccl = dist.get_backend() == "nccl"
        self.comm_device = ctx.device if nccl else torch.device("cpu")
        first = self.steps[0].schedule if self.steps else None
        ring = first is not None and first.grid.c > 1 and not first.pairwise
        row_group = self._row_group(first.grid) if first is not None and ring else None
        self.ch = ch = Channel(
            ctx.rank,
            self.comm_device,
            ctx.now,
            self._record,
            ctx.comm,
            lambda q: link_engine(inputs, ctx.rank, q),
            row_group,
        )
        self.sampler = (
            DistributedBulkSampler(ch, inputs.graph, sampler.fanouts or (), self.steps[0].schedule)
            if self.steps
            else None
        )
        feature_grid = self.scheme.feature_grid(inputs)
        i, _ = feature_grid.process(ctx.rank)
        self.h_lo = int(feature_grid.bounds[i])
        features = np.asarray(
            inputs.graph.features()[self.h_lo : int(feature_grid.bounds[i + 1])], dtype=np.float32
        )
        self.h = torch.from_numpy(np.ascontiguousarray(features)).to(
            ctx.device
        )  # this process row's block of H

    def _row_group(self, grid: Any) -> Any:
        """The group of this process's row of the sampling grid: every worker makes every row's group,
        in the same order, as torch.distributed requires."""
        groups = [dist.new_group([grid.worker(i, j) for j in range(grid.c)]) for i in range(grid.rows)]
        return groups[grid.process(self.ctx.rank)[0]]

    def _record(self, task: str, start: float, end: float, nbytes: int, engine: str) -> None:
        ctx = self.ctx
        if nbytes:
            ctx.counter.add("sample", nbytes)
        ctx.row(task, "sample", start, end, nbytes, engine=engine)

    def run_epoch(self, epoch: int) -> EpochTotals:
        def trained() -> Iterator[tuple[float, int, int]]:  # each bulk step sampled, then trained on
            for step in self.steps:
                drawn = self.sample_step(step)
                for it in step.iterations:
                    loss, correct, seeds = self.train(it, drawn[it], begin=it != step.iterations[0])
                    yield loss * seeds, correct, seeds

        return epoch_totals(trained())

    def sample_step(self, step: SamplingStep) -> dict[int, Minibatch]:
        """This worker's part of bulk step ``step``; returns its own minibatches by iteration, checked
        equal to the run's epoch (what the plan was built from)."""
        ctx = self.ctx
        ctx.begin_iteration(step.iterations[0])
        assert self.sampler is not None
        seeds = {b: ctx.inputs.epoch[it][w].seeds for b, (w, it) in enumerate(step.batches)}
        streams = {b: self.streams[it][w] for b, (w, it) in enumerate(step.batches)}
        drawn = self.sampler.sample(step.schedule, seeds, streams, step.task)
        mine = {step.batches[b][1]: mb for b, mb in drawn.items() if step.batches[b][0] == ctx.rank}
        for it, mb in mine.items():
            check_same(mb, ctx.inputs.epoch[it][ctx.rank], f"{step.prefix} iteration {it}")
        return mine

    def train(self, it: int, mb: Minibatch, begin: bool) -> tuple[float, int, int]:
        """Iteration ``it`` on minibatch ``mb``: fetch its features, forward, backward, all-reduce, step."""
        ctx = self.ctx
        if begin:
            ctx.begin_iteration(it)
        fetches = [self.scheme.feature_fetch(ctx.inputs, it, w) for w in range(ctx.world)]
        ctx.status.phase("gather", it)
        x = self.fetch_features(fetches, mb.input_nodes)
        blocks = [ctx.layers.block(b, ctx.device) for b in mb.blocks]
        labels = seed_labels(ctx, mb.blocks[-1].dst_nodes)
        prefix = fetches[ctx.rank].prefix
        layers = range(ctx.inputs.model.num_layers)
        weights = [None] * len(blocks)
        ins, loss, correct = forward_by_layer(ctx, self.model, blocks, weights, x, labels, prefix, it, layers)
        backward_by_layer(ctx, loss, ins, prefix, it)
        self.step(it, self.flat_gradients())
        return float(loss.detach()), correct, int(labels.shape[0])

    def fetch_features(self, fetches: list[FeatureFetch], vertices: np.ndarray) -> torch.Tensor:
        """The all-to-allv across the process column: this worker's rows of its own block gathered on
        its device, the others' ids sent to their owners and the rows back; it serves the rows of its
        block that the others of its column ask for."""
        ctx, rank = self.ctx, self.ctx.rank
        mine = fetches[rank]
        x = torch.empty((vertices.shape[0], self.h.shape[1]), dtype=self.h.dtype, device=ctx.device)
        if mine.local_task is not None:
            start = ctx.now()
            rows = self.h[torch.from_numpy(vertices[mine.local] - self.h_lo).to(ctx.device)]
            x[torch.from_numpy(mine.local).to(ctx.device)] = rows
            ctx.counter.add("gather_local", tensor_bytes(rows))
            ctx.row(mine.local_task, "gather_local", start, ctx.now())
        serves = [(f.worker, src) for f in fetches for src in f.remote if src.owner == rank]
        ids = {src.owner: [torch.from_numpy(vertices[src.positions])] for src in mine.remote}
        ch = self.ch
        asked, sent, start = exchange(ch, ids, {w: [(src.rows, torch.int64)] for w, src in serves})
        for src in mine.remote:
            self._fetch_row(src.request, src.phase, start, sent[src.owner], ids[src.owner][0], src.owner)
        replies = {w: [self.h[asked[w][0].to(ctx.device) - self.h_lo]] for w, _ in serves}
        width = self.h.shape[1]
        got, sent, start = exchange(
            ch, replies, {src.owner: [(src.rows * width, self.h.dtype)] for src in mine.remote}
        )
        for w, src in serves:
            self._fetch_row(src.reply, src.phase, start, sent[w], replies[w][0], w)
        for src in mine.remote:
            x[torch.from_numpy(src.positions).to(ctx.device)] = (
                got[src.owner][0].view(src.rows, width).to(ctx.device)
            )
        return x

    def _fetch_row(
        self, task: str, phase: str, start: float, end: float, sent: torch.Tensor, peer: int
    ) -> None:
        ctx = self.ctx
        nbytes = tensor_bytes(sent)
        ctx.counter.add(phase, nbytes)
        ctx.row(task, phase, start, end, nbytes, engine=link_engine(ctx.inputs, ctx.rank, peer))


def check_same(drawn: Minibatch, planned: Minibatch, where: str) -> None:
    """The distributed sampler's minibatch is the epoch's, array for array (else the plan's bytes are
    not what the run moves)."""
    if len(drawn.blocks) != len(planned.blocks):
        raise RuntimeError(f"{where}: drew {len(drawn.blocks)} blocks, the epoch has {len(planned.blocks)}")
    for layer, (a, b) in enumerate(zip(drawn.blocks, planned.blocks, strict=True)):
        for name in ("src_nodes", "dst_nodes", "edge_src", "edge_dst"):
            if not np.array_equal(getattr(a, name), getattr(b, name)):
                raise RuntimeError(
                    f"{where}: the distributed sampler drew another block {layer} ({name}) than the epoch's"
                )
