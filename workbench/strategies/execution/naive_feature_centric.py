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
"""

from __future__ import annotations

import numpy as np

from workbench.model import DTYPE_BYTES, INDEX_BYTES
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
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
    micrographs,
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


@EXECUTION_SCHEMES.register("naive-feature-centric")
class NaiveFeatureCentricScheme(MinibatchScheme):
    """Naive feature-centric (HopGNN's strawman): the model and its partial results travel to the features."""

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

    def iteration_planner(
        self, plan: Plan, inputs: SchemeInputs, iteration: int, previous_steps: list[str]
    ) -> IterationPlanner:
        return _ToursIteration(self, plan, inputs, iteration, previous_steps)

    def _model(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        it: int,
        d: int,
        mg: Micrographs,
        samples: list[str],
        start: list[str],
    ) -> list[str]:
        """Model ``d``'s tour of iteration ``it`` (after ``start``); returns what the all-reduce waits for."""
        return _ModelTour(plan, inputs, it, d, mg, samples, self.feature_service).run(start)


class _ModelTour:
    """One model's tour of one iteration: its feature stops (aggregating layer 0 at each), the rest of
    the forward at the last stop, and backward at home (travelling back with the activations)."""

    def __init__(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        it: int,
        d: int,
        mg: Micrographs,
        samples: list[str],
        feature_service: bool,
    ) -> None:
        self.plan = plan
        self.inputs = inputs
        self.it = it
        self.d = d
        self.mg = mg
        self.sizes = mg.sizes
        self.sample_deps = [samples[w] for w in mg.sources]  # the samplings that cut its subgraph
        self.read = add_service_reads if feature_service else add_feature_reads
        self.accumulator = f"i{it}.m{d}.partials"  # layer 0's partial sums, allocated at home
        self.here = d  # the server the model is on
        self.ready: list[str] = []  # what the model's next task waits for
        self.arrivals: list[
            str
        ] = []  # the hop that brought the model here (its buffers live until it leaves)

    def run(self, start: list[str]) -> list[str]:
        """The tour, after ``start``; returns what the all-reduce waits for."""
        self.ready = list(start)
        tour = stops(self.inputs, self.d, self.mg.input_nodes)
        for k, (s, vertices) in enumerate(tour):
            if k:
                self.move_to(s, first=k == 1)
            self.aggregate(s, vertices, home=k == 0)
        last = self.forward(sole_stop=len(tour) == 1)
        if self.here == self.d:
            prefix = f"i{self.it}.w{self.here}.m{self.d}"
            return [add_backward(self.plan, self.inputs, self.d, self.it, self.sizes, [last], prefix)]
        return self.backward_at_home(last)

    def move_to(self, s: int, first: bool) -> None:
        """Hop to feature stop ``s`` with the parameters, the partial sums and the topology; the
        ``first`` hop sends the accumulator away from home (a later one's is the previous arrival's)."""
        carried = [
            ("model", self.inputs.model.param_bytes()),
            ("partials", partial_bytes(self.inputs, self.sizes)),
            ("adjacency", adjacency_bytes(self.sizes)),
        ]
        self.arrivals = self.hop(s, self.ready, carried, free=[self.accumulator] if first else [])
        self.ready = list(self.arrivals)
        self.here = s

    def aggregate(self, s: int, vertices: np.ndarray, home: bool) -> None:
        """At stop ``s``: read ``vertices``' features locally and add them into layer 0's partial
        sums (whose accumulator the ``home`` stop allocates)."""
        layer0 = self.inputs.model.layers[0]
        fb = DTYPE_BYTES * layer0.in_dim
        dst0 = self.sizes[0][1]
        prefix = f"i{self.it}.w{s}.m{self.d}"
        reads, gathered = self.read(self.plan, self.inputs, s, self.it, vertices, self.sample_deps, prefix)
        assert self.mg.input_edge_src is not None  # cut with edge_sources
        edges = int(np.isin(self.mg.input_edge_src, vertices).sum())
        count = int(vertices.shape[0])
        self.plan.compute(
            f"{prefix}.aggregate",
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
        self.ready = [f"{prefix}.aggregate", *self.arrivals]

    def forward(self, sole_stop: bool) -> str:
        """Layer 0 is aggregated: finish it (its transform) and the other layers' forward here.
        Returns the last forward task. At a ``sole_stop`` (home) the accumulator is freed here."""
        layer0 = self.inputs.model.layers[0]
        dst0 = self.sizes[0][1]
        prefix = f"i{self.it}.w{self.here}.m{self.d}"
        self.plan.compute(
            f"{prefix}.fwd0",
            self.inputs.workers[self.here],
            "forward",
            self.ready,
            worker=self.here,
            iteration=self.it,
            layer=0,
            items=0,
            features=layer0.cost_features(dst0, dst0, 0),
            allocate={f"{prefix}.act0": layer0.saved_for_backward_bytes(*self.sizes[0])},
            free=[self.accumulator] if sole_stop else [],
        )
        layers = range(1, self.inputs.model.num_layers)
        return add_forward(
            self.plan, self.inputs, self.here, self.it, self.sizes, [f"{prefix}.fwd0"], prefix, layers=layers
        )

    def backward_at_home(self, last: str) -> list[str]:
        """Back home (after ``last``, the forward) with what backward needs; backward runs there.
        Returns what the all-reduce waits for."""
        prefix = f"i{self.it}.w{self.here}.m{self.d}"
        home = f"i{self.it}.w{self.d}.m{self.d}.home"
        saved = saved_bytes(self.inputs, self.sizes)
        back = self.hop(
            self.d,
            [last, *self.arrivals],
            [
                ("model", self.inputs.model.param_bytes()),
                ("activations", sum(saved)),
                ("adjacency", adjacency_bytes(self.sizes)),
            ],
            free=[f"{prefix}.act{layer}" for layer in range(self.inputs.model.num_layers)],
            allocate={f"{home}.act{layer}": b for layer, b in enumerate(saved)},
        )
        return [add_backward(self.plan, self.inputs, self.d, self.it, self.sizes, back, home), *back]

    def hop(
        self,
        dst: int,
        deps: list[str],
        carried: list[tuple[str, int]],
        free: list[str],
        allocate: dict[str, int] | None = None,
    ) -> list[str]:
        """One migration of the model from where it is to server ``dst``: a transfer per thing it carries.

        ``free``: tensors here the hop sends away (freed once the partial sums or activations
        transfer ends); ``allocate``: the names the activations land under.
        """
        ids = []
        for carries, nbytes in carried:
            tid = f"i{self.it}.w{self.here}.m{self.d}.migrate.{carries}"
            moved = carries in ("partials", "activations")
            self.plan.transfer(
                tid,
                self.inputs.workers[self.here],
                self.inputs.workers[dst],
                nbytes,
                "migrate",
                deps,
                worker=self.here,
                iteration=self.it,
                carries=carries,
                free=list(free) if moved else [],
                allocate=dict(allocate) if moved and allocate else {},
            )
            ids.append(tid)
        return ids


class _ToursIteration(IterationPlanner):
    """Every worker samples first; then each model's tour over the servers that hold its
    features, and the gradient sync."""

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
        self.row: list[Minibatch] = []
        self.samples: list[str] = []

    def sampled(self, w: int, minibatch: Minibatch, sample: str) -> None:
        self.row.append(minibatch)
        self.samples.append(sample)

    def finish(self) -> list[str]:
        inputs, steps = self.inputs, self.previous_steps
        roots = model_roots(inputs, self.row, self.scheme.minibatches)
        finals: list[str] = []
        for d in range(inputs.num_workers):
            mg = micrographs(self.row, np.concatenate(roots[d]), edge_sources=True)
            start = [steps[d]] if steps else []
            if not mg.num_roots:
                finals.extend(start or [self.samples[d]])
                continue
            finals.extend(self.scheme._model(self.plan, inputs, self.it, d, mg, self.samples, start))
        return add_gradient_sync(self.plan, inputs, self.it, finals)
