"""Memory accounting: does a plan fit before it runs?

A memory's need is the sum of the resident tensors placed on it plus the largest
transient ``memory`` of the tasks that use it: tasks are assumed not to hold their
transient buffers at the same time (each frees its buffer when it ends, and the
executor does not overlap two tasks' buffers on purpose), so the peak is the resident
set plus the single largest buffer. The memory a task uses: a compute task's
``device``, a transfer's ``dst`` (where the bytes land), each of a collective's
``devices``. GPUs are checked against ``GPUSpec.memory_bytes``, hosts against the
machine's host memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.errors import InfeasiblePlanError
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan, Task


def task_memories(task: Task) -> list[str]:
    if task.kind == "compute":
        return [task.device] if task.device else []
    if task.kind == "transfer":
        return [task.dst] if task.dst else []
    return list(task.devices)


def memory_needs(plan: Plan, memory: Sequence[int] | None = None) -> dict[str, int]:
    """Bytes each memory needs at its peak under the rule above.

    ``memory``: the tasks' ``memory`` fields in plan order, when the caller has them
    (``Plan.validate_columns``): then only tasks that hold memory are looked at.
    """
    resident: dict[str, int] = {}
    for r in plan.resident:
        resident[r.device] = resident.get(r.device, 0) + r.bytes
    transient: dict[str, int] = {}
    tasks = plan.tasks if memory is None else [plan.tasks[i] for i, m in enumerate(memory) if m]
    for t in tasks:
        if t.memory:
            for node in task_memories(t):
                if t.memory > transient.get(node, 0):
                    transient[node] = t.memory
    nodes = sorted(set(resident) | set(transient))
    return {n: resident.get(n, 0) + transient.get(n, 0) for n in nodes}


def capacities(cluster: ClusterSpec) -> dict[str, int]:
    caps = {}
    for m in cluster.machines:
        caps[m.host_node] = m.host_memory_bytes
        for node, gpu in zip(m.gpu_nodes(), m.gpus, strict=True):
            caps[node] = gpu.memory_bytes
    return caps


def format_bytes(n: float) -> str:
    """One decimal, none when it is zero: ``18.2 GiB``, ``16 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{int(n)} B"


def check_memory(plan: Plan, cluster: ClusterSpec, memory: Sequence[int] | None = None) -> dict[str, int]:
    """Return each memory's need; raise :class:`InfeasiblePlanError` naming every memory over capacity.

    ``memory`` as for :func:`memory_needs`.
    """
    needs = memory_needs(plan, memory)
    caps = capacities(cluster)
    over = [
        f"{node} needs {format_bytes(need)} of {format_bytes(caps[node])} "
        f"({format_bytes(need - caps[node])} over)"
        for node, need in sorted(needs.items(), key=lambda kv: _node_order(kv[0], cluster))
        if node in caps and need > caps[node]
    ]
    if over:
        raise InfeasiblePlanError(f"plan {plan.name!r} does not fit: " + "; ".join(over))
    return needs


def _node_order(node: str, cluster: ClusterSpec) -> int:
    order = cluster.memory_nodes()
    return order.index(node) if node in order else len(order)
