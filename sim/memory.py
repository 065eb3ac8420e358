"""GPU (and host) memory over simulated time: what is live on each memory, and its peak.

What occupies a memory (the vocabulary is the plan's, see ``workbench.plan``):

* resident tensors, live from time 0 to the end;
* tensors a task ``allocate``\\ s on the memory it writes, live from that task's start
  until the task that ``free``\\ s them ends (or the end of the plan);
* the buffer a transfer lands in when it names none: ``bytes`` on its ``dst`` from
  its start until every task that depends on it has ended (a transfer nobody depends
  on frees it when it ends);
* each running task's transient ``memory``: a compute's on its device, a transfer's
  on its ``dst``, a collective's on each of its devices, from its start to its end.

At one instant, a task's frees happen before the starts its end releases, and events
run in the simulator's deterministic order; live bytes are compared with the
capacity after every allocation, so a moment is counted as the simulator lives it.
A plan that exceeds a memory at any moment is not feasible: :meth:`MemoryTimeline.check`
raises :class:`InfeasiblePlanError` naming the memory, the moment of its peak, the
peak, and the tensors live then. Resident tensors that alone exceed a memory are
reported before anything runs (:func:`check_resident`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np

from workbench.errors import InfeasiblePlanError, PlanError
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan, Task

SHOWN_TENSORS = 4  # live tensors named per memory in an infeasibility message
SHOWN_MEMORIES = 3  # memories over capacity described in one message


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


def check_resident(plan: Plan, cluster: ClusterSpec) -> dict[str, int]:
    """Resident bytes per memory; raise :class:`InfeasiblePlanError` if they alone overflow one."""
    resident: dict[str, int] = {}
    for r in plan.resident:
        resident[r.device] = resident.get(r.device, 0) + r.bytes
    caps = capacities(cluster)
    over = [node for node in cluster.memory_nodes() if resident.get(node, 0) > caps[node]]
    if over:
        parts = []
        for node in over[:SHOWN_MEMORIES]:
            live = {("resident", r.name): r.bytes for r in plan.resident if r.device == node}
            parts.append(_describe(node, resident[node], caps[node], 0.0, None, live, plan.tasks))
        raise InfeasiblePlanError(f"plan {plan.name!r} does not fit: " + "; ".join(parts))
    return resident


@dataclass(slots=True)
class TaskMemory:
    """What one task does to memory: allocations at its start, releases at its end.

    Read-only once made (a run only iterates it): tasks without some action share one
    empty tuple for it.
    """

    allocate: Sequence[tuple[str, str, int]]  # (memory, tensor name, bytes), named tensors
    buffer: tuple[str, int] | None  # the unnamed landing buffer of a transfer: (dst, bytes)
    transient: Sequence[tuple[str, int]]  # (memory, bytes) held while the task runs
    free: Sequence[str]  # named tensors freed at its end
    consumes: Sequence[int]  # transfers among its dependencies whose unnamed buffer it reads


_NONE: tuple = ()


def task_memory(
    fields: Mapping[str, Sequence[Any]],
    is_transfer: np.ndarray,
    users: Sequence[int],
    first_user: Sequence[int],
) -> list[TaskMemory | None]:
    """Per task, its :class:`TaskMemory`; None for a task that touches no memory (most of them).

    ``fields``: the plan's columns (``workbench.plan.PlanColumns``); ``is_transfer``: which
    tasks are transfers; ``users[first_user[i]:first_user[i + 1]]``: the tasks that depend
    on task i. Which tasks touch memory is found in bulk over the columns; the common
    ones (a transfer landing in an unnamed buffer, a task reading such buffers and doing
    nothing else to memory) are made without a per-field step.
    """
    n = len(is_transfer)
    src, dst, nbytes, allocate = fields["src"], fields["dst"], fields["bytes"], fields["allocate"]
    # Transfers that name no buffer (found in bulk; per task only among those).
    unnamed = np.flatnonzero(is_transfer).tolist()
    if any(map(allocate.__getitem__, unnamed)):
        unnamed = [i for i in unnamed if not allocate[i]]
    buffered = [i for i in unnamed if src[i] != dst[i] and nbytes[i] > 0]
    consumes: dict[int, list[int]] = {}
    for j in buffered:
        for u in users[first_user[j] : first_user[j + 1]]:
            consumes.setdefault(u, []).append(j)
    # Tasks that hold transient memory, allocate or free: the general case, field by field.
    holding = set(compress(range(n), fields["memory"]))
    holding.update(compress(range(n), allocate), compress(range(n), fields["free"]))
    out: list[TaskMemory | None] = [None] * n
    for i in buffered:
        if i not in holding:
            out[i] = TaskMemory(_NONE, (dst[i], nbytes[i]), _NONE, _NONE, consumes.get(i, _NONE))
    for i, read in consumes.items():
        if i not in holding and out[i] is None:
            out[i] = TaskMemory(_NONE, None, _NONE, _NONE, read)
    buffered_set = set(buffered)
    for i in holding:
        out[i] = _held(fields, i, bool(is_transfer[i]), i in buffered_set, consumes.get(i, _NONE))
    return out


def _held(
    fields: Mapping[str, Sequence[Any]], i: int, transfer: bool, buffered: bool, consumes: Sequence[int]
) -> TaskMemory:
    """The :class:`TaskMemory` of task ``i``, which allocates, frees or holds transient memory."""
    kind = fields["kind"][i]
    target = fields["device"][i] if kind == "compute" else fields["dst"][i] if transfer else None
    memory = fields["memory"][i]
    if not memory:
        transient: Sequence[tuple[str, int]] = _NONE
    elif kind == "collective":
        transient = [(node, memory) for node in fields["devices"][i]]
    else:
        transient = [(target, memory)]
    allocate = fields["allocate"][i]
    return TaskMemory(
        [(target, name, b) for name, b in allocate.items()] if allocate else _NONE,  # type: ignore[misc]
        (fields["dst"][i], fields["bytes"][i]) if buffered else None,
        transient,
        list(fields["free"][i]) or _NONE,
        consumes,
    )


class MemoryTimeline:
    """Live bytes and live tensors per memory as the simulation runs, with each memory's peak.

    Tensor keys in the live sets: a named tensor by its name, a transfer's unnamed
    buffer by its task index ``i``, a task's transient memory by ``~i``, a resident
    tensor by ``("resident", name)``.
    """

    def __init__(self, plan: Plan, cluster: ClusterSpec, users: list[int]) -> None:
        """``users``: per task, how many tasks depend on it."""
        self.tasks = plan.tasks
        self.capacity = capacities(cluster)
        self.live: dict[str, dict[object, int]] = {node: {} for node in self.capacity}
        self.used: dict[str, int] = dict.fromkeys(self.capacity, 0)
        for r in plan.resident:
            self.live[r.device][("resident", r.name)] = r.bytes
            self.used[r.device] += r.bytes
        self.peak: dict[str, int] = dict(self.used)
        self.peak_time: dict[str, float] = dict.fromkeys(self.capacity, 0.0)
        # Memories that went over capacity: the moment it first happened, and the live
        # tensors at the (so far) highest peak, kept only for those.
        self.first_over: dict[str, float] = {}
        self.over_snapshot: dict[str, dict[object, int]] = {}
        self.where: dict[str, tuple[str, int]] = {}  # named tensor -> (memory, allocating task)
        self.users_left = users

    # ---- the two events of a task ------------------------------------------------
    def begin(self, i: int, m: TaskMemory, now: float) -> None:
        for node, name, nbytes in m.allocate:
            if name in self.where:
                other = self.tasks[self.where[name][1]].id
                raise PlanError(
                    f"task {self.tasks[i].id!r} allocates tensor {name!r} at t={now:.9g} s while it is "
                    f"still live (allocated by task {other!r}, not freed yet)"
                )
            self.where[name] = (node, i)
            self._add(node, name, nbytes, now)
        if m.buffer is not None:
            self._add(m.buffer[0], i, m.buffer[1], now)
        for node, nbytes in m.transient:
            self._add(node, ~i, nbytes, now)

    def end(self, i: int, m: TaskMemory, now: float) -> None:
        for node, _ in m.transient:
            self._remove(node, ~i)
        for name in m.free:
            place = self.where.pop(name, None)
            if place is None:
                raise PlanError(
                    f"task {self.tasks[i].id!r} frees tensor {name!r} at t={now:.9g} s, but it is not live "
                    "then: make the task depend on the one that allocates it, and free it once"
                )
            self._remove(place[0], name)
        for d in m.consumes:
            self.users_left[d] -= 1
            if self.users_left[d] == 0:
                self._remove(self.tasks[d].dst, d)  # type: ignore[arg-type]
        if m.buffer is not None and self.users_left[i] == 0:
            self._remove(m.buffer[0], i)  # nobody reads it

    # ---- bookkeeping -------------------------------------------------------------
    def _add(self, node: str, key: object, nbytes: int, now: float) -> None:
        self.live[node][key] = nbytes
        used = self.used[node] + nbytes
        self.used[node] = used
        if used > self.peak[node]:
            self.peak[node] = used
            self.peak_time[node] = now
            if used > self.capacity[node]:
                self.first_over.setdefault(node, now)
                self.over_snapshot[node] = dict(self.live[node])

    def _remove(self, node: str, key: object) -> None:
        self.used[node] -= self.live[node].pop(key)

    def check(self, plan_name: str, cluster: ClusterSpec) -> dict[str, int]:
        """Each memory's peak; raise :class:`InfeasiblePlanError` if any went over capacity."""
        if self.first_over:
            over = [n for n in cluster.memory_nodes() if n in self.first_over]
            parts = [
                _describe(
                    node,
                    self.peak[node],
                    self.capacity[node],
                    self.peak_time[node],
                    self.first_over[node],
                    self.over_snapshot[node],
                    self.tasks,
                )
                for node in over[:SHOWN_MEMORIES]
            ]
            more = f"; {len(over) - SHOWN_MEMORIES} more memories over" if len(over) > SHOWN_MEMORIES else ""
            raise InfeasiblePlanError(f"plan {plan_name!r} does not fit: " + "; ".join(parts) + more)
        return {node: peak for node, peak in self.peak.items() if peak}


def _describe(
    node: str,
    peak: int,
    capacity: int,
    at: float,
    first: float | None,
    live: dict[object, int],
    tasks: Sequence[Task],
) -> str:
    """``m0.gpu2 holds 18.2 GiB of 16 GiB (2.2 GiB over) at t=0 s; live: ...``"""
    first_txt = f", first over at t={first:.9g} s" if first is not None and first < at else ""
    biggest = sorted(live.items(), key=lambda kv: (-kv[1], _label(kv[0], tasks)))
    shown = ", ".join(f"{_label(k, tasks)} {format_bytes(b)}" for k, b in biggest[:SHOWN_TENSORS])
    if len(biggest) > SHOWN_TENSORS:
        shown += f" and {len(biggest) - SHOWN_TENSORS} more"
    return (
        f"{node} holds {format_bytes(peak)} of {format_bytes(capacity)} ({format_bytes(peak - capacity)} over) "
        f"at t={at:.9g} s{first_txt}; live then: {shown}"
    )


def _label(key: object, tasks: Sequence[Task]) -> str:
    if isinstance(key, tuple):
        return f"resident {key[1]!r}"
    if isinstance(key, str):
        return f"tensor {key!r}"
    if key >= 0:  # type: ignore[operator]
        return f"buffer of transfer {tasks[key].id!r}"  # type: ignore[index]
    return f"workspace of task {tasks[~key].id!r}"  # type: ignore[index,operator]
