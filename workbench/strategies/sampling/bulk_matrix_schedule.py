"""The decisions of distributed bulk sampling (paper 004, section 5), made once for the plan and the real run.

Paper: ``papers/004_48b849e12cfdd076.txt`` (Tripathy, Yelick, Buluc, MLSys 2024), sections 5.1-5.2.

:class:`ProcessGrid` says who holds what: ``P`` devices as a ``P/c x c`` grid, ``A`` and ``Q``
in ``P/c`` block rows of contiguous, equal vertex ranges (replicated mode: ``c = 1`` and ``A``
everywhere). The records below say, per layer and process, which rows of ``A`` a process asks
which owner for (:class:`RowFetch`), in which of the paper's steps, how the ``c`` partial
products of a process row are summed (:class:`RingSum` or CAGNET's :class:`PairRound`), every
message's bytes and every task's id. :func:`graphsage_schedule` makes them for minibatches
sampled already; the plan builder (:mod:`.bulk_matrix_plan`) turns them into tasks and costs,
and the real executor (``realrun/schemes/bulk_pipeline.py``) carries them out with
``torch.distributed``. Neither decides again what a record says; LADIES' plan (simulated only)
makes its records with the same helpers.

Message layouts, as the bytes count them (``index_bytes`` per id or row length, ``value_bytes``
per value): a request is the requested row ids; a reply is the rows' lengths, then their
nonzeros as (index, value) pairs; a row sum's buffer is the CSR of the rows it holds (a row
pointer per row of ``P_i`` plus one, then the nonzeros as (index, value) pairs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.graph.csr import CSRGraph, RowLengths
from workbench.grouping import positions_by_key
from workbench.strategies.sampling.base import Minibatch


def vertex_blocks(num_nodes: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` contiguous, equal vertex ranges (block ``t`` is ``[b[t], b[t+1])``)."""
    return (np.arange(parts + 1, dtype=np.int64) * num_nodes) // parts


def batch_rows(num_batches: int, parts: int) -> np.ndarray:
    """Block row of each batch: contiguous, as equal as possible."""
    return (np.arange(num_batches, dtype=np.int64) * parts) // max(num_batches, 1)


def csr_bytes(rows: int, nnz: int, index_bytes: int, value_bytes: int) -> int:
    return nnz * (index_bytes + value_bytes) + (rows + 1) * index_bytes


# ---- task ids: one namer for the plan and the real run -------------------------------------------
def layer_prefix(step: int, i: int) -> str:
    """Process row ``i``'s tasks in the ``step``-th layer sampled (seeds outwards)."""
    return f"l{step}.r{i}"


def fetch_tasks(prefix: str, what: str, j: int, t: int) -> tuple[str, str]:
    """The request and the reply of process ``(i, j)``'s fetch of rows of ``A_t`` for product ``what``."""
    return f"{prefix}.{what}.p{j}.t{t}.request", f"{prefix}.{what}.p{j}.t{t}.rows"


def spgemm_task(prefix: str, what: str, j: int) -> str:
    return f"{prefix}.{what}.p{j}.spgemm"


def ring_task(prefix: str, what: str) -> str:
    return f"{prefix}.{what}.allreduce"


def round_task(prefix: str, what: str, r: int, j: int) -> str:
    return f"{prefix}.{what}.allreduce.r{r}.p{j}"


def process_task(prefix: str, j: int, step: str) -> str:
    """A process's own step of the layer: ``sample``, ``extract``, ``column-extract``."""
    return f"{prefix}.p{j}.{step}"


# ---- the grid ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ProcessGrid:
    """``P`` devices as a ``rows x c`` grid: device ``i c + j`` is process ``(i, j)`` and holds block
    row ``i`` of ``Q`` and (partitioned) of ``A``; ``bounds`` are the block rows' vertex ranges."""

    mode: str  # "replicated" or "partitioned-1.5d"
    c: int  # replication factor (1 when replicated)
    devices: tuple[str, ...]
    bounds: np.ndarray

    @classmethod
    def of(cls, mode: str, replication: int, devices: Sequence[str], num_nodes: int) -> ProcessGrid:
        c = replication if mode == "partitioned-1.5d" else 1
        return cls(mode, c, tuple(devices), vertex_blocks(num_nodes, len(devices) // c))

    @property
    def partitioned(self) -> bool:
        return self.mode == "partitioned-1.5d"

    @property
    def rows(self) -> int:
        return len(self.devices) // self.c

    def worker(self, i: int, j: int) -> int:
        return i * self.c + j

    def device(self, i: int, j: int) -> str:
        return self.devices[self.worker(i, j)]

    def process(self, worker: int) -> tuple[int, int]:
        """``(i, j)`` of device ``worker``."""
        i, j = divmod(worker, self.c)
        return int(i), int(j)

    def column_blocks(self, i: int, j: int) -> list[int]:
        """Column blocks ``t`` process ``(i, j)`` multiplies: ``t = j, j + c, ...`` (replicated: its own)."""
        if self.partitioned:
            return [t for t in range(self.rows) if t % self.c == j]
        return [i]

    def block_of(self, vertices: np.ndarray) -> np.ndarray:
        """The block row of each vertex: the last ``t`` with ``floor(t n / P) <= v`` (see
        :func:`vertex_blocks`), which is ``floor((P (v + 1) - 1) / n)``: arithmetic instead of a
        binary search per vertex (1M unsorted input vertices: 33 ms -> a few)."""
        n = int(self.bounds[-1])
        return (self.rows * (np.asarray(vertices, dtype=np.int64) + 1) - 1) // max(n, 1)

    def positions_by_block(self, vertices: np.ndarray) -> dict[int, np.ndarray]:
        """Per block row holding some of ``vertices`` (in increasing order), their positions in
        ``vertices``, ascending: ``np.flatnonzero(block_of(vertices) == t)`` for each such ``t``,
        from one stable sort instead of one pass per block (64 blocks on 128 GPUs with c = 2)."""
        return positions_by_key(self.block_of(vertices), self.rows)

    def rows_needed(self, dsts: Sequence[np.ndarray]) -> dict[int, np.ndarray]:
        """Per column block ``t``, the distinct column ids of ``Q_i`` in it: the rows of ``A_t`` needed."""
        columns = np.unique(np.concatenate(dsts)) if len(dsts) else np.empty(0, dtype=np.int64)
        return {t: columns[at] for t, at in self.positions_by_block(columns).items()}


# ---- the records --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RowFetch:
    """Process ``(i, j)`` (worker ``requester``) sends the ids of the ``rows`` rows of ``A_t`` it needs
    to process ``(t, j)`` (worker ``owner``), which replies with them (``nnz`` nonzeros in all)."""

    i: int
    j: int
    t: int
    rows: int
    nnz: int
    requester: int
    owner: int
    request: str  # task ids
    reply: str
    request_bytes: int
    reply_bytes: int


@dataclass(frozen=True)
class RingSum:
    """Process row ``i``'s ``c`` partial products summed by one all-reduce of the CSR of ``P_i``."""

    i: int
    task: str
    members: tuple[int, ...]  # workers, in the row's order
    rows: int
    nnz: int
    nbytes: int


@dataclass(frozen=True)
class PairRound:
    """Round ``r`` of CAGNET's pairwise row sum: process ``(i, j)`` sends process ``(i, partner)`` the
    CSR of the sum of the ``held`` partial products it holds (``nnz`` nonzeros over ``rows`` rows)."""

    i: int
    r: int
    j: int
    partner: int
    sender: int  # workers
    receiver: int
    held: frozenset[int]
    rows: int
    nnz: int
    task: str
    nbytes: int


@dataclass(frozen=True)
class Sizes:
    """Bytes per id or row length, and per value."""

    index: int
    value: int


def row_fetch(
    grid: ProcessGrid, row_nnz: RowLengths, sizes: Sizes, prefix: str, what: str, i: int, j: int, t: int,
    need: np.ndarray,
) -> RowFetch:  # fmt: skip
    """The fetch of rows ``need`` of ``A_t`` by process ``(i, j)``."""
    rows, nnz = int(need.shape[0]), int(row_nnz[need].sum())
    request, reply = fetch_tasks(prefix, what, j, t)
    return RowFetch(
        i, j, t, rows, nnz, grid.worker(i, j), grid.worker(t, j), request, reply,
        rows * sizes.index, nnz * (sizes.index + sizes.value) + rows * sizes.index,
    )  # fmt: skip


def product_fetches(
    grid: ProcessGrid, row_nnz: RowLengths, sizes: Sizes, prefix: str, what: str, i: int,
    dsts: Sequence[np.ndarray],
) -> dict[int, list[RowFetch]]:  # fmt: skip
    """Per process ``j`` of row ``i``, its fetches for ``Q_i @ A``, block by block (none replicated)."""
    needs = grid.rows_needed(dsts) if grid.partitioned else {}
    return {
        j: [
            row_fetch(grid, row_nnz, sizes, prefix, what, i, j, t, needs[t])
            for t in grid.column_blocks(i, j)
            if t != i and t in needs and needs[t].size
        ]
        for j in range(grid.c)
    }


def stepped_stages(
    grid: ProcessGrid, row_nnz: RowLengths, sizes: Sizes, step: int, what: str,
    dsts_of: dict[int, list[np.ndarray]],
) -> list[list[list[RowFetch]]]:  # fmt: skip
    """The paper's ``P/c^2`` dependent steps (section 5.2.1's outer loop): per process column ``j``,
    per block ``t`` it multiplies (its step, owner ``(t, j)``), the fetches of the rows that need it."""
    needs = {i: grid.rows_needed(dsts) for i, dsts in dsts_of.items()}
    return [
        [
            [
                row_fetch(grid, row_nnz, sizes, layer_prefix(step, i), what, i, j, t, need[t])
                for i, need in needs.items()
                if i != t and t in need and need[t].size
            ]
            for t in grid.column_blocks(0, j)
        ]
        for j in range(grid.c)
    ]


def ring_sum(grid: ProcessGrid, sizes: Sizes, prefix: str, what: str, i: int, rows: int, nnz: int) -> RingSum:
    members = tuple(grid.worker(i, j) for j in range(grid.c))
    return RingSum(
        i, ring_task(prefix, what), members, rows, nnz, csr_bytes(rows, nnz, sizes.index, sizes.value)
    )


def pairwise_rounds(
    grid: ProcessGrid, sizes: Sizes, prefix: str, what: str, i: int, rows: int,
    held_nnz: Callable[[frozenset[int]], int],
) -> list[list[PairRound]]:  # fmt: skip
    """CAGNET's sparse all-reduce of process row ``i``: ``log2(c)`` rounds of recursive halving, in
    round ``r`` process ``j`` swapping with ``j +- c / 2^(r+1)``; per round, one send per process."""
    held = {j: frozenset([j]) for j in range(grid.c)}
    rounds: list[list[PairRound]] = []
    group = grid.c
    for r in range(grid.c.bit_length() - 1):
        half = group // 2
        partner = {j: j + half if j % group < half else j - half for j in held}
        sends = []
        for j in held:
            nnz = held_nnz(held[j])
            sends.append(
                PairRound(
                    i=i,
                    r=r,
                    j=j,
                    partner=partner[j],
                    sender=grid.worker(i, j),
                    receiver=grid.worker(i, partner[j]),
                    held=held[j],
                    rows=rows,
                    nnz=nnz,
                    task=round_task(prefix, what, r, j),
                    nbytes=csr_bytes(rows, nnz, sizes.index, sizes.value),
                )
            )
        rounds.append(sends)
        held = {j: held[j] | held[partner[j]] for j in held}
        group = half
    return rounds


@dataclass(frozen=True)
class RowProduct:
    """Process row ``i``'s part of one GraphSAGE layer: ``Q_i`` stacks the destinations of
    ``batches`` (``q_rows`` rows, one nonzero each), ``P_i = Q_i A`` has ``p_nnz`` nonzeros, process
    ``j``'s partial product ``partial_nnz[j]`` (its rows of ``P_i``: GraphSAGE's are disjoint)."""

    i: int
    prefix: str
    batches: tuple[int, ...]  # indices into the schedule's minibatches, stacked in this order
    q_rows: int
    p_nnz: int
    partial_nnz: tuple[int, ...]  # per process j
    fetches: tuple[tuple[RowFetch, ...], ...]  # per process j, in the order it multiplies them
    ring: RingSum | None  # c > 1 with row_allreduce="ring"
    rounds: tuple[tuple[PairRound, ...], ...]  # c > 1 with row_allreduce="pairwise"

    def spgemm(self, j: int) -> str:
        return spgemm_task(self.prefix, "P", j)

    def sample(self, j: int) -> str:
        return process_task(self.prefix, j, "sample")

    def extract(self, j: int) -> str:
        return process_task(self.prefix, j, "extract")


@dataclass(frozen=True)
class LayerSchedule:
    """The ``step``-th layer sampled (block ``layer`` of the minibatches): each process row's product
    and, stepped, the fetches of each process column's steps (``stages[j][s]``: owner ``(t, j)`` for
    the column's ``s``-th block ``t``; empty overlapped)."""

    step: int
    layer: int
    products: tuple[RowProduct, ...]  # process rows with batches, ascending
    stages: tuple[tuple[tuple[RowFetch, ...], ...], ...]

    def product(self, i: int) -> RowProduct | None:
        return next((p for p in self.products if p.i == i), None)


@dataclass(frozen=True)
class BulkSamplingSchedule:
    """Every decision of sampling ``num_batches`` GraphSAGE minibatches in bulk on ``grid``: batch
    ``b`` belongs to process row ``batch_row[b]``, and ``layers`` from the seeds outwards."""

    grid: ProcessGrid
    sizes: Sizes
    num_batches: int
    batch_row: np.ndarray
    layers: tuple[LayerSchedule, ...]
    schedule: str  # as asked for: "overlapped" or "stepped" (replicated mode fetches nothing either way)
    row_allreduce: str  # as asked for: "ring" or "pairwise" (c = 1 sums nothing either way)

    @property
    def stepped(self) -> bool:
        return self.grid.partitioned and self.schedule == "stepped"

    @property
    def pairwise(self) -> bool:
        return self.grid.partitioned and self.row_allreduce == "pairwise"

    def batches_of_row(self, i: int) -> list[int]:
        return [b for b in range(self.num_batches) if self.batch_row[b] == i]

    def fetches(self) -> Iterator[RowFetch]:
        """Every fetch of every layer."""
        for lay in self.layers:
            for prod in lay.products:
                for mine in prod.fetches:
                    yield from mine

    def pair_rounds(self) -> Iterator[PairRound]:
        for lay in self.layers:
            for prod in lay.products:
                for sends in prod.rounds:
                    yield from sends

    def rings(self) -> Iterator[RingSum]:
        for lay in self.layers:
            for prod in lay.products:
                if prod.ring is not None:
                    yield prod.ring


def graphsage_schedule(
    graph: CSRGraph, minibatches: Sequence[Minibatch], grid: ProcessGrid, sizes: Sizes, *, schedule: str,
    row_allreduce: str,
) -> BulkSamplingSchedule:  # fmt: skip
    """The schedule of sampling ``minibatches`` (GraphSAGE, sampled already: their blocks fix ``Q``)."""
    stepped = grid.partitioned and schedule == "stepped"
    pairwise = grid.partitioned and row_allreduce == "pairwise"
    mbs = list(minibatches)
    row_of = batch_rows(len(mbs), grid.rows)
    row_nnz = RowLengths(graph.indptr)
    mine_of = {i: [b for b in range(len(mbs)) if row_of[b] == i] for i in range(grid.rows)}
    mine_of = {i: mine for i, mine in mine_of.items() if mine}
    layers = []
    num_layers = len(mbs[0].blocks) if mbs else 0
    for step, layer in enumerate(range(num_layers - 1, -1, -1)):
        dsts_of = {i: [mbs[b].blocks[layer].dst_nodes for b in mine] for i, mine in mine_of.items()}
        stages = stepped_stages(grid, row_nnz, sizes, step, "P", dsts_of) if stepped else []
        products = tuple(
            _row_product(grid, row_nnz, sizes, step, i, mine, dsts_of[i], stages, pairwise)
            for i, mine in mine_of.items()
        )
        frozen = tuple(tuple(tuple(stage) for stage in column) for column in stages)
        layers.append(LayerSchedule(step, layer, products, frozen))
    return BulkSamplingSchedule(grid, sizes, len(mbs), row_of, tuple(layers), schedule, row_allreduce)


def _row_product(
    grid: ProcessGrid, row_nnz: RowLengths, sizes: Sizes, step: int, i: int, mine: list[int],
    dsts: list[np.ndarray], stages: list[list[list[RowFetch]]], pairwise: bool,
) -> RowProduct:  # fmt: skip
    prefix = layer_prefix(step, i)
    all_q = np.concatenate(dsts) if dsts else np.empty(0, dtype=np.int64)
    block_of_q = grid.block_of(all_q)
    q_rows = int(all_q.shape[0])
    p_nnz = int(sum(int(row_nnz[d].sum()) for d in dsts))
    partial = []
    for j in range(grid.c):
        in_mine = np.isin(block_of_q, grid.column_blocks(i, j)) if grid.partitioned else slice(None)
        partial.append(int(row_nnz[all_q[in_mine]].sum()))
    if stages:  # the fetches of (i, j) are its column's steps' that it takes part in, in step order
        fetches = [[f for stage in stages[j] for f in stage if f.i == i] for j in range(grid.c)]
    else:
        by_j = product_fetches(grid, row_nnz, sizes, prefix, "P", i, dsts)
        fetches = [by_j[j] for j in range(grid.c)]
    ring, rounds = None, []
    if grid.c > 1 and pairwise:
        # A row of Q has one nonzero, in one process's blocks: the partial products' rows are disjoint.
        rounds = pairwise_rounds(
            grid, sizes, prefix, "P", i, q_rows, lambda held: sum(partial[j] for j in held)
        )
    elif grid.c > 1:
        ring = ring_sum(grid, sizes, prefix, "P", i, q_rows, p_nnz)
    return RowProduct(
        i, prefix, tuple(mine), q_rows, p_nnz, tuple(partial), tuple(tuple(f) for f in fetches), ring,
        tuple(tuple(r) for r in rounds),
    )  # fmt: skip
