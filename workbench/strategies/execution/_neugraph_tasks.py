"""The tasks both of NeuGraph's processing orders plan the same way, and the state they share.

:class:`StreamState` is what one plan's passes hand each other: which task last wrote each
chunk to host, each GPU's edge computes so far (a streaming buffer is free again when the
compute ``window`` places back ends), the iteration's weight-gradient tasks. :class:`StreamTasks`
adds to the plan what the orders have in common: an edge sub-chunk's compute, a column's
destination chunk, ApplyVertex (forward, with its swap-out) and ApplyVertex backward.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.model import DTYPE_BYTES
from workbench.plan import Plan
from workbench.strategies.execution._neugraph_profile import vertex_features
from workbench.strategies.execution._neugraph_schedule import NeuGraphTaskIds as Ids
from workbench.strategies.execution._neugraph_schedule import StreamSchedule

# Layer kinds whose functions read the destination vertex's own data, so a column loads its
# destination chunk once (GCN's edge function reads only the source and the edge weight).
READS_DESTINATION = frozenset({"sage", "gat", "gin", "commnet", "ggnn"})
# What a chunk's host copy holds: ("saved", layer, chunk) its ApplyVertex's saved tensors (the
# next layer reads the output from them), ("dA", layer, chunk) the gradient of its accumulation.
HostKey = tuple[str, int, int]


@dataclass
class StreamState:
    """What the passes of one plan share while they add tasks to it."""

    plan: Plan
    history: list[list[str]]  # each GPU's edge computes, in order
    writer: dict[HostKey, str] = field(default_factory=dict)  # the task that last wrote it to host
    filtered_chunks: int = 0  # edge chunks whose vertex chunk the CPU filtered (the plan's meta)
    # This iteration: the previous one's optimizer steps, which GPUs have started computing,
    # the weight-gradient tasks the all-reduce waits for.
    update: list[str] | None = None
    started: list[bool] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)


class StreamTasks:
    """Adds the tasks both orders share to ``state.plan``, on ``schedule``'s grid."""

    def __init__(self, schedule: StreamSchedule, state: StreamState) -> None:
        self.schedule = schedule
        self.setup = schedule.setup
        self.state = state
        self.plan = state.plan

    def begin_iteration(self, previous_steps: list[str] | None) -> None:
        """Start an iteration after the one whose optimizer steps are ``previous_steps``."""
        self.state.update = previous_steps
        self.state.started = [False] * len(self.setup.workers)
        self.state.finals = []

    def window_deps(self, w: int) -> list[str]:
        """A copy into GPU ``w`` waits for the edge compute ``window`` places back (its buffer)."""
        h = self.state.history[w]
        return [h[-self.setup.window]] if len(h) >= self.setup.window else []

    def weights_ready(self, w: int) -> list[str]:
        """The previous iteration's optimizer step on GPU ``w`` (what reads of the weights wait for)."""
        return [self.state.update[w]] if self.state.update else []

    def written(self, key: HostKey) -> list[str]:
        """The task that wrote ``key`` to host, if one has (what a load of it waits for)."""
        return [self.state.writer[key]] if key in self.state.writer else []

    def edge_compute(
        self,
        tid: str,
        w: int,
        it: int,
        layer: int,
        backward: bool,
        deps: list[str],
        features: dict[str, float],
        items: int,
        allocate: dict[str, int] | None = None,
        free: list[str] | None = None,
    ) -> None:
        """One sub-chunk's Scatter-ApplyEdge-Gather (or its backward) on GPU ``w``, after the
        GPU's previous edge compute (one accumulation stream per GPU)."""
        history = self.state.history[w]
        deps = deps + history[-1:]
        if not self.state.started[w]:
            deps += self.weights_ready(w)  # the iteration's first compute on this GPU
            self.state.started[w] = True
        self.plan.compute(
            tid,
            self.setup.gpu(w),
            "backward" if backward else "forward",
            deps,
            worker=w,
            iteration=it,
            layer=layer,
            items=items,
            features=features,
            allocate=allocate or {},
            free=free or [],
        )
        history.append(tid)

    def load_destination(self, it: int, layer: int, w: int, o: int, prefix: str) -> str:
        """The destination chunk a layer's functions read, loaded once per column (named, freed by ApplyVertex)."""
        name = f"{prefix}.dst"
        n = int(self.setup.sizes[o])
        nbytes = n * self.setup.model.layers[layer].in_dim * DTYPE_BYTES
        self.plan.transfer(
            name,
            self.setup.host,
            self.setup.gpu(w),
            nbytes,
            "h2d",
            self.written(("saved", layer - 1, o)) + self.window_deps(w),
            worker=w,
            iteration=it,
            items=n,
            carries="features" if layer == 0 else "activations",
            allocate={name: nbytes},
        )
        return name

    def apply_vertex(
        self,
        it: int,
        w: int,
        layer: int,
        o: int,
        prefix: str,
        after: list[str],
        acc: str | None,
        dst: str | None,
    ) -> str:
        """ApplyVertex of chunk ``o`` on GPU ``w`` (after ``after``, reading accumulation ``acc``),
        then its swap-out (accumulation and output) to host. Returns the ApplyVertex task."""
        spec = self.setup.model.layers[layer]
        n = int(self.setup.sizes[o])
        allocate = {f"{prefix}.out": n * spec.output_width * DTYPE_BYTES}
        if acc is None:  # no edge into the chunk (or partial sums loaded): the accumulation starts here
            acc = f"{prefix}.acc"
            allocate[acc] = n * spec.in_dim * DTYPE_BYTES
        vertex = Ids.apply_vertex(prefix)
        self.plan.compute(
            vertex,
            self.setup.gpu(w),
            "forward",
            after + ([dst] if dst else []) + self.weights_ready(w),
            worker=w,
            iteration=it,
            layer=layer,
            items=n,
            features=vertex_features(spec, n, False),
            allocate=allocate,
            free=[dst] if dst else [],
        )
        save = Ids.save(prefix)
        self.plan.transfer(
            save,
            self.setup.gpu(w),
            self.setup.host,
            self.setup.saved_bytes(layer, o),
            "d2h",
            [vertex],
            worker=w,
            iteration=it,
            items=n,
            carries="activations",
            free=[acc, f"{prefix}.out"],
        )
        self.state.writer[("saved", layer, o)] = save
        return vertex

    def vertex_backward(self, it: int, w: int, layer: int, o: int, after: list[str], grad: str | None) -> str:
        """ApplyVertex backward of ``layer`` for chunk ``o`` on GPU ``w``: swap its saved tensors in,
        read the output gradient (``grad``, on the GPU; the top layer's comes from the loss),
        accumulate the weights' gradient, and write ``dA_o`` to host when the layer below
        streams it (``layer >= 1``). Returns the compute."""
        spec = self.setup.model.layers[layer]
        n = int(self.setup.sizes[o])
        prefix = Ids.vertex_prefix(it, layer, w, o)
        swap = Ids.swap_in(prefix)
        self.plan.transfer(
            swap,
            self.setup.host,
            self.setup.gpu(w),
            self.setup.saved_bytes(layer, o),
            "h2d",
            [self.state.writer[("saved", layer, o)], *self.window_deps(w)],
            worker=w,
            iteration=it,
            items=n,
            carries="activations",
        )
        keeps = layer >= 1  # the layer below streams dA_o from host
        gradient = Ids.gradient_tensor(prefix)
        compute = Ids.apply_vertex(prefix)
        self.plan.compute(
            compute,
            self.setup.gpu(w),
            "backward",
            [swap, *after],
            worker=w,
            iteration=it,
            layer=layer,
            items=n,
            features=vertex_features(spec, n, True),
            allocate={gradient: n * spec.in_dim * DTYPE_BYTES} if keeps else {},
            free=[grad] if grad else [],
        )
        self.state.finals.append(compute)
        if keeps:
            self.write_gradient(it, w, layer, o, compute, gradient)
        return compute

    def write_gradient(self, it: int, w: int, layer: int, o: int, compute: str, gradient: str) -> None:
        """Write ``dA_o`` (tensor ``gradient``, made by ``compute``) to host for the layer below."""
        n = int(self.setup.sizes[o])
        write = Ids.gradient_write(Ids.vertex_prefix(it, layer, w, o))
        self.plan.transfer(
            write,
            self.setup.gpu(w),
            self.setup.host,
            n * self.setup.model.layers[layer].in_dim * DTYPE_BYTES,
            "d2h",
            [compute],
            worker=w,
            iteration=it,
            items=n,
            carries="gradients",
            free=[gradient],
        )
        self.state.writer[("dA", layer, o)] = write


class LayerPass:
    """What both orders' passes over one layer share: the layer, its direction and what its
    streamed rows are. ``outer``: the chunk kind the pass walks outermost forward ("dst" for
    column-row, "src" for row-column); backward walks the other one."""

    def __init__(self, tasks: StreamTasks, it: int, layer: int, backward: bool, outer: str) -> None:
        self.tasks = tasks
        self.setup = tasks.setup
        self.plan = tasks.plan
        self.it = it
        self.layer = layer
        self.backward = backward
        self.spec = self.setup.model.layers[layer]
        self.width = self.spec.in_dim * DTYPE_BYTES  # bytes of a row: H_l forward, dA_l backward
        inner = "src" if outer == "dst" else "dst"
        self.stats = self.setup.stats(inner if backward else outer)
        self.tag = Ids.pass_tag(layer, backward)
        self.carries = "gradients" if backward else ("features" if layer == 0 else "activations")
        self.source = "dA" if backward else "saved"  # the host copy the rows come from
        self.source_layer = layer if backward else layer - 1
