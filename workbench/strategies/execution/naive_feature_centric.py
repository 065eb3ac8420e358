"""``naive-feature-centric``: the model travels to the features, subgraph and all (paper 003, section 3.2).

HopGNN's strawman. Each model keeps its whole minibatch subgraph as its unit of work
and, instead of fetching remote features, migrates to the servers that hold them,
carrying the partial results a layer-by-layer computation needs. Per iteration, model
``d`` (its roots as :mod:`.micrographs` assigns them, ``minibatches``):

1. **Home stop** (time step 0, server ``d``): it gathers the input features of its
   subgraph that are local there (its GPU cache, a peer GPU's cache, its host memory)
   and aggregates them into layer 0's partial sums, one ``in_dim``-wide accumulator per
   layer-0 destination vertex: the paper's "partial completion of layer 1's forward".
2. **Feature stops**: it visits, in rotation order ``d + 1, d + 2, ... mod N``, each
   other server that holds input features it has not read yet (skipping the rest),
   reads them locally there and adds them to the partial sums. Each hop is a real
   transfer (phase ``migrate``) of the model's parameters (``ModelSpec.param_bytes``,
   carries ``model``), the partial sums (``num_dst(layer 0) * in_dim * 4`` bytes,
   ``partials``) and the subgraph's topology (``adjacency``:
   ``INDEX_BYTES * sum over layers of (num_src + 2 * num_edges)``, the vertex ids and
   the edge endpoints of every block).
3. At the **last feature stop** layer 0's aggregation is complete: it finishes layer 0
   (its transform over the aggregated rows) and runs the forward of the remaining
   layers there.
4. **Return home** (the paper's time step 2, where the root's data lives): the model
   travels back with its parameters, the intermediate data backward needs (every
   layer's ``ModelSpec`` saved-for-backward bytes, ``activations``) and the topology,
   then runs backward at home. When every feature was local there is no hop at all.
5. The gradients are all-reduced and each server steps its model, as data parallel.

No feature crosses the network (nothing in ``gather_remote``); the price is the
intermediate data in ``migrate``, which the paper measures at up to 2.59x the
model-centric traffic. Models move independently, so two may share a GPU for a while.
A cell of ``global`` roots that come from several workers' minibatches adds the sizes of
their trees (see :mod:`.micrographs`).

Every decision above (each model's roots and subgraph, its stops and the vertices it reads at
each, its hops and what each carries) is made once, in :meth:`NaiveFeatureCentricScheme.schedule`
(a :class:`NaiveSchedule`): the plan builder turns it into tasks and costs, the real executor
(:mod:`realrun.schemes.naive_feature_centric`) carries out the same object, and both name its
steps through this module's task namer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.model import DTYPE_BYTES, INDEX_BYTES
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import (
    FEATURE_SERVICE_HELP,
    PREFETCH_HELP,
    IterationPlanner,
    MinibatchScheme,
    SchemeInputs,
    add_backward,
    add_feature_reads,
    add_forward,
    add_gradient_sync,
    add_service_reads,
    check_prefetch,
    feature_reads,
)
from workbench.strategies.execution.micrographs import (
    MINIBATCHES_HELP,
    Micrographs,
    check_minibatches,
    micrographs_of,
    model_roots,
)
from workbench.strategies.sampling.base import Minibatch


def partial_bytes(inputs: SchemeInputs, sizes: list[tuple[int, int, int]]) -> int:
    """Layer 0's partial aggregations: one ``in_dim``-wide accumulator per destination vertex."""
    return sizes[0][1] * inputs.model.layers[0].in_dim * DTYPE_BYTES


def adjacency_bytes(sizes: list[tuple[int, int, int]]) -> int:
    """The subgraph's topology: each block's source vertex ids and edge endpoints."""
    return INDEX_BYTES * sum(src + 2 * edges for src, _, edges in sizes)


def saved_bytes(inputs: SchemeInputs, sizes: list[tuple[int, int, int]]) -> list[int]:
    """What each layer's forward keeps for its backward (``ModelSpec``), input layer first."""
    return [
        layer.saved_for_backward_bytes(*size) for layer, size in zip(inputs.model.layers, sizes, strict=True)
    ]


def stops(inputs: SchemeInputs, d: int, vertices: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Model ``d``'s feature stops in order: (server, the input vertices it reads there).

    Home first (always, even when it reads nothing there), then each server in rotation
    order that can read, locally, some vertex no earlier stop read.
    """
    n = inputs.num_workers
    out = []
    unread = np.asarray(vertices, dtype=np.int64)
    for k in range(n):
        s = (d + k) % n
        reads = feature_reads(inputs, s, unread)
        here = [r.vertices for r in reads if r.kind != "remote"]
        if here or k == 0:
            out.append((s, np.sort(np.concatenate(here)) if here else np.zeros(0, dtype=np.int64)))
        unread = np.concatenate([r.vertices for r in reads if r.kind == "remote"] or [np.zeros(0, np.int64)])
        if unread.shape[0] == 0:
            break
    return out


# ---- the task ids of a tour: the one namer of its steps, for the plan and the real run ---------
def tour_prefix(iteration: int, server: int, model: int) -> str:
    """The prefix of model ``model``'s tasks on server ``server`` (its reads, its aggregation, its
    forward there, and the hops it leaves by)."""
    return f"{task_ids.worker_prefix(iteration, server)}.m{model}"


def home_prefix(iteration: int, model: int) -> str:
    """The prefix of model ``model``'s backward at home after it travelled back."""
    return f"{tour_prefix(iteration, model, model)}.home"


def aggregate_task(prefix: str) -> str:
    """A stop's addition of the features read there into layer 0's partial sums."""
    return f"{prefix}.aggregate"


def migrate_task(iteration: int, src: int, model: int, carries: str) -> str:
    """Model ``model`` leaving server ``src`` with ``carries`` (one of :data:`HOP_PARTS` or
    :data:`RETURN_PARTS`)."""
    return f"{tour_prefix(iteration, src, model)}.migrate.{carries}"


# ---- the schedule: every decision of an iteration, made once ---------------------------------
HOP_PARTS = ("model", "partials", "adjacency")  # what a hop between feature stops carries, in order
RETURN_PARTS = ("model", "activations", "adjacency")  # what the hop back home carries, in order


@dataclass(frozen=True)
class Carried:
    """One part of a hop: ``what`` (:data:`HOP_PARTS`, :data:`RETURN_PARTS`) and its bytes."""

    what: str
    nbytes: int


@dataclass(frozen=True, eq=False)
class Stop:
    """A feature stop: the model reads ``vertices`` (sorted) locally on ``server`` and adds them into
    layer 0's partial sums over ``edges`` layer-0 edges (those whose source is among them)."""

    server: int
    vertices: np.ndarray
    edges: int


@dataclass(frozen=True)
class Hop:
    """Model ``model`` moves from ``src`` to ``dst`` after its stop ``after`` (``back``: home, after its
    last stop, with the activations), carrying ``carries``."""

    model: int
    src: int
    dst: int
    after: int
    back: bool
    carries: tuple[Carried, ...]


@dataclass(frozen=True, eq=False)
class Tour:
    """Model ``model``'s iteration: its roots (``rows``, ``(worker, position)`` in the iteration's
    minibatches: what a real run cuts its subgraph from), the subgraph's sizes and layer-0 sources
    (``micrographs``), its stops (home first), the hops between them and the hop back home (None
    when the home stop is the only one)."""

    model: int
    rows: np.ndarray
    micrographs: Micrographs
    stops: tuple[Stop, ...]
    hops: tuple[Hop, ...]
    back: Hop | None

    @property
    def last(self) -> int:
        """The server of the last stop, where the forward ends."""
        return self.stops[-1].server

    def leaving(self, k: int) -> Hop | None:
        """The hop the model leaves stop ``k`` by (None: its backward runs there, at home)."""
        return self.hops[k] if k < len(self.hops) else self.back


def backward_prefix(iteration: int, tour: Tour) -> str:
    """The prefix of model ``tour.model``'s backward: at its only stop, or at home after the hop back."""
    if tour.back is None:
        return tour_prefix(iteration, tour.model, tour.model)
    return home_prefix(iteration, tour.model)


@dataclass(frozen=True, eq=False)
class NaiveSchedule:
    """One iteration of naive feature-centric training: each model's tour (``tours[d]``; None for a
    model without roots). Stop ``k`` of every tour is round ``k``: a worker runs round ``k``'s stops
    it hosts, then the hops out of them (:meth:`departures`), and takes those that arrive."""

    iteration: int
    num_workers: int
    tours: tuple[Tour | None, ...]

    @property
    def rounds(self) -> int:
        """Stops of the longest tour."""
        return max((len(t.stops) for t in self.tours if t is not None), default=0)

    def visits(self, s: int, k: int) -> list[Tour]:
        """The tours whose stop ``k`` is on server ``s``, in model order."""
        return [t for t in self.tours if t is not None and k < len(t.stops) and t.stops[k].server == s]

    def departures(self, s: int, k: int) -> list[Hop]:
        """The hops that leave server ``s`` after round ``k``, in model order."""
        return [hop for t in self.visits(s, k) if (hop := t.leaving(k)) is not None]

    def arrivals(self, s: int, k: int) -> list[Hop]:
        """The hops that reach server ``s`` after round ``k``, in model order."""
        out = []
        for t in self.tours:
            hop = t.leaving(k) if t is not None and k < len(t.stops) else None
            if hop is not None and hop.dst == s:
                out.append(hop)
        return out


def tour_of(inputs: SchemeInputs, d: int, rows: np.ndarray, mg: Micrographs) -> Tour:
    """Model ``d``'s tour over its subgraph ``mg`` (roots ``rows``): :func:`stops`, and the hops."""
    assert mg.input_edge_src is not None  # cut with edge_sources
    stops_ = tuple(
        Stop(s, vertices, int(np.isin(mg.input_edge_src, vertices).sum()))
        for s, vertices in stops(inputs, d, mg.input_nodes)
    )
    model, adjacency = inputs.model.param_bytes(), adjacency_bytes(mg.sizes)
    forward = (
        Carried("model", model),
        Carried("partials", partial_bytes(inputs, mg.sizes)),
        Carried("adjacency", adjacency),
    )
    hops = tuple(
        Hop(d, a.server, b.server, k, False, forward)
        for k, (a, b) in enumerate(zip(stops_, stops_[1:], strict=False))
    )
    back = None
    if len(stops_) > 1:
        carried = (
            Carried("model", model),
            Carried("activations", sum(saved_bytes(inputs, mg.sizes))),
            Carried("adjacency", adjacency),
        )
        back = Hop(d, stops_[-1].server, d, len(stops_) - 1, True, carried)
    return Tour(d, rows, mg, stops_, hops, back)


def compute_schedule(inputs: SchemeInputs, iteration: int, minibatches: str) -> NaiveSchedule:
    """Iteration ``iteration``'s schedule (see :class:`NaiveSchedule`; the module docstring says why)."""
    row = inputs.epoch[iteration]
    roots = model_roots(inputs, row, minibatches)
    rows = [np.concatenate(roots[d]) for d in range(inputs.num_workers)]
    cut = micrographs_of(row, rows, edge_sources=True)
    tours = tuple(tour_of(inputs, d, rows[d], mg) if mg.num_roots else None for d, mg in enumerate(cut))
    return NaiveSchedule(iteration, inputs.num_workers, tours)


# ---- the scheme -------------------------------------------------------------------------------
@EXECUTION_SCHEMES.register("naive-feature-centric")
class NaiveFeatureCentricScheme(MinibatchScheme):
    """Naive feature-centric (HopGNN's strawman): the model and its partial results travel to the features."""

    # What realrun.schemes.naive_feature_centric runs with: it hands an iteration's minibatches
    # over after the previous step (no loader runs ahead) and reads through its feature store.
    real_run_params = {"prefetch": 0, "feature_service": False}
    HELP = {
        "minibatches": MINIBATCHES_HELP,
        "prefetch": PREFETCH_HELP,
        "feature_service": FEATURE_SERVICE_HELP + " (every row the naive tour reads is local to its stop)",
    }

    def __init__(self, minibatches: str = "global", prefetch: int = 1, feature_service: bool = False) -> None:
        self.minibatches = check_minibatches(minibatches, "naive-feature-centric")
        self.prefetch = check_prefetch(prefetch, "naive-feature-centric")
        self.feature_service = feature_service

    def plan_details(self, inputs: SchemeInputs) -> dict[str, object]:
        service = {"feature_service": True} if self.feature_service else {}  # meta only when on
        return {"minibatches": self.minibatches, "prefetch": self.prefetch, **service}

    def schedule(self, inputs: SchemeInputs, iteration: int) -> NaiveSchedule:
        """Iteration ``iteration``'s schedule (:func:`compute_schedule`)."""
        return compute_schedule(inputs, iteration, self.minibatches)

    def iteration_planner(
        self, plan: Plan, inputs: SchemeInputs, iteration: int, previous_steps: list[str]
    ) -> IterationPlanner:
        return _ToursIteration(self, plan, inputs, iteration, previous_steps)


class _ModelTour:
    """The tasks of one model's tour: its feature stops (aggregating layer 0 at each), the rest of
    the forward at the last stop, and backward at home (travelling back with the activations)."""

    def __init__(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        it: int,
        tour: Tour,
        samples: list[str],
        feature_service: bool,
    ) -> None:
        self.plan = plan
        self.inputs = inputs
        self.it = it
        self.tour = tour
        self.d = tour.model
        self.sizes = tour.micrographs.sizes
        # The samplings that cut its subgraph.
        self.sample_deps = [samples[w] for w in tour.micrographs.sources]
        self.read = add_service_reads if feature_service else add_feature_reads
        self.accumulator = f"i{it}.m{self.d}.partials"  # layer 0's partial sums, allocated at home
        self.here = self.d  # the server the model is on
        self.ready: list[str] = []  # what the model's next task waits for
        # The hop that brought the model here (its buffers live until it leaves).
        self.arrivals: list[str] = []

    def run(self, start: list[str]) -> list[str]:
        """The tour, after ``start``; returns what the all-reduce waits for."""
        self.ready = list(start)
        tour = self.tour
        for k, stop in enumerate(tour.stops):
            if k:
                self.move_to(tour.hops[k - 1], first=k == 1)
            self.aggregate(stop, home=k == 0)
        last = self.forward(sole_stop=tour.back is None)
        if tour.back is None:
            prefix = backward_prefix(self.it, tour)
            return [add_backward(self.plan, self.inputs, self.d, self.it, self.sizes, [last], prefix)]
        return self.backward_at_home(last, tour.back)

    def move_to(self, hop: Hop, first: bool) -> None:
        """Take ``hop`` to the next feature stop with the parameters, the partial sums and the topology;
        the ``first`` hop sends the accumulator away from home (a later one's is the previous arrival's)."""
        self.arrivals = self.hop(hop, self.ready, free=[self.accumulator] if first else [])
        self.ready = list(self.arrivals)
        self.here = hop.dst

    def aggregate(self, stop: Stop, home: bool) -> None:
        """At ``stop``: read its vertices' features locally and add them into layer 0's partial
        sums (whose accumulator the ``home`` stop allocates)."""
        layer0 = self.inputs.model.layers[0]
        fb = DTYPE_BYTES * layer0.in_dim
        dst0 = self.sizes[0][1]
        s, vertices, edges = stop.server, stop.vertices, stop.edges
        prefix = tour_prefix(self.it, s, self.d)
        reads, gathered = self.read(self.plan, self.inputs, s, self.it, vertices, self.sample_deps, prefix)
        count = int(vertices.shape[0])
        self.plan.compute(
            aggregate_task(prefix),
            self.inputs.workers[s],
            "forward",
            reads + self.ready + ([] if reads else self.sample_deps),
            worker=s,
            iteration=self.it,
            layer=0,
            items=edges,
            features={
                "vertices": float(dst0),
                "src_vertices": float(count),
                "edges": float(edges),
                "in_dim": float(layer0.in_dim),
                "out_dim": float(layer0.in_dim),
                "flops": float(edges * layer0.in_dim),
                "bytes": float(count * fb + edges * (INDEX_BYTES + fb) + 2 * dst0 * fb),
            },
            allocate={self.accumulator: partial_bytes(self.inputs, self.sizes)} if home else {},
            free=gathered,
        )
        self.ready = [aggregate_task(prefix), *self.arrivals]

    def forward(self, sole_stop: bool) -> str:
        """Layer 0 is aggregated: finish it (its transform) and the other layers' forward here.
        Returns the last forward task. At a ``sole_stop`` (home) the accumulator is freed here."""
        layer0 = self.inputs.model.layers[0]
        dst0 = self.sizes[0][1]
        prefix = tour_prefix(self.it, self.here, self.d)
        self.plan.compute(
            task_ids.forward_task(prefix, 0),
            self.inputs.workers[self.here],
            "forward",
            self.ready,
            worker=self.here,
            iteration=self.it,
            layer=0,
            items=0,
            features=layer0.cost_features(dst0, dst0, 0),
            allocate={task_ids.activation_tensor(prefix, 0): layer0.saved_for_backward_bytes(*self.sizes[0])},
            free=[self.accumulator] if sole_stop else [],
        )
        layers = range(1, self.inputs.model.num_layers)
        return add_forward(
            self.plan,
            self.inputs,
            self.here,
            self.it,
            self.sizes,
            [task_ids.forward_task(prefix, 0)],
            prefix,
            layers=layers,
        )

    def backward_at_home(self, last: str, back: Hop) -> list[str]:
        """Back home by ``back`` (after ``last``, the forward) with what backward needs; backward runs
        there. Returns what the all-reduce waits for."""
        prefix = tour_prefix(self.it, self.here, self.d)
        home = backward_prefix(self.it, self.tour)
        saved = saved_bytes(self.inputs, self.sizes)
        arrived = self.hop(
            back,
            [last, *self.arrivals],
            free=[task_ids.activation_tensor(prefix, layer) for layer in range(self.inputs.model.num_layers)],
            allocate={task_ids.activation_tensor(home, layer): b for layer, b in enumerate(saved)},
        )
        return [add_backward(self.plan, self.inputs, self.d, self.it, self.sizes, arrived, home), *arrived]

    def hop(
        self, hop: Hop, deps: list[str], free: list[str], allocate: dict[str, int] | None = None
    ) -> list[str]:
        """One migration of the model: a transfer per thing ``hop`` carries.

        ``free``: tensors here the hop sends away (freed once the partial sums or activations
        transfer ends); ``allocate``: the names the activations land under.
        """
        ids = []
        for part in hop.carries:
            tid = migrate_task(self.it, hop.src, self.d, part.what)
            moved = part.what in ("partials", "activations")
            self.plan.transfer(
                tid,
                self.inputs.workers[hop.src],
                self.inputs.workers[hop.dst],
                part.nbytes,
                "migrate",
                deps,
                worker=hop.src,
                iteration=self.it,
                carries=part.what,
                free=list(free) if moved else [],
                allocate=dict(allocate) if moved and allocate else {},
            )
            ids.append(tid)
        return ids


class _ToursIteration(IterationPlanner):
    """Every worker samples first; then each model's tour over the servers that hold its
    features (the schedule's), and the gradient sync."""

    def __init__(
        self,
        scheme: NaiveFeatureCentricScheme,
        plan: Plan,
        inputs: SchemeInputs,
        iteration: int,
        previous_steps: list[str],
    ) -> None:
        self.scheme, self.plan, self.inputs, self.it = scheme, plan, inputs, iteration
        self.previous_steps = previous_steps
        self.samples: list[str] = []

    def sampled(self, w: int, minibatch: Minibatch, sample: str) -> None:
        self.samples.append(sample)

    def finish(self) -> list[str]:
        inputs, steps = self.inputs, self.previous_steps
        schedule = self.scheme.schedule(inputs, self.it)
        finals: list[str] = []
        for d, tour in enumerate(schedule.tours):
            start = [steps[d]] if steps else []
            if tour is None:
                finals.extend(start or [self.samples[d]])
                continue
            run = _ModelTour(self.plan, inputs, self.it, tour, self.samples, self.scheme.feature_service)
            finals.extend(run.run(start))
        return add_gradient_sync(self.plan, inputs, self.it, finals)
