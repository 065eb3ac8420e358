"""``neugraph-stream``: NeuGraph's chunk streaming (paper 001, sections 3-4), full-graph training.

The graph is the ``chunk2d`` partitioner's grid (Figs. 4-5): ``P`` vertex chunks and
``P x P`` edge chunks, ``E_ij`` holding the edges from source chunk ``i`` to destination
chunk ``j``; GPU ``g`` owns the destination chunks ``[g P/K, (g+1) P/K)`` (the
partition's owners). Each training iteration is one pass over the whole graph (SAGA-NN,
layer by layer), every vertex and edge chunk streamed from the host memory of the one
server, and the weights' gradients all-reduced at the end.

Processing order (``order``, Fig. 16):

* ``column-row`` (NeuGraph's choice). Forward, column by column: for destination chunk
  ``j`` the GPU streams ``E_0j .. E_{P-1,j}`` with their source vertex chunks
  (Scatter-ApplyEdge-Gather) into the **accumulation chunk A_j, which stays on the GPU
  for the whole column**; then ApplyVertex turns ``A_j`` into the next layer's chunk and
  both are swapped out to host (what backward needs). Backward, row by row: for source
  chunk ``i`` the GPU streams ``E_i0 .. E_{i,P-1}`` with the destination chunks' gradient
  ``dA_j`` into the **source-gradient chunk G_i, which stays on the GPU for the whole
  row**; then the previous layer's ApplyVertex backward for chunk ``i`` runs right there,
  reading ``G_i`` from GPU memory (same owner), and writes its ``dA_i`` to host.
  The **weights' gradients stay on the GPU for the whole iteration** (in the resident
  training state) until the all-reduce.
* ``row-column`` (the order the paper compares against): forward by source rows, so
  every edge chunk loads its destination's partial accumulation from host and writes it
  back (one partial per GPU; the owner of ``j`` loads and sums them before ApplyVertex);
  backward by destination columns, partial source gradients making the same round
  trips. Only the row's input chunk stays on the GPU. As in Fig. 16 this order runs
  without the streaming optimisations: ``selective`` and ``chain`` must be off (the
  paper's filter and chain apply to read-only vertex chunks, and here the streamed chunks
  are per-GPU partial sums); ``pipeline`` applies.

The first layer's backward computes no gradient of the input features (nothing needs
it): only its ApplyVertex backward (its weights' gradient) runs.

Costs: an edge (sub-)chunk's compute gets the layer's per-edge FLOPs
(``forward_flops(0, 0, edges)``) and a chunk's ApplyVertex its per-vertex FLOPs
(``forward_flops(n, n, 0)``, source-only transforms included: NeuGraph's dataflow
optimisation moves them there); for GCN, the paper's model in Figs. 15-17, they add up to
the layer's FLOPs exactly. Backward is ``BACKWARD_FLOP_RATIO`` times forward.

Streaming optimisations, each behind a switch (Figs. 15 and 17):

``selective`` (section 3.2)
    For each edge chunk, ``theta`` = the fraction of the streamed vertex chunk that has
    at least one edge in it, counted from the graph. Filtering copies the ``theta S``
    useful bytes on the CPU (``theta S / Tcopy``) and transfers only them (``theta S /
    Ttrans``); loading the whole chunk costs ``S / Ttrans``. Filtering wins exactly when
    ``theta < Tcopy / (Tcopy + Ttrans)``, so that is the rule. ``Tcopy`` (``copy_throughput``)
    defaults to half the host memory bandwidth (a copy reads and writes every byte; the
    filter task's cost feature is those ``2 theta S`` bytes, timed by the simulator's
    host cost model); ``Ttrans`` (``transfer_throughput``) to the narrowest link from host
    to the GPU. These are one GPU's: the paper uses aggregate throughputs when several
    GPUs share the CPU (section 3.3), which a lower ``copy_throughput`` expresses; the
    simulator does not make concurrent filter tasks share host bandwidth. In a chain
    theta counts the vertices useful to *any* GPU of the virtual GPU, and the filtered
    chunk is what the chain forwards.
``pipeline`` (section 3.2)
    Each edge chunk and its vertex chunk are split horizontally (by the streamed
    vertices) into ``sub_chunks`` = k sub-chunks, and two buffers stream them: sub-chunk
    ``t + 1`` is copied while sub-chunk ``t`` computes (copy ``t`` waits for compute
    ``t - 2`` to free its buffer). Off: one whole edge chunk at a time, its copy after the
    previous chunk's compute (no overlap), as TF-SAGA.
``reorder`` (NG-swap in Fig. 15; with ``pipeline`` only)
    The sub-chunks of one column (one row in backward) are reordered by repeated swaps,
    within one edge chunk as in the paper, of the pair that most shortens the two-buffer
    pipeline's makespan computed from their profiled copy and compute times
    (``_neugraph.reorder_by_swaps``, at most ``reorder_rounds`` swaps). The profile: ``profile(item)`` when given (a callable
    taking a :class:`StreamItem`, returning ``(copy seconds, compute seconds)``: measured
    times from a first iteration go here), else estimates from the item's bytes over
    ``Ttrans`` (plus the filter's bytes over ``Tcopy``) and its FLOPs and bytes over the
    GPU's peak at ``ACHIEVED_FLOPS`` and ``ACHIEVED_BANDWIDTH`` of it. The paper profiles
    the first iterations and reorders the later ones; the estimates need no profiling,
    so every iteration here runs the reordered plan.
``chain`` (section 3.3, Figs. 7-8)
    GPUs under one PCIe switch form a virtual GPU: they walk their columns in lockstep,
    the first GPU loads each vertex sub-chunk from host and every GPU forwards it to the
    next one in the chain (a GPU-to-GPU copy under the switch), so the vertex data cross
    the switch's uplink once instead of once per GPU. Edge chunks are each GPU's own and
    still come from host.

Memory, in the plan's vocabulary (so the simulator's memory timeline checks it): the
accumulation chunk (``...acc``), the next layer's chunk (``...out``), a destination chunk
that the layer reads (``...dst``, kinds other than GCN) and a row's gradient (``...grad``)
are named tensors, allocated by the task that first writes them and freed by the
write-back (or the compute) that consumes them, as are row-column's kept input chunk
(``...in``) and partial sums (``...part{q}``); every streamed sub-chunk lands in an
unnamed buffer, freed when its compute (and, in a chain, its forward) has ended; the
training state is resident. A grid whose chunks do not fit makes the simulator report
the GPU, the moment, the peak and the live tensors.

Task ids: ``i{it}.{f|b}{layer}.w{worker}.o{outer chunk}...``; a streamed sub-chunk's
vertex rows end in ``.rows`` (``.fwd`` for a chain forward), its edges in ``.adj``, its
CPU filter in ``.select``, its compute in ``.edge``. ``items`` on a copy is rows or
edges moved; ``carries`` says what.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.errors import ConfigError
from workbench.model import BACKWARD_FLOP_RATIO, DTYPE_BYTES, INDEX_BYTES, LayerSpec
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution._neugraph import (
    GridStats,
    chain_groups,
    host_to_gpu_path,
    reorder_by_swaps,
)
from workbench.strategies.execution.base import (
    ExecutionScheme,
    SchemeInputs,
    add_gradient_sync,
    add_resident_state,
)

ORDERS = ("column-row", "row-column")
# Layer kinds whose functions read the destination vertex's own data, so a column loads its
# destination chunk once (GCN's edge function reads only the source and the edge weight).
READS_DESTINATION = frozenset({"sage", "gat", "gin", "commnet", "ggnn"})
WINDOW = 2  # streaming buffers per GPU with the pipeline on (double buffering)
# Estimated profile: what sparse GNN kernels achieve of a GPU's peak (the simulator's default
# cost model assumes the same; restated because strategies do not import the simulator).
ACHIEVED_FLOPS = 0.5
ACHIEVED_BANDWIDTH = 0.7
KERNEL_LAUNCH_S = 5e-6


@dataclass(frozen=True)
class StreamItem:
    """One streamed sub-chunk of one column (row in backward), as the reordering sees it.

    Tuples have one entry per GPU of the chain (one entry without a chain).
    """

    layer: int
    backward: bool
    inner_chunk: int
    sub: int
    edges: tuple[int, ...]
    load_bytes: tuple[int, ...]  # bytes copied into each GPU (vertex rows, edges, partials)
    copies: int  # copies into the busiest GPU
    select_bytes: int  # bytes the CPU filter copies (0: not filtered)
    features: tuple[dict[str, float], ...]  # each GPU's compute cost features ({} if it has no edges)


Profile = Callable[[StreamItem], tuple[float, float]]


def edge_features(spec: LayerSpec, rows: int, edges: int, backward: bool) -> dict[str, float]:
    """Scatter-ApplyEdge-Gather over ``edges`` edges reading ``rows`` streamed vertex rows.

    FLOPs: the layer's per-edge part (``forward_flops`` with no vertices); bytes: the rows
    read, and per edge its index and the row it gathers."""
    width = spec.in_dim
    flops = spec.forward_flops(0, 0, edges)
    moved = rows * width * DTYPE_BYTES + edges * (INDEX_BYTES + width * DTYPE_BYTES)
    scale = BACKWARD_FLOP_RATIO if backward else 1.0
    return {
        "vertices": 0.0,
        "src_vertices": float(rows),
        "edges": float(edges),
        "in_dim": float(width),
        "out_dim": float(width),
        "flops": flops * scale,
        "bytes": moved * scale,
    }


def vertex_features(spec: LayerSpec, vertices: int, backward: bool) -> dict[str, float]:
    """ApplyVertex on a chunk of ``vertices``: the layer's per-vertex part (with NeuGraph's
    dataflow optimisation, source-only transforms run here too), its reads and writes and
    the weights."""
    flops = spec.forward_flops(vertices, vertices, 0)
    moved = vertices * (spec.in_dim + spec.output_width) * DTYPE_BYTES + spec.param_count() * DTYPE_BYTES
    scale = BACKWARD_FLOP_RATIO if backward else 1.0
    return {
        "vertices": float(vertices),
        "src_vertices": float(vertices),
        "edges": 0.0,
        "in_dim": float(spec.in_dim),
        "out_dim": float(spec.output_width),
        "flops": flops * scale,
        "bytes": moved * scale,
    }


@EXECUTION_SCHEMES.register("neugraph-stream")
class NeuGraphStreamScheme(ExecutionScheme):
    """NeuGraph: 2D chunks streamed from host (selective, pipelined, reordered, chained over PCIe)."""

    full_graph = True
    HELP = {
        "selective": "filter each edge chunk's useful vertices on the CPU when theta < Tcopy/(Tcopy+Ttrans)",
        "pipeline": "split edge chunks into sub_chunks sub-chunks and overlap their copies with compute",
        "reorder": "reorder sub-chunks by swaps on their profiled times (NG-swap; needs pipeline)",
        "chain": "GPUs under one PCIe switch forward vertex chunks to each other instead of each reading host",
        "order": "column-row (forward by columns, backward by rows) or row-column",
        "sub_chunks": "k, sub-chunks per edge chunk with the pipeline on (>= 2)",
        "copy_throughput": "Tcopy: CPU copy throughput for filtering (bytes/s or '25GB/s'); default host bandwidth / 2",
        "transfer_throughput": "Ttrans: host-to-GPU throughput (bytes/s or '12GB/s'); default the path's narrowest link",
        "index_bytes": "bytes per vertex index in edge chunks (CSC/CSR)",
        "reorder_rounds": "at most this many swaps per column when reordering",
        "profile": "(Python only) item -> (copy s, compute s), the profiled times reordering uses",
    }

    def __init__(
        self,
        selective: bool = True,
        pipeline: bool = True,
        reorder: bool = True,
        chain: bool = True,
        order: str = "column-row",
        sub_chunks: int = 4,
        copy_throughput: float | str | None = None,
        transfer_throughput: float | str | None = None,
        index_bytes: int = 4,
        reorder_rounds: int = 32,
        profile: Profile | None = None,
    ) -> None:
        from workbench.hardware.units import parse_bandwidth

        where = "execution scheme 'neugraph-stream'"
        if order not in ORDERS:
            raise ConfigError(f"{where}: order {order!r}; allowed: {', '.join(ORDERS)}")
        if order == "row-column" and (selective or chain):
            on = " and ".join(n for n, v in (("selective", selective), ("chain", chain)) if v)
            raise ConfigError(
                f"{where}: order 'row-column' streams per-GPU partial sums, which {on} cannot apply to "
                "(the paper compares the orders with them off, Fig. 16); set them false"
            )
        for name, value, least in (("sub_chunks", sub_chunks, 2), ("index_bytes", index_bytes, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{where}: {name} must be an integer >= {least}, got {value!r}")
        if isinstance(reorder_rounds, bool) or not isinstance(reorder_rounds, int) or reorder_rounds < 0:
            raise ConfigError(f"{where}: reorder_rounds must be an integer >= 0, got {reorder_rounds!r}")
        self.selective = bool(selective)
        self.pipeline = bool(pipeline)
        self.reorder = bool(reorder)
        self.chain = bool(chain)
        self.order = order
        self.sub_chunks = sub_chunks
        self.copy_throughput = (
            None if copy_throughput is None else parse_bandwidth(copy_throughput, f"{where}: copy_throughput")
        )
        self.transfer_throughput = (
            None
            if transfer_throughput is None
            else parse_bandwidth(transfer_throughput, f"{where}: transfer_throughput")
        )
        for name, value in (
            ("copy_throughput", self.copy_throughput),
            ("transfer_throughput", self.transfer_throughput),
        ):
            if value is not None and not value > 0:
                raise ConfigError(f"{where}: {name} must be positive, got {value!r}")
        self.index_bytes = index_bytes
        self.reorder_rounds = reorder_rounds
        self.profile = profile

    def build(self, inputs: SchemeInputs) -> Plan:
        return _Builder(self, inputs).build()


class _Builder:
    """The plan of ``inputs.iterations`` iterations; per-GPU streaming state lives here."""

    def __init__(self, scheme: NeuGraphStreamScheme, inputs: SchemeInputs) -> None:
        where = "execution scheme 'neugraph-stream'"
        grid = inputs.partition.chunk_grid
        if grid is None:
            raise ConfigError(
                f"{where} streams NeuGraph's 2D chunk grid, and partition {inputs.partition.strategy!r} has "
                'none: use [partition] name = "chunk2d"'
            )
        machines = sorted({int(m) for m in inputs.worker_machine})
        if len(machines) > 1:
            names = ", ".join(inputs.cluster.machines[m].name for m in machines)
            raise ConfigError(
                f"{where} streams from one server's host memory (NeuGraph is single-server), but the workers "
                f"span machines {names}; set [training] workers to the GPUs of one machine"
            )
        self.scheme = scheme
        self.inputs = inputs
        self.model = inputs.model
        self.workers = inputs.workers
        k_workers = len(inputs.workers)
        self.bounds = np.asarray(grid.boundaries, dtype=np.int64)
        self.p = grid.num_chunks
        if self.p % k_workers:
            raise ConfigError(f"{where}: {self.p} chunks do not split evenly over {k_workers} GPUs")
        self.sizes = np.diff(self.bounds)
        self.per_gpu = self.p // k_workers
        self.owned = [list(range(w * self.per_gpu, (w + 1) * self.per_gpu)) for w in range(k_workers)]
        chunk_owner = np.repeat(np.arange(self.p) // self.per_gpu, self.sizes)
        if not np.array_equal(chunk_owner, inputs.partition.owner):
            raise ConfigError(
                f"{where}: the partition's owners are not the chunk grid's (chunk // (P / GPUs))"
            )
        self.k = scheme.sub_chunks if scheme.pipeline else 1
        self.window = WINDOW if scheme.pipeline else 1
        self.host = inputs.host_of_worker(0)
        self.gpu_spec = inputs.cluster.gpu(inputs.workers[0])  # the estimated profile's GPU
        paths = [host_to_gpu_path(inputs.cluster, g) for g in inputs.workers]
        self.t_trans = scheme.transfer_throughput or min(width for width, _ in paths)
        self.copy_latency = max(latency for _, latency in paths)
        self.t_copy = (
            scheme.copy_throughput or inputs.cluster.machine_of(inputs.workers[0]).host_memory_bandwidth / 2
        )
        self.threshold = self.t_copy / (self.t_copy + self.t_trans)
        self.groups = (
            chain_groups(inputs.cluster, inputs.workers) if scheme.chain else [[w] for w in range(k_workers)]
        )
        graph = inputs.graph
        chunk = np.repeat(np.arange(self.p, dtype=np.int64), self.sizes)
        src, dst = graph.indices, graph.edge_dst()
        self._raw = (chunk, src, dst)
        self._stats: dict[str, GridStats] = {}
        self.schedules: dict[tuple[Any, ...], list[int]] = {}
        self.history: list[list[str]] = [[] for _ in range(k_workers)]  # edge computes per GPU, in order
        # ("saved" | "dA", layer, chunk) -> the task that last wrote it to host memory
        self.writer: dict[tuple[str, int, int], str] = {}
        self.filtered_chunks = 0
        # per iteration: the previous optimizer steps, which GPUs started computing, the
        # weight-gradient tasks the all-reduce waits for
        self.update: list[str] | None = None
        self.started = [False] * k_workers
        self.finals: list[str] = []
        self.plan = scheme.empty_plan(
            inputs,
            chunks=self.p,
            sub_chunks=self.k,
            order=scheme.order,
            selective=scheme.selective,
            pipeline=scheme.pipeline,
            reorder=scheme.reorder and scheme.pipeline,
            chain=scheme.chain,
            chain_groups=[list(g) for g in self.groups],
            selective_threshold=self.threshold,
        )

    @property
    def iterations(self) -> int:
        return max(1, self.inputs.iterations)

    def stats(self, outer: str) -> GridStats:
        """``outer="dst"``: destination chunks outer, source vertices streamed (forward columns);
        ``"src"``: source chunks outer, destination vertices streamed (backward rows)."""
        if outer not in self._stats:
            chunk, src, dst = self._raw
            if outer == "dst":
                self._stats[outer] = GridStats(chunk[dst], src, self.bounds, self.k)
            else:
                self._stats[outer] = GridStats(chunk[src], dst, self.bounds, self.k)
        return self._stats[outer]

    # ---- small helpers ------------------------------------------------------------
    def gpu(self, w: int) -> str:
        return self.workers[w]

    def window_deps(self, w: int) -> list[str]:
        """A copy into GPU ``w`` waits for the edge compute ``window`` places back (its buffer)."""
        h = self.history[w]
        return [h[-self.window]] if len(h) >= self.window else []

    def adjacency_bytes(self, edges: int, outer: int) -> int:
        """An edge (sub-)chunk in CSC (forward) / CSR (backward): an index per edge and
        ``n_outer + 1`` pointers over the outer chunk's vertices."""
        return self.scheme.index_bytes * (edges + int(self.sizes[outer]) + 1)

    def saved_bytes(self, layer: int, chunk: int) -> int:
        """What a chunk's ApplyVertex keeps for backward (its input accumulation and output:
        the next layer reads the output from the same host copy)."""
        n = int(self.sizes[chunk])
        return self.model.layers[layer].saved_for_backward_bytes(n, n, 0)

    def estimate(self, features: dict[str, float]) -> float:
        if not features:
            return 0.0
        g = self.gpu_spec
        return (
            KERNEL_LAUNCH_S
            + features["flops"] / (ACHIEVED_FLOPS * g.flops)
            + features["bytes"] / (ACHIEVED_BANDWIDTH * g.memory_bandwidth)
        )

    def profiled(self, item: StreamItem) -> tuple[float, float]:
        if self.scheme.profile is not None:
            return self.scheme.profile(item)
        copy = (
            item.copies * self.copy_latency
            + max(item.load_bytes) / self.t_trans
            + item.select_bytes / self.t_copy
        )
        return copy, max(self.estimate(f) for f in item.features)

    def schedule(self, key: tuple[Any, ...], items: list[StreamItem]) -> list[int]:
        """The order to stream ``items`` in: natural, or reordered by swaps (computed once per
        column and reused every iteration, as NeuGraph reuses its refined plan)."""
        if not (self.scheme.reorder and self.scheme.pipeline) or len(items) < 2:
            return list(range(len(items)))
        if key not in self.schedules:
            times = [self.profiled(item) for item in items]
            self.schedules[key] = reorder_by_swaps(
                [t[0] for t in times],
                [t[1] for t in times],
                self.window,
                self.scheme.reorder_rounds,
                [item.inner_chunk for item in items],
            )
        return self.schedules[key]

    # ---- the plan -----------------------------------------------------------------
    def build(self) -> Plan:
        add_resident_state(self.plan, self.inputs)
        steps: list[str] | None = None
        layers = self.model.num_layers
        for it in range(self.iterations):
            self.update = steps
            self.started = [False] * len(self.workers)
            self.finals = []
            for layer in range(layers):
                if self.scheme.order == "column-row":
                    self.read_pass(it, layer, backward=False)
                else:
                    self.partial_pass(it, layer, backward=False)
            for w in range(len(self.workers)):
                for j in self.owned[w]:
                    self.vertex_backward(it, w, layers - 1, j, [], None)
            for layer in range(layers - 1, 0, -1):
                if self.scheme.order == "column-row":
                    self.read_pass(it, layer, backward=True)
                else:
                    self.partial_pass(it, layer, backward=True)
            steps = add_gradient_sync(self.plan, self.inputs, it, self.finals)
            self.inputs.planned(it)
        self.plan.meta["filtered_edge_chunks"] = self.filtered_chunks
        return self.plan

    def weights_ready(self, w: int) -> list[str]:
        """The previous iteration's optimizer step on GPU ``w`` (what reads of the weights wait for)."""
        return [self.update[w]] if self.update else []

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
        deps = deps + self.history[w][-1:]
        if not self.started[w]:
            deps += self.weights_ready(w)  # the iteration's first compute on this GPU
            self.started[w] = True
        self.plan.compute(
            tid,
            self.gpu(w),
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
        self.history[w].append(tid)

    # ---- column-row: accumulate on the GPU, stream read-only vertex chunks ----------
    def read_pass(self, it: int, layer: int, backward: bool) -> None:
        """Forward of ``layer`` by columns, or backward of ``layer`` (``>= 1``) by rows."""
        spec = self.model.layers[layer]
        width = spec.in_dim * DTYPE_BYTES  # H_l rows forward, dA_l rows backward
        stats = self.stats("src" if backward else "dst")
        tag = f"b{layer}" if backward else f"f{layer}"
        carries = "gradients" if backward else ("features" if layer == 0 else "activations")
        source = ("dA", layer) if backward else ("saved", layer - 1)
        k = self.k
        for gi, group in enumerate(self.groups):
            for c in range(self.per_gpu):
                outers = [self.owned[w][c] for w in group]
                edges = stats.edges[outers]  # (members, P * k)
                union = stats.union_useful(outers)
                if self.scheme.selective:
                    useful = union.reshape(self.p, k).sum(axis=1)
                    selected = useful < self.threshold * self.sizes  # theta_i < Tcopy / (Tcopy + Ttrans)
                else:
                    selected = np.zeros(self.p, dtype=bool)
                present = np.flatnonzero(edges.sum(axis=0) > 0)
                self.filtered_chunks += int(selected[np.unique(present // k)].sum())
                items, item_rows = [], []
                for q in present.tolist():
                    i = q // k
                    rows = int(union[q] if selected[i] else stats.sub_sizes[q])
                    item_rows.append(rows)
                    member_rows = [int(stats.useful[o, q]) for o in outers]
                    e = [int(x) for x in edges[:, q]]
                    items.append(
                        StreamItem(
                            layer,
                            backward,
                            i,
                            q % k,
                            tuple(e),
                            tuple(
                                rows * width + (self.adjacency_bytes(e[m], outers[m]) if e[m] else 0)
                                for m in range(len(group))
                            ),
                            2,
                            rows * width if selected[i] else 0,
                            tuple(
                                edge_features(spec, member_rows[m], e[m], backward) if e[m] else {}
                                for m in range(len(group))
                            ),
                        )
                    )
                prefix = [f"i{it}.{tag}.w{w}.o{o}" for w, o in zip(group, outers, strict=True)]
                acc = [f"{p}.{'grad' if backward else 'acc'}" for p in prefix]
                opened = [False] * len(group)
                last: list[list[str]] = [[] for _ in group]
                dst_tensor: list[str | None] = [None] * len(group)
                if not backward and spec.kind in READS_DESTINATION:
                    for m, (w, o) in enumerate(zip(group, outers, strict=True)):
                        dst_tensor[m] = self.load_destination(it, layer, w, o, prefix[m])
                for pos in self.schedule((tag, gi, c), items):
                    item = items[pos]
                    q = item.inner_chunk * k + item.sub
                    rows = item_rows[pos]
                    data = (
                        [self.writer[(*source, item.inner_chunk)]]
                        if (*source, item.inner_chunk) in self.writer
                        else []
                    )
                    head = group[0]
                    name = f"i{it}.{tag}.g{head}.c{c}.x{q}"
                    deps = data + self.window_deps(head)
                    if item.select_bytes:
                        self.plan.compute(
                            f"{name}.select",
                            self.host,
                            "other",
                            deps,
                            worker=head,
                            iteration=it,
                            items=rows,
                            label="select",
                            features={"bytes": 2.0 * item.select_bytes},
                        )
                        deps = [f"{name}.select"]
                    rows_task = f"{prefix[0]}.x{q}.rows"
                    self.plan.transfer(
                        rows_task,
                        self.host,
                        self.gpu(head),
                        rows * width,
                        "h2d",
                        deps,
                        worker=head,
                        iteration=it,
                        items=rows,
                        carries=carries,
                    )
                    needed = max(m for m in range(len(group)) if item.edges[m] > 0)
                    for m, w in enumerate(group):
                        if m > needed:
                            break
                        if m > 0:
                            forward = f"{prefix[m]}.x{q}.fwd"
                            self.plan.transfer(
                                forward,
                                self.gpu(group[m - 1]),
                                self.gpu(w),
                                rows * width,
                                "d2d",
                                [rows_task, *self.window_deps(w)],
                                worker=w,
                                iteration=it,
                                items=rows,
                                carries=carries,
                            )
                            rows_task = forward
                        e = item.edges[m]
                        if not e:
                            continue
                        adj = f"{prefix[m]}.x{q}.adj"
                        self.plan.transfer(
                            adj,
                            self.host,
                            self.gpu(w),
                            self.adjacency_bytes(e, outers[m]),
                            "h2d",
                            self.window_deps(w),
                            worker=w,
                            iteration=it,
                            items=e,
                            carries="adjacency",
                        )
                        n_acc = int(self.sizes[outers[m]]) * width
                        self.edge_compute(
                            f"{prefix[m]}.x{q}.edge",
                            w,
                            it,
                            layer,
                            backward,
                            [rows_task, adj],
                            item.features[m],
                            e,
                            allocate=None if opened[m] else {acc[m]: n_acc},
                        )
                        opened[m] = True
                        last[m] = [f"{prefix[m]}.x{q}.edge"]
                for m, (w, o) in enumerate(zip(group, outers, strict=True)):
                    held = acc[m] if opened[m] else None
                    if backward:
                        # The previous layer's ApplyVertex backward for this row's chunk, reading G_o in place.
                        self.vertex_backward(it, w, layer - 1, o, last[m], held)
                    else:
                        self.apply_vertex(it, w, layer, o, prefix[m], last[m], held, dst_tensor[m])

    def load_destination(self, it: int, layer: int, w: int, o: int, prefix: str) -> str:
        """The destination chunk a layer's functions read, loaded once per column (named, freed by ApplyVertex)."""
        name = f"{prefix}.dst"
        key = ("saved", layer - 1, o)
        self.plan.transfer(
            name,
            self.host,
            self.gpu(w),
            int(self.sizes[o]) * self.model.layers[layer].in_dim * DTYPE_BYTES,
            "h2d",
            ([self.writer[key]] if key in self.writer else []) + self.window_deps(w),
            worker=w,
            iteration=it,
            items=int(self.sizes[o]),
            carries="features" if layer == 0 else "activations",
            allocate={name: int(self.sizes[o]) * self.model.layers[layer].in_dim * DTYPE_BYTES},
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
        spec = self.model.layers[layer]
        n = int(self.sizes[o])
        allocate = {f"{prefix}.out": n * spec.output_width * DTYPE_BYTES}
        if acc is None:  # no edge into the chunk (or partial sums loaded): the accumulation starts here
            acc = f"{prefix}.acc"
            allocate[acc] = n * spec.in_dim * DTYPE_BYTES
        vertex = f"{prefix}.vertex"
        self.plan.compute(
            vertex,
            self.gpu(w),
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
        save = f"{prefix}.save"
        self.plan.transfer(
            save,
            self.gpu(w),
            self.host,
            self.saved_bytes(layer, o),
            "d2h",
            [vertex],
            worker=w,
            iteration=it,
            items=n,
            carries="activations",
            free=[acc, f"{prefix}.out"],
        )
        self.writer[("saved", layer, o)] = save
        return vertex

    def vertex_backward(
        self,
        it: int,
        w: int,
        layer: int,
        o: int,
        after: list[str],
        grad: str | None,
    ) -> str:
        """ApplyVertex backward of ``layer`` for chunk ``o`` on GPU ``w``: swap its saved tensors in,
        read the output gradient (``grad``, on the GPU; the top layer's
        comes from the loss), accumulate the weights' gradient, and write ``dA_o`` to host when
        the layer below streams it (``layer >= 1``)."""
        spec = self.model.layers[layer]
        n = int(self.sizes[o])
        prefix = f"i{it}.v{layer}.w{w}.o{o}"
        key = ("saved", layer, o)
        swap = f"{prefix}.swapin"
        self.plan.transfer(
            swap,
            self.host,
            self.gpu(w),
            self.saved_bytes(layer, o),
            "h2d",
            [self.writer[key], *self.window_deps(w)],
            worker=w,
            iteration=it,
            items=n,
            carries="activations",
        )
        keeps = layer >= 1
        out = f"{prefix}.dacc"
        compute = f"{prefix}.vertex"
        self.plan.compute(
            compute,
            self.gpu(w),
            "backward",
            [swap, *after],
            worker=w,
            iteration=it,
            layer=layer,
            items=n,
            features=vertex_features(spec, n, True),
            allocate={out: n * spec.in_dim * DTYPE_BYTES} if keeps else {},
            free=[grad] if grad else [],
        )
        self.finals.append(compute)
        if keeps:
            write = f"{prefix}.write"
            self.plan.transfer(
                write,
                self.gpu(w),
                self.host,
                n * spec.in_dim * DTYPE_BYTES,
                "d2h",
                [compute],
                worker=w,
                iteration=it,
                items=n,
                carries="gradients",
                free=[out],
            )
            self.writer[("dA", layer, o)] = write
        return compute

    # ---- row-column: keep the input chunk, stream partial sums in and out ------------
    def partial_pass(self, it: int, layer: int, backward: bool) -> None:
        """Forward of ``layer`` by source rows, or backward of ``layer`` (``>= 1``) by destination
        columns: every edge (sub-)chunk loads this GPU's partial sum of its inner vertices
        (unless it is the first to touch it) and writes it back."""
        spec = self.model.layers[layer]
        width = spec.in_dim * DTYPE_BYTES
        stats = self.stats("dst" if backward else "src")  # outer: the chunk this GPU keeps
        tag = f"b{layer}" if backward else f"f{layer}"
        carries = "gradients" if backward else ("features" if layer == 0 else "activations")
        source = ("dA", layer) if backward else ("saved", layer - 1)
        k = self.k
        written: dict[tuple[int, int], str] = {}  # (worker, sub-chunk) -> its partial's last write-back
        writes: list[list[str]] = [[] for _ in self.workers]  # each GPU's partial write-backs, in order
        for w in range(len(self.workers)):
            for c, o in enumerate(self.owned[w]):
                present = np.flatnonzero(stats.edges[o] > 0).tolist()
                if not present:
                    continue
                prefix = f"i{it}.{tag}.w{w}.o{o}"
                keep = f"{prefix}.in"
                n_o = int(self.sizes[o])
                self.plan.transfer(
                    keep,
                    self.host,
                    self.gpu(w),
                    n_o * width,
                    "h2d",
                    ([self.writer[(*source, o)]] if (*source, o) in self.writer else [])
                    + self.window_deps(w),
                    worker=w,
                    iteration=it,
                    items=n_o,
                    carries=carries,
                    allocate={keep: n_o * width},
                )
                items = []
                for q in present:
                    e = int(stats.edges[o, q])
                    rows = int(stats.sub_sizes[q])
                    back = rows * width if (w, q) in written else 0
                    items.append(
                        StreamItem(
                            layer,
                            backward,
                            q // k,
                            q % k,
                            (e,),
                            (back + self.adjacency_bytes(e, o),),
                            2 if back else 1,
                            0,
                            (edge_features(spec, int(stats.useful[o, q]), e, backward),),
                        )
                    )
                order = self.schedule((tag, w, c), items)
                for n_done, pos in enumerate(order):
                    # A partial buffer is free again once its write-back ends: the window counts them too.
                    free = self.window_deps(w)
                    if len(writes[w]) >= self.window:
                        free.append(writes[w][-self.window])
                    item = items[pos]
                    q = item.inner_chunk * k + item.sub
                    rows = int(stats.sub_sizes[q])
                    part = f"i{it}.{tag}.w{w}.part{q}"
                    adj = f"{prefix}.x{q}.adj"
                    self.plan.transfer(
                        adj,
                        self.host,
                        self.gpu(w),
                        self.adjacency_bytes(item.edges[0], o),
                        "h2d",
                        free,
                        worker=w,
                        iteration=it,
                        items=item.edges[0],
                        carries="adjacency",
                    )
                    deps = [keep, adj, *free]
                    allocate: dict[str, int] | None = {part: rows * width}
                    if (w, q) in written:
                        load = f"{prefix}.x{q}.partin"
                        self.plan.transfer(
                            load,
                            self.host,
                            self.gpu(w),
                            rows * width,
                            "h2d",
                            [written[(w, q)], *free],
                            worker=w,
                            iteration=it,
                            items=rows,
                            carries="partials",
                            allocate={part: rows * width},
                        )
                        deps.append(load)
                        allocate = None
                    edge = f"{prefix}.x{q}.edge"
                    self.edge_compute(
                        edge,
                        w,
                        it,
                        layer,
                        backward,
                        deps,
                        item.features[0],
                        item.edges[0],
                        allocate=allocate,
                        free=[keep] if n_done == len(order) - 1 else None,
                    )
                    write = f"{prefix}.x{q}.partout"
                    self.plan.transfer(
                        write,
                        self.gpu(w),
                        self.host,
                        rows * width,
                        "d2h",
                        [edge],
                        worker=w,
                        iteration=it,
                        items=rows,
                        carries="partials",
                        free=[part],
                    )
                    written[(w, q)] = write
                    writes[w].append(write)
        # Each chunk's owner folds in every GPU's partial sums of it, one GPU's at a time (its
        # buffer freed by the addition), then finishes the chunk; its chunks one after another.
        for w in range(len(self.workers)):
            previous: list[str] = []
            for x in self.owned[w]:
                prefix = f"i{it}.{tag}.w{w}.o{x}"
                total = f"{prefix}.{'grad' if backward else 'acc'}"
                added: list[str] = []  # the last addition into this chunk's total
                for g in range(len(self.workers)):
                    subs = [q for q in range(x * k, (x + 1) * k) if (g, q) in written]
                    if not subs:
                        continue
                    rows = int(sum(stats.sub_sizes[q] for q in subs))
                    load = f"{prefix}.from{g}"
                    self.plan.transfer(
                        load,
                        self.host,
                        self.gpu(w),
                        rows * width,
                        "h2d",
                        [*(written[(g, q)] for q in subs), *(added or previous), *self.window_deps(w)],
                        worker=w,
                        iteration=it,
                        items=rows,
                        carries="partials",
                    )
                    add = f"{prefix}.add{g}"
                    self.plan.compute(
                        add,
                        self.gpu(w),
                        "backward" if backward else "forward",
                        [load, *added],
                        worker=w,
                        iteration=it,
                        layer=layer,
                        items=rows,
                        features={
                            "vertices": float(rows),
                            "flops": float(rows * spec.in_dim),
                            "bytes": 3.0 * rows * width,  # read both addends, write the sum
                        },
                        allocate={} if added else {total: int(self.sizes[x]) * width},
                    )
                    added = [add]
                held = total if added else None
                if backward:
                    previous = [self.vertex_backward(it, w, layer - 1, x, added, held)]
                else:
                    dst = None
                    if spec.kind in READS_DESTINATION:
                        dst = self.load_destination(it, layer, w, x, prefix)
                    previous = [self.apply_vertex(it, w, layer, x, prefix, added, held, dst)]
