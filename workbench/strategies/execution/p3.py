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
"""

from __future__ import annotations

import dataclasses

import numpy as np

from workbench.errors import ConfigError
from workbench.model import DTYPE_BYTES, INDEX_BYTES, ModelSpec
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution.base import (
    PREFETCH_HELP,
    ExecutionScheme,
    Prefetch,
    SchemeInputs,
    add_forward_backward,
    add_gradient_sync,
    add_sampling,
    block_sizes,
    check_prefetch,
)
from workbench.strategies.sampling.base import Block, Minibatch

# First-layer kinds whose input transform splits over feature slices into partial
# activations of the destination vertices (aggregate, then multiply: both linear).
SPLITTABLE_FIRST_LAYERS = ("gcn", "sage")


def slice_widths(feat_dim: int, workers: int) -> list[int]:
    """Feature dimensions per worker: ``feat_dim // workers``, the first ``feat_dim % workers`` one more."""
    base, extra = divmod(feat_dim, workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]


def structure_bytes(block: Block) -> int:
    """Bytes of a sampled block's structure as the sampler returns it: source and destination
    ids and the local endpoints of every edge, 8-byte integers."""
    return (block.num_src + block.num_dst + 2 * block.num_edges) * INDEX_BYTES


@EXECUTION_SCHEMES.register("p3")
class P3Scheme(ExecutionScheme):
    """P3: first layer model parallel over feature slices (partials all-to-all), the rest data parallel."""

    real_run_params = {"prefetch": 0, "feature_service": False}  # realrun.schemes.p3: no feature service in the real store
    HELP = {
        "prefetch": PREFETCH_HELP,
        "feature_service": "each worker's host slice rows come through paper 003's artifact's feature "
        "service (p3_cache.go): its server looks each row up and copies it (a host task per row) before "
        "the host-to-device copy; false: straight from host memory",
    }

    def __init__(self, prefetch: int = 1, feature_service: bool = False) -> None:
        self.prefetch = check_prefetch(prefetch, "p3")
        self.feature_service = feature_service

    def build(self, inputs: SchemeInputs) -> Plan:
        model = inputs.model
        n = inputs.num_workers
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
        per_dim = inputs.feature_bytes // first.in_dim
        widths = slice_widths(first.in_dim, n)
        slices = [dataclasses.replace(first, in_dim=w) for w in widths]
        dp_model = ModelSpec(f"{model.name} layers 2..{model.num_layers}", model.layers[1:])
        dp_inputs = dataclasses.replace(inputs, model=dp_model)

        service = {"feature_service": True} if self.feature_service else {}  # meta only when on
        plan = self.empty_plan(inputs, slice_widths=widths, prefetch=self.prefetch, **service)
        for i, gpu in enumerate(inputs.workers):
            slice_model = ModelSpec(f"{model.name} layer 1 slice {i}", (slices[i],))
            state = dp_model.training_state_bytes(inputs.optimizer) + slice_model.training_state_bytes(
                inputs.optimizer
            )
            plan.keep(f"w{i}.training-state", gpu, state)
            if inputs.placement is not None:
                cached = int(inputs.placement.gpu_vertices[i].shape[0])
                if cached:
                    plan.keep(f"w{i}.feature-cache", gpu, cached * widths[i] * per_dim)

        width = first.output_width
        dp_steps: list[str] = []
        slice_steps: list[str] = []
        ahead = Prefetch(self.prefetch)
        for it, minibatches in enumerate(inputs.epoch):
            samples = [
                add_sampling(plan, inputs, j, it, mb, f"i{it}.w{j}", ahead)
                for j, mb in enumerate(minibatches)
            ]
            # 1. block 0's structure to every other worker.
            ready = [
                [samples[j] for j in range(n)] for _ in range(n)
            ]  # ready[i][j]: i may start on j's block
            for j, mb in enumerate(minibatches):
                for i in range(n):
                    if i == j:
                        continue
                    tid = f"i{it}.w{j}.graph-to-w{i}"
                    plan.transfer(
                        tid,
                        inputs.workers[j],
                        inputs.workers[i],
                        structure_bytes(mb.blocks[0]),
                        "sample",
                        [samples[j]],
                        worker=j,
                        iteration=it,
                        items=mb.blocks[0].num_edges,
                        carries="adjacency",
                    )
                    ready[i][j] = tid
            # 2. every worker's partial first layer of every minibatch, over its slice.
            partials: dict[tuple[int, int], str] = {}
            for i, gpu in enumerate(inputs.workers):
                for j, mb in enumerate(minibatches):
                    prefix = f"i{it}.w{i}.mb{j}"
                    deps = [ready[i][j]]
                    reads, gathered = self._slice_reads(
                        plan, inputs, i, it, mb, widths[i] * per_dim, deps, prefix, self.feature_service
                    )
                    src, dst, edges = block_sizes(mb)[0]
                    tid = f"{prefix}.fwd0-partial"
                    plan.compute(
                        tid,
                        gpu,
                        "forward",
                        (reads or deps) + ([slice_steps[i]] if slice_steps else []),
                        worker=i,
                        iteration=it,
                        layer=0,
                        items=edges,
                        features=slices[i].cost_features(src, dst, edges),
                        allocate={
                            f"{prefix}.act0-partial": slices[i].saved_for_backward_bytes(src, dst, edges),
                            f"{prefix}.partial": dst * width * DTYPE_BYTES,
                        },
                        free=gathered,
                    )
                    partials[(i, j)] = tid
            # 3. partials all-to-all (per pair: j's destinations), summed on j; 4. layers 2..L.
            finals = []
            combines = []
            for j, mb in enumerate(minibatches):
                prefix = f"i{it}.w{j}"
                dst = mb.blocks[0].num_dst
                nbytes = dst * width * DTYPE_BYTES
                arrived = [partials[(j, j)]]
                for i in range(n):
                    if i == j:
                        continue
                    tid = f"i{it}.w{i}.mb{j}.partial-to-w{j}"
                    plan.transfer(
                        tid,
                        inputs.workers[i],
                        inputs.workers[j],
                        nbytes,
                        "alltoall",
                        [partials[(i, j)]],
                        worker=i,
                        iteration=it,
                        items=dst,
                        carries="partials",
                        free=[f"i{it}.w{i}.mb{j}.partial"],
                    )
                    arrived.append(tid)
                combine = f"{prefix}.fwd0-combine"
                plan.compute(
                    combine,
                    inputs.workers[j],
                    "forward",
                    arrived + ([dp_steps[j]] if dp_steps else []),
                    worker=j,
                    iteration=it,
                    layer=0,
                    items=dst,
                    features={
                        "vertices": float(dst),
                        "in_dim": float(width),
                        "out_dim": float(width),
                        "flops": float(n * dst * width),  # N - 1 additions, the bias, the nonlinearity
                        "bytes": float((n + 1) * nbytes),
                    },
                    allocate={f"{prefix}.act0": nbytes},
                    free=[f"{prefix}.mb{j}.partial"],
                )
                combines.append(combine)
                layers = range(1, model.num_layers)
                finals.append(
                    add_forward_backward(
                        plan, inputs, j, it, block_sizes(mb), [combine], prefix, layers=layers
                    )
                )
            # 5. the gradient of the partials back to every slice owner; slice backward and step.
            slice_bwd: list[list[str]] = [[] for _ in range(n)]
            for j, mb in enumerate(minibatches):
                prefix = f"i{it}.w{j}"
                dst = mb.blocks[0].num_dst
                nbytes = dst * width * DTYPE_BYTES
                back = f"{prefix}.bwd0-combine"
                plan.compute(
                    back,
                    inputs.workers[j],
                    "backward",
                    [finals[j]],
                    worker=j,
                    iteration=it,
                    layer=0,
                    items=dst,
                    features={
                        "vertices": float(dst),
                        "in_dim": float(width),
                        "out_dim": float(width),
                        "flops": float(dst * width),
                        "bytes": float(3 * nbytes),
                    },
                    allocate={f"{prefix}.grad0": nbytes},
                    free=[f"{prefix}.act0"],
                )
                sent = []
                arrived_at: dict[int, str] = {j: back}
                for i in range(n):
                    if i == j:
                        continue
                    tid = f"{prefix}.grad0-to-w{i}"
                    plan.transfer(
                        tid,
                        inputs.workers[j],
                        inputs.workers[i],
                        nbytes,
                        "alltoall",
                        [back],
                        worker=j,
                        iteration=it,
                        items=dst,
                        carries="gradients",
                    )
                    sent.append(tid)
                    arrived_at[i] = tid
                src, dst_, edges = block_sizes(mb)[0]
                for i in range(n):
                    pre = f"i{it}.w{i}.mb{j}"
                    tid = f"{pre}.bwd0-partial"
                    # j's own slice waits for its sends too: they read the gradient it frees.
                    plan.compute(
                        tid,
                        inputs.workers[i],
                        "backward",
                        [back, *sent] if i == j else [arrived_at[i]],
                        worker=i,
                        iteration=it,
                        layer=0,
                        items=edges,
                        features=slices[i].backward_cost_features(src, dst_, edges),
                        free=[f"{pre}.act0-partial"] + ([f"{prefix}.grad0"] if i == j else []),
                    )
                    slice_bwd[i].append(tid)
            slice_steps = []
            for i, gpu in enumerate(inputs.workers):
                params = slices[i].param_count()
                state = ModelSpec("slice", (slices[i],)).training_state_bytes(inputs.optimizer)
                tid = f"i{it}.w{i}.update-slice"
                plan.compute(
                    tid,
                    gpu,
                    "update",
                    slice_bwd[i],
                    worker=i,
                    iteration=it,
                    features={"bytes": 2.0 * state, "flops": 4.0 * params},
                )
                slice_steps.append(tid)
            # 6. the data-parallel layers' gradients.
            dp_steps = add_gradient_sync(plan, dp_inputs, it, finals)
            # A worker's step ends with both its data-parallel and its slice update; the later one
            # in the plan's order bounds how far ahead it samples.
            ahead.record(dp_steps)
            inputs.planned(it)
        return plan

    @staticmethod
    def _slice_reads(
        plan: Plan,
        inputs: SchemeInputs,
        i: int,
        it: int,
        mb: Minibatch,
        slice_bytes: int,
        deps: list[str],
        prefix: str,
        service: bool = False,
    ) -> tuple[list[str], list[str]]:
        """Worker ``i`` reads slice ``i`` of the minibatch's input vertices: cached ones with a gather
        on its GPU, the rest from its machine's host memory (through the feature service's lookups
        when ``service``). Returns task ids and gathered tensors."""
        vertices = mb.input_nodes
        gpu = inputs.workers[i]
        hit = (
            inputs.cached_masks[i][vertices]  # type: ignore[index]
            if inputs.placement is not None
            else np.zeros(vertices.shape[0], dtype=bool)
        )
        hits = int(hit.sum())
        misses = int(vertices.shape[0]) - hits
        ids: list[str] = []
        tensors: list[str] = []
        if hits:
            tid = f"{prefix}.local"
            plan.compute(
                tid,
                gpu,
                "gather_local",
                deps,
                worker=i,
                iteration=it,
                items=hits,
                features={"vertices": float(hits), "bytes": 2.0 * hits * slice_bytes},
                allocate={f"{prefix}.cached-slice": hits * slice_bytes},
            )
            ids.append(tid)
            tensors.append(f"{prefix}.cached-slice")
        if misses:
            tid = f"{prefix}.host"
            if service:  # the service looks each row's slice up and copies it into its reply
                work = {"vertices": float(misses), "bytes": 2.0 * misses * slice_bytes}
                host = inputs.host_of_worker(i)
                plan.compute(
                    f"{tid}.serve",
                    host,
                    "gather_local",
                    deps,
                    worker=i,
                    iteration=it,
                    items=misses,
                    features=work,
                )
                deps = [f"{tid}.serve"]
            plan.transfer(
                tid,
                inputs.host_of_worker(i),
                gpu,
                misses * slice_bytes,
                "h2d",
                deps,
                worker=i,
                iteration=it,
                items=misses,
                carries="features",
            )
            ids.append(tid)
        return ids, tensors
