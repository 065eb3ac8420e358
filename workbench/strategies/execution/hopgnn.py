"""``hopgnn``: feature-centric training by model migration over micrographs (paper 003, sections 4-5).

Per iteration, with ``N`` workers (HopGNN's GPU servers; a root's home server is the
worker that owns it, whose machine's host memory holds its features):

1. **Sampling** as the spine sampled: worker ``w`` samples ``epoch[i][w]`` on its host.
   Under ``minibatches = "global"`` that is HopGNN's own steps 1-2 (server ``w``'s
   redistributed roots, sampled at home); see :mod:`._micrographs` for both readings.
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
   evenly over that model's other steps (:func:`._micrographs.merge_time_steps`):
   fewer migrations and kernel launches, but the moved micrographs train away from
   home. ``merge_to = "home"`` is the artifact's rule: they go to the models that visit
   their home server in the kept steps, and never leave home. The paper picks the count adaptively over epochs (an epoch is one plan here):
   :func:`._micrographs.adaptive_merge_count` runs that search given an epoch-time
   function, and its answer is the ``merges`` to configure.

With ``micrographs`` off the scheme is subgraph-based training: the ``model-centric``
plan (the paper's DGL baseline of Figure 13), built by that scheme.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import ConfigError
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution._micrographs import (
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
from workbench.strategies.execution.base import (
    FEATURE_SERVICE_HELP,
    PREFETCH_HELP,
    Exchange,
    ExecutionScheme,
    Prefetch,
    SchemeInputs,
    add_feature_reads,
    add_forward_backward,
    add_gradient_sync,
    add_reads,
    add_resident_state,
    add_sampling,
    add_service_reads,
    check_prefetch,
    feature_reads,
    service_fetch,
)
from workbench.strategies.execution.model_centric import REAL_RUN_PARAMS, ModelCentricScheme


@EXECUTION_SCHEMES.register("hopgnn")
class HopGNNScheme(ExecutionScheme):
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
        self.micrographs = micrographs
        self.pregather = pregather
        self.merge = merge
        self.merges = merges
        if merge_to not in MERGE_TO:
            raise ConfigError(
                f"execution strategy 'hopgnn': merge_to {merge_to!r}; allowed: {', '.join(MERGE_TO)}"
            )
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

    def schedule(self, inputs: SchemeInputs, iteration: int) -> tuple[list[int], list[list[Micrographs]]]:
        """The kept time steps and, per model and kept step, the micrographs it trains there.

        They depend on the iteration's minibatches, the partition and the switches only, not
        on the placement or the hardware: the last ones computed are kept with the
        iteration's first minibatch (and die with the epoch), so a sweep over placements or
        hardware on one sampled epoch cuts each tree once.
        """
        row = inputs.epoch[iteration]
        n = inputs.num_workers
        merges = self.merges if self.merge else 0
        key = (inputs.partition_digest, n, merges, self.merge_to, self.minibatches)
        kept = row[0].__dict__.get("_hopgnn_schedule")
        if kept is not None and kept[0] == key:
            return kept[1]
        roots = model_roots(inputs, row, self.minibatches)
        cells = [[roots[d][(d + t) % n] for t in range(n)] for d in range(n)]
        steps, cells = merge_time_steps(cells, merges, self.merge_to)
        flat = micrographs_of(row, [cell for model in cells for cell in model])
        schedule = steps, [flat[d * len(steps) : (d + 1) * len(steps)] for d in range(n)]
        row[0].__dict__["_hopgnn_schedule"] = (key, schedule)
        return schedule

    def build(self, inputs: SchemeInputs) -> Plan:
        if not self.micrographs:
            plan = ModelCentricScheme(self.prefetch, self.overlap_reads, self.feature_service).build(inputs)
            plan.meta.update(scheme="hopgnn", **self.switches())
            return plan
        n = inputs.num_workers
        if self.merge and self.merges > n - 1:
            raise ConfigError(
                f"execution strategy 'hopgnn': merges={self.merges}, but {n} workers train in {n} time "
                f"steps, so at most {n - 1} can be merged away; give fewer merges or merge = false"
            )
        plan = self.empty_plan(
            inputs, **self.switches(), prefetch=self.prefetch, overlap_reads=self.overlap_reads
        )
        add_resident_state(plan, inputs)
        ahead = Prefetch(self.prefetch)
        steps: list[str] = []
        for it, row in enumerate(inputs.epoch):
            kept, cells = self.schedule(inputs, it)
            built = cell_work(kept, cells, inputs.num_workers)
            samples = [
                add_sampling(plan, inputs, w, it, mb, f"i{it}.w{w}", ahead, built[w])
                for w, mb in enumerate(row)
            ]
            iteration = _Iteration(
                plan, inputs, it, samples, steps, self.pregather, self.overlap_reads, self.feature_service
            )
            steps = iteration.run(kept, cells)
            ahead.record(steps)
        return plan


def cell_work(kept: list[int], cells: list[list[Micrographs]], n: int) -> list[tuple[int, int]]:
    """Per server, the edges and input vertices of the micrographs it builds for the cells it runs
    (model ``d``'s kept step ``j`` on server ``(d + kept[j]) mod n``): part of its sampling step."""
    out = [[0, 0] for _ in range(n)]
    for d in range(n):
        for j, t in enumerate(kept):
            mg = cells[d][j]
            if mg.num_roots:
                s = (d + t) % n
                out[s][0] += sum(e for _, _, e in mg.sizes)
                out[s][1] += int(mg.input_nodes.shape[0])
    return [(e, v) for e, v in out]


class _Iteration:
    """The tasks of one iteration: cells in time-step order, migrations between them, then the sync."""

    def __init__(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        it: int,
        samples: list[str],
        previous_steps: list[str],
        pregather: bool,
        overlap_reads: bool = True,
        service: bool = False,
    ) -> None:
        self.service = service
        self.plan, self.inputs, self.it, self.samples = plan, inputs, it, samples
        self.previous_steps = previous_steps
        n = inputs.num_workers
        self.position = list(range(n))  # where each model is
        # What a model's next task waits for: its last cell (or last iteration's optimizer step),
        # and the transfers that brought it, whose buffers live until it moves on.
        self.model_ready: list[list[str]] = [[] for _ in range(n)]
        self.arrivals: list[list[str]] = [[] for _ in range(n)]
        self.last_cell: dict[int, str] = {}  # per server, the final task of the cell it ran last
        self.pregather = pregather
        self.overlap_reads = overlap_reads
        self.pregathered: dict[
            int, list[tuple[str, str | None]]
        ] = {}  # per server, (task, tensor) per source
        # Staged (not overlap_reads): per server, the pre-gathering fetches its exchange waits for
        # (its own and those served from its host). The real worker is one serial process that
        # makes the exchange before any cell's reads, so its near reads start after them.
        self.after_pregather: dict[int, list[str]] = {}
        self.fetches: list[tuple[int, str, str]] = []  # (server, pre-gathering task, source host)

    def run(self, kept: list[int], cells: list[list[Micrographs]]) -> list[str]:
        n = self.inputs.num_workers
        where = [[(d + t) % n for t in kept] for d in range(n)]
        # After the last all-reduce every server holds the same parameters, so the copy on server
        # (d + first kept step) mod N starts as model d: merging away step 0 costs no migration.
        self.position = [where[d][0] for d in range(n)]
        if self.previous_steps:
            self.model_ready = [[self.previous_steps[s]] for s in self.position]
        if self.pregather:
            for s in range(n):
                mine = [cells[d][j] for d in range(n) for j in range(len(kept)) if where[d][j] == s]
                self._pregather(s, [mg for mg in mine if mg.num_roots])
            if not self.overlap_reads:
                for s in range(n):
                    host = self.inputs.host_of_worker(s)
                    self.after_pregather[s] = [t for w, t, src in self.fetches if w == s or src == host]
        final = {}  # per server, the kept step of the last cell it runs
        for d in range(n):
            for j in range(len(kept)):
                if cells[d][j].num_roots:
                    final[where[d][j]] = max(final.get(where[d][j], -1), j)
        for j, t in enumerate(kept):
            # Without pre-gathering, staged: each kept step's reads are one exchange every worker
            # joins (the real worker reads in every step, with or without a cell of its own).
            exchange = Exchange() if not (self.pregather or self.overlap_reads) else None
            for s in range(n):
                d = (s - t) % n
                mg = cells[d][j]
                if mg.num_roots:
                    self._cell(d, s, t, mg, final=j == final[s], exchange=exchange)
                elif exchange is not None:
                    exchange.join([], [self.last_cell.get(s, self.samples[s])])
            if exchange is not None:
                exchange.couple()
        deps = [x for ready in self.model_ready for x in ready]
        return add_gradient_sync(self.plan, self.inputs, self.it, deps)

    def _pregather(self, s: int, cells: list[Micrographs]) -> None:
        """Server ``s``'s one deduplicated fetch per source machine of its cells' remote features."""
        if not cells:
            return
        inputs, plan = self.inputs, self.plan
        vertices = distinct(np.concatenate([mg.input_nodes for mg in cells]), inputs.graph.num_nodes)
        deps = sorted({self.samples[w] for mg in cells for w in mg.sources})
        if not self.overlap_reads:  # the real pre-gathering is one exchange every worker joins
            deps = sorted(set(self.samples))
        if self.service:  # one request to the feature service for every row the cells need
            reads = feature_reads(inputs, s, vertices)
            last, _ = service_fetch(plan, inputs, s, self.it, reads, deps, f"i{self.it}.w{s}.pregather")
            self.pregathered[s] = [(last, None)] if last is not None else []
            return
        host = inputs.host_of_worker(s)
        fetched: list[tuple[str, str | None]] = []
        for read in feature_reads(inputs, s, vertices):
            if read.kind != "remote":
                continue
            tid = f"i{self.it}.w{s}.pregather.{read.source}"
            tensor = f"{tid}.features"
            nbytes = read.count * inputs.feature_bytes
            plan.transfer(
                tid,
                read.source,
                host,
                nbytes,
                "gather_remote",
                deps,
                worker=s,
                iteration=self.it,
                items=read.count,
                carries="features",
                allocate={tensor: nbytes},
            )
            fetched.append((tid, tensor))
            self.fetches.append((s, tid, read.source))
        self.pregathered[s] = fetched

    def _cell(
        self, d: int, s: int, t: int, mg: Micrographs, final: bool, exchange: Exchange | None = None
    ) -> None:
        """Model ``d`` trains micrographs ``mg`` on server ``s`` in time step ``t``."""
        inputs, plan, it = self.inputs, self.plan, self.it
        if self.position[d] != s:
            self._migrate(d, s)
        prefix = f"i{it}.w{s}.t{t}"
        previous = [self.last_cell[s]] if s in self.last_cell else []
        read_deps = [self.samples[w] for w in mg.sources] + previous  # a step's features go first
        frees: list[str] = []
        if self.pregather:
            reads = feature_reads(inputs, s, mg.input_nodes)
            # Through the service the reply holds the host rows too; else only remote rows were fetched.
            served = ("host", "remote") if self.service else ("remote",)
            near = [r for r in reads if r.kind not in served]
            far = sum(r.count for r in reads if r.kind in served)
            near_deps = read_deps + self.after_pregather.get(s, [])
            ids, gathered = add_reads(plan, inputs, s, it, near, near_deps, prefix, self.overlap_reads)
            fetched = self.pregathered.get(s, [])
            if far:
                tid = f"{prefix}.pregathered"
                after = (
                    read_deps if self.overlap_reads or not ids else list(ids)
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
            if final:  # the server's last cell frees what it pre-gathered for the iteration
                ids.extend(task for task, _ in fetched)
                frees.extend(tensor for _, tensor in fetched if tensor is not None)
        elif self.service:
            ids, gathered = add_service_reads(plan, inputs, s, it, mg.input_nodes, read_deps, prefix)
        else:
            ids, gathered = add_feature_reads(
                plan, inputs, s, it, mg.input_nodes, read_deps, prefix, self.overlap_reads, exchange
            )
        ready = list(dict.fromkeys([*(ids or read_deps), *self.model_ready[d], *previous]))
        last = add_forward_backward(plan, inputs, s, it, mg.sizes, ready, prefix, frees=gathered + frees)
        self.last_cell[s] = last
        self.model_ready[d] = [last, *self.arrivals[d]]

    def _migrate(self, d: int, s: int) -> None:
        """Model ``d`` moves from its server to ``s`` with its parameters and accumulated gradients."""
        inputs, src = self.inputs, self.position[d]
        base = f"i{self.it}.w{src}.m{d}.migrate"
        sizes = (("model", inputs.model.param_bytes()), ("gradients", inputs.model.gradient_bytes()))
        ids = []
        for carries, nbytes in sizes:
            self.plan.transfer(
                f"{base}.{carries}",
                inputs.workers[src],
                inputs.workers[s],
                nbytes,
                "migrate",
                self.model_ready[d],
                worker=src,
                iteration=self.it,
                carries=carries,
            )
            ids.append(f"{base}.{carries}")
        self.model_ready[d] = ids
        self.arrivals[d] = ids
        self.position[d] = s
