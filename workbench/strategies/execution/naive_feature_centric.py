"""``naive-feature-centric``: the model travels to the features, subgraph and all (paper 003, section 3.2).

HopGNN's strawman. Each model keeps its whole minibatch subgraph as its unit of work
and, instead of fetching remote features, migrates to the servers that hold them,
carrying the partial results a layer-by-layer computation needs. Per iteration, model
``d`` (its roots as :mod:`._micrographs` assigns them, ``minibatches``):

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
their trees (see :mod:`._micrographs`).
"""

from __future__ import annotations

import numpy as np

from workbench.model import DTYPE_BYTES, INDEX_BYTES
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution._micrographs import (
    MINIBATCHES_HELP,
    Micrographs,
    check_minibatches,
    micrographs,
    model_roots,
)
from workbench.strategies.execution.base import (
    FEATURE_SERVICE_HELP,
    PREFETCH_HELP,
    ExecutionScheme,
    Prefetch,
    SchemeInputs,
    add_backward,
    add_feature_reads,
    add_forward,
    add_gradient_sync,
    add_resident_state,
    add_sampling,
    add_service_reads,
    check_prefetch,
    feature_reads,
)


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
class NaiveFeatureCentricScheme(ExecutionScheme):
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

    def build(self, inputs: SchemeInputs) -> Plan:
        n = inputs.num_workers
        service = {"feature_service": True} if self.feature_service else {}  # meta only when on
        plan = self.empty_plan(inputs, minibatches=self.minibatches, prefetch=self.prefetch, **service)
        add_resident_state(plan, inputs)
        steps: list[str] = []
        ahead = Prefetch(self.prefetch)
        for it, row in enumerate(inputs.epoch):
            samples = [
                add_sampling(plan, inputs, w, it, mb, f"i{it}.w{w}", ahead) for w, mb in enumerate(row)
            ]
            roots = model_roots(inputs, row, self.minibatches)
            finals: list[str] = []
            for d in range(n):
                mg = micrographs(row, np.concatenate(roots[d]), edge_sources=True)
                start = [steps[d]] if steps else []
                if not mg.num_roots:
                    finals.extend(start or [samples[d]])
                    continue
                finals.extend(self._model(plan, inputs, it, d, mg, samples, start))
            steps = add_gradient_sync(plan, inputs, it, finals)
            ahead.record(steps)
        return plan

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
        """Model ``d``'s tour of iteration ``it``; returns what the all-reduce waits for."""
        sizes = mg.sizes
        layer0 = inputs.model.layers[0]
        fb = DTYPE_BYTES * layer0.in_dim
        dst0 = sizes[0][1]
        sample_deps = [samples[w] for w in mg.sources]
        ready = list(start)  # what the model's next task waits for
        arrivals: list[str] = []  # the hop that brought the model here (its buffers live until it leaves)
        accumulator = f"i{it}.m{d}.partials"
        tour = stops(inputs, d, mg.input_nodes)
        here = d
        for k, (s, vertices) in enumerate(tour):
            prefix = f"i{it}.w{s}.m{d}"
            if k:
                carried = [("model", inputs.model.param_bytes()), ("partials", partial_bytes(inputs, sizes))]
                arrivals = self._hop(
                    plan,
                    inputs,
                    it,
                    d,
                    here,
                    s,
                    ready,
                    carried + [("adjacency", adjacency_bytes(sizes))],
                    free=[accumulator] if k == 1 else [],
                )
                ready = list(arrivals)
                here = s
            read = add_service_reads if self.feature_service else add_feature_reads
            reads, gathered = read(plan, inputs, s, it, vertices, sample_deps, prefix)
            assert mg.input_edge_src is not None  # cut with edge_sources
            edges = int(np.isin(mg.input_edge_src, vertices).sum())
            count = int(vertices.shape[0])
            plan.compute(
                f"{prefix}.aggregate",
                inputs.workers[s],
                "forward",
                reads + ready + ([] if reads else sample_deps),
                worker=s,
                iteration=it,
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
                allocate={accumulator: partial_bytes(inputs, sizes)} if k == 0 else {},
                free=gathered,
            )
            ready = [f"{prefix}.aggregate", *arrivals]
        # Layer 0 is aggregated: finish it (its transform) and the other layers' forward here.
        prefix = f"i{it}.w{here}.m{d}"
        plan.compute(
            f"{prefix}.fwd0",
            inputs.workers[here],
            "forward",
            ready,
            worker=here,
            iteration=it,
            layer=0,
            items=0,
            features=layer0.cost_features(dst0, dst0, 0),
            allocate={f"{prefix}.act0": layer0.saved_for_backward_bytes(*sizes[0])},
            free=[accumulator] if len(tour) == 1 else [],
        )
        layers = range(1, inputs.model.num_layers)
        last = add_forward(plan, inputs, here, it, sizes, [f"{prefix}.fwd0"], prefix, layers=layers)
        if here == d:
            return [add_backward(plan, inputs, d, it, sizes, [last], prefix)]
        # Back home with what backward needs; backward runs there.
        home = f"i{it}.w{d}.m{d}.home"
        saved = saved_bytes(inputs, sizes)
        back = self._hop(
            plan,
            inputs,
            it,
            d,
            here,
            d,
            [last, *arrivals],
            [
                ("model", inputs.model.param_bytes()),
                ("activations", sum(saved)),
                ("adjacency", adjacency_bytes(sizes)),
            ],
            free=[f"{prefix}.act{layer}" for layer in range(inputs.model.num_layers)],
            allocate={f"{home}.act{layer}": b for layer, b in enumerate(saved)},
        )
        return [add_backward(plan, inputs, d, it, sizes, back, home), *back]

    @staticmethod
    def _hop(
        plan: Plan,
        inputs: SchemeInputs,
        it: int,
        d: int,
        src: int,
        dst: int,
        deps: list[str],
        carried: list[tuple[str, int]],
        free: tuple[str, ...] | list[str] = (),
        allocate: dict[str, int] | None = None,
    ) -> list[str]:
        """One migration of model ``d`` from server ``src`` to ``dst``: a transfer per thing it carries.

        ``free``: tensors on ``src`` the hop sends away (freed once the partial sums or
        activations transfer ends); ``allocate``: the names the activations land under.
        """
        ids = []
        for carries, nbytes in carried:
            tid = f"i{it}.w{src}.m{d}.migrate.{carries}"
            moved = carries in ("partials", "activations")
            plan.transfer(
                tid,
                inputs.workers[src],
                inputs.workers[dst],
                nbytes,
                "migrate",
                deps,
                worker=src,
                iteration=it,
                carries=carries,
                free=list(free) if moved else [],
                allocate=dict(allocate) if moved and allocate else {},
            )
            ids.append(tid)
        return ids
