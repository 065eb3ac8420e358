"""``bulk-pipeline``: paper 004's end-to-end pipeline (section 6): bulk sampling, all-to-allv fetch, propagation.

Paper: ``papers/004_48b849e12cfdd076.txt`` (Tripathy, Yelick, Buluc, MLSys 2024),
sections 5 and 6.

Layout (section 6). The ``P`` workers form a ``P/c x c`` process grid (``replication``
is ``c``; worker ``w = i c + j`` is process ``(i, j)``; ``c`` must divide ``P`` and
``c^2 <= P``, else a :class:`ConfigError` names both). The input feature matrix ``H``
is split 1.5D: ``P/c`` block rows of contiguous, equal vertex ranges, block ``i`` kept
on the GPUs of process row ``i`` (a resident tensor on each), so every process column
holds all of ``H``. The adjacency matrix ``A`` is on every GPU (``mode="replicated"``,
section 5.1) or split the same way (``mode="partitioned-1.5d"``, section 5.2). The
configured partitioner decides only which training vertices each worker's minibatches
start from; ``H`` and ``A`` follow the paper's block rows. A GPU feature cache has no
role (features are on the GPUs already): a run with a ``[placement]`` is rejected.

The pipeline, bulk synchronous:

1. **Sampling step** for ``k`` minibatches (``bulk``; a multiple of ``P``, default the
   whole epoch): ``k / P`` iterations of every worker. The plan of this step is
   :func:`~workbench.strategies.sampling.bulk_matrix_plan.sampled_bulk_plan` (the 1.5D
   plan of section 5, sparsity-aware, with its exact bytes) on the epoch's minibatches,
   ordered worker by worker so that worker ``w``'s batches fall in block row ``w // c``
   (replicated: ``w``) and are sampled by ``w``'s own process row. Its tasks join this
   plan with ids ``b{step}.`` + theirs; the next step starts after each device's last
   optimizer step. Each minibatch's sampled blocks stay on its worker's GPU from the
   end of the step until its backward (``i{it}.w{w}.sampled-blocks``: per layer the CSR
   of the sampled adjacency, ``num_edges x (8 + 4) + (num_dst + 1) x 8`` bytes, and the
   ``num_src x 8`` bytes of its column ids).
2. **Feature fetch**, all-to-allv across the process column: worker ``(i, j)`` needs
   the rows of ``H`` of its minibatch's input vertices ``V``; those in block ``i`` are
   on its GPU (``gather_local``), those in block ``t != i`` come from process
   ``(t, j)``: it first sends their ids (``|V_t| x 8`` bytes, ``indices``) and gets
   the rows back (``|V_t| x F x 4`` bytes, ``features``); phase ``d2d`` when the two
   GPUs share a machine, ``gather_remote`` otherwise. Per pair the sizes are the
   minibatch's own (an all-to-allv, not the plan's equal-split ``alltoall``), and an
   owner answers once it has entered the same iteration (its previous step done).
3. **Forward and backward** of the minibatch, layer by layer, then the **gradient
   all-reduce** among all ``P`` workers and the optimizer step.

Per-process sampling volume and the paper's analysis (section 5.2.1). The paper
analyses the sparsity-oblivious algorithm that broadcasts whole block rows: per layer,
process ``(i, j)`` takes ``P/c^2`` steps, each receiving a block row of ``A`` (``nc/P``
rows of ``d`` nonzeros on average): ``nd/c`` nonzeros; and the all-reduce in each
process row sums matrices of ``bkdc/P`` nonzeros (``bkc/P`` rows of ``Q_i``, ``d``
each). The plan is sparsity-aware (Ballard et al.) and counts bytes, so it differs:

* a process receives only the rows of ``A_t`` that ``Q_{i,t}`` has columns for; it
  equals the whole block row only when ``Q_i A`` touches every row of ``A_t`` (a dense
  graph, or a deep layer whose frontier is the whole graph), and is smaller otherwise;
* the step whose block is the process's own (``t = i``: processes with
  ``i = j (mod c)``) moves nothing, so those receive ``P/c^2 - 1`` block rows;
* a nonzero is ``8 + 4`` bytes (index and value), every row sent adds its length
  (8 bytes), and the ids of the rows requested go first (8 bytes per row: the term
  the paper calls negligible);
* the all-reduce buffer is the CSR of ``P_i``: rows are ``Q_i``'s rows, i.e. the
  layer's destinations summed over the row's batches (``bkc/P`` only for the seed layer
  of full batches), nonzeros the sum of their degrees; the simulator runs it as a
  ring, ``2 (c - 1) / c`` of that buffer per process (``row_allreduce="ring"``).

How the paper's code schedules those messages (``schedule`` and ``row_allreduce``; see
:mod:`~workbench.strategies.sampling.bulk_matrix_plan`). By default every fetch of a layer
starts as soon as its process is ready and the row sums its partials with a ring. With
``schedule="stepped"`` the fetches run in the paper's ``P/c^2`` dependent steps per
process column, one owner serving the column per step (section 5.2.1's outer loop, CAGNET's
``dist_saspgemm15D``); with ``row_allreduce="pairwise"`` the row sums in ``log2(c)``
rounds of pairwise sparse exchange (CAGNET's ``csr_allreduce``). Bytes are the same under
either schedule; the time is not: stepped, a process column's row data crosses the owner's
link one step at a time, so the critical path carries ``P/c^2`` steps, each of about
``1/(P/c^2)`` of the column's rows, which is what the paper's analysis (``beta n d / c``)
counts and why it falls with ``c``.

``tests/strategies/execution/test_bulk_pipeline.py`` checks the plan against the
formula on complete graphs, process by process.

One schedule, two executors. Every decision is made here once and read by the plan builder
and by the real executor (``realrun/schemes/bulk_pipeline.py``) alike: :meth:`BulkPipelineScheme.steps`
(the iterations of each sampling step), :meth:`BulkPipelineScheme.sampling_step` (a
:class:`SamplingStep`: which worker's minibatches the step samples, in which order, and the
:class:`~workbench.strategies.sampling.bulk_matrix_schedule.BulkSamplingSchedule` of the
fetches, row sums and task ids) and :meth:`BulkPipelineScheme.feature_fetch` (a
:class:`FeatureFetch`: which input rows a worker gathers locally and which it asks which owner
for, under which task ids).

Only node-wise (GraphSAGE) epochs are planned: LADIES' sampling step needs its layer
sizes, which the scheme does not see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from workbench.errors import ConfigError
from workbench.model import INDEX_BYTES
from workbench.plan import Plan, Task
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution.base import (
    ExecutionScheme,
    SchemeInputs,
    add_forward_backward,
    add_gradient_sync,
    add_resident_state,
    block_sizes,
)
from workbench.strategies.sampling.base import Minibatch
from workbench.strategies.sampling.bulk_matrix_plan import (
    MODES,
    ROW_ALLREDUCES,
    SCHEDULES,
    csr_bytes,
    sampled_bulk_schedule,
    schedule_plan,
)
from workbench.strategies.sampling.bulk_matrix_schedule import BulkSamplingSchedule, ProcessGrid

VALUE_BYTES = 4


@dataclass(frozen=True)
class SamplingStep:
    """Bulk sampling step ``index``: the minibatches of ``iterations``, worker by worker
    (``batches[b]``: the (worker, iteration) of the schedule's minibatch ``b``), sampled as
    ``schedule`` says; its tasks are the schedule's ids after ``prefix``."""

    index: int
    iterations: range
    prefix: str
    batches: tuple[tuple[int, int], ...]
    schedule: BulkSamplingSchedule

    def task(self, tid: str) -> str:
        """The pipeline's id of the schedule's task ``tid``."""
        return self.prefix + tid


@dataclass(frozen=True)
class RowsFrom:
    """Input rows a worker gets from ``owner``, the process of its column holding their block:
    ``positions`` in the minibatch's input vertices; ids out under ``request``, rows back under ``reply``."""

    owner: int
    positions: np.ndarray
    request: str
    reply: str
    phase: str  # d2d within a machine, gather_remote across

    @property
    def rows(self) -> int:
        return int(self.positions.shape[0])


@dataclass(frozen=True)
class FeatureFetch:
    """Worker ``worker``'s all-to-allv share in iteration ``iteration``: its input vertices
    ``vertices``, the ``local`` positions whose rows its process row holds (gathered under
    ``local_task``), and per other block the rows it asks that block's owner in its column for."""

    worker: int
    iteration: int
    prefix: str
    vertices: np.ndarray
    local: np.ndarray
    local_task: str | None
    remote: tuple[RowsFrom, ...]

    @property
    def local_tensor(self) -> str:
        return f"{self.prefix}.local-features"


def sampled_blocks_bytes(mb: Minibatch) -> int:
    """Bytes of a minibatch's sampled blocks on its GPU: per layer the CSR of the sampled
    adjacency (index and value per edge, a row pointer per destination) and the column ids."""
    return sum(
        csr_bytes(b.num_dst, b.num_edges, INDEX_BYTES, VALUE_BYTES) + b.num_src * INDEX_BYTES
        for b in mb.blocks
    )


@EXECUTION_SCHEMES.register("bulk-pipeline")
class BulkPipelineScheme(ExecutionScheme):
    """Paper 004's pipeline: bulk matrix sampling (replicated or 1.5D), all-to-allv feature fetch, data parallel."""

    # realrun.schemes.bulk_pipeline runs every mode, schedule and row all-reduce the plan can say:
    # it imposes nothing.
    real_run_params: ClassVar[Mapping[str, object] | None] = {}
    uses_placement: ClassVar[bool] = False  # each process row holds its block of the features
    HELP = {
        "mode": "the sampling step: 'replicated' (A on every GPU, paper 004 section 5.1) or "
        "'partitioned-1.5d' (A in P/c block rows, section 5.2)",
        "replication": "replication factor c of the P/c x c process grid (features, and A when partitioned): "
        "c divides the workers P and c^2 <= P",
        "bulk": "minibatches k sampled per bulk step over all workers (a multiple of the workers); "
        "default: the whole epoch in one step",
        "schedule": "the 1.5D row fetches: 'overlapped' (all at once) or 'stepped' (paper 004's P/c^2 dependent "
        "steps, one owner per process column per step, as CAGNET runs them)",
        "row_allreduce": "how a process row sums its c partial products: 'ring' (a dense ring all-reduce of the "
        "CSR) or 'pairwise' (CAGNET's log2(c) rounds of sparse pairwise exchange; c a power of two)",
    }

    def __init__(
        self,
        mode: str = "replicated",
        replication: int = 1,
        bulk: int | None = None,
        schedule: str = "overlapped",
        row_allreduce: str = "ring",
    ) -> None:
        who = "execution scheme 'bulk-pipeline'"
        if mode not in MODES:
            raise ConfigError(f"{who}: unknown mode {mode!r}; allowed: {', '.join(MODES)}")
        if isinstance(replication, bool) or not isinstance(replication, int) or replication < 1:
            raise ConfigError(f"{who}: replication must be a positive integer, got {replication!r}")
        if bulk is not None and (isinstance(bulk, bool) or not isinstance(bulk, int) or bulk < 1):
            raise ConfigError(f"{who}: bulk must be a positive integer, got {bulk!r}")
        if schedule not in SCHEDULES:
            raise ConfigError(f"{who}: unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if row_allreduce not in ROW_ALLREDUCES:
            raise ConfigError(
                f"{who}: unknown row_allreduce {row_allreduce!r}; allowed: {', '.join(ROW_ALLREDUCES)}"
            )
        self.mode = mode
        self.replication = replication
        self.bulk = bulk
        self.schedule = schedule
        self.row_allreduce = row_allreduce

    def check(self, inputs: SchemeInputs) -> int:
        """Check the grid, the bulk size and the inputs against ``inputs``; returns iterations per step."""
        who = f"{inputs.name}: bulk-pipeline"
        p, c = inputs.num_workers, self.replication
        if p % c or c * c > p:
            raise ConfigError(
                f"{who}: replication c={c} does not fit P={p} workers: the P/c x c process grid needs "
                f"c to divide P and c^2 <= P (c^2 = {c * c})"
            )
        if inputs.placement is not None:
            raise ConfigError(
                f"{who}: each process row keeps its block of the feature matrix on its GPUs (paper 004, "
                "section 6); a [placement] cache has no role here: remove it"
            )
        if self.mode == "partitioned-1.5d" and self.row_allreduce == "pairwise" and c & (c - 1):
            raise ConfigError(
                f"{who}: row_allreduce='pairwise' halves the process row each round and needs c a power "
                f"of two, got c={c}"
            )
        if self.bulk is not None and self.bulk % p:
            raise ConfigError(
                f"{who}: bulk k={self.bulk} minibatches must be a multiple of the P={p} workers "
                "(every worker trains k/P of them)"
            )
        # One sampler draws every iteration: the first tells whether blocks are weighted (and reading
        # no further leaves a streamed epoch unsampled until the plan asks for it).
        if len(inputs.epoch) and any(b.edge_weight is not None for mb in inputs.epoch[0] for b in mb.blocks):
            raise ConfigError(
                f"{who}: the epoch's blocks are weighted (a layer-wise sampler such as LADIES); the "
                "pipeline plans node-wise GraphSAGE bulk sampling (sampler 'bulk-matrix' or 'neighbor')"
            )
        return self._per_step(inputs)

    def _per_step(self, inputs: SchemeInputs) -> int:
        return max(len(inputs.epoch), 1) if self.bulk is None else self.bulk // inputs.num_workers

    # ---- the schedule: every decision, for the plan and the real run -------------------------
    def feature_grid(self, inputs: SchemeInputs) -> ProcessGrid:
        """The ``P/c x c`` grid of the feature matrix ``H`` (1.5D in both modes): block ``i`` on process row ``i``."""
        return ProcessGrid.of("partitioned-1.5d", self.replication, inputs.workers, inputs.graph.num_nodes)

    def steps(self, inputs: SchemeInputs) -> list[range]:
        """The iterations of each bulk sampling step (after :meth:`check`)."""
        per_step = self._per_step(inputs)
        n = len(inputs.epoch)
        return [range(start, min(start + per_step, n)) for start in range(0, n, per_step)]

    def sampling_step(self, inputs: SchemeInputs, s: int) -> SamplingStep:
        """Bulk sampling step ``s``: its minibatches worker by worker, so that worker ``w``'s fall in
        block row ``w // c`` (replicated: ``w``) and are sampled by ``w``'s own process row."""
        its = self.steps(inputs)[s]
        batches = tuple((w, it) for w in range(inputs.num_workers) for it in its)
        partitioned = self.mode == "partitioned-1.5d"
        schedule = sampled_bulk_schedule(
            inputs.graph,
            [inputs.epoch[it][w] for w, it in batches],
            inputs.cluster,
            mode=self.mode,
            replication=self.replication if partitioned else 1,
            devices=inputs.workers,
            index_bytes=INDEX_BYTES,
            value_bytes=VALUE_BYTES,
            schedule=self.schedule,
            row_allreduce=self.row_allreduce,
        )
        return SamplingStep(s, its, f"b{s}.", batches, schedule)

    def feature_fetch(self, inputs: SchemeInputs, it: int, w: int) -> FeatureFetch:
        """Worker ``w``'s share of the all-to-allv in its process column in iteration ``it``: the rows
        of its block gathered on its GPU, those of block ``t`` asked of process ``(t, j)``."""
        grid = self.feature_grid(inputs)
        i, j = grid.process(w)
        prefix = f"i{it}.w{w}"
        vertices = inputs.epoch[it][w].input_nodes
        by_block = grid.positions_by_block(vertices)
        local = by_block.pop(i, np.empty(0, dtype=np.int64))
        machine = inputs.worker_machine
        remote = []
        for t, at in by_block.items():
            owner = grid.worker(t, j)
            phase = "d2d" if machine[owner] == machine[w] else "gather_remote"
            remote.append(
                RowsFrom(
                    owner,
                    at,
                    f"{prefix}.ids-to-w{owner}",
                    f"{prefix}.rows-from-w{owner}",
                    phase,
                )
            )
        local_task = f"{prefix}.local" if local.size else None
        return FeatureFetch(w, it, prefix, vertices, local, local_task, tuple(remote))

    # ---- the plan ----------------------------------------------------------------------------
    def build(self, inputs: SchemeInputs) -> Plan:
        per_step = self.check(inputs)
        p = inputs.num_workers
        bounds = self.feature_grid(inputs).bounds
        plan = self.empty_plan(
            inputs,
            mode=self.mode,
            replication=self.replication,
            bulk=per_step * p,
            schedule=self.schedule,
            row_allreduce=self.row_allreduce,
        )
        add_resident_state(plan, inputs)
        for w, gpu in enumerate(inputs.workers):
            i = w // self.replication
            plan.keep(f"w{w}.features", gpu, int(bounds[i + 1] - bounds[i]) * inputs.feature_bytes)
        steps: list[str] = []
        for s, its in enumerate(self.steps(inputs)):
            sinks = self._sampling_step(plan, inputs, self.sampling_step(inputs, s), steps)
            for it in its:
                ready = [[sinks[w]] if it == its[0] else [steps[w]] for w in range(p)]
                finals = []
                for w, mb in enumerate(inputs.epoch[it]):
                    fetch = self.feature_fetch(inputs, it, w)
                    reads, gathered = self._fetch(plan, inputs, fetch, ready)
                    last = add_forward_backward(
                        plan, inputs, w, it, block_sizes(mb), reads + ready[w], fetch.prefix, frees=gathered
                    )
                    assert plan.tasks[-1].id == last
                    plan.tasks[-1].free.append(f"{fetch.prefix}.sampled-blocks")
                    finals.append(last)
                steps = add_gradient_sync(plan, inputs, it, finals)
                inputs.planned(it)
        return plan

    def _sampling_step(
        self, plan: Plan, inputs: SchemeInputs, step: SamplingStep, previous_steps: list[str]
    ) -> list[str]:
        """Add bulk sampling step ``step``; returns each worker's last sampling task."""
        workers = inputs.workers
        worker_of = {gpu: w for w, gpu in enumerate(workers)}
        s, its = step.index, step.iterations
        sub = schedule_plan(inputs.graph, [inputs.epoch[it][w] for w, it in step.batches], step.schedule)
        if s == 0:
            plan.resident.extend(sub.plan.resident)
        prefix = step.prefix
        used = {d for t in sub.plan.tasks for d in t.deps}
        sinks: dict[int, str] = {}
        for t in sub.plan.tasks:
            if t.kind == "compute" and t.id not in used:
                sinks[worker_of[t.device]] = t.id  # type: ignore[index]
        missing = [w for w in range(len(workers)) if w not in sinks]
        assert not missing, f"sampling step {s}: no sampling task ends on worker {missing[0]}"
        allocate: dict[str, dict[str, int]] = {tid: {} for tid in sinks.values()}
        for w in range(len(workers)):
            for it in its:
                allocate[sinks[w]][f"i{it}.w{w}.sampled-blocks"] = sampled_blocks_bytes(inputs.epoch[it][w])
        for t in sub.plan.tasks:
            if t.kind == "compute":
                owner = worker_of[t.device]  # type: ignore[index]
            elif t.kind == "transfer":  # requests leave the process that needs the rows; replies reach it
                owner = worker_of[t.dst if t.carries == "adjacency" else t.src]  # type: ignore[index]
            else:
                owner = worker_of[t.devices[0]]
            deps = [prefix + d for d in t.deps]
            if not deps and previous_steps:
                deps = [previous_steps[owner]]
            fields = t.to_dict()
            fields.update(
                id=prefix + t.id,
                deps=deps,
                worker=owner,
                iteration=its[0],
                allocate={**t.allocate, **allocate.get(t.id, {})},
            )
            plan.add(Task(**fields))
        return [prefix + sinks[w] for w in range(len(workers))]

    def _fetch(
        self, plan: Plan, inputs: SchemeInputs, fetch: FeatureFetch, ready: list[list[str]]
    ) -> tuple[list[str], list[str]]:
        """Plan ``fetch``, a worker's share of the all-to-allv; returns task ids and gathered tensors."""
        w, it = fetch.worker, fetch.iteration
        gpu = inputs.workers[w]
        fb = inputs.feature_bytes
        ids: list[str] = []
        tensors: list[str] = []
        if fetch.local_task is not None:
            n = int(fetch.local.shape[0])
            plan.compute(
                fetch.local_task,
                gpu,
                "gather_local",
                ready[w],
                worker=w,
                iteration=it,
                items=n,
                features={"vertices": float(n), "bytes": 2.0 * n * fb},
                allocate={fetch.local_tensor: n * fb},
            )
            ids.append(fetch.local_task)
            tensors.append(fetch.local_tensor)
        for src in fetch.remote:
            n, owner = src.rows, src.owner
            plan.transfer(
                src.request, gpu, inputs.workers[owner], n * INDEX_BYTES, src.phase, ready[w],
                worker=w, iteration=it, items=n, carries="indices",
            )  # fmt: skip
            plan.transfer(
                src.reply, inputs.workers[owner], gpu, n * fb, src.phase, [src.request, *ready[owner]],
                worker=w, iteration=it, items=n, carries="features",
            )  # fmt: skip
            ids.append(src.reply)
        return ids, tensors
