"""``roc-fullgraph``: ROC's full-graph training, one partition per GPU (paper 000, sections 3-4, 7).

Every GPU runs the whole model on its part of the graph; parts are what the run's
partitioner gives (ROC's own, ``roc``, learns from measured layer times: see
:mod:`workbench.online`). Per training iteration, for each layer ``l`` and part ``p``
on GPU ``g_p``:

* **halo exchange**: ``p``'s vertices aggregate over in-neighbours other parts own; the
  layer-``l`` activations of those halo vertices (``d_in`` floats each; for layer 0 the
  input features) come from each owning part ``q``: from ``g_q``'s memory when the part
  keeps its activations on the GPU, or from the host DRAM where ``q`` wrote them when a
  memory policy streams through host memory (ROC's design: "each GPU ... communicates
  with CPU DRAM to obtain input tensors and save intermediate results"). Within a
  machine that is a peer copy (``d2d``) or a host read (``h2d``); across machines
  ``gather_remote``.
* **forward** of layer ``l`` on ``p``'s vertices (cost features from the part's
  vertex, edge and halo counts; the task's ``layer`` is ``l`` and its ``items`` the
  part's vertex count, so the trace shows the partition each iteration used).
* after the last layer, **backward** layer by layer; each layer sends the gradients of
  its halo activations back to their owners (the same bytes as the forward halo,
  reversed), then the gradients are all-reduced and every GPU steps its optimizer.
  With ``training = false`` an iteration is inference: the forward pass only.

Memory: ``memory_policy = "resident"`` (default) keeps the part's features, activations
and saved tensors on its GPU for the iteration (the memory timeline says whether that
fits: a part that does not fit is reported with the GPU, the moment and the tensors).
With a registered memory policy (``dpmm``, ``lru``, ``streaming``), everything lives in
host DRAM and the policy decides which of the part's tensors each operator finds on the
GPU; its loads and write-backs are planned as ``h2d`` / ``d2h`` transfers (ROC section 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.errors import ConfigError
from workbench.model import DTYPE_BYTES
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution.base import ExecutionScheme, SchemeInputs, add_gradient_sync

RESIDENT = "resident"


@dataclass(frozen=True)
class PartLayout:
    """One part's vertices and what its layers read: its in-edges and, per other part, its halo."""

    vertices: np.ndarray  # the part's vertex ids
    edges: int  # in-edges of the part's vertices (what its aggregation reads)
    halo: dict[int, int]  # other part -> how many distinct in-neighbours it owns

    @property
    def num_vertices(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def halo_vertices(self) -> int:
        return sum(self.halo.values())


def part_layouts(graph, owner: np.ndarray, num_parts: int) -> list[PartLayout]:  # type: ignore[no-untyped-def]
    """Each part's vertices, in-edge count and halo sizes, from the CSR rows (in-neighbour lists)."""
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    src = graph.indices.astype(np.int64, copy=False)
    dst_part = owner[dst]
    src_part = owner[src]
    edges = np.bincount(dst_part, minlength=num_parts)
    crossing = dst_part != src_part
    # Distinct (reading part, halo vertex) pairs: a vertex read by several of p's vertices moves once.
    pairs = np.unique(dst_part[crossing] * graph.num_nodes + src[crossing])
    readers, halo_vertex = np.divmod(pairs, graph.num_nodes)
    out = []
    for p in range(num_parts):
        mine = halo_vertex[readers == p]
        counts = np.bincount(owner[mine], minlength=num_parts)
        out.append(
            PartLayout(
                np.flatnonzero(owner == p),
                int(edges[p]),
                {q: int(c) for q, c in enumerate(counts.tolist()) if c and q != p},
            )
        )
    return out


def machine_halo_bytes(
    layouts: list[PartLayout], in_dims: list[int], worker_machine: np.ndarray, training: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Halo bytes one iteration sends and receives between machines, per machine: ``(sent, received)``.

    The bytes this scheme plans (``_halo``): for every layer ``l`` and part ``p``, ``p``'s halo
    rows from each owner ``q`` (``in_dims[l]`` floats each) and, when training, for ``l > 0``
    their gradients back from ``p`` to ``q``. Only pairs on different machines count (part ``p``
    runs on worker ``p``). The busiest machine's NIC bounds the iteration when the network
    dominates, which ROC's cost model (compute per part) does not see.
    """
    machines = int(worker_machine.max()) + 1 if len(worker_machine) else 0
    sent = np.zeros(machines, dtype=np.int64)
    received = np.zeros(machines, dtype=np.int64)
    forward = sum(in_dims) * DTYPE_BYTES
    backward = sum(in_dims[1:]) * DTYPE_BYTES if training else 0
    for p, lay in enumerate(layouts):
        mp = int(worker_machine[p])
        for q, count in lay.halo.items():
            mq = int(worker_machine[q])
            if mp == mq:
                continue
            received[mp] += count * forward
            sent[mq] += count * forward
            sent[mp] += count * backward
            received[mq] += count * backward
    return sent, received


@EXECUTION_SCHEMES.register("roc-fullgraph")
class RocFullGraphScheme(ExecutionScheme):
    """ROC: full-graph training, a part per GPU, halo exchange per layer, a per-GPU memory policy."""

    full_graph = True
    plans_per_iteration = True
    real_run_params = {"memory_policy": RESIDENT, "training": True}  # what realrun.schemes.roc_fullgraph runs
    HELP = {
        "memory_policy": "'resident' (every tensor of the part stays on its GPU) or a registered "
        "memory policy (dpmm, lru, streaming) that streams the part's tensors through host DRAM",
        "training": "true: forward, backward and the gradient all-reduce; false: inference (forward only)",
        "gpu_memory": "GPU memory a memory policy may fill, as a size ('2GiB'; default: each GPU's memory "
        "less the training state): less than the GPU has, to study a partition that does not fit",
    }

    def __init__(
        self, memory_policy: str = RESIDENT, training: bool = True, gpu_memory: str | None = None
    ) -> None:
        from workbench.hardware.units import parse_size
        from workbench.registry import MEMORY_POLICIES

        who = "execution scheme 'roc-fullgraph'"
        allowed = (RESIDENT, *MEMORY_POLICIES.names())
        if memory_policy not in allowed:
            raise ConfigError(f"{who}: memory_policy {memory_policy!r}; allowed: {', '.join(allowed)}")
        if memory_policy != RESIDENT and not training:
            raise ConfigError(
                f"{who}: a memory policy schedules a training step; use memory_policy = 'resident' "
                "for inference"
            )
        self.training = training
        self.memory_policy = memory_policy
        self.policy = None if memory_policy == RESIDENT else MEMORY_POLICIES.create(memory_policy)
        self.gpu_memory = None if gpu_memory is None else parse_size(gpu_memory, f"{who}: gpu_memory")
        if self.gpu_memory is not None and self.gpu_memory <= 0:
            raise ConfigError(f"{who}: gpu_memory must be positive, got {gpu_memory!r}")

    def build(self, inputs: SchemeInputs) -> Plan:
        plan = self.new_plan(inputs)
        layouts = part_layouts(inputs.graph, inputs.partition.owner, inputs.num_workers)
        steps: list[str] = []
        for it in range(inputs.num_iterations):
            steps = self.add_iteration(plan, inputs, layouts, it, steps)
            inputs.planned(it)
        return plan

    def plan_iteration(self, inputs: SchemeInputs, iteration: int) -> Plan:
        """Iteration ``iteration`` alone, on ``inputs.partition`` (for :func:`workbench.online.train_online`)."""
        plan = self.new_plan(inputs)
        plan.name = f"{inputs.name}.i{iteration}"
        layouts = part_layouts(inputs.graph, inputs.partition.owner, inputs.num_workers)
        self.add_iteration(plan, inputs, layouts, iteration, [])
        return plan

    def new_plan(self, inputs: SchemeInputs) -> Plan:
        plan = self.empty_plan(inputs, memory_policy=self.memory_policy, training=self.training)
        state = inputs.model.training_state_bytes(inputs.optimizer)
        for w, gpu in enumerate(inputs.workers):
            plan.keep(f"w{w}.training-state", gpu, state)
        return plan

    def add_iteration(
        self, plan: Plan, inputs: SchemeInputs, layouts: list[PartLayout], it: int, after: list[str]
    ) -> list[str]:
        """One training iteration over the whole graph; returns each GPU's optimizer step."""
        if self.policy is not None:
            return self._add_policy_iteration(plan, inputs, layouts, it, after)
        model = inputs.model
        parts = range(inputs.num_workers)
        resident = self.memory_policy == RESIDENT
        # Layer l's input activations of part p: where they are before layer l runs.
        produced = {p: [after[p]] if after else [] for p in parts}
        for p in parts:
            if resident:
                tid = f"i{it}.w{p}.features"
                # The part's input features land on its GPU once per iteration (ROC keeps them in
                # host DRAM; a resident part reads them at the start of each iteration).
                plan.transfer(
                    tid,
                    inputs.host_of_worker(p),
                    inputs.workers[p],
                    layouts[p].num_vertices * inputs.feature_bytes,
                    "h2d",
                    produced[p],
                    worker=p,
                    iteration=it,
                    items=layouts[p].num_vertices,
                    carries="features",
                    allocate={f"i{it}.w{p}.h0": layouts[p].num_vertices * inputs.feature_bytes},
                )
                produced[p] = [tid]
        for layer, spec in enumerate(model.layers):
            width = spec.in_dim * DTYPE_BYTES
            ready = {}
            for p in parts:
                halos = self._halo(plan, inputs, layouts, p, layer, width, produced, it, "forward")
                ready[p] = produced[p] + [tid for _, tid in halos]
            for p in parts:
                lay = layouts[p]
                src = lay.num_vertices + lay.halo_vertices
                tid = f"i{it}.w{p}.fwd{layer}"
                allocate = {}
                if self.training:
                    saved = spec.saved_for_backward_bytes(src, lay.num_vertices, lay.edges)
                    allocate[f"i{it}.w{p}.act{layer}"] = saved
                if layer + 1 < model.num_layers:
                    allocate[f"i{it}.w{p}.h{layer + 1}"] = spec.activation_bytes(lay.num_vertices)
                plan.compute(
                    tid,
                    inputs.workers[p],
                    "forward",
                    ready[p],
                    worker=p,
                    iteration=it,
                    layer=layer,
                    items=lay.num_vertices,
                    label=_range_label(lay.vertices),
                    features=spec.cost_features(src, lay.num_vertices, lay.edges),
                    allocate=allocate,
                    free=[f"i{it}.w{p}.h{layer}"],
                )
                produced[p] = [tid]
        if not self.training:  # inference: each part's last forward ends the iteration
            return [produced[p][0] for p in parts]
        for layer in reversed(range(model.num_layers)):
            spec = model.layers[layer]
            for p in parts:
                lay = layouts[p]
                src = lay.num_vertices + lay.halo_vertices
                tid = f"i{it}.w{p}.bwd{layer}"
                plan.compute(
                    tid,
                    inputs.workers[p],
                    "backward",
                    produced[p],
                    worker=p,
                    iteration=it,
                    layer=layer,
                    items=lay.num_vertices,
                    label=_range_label(lay.vertices),
                    features=spec.backward_cost_features(src, lay.num_vertices, lay.edges),
                    memory=src * spec.in_dim * DTYPE_BYTES,
                    free=[f"i{it}.w{p}.act{layer}"],
                )
                produced[p] = [tid]
            if layer > 0:  # the gradients of halo activations go back to their owners
                width = spec.in_dim * DTYPE_BYTES
                arriving: dict[int, list[str]] = {q: [] for q in parts}
                for p in parts:
                    for q, tid in self._halo(
                        plan, inputs, layouts, p, layer, width, produced, it, "backward"
                    ):
                        arriving[q].append(tid)
                for q in parts:  # q's next backward layer needs every gradient sent to it
                    produced[q] = produced[q] + arriving[q]
        return add_gradient_sync(plan, inputs, it, [produced[p][0] for p in parts])

    def _add_policy_iteration(
        self, plan: Plan, inputs: SchemeInputs, layouts: list[PartLayout], it: int, after: list[str]
    ) -> list[str]:
        """Every part's training step as its memory policy schedules it (ROC section 5), then the
        all-reduce: loads and write-backs between the part's GPU and its host's DRAM, and the halo.

        Each part's step is the policy's schedule of its operator graph
        (:func:`~workbench.strategies.memory.graphs.operator_graph`, with the part's halo),
        emitted by :func:`~workbench.strategies.memory.emit.schedule_to_plan`. Across parts:
        the load of layer ``l``'s halo waits for the owners' write-backs of ``h{l}`` (and the
        input features' halo for nothing); an owner's backward through layer ``l`` waits for
        the halo gradients the readers wrote back. Between machines the halo (forward) and its
        gradients (backward) also cross the network, host to host (``gather_remote``).
        """
        from workbench.strategies.memory.emit import schedule_to_plan
        from workbench.strategies.memory.graphs import operator_graph

        steps = {}
        for p in range(inputs.num_workers):
            lay = layouts[p]
            graph = operator_graph(
                inputs.model,
                lay.num_vertices,
                lay.edges,
                num_src=lay.num_vertices + lay.halo_vertices,
                name=f"part {p}",
            )
            capacity = self._capacity(inputs, p)
            try:
                schedule = self.policy.schedule(graph, capacity)  # type: ignore[union-attr]
            except ConfigError as exc:
                raise ConfigError(
                    f"part {p} on {inputs.workers[p]} ({lay.num_vertices:,} vertices): {exc}"
                ) from None
            prefix = f"i{it}.w{p}."
            deps = [after[p]] if after else []
            steps[p] = (
                graph,
                schedule_to_plan(
                    plan,
                    schedule,
                    gpu=inputs.workers[p],
                    host=inputs.host_of_worker(p),
                    prefix=prefix,
                    deps=deps,
                    worker=p,
                    iteration=it,
                ),
            )
        self._link_halos(plan, inputs, layouts, it, {p: g for p, (g, _) in steps.items()})
        return add_gradient_sync(plan, inputs, it, [i for _, ids in steps.values() for i in ids])

    def policy_volumes(self, inputs: SchemeInputs) -> list[dict[str, object]]:
        """Per registered memory policy, the CPU-GPU bytes of one training step summed over the parts
        (loads, write-backs), at this scheme's capacity: the policies side by side (ROC Fig. 10)."""
        from workbench.registry import MEMORY_POLICIES
        from workbench.strategies.memory.graphs import operator_graph

        layouts = part_layouts(inputs.graph, inputs.partition.owner, inputs.num_workers)
        graphs = [
            operator_graph(
                inputs.model, lay.num_vertices, lay.edges, num_src=lay.num_vertices + lay.halo_vertices
            )
            for lay in layouts
        ]
        rows = []
        for name in MEMORY_POLICIES.names():
            policy = MEMORY_POLICIES.create(name)
            schedules = [policy.schedule(g, self._capacity(inputs, p)) for p, g in enumerate(graphs)]
            rows.append(
                {
                    "policy": name,
                    "h2d_bytes": sum(s.h2d_bytes for s in schedules),
                    "d2h_bytes": sum(s.d2h_bytes for s in schedules),
                    "peak_bytes": max(s.peak_bytes for s in schedules),
                }
            )
        return rows

    def _capacity(self, inputs: SchemeInputs, p: int) -> int:
        if self.gpu_memory is not None:
            return self.gpu_memory
        return inputs.cluster.gpu(inputs.workers[p]).memory_bytes - inputs.model.training_state_bytes(
            inputs.optimizer
        )

    def _link_halos(
        self, plan: Plan, inputs: SchemeInputs, layouts: list[PartLayout], it: int, graphs: dict
    ) -> None:
        """The dependencies (and network copies) between parts that the per-part schedules cannot know."""
        index = {t.id: t for t in plan.tasks[-_recent(plan, it) :]}
        for p, graph in graphs.items():
            writer = {y: op.name for op in graph.operators for y in op.writes}
            readers: dict[str, str] = {}
            for op in graph.operators:
                for x in op.reads:
                    readers.setdefault(x, op.name)
            for q, count in layouts[p].halo.items():
                for layer in range(inputs.model.num_layers):
                    halo = "features" if layer == 0 else f"halo{layer}"
                    load = index.get(f"i{it}.w{p}.{readers.get(halo, '')}.load.{halo}")
                    if load is None:
                        continue
                    produced = [] if layer == 0 else [f"i{it}.w{q}.{writer[f'h{layer}']}.wb.h{layer}"]
                    load.deps.extend(
                        self._network(
                            plan,
                            inputs,
                            q,
                            p,
                            count,
                            inputs.model.layers[layer].in_dim,
                            produced,
                            it,
                            f"halo{layer}",
                            "activations" if layer else "features",
                        )
                    )
                if not self.training:
                    continue
                for layer in range(1, inputs.model.num_layers):
                    grad = f"grad_halo{layer}"
                    wb = f"i{it}.w{p}.{writer.get(grad, '')}.wb.{grad}"
                    if wb not in index:
                        continue
                    consumer = index.get(f"i{it}.w{q}.{_reader_of(graphs[q], f'grad_h{layer}')}")
                    if consumer is not None:
                        consumer.deps.extend(
                            self._network(
                                plan,
                                inputs,
                                p,
                                q,
                                count,
                                inputs.model.layers[layer].in_dim,
                                [wb],
                                it,
                                grad,
                                "gradients",
                            )
                        )

    def _network(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        src: int,
        dst: int,
        count: int,
        width: int,
        deps: list[str],
        it: int,
        what: str,
        carries: str,
    ) -> list[str]:
        """Host-to-host copy of ``count`` rows when the two parts are on different machines; else
        the dependencies alone (one host's DRAM: the write-back is the exchange)."""
        if inputs.worker_machine[src] == inputs.worker_machine[dst]:
            return deps
        tid = f"i{it}.w{dst}.{what}.from{src}"
        plan.transfer(
            tid,
            inputs.host_of_worker(src),
            inputs.host_of_worker(dst),
            count * width * DTYPE_BYTES,
            "gather_remote",
            deps,
            worker=dst,
            iteration=it,
            items=count,
            carries=carries,
        )
        return [tid]

    def _halo(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        layouts: list[PartLayout],
        p: int,
        layer: int,
        width: int,
        produced: dict[int, list[str]],
        it: int,
        direction: str,
    ) -> list[tuple[int, str]]:
        """Halo activations (forward: from each owner q into p) or their gradients (backward: from p
        back to each q), as (q, task id). From the owner's GPU when parts stay resident, else its host."""
        ids = []
        for q, count in layouts[p].halo.items():
            if direction == "forward":
                src, dst, deps, owner_of_task = self._source(inputs, q), inputs.workers[p], produced[q], p
                tid = f"i{it}.w{p}.halo{layer}.from{q}"
                carries = "features" if layer == 0 else "activations"
            else:
                src, dst, deps, owner_of_task = inputs.workers[p], self._source(inputs, q), produced[p], p
                tid = f"i{it}.w{p}.halograd{layer}.to{q}"
                carries = "gradients"
            if layer == 0 and direction == "forward":
                src = inputs.host_of_worker(q)  # input features live in the owner's host memory
                deps = []
            plan.transfer(
                tid,
                src,
                dst,
                count * width,
                _phase(inputs, src, dst),
                deps,
                worker=owner_of_task,
                iteration=it,
                layer=layer,
                items=count,
                carries=carries,
            )
            ids.append((q, tid))
        return ids

    def _source(self, inputs: SchemeInputs, q: int) -> str:
        return inputs.workers[q] if self.memory_policy == RESIDENT else inputs.host_of_worker(q)


def _reader_of(graph, tensor: str) -> str:  # type: ignore[no-untyped-def]
    return next((op.name for op in graph.operators if tensor in op.reads), "")


def _recent(plan: Plan, it: int) -> int:
    """How many of the plan's last tasks belong to iteration ``it`` (they are appended in order)."""
    count = 0
    for task in reversed(plan.tasks):
        if task.iteration != it:
            break
        count += 1
    return count


def _phase(inputs: SchemeInputs, src: str, dst: str) -> str:
    """``gather_remote`` across machines; within one, ``d2d`` between GPUs, ``h2d`` / ``d2h`` with host."""
    if src.split(".", 1)[0] != dst.split(".", 1)[0]:
        return "gather_remote"
    if ".gpu" in src and ".gpu" in dst:
        return "d2d"
    return "h2d" if ".gpu" in dst else "d2h"


def _range_label(vertices: np.ndarray) -> str:
    """``[start, end)`` for a contiguous part (what ROC's partitioner makes), else a count."""
    if vertices.size and vertices[-1] - vertices[0] + 1 == vertices.size:
        return f"vertices [{int(vertices[0])}, {int(vertices[-1]) + 1})"
    return f"{vertices.size} vertices"
