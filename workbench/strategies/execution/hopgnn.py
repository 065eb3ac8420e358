"""``hopgnn``: feature-centric training by model migration over micrographs (paper 003, sections 4-5).

Per iteration, with ``N`` workers (HopGNN's GPU servers; a root's home server is the
worker that owns it, whose machine's host memory holds its features):

1. **Sampling** as the spine sampled: worker ``w`` samples ``epoch[i][w]`` on its host.
   Under ``minibatches = "global"`` that is HopGNN's own steps 1-2 (server ``w``'s
   redistributed roots, sampled at home); see :mod:`.micrographs` for both readings.
2. **Micrograph training** (``micrographs``, section 5.1): model ``d``'s roots are
   grouped by home server; in time step ``t`` model ``d`` is at server
   ``(d + t) mod N`` and trains the micrographs of its roots homed there (a *cell*):
   it gathers their deduplicated input features onto that GPU (from its cache, its
   host, or another machine's host for the few non-local ones), runs forward and
   backward, and accumulates the gradients. Between its cells the model **migrates**:
   two real GPU-to-GPU transfers (phase ``migrate``), its parameters
   (``ModelSpec.param_bytes``, carries ``model``) and its accumulated gradients
   (``gradient_bytes``, carries ``gradients``). Optimizer state does not travel: after
   the last time step the accumulated gradients are all-reduced and every server steps
   the copy it holds, so all copies are equal again and which copy plays model ``d`` in
   the next iteration is a label: model ``d`` starts on the copy at server
   ``(d + first kept step) mod N`` (``d`` unless merging dropped step 0), without a
   migration, and never migrates back.

   A server runs its cells in time-step order, each after the previous one ends (the
   paper clears a step's features before the next); it fetches a step's features only
   then, while the arriving model may still be in flight. There is no global barrier
   between time steps: a model leaves as soon as its cell ends. A cell with no roots is
   skipped (the paper's idle model), and a model goes straight on to the server of its
   next non-empty cell; one whose last cells are empty stays put, and its gradients
   enter the all-reduce from there (its server adds the two models' gradients first, a
   server left without a model adds zeros: the same sum).
3. **Pre-gathering** (``pregather``, section 5.2): each server fetches, once per
   iteration and deduplicated, the remote features every cell it runs in that iteration
   needs (``gather_remote``, from each other machine's host into its own host memory,
   as the paper stores them), as soon as the minibatches are sampled; each cell then
   copies its share from local host memory (``h2d``). Without it, each cell fetches its
   remote features itself (``gather_remote`` straight to the GPU), so a vertex two time
   steps need crosses the network twice.
4. **Micrograph merging** (``merge``, section 5.3): ``merges`` times per iteration, the
   time step with the fewest roots is dropped and each model's roots in it are spread
   evenly over that model's other steps (:func:`.micrographs.merge_time_steps`):
   fewer migrations and kernel launches, but the moved micrographs train away from
   home. ``merge_to = "home"`` is the artifact's rule: they go to the models that visit
   their home server in the kept steps, and never leave home. The paper picks the count adaptively over epochs (an epoch is one plan here):
   :func:`.micrographs.adaptive_merge_count` runs that search given an epoch-time
   function, and its answer is the ``merges`` to configure.

Every decision above (who runs which model's cell in which kept time step, each cell's
micrographs, the route of every model, what each server pre-gathers) is made once, in
:meth:`HopGNNScheme.schedule` (a :class:`HopGNNSchedule`): the plan builder turns it into
tasks and costs, the real executor (:mod:`realrun.schemes.hopgnn`) carries out the same
object, and both name its steps through this module's task namer.

With ``micrographs`` off the scheme is subgraph-based training: the ``model-centric``
plan (the paper's DGL baseline of Figure 13), built by that scheme.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from workbench.errors import ConfigError
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import (
    FEATURE_SERVICE_HELP,
    PREFETCH_HELP,
    Exchange,
    IterationPlanner,
    MinibatchScheme,
    SchemeInputs,
    add_feature_reads,
    add_forward_backward,
    add_gradient_sync,
    add_reads,
    add_service_reads,
    check_prefetch,
    read_counts,
    service_fetch,
)
from workbench.strategies.execution.micrographs import (
    MERGE_TO,
    MERGE_TO_HELP,
    MINIBATCHES_HELP,
    Micrographs,
    check_minibatches,
    distinct,
    merge_time_steps,
    micrographs_of,
    model_roots,
)
from workbench.strategies.execution.model_centric import REAL_RUN_PARAMS, ModelCentricScheme
from workbench.strategies.sampling.base import Minibatch


# ---- HopGNN's task ids: the one namer of its own steps, for the plan and the real run ---------
def cell_prefix(iteration: int, server: int, step: int) -> str:
    """The prefix of the tasks of the cell server ``server`` runs in time step ``step`` (its reads,
    forward and backward: :mod:`.task_ids` under this prefix)."""
    return f"{task_ids.worker_prefix(iteration, server)}.t{step}"


def pregathered_task(prefix: str) -> str:
    """A cell's copy of its share of the pre-gathered rows, host to GPU (``prefix``: its cell's)."""
    return f"{prefix}.pregathered"


def pregather_prefix(iteration: int, server: int) -> str:
    """The prefix of server ``server``'s pre-gathering fetches (one per source: :func:`pregather_task`)."""
    return f"{task_ids.worker_prefix(iteration, server)}.pregather"


def pregather_task(iteration: int, server: int, source: str) -> str:
    """Server ``server``'s pre-gathering fetch from machine host ``source``."""
    return f"{pregather_prefix(iteration, server)}.{source}"


def migrate_task(iteration: int, src: int, model: int, carries: str) -> str:
    """Model ``model`` leaving server ``src`` with ``carries`` (its parameters or its gradients)."""
    return f"{task_ids.worker_prefix(iteration, src)}.m{model}.migrate.{carries}"


# ---- the schedule: every decision of an iteration, made once ---------------------------------
MIGRATION_PARTS = ("model", "gradients")  # what a migrating model carries, in the order it is sent


@dataclass(frozen=True)
class Carried:
    """One part of a migration: ``what`` (``model``: the parameters; ``gradients``: the accumulated
    gradients) and its bytes."""

    what: str
    nbytes: int


@dataclass(frozen=True)
class Hop:
    """Model ``model`` migrates from server ``src`` to ``dst``: it leaves after ``src``'s cell in kept
    step ``leave`` (-1: at the iteration's start) and arrives for ``dst``'s cell in kept step
    ``arrive``, carrying ``carries``."""

    model: int
    src: int
    dst: int
    leave: int
    arrive: int
    carries: tuple[Carried, ...]


@dataclass(frozen=True, eq=False)
class Cell:
    """Model ``model`` trains ``micrographs`` on server ``server`` in kept step ``index`` (time step
    ``step``, the number task ids use). ``rows``: its roots as ``(worker, position)`` in the
    iteration's minibatches (what a real run cuts its blocks from). ``final``: the server's last
    cell with roots in the iteration."""

    model: int
    server: int
    index: int
    step: int
    rows: np.ndarray
    micrographs: Micrographs
    final: bool

    @property
    def num_roots(self) -> int:
        return self.micrographs.num_roots


@dataclass(frozen=True, eq=False)
class HopGNNSchedule:
    """One iteration of HopGNN: the kept time steps, every model's cell in each (``cells[d][j]``,
    empty ones included), every migration (:attr:`route`, each model's in order) and, with
    pre-gathering, what each server fetches once (``pregather[s]``: distinct vertices, sorted)."""

    iteration: int
    num_workers: int
    kept: tuple[int, ...]
    cells: tuple[tuple[Cell, ...], ...]
    route: tuple[Hop, ...]
    pregather: tuple[np.ndarray, ...] | None

    def server(self, d: int, j: int) -> int:
        """Where model ``d`` is in kept step ``j``."""
        return (d + self.kept[j]) % self.num_workers

    def model_at(self, s: int, j: int) -> int:
        """The model at server ``s`` in kept step ``j``."""
        return (s - self.kept[j]) % self.num_workers

    def cell_at(self, s: int, j: int) -> Cell:
        return self.cells[self.model_at(s, j)][j]

    def runs(self, s: int) -> list[Cell]:
        """Server ``s``'s cells with roots, in kept-step order."""
        return [c for j in range(len(self.kept)) if (c := self.cell_at(s, j)).num_roots]

    def model_roots(self, d: int) -> int:
        """Model ``d``'s roots in the whole iteration (its minibatch)."""
        return sum(c.num_roots for c in self.cells[d])

    @cached_property
    def arrivals(self) -> dict[tuple[int, int], Hop]:
        """The hop that brings each model to its cell, by ``(model, kept step)``."""
        return {(hop.model, hop.arrive): hop for hop in self.route}

    def sends(self, s: int) -> dict[int, list[Hop]]:
        """Server ``s``'s migrations out, by the kept step after whose cell they leave (-1: at the start)."""
        out: dict[int, list[Hop]] = {}
        for hop in self.route:
            if hop.src == s:
                out.setdefault(hop.leave, []).append(hop)
        return out

    def receives(self, s: int) -> dict[int, Hop]:
        """Server ``s``'s migrations in, by the kept step whose cell they arrive for (one a step at most)."""
        return {hop.arrive: hop for hop in self.route if hop.dst == s}

    def built(self, s: int) -> tuple[int, int]:
        """Edges and input vertices of the micrographs server ``s`` builds for its cells: part of its
        sampling step."""
        cells = self.runs(s)
        edges = sum(e for c in cells for _, _, e in c.micrographs.sizes)
        return edges, sum(int(c.micrographs.input_nodes.shape[0]) for c in cells)


def model_route(cells: tuple[Cell, ...], start: int, carries: tuple[Carried, ...]) -> list[Hop]:
    """One model's migrations: it starts on server ``start`` (its kept step 0's) and moves to each of
    its cells with roots in turn (empty ones it skips); after its last one it stays."""
    at, after, hops = start, -1, []
    for cell in cells:
        if not cell.num_roots:
            continue
        if cell.server != at:
            hops.append(Hop(cell.model, at, cell.server, after, cell.index, carries))
        at, after = cell.server, cell.index
    return hops


class _RowCache:
    """Schedules kept with the sampled epoch they were computed from, held weakly: a sweep over
    placements or hardware on one epoch cuts each tree once, and an epoch's schedules die with it.
    Keyed by the identity of the row's first minibatch (an entry goes when it does, before its id
    can be reused); each row keeps the schedule of the last key asked for (everything else the
    schedule depends on), as a sweep's points come one after another."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[tuple[object, ...], HopGNNSchedule]] = {}

    def get(
        self, row: list[Minibatch], key: tuple[object, ...], compute: Callable[[], HopGNNSchedule]
    ) -> HopGNNSchedule:
        anchor = id(row[0])
        kept = self.entries.get(anchor)
        if kept is not None and kept[0] == key:
            return kept[1]
        if kept is None:
            weakref.finalize(row[0], self.entries.pop, anchor, None)
        schedule = compute()
        self.entries[anchor] = (key, schedule)
        return schedule


_SCHEDULES = _RowCache()


def compute_schedule(
    inputs: SchemeInputs, iteration: int, merges: int, merge_to: str, minibatches: str, pregather: bool
) -> HopGNNSchedule:
    """Iteration ``iteration``'s schedule (see :class:`HopGNNSchedule`; the module docstring says why).

    Model ``d`` is at server ``(d + t) mod N`` in time step ``t`` and trains its roots homed there;
    merging then drops ``merges`` steps; every cell's micrographs are cut at once."""
    n = inputs.num_workers
    row = inputs.epoch[iteration]
    roots = model_roots(inputs, row, minibatches)
    steps, rows = merge_time_steps(
        [[roots[d][(d + t) % n] for t in range(n)] for d in range(n)], merges, merge_to
    )
    k = len(steps)
    cut = micrographs_of(row, [cell for model in rows for cell in model])
    last: dict[int, int] = {}  # per server, the last kept step it runs a cell with roots in
    for d in range(n):
        for j in range(k):
            if rows[d][j].shape[0]:
                s = (d + steps[j]) % n
                last[s] = max(last.get(s, -1), j)
    cells = tuple(
        tuple(
            Cell(d, s, j, steps[j], rows[d][j], cut[d * k + j], bool(rows[d][j].shape[0]) and last[s] == j)
            for j in range(k)
            for s in [(d + steps[j]) % n]
        )
        for d in range(n)
    )
    carries = tuple(
        Carried(what, nbytes)
        for what, nbytes in zip(
            MIGRATION_PARTS, (inputs.model.param_bytes(), inputs.model.gradient_bytes()), strict=True
        )
    )
    # After the last all-reduce every server holds the same parameters, so the copy on server
    # (d + first kept step) mod N starts as model d: merging away step 0 costs no migration.
    route = tuple(hop for d in range(n) for hop in model_route(cells[d], (d + steps[0]) % n, carries))
    fetched = None
    if pregather:
        fetched = tuple(_server_inputs(inputs, cells, s) for s in range(n))
    return HopGNNSchedule(iteration, n, tuple(steps), cells, route, fetched)


def _server_inputs(inputs: SchemeInputs, cells: tuple[tuple[Cell, ...], ...], s: int) -> np.ndarray:
    """The distinct input vertices of every cell with roots server ``s`` runs (what it pre-gathers)."""
    mine = [c.micrographs.input_nodes for model in cells for c in model if c.server == s and c.num_roots]
    if not mine:
        return np.zeros(0, dtype=np.int64)
    return distinct(np.concatenate(mine), inputs.graph.num_nodes)


# ---- the scheme -------------------------------------------------------------------------------
@EXECUTION_SCHEMES.register("hopgnn")
class HopGNNScheme(MinibatchScheme):
    """HopGNN: models migrate to the features over micrographs; pre-gathering; micrograph merging."""

    real_run_params = REAL_RUN_PARAMS  # as model-centric's executor: realrun.schemes.hopgnn
    HELP = {
        "micrographs": "micrograph-based training with model migration (+MG); off: model-centric subgraphs",
        "pregather": "one deduplicated remote feature fetch per server and iteration (+PG; needs micrographs)",
        "merge": "micrograph merging (All; needs micrographs): drop `merges` time steps per iteration",
        "merges": "time steps merged away per iteration when merging, 1..N-1 (N - 1: one step left)",
        "merge_to": MERGE_TO_HELP,
        "minibatches": MINIBATCHES_HELP,
        "prefetch": PREFETCH_HELP,
        "overlap_reads": ModelCentricScheme.HELP["overlap_reads"],
        "feature_service": FEATURE_SERVICE_HELP
        + " (with pregather: one request per server and iteration for all its cells' rows)",
    }

    def __init__(
        self,
        micrographs: bool = True,
        pregather: bool = True,
        merge: bool = True,
        merges: int = 1,
        merge_to: str = "model",
        minibatches: str = "global",
        prefetch: int = 1,
        overlap_reads: bool = True,
        feature_service: bool = False,
    ) -> None:
        if not micrographs and (pregather or merge):
            on = " and ".join(n for n, v in (("pregather", pregather), ("merge", merge)) if v)
            raise ConfigError(
                f"execution strategy 'hopgnn': {on} work on micrographs; set micrographs = true, "
                f"or {on} = false for the subgraph (model-centric) baseline"
            )
        if merge and merges < 1:
            raise ConfigError(f"execution strategy 'hopgnn': merges must be >= 1 when merging, got {merges}")
        if merge_to not in MERGE_TO:
            raise ConfigError(
                f"execution strategy 'hopgnn': merge_to {merge_to!r}; allowed: {', '.join(MERGE_TO)}"
            )
        self.micrographs = micrographs
        self.pregather = pregather
        self.merge = merge
        self.merges = merges
        self.merge_to = merge_to
        self.minibatches = check_minibatches(minibatches, "hopgnn")
        self.prefetch = check_prefetch(prefetch, "hopgnn")
        self.overlap_reads = overlap_reads
        self.feature_service = feature_service

    def switches(self) -> dict[str, object]:
        return {
            "micrographs": self.micrographs,
            "pregather": self.pregather,
            "merges": self.merges if self.merge else 0,
            **({"merge_to": self.merge_to} if self.merge and self.merge_to != "model" else {}),
            "minibatches": self.minibatches,
            **({"feature_service": True} if self.feature_service else {}),
        }

    def plan_details(self, inputs: SchemeInputs) -> dict[str, object]:
        return {**self.switches(), "prefetch": self.prefetch, "overlap_reads": self.overlap_reads}

    def schedule(self, inputs: SchemeInputs, iteration: int) -> HopGNNSchedule:
        """Iteration ``iteration``'s schedule (:func:`compute_schedule`), computed once per sampled
        epoch and what it depends on (the partition, the switches, the model's sizes), not on the
        placement or the hardware."""
        merges = self.merges if self.merge else 0
        model = inputs.model
        key = (
            iteration,
            inputs.partition_digest,
            inputs.num_workers,
            merges,
            self.merge_to,
            self.minibatches,
            self.pregather,
            model.param_bytes(),
            model.gradient_bytes(),
        )
        return _SCHEDULES.get(
            inputs.epoch[iteration],
            key,
            lambda: compute_schedule(
                inputs, iteration, merges, self.merge_to, self.minibatches, self.pregather
            ),
        )

    def check_inputs(self, inputs: SchemeInputs) -> None:
        n = inputs.num_workers
        if self.merge and self.merges > n - 1:
            raise ConfigError(
                f"execution strategy 'hopgnn': merges={self.merges}, but {n} workers train in {n} time "
                f"steps, so at most {n - 1} can be merged away; give fewer merges or merge = false"
            )

    def build(self, inputs: SchemeInputs) -> Plan:
        if self.micrographs:
            return super().build(inputs)
        plan = ModelCentricScheme(self.prefetch, self.overlap_reads, self.feature_service).build(inputs)
        plan.meta.update(scheme="hopgnn", **self.switches())
        return plan

    def iteration_planner(
        self, plan: Plan, inputs: SchemeInputs, iteration: int, previous_steps: list[str]
    ) -> IterationPlanner:
        return _HopGNNIteration(self, plan, inputs, self.schedule(inputs, iteration), previous_steps)


class _HopGNNIteration(IterationPlanner):
    """The tasks of one iteration's schedule: each server's pre-gathering, the cells in kept-step
    order with the migrations that bring their models, then the gradient sync."""

    def __init__(
        self,
        scheme: HopGNNScheme,
        plan: Plan,
        inputs: SchemeInputs,
        schedule: HopGNNSchedule,
        previous_steps: list[str],
    ) -> None:
        self.scheme, self.plan, self.inputs, self.schedule = scheme, plan, inputs, schedule
        self.it = schedule.iteration
        n = inputs.num_workers
        self.samples = [""] * n  # each worker's sampling task
        # What a model's next task waits for: its last cell (or last iteration's optimizer step of
        # the copy that plays it), and the transfers that brought it, whose buffers live until it
        # moves on.
        self.model_ready: list[list[str]] = [[] for _ in range(n)]
        if previous_steps:
            self.model_ready = [[previous_steps[schedule.server(d, 0)]] for d in range(n)]
        self.arrivals: list[list[str]] = [[] for _ in range(n)]
        self.last_cell: dict[int, str] = {}  # per server, the final task of the cell it ran last
        self.pregathered: dict[
            int, list[tuple[str, str | None]]
        ] = {}  # per server, (task, tensor) per source
        # Staged (not overlap_reads): per server, the pre-gathering fetches its exchange waits for
        # (its own and those served from its host). The real worker is one serial process that
        # makes the exchange before any cell's reads, so its near reads start after them.
        self.after_pregather: dict[int, list[str]] = {}
        self.fetches: list[tuple[int, str, str]] = []  # (server, pre-gathering task, source host)

    def sample_work(self, w: int) -> tuple[int, int]:
        return self.schedule.built(w)

    def sampled(self, w: int, minibatch: Minibatch, sample: str) -> None:
        self.samples[w] = sample

    def finish(self) -> list[str]:
        n = self.inputs.num_workers
        if self.scheme.pregather:
            for s in range(n):
                self._pregather(s)
            if not self.scheme.overlap_reads:
                for s in range(n):
                    host = self.inputs.host_of_worker(s)
                    self.after_pregather[s] = [t for w, t, src in self.fetches if w == s or src == host]
        for j in range(len(self.schedule.kept)):
            self._time_step(j)
        deps = [x for ready in self.model_ready for x in ready]
        return add_gradient_sync(self.plan, self.inputs, self.it, deps)

    def _time_step(self, j: int) -> None:
        """Kept step ``j``'s cells, server by server."""
        # Without pre-gathering, staged: each kept step's reads are one exchange every worker
        # joins (the real worker reads in every step, with or without a cell of its own).
        exchange = Exchange() if not (self.scheme.pregather or self.scheme.overlap_reads) else None
        for s in range(self.inputs.num_workers):
            cell = self.schedule.cell_at(s, j)
            if cell.num_roots:
                self._cell(cell, exchange)
            elif exchange is not None:
                exchange.join([], [self.last_cell.get(s, self.samples[s])])
        if exchange is not None:
            exchange.couple()

    def _pregather(self, s: int) -> None:
        """Server ``s``'s one deduplicated fetch per source machine of its cells' remote features."""
        cells = self.schedule.runs(s)
        if not cells:
            return
        inputs, plan, it = self.inputs, self.plan, self.it
        assert self.schedule.pregather is not None
        vertices = self.schedule.pregather[s]
        deps = sorted({self.samples[w] for c in cells for w in c.micrographs.sources})
        if not self.scheme.overlap_reads:  # the real pre-gathering is one exchange every worker joins
            deps = sorted(set(self.samples))
        if self.scheme.feature_service:  # one request to the feature service for every row the cells need
            reads = read_counts(inputs, s, vertices)
            last, _ = service_fetch(plan, inputs, s, it, reads, deps, pregather_prefix(it, s))
            self.pregathered[s] = [(last, None)] if last is not None else []
            return
        fetched: list[tuple[str, str | None]] = []
        for read in read_counts(inputs, s, vertices):
            if read.kind != "remote":
                continue
            tid = pregather_task(it, s, read.source)
            tensor = f"{tid}.features"
            nbytes = read.count * inputs.feature_bytes
            plan.transfer(
                tid,
                read.source,
                inputs.host_of_worker(s),
                nbytes,
                "gather_remote",
                deps,
                worker=s,
                iteration=it,
                items=read.count,
                carries="features",
                allocate={tensor: nbytes},
            )
            fetched.append((tid, tensor))
            self.fetches.append((s, tid, read.source))
        self.pregathered[s] = fetched

    def _cell(self, cell: Cell, exchange: Exchange | None) -> None:
        """Model ``cell.model`` trains its micrographs on server ``cell.server`` (brought there first
        when the route says so)."""
        inputs, plan, it = self.inputs, self.plan, self.it
        d, s, mg = cell.model, cell.server, cell.micrographs
        hop = self.schedule.arrivals.get((d, cell.index))
        if hop is not None:
            self._migrate(hop)
        prefix = cell_prefix(it, s, cell.step)
        previous = [self.last_cell[s]] if s in self.last_cell else []
        read_deps = [self.samples[w] for w in mg.sources] + previous  # a step's features go first
        frees: list[str] = []
        if self.scheme.pregather:
            ids, gathered, frees = self._pregathered_reads(cell, prefix, read_deps)
        elif self.scheme.feature_service:
            ids, gathered = add_service_reads(plan, inputs, s, it, mg.input_nodes, read_deps, prefix)
        else:
            ids, gathered = add_feature_reads(
                plan, inputs, s, it, mg.input_nodes, read_deps, prefix, self.scheme.overlap_reads, exchange
            )
        ready = list(dict.fromkeys([*(ids or read_deps), *self.model_ready[d], *previous]))
        last = add_forward_backward(plan, inputs, s, it, mg.sizes, ready, prefix, frees=gathered + frees)
        self.last_cell[s] = last
        self.model_ready[d] = [last, *self.arrivals[d]]

    def _pregathered_reads(
        self, cell: Cell, prefix: str, read_deps: list[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """A pre-gathering cell's reads: the near ones as usual, its share of the pre-gathered rows
        from host memory. Returns the read tasks, the tensors they gather and what else the cell frees."""
        inputs, plan, it, s = self.inputs, self.plan, self.it, cell.server
        reads = read_counts(inputs, s, cell.micrographs.input_nodes)
        # Through the service the reply holds the host rows too; else only remote rows were fetched.
        served = ("host", "remote") if self.scheme.feature_service else ("remote",)
        near = [r for r in reads if r.kind not in served]
        far = sum(r.count for r in reads if r.kind in served)
        near_deps = read_deps + self.after_pregather.get(s, [])
        ids, gathered = add_reads(plan, inputs, s, it, near, near_deps, prefix, self.scheme.overlap_reads)
        fetched = self.pregathered.get(s, [])
        frees: list[str] = []
        if far:
            tid = pregathered_task(prefix)
            after = (
                read_deps if self.scheme.overlap_reads or not ids else list(ids)
            )  # staged: after the near reads
            plan.transfer(
                tid,
                inputs.host_of_worker(s),
                inputs.workers[s],
                far * inputs.feature_bytes,
                "h2d",
                after + [task for task, _ in fetched],
                worker=s,
                iteration=it,
                items=far,
                carries="features",
            )
            ids.append(tid)
        if cell.final:  # the server's last cell frees what it pre-gathered for the iteration
            ids.extend(task for task, _ in fetched)
            frees.extend(tensor for _, tensor in fetched if tensor is not None)
        return ids, gathered, frees

    def _migrate(self, hop: Hop) -> None:
        """Model ``hop.model`` moves from ``hop.src`` to ``hop.dst`` with what the hop carries."""
        ids = []
        for part in hop.carries:
            tid = migrate_task(self.it, hop.src, hop.model, part.what)
            self.plan.transfer(
                tid,
                self.inputs.workers[hop.src],
                self.inputs.workers[hop.dst],
                part.nbytes,
                "migrate",
                self.model_ready[hop.model],
                worker=hop.src,
                iteration=self.it,
                carries=part.what,
            )
            ids.append(tid)
        self.model_ready[hop.model] = ids
        self.arrivals[hop.model] = ids
