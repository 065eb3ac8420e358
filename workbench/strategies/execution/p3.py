"""``p3``: P3's hybrid of a model-parallel first layer and data-parallel remaining layers.

P3 (Gandhi and Iyer, OSDI 2021) is the baseline that HopGNN (paper 003,
``papers/003_439ad467d2bd0ad5.txt``, sections 1 and 7) compares against: it "combines
model parallelism and data parallelism based on random hash partitioning",
"minimizing the transfer of original vertex features but necessitating additional
intermediate data movement", and its gain shrinks as the hidden dimension grows,
because of "the inter-server transmission of hidden embeddings".

Layout. The ``F`` input feature dimensions are cut into ``N`` slices, one per worker
(``F // N`` dimensions each, the first ``F % N`` slices one more). Worker ``i``'s
machine keeps slice ``i`` of *every* vertex's features in host memory, so no raw
feature ever crosses the network. With a placement, worker ``i``'s GPU caches slice
``i`` of the vertices the placement gives it (the same vertices, ``1/N`` of the bytes).

Per iteration, with ``N`` minibatches (one per worker) and ``B_j`` = block 0 of worker
``j``'s minibatch (the first GNN layer: ``src0_j`` input vertices, ``dst0_j``
destinations, ``E0_j`` edges):

1. every worker ``j`` samples its minibatch on its host (``sample``) and sends the
   structure of ``B_j`` from its GPU (where, as in model-centric, the sampled blocks are
   taken to be once sampled) to every other worker's GPU (``sample`` phase,
   ``adjacency``): its arrays as the sampler returns them, ``(src0_j + dst0_j + 2 E0_j)
   x 8`` bytes (global source and destination ids, local edge endpoints);
2. layer 1, model parallel: every worker ``i`` reads slice ``i`` of ``src0_j``'s
   features for *every* minibatch ``j`` (``h2d`` from its host, ``gather_local`` from
   its cache: ``|src0_j| x w_i x 4`` bytes, ``w_i`` the slice width) and computes the
   partial first-layer activations of ``B_j`` over its slice (aggregation and the rows
   of the input transform that the slice multiplies);
3. the partial activations go all-to-all: worker ``i`` sends worker ``j``
   ``dst0_j x H x 4`` bytes (``H`` the first layer's output width): the size is what
   ``j``'s minibatch needs, so pairs differ (``alltoall`` phase, ``partials``);
   ``j`` sums the ``N`` partials, adds the bias and applies the nonlinearity;
4. layers 2..L, data parallel: forward and backward on ``j``'s GPU as model-centric;
5. backward of layer 1: the gradient of the sum is the gradient of every partial, so
   ``j`` sends worker ``i`` the same ``dst0_j x H x 4`` bytes back (``alltoall``,
   ``gradients``) and ``i`` computes the gradient of its slice of the weights;
6. the data-parallel layers' gradients (``sum_{l >= 2} params_l x 4`` bytes per
   worker) are all-reduced; each worker steps the optimizer on them and, separately,
   on its own slice of the first layer's weights, which nobody else holds (no
   all-reduce for layer 1).

Per iteration the bytes are therefore: ``sample`` ``(N - 1) sum_j (src0_j + dst0_j +
2 E0_j) 8``; ``h2d`` + ``gather_local`` ``sum_j src0_j F 4`` (every vertex row read
once over the slices); ``alltoall`` ``2 (N - 1) sum_j dst0_j H 4``; ``allreduce``
``sum_{l >= 2} params_l 4``; ``gather_remote`` 0.

Why per-pair transfers and not the plan's ``alltoall`` collective: a collective has
one buffer size per device, i.e. an equal split, and P3's exchange is an
all-to-all-v (the pair ``i -> j`` carries ``j``'s destinations). The exchange is the
``N (N - 1)`` transfers, issued together; a worker's sum waits for all of them.

Modeling choices: P3 partitions the graph structure by random hash; here any
partitioner decides which seeds each worker trains on (sampling itself is as in
model-centric, on the worker's host). The first layer's parameters are counted per
slice (``LayerSpec`` with the slice width as input), so each worker also counts one
bias of the first layer ((N - 1) x H x 4 bytes more in total than the model holds).
Only first layers whose input transform splits by input dimensions into partial
activations per destination vertex are modeled: ``gcn`` and ``sage`` (GAT's
attention would need the partial projections of the source vertices instead).

One schedule, two executors: every decision above (the slices, the structure each worker
sends and its size, the partials and gradients per pair, each task's id) is made once per
iteration by :meth:`P3Scheme.schedule` (``_p3_schedule``); this module turns the schedule
into tasks and costs, ``realrun.schemes.p3`` carries the same schedule out for real.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.model import DTYPE_BYTES, ModelSpec
from workbench.plan import Plan, ResidentTensor
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution._p3_schedule import (
    SPLITTABLE_FIRST_LAYERS,
    ActivationSend,
    Combine,
    P3Layout,
    P3Schedule,
    PartialStep,
    SliceRead,
    StructureSend,
    p3_layout,
    p3_name,
    p3_schedule,
    slice_widths,
    structure_bytes,
    structure_entries,
)
from workbench.strategies.execution.base import (
    PREFETCH_HELP,
    IterationPlanner,
    MinibatchScheme,
    SchemeInputs,
    add_forward_backward,
    add_gradient_sync,
    check_prefetch,
)
from workbench.strategies.sampling.base import Minibatch

__all__ = [
    "SPLITTABLE_FIRST_LAYERS",
    "ActivationSend",
    "Combine",
    "P3Layout",
    "P3Schedule",
    "P3Scheme",
    "PartialStep",
    "SliceRead",
    "StructureSend",
    "p3_name",
    "slice_widths",
    "structure_bytes",
    "structure_entries",
]


@EXECUTION_SCHEMES.register("p3")
class P3Scheme(MinibatchScheme):
    """P3: first layer model parallel over feature slices (partials all-to-all), the rest data parallel.

    :meth:`schedule` decides each iteration (:class:`P3Schedule`); the plan builder
    (:class:`_P3Iteration`, on :class:`MinibatchScheme`'s epoch loop) and the real executor
    (``realrun.schemes.p3``) both carry that schedule out."""

    # realrun.schemes.p3 hands a minibatch over after the previous step; the real store has no feature service.
    real_run_params = {"prefetch": 0, "feature_service": False, "serial_reads": False, "padded_copy": False}
    HELP = {
        "prefetch": PREFETCH_HELP,
        "feature_service": "each worker's host slice rows come through paper 003's artifact's feature "
        "service (p3_cache.go): its server looks each row up and copies it (a host task per row) before "
        "the host-to-device copy; false: straight from host memory",
        "serial_reads": "each worker reads its slice of the minibatches one after another once every "
        "structure has arrived, as paper 003's artifact's P3 client does (dgl_p3.py: one blocking "
        "fetch_data per minibatch after get_nfs); false: each minibatch's read starts when its structure "
        "arrives, beside the others",
        "padded_copy": "each slice is padded with zeros to the full feature width before the "
        "host-to-device copy, as the artifact's P3 client does (storage_dist.py, DistCacheClientP3: "
        "F.pad, then .cuda()); false: the copy carries the slice's width",
    }

    def __init__(
        self,
        prefetch: int = 1,
        feature_service: bool = False,
        serial_reads: bool = False,
        padded_copy: bool = False,
    ) -> None:
        self.prefetch = check_prefetch(prefetch, "p3")
        self.feature_service = feature_service
        self.serial_reads = serial_reads
        self.padded_copy = padded_copy
        self._forget()

    def _forget(self) -> None:
        """Drop the layout and schedule kept for the last inputs."""
        self._inputs: SchemeInputs | None = None
        self._layout: P3Layout | None = None
        self._last: P3Schedule | None = None

    def __getstate__(self) -> dict[str, Any]:
        # What is kept for the last inputs is recomputed where the scheme arrives (a worker).
        state = dict(self.__dict__)
        state.update(_inputs=None, _layout=None, _last=None)
        return state

    def layout(self, inputs: SchemeInputs) -> P3Layout:
        """The run's slices and models (refuses inputs P3 cannot split), kept per inputs."""
        if self._inputs is not inputs or self._layout is None:
            layout = p3_layout(inputs)
            self._forget()
            self._inputs, self._layout = inputs, layout
        return self._layout

    def schedule(self, inputs: SchemeInputs, iteration: int) -> P3Schedule:
        """Iteration ``iteration``'s schedule; the last one is kept, so the plan builder's and a
        caller's right after it are one object."""
        layout = self.layout(inputs)
        if self._last is None or self._last.iteration != iteration:
            self._last = p3_schedule(inputs, layout, iteration, self.feature_service)
        return self._last

    def check_inputs(self, inputs: SchemeInputs) -> None:
        self.layout(inputs)

    def plan_details(self, inputs: SchemeInputs) -> dict[str, object]:
        flags = ("feature_service", "serial_reads", "padded_copy")
        on = {flag: True for flag in flags if getattr(self, flag)}  # meta only when on
        return {"slice_widths": list(self.layout(inputs).widths), "prefetch": self.prefetch, **on}

    def keep_resident(self, plan: Plan, inputs: SchemeInputs) -> None:
        # P3's GPUs keep layers 2..L, a slice of layer 1 and a slice of each cached row.
        plan.resident.extend(resident_state(inputs, self.layout(inputs)))

    def iteration_planner(
        self, plan: Plan, inputs: SchemeInputs, iteration: int, previous_steps: list[str]
    ) -> IterationPlanner:
        client = _Client(self.serial_reads, self.padded_copy)
        return _P3Iteration(self.schedule(inputs, iteration), plan, inputs, previous_steps, client)


def resident_state(inputs: SchemeInputs, layout: P3Layout) -> list[ResidentTensor]:
    """Each GPU's state for the whole epoch: layers 2..L's and its first-layer slice's training
    state, and its slice of the rows the placement caches on it."""
    out = []
    for i, gpu in enumerate(inputs.workers):
        state = layout.dp_model.training_state_bytes(inputs.optimizer)
        state += layout.slice_model(i).training_state_bytes(inputs.optimizer)
        out.append(ResidentTensor(f"w{i}.training-state", gpu, state))
        if inputs.placement is not None:
            cached = int(inputs.placement.gpu_vertices[i].shape[0])
            if cached:
                out.append(ResidentTensor(f"w{i}.feature-cache", gpu, cached * layout.row_bytes(i)))
    return out


@dataclasses.dataclass(frozen=True)
class _Client:
    """How a worker's client reads its slices (both off: the scheme as P3's paper describes it)."""

    serial_reads: bool = False  # one minibatch after another, once every structure has arrived
    padded_copy: bool = False  # the host-to-device copy at the full feature width


class _P3Iteration(IterationPlanner):
    """One iteration's tasks and costs, from its schedule: once every worker has sampled, the
    structure exchange, every slice's partials, the sums and layers 2..L, the gradients back to
    the slices and their steps, then layers 2..L's gradient sync."""

    def __init__(
        self,
        schedule: P3Schedule,
        plan: Plan,
        inputs: SchemeInputs,
        previous_steps: list[str],
        client: _Client | None = None,
    ) -> None:
        self.schedule, self.plan, self.inputs = schedule, plan, inputs
        self.client = client or _Client()
        self.it = schedule.iteration
        self.previous_steps = previous_steps  # each worker's data-parallel step of the iteration before
        self.minibatches: list[Minibatch] = []
        self.samples: list[str] = []

    def sampled(self, w: int, minibatch: Minibatch, sample: str) -> None:
        self.minibatches.append(minibatch)
        self.samples.append(sample)

    def finish(self) -> list[str]:
        ready = self._structure()
        self._partials(ready)
        finals = [self._combine(c) for c in self.schedule.combines]
        for c in self.schedule.combines:
            self._combine_backward(c, finals[c.worker])
        self._slice_updates()
        dp_inputs = dataclasses.replace(self.inputs, model=self.schedule.layout.dp_model)
        return add_gradient_sync(self.plan, dp_inputs, self.it, finals)

    def _structure(self) -> list[list[str]]:
        """Step 1. Returns ``ready[i][j]``: after what worker ``i`` may start on ``j``'s block."""
        n = self.schedule.num_workers
        ready = [list(self.samples) for _ in range(n)]
        for s in self.schedule.structure:
            self._send(
                s.task,
                s.sender,
                s.receiver,
                s.nbytes,
                "sample",
                [self.samples[s.sender]],
                s.edges,
                "adjacency",
            )
            ready[s.receiver][s.sender] = s.task
        return ready

    def _send(
        self,
        task: str,
        sender: int,
        receiver: int,
        nbytes: int,
        phase: str,
        deps: list[str],
        items: int,
        carries: str,
        free: list[str] | None = None,
    ) -> None:
        workers = self.inputs.workers
        extra = {"free": free} if free else {}
        self.plan.transfer(
            task,
            workers[sender],
            workers[receiver],
            nbytes,
            phase,
            deps,
            worker=sender,
            iteration=self.it,
            items=items,
            carries=carries,
            **extra,
        )

    def _partials(self, ready: list[list[str]]) -> None:
        """Step 2: every worker's partial first layer of every minibatch, over its slice."""
        layout, previous = self.schedule.layout, self.schedule.previous_slice_updates
        last_read: dict[int, list[str]] = {}  # serial reads: each worker's previous read
        for p in self.schedule.partials:
            i = p.worker
            deps = [ready[i][p.minibatch]]
            if self.client.serial_reads:  # after every structure, and after the read before
                deps = list(dict.fromkeys(ready[i])) + last_read.get(i, [])
            copy_bytes = self.inputs.feature_bytes if self.client.padded_copy else layout.row_bytes(i)
            reads, gathered = _slice_reads(
                self.plan, self.inputs, i, self.it, p.read, layout.row_bytes(i), deps, copy_bytes
            )
            last_read[i] = reads or last_read.get(i, [])
            src, dst, edges = p.sizes
            layer = layout.slice_layer(i)
            self.plan.compute(
                p.forward,
                self.inputs.workers[i],
                "forward",
                (reads or deps) + ([previous[i]] if previous else []),
                worker=i,
                iteration=self.it,
                layer=0,
                items=edges,
                features=layer.cost_features(src, dst, edges),
                allocate={
                    p.saved: layer.saved_for_backward_bytes(src, dst, edges),
                    p.output: dst * layout.hidden * DTYPE_BYTES,
                },
                free=gathered,
            )

    def _combine(self, c: Combine) -> str:
        """Steps 3 and 4 for minibatch ``c.worker``: the partials arrive and are summed, then
        layers 2..L forward and backward. Returns the last backward task."""
        j, n, width = c.worker, self.schedule.num_workers, self.schedule.layout.hidden
        arrived = [self.schedule.partial(j, j).forward]
        for s in c.partials_in:
            own = self.schedule.partial(s.sender, j)
            self._send(
                s.task,
                s.sender,
                s.receiver,
                s.nbytes,
                "alltoall",
                [own.forward],
                s.rows,
                s.carries,
                [own.output],
            )
            arrived.append(s.task)
        nbytes = c.rows * width * DTYPE_BYTES
        self.plan.compute(
            c.forward,
            self.inputs.workers[j],
            "forward",
            arrived + ([self.previous_steps[j]] if self.previous_steps else []),
            worker=j,
            iteration=self.it,
            layer=0,
            items=c.rows,
            features={
                "vertices": float(c.rows),
                "in_dim": float(width),
                "out_dim": float(width),
                "flops": float(n * c.rows * width),  # N - 1 additions, the bias, the nonlinearity
                "bytes": float((n + 1) * nbytes),
            },
            allocate={c.activation: nbytes},
            free=[self.schedule.partial(j, j).output],
        )
        sizes = [(b.num_src, b.num_dst, b.num_edges) for b in self.minibatches[j].blocks]
        return add_forward_backward(
            self.plan, self.inputs, j, self.it, sizes, [c.forward], c.prefix, layers=self.schedule.dp_layers
        )

    def _combine_backward(self, c: Combine, final: str) -> None:
        """Step 5 for minibatch ``c.worker``: the gradient of the sum, sent to every slice's worker,
        and each slice's backward."""
        j, width = c.worker, self.schedule.layout.hidden
        nbytes = c.rows * width * DTYPE_BYTES
        self.plan.compute(
            c.backward,
            self.inputs.workers[j],
            "backward",
            [final],
            worker=j,
            iteration=self.it,
            layer=0,
            items=c.rows,
            features={
                "vertices": float(c.rows),
                "in_dim": float(width),
                "out_dim": float(width),
                "flops": float(c.rows * width),
                "bytes": float(3 * nbytes),
            },
            allocate={c.gradient: nbytes},
            free=[c.activation],
        )
        arrived_at = {j: c.backward}
        for s in c.gradients_out:
            self._send(s.task, s.sender, s.receiver, s.nbytes, "alltoall", [c.backward], s.rows, s.carries)
            arrived_at[s.receiver] = s.task
        sent = [s.task for s in c.gradients_out]
        for i in range(self.schedule.num_workers):
            self._partial_backward(
                self.schedule.partial(i, j), c, [c.backward, *sent] if i == j else [arrived_at[i]]
            )

    def _partial_backward(self, p: PartialStep, c: Combine, deps: list[str]) -> None:
        """Worker ``p.worker``'s backward of its partial of ``c``'s minibatch. The minibatch's own
        worker's waits for its sends too: they read the gradient it frees."""
        i = p.worker
        own = i == c.worker
        self.plan.compute(
            p.backward,
            self.inputs.workers[i],
            "backward",
            deps,
            worker=i,
            iteration=self.it,
            layer=0,
            items=p.sizes[2],
            features=self.schedule.layout.slice_layer(i).backward_cost_features(*p.sizes),
            free=[p.saved] + ([c.gradient] if own else []),
        )

    def _slice_updates(self) -> None:
        """Each worker steps its slice of the first layer (nobody else holds it: no all-reduce)."""
        layout = self.schedule.layout
        for i, tid in enumerate(self.schedule.slice_updates):
            layer = layout.slice_layer(i)
            state = ModelSpec("slice", (layer,)).training_state_bytes(self.inputs.optimizer)
            backwards = [self.schedule.partial(i, j).backward for j in range(self.schedule.num_workers)]
            self.plan.compute(
                tid,
                self.inputs.workers[i],
                "update",
                backwards,
                worker=i,
                iteration=self.it,
                features={"bytes": 2.0 * state, "flops": 4.0 * layer.param_count()},
            )


def _slice_reads(
    plan: Plan,
    inputs: SchemeInputs,
    i: int,
    it: int,
    read: SliceRead,
    row_bytes: int,
    deps: list[str],
    copy_row_bytes: int | None = None,
) -> tuple[list[str], list[str]]:
    """Worker ``i``'s read of its slice of a minibatch's input vertices, as ``read`` schedules it:
    cached rows gathered on its GPU, the rest from its machine's host memory (through the
    feature service's lookups where scheduled). ``copy_row_bytes``: a host row's bytes in the
    host-to-device copy (default ``row_bytes``; the full width when the client pads the slice).
    Returns task ids and gathered tensors."""
    gpu, host = inputs.workers[i], inputs.host_of_worker(i)
    ids: list[str] = []
    tensors: list[str] = []
    hits, misses = read.hits, read.misses
    if read.local_task is not None:
        plan.compute(
            read.local_task,
            gpu,
            "gather_local",
            deps,
            worker=i,
            iteration=it,
            items=hits,
            features={"vertices": float(hits), "bytes": 2.0 * hits * row_bytes},
            allocate={read.gathered: hits * row_bytes},
        )
        ids.append(read.local_task)
        tensors.append(read.gathered)
    if read.host_task is not None:
        if read.serve_task is not None:  # the service looks each row's slice up and copies it into its reply
            work = {"vertices": float(misses), "bytes": 2.0 * misses * row_bytes}
            plan.compute(
                read.serve_task,
                host,
                "gather_local",
                deps,
                worker=i,
                iteration=it,
                items=misses,
                features=work,
            )
            deps = [read.serve_task]
        plan.transfer(
            read.host_task,
            host,
            gpu,
            misses * (copy_row_bytes or row_bytes),
            "h2d",
            deps,
            worker=i,
            iteration=it,
            items=misses,
            carries="features",
        )
        ids.append(read.host_task)
    return ids, tensors
