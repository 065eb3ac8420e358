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

import numpy as np

from workbench.errors import ConfigError
from workbench.model import DTYPE_BYTES
from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution import task_ids
from workbench.strategies.execution._roc_schedule import (
    BACKWARD,
    FORWARD,
    HaloTransfer,
    IterationSchedule,
    PartLayout,
    PartSchedule,
    RocTaskIds,
    part_layouts,
    policy_halo,
    resident_halo,
    transfer_phase,
)
from workbench.strategies.execution.base import ExecutionScheme, SchemeInputs, add_gradient_sync
from workbench.strategies.memory.base import MemorySchedule, OperatorGraph, describe_bytes

__all__ = [
    "RESIDENT",
    "HaloTransfer",
    "IterationSchedule",
    "PartLayout",
    "PartSchedule",
    "RocFullGraphScheme",
    "RocTaskIds",
    "machine_halo_bytes",
    "part_layouts",
    "transfer_phase",
]

RESIDENT = "resident"


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
    real_run_params = {"training": True}  # what realrun.schemes.roc_fullgraph runs (any memory policy)
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

    def layouts(self, inputs: SchemeInputs) -> list[PartLayout]:
        """Each part of ``inputs.partition``: its vertices, in-edges, halo rows and the rows it sends."""
        return part_layouts(inputs.graph, inputs.partition.owner, inputs.num_workers)

    def schedule(
        self, inputs: SchemeInputs, iteration: int, layouts: list[PartLayout] | None = None
    ) -> IterationSchedule:
        """Iteration ``iteration`` on ``inputs.partition``: every part and every halo exchange
        (``layouts``: the partition's, when already worked out)."""
        if layouts is None:
            layouts = self.layouts(inputs)
        parts = tuple(
            self._part_schedule(inputs, layouts[p], p, iteration) for p in range(inputs.num_workers)
        )
        if self.policy is None:
            halo = resident_halo(inputs, layouts, iteration, self.training)
        else:
            halo = policy_halo(inputs, list(parts), iteration, self.training)
        return IterationSchedule(iteration, self.training, parts, tuple(halo))

    def _part_schedule(self, inputs: SchemeInputs, lay: PartLayout, p: int, it: int) -> PartSchedule:
        return PartSchedule(
            p,
            task_ids.worker_prefix(it, p),
            inputs.workers[p],
            inputs.host_of_worker(p),
            lay,
            lay.num_vertices * inputs.feature_bytes,
            None if self.policy is None else self._memory_schedule(inputs, lay, p),
        )

    def _memory_schedule(self, inputs: SchemeInputs, lay: PartLayout, p: int) -> MemorySchedule:
        """The memory policy's swaps for part ``p``'s training step (with its halo), at its capacity."""
        from workbench.strategies.memory.graphs import operator_graph

        graph = operator_graph(
            inputs.model,
            lay.num_vertices,
            lay.edges,
            num_src=lay.num_vertices + lay.halo_vertices,
            num_sent=lay.num_sent,
            name=f"part {p}",
        )
        capacity = self._capacity(inputs, p)
        try:
            return self.policy.schedule(graph, capacity)  # type: ignore[union-attr]
        except ConfigError as exc:
            raise ConfigError(
                f"part {p} on {inputs.workers[p]} ({lay.num_vertices:,} vertices): {exc}"
                f"{_tensor_over(graph, capacity)}"
            ) from None

    def build(self, inputs: SchemeInputs) -> Plan:
        plan = self.new_plan(inputs)
        layouts = self.layouts(inputs)
        steps: list[str] = []
        for it in range(inputs.num_iterations):
            steps = self.add_iteration(plan, inputs, self.schedule(inputs, it, layouts), steps)
            inputs.planned(it)
        return plan

    def plan_iteration(self, inputs: SchemeInputs, iteration: int) -> Plan:
        """Iteration ``iteration`` alone, on ``inputs.partition`` (for :func:`workbench.online.train_online`)."""
        plan = self.new_plan(inputs)
        plan.name = f"{inputs.name}.i{iteration}"
        self.add_iteration(plan, inputs, self.schedule(inputs, iteration), [])
        return plan

    def new_plan(self, inputs: SchemeInputs) -> Plan:
        plan = self.empty_plan(inputs, memory_policy=self.memory_policy, training=self.training)
        state = inputs.model.training_state_bytes(inputs.optimizer)
        for w, gpu in enumerate(inputs.workers):
            plan.keep(RocTaskIds.training_state(w), gpu, state)
        return plan

    def add_iteration(
        self, plan: Plan, inputs: SchemeInputs, schedule: IterationSchedule, after: list[str]
    ) -> list[str]:
        """One iteration over the whole graph as ``schedule`` says; returns each GPU's last task
        (its optimizer step; its last forward for inference)."""
        if self.policy is not None:
            return self._add_policy_iteration(plan, inputs, schedule, after)
        produced = _add_features(plan, schedule, after)
        for layer in range(inputs.model.num_layers):
            produced = self._add_forward_layer(plan, inputs, schedule, layer, produced)
        if not self.training:  # inference: each part's last forward ends the iteration
            return [produced[p][0] for p in range(len(schedule.parts))]
        for layer in reversed(range(inputs.model.num_layers)):
            produced = _add_backward_layer(plan, inputs, schedule, layer, produced)
        return add_gradient_sync(plan, inputs, schedule.iteration, [ids[0] for ids in produced.values()])

    def _add_forward_layer(
        self,
        plan: Plan,
        inputs: SchemeInputs,
        schedule: IterationSchedule,
        layer: int,
        produced: dict[int, list[str]],
    ) -> dict[int, list[str]]:
        """Layer ``layer``'s halo exchanges, then its forward on every part; returns each part's forward."""
        it, spec = schedule.iteration, inputs.model.layers[layer]
        ready = {p: list(ids) for p, ids in produced.items()}
        for t in schedule.exchanges(FORWARD, layer):
            _add_halo_copy(plan, t, it, layer=layer)
            ready[t.reader].append(t.task)  # type: ignore[arg-type]
        out = {}
        for part in schedule.parts:
            lay, p, prefix = part.layout, part.part, part.prefix
            src = lay.num_vertices + lay.halo_vertices
            allocate = {}
            if self.training:
                saved = spec.saved_for_backward_bytes(src, lay.num_vertices, lay.edges)
                allocate[task_ids.activation_tensor(prefix, layer)] = saved
            if layer + 1 < inputs.model.num_layers:
                allocate[RocTaskIds.input_tensor(prefix, layer + 1)] = spec.activation_bytes(lay.num_vertices)
            tid = task_ids.forward_task(prefix, layer)
            plan.compute(
                tid, part.gpu, "forward", ready[p], worker=p, iteration=it, layer=layer,
                items=lay.num_vertices, label=lay.label,
                features=spec.cost_features(src, lay.num_vertices, lay.edges),
                allocate=allocate, free=[RocTaskIds.input_tensor(prefix, layer)],
            )  # fmt: skip
            out[p] = [tid]
        return out

    def _add_policy_iteration(
        self, plan: Plan, inputs: SchemeInputs, schedule: IterationSchedule, after: list[str]
    ) -> list[str]:
        """Every part's training step as its memory policy schedules it (ROC section 5), then the
        all-reduce: loads and write-backs between the part's GPU and its host's DRAM, and the halo.

        Each part's step is the policy's schedule of its operator graph
        (:func:`~workbench.strategies.memory.graphs.operator_graph`, with the part's halo),
        emitted by :func:`~workbench.strategies.memory.emit.schedule_to_plan`; then the halo
        exchanges between parts the per-part schedules cannot know (:func:`policy_halo`).
        """
        from workbench.strategies.memory.emit import schedule_to_plan

        it = schedule.iteration
        last = []
        for part in schedule.parts:
            last += schedule_to_plan(
                plan,
                part.memory,  # type: ignore[arg-type]
                gpu=part.gpu,
                host=part.host,
                prefix=part.prefix + ".",
                deps=[after[part.part]] if after else [],
                worker=part.part,
                iteration=it,
            )
        index = {t.id: t for t in plan.tasks[-_recent(plan, it) :]}
        for t in schedule.halo:
            if t.task is None:  # one host's DRAM: the write-back is the exchange
                index[t.feeds].deps.extend(t.after)
                continue
            # A host-to-host copy carries no layer (what the network moves, not a layer's step).
            _add_halo_copy(plan, t, it)
            index[t.feeds].deps.append(t.task)
        return add_gradient_sync(plan, inputs, it, last)

    def policy_volumes(self, inputs: SchemeInputs) -> list[dict[str, object]]:
        """Per registered memory policy, the CPU-GPU bytes of one training step summed over the parts
        (loads, write-backs), at this scheme's capacity: the policies side by side (ROC Fig. 10)."""
        from workbench.registry import MEMORY_POLICIES
        from workbench.strategies.memory.graphs import operator_graph

        layouts = self.layouts(inputs)
        graphs = [
            operator_graph(
                inputs.model,
                lay.num_vertices,
                lay.edges,
                num_src=lay.num_vertices + lay.halo_vertices,
                num_sent=lay.num_sent,
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


def _tensor_over(graph: OperatorGraph, capacity: int) -> str:
    """What to add to a capacity error when one tensor alone is larger than the capacity (no
    policy can place it, whatever the partition's operators): that tensor, named."""
    biggest = max(graph.tensors, key=lambda t: t.bytes)
    if biggest.bytes <= capacity:
        return ""
    return (
        f"; its tensor {biggest.name!r} alone is {describe_bytes(biggest.bytes)}, more than the "
        f"capacity ([execution] gpu_memory)"
    )


def _add_features(plan: Plan, schedule: IterationSchedule, after: list[str]) -> dict[int, list[str]]:
    """Each resident part's input features, host -> its GPU, once per iteration (ROC keeps them in
    host DRAM; a resident part reads them at the start of each iteration)."""
    produced = {}
    for part in schedule.parts:
        p, n = part.part, part.layout.num_vertices
        tid = RocTaskIds.features(part.prefix)
        plan.transfer(
            tid, part.host, part.gpu, part.feature_bytes, "h2d", [after[p]] if after else [],
            worker=p, iteration=schedule.iteration, items=n, carries="features",
            allocate={RocTaskIds.input_tensor(part.prefix, 0): part.feature_bytes},
        )  # fmt: skip
        produced[p] = [tid]
    return produced


def _add_backward_layer(
    plan: Plan, inputs: SchemeInputs, schedule: IterationSchedule, layer: int, produced: dict[int, list[str]]
) -> dict[int, list[str]]:
    """Layer ``layer``'s backward on every part, then its halo gradients back to their owners;
    returns what each part's next backward layer waits for."""
    it, spec = schedule.iteration, inputs.model.layers[layer]
    out = {}
    for part in schedule.parts:
        lay, p = part.layout, part.part
        src = lay.num_vertices + lay.halo_vertices
        tid = task_ids.backward_task(part.prefix, layer)
        plan.compute(
            tid, part.gpu, "backward", produced[p], worker=p, iteration=it, layer=layer,
            items=lay.num_vertices, label=lay.label,
            features=spec.backward_cost_features(src, lay.num_vertices, lay.edges),
            memory=src * spec.in_dim * DTYPE_BYTES, free=[task_ids.activation_tensor(part.prefix, layer)],
        )  # fmt: skip
        out[p] = [tid]
    for t in schedule.exchanges(BACKWARD, layer):
        _add_halo_copy(plan, t, it, layer=layer)
    # An owner's next backward layer needs every gradient sent to it.
    arriving = {p: [t.task for t in schedule.exchanges(BACKWARD, layer) if t.owner == p] for p in out}
    return {p: out[p] + arriving[p] for p in out}  # type: ignore[misc]


def _add_halo_copy(plan: Plan, t: HaloTransfer, it: int, **layer: int) -> None:
    """The plan task of one halo copy, as the schedule names it."""
    plan.transfer(
        t.task, t.src, t.dst, t.nbytes, t.phase, list(t.after),  # type: ignore[arg-type]
        worker=t.worker, iteration=it, **layer, items=t.rows, carries=t.carries,
    )  # fmt: skip


def _recent(plan: Plan, it: int) -> int:
    """How many of the plan's last tasks belong to iteration ``it`` (they are appended in order)."""
    count = 0
    for task in reversed(plan.tasks):
        if task.iteration != it:
            break
        count += 1
    return count
