"""Iteration plans: the DAG of typed tasks that both executors run.

A plan says what computes where and what moves where, with exact byte counts taken
from the real sampled vertex sets. Three task kinds:

``compute``
    runs on ``device`` (a GPU node such as ``m0.gpu1``, or a host node for CPU work);
    its time comes from a cost model over ``features`` (``vertices``, ``edges``,
    ``in_dim``, ``out_dim``, ``flops``, ``bytes``, ...).
``transfer``
    moves ``bytes`` from memory ``src`` to memory ``dst`` (host or GPU nodes);
    ``carries`` says what (``features``, ``activations``, ``gradients``, ``model``).
``collective``
    ``op`` (``allreduce``, ``allgather``, ``broadcast``, ``alltoall``) among
    ``devices``; ``bytes`` is each device's buffer size.

``resident`` lists tensors that stay in a memory for the whole plan (model weights,
feature caches, optimizer state); with the transient tensors of each task they must
fit in the GPU's memory, else the plan is infeasible.

JSON layout (hand-writable; see ``examples/plans/``)::

    {"name": "...", "meta": {...},
     "resident": [{"name": "cache", "device": "m0.gpu0", "bytes": 1000000}],
     "tasks": [
       {"id": "load", "kind": "transfer", "phase": "h2d", "src": "m0.host", "dst": "m0.gpu0",
        "bytes": 4000000},
       {"id": "fwd", "kind": "compute", "phase": "forward", "device": "m0.gpu0",
        "features": {"vertices": 1000, "edges": 20000, "in_dim": 128, "out_dim": 128},
        "deps": ["load"]}]}

Optional task fields: ``worker`` and ``iteration`` (default 0), ``items``,
``memory`` (transient bytes the task holds on its device while it runs), ``label``.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import PlanError

TASK_KINDS = ("compute", "transfer", "collective")
COLLECTIVE_OPS = ("allreduce", "allgather", "broadcast", "alltoall", "reducescatter")
PHASES = (
    "sample",
    "gather_local",
    "gather_remote",
    "h2d",
    "d2h",
    "d2d",
    "forward",
    "backward",
    "allreduce",
    "alltoall",
    "migrate",
    "update",
    "swap",
    "other",
)
_PHASE_SET = frozenset(PHASES)


@dataclass
class Task:
    id: str
    kind: str
    phase: str = "other"
    worker: int = 0
    iteration: int = 0
    deps: list[str] = field(default_factory=list)
    device: str | None = None
    src: str | None = None
    dst: str | None = None
    devices: list[str] = field(default_factory=list)
    op: str | None = None
    bytes: int = 0
    items: int = 0
    memory: int = 0
    carries: str = ""
    label: str = ""
    features: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        default = Task(id="", kind="")
        return {k: v for k, v in d.items() if k in ("id", "kind") or v != getattr(default, k)}

    def memories(self) -> list[str]:
        """Every node this task names."""
        if self.kind == "compute":
            return [self.device] if self.device else []
        if self.kind == "transfer":
            return [n for n in (self.src, self.dst) if n]
        return list(self.devices)


@dataclass
class ResidentTensor:
    name: str
    device: str
    bytes: int


@dataclass
class PlanColumns:
    """A validated plan's tasks as columns (lists in plan order), from :meth:`Plan.validate_columns`."""

    order: list[Task]  # a topological order (what validate() returns)
    position: dict[str, int]  # task id -> index in plan.tasks (its keys: the ids in plan order)
    deps: list[list[str]]
    kinds: list[str]
    phases: list[str]
    workers: list[int]
    iterations: list[int]
    nbytes: list[int]
    items: list[int]
    devices: list[str | None]
    memory: list[int]
    features: list[dict[str, float]]
    dep_counts: list[int]  # len(task.deps), repeats included
    # Every task's dependencies as positions, flattened in plan order; None when some
    # task depends on a later one (then only the ids in ``deps`` say it).
    dep_positions: list[int] | None


@dataclass
class Plan:
    name: str = "plan"
    tasks: list[Task] = field(default_factory=list)
    resident: list[ResidentTensor] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    # ---- building ----------------------------------------------------------
    def add(self, task: Task) -> Task:
        self.tasks.append(task)
        return task

    def compute(self, id: str, device: str, phase: str, deps: Iterable[str] = (), **kw: Any) -> Task:
        return self.add(Task(id=id, kind="compute", device=device, phase=phase, deps=list(deps), **kw))

    def transfer(
        self, id: str, src: str, dst: str, nbytes: int, phase: str, deps: Iterable[str] = (), **kw: Any
    ) -> Task:
        return self.add(
            Task(
                id=id,
                kind="transfer",
                src=src,
                dst=dst,
                bytes=int(nbytes),
                phase=phase,
                deps=list(deps),
                **kw,
            )
        )

    def collective(
        self,
        id: str,
        op: str,
        devices: Iterable[str],
        nbytes: int,
        phase: str,
        deps: Iterable[str] = (),
        **kw: Any,
    ) -> Task:
        return self.add(
            Task(
                id=id,
                kind="collective",
                op=op,
                devices=list(devices),
                bytes=int(nbytes),
                phase=phase,
                deps=list(deps),
                **kw,
            )
        )

    def keep(self, name: str, device: str, nbytes: int) -> None:
        self.resident.append(ResidentTensor(name, device, int(nbytes)))

    # ---- checks ------------------------------------------------------------
    def validate(self, known_nodes: Iterable[str] | None = None) -> list[Task]:
        """Check the plan and return its tasks in a topological order.

        Errors name the task: duplicate ids, unknown kinds or phases, missing fields,
        negative byte counts, dependencies on unknown tasks, cycles, and (when
        ``known_nodes`` is given) devices or memories the hardware does not have.
        """
        return self.validate_columns(known_nodes).order

    def validate_columns(self, known_nodes: Iterable[str] | None = None) -> PlanColumns:
        """:meth:`validate`, also returning what its pass over the tasks read, as columns.

        For a simulator, which would otherwise read each field of every task again
        (one pass over a large plan's scattered task objects per field).
        """
        nodes = set(known_nodes) if known_nodes is not None else None
        by_id: dict[str, int] = {}
        phases = _PHASE_SET
        numbers = (int, float)
        cols = PlanColumns([], by_id, [], [], [], [], [], [], [], [], [], [], [], [])
        dep_positions: list[int] = []
        add_features, add_count, add_position = (
            cols.features.append,
            cols.dep_counts.append,
            dep_positions.append,
        )
        get_position = by_id.get
        add_deps, add_kind, add_phase = cols.deps.append, cols.kinds.append, cols.phases.append
        add_worker, add_iteration, add_device = (
            cols.workers.append,
            cols.iterations.append,
            cols.devices.append,
        )
        add_bytes, add_items, add_memory = cols.nbytes.append, cols.items.append, cols.memory.append
        # Dependencies on tasks not (yet) seen, in plan order: checked once every id is known.
        forward: list[tuple[Task, str]] = []
        for i, t in enumerate(self.tasks):
            # One pass, and the message prefix is built only on error: this loop runs once
            # per task of plans with hundreds of thousands of tasks.
            tid = t.id
            if not tid:
                raise PlanError(f"plan {self.name!r}: a task has an empty id")
            if tid in by_id:
                raise PlanError(f"{self._where(t)}: duplicate task id")
            deps = t.deps
            for d in deps:
                p = get_position(d)
                if p is None:
                    forward.append((t, d))
                else:
                    add_position(p)
            by_id[tid] = i
            add_deps(deps)
            add_count(len(deps))
            kind = t.kind
            add_kind(kind)
            if kind not in TASK_KINDS:
                raise PlanError(f"{self._where(t)}: unknown kind {kind!r}; allowed: {', '.join(TASK_KINDS)}")
            phase = t.phase
            add_phase(phase)
            if phase not in phases:
                raise PlanError(f"{self._where(t)}: unknown phase {t.phase!r}; allowed: {', '.join(PHASES)}")
            nbytes = t.bytes
            items = t.items
            memory = t.memory
            add_bytes(nbytes)
            add_items(items)
            add_memory(memory)
            if nbytes < 0 or items < 0 or memory < 0:
                raise PlanError(
                    f"{self._where(t)}: negative byte or item count "
                    f"(bytes={t.bytes}, items={t.items}, memory={t.memory})"
                )
            add_worker(t.worker)
            add_iteration(t.iteration)
            device = t.device
            add_device(device)
            if kind == "compute":
                if not device:
                    raise PlanError(f"{self._where(t)}: a compute task needs a device")
            elif kind == "transfer":
                if not t.src or not t.dst:
                    raise PlanError(f"{self._where(t)}: a transfer needs src and dst")
            elif t.op not in COLLECTIVE_OPS:
                raise PlanError(
                    f"{self._where(t)}: unknown collective op {t.op!r}; allowed: {', '.join(COLLECTIVE_OPS)}"
                )
            elif len(t.devices) < 1 or len(set(t.devices)) != len(t.devices):
                raise PlanError(f"{self._where(t)}: a collective needs distinct devices")
            features = t.features
            add_features(features)
            for k, v in features.items():
                if not isinstance(v, numbers) or v < 0:
                    raise PlanError(
                        f"{self._where(t)}: cost feature {k!r} must be a non-negative number, got {v!r}"
                    )
            if nodes is not None:
                if kind == "compute":
                    if t.device not in nodes:
                        raise PlanError(
                            f"{self._where(t)}: the hardware has no device or memory {t.device!r}"
                        )
                elif kind == "transfer":
                    if t.src not in nodes or t.dst not in nodes:
                        n = t.src if t.src not in nodes else t.dst
                        raise PlanError(f"{self._where(t)}: the hardware has no device or memory {n!r}")
                else:
                    for n in t.devices:
                        if n not in nodes:
                            raise PlanError(f"{self._where(t)}: the hardware has no device or memory {n!r}")
        for r in self.resident:
            if r.bytes < 0:
                raise PlanError(f"plan {self.name!r}: resident tensor {r.name!r} has negative size")
            if nodes is not None and r.device not in nodes:
                raise PlanError(
                    f"plan {self.name!r}: resident tensor {r.name!r} is on unknown device {r.device!r}"
                )
        # Builders emit tasks after their dependencies; then Kahn's smallest-position-first
        # order is the plan order itself (task i is ready once 0..i-1 are taken): no heap needed.
        for t, d in forward:
            if d not in by_id:
                raise PlanError(f"{self._where(t)} depends on unknown task {d!r}")
        cols.order = list(self.tasks) if not forward else _topological_order(self.name, self.tasks, by_id)
        cols.dep_positions = dep_positions if not forward else None
        return cols

    def _where(self, task: Task) -> str:
        return f"plan {self.name!r}: task {task.id!r}"

    # ---- files -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "meta": self.meta,
            "resident": [asdict(r) for r in self.resident],
            "tasks": [t.to_dict() for t in self.tasks],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<plan>") -> Plan:
        if not isinstance(data, dict) or "tasks" not in data:
            raise PlanError(f"{source}: a plan is a JSON object with a 'tasks' list")
        fields = set(Task.__dataclass_fields__)
        tasks = []
        for i, raw in enumerate(data["tasks"]):
            if not isinstance(raw, dict):
                raise PlanError(f"{source}: tasks[{i}] is not an object")
            unknown = set(raw) - fields
            if unknown:
                raise PlanError(
                    f"{source}: task {raw.get('id', i)!r} has unknown field(s) {', '.join(sorted(unknown))}; "
                    f"allowed: {', '.join(sorted(fields))}"
                )
            if "id" not in raw or "kind" not in raw:
                raise PlanError(f"{source}: tasks[{i}] needs 'id' and 'kind'")
            try:
                tasks.append(Task(**{**raw, "id": str(raw["id"])}))
            except TypeError as exc:
                raise PlanError(f"{source}: task {raw['id']!r}: {exc}") from None
        resident = []
        for i, r in enumerate(data.get("resident", [])):
            try:
                resident.append(ResidentTensor(str(r["name"]), str(r["device"]), int(r["bytes"])))
            except (KeyError, TypeError, ValueError):
                raise PlanError(f"{source}: resident[{i}] needs name, device and bytes") from None
        return cls(
            name=str(data.get("name", Path(source).stem)),
            tasks=tasks,
            resident=resident,
            meta=dict(data.get("meta", {})),
        )

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise PlanError(f"{p}: no such plan file") from None
        except json.JSONDecodeError as exc:
            raise PlanError(f"{p}: not valid JSON: {exc}") from None
        return cls.from_dict(data, str(p))

    def merged(self, other: Plan, prefix: str = "") -> Plan:
        """This plan followed by ``other`` (its ids prefixed), with no dependencies between them."""
        out = Plan(self.name, list(self.tasks), list(self.resident), dict(self.meta))
        for t in other.tasks:
            d = t.to_dict()
            d["id"] = prefix + t.id
            d["deps"] = [prefix + x for x in t.deps]
            out.tasks.append(Task(**d))
        out.resident.extend(other.resident)
        return out


def _topological_order(name: str, tasks: list[Task], position: dict[str, int]) -> list[Task]:
    """Kahn's algorithm in plan order (stable, so execution is deterministic)."""
    indeg = {t.id: len(set(t.deps)) for t in tasks}
    users: dict[str, list[str]] = {t.id: [] for t in tasks}
    for t in tasks:
        for d in set(t.deps):
            users[d].append(t.id)

    ready = [position[t.id] for t in tasks if indeg[t.id] == 0]
    heapq.heapify(ready)
    order: list[Task] = []
    while ready:
        t = tasks[heapq.heappop(ready)]
        order.append(t)
        for u in users[t.id]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, position[u])
    if len(order) != len(tasks):
        stuck = sorted((t for t in tasks if indeg[t.id] > 0), key=lambda t: position[t.id])
        raise PlanError(f"plan {name!r}: dependency cycle through task {stuck[0].id!r}")
    return order
