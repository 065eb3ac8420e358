"""P3's schedule: every decision of one iteration, made once, for the plan and the real run.

:func:`p3_layout` says who holds what for the whole run (each worker's slice of the input
feature dimensions, the first layer's slices, the data-parallel rest of the model);
:func:`p3_schedule` says, per iteration, which worker does what with which vertices, tensors
and peers, in which order, under which task id. The plan builder
(:mod:`workbench.strategies.execution.p3`) turns a schedule into tasks and costs; the real
executor (:mod:`realrun.schemes.p3`) carries the same schedule out. Neither decides anything
the schedule says: a slice, a structure's size, a peer or a task id exists here only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workbench.errors import ConfigError
from workbench.model import DTYPE_BYTES, INDEX_BYTES, LayerSpec, ModelSpec
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.sampling.base import Block, Minibatch

# First-layer kinds whose input transform splits over feature slices into partial
# activations of the destination vertices (aggregate, then multiply: both linear).
SPLITTABLE_FIRST_LAYERS = ("gcn", "sage")


def p3_name(prefix: str, step: str, *, minibatch: int | None = None, to: int | None = None) -> str:
    """The one namer of P3's own tasks and tensors: ``{prefix}[.mb{minibatch}].{step}[-to-w{to}]``,
    ``prefix`` a worker's (:func:`task_ids.worker_prefix`), ``minibatch`` the worker whose
    minibatch the step works on when it is not the worker's own, ``to`` the receiving worker."""
    on = f".mb{minibatch}" if minibatch is not None else ""
    peer = f"-to-w{to}" if to is not None else ""
    return f"{prefix}{on}.{step}{peer}"


def slice_widths(feat_dim: int, workers: int) -> list[int]:
    """Feature dimensions per worker: ``feat_dim // workers``, the first ``feat_dim % workers`` one more."""
    base, extra = divmod(feat_dim, workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]


def structure_entries(block: Block) -> int:
    """Integers of a sampled block's structure as the sampler returns it: source and destination
    ids and the local endpoints of every edge."""
    return block.num_src + block.num_dst + 2 * block.num_edges


def structure_bytes(block: Block) -> int:
    """Bytes of :func:`structure_entries` (8-byte integers)."""
    return structure_entries(block) * INDEX_BYTES


@dataclass(frozen=True)
class P3Layout:
    """Who holds what for the whole run: worker ``i`` keeps dimensions ``bounds(i)`` of every
    vertex's input features and the first layer's weights that multiply them; every worker keeps
    the data-parallel layers 2..L whole."""

    model_name: str
    first: LayerSpec  # the whole first layer
    widths: tuple[int, ...]  # feature dimensions per worker
    dim_bytes: int  # bytes of one feature dimension of one vertex
    dp_model: ModelSpec  # layers 2..L

    @property
    def hidden(self) -> int:
        """Width of the first layer's output: of every partial and of its gradient."""
        return self.first.output_width

    def bounds(self, worker: int) -> tuple[int, int]:
        """The feature dimensions ``begin:end`` worker ``worker`` holds."""
        begin = sum(self.widths[:worker])
        return begin, begin + self.widths[worker]

    def slice_layer(self, worker: int) -> LayerSpec:
        """The first layer restricted to worker ``worker``'s dimensions (with one bias of its own)."""
        return dataclasses.replace(self.first, in_dim=self.widths[worker])

    def slice_model(self, worker: int) -> ModelSpec:
        return ModelSpec(f"{self.model_name} layer 1 slice {worker}", (self.slice_layer(worker),))

    def row_bytes(self, worker: int) -> int:
        """Bytes of worker ``worker``'s slice of one vertex's features."""
        return self.widths[worker] * self.dim_bytes


def p3_layout(inputs: SchemeInputs) -> P3Layout:
    """The run's layout; refuses models and inputs P3 cannot split."""
    model, n = inputs.model, inputs.num_workers
    first = model.layers[0]
    if model.num_layers < 2:
        raise ConfigError(
            f"{inputs.name}: p3 needs at least 2 layers (layer 1 model parallel, the rest data parallel); "
            f"model {model.name!r} has {model.num_layers}"
        )
    if first.kind not in SPLITTABLE_FIRST_LAYERS:
        raise ConfigError(
            f"{inputs.name}: p3 splits the first layer over feature slices; its kind must be one of "
            f"{', '.join(SPLITTABLE_FIRST_LAYERS)}, model {model.name!r} starts with a {first.kind} layer"
        )
    if first.in_dim < n:
        raise ConfigError(
            f"{inputs.name}: p3 gives each of the {n} workers a slice of the {first.in_dim} feature "
            "dimensions: needs at least as many dimensions as workers"
        )
    if inputs.feature_bytes % first.in_dim:
        raise ConfigError(
            f"{inputs.name}: feature_bytes {inputs.feature_bytes} is not a whole number of bytes per "
            f"dimension of {first.in_dim}"
        )
    dp_model = ModelSpec(f"{model.name} layers 2..{model.num_layers}", model.layers[1:])
    widths = tuple(slice_widths(first.in_dim, n))
    return P3Layout(model.name, first, widths, inputs.feature_bytes // first.in_dim, dp_model)


# ---- one iteration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StructureSend:
    """Step 1: the structure of ``sender``'s first block, from its GPU to ``receiver``'s."""

    task: str
    sender: int
    receiver: int
    entries: int  # 8-byte integers (:func:`structure_entries`)
    edges: int

    @property
    def nbytes(self) -> int:
        return self.entries * INDEX_BYTES


@dataclass(frozen=True)
class SliceRead:
    """Step 2's read: a worker's slice of a minibatch's input vertices, the rows its GPU caches
    gathered there (``local_task``), the others copied from its host's memory (``host_task``,
    after the feature service's lookups, ``serve_task``, when the scheme has one)."""

    cached: np.ndarray = field(compare=False, repr=False)  # per input vertex: in the GPU's cache
    local_task: str | None
    host_task: str | None
    serve_task: str | None
    gathered: str  # the tensor the cached rows are gathered into

    @property
    def hits(self) -> int:
        return int(self.cached.sum())

    @property
    def misses(self) -> int:
        return int(self.cached.shape[0]) - self.hits


@dataclass(frozen=True)
class PartialStep:
    """Steps 2 and 5: worker ``worker``'s partial first layer of ``minibatch``'s block over its
    slice, forward and backward."""

    worker: int
    minibatch: int
    sizes: tuple[int, int, int]  # the block's sources, destinations, edges
    read: SliceRead
    forward: str
    backward: str
    saved: str  # the tensor the forward saves for the backward
    output: str  # the partial activations


@dataclass(frozen=True)
class ActivationSend:
    """Steps 3 and 5: ``rows`` first-layer outputs of ``H`` values between two workers (a partial
    forward to the minibatch's worker, the gradient of the sum back to every slice's worker)."""

    task: str
    sender: int
    receiver: int
    rows: int
    width: int
    carries: str  # "partials" or "gradients"

    @property
    def nbytes(self) -> int:
        return self.rows * self.width * DTYPE_BYTES


@dataclass(frozen=True)
class Combine:
    """Steps 3 to 5 on minibatch ``worker``'s own worker: the partials arrive and are summed
    (``forward``), layers 2..L run data parallel, and the gradient of the sum (``backward``) goes
    back to every other slice's worker."""

    worker: int
    prefix: str
    rows: int  # the first block's destinations
    forward: str
    backward: str
    activation: str  # the sum after the nonlinearity
    gradient: str  # the gradient of the sum
    partials_in: tuple[ActivationSend, ...]  # from every other worker, in worker order
    gradients_out: tuple[ActivationSend, ...]  # to every other worker, in worker order


@dataclass(frozen=True)
class P3Schedule:
    """Iteration ``iteration`` of P3, in the order its steps run."""

    iteration: int
    layout: P3Layout
    prefixes: tuple[str, ...]  # each worker's task prefix
    samples: tuple[str, ...]  # each worker's sampling (handover, for real)
    structure: tuple[StructureSend, ...]  # by sender, then receiver
    partials: tuple[PartialStep, ...]  # by worker, then minibatch
    combines: tuple[Combine, ...]  # by minibatch
    dp_layers: range  # the data-parallel layers (0-based)
    slice_updates: tuple[str, ...]  # each worker's step on its slice of the first layer
    previous_slice_updates: tuple[str, ...]  # the iteration before's (empty in the first)
    allreduce: str  # layers 2..L's gradients
    updates: tuple[str, ...]  # each worker's step on layers 2..L

    @property
    def num_workers(self) -> int:
        return len(self.prefixes)

    def partial(self, worker: int, minibatch: int) -> PartialStep:
        return self.partials[worker * self.num_workers + minibatch]

    def partial_sends(self) -> tuple[ActivationSend, ...]:
        return tuple(s for c in self.combines for s in c.partials_in)

    def gradient_sends(self) -> tuple[ActivationSend, ...]:
        return tuple(s for c in self.combines for s in c.gradients_out)

    def task_ids(self) -> list[str]:
        """Every task the schedule names, the data-parallel layers' included."""
        ids = [*self.samples, *(s.task for s in self.structure)]
        for p in self.partials:
            reads = (p.read.serve_task, p.read.local_task, p.read.host_task)
            ids += [t for t in reads if t is not None] + [p.forward, p.backward]
        for c in self.combines:
            ids += [c.forward, c.backward, *(s.task for s in c.partials_in + c.gradients_out)]
            ids += [task_ids.forward_task(c.prefix, layer) for layer in self.dp_layers]
            ids += [task_ids.backward_task(c.prefix, layer) for layer in self.dp_layers]
        return [*ids, *self.slice_updates, self.allreduce, *self.updates]


def p3_schedule(
    inputs: SchemeInputs, layout: P3Layout, iteration: int, feature_service: bool = False
) -> P3Schedule:
    """Iteration ``iteration`` of ``inputs.epoch`` under ``layout`` (``feature_service``: slice rows
    from host memory come through the feature service's lookups)."""
    n = inputs.num_workers
    minibatches = inputs.epoch[iteration]
    prefixes = tuple(task_ids.worker_prefix(iteration, w) for w in range(n))
    previous = (
        tuple(p3_name(task_ids.worker_prefix(iteration - 1, w), "update-slice") for w in range(n))
        if iteration
        else ()
    )
    return P3Schedule(
        iteration=iteration,
        layout=layout,
        prefixes=prefixes,
        samples=tuple(task_ids.sample_task(p) for p in prefixes),
        structure=_structure_sends(prefixes, minibatches),
        partials=tuple(
            _partial_step(inputs, prefixes[i], i, j, mb, feature_service)
            for i in range(n)
            for j, mb in enumerate(minibatches)
        ),
        combines=tuple(_combine(prefixes, j, mb, layout.hidden) for j, mb in enumerate(minibatches)),
        dp_layers=range(1, inputs.model.num_layers),
        slice_updates=tuple(p3_name(p, "update-slice") for p in prefixes),
        previous_slice_updates=previous,
        allreduce=task_ids.allreduce_task(iteration),
        updates=tuple(task_ids.update_task(iteration, w) for w in range(n)),
    )


def _structure_sends(prefixes: tuple[str, ...], minibatches: list[Minibatch]) -> tuple[StructureSend, ...]:
    """Every worker's first block's structure to every other worker."""
    return tuple(
        StructureSend(
            p3_name(prefixes[j], "graph", to=i), j, i, structure_entries(mb.blocks[0]), mb.blocks[0].num_edges
        )
        for j, mb in enumerate(minibatches)
        for i in range(len(prefixes))
        if i != j
    )


def _partial_step(
    inputs: SchemeInputs, prefix: str, i: int, j: int, mb: Minibatch, feature_service: bool
) -> PartialStep:
    """Worker ``i``'s partial first layer of worker ``j``'s minibatch ``mb``."""
    vertices = mb.input_nodes
    placement = inputs.placement
    cached = (
        placement.membership.contains(i, vertices)
        if placement is not None
        else np.zeros(vertices.shape[0], dtype=bool)
    )
    hits = bool(cached.any())
    misses = not bool(cached.all())
    read = SliceRead(
        cached=cached,
        local_task=p3_name(prefix, "local", minibatch=j) if hits else None,
        host_task=p3_name(prefix, "host", minibatch=j) if misses else None,
        serve_task=p3_name(prefix, "host.serve", minibatch=j) if misses and feature_service else None,
        gathered=p3_name(prefix, "cached-slice", minibatch=j),
    )
    b0 = mb.blocks[0]
    return PartialStep(
        worker=i,
        minibatch=j,
        sizes=(b0.num_src, b0.num_dst, b0.num_edges),
        read=read,
        forward=p3_name(prefix, "fwd0-partial", minibatch=j),
        backward=p3_name(prefix, "bwd0-partial", minibatch=j),
        saved=p3_name(prefix, "act0-partial", minibatch=j),
        output=p3_name(prefix, "partial", minibatch=j),
    )


def _combine(prefixes: tuple[str, ...], j: int, mb: Minibatch, hidden: int) -> Combine:
    """Minibatch ``j``'s sum of partials on worker ``j`` and its gradient back to the others."""
    rows = mb.blocks[0].num_dst
    others = [i for i in range(len(prefixes)) if i != j]
    prefix = prefixes[j]
    return Combine(
        worker=j,
        prefix=prefix,
        rows=rows,
        forward=p3_name(prefix, "fwd0-combine"),
        backward=p3_name(prefix, "bwd0-combine"),
        activation=task_ids.activation_tensor(prefix, 0),
        gradient=p3_name(prefix, "grad0"),
        partials_in=tuple(
            ActivationSend(p3_name(prefixes[i], "partial", minibatch=j, to=j), i, j, rows, hidden, "partials")
            for i in others
        ),
        gradients_out=tuple(
            ActivationSend(p3_name(prefix, "grad0", to=i), j, i, rows, hidden, "gradients") for i in others
        ),
    )
