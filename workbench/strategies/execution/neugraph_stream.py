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

Where each part is planned: this module checks the parameters and runs the iterations;
``_neugraph_setup`` checks the grid and resolves the switches (``StreamSetup``);
``_neugraph_schedule`` decides, once, what each GPU streams in a ``column-row`` pass and in which
order, which rows the CPU filter keeps and how far down a chain each sub-chunk goes
(``StreamSchedule``, :meth:`NeuGraphStreamScheme.schedule`; the real executor,
``realrun.schemes.neugraph_stream``, carries out the same object), and names every task
(``NeuGraphTaskIds``); ``_neugraph_read`` turns that schedule into the order's tasks,
``_neugraph_partial`` the ``row-column`` order's; ``_neugraph_tasks`` plans what both share
(edge computes, ApplyVertex forward and backward) and holds the state passes hand each
other; ``_neugraph_profile`` costs a streamed sub-chunk and orders a column's sub-chunks
(``reorder``); ``_neugraph`` has the grid statistics, the chains and the swap search.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from workbench.errors import ConfigError
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution._neugraph_partial import PartialPass
from workbench.strategies.execution._neugraph_profile import (
    ACHIEVED_BANDWIDTH,
    ACHIEVED_FLOPS,
    KERNEL_LAUNCH_S,
    Profile,
    StreamItem,
    edge_features,
    vertex_features,
)
from workbench.strategies.execution._neugraph_read import ReadPass
from workbench.strategies.execution._neugraph_schedule import (
    ColumnSchedule,
    NeuGraphTaskIds,
    StreamedSubChunk,
    StreamSchedule,
)
from workbench.strategies.execution._neugraph_setup import WINDOW, StreamSetup, stream_setup
from workbench.strategies.execution._neugraph_tasks import READS_DESTINATION, StreamState, StreamTasks
from workbench.strategies.execution.base import (
    ExecutionScheme,
    SchemeInputs,
    add_gradient_sync,
    add_resident_state,
)

# Re-exported: what the scheme's parameters and a profile callable see, and the schedule the real
# executor (realrun.schemes.neugraph_stream) reads.
__all__ = [
    "ACHIEVED_BANDWIDTH",
    "ACHIEVED_FLOPS",
    "KERNEL_LAUNCH_S",
    "ORDERS",
    "READS_DESTINATION",
    "WINDOW",
    "ColumnSchedule",
    "NeuGraphStreamScheme",
    "NeuGraphTaskIds",
    "Profile",
    "StreamItem",
    "StreamSchedule",
    "StreamSetup",
    "StreamedSubChunk",
    "edge_features",
    "vertex_features",
]

ORDERS = ("column-row", "row-column")


@EXECUTION_SCHEMES.register("neugraph-stream")
class NeuGraphStreamScheme(ExecutionScheme):
    """NeuGraph: 2D chunks streamed from host (selective, pipelined, reordered, chained over PCIe)."""

    full_graph = True
    # realrun.schemes.neugraph_stream runs the plan as built (it refuses, before any worker starts,
    # what it cannot run: the row-column order, layers other than gcn): it imposes nothing.
    real_run_params: ClassVar[Mapping[str, object] | None] = {}
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

    def schedule(self, inputs: SchemeInputs) -> StreamSchedule:
        """What every GPU streams, in which order, on ``inputs``' grid (a :class:`ConfigError` when
        the scheme cannot plan them): the decisions the plan builder and the real executor both read."""
        return StreamSchedule(stream_setup(self, inputs))

    def build(self, inputs: SchemeInputs) -> Plan:
        """``inputs.iterations`` iterations (at least one), each a forward pass over every layer, the
        top layer's ApplyVertex backward, a backward pass over the layers above the first and the
        gradients' all-reduce."""
        schedule = self.schedule(inputs)
        setup = schedule.setup
        plan = self.empty_plan(
            inputs,
            chunks=setup.num_chunks,
            sub_chunks=setup.k,
            order=self.order,
            selective=self.selective,
            pipeline=self.pipeline,
            reorder=self.reorder and self.pipeline,
            chain=self.chain,
            chain_groups=[list(g) for g in setup.groups],
            selective_threshold=setup.threshold,
        )
        tasks = StreamTasks(schedule, StreamState(plan, history=[[] for _ in inputs.workers]))
        layer_pass = ReadPass if self.order == "column-row" else PartialPass
        add_resident_state(plan, inputs)
        steps: list[str] | None = None
        for it in range(max(1, inputs.iterations)):
            tasks.begin_iteration(steps)
            for kind, layer in schedule.passes():
                if kind == "top":  # the loss's gradient starts backward here, chunk by chunk
                    for w, owned in enumerate(setup.owned):
                        for j in owned:
                            tasks.vertex_backward(it, w, layer, j, [], None)
                else:
                    layer_pass(tasks, it, layer, backward=kind == "backward").run()
            steps = add_gradient_sync(plan, inputs, it, tasks.state.finals)
            inputs.planned(it)
        plan.meta["filtered_edge_chunks"] = tasks.state.filtered_chunks
        return plan
