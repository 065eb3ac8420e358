"""Distributed bulk sampling as iteration plans (paper 004, section 5), with exact communication.

Paper: ``papers/004_48b849e12cfdd076.txt`` (Tripathy, Yelick, Buluc, MLSys 2024), sections 5.1-5.2.3.

:func:`bulk_sampling_plan` samples ``k`` minibatches with a :class:`BulkMatrixSampler`
(GraphSAGE or LADIES) and returns, beside the minibatches, the plan that ``P`` devices
would run to produce them, so the simulator can time the paper's two algorithms. Byte
counts come from the sparsity of the actual sampled frontiers, not from averages.
:func:`sampled_bulk_plan` builds the same plan for GraphSAGE minibatches sampled
already (the ``bulk-pipeline`` execution scheme plans a run's cached epoch with it).
GraphSAGE's plans are built from the decisions of
:mod:`~workbench.strategies.sampling.bulk_matrix_schedule` (:func:`sampled_bulk_schedule`:
which rows each process fetches from which owner in which step, how each process row sums its
partial products, every message's bytes and task id), the records a real run carries out too;
LADIES' plans make the same records layer by layer with the same helpers.

Data layout (section 5 and 6.1): the stacked sampler matrix ``Q`` of the ``k`` batches
is split into block rows along batch boundaries (batch ``b`` belongs to block row
``floor(b * rows / k)``); every layer's ``Q`` of a batch stays with the batch.

``mode="replicated"`` (section 5.1, graph-replicated)
    ``A`` is replicated on all ``P`` devices (a resident tensor on each), ``Q`` is in
    ``P`` block rows (1D), and every device computes ``Q_i A``, samples and extracts
    its own batches: no communication at all (LADIES' extraction too, as ``A`` is local).

``mode="partitioned-1.5d"`` (section 5.2, graph-partitioned, Algorithm 2)
    ``P`` devices form a ``P/c x c`` grid (``replication = c``; device ``i * c + j`` is
    process ``(i, j)``). ``Q`` and ``A`` are both split into ``P/c`` block rows (``A``
    by contiguous, equal vertex ranges) and process row ``i`` holds ``Q_i`` and ``A_i``
    on each of its ``c`` processes. Per layer, process ``(i, j)`` computes the partial
    product ``sum_{t = j, j + c, j + 2c, ...} Q_{i,t} A_t`` (``P/c^2`` steps). It is
    sparsity-aware (Ballard et al.): instead of broadcasting ``A_t``, process ``(i, j)``

    * sends to process ``(t, j)`` the distinct column ids of ``Q_{i,t}`` (the rows of
      ``A_t`` it needs): ``rows_needed * index_bytes``;
    * receives those rows of ``A_t``: for each, its nonzeros as (index, value) pairs
      plus one row length: ``sum_rows (nnz(row) * (index_bytes + value_bytes) + index_bytes)``;

    blocks ``t == i`` are local and move nothing. The ``c`` partial products of process
    row ``i`` are then summed by an all-reduce among its ``c`` processes; each buffer is
    the CSR of ``P_i``: ``nnz(P_i) * (index_bytes + value_bytes) + (rows(P_i) + 1) * index_bytes``
    (no all-reduce when ``c = 1``).

    Two options say how those messages are scheduled; their defaults keep every
    transfer independent, and the other values are the paper's code (CAGNET, branch
    ``distributed-sampling``, ``dist_saspgemm15D`` and ``csr_allreduce``):

    ``schedule="overlapped"`` (default)
        every process sends all its requests as soon as its previous layer is done, so
        all the fetches of a layer overlap.
    ``schedule="stepped"`` (GraphSAGE only)
        the paper's outer loop (section 5.2.1: "our algorithm has P/c^2 steps"): in
        process column ``j``, step ``s`` has one owner, process ``(t, j)`` for the
        column's ``s``-th block ``t`` (``t = j, j + c, ...``); every process of the
        column that needs rows of ``A_t`` sends it their ids, then the owner sends each
        its rows. A step starts when the column's previous step has ended (CAGNET's
        gather to the owner is a collective over the column), so the ``P/c^2`` steps are
        dependent and the owner's outgoing link carries one step at a time.
    ``row_allreduce="ring"`` (default)
        the ``c`` partial products are summed by a ring all-reduce of the whole CSR of
        ``P_i`` (a ``collective`` task).
    ``row_allreduce="pairwise"`` (``c`` a power of two)
        ``log2(c)`` rounds of pairwise exchange (recursive halving of the process row's
        ranks: in round ``r`` process ``j`` swaps with ``j +- c / 2^(r+1)``); each sends
        the CSR of the sum it holds so far: the row pointers of all ``rows(P_i)`` rows
        and the nonzeros of the partial products summed so far, which for GraphSAGE are
        disjoint (a row of ``Q`` has one nonzero, in one process's blocks). Over the
        rounds a process sends ``(c - 1) / c`` of ``nnz(P_i)`` and ``log2(c)`` row
        pointers, against the ring's ``2 (c - 1) / c`` of the whole buffer. The sums
        themselves are not priced (neither are the ring's).

    Sampling is row-wise and needs no communication:
    every process of row ``i`` samples ``P_i`` with the same random stream (so the
    next layer's ``Q_i`` is on all ``c`` of them without a gather). GraphSAGE's
    extraction is local. LADIES' row extraction ``Q_R A_hat`` runs Algorithm 2 again
    (the same rows of ``A_hat`` are exchanged again, and the all-reduce sums the
    row-extracted matrix); its column extraction is split across the ``c`` processes
    of the row by batch and followed by an all-reduce of the row's sampled adjacency
    matrices (section 5.2.3).

The right operand is ``A`` with unit values for GraphSAGE and ``A_hat o A_hat`` (or
``A_hat`` for extraction; same sparsity: ``A`` plus self loops) for LADIES.

Compute tasks carry cost features for the simulator's linear model: ``flops`` (2 per
multiply-add of the SpGEMM), ``bytes`` (sparse entries read and written), ``edges``
(sampled edges) and ``vertices`` (rows), plus descriptive ``rows``, ``nnz`` and
``nnz_q`` counts. Every task's phase is ``sample``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph, RowLengths
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan
from workbench.strategies.sampling.base import Minibatch, check_seeds
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler, batch_indicator_matrix
from workbench.strategies.sampling.bulk_matrix_schedule import (
    BulkSamplingSchedule,
    LayerSchedule,
    PairRound,
    ProcessGrid,
    RowFetch,
    RowProduct,
    Sizes,
    batch_rows,
    csr_bytes,
    graphsage_schedule,
    layer_prefix,
    pairwise_rounds,
    process_task,
    product_fetches,
    ring_sum,
    ring_task,
    spgemm_task,
    vertex_blocks,
)
from workbench.strategies.sampling.ladies import normalized_adjacency

__all__ = [
    "MODES",
    "ROW_ALLREDUCES",
    "SCHEDULES",
    "BulkSamplingPlan",
    "batch_rows",
    "bulk_sampling_plan",
    "csr_bytes",
    "sampled_bulk_plan",
    "sampled_bulk_schedule",
    "schedule_plan",
    "vertex_blocks",
]

MODES = ("replicated", "partitioned-1.5d")
# How the 1.5D product's row fetches are ordered: all at once, or in the paper's P/c^2 dependent steps.
SCHEDULES = ("overlapped", "stepped")
# How a process row sums its c partial products: a dense ring, or CAGNET's log2(c) pairwise rounds.
ROW_ALLREDUCES = ("ring", "pairwise")


@dataclass
class BulkSamplingPlan:
    """The plan, the minibatches it produces, and its communication totals by kind (bytes).

    ``allreduce`` counts, for the ring, each process row's buffer once; for the pairwise
    rounds, every byte sent (the ring's bytes sent follow from its buffer and ``c``)."""

    plan: Plan
    minibatches: list[Minibatch]
    bytes_by_kind: dict[str, int] = field(default_factory=dict)
    # GraphSAGE's decisions, which the plan was built from (None for LADIES).
    schedule: BulkSamplingSchedule | None = None


def bulk_sampling_plan(
    graph: CSRGraph,
    batches: Sequence[np.ndarray],
    cluster: ClusterSpec,
    *,
    sampler: BulkMatrixSampler,
    rng: np.random.Generator,
    mode: str = "replicated",
    replication: int = 1,
    devices: Sequence[str] | None = None,
    index_bytes: int = 8,
    value_bytes: int = 4,
    schedule: str = "overlapped",
    row_allreduce: str = "ring",
) -> BulkSamplingPlan:
    """Sample ``batches`` in bulk and build the plan of ``mode`` on ``devices`` (default: every GPU of ``cluster``)."""
    who = "bulk_sampling_plan"
    if not isinstance(sampler, BulkMatrixSampler):
        raise ConfigError(f"{who}: sampler must be a bulk-matrix sampler, got {type(sampler).__name__}")
    devs = _check_layout(who, cluster, devices, mode, replication, index_bytes, value_bytes)
    _check_schedule(who, mode, replication, schedule, row_allreduce)
    if schedule == "stepped" and sampler.algorithm != "graphsage":
        raise ConfigError(
            f"{who}: schedule='stepped' is planned for GraphSAGE only (LADIES' row extraction runs "
            "Algorithm 2 inside each process row); use schedule='overlapped'"
        )
    checked = [check_seeds(graph, b) for b in batches]
    if not checked:
        raise ConfigError(f"{who}: no batches to sample")
    minibatches = sampler.sample_many(graph, checked, rng)
    decided = None
    if sampler.algorithm == "graphsage":
        decided = _graphsage_schedule(
            graph, minibatches, devs, mode, replication, index_bytes, value_bytes, schedule, row_allreduce
        )
    builder = _PlanBuilder(
        graph,
        minibatches,
        sampler.algorithm,
        sampler.layer_sizes,
        devs,
        mode,
        replication,
        index_bytes,
        value_bytes,
        schedule,
        row_allreduce,
        decided,
    )
    builder.build()
    return BulkSamplingPlan(builder.plan, minibatches, builder.bytes_by_kind, decided)


def sampled_bulk_plan(
    graph: CSRGraph,
    minibatches: Sequence[Minibatch],
    cluster: ClusterSpec,
    *,
    mode: str = "replicated",
    replication: int = 1,
    devices: Sequence[str] | None = None,
    index_bytes: int = 8,
    value_bytes: int = 4,
    schedule: str = "overlapped",
    row_allreduce: str = "ring",
) -> BulkSamplingPlan:
    """The plan of GraphSAGE bulk sampling that produces ``minibatches``, sampled already (a cached epoch).

    Node-wise minibatches only (GraphSAGE's matrices are fixed by the blocks; LADIES' plan
    also needs its layer sizes, so it goes through :func:`bulk_sampling_plan`). The plan is
    built from :func:`sampled_bulk_schedule`'s decisions, returned beside it.
    """
    decided = sampled_bulk_schedule(
        graph, minibatches, cluster, mode=mode, replication=replication, devices=devices,
        index_bytes=index_bytes, value_bytes=value_bytes, schedule=schedule, row_allreduce=row_allreduce,
    )  # fmt: skip
    return schedule_plan(graph, minibatches, decided)


def schedule_plan(
    graph: CSRGraph, minibatches: Sequence[Minibatch], decided: BulkSamplingSchedule
) -> BulkSamplingPlan:
    """The plan of carrying out ``decided``, the schedule of sampling ``minibatches`` (GraphSAGE)."""
    mbs = list(minibatches)
    grid, sizes = decided.grid, decided.sizes
    builder = _PlanBuilder(
        graph, mbs, "graphsage", None, list(grid.devices), grid.mode, grid.c, sizes.index, sizes.value,
        decided.schedule, decided.row_allreduce, decided,
    )  # fmt: skip
    builder.build()
    return BulkSamplingPlan(builder.plan, mbs, builder.bytes_by_kind, decided)


def sampled_bulk_schedule(
    graph: CSRGraph,
    minibatches: Sequence[Minibatch],
    cluster: ClusterSpec,
    *,
    mode: str = "replicated",
    replication: int = 1,
    devices: Sequence[str] | None = None,
    index_bytes: int = 8,
    value_bytes: int = 4,
    schedule: str = "overlapped",
    row_allreduce: str = "ring",
) -> BulkSamplingSchedule:
    """The decisions of GraphSAGE bulk sampling that produces ``minibatches`` (sampled already): who
    fetches which rows from whom in which step, how each process row sums, every message's bytes
    and task id. :func:`sampled_bulk_plan` plans them; a real run carries them out."""
    who = "sampled_bulk_plan"
    devs = _check_layout(who, cluster, devices, mode, replication, index_bytes, value_bytes)
    _check_schedule(who, mode, replication, schedule, row_allreduce)
    mbs = list(minibatches)
    if not mbs:
        raise ConfigError(f"{who}: no minibatches")
    if any(b.edge_weight is not None for mb in mbs for b in mb.blocks):
        raise ConfigError(
            f"{who}: the minibatches have weighted blocks (a layer-wise sampler such as LADIES); "
            "this plans node-wise (GraphSAGE) minibatches: sample LADIES through bulk_sampling_plan"
        )
    return _graphsage_schedule(
        graph, mbs, devs, mode, replication, index_bytes, value_bytes, schedule, row_allreduce
    )


def _graphsage_schedule(
    graph: CSRGraph, minibatches: Sequence[Minibatch], devices: list[str], mode: str, replication: int,
    index_bytes: int, value_bytes: int, schedule: str, row_allreduce: str,
) -> BulkSamplingSchedule:  # fmt: skip
    grid = ProcessGrid.of(mode, replication, devices, graph.num_nodes)
    return graphsage_schedule(
        graph,
        minibatches,
        grid,
        Sizes(index_bytes, value_bytes),
        schedule=schedule,
        row_allreduce=row_allreduce,
    )


def _check_layout(
    who: str,
    cluster: ClusterSpec,
    devices: Sequence[str] | None,
    mode: str,
    replication: int,
    index_bytes: int,
    value_bytes: int,
) -> list[str]:
    """The devices, after checking the mode, the grid and the entry sizes."""
    if mode not in MODES:
        raise ConfigError(f"{who}: unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    devs = list(devices) if devices is not None else cluster.gpu_nodes()
    if not devs:
        raise ConfigError(f"{who}: no devices (cluster {cluster.name!r} has no GPUs)")
    known = set(cluster.memory_nodes())
    unknown = [d for d in devs if d not in known]
    if unknown:
        raise ConfigError(f"{who}: cluster {cluster.name!r} has no device {unknown[0]!r}")
    if isinstance(replication, bool) or not isinstance(replication, int) or replication < 1:
        raise ConfigError(f"{who}: replication must be a positive integer, got {replication!r}")
    if mode == "partitioned-1.5d" and len(devs) % replication:
        raise ConfigError(
            f"{who}: replication c={replication} must divide the number of devices P={len(devs)} (a P/c x c grid)"
        )
    if mode == "replicated" and replication != 1:
        raise ConfigError(
            f"{who}: replication is a parameter of mode='partitioned-1.5d'; replicated mode copies A everywhere"
        )
    if index_bytes < 1 or value_bytes < 1:
        raise ConfigError(f"{who}: index_bytes and value_bytes must be >= 1")
    return devs


def _check_schedule(who: str, mode: str, replication: int, schedule: str, row_allreduce: str) -> None:
    """The schedule and the row all-reduce are known; pairwise rounds need c a power of two."""
    if schedule not in SCHEDULES:
        raise ConfigError(f"{who}: unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
    if row_allreduce not in ROW_ALLREDUCES:
        raise ConfigError(
            f"{who}: unknown row_allreduce {row_allreduce!r}; allowed: {', '.join(ROW_ALLREDUCES)}"
        )
    if mode == "partitioned-1.5d" and row_allreduce == "pairwise" and replication & (replication - 1):
        raise ConfigError(
            f"{who}: row_allreduce='pairwise' halves the process row each round and needs c a power "
            f"of two, got c={replication}"
        )


class _PlanBuilder:
    """Turns the decisions into tasks with costs and dependencies: GraphSAGE's from ``decided``
    (:func:`.bulk_matrix_schedule.graphsage_schedule`, the records a real run carries out too),
    LADIES' from the same records, made layer by layer by the schedule module's helpers."""

    def __init__(
        self,
        graph: CSRGraph,
        minibatches: list[Minibatch],
        algorithm: str,
        layer_sizes: Sequence[int] | None,
        devices: list[str],
        mode: str,
        replication: int,
        index_bytes: int,
        value_bytes: int,
        schedule: str = "overlapped",
        row_allreduce: str = "ring",
        decided: BulkSamplingSchedule | None = None,
    ) -> None:
        self.graph = graph
        self.mbs = minibatches
        self.ladies = algorithm == "ladies"
        self.layer_sizes = layer_sizes
        self.devices = devices
        self.mode = mode
        self.decided = decided
        self.grid = (
            decided.grid
            if decided is not None
            else ProcessGrid.of(mode, replication, devices, graph.num_nodes)
        )
        self.sizes = Sizes(index_bytes, value_bytes)
        self.c = self.grid.c
        self.rows = self.grid.rows
        self.ib = index_bytes
        self.vb = value_bytes
        partitioned = mode == "partitioned-1.5d"
        self.pairwise = partitioned and row_allreduce == "pairwise"
        self.bytes_by_kind: dict[str, int] = {"request": 0, "rows": 0, "allreduce": 0}
        self.plan = Plan(
            name=f"bulk-{algorithm}-{mode}",
            meta={
                "algorithm": algorithm,
                "mode": mode,
                "replication": self.c,
                "process_rows": self.rows,
                "devices": list(devices),
                "batches": len(minibatches),
                "index_bytes": index_bytes,
                "value_bytes": value_bytes,
                "schedule": schedule,
                "row_allreduce": row_allreduce,
                "source": "paper 004, section 5",
            },
        )
        self._right: sp.csr_matrix | None = None
        if self.ladies:
            self._right = normalized_adjacency(graph)
            self.row_nnz = RowLengths(self._right.indptr)
        else:
            self.row_nnz = RowLengths(graph.indptr)
        self.batch_row = batch_rows(len(minibatches), self.rows)
        self.bounds = self.grid.bounds

    def device(self, i: int, j: int) -> str:
        return self.grid.device(i, j)

    @property
    def right(self) -> sp.csr_matrix:
        """The right operand of ``P = Q A``: LADIES' normalized adjacency, else ``A`` with values 1.

        Built on first use: GraphSAGE's product rows are ``A``'s rows, so its plan only counts
        them (``row_nnz``) and never needs ``A`` as a matrix (papers-like at full size: 6.4 GB
        of values, and its int32 column ids copied to int64).
        """
        if self._right is None:
            graph = self.graph
            self._right = sp.csr_matrix(
                (np.ones(graph.num_edges, dtype=np.float32), graph.indices, graph.indptr),
                shape=(graph.num_nodes,) * 2,
            )
        return self._right

    # ---- building ---------------------------------------------------------------------
    def build(self) -> None:
        a_bytes = csr_bytes(self.graph.num_nodes, int(self.row_nnz.sum()), self.ib, self.vb)
        if self.mode == "replicated":
            for d in self.devices:
                self.plan.keep("A (replicated)", d, a_bytes)
        else:
            for i in range(self.rows):
                lo, hi = self.bounds[i], self.bounds[i + 1]
                block = csr_bytes(int(hi - lo), int(self.row_nnz[lo:hi].sum()), self.ib, self.vb)
                for j in range(self.c):
                    self.plan.keep(f"A_{i}", self.device(i, j), block)
        num_layers = len(self.mbs[0].blocks)
        previous: dict[tuple[int, int], str] = {}
        # Layers from the seeds outwards, as sampling runs (blocks[-1] first).
        for step, layer in enumerate(range(num_layers - 1, -1, -1)):
            previous = self.layer(step, layer, previous)

    def layer(
        self, step: int, layer: int, previous: dict[tuple[int, int], str]
    ) -> dict[tuple[int, int], str]:
        done: dict[tuple[int, int], str] = {}
        mine_of = {i: [b for b in range(len(self.mbs)) if self.batch_row[b] == i] for i in range(self.rows)}
        mine_of = {i: mine for i, mine in mine_of.items() if mine}
        dsts_of = {i: [self.mbs[b].blocks[layer].dst_nodes for b in mine] for i, mine in mine_of.items()}
        # The paper's steps span process rows (one owner serves its whole column), so they are
        # laid out for every row first; the overlapped fetches are added row by row below.
        lay = self.decided.layers[step] if self.decided is not None else None
        fetched = self.emit_stages(lay, previous) if lay is not None and lay.stages else None
        for i, mine in mine_of.items():
            dsts = dsts_of[i]
            blocks = [self.mbs[b].blocks[layer] for b in mine]
            # Q_i: GraphSAGE one row per destination vertex, LADIES one row per batch.
            q_rows = len(mine) if self.ladies else int(sum(d.shape[0] for d in dsts))
            q_nnz = int(sum(d.shape[0] for d in dsts))
            p_nnz = self.probability_nnz(dsts)
            if self.ladies:
                assert self.layer_sizes is not None
                sampled = self.layer_sizes[layer] * len(mine)
            else:
                sampled = int(sum(b.num_edges for b in blocks))
            prefix = layer_prefix(step, i)
            after_product = self.distributed_product(
                prefix, "P", i, dsts, q_rows, p_nnz, previous, one_entry_rows=not self.ladies, fetched=fetched,
                product=lay.product(i) if lay is not None else None,
            )  # fmt: skip
            sample_ids = {}
            for j in self.processes(i):
                dev = self.device(i, j)
                tid = process_task(prefix, j, "sample")
                self.plan.compute(
                    tid,
                    dev,
                    "sample",
                    deps=after_product[j],
                    label="ITS: prefix sums, binary search, distinct draws",
                    features={
                        "vertices": float(q_rows),
                        "rows": float(q_rows),
                        "nnz": float(p_nnz),
                        "edges": float(sampled),
                        "bytes": float(p_nnz * self.vb + sampled * self.ib),
                    },
                    memory=csr_bytes(q_rows, p_nnz, self.ib, self.vb),
                )
                sample_ids[j] = tid
            if self.ladies:
                done.update(self.ladies_extraction(prefix, i, mine, dsts, blocks, q_nnz, sample_ids))
            else:
                done.update(self.graphsage_extraction(prefix, i, blocks, sample_ids))
        return done

    def graphsage_extraction(
        self, prefix: str, i: int, blocks: list, sample_ids: dict[int, str]
    ) -> dict[tuple[int, int], str]:
        done: dict[tuple[int, int], str] = {}
        edges = int(sum(b.num_edges for b in blocks))
        vertices = int(sum(b.num_src for b in blocks))
        for j in self.processes(i):
            tid = process_task(prefix, j, "extract")
            self.plan.compute(
                tid,
                self.device(i, j),
                "sample",
                deps=[sample_ids[j]],
                label="extraction: drop empty columns (local ids)",
                features={
                    "edges": float(edges),
                    "vertices": float(vertices),
                    "bytes": float(2 * edges * self.ib),
                },
            )
            done[(i, j)] = tid
        return done

    def processes(self, i: int) -> range:
        return range(self.c)

    def column_blocks(self, i: int, j: int) -> list[int]:
        return self.grid.column_blocks(i, j)

    def emit_fetch(self, f: RowFetch, deps: list[str]) -> str:
        """Process ``(f.i, f.j)`` asks ``(f.t, f.j)`` for its rows of ``A_t`` and gets them; returns the reply's id."""
        dev, owner = self.device(f.i, f.j), self.device(f.t, f.j)
        self.plan.transfer(
            f.request, dev, owner, f.request_bytes, "sample", deps=deps, carries="indices",
            label=f"column ids of Q_{f.i},{f.t} (rows of A_{f.t} needed)", items=f.rows,
        )  # fmt: skip
        self.plan.transfer(
            f.reply, owner, dev, f.reply_bytes, "sample", deps=[f.request], carries="adjacency",
            label=f"rows of A_{f.t}", items=f.rows,
        )  # fmt: skip
        self.bytes_by_kind["request"] += f.request_bytes
        self.bytes_by_kind["rows"] += f.reply_bytes
        return f.reply

    def emit_stages(
        self, lay: LayerSchedule, previous: dict[tuple[int, int], str]
    ) -> dict[tuple[int, int], list[str]]:
        """The paper's P/c^2 dependent steps per process column; per process, the rows it fetched."""
        rows = [p.i for p in lay.products]
        fetched: dict[tuple[int, int], list[str]] = {(i, j): [] for i in rows for j in range(self.c)}
        for j, column in enumerate(lay.stages):
            # The column's first step waits for all its processes (a collective over the column).
            barrier = [previous[(i, j)] for i in rows if (i, j) in previous]
            for stage in column:
                done = [self.emit_fetch(f, barrier) for f in stage]
                for f in stage:
                    fetched[(f.i, j)].append(f.reply)
                barrier = done or barrier
        return fetched

    def probability_nnz(self, dsts: list[np.ndarray]) -> int:
        """nnz of ``P_i = Q_i A``: GraphSAGE's rows are A's rows; LADIES' rows the batches' neighborhoods."""
        if not self.ladies:
            return int(sum(int(self.row_nnz[d].sum()) for d in dsts))
        return int((batch_indicator_matrix(dsts, self.graph.num_nodes) @ self.right).nnz)

    def distributed_product(
        self,
        prefix: str,
        what: str,
        i: int,
        dsts: list[np.ndarray],
        q_rows: int,
        out_nnz: int,
        previous: dict[tuple[int, int], str],
        *,
        one_entry_rows: bool,
        fetched: dict[tuple[int, int], list[str]] | None = None,
        product: RowProduct | None = None,
    ) -> dict[int, list[str]]:
        """Tasks of ``Q_i @ right`` on process row ``i``; per process, the ids the next step waits for.

        ``one_entry_rows``: ``Q`` selects rows (GraphSAGE's ``Q``, LADIES' ``Q_R``), so a
        partial product has one entry per multiply-add; otherwise (LADIES' ``Q``, whose
        rows sum several rows of the right operand) its nnz comes from the product itself.
        ``fetched``: the row fetches laid out already (the stepped schedule), else they are
        added here, each as soon as the process's previous layer is done. ``product``: the
        schedule's record of this product (GraphSAGE), else the records are made here.
        """
        all_q = np.concatenate(dsts) if dsts else np.empty(0, dtype=np.int64)
        block_of_q = self.grid.block_of(all_q)
        if product is not None:
            fetches = dict(enumerate(product.fetches))
        elif fetched is None:
            fetches = product_fetches(self.grid, self.row_nnz, self.sizes, prefix, what, i, dsts)
        partial_ids: dict[int, str] = {}
        partial_entries: dict[int, int] = {}
        for j in self.processes(i):
            deps_prev = [previous[(i, j)]] if (i, j) in previous else []
            if fetched is not None:
                rows_in = fetched[(i, j)]
            else:
                rows_in = [self.emit_fetch(f, deps_prev) for f in fetches[j]]
            pid = spgemm_task(prefix, what, j)
            partial_entries[j] = self.partial_product(
                pid, what, i, j, dsts, all_q, block_of_q, q_rows, out_nnz,
                deps_prev + rows_in, one_entry_rows=one_entry_rows,
            )  # fmt: skip
            partial_ids[j] = pid
        if self.c == 1:
            return {j: [partial_ids[j]] for j in partial_ids}
        return self.sum_partials(
            prefix, what, i, dsts, partial_ids, partial_entries, q_rows, out_nnz, one_entry_rows, product
        )

    def partial_product(
        self,
        pid: str,
        what: str,
        i: int,
        j: int,
        dsts: list[np.ndarray],
        all_q: np.ndarray,
        block_of_q: np.ndarray,
        q_rows: int,
        out_nnz: int,
        deps: list[str],
        *,
        one_entry_rows: bool,
    ) -> int:
        """The SpGEMM task ``pid`` of process ``(i, j)`` over its column blocks of ``Q_i``
        (``all_q``, the rows of ``Q_i``, lie in blocks ``block_of_q``); returns its multiply-adds."""
        mine_t = self.column_blocks(i, j)
        in_mine = (
            np.isin(block_of_q, mine_t) if self.mode == "partitioned-1.5d" else np.ones(all_q.shape[0], bool)
        )
        q_part = int(np.count_nonzero(in_mine))
        mult_adds = int(self.row_nnz[all_q[in_mine]].sum())
        if one_entry_rows:
            partial_nnz = mult_adds
        elif self.mode == "replicated":
            partial_nnz = out_nnz
        else:
            partial_nnz = self.partial_nnz(dsts, mine_t)
        self.plan.compute(
            pid, self.device(i, j), "sample", deps=deps, label=f"SpGEMM {what}_{i} partial",
            features={
                "flops": float(2 * mult_adds), "rows": float(q_rows), "nnz_q": float(q_part),
                "nnz": float(partial_nnz), "vertices": float(q_rows),
                "bytes": float((q_part + mult_adds + partial_nnz) * (self.ib + self.vb)),
            },
            memory=csr_bytes(q_rows, partial_nnz, self.ib, self.vb),
        )  # fmt: skip
        return mult_adds

    def sum_partials(
        self,
        prefix: str,
        what: str,
        i: int,
        dsts: list[np.ndarray],
        partial_ids: dict[int, str],
        partial_entries: dict[int, int],
        q_rows: int,
        out_nnz: int,
        one_entry_rows: bool,
        product: RowProduct | None = None,
    ) -> dict[int, list[str]]:
        """Sum process row ``i``'s ``c`` partial products (``c > 1``): CAGNET's pairwise exchange,
        or one all-reduce; per process, the ids the next step waits for."""
        if product is not None and product.rounds:
            return self.emit_rounds(product.rounds, partial_ids, what)
        if product is None and self.pairwise:

            def held_nnz(held: frozenset[int]) -> int:
                """nnz of the sum of the partial products of the processes in ``held``."""
                if one_entry_rows:  # a row of Q has one nonzero, in one process's blocks: rows disjoint
                    return sum(partial_entries[j] for j in held)
                return self.partial_nnz(dsts, [t for j in held for t in self.column_blocks(i, j)])

            rounds = pairwise_rounds(self.grid, self.sizes, prefix, what, i, q_rows, held_nnz)
            return self.emit_rounds(rounds, partial_ids, what)
        ring = product.ring if product is not None else None
        if ring is None:
            ring = ring_sum(self.grid, self.sizes, prefix, what, i, q_rows, out_nnz)
        self.plan.collective(
            ring.task, "allreduce", [self.device(i, j) for j in self.processes(i)], ring.nbytes, "sample",
            deps=list(partial_ids.values()), carries="probabilities" if what == "P" else "adjacency",
            label=f"sum of the {self.c} partial {what}_{i}",
        )  # fmt: skip
        self.bytes_by_kind["allreduce"] += ring.nbytes
        return {j: [ring.task] for j in partial_ids}

    def emit_rounds(
        self, rounds: Sequence[Sequence[PairRound]], partial_ids: dict[int, str], what: str
    ) -> dict[int, list[str]]:
        """CAGNET's sparse all-reduce of a process row: log2(c) rounds of pairwise CSR exchange."""
        last = {j: [partial_ids[j]] for j in partial_ids}
        for sends in rounds:
            sent = {}
            for s in sends:
                self.plan.transfer(
                    s.task, self.device(s.i, s.j), self.device(s.i, s.partner), s.nbytes, "sample", deps=last[s.j],
                    carries="probabilities" if what == "P" else "adjacency",
                    label=f"round {s.r}: the sum of {len(s.held)} partial {what}_{s.i}",
                )  # fmt: skip
                self.bytes_by_kind["allreduce"] += s.nbytes
                sent[s.j] = s.task
            last = {s.j: [sent[s.j], sent[s.partner]] for s in sends}
        return last

    def partial_nnz(self, dsts: list[np.ndarray], blocks: list[int]) -> int:
        q = batch_indicator_matrix(dsts, self.graph.num_nodes).tocsc()
        keep = np.zeros(self.graph.num_nodes, dtype=bool)
        for t in blocks:
            keep[self.bounds[t] : self.bounds[t + 1]] = True
        q = sp.csr_matrix(q.multiply(keep[None, :]))
        return int((q @ self.right).nnz)

    def ladies_extraction(
        self,
        prefix: str,
        i: int,
        mine: list[int],
        dsts: list[np.ndarray],
        blocks: list,
        q_nnz: int,
        sample_ids: dict[int, str],
    ) -> dict[tuple[int, int], str]:
        """Row extraction (Algorithm 2 on ``Q_R A_hat``), column extraction split by batch, all-reduce."""
        rows_r = q_nnz  # Q_R: one row per destination vertex of every batch
        r_nnz = int(sum(int(self.row_nnz[d].sum()) for d in dsts))
        previous = {(i, j): sample_ids[j] for j in self.processes(i)}
        after_rows = self.distributed_product(
            prefix, "R", i, dsts, rows_r, r_nnz, previous, one_entry_rows=True
        )
        done: dict[tuple[int, int], str] = {}
        col_ids = {}
        for j in self.processes(i):
            share = [k for k in range(len(mine)) if k % self.c == j]
            edges = int(sum(blocks[k].num_edges for k in share))
            verts = int(sum(blocks[k].num_src for k in share))
            tid = process_task(prefix, j, "column-extract")
            self.plan.compute(
                tid, self.device(i, j), "sample", deps=after_rows[j],
                label="column extraction: R_b Q_C,b per batch, reweight",
                features={"edges": float(edges), "vertices": float(verts), "bytes": float(edges * (2 * self.ib + self.vb))},
            )  # fmt: skip
            col_ids[j] = tid
        if self.c == 1:
            return {(i, j): col_ids[j] for j in col_ids}
        nbytes = int(sum(csr_bytes(b.num_dst, b.num_edges, self.ib, self.vb) for b in blocks))
        aid = ring_task(prefix, "A_S")
        self.plan.collective(
            aid, "allreduce", [self.device(i, j) for j in self.processes(i)], nbytes, "sample",
            deps=list(col_ids.values()), carries="adjacency", label=f"sampled adjacency matrices of row {i}",
        )  # fmt: skip
        self.bytes_by_kind["allreduce"] += nbytes
        for j in self.processes(i):
            done[(i, j)] = aid
        return done
