"""Iteration plans: the DAG of typed tasks that both executors run.

A plan says what computes where and what moves where, with exact byte counts taken
from the real sampled vertex sets. Three task kinds:

``compute``
    runs on ``device`` (a GPU node such as ``m0.gpu1``, or a host node for CPU work);
    its time comes from a cost model over ``features`` (``vertices``, ``edges``,
    ``in_dim``, ``out_dim``, ``flops``, ``bytes``, ...); ``layer`` names the GNN layer
    it computes, when it computes one (ROC's partitioner learns from per-layer times).
``transfer``
    moves ``bytes`` from memory ``src`` to memory ``dst`` (host or GPU nodes);
    ``carries`` says what (one of :data:`CARRIES`).
``collective``
    ``op`` (``allreduce``, ``allgather``, ``broadcast``, ``alltoall``, ``reducescatter``)
    among ``devices``; ``bytes`` is each device's buffer size.

Tensors and memory. Three kinds of tensor occupy a memory, and the simulator checks
their sum against each memory's capacity at every moment of the run:

* ``resident`` tensors stay in a memory for the whole plan (model weights, feature
  caches, optimizer state);
* a task may ``allocate`` named tensors (``{"name": bytes}``) on the memory it writes
  (a compute task's ``device``, a transfer's ``dst``) when it starts, and any task may
  ``free`` named tensors when it ends. A name is live from the start of the task that
  allocates it to the end of the task that frees it (or the end of the plan); it may
  be allocated again after it is freed, never while it is live, and a resident name
  is never allocated or freed. The freeing task must depend, directly or not, on the
  allocating one. A transfer into a memory always lands in a buffer there: its
  ``allocate`` names that buffer; a transfer that names none gets an unnamed buffer
  of ``bytes``, freed once every task that depends on the transfer has ended (its
  data is consumed);
* ``memory``: transient bytes a task holds on its memory while it runs (workspace,
  a collective's staging buffers on each of its devices).

This is the vocabulary of GPU memory policies: a swap-out is a transfer to host that
allocates the host copy and frees the GPU one, a swap-in a transfer back that
allocates it on the GPU again, and reuse is a tensor that simply stays live.

JSON layout (hand-writable; see ``examples/plans/``)::

    {"name": "...", "meta": {...},
     "resident": [{"name": "cache", "device": "m0.gpu0", "bytes": 1000000}],
     "tasks": [
       {"id": "load", "kind": "transfer", "phase": "h2d", "src": "m0.host", "dst": "m0.gpu0",
        "bytes": 4000000, "allocate": {"x0": 4000000}},
       {"id": "fwd", "kind": "compute", "phase": "forward", "device": "m0.gpu0", "layer": 0,
        "features": {"vertices": 1000, "edges": 20000, "in_dim": 128, "out_dim": 128},
        "deps": ["load"], "allocate": {"h1": 512000}, "free": ["x0"]}]}

Optional task fields: ``worker`` and ``iteration`` (default 0), ``items``, ``memory``,
``allocate``, ``free``, ``layer``, ``carries``, ``label``. ``workers`` (optional)
maps devices to the worker that drives them; a collective's trace row on a device
belongs to that worker (by default a GPU's global rank, a host's machine index).

Every field is type-checked as a plan is read (:meth:`Plan.from_dict`, :meth:`Plan.load`)
and again by :meth:`Plan.validate`: a count (``bytes``, ``items``, ``worker``, ...) is a
whole number that fits the trace's int64 columns (``"1000"``, ``1000.5``, NaN, ``true``
or 2**63 are errors naming the file, the task and the field), and a container is of its
JSON type (``"resident": 5`` or ``"meta": [1]`` are errors, not tracebacks).
"""

from __future__ import annotations

import heapq
import json
import math
import numbers
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

from workbench.errors import PlanError
from workbench.validate import INT64_MAX, short_repr

TASK_KINDS = ("compute", "transfer", "collective")
# "allreduce-tree": an all-reduce the simulator runs as a pipelined binary tree (sim.collectives)
# instead of a ring: fewer, larger steps, for small messages across many GPUs.
COLLECTIVE_OPS = ("allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "allreduce-tree")
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
# What a transfer or collective carries ("" when the plan does not say).
CARRIES = (
    "",
    "features",  # input vertex features
    "activations",  # a layer's outputs (forward) or what backward saved of them
    "gradients",  # gradients of activations or of parameters
    "partials",  # partial aggregations (P3's first layer, HopGNN's migrated sums)
    "embeddings",  # final or historical vertex embeddings
    "model",  # parameters (HopGNN's migration, a broadcast of weights)
    "optimizer",  # optimizer state
    "labels",  # training labels
    "indices",  # vertex or edge ids (sampling requests)
    "adjacency",  # graph structure (sampled blocks, edge chunks)
    "probabilities",  # sampling probability matrices (matrix-based bulk sampling)
    "other",
)
_PHASE_SET = frozenset(PHASES)
_CARRIES_SET = frozenset(CARRIES)


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
    allocate: dict[str, int] = field(default_factory=dict)
    free: list[str] = field(default_factory=list)
    layer: int | None = None
    carries: str = ""
    label: str = ""
    features: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from their defaults (``id`` and ``kind`` always), containers copied.

        Read field by field rather than with ``dataclasses.asdict``, whose recursive deep copy
        took 3.6 s of a 27 s 128-GPU bulk-pipeline run: every field holds immutable values or
        flat lists and dicts of them, so a shallow copy of each container is a full copy."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind}
        for name, default in _TASK_DEFAULTS:
            v = getattr(self, name)
            if v != default:
                out[name] = v.copy() if isinstance(v, (list, dict)) else v
        return out

    def memories(self) -> list[str]:
        """Every node this task names."""
        if self.kind == "compute":
            return [self.device] if self.device else []
        if self.kind == "transfer":
            return [n for n in (self.src, self.dst) if n]
        return list(self.devices)

    def writes_to(self) -> str | None:
        """The memory this task's ``allocate`` tensors live on: a compute's device, a transfer's dst."""
        return self.device if self.kind == "compute" else self.dst if self.kind == "transfer" else None


_TASK_DEFAULTS = tuple(
    (f.name, getattr(Task(id="", kind=""), f.name)) for f in fields(Task) if f.name not in ("id", "kind")
)


@dataclass
class ResidentTensor:
    name: str
    device: str
    bytes: int


@dataclass
class Plan:
    name: str = "plan"
    tasks: list[Task] = field(default_factory=list)
    resident: list[ResidentTensor] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    workers: dict[str, int] = field(default_factory=dict)  # device -> the worker that drives it

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

    def device_workers(self, gpu_nodes: Sequence[str], host_nodes: Sequence[str]) -> dict[str, int]:
        """Which worker drives each device: ``workers`` where the plan says, else a GPU's
        index in ``gpu_nodes`` (its global rank) and a host's index in ``host_nodes``."""
        out = {node: rank for rank, node in enumerate(host_nodes)}
        out.update({node: rank for rank, node in enumerate(gpu_nodes)})
        out.update(self.workers)
        return out

    # ---- checks ------------------------------------------------------------
    def validate(self, known_nodes: Iterable[str] | None = None) -> list[Task]:
        """Check the plan and return its tasks in a topological order (plan order where it can).

        Errors name the task and the field: duplicate ids, unknown kinds, phases or
        ``carries``, fields of the wrong type (a byte count that is a string, a
        fraction, NaN or a boolean), missing fields, negative counts, dependencies on
        unknown tasks, cycles, tensors freed that nothing allocates, and (when
        ``known_nodes`` is given) devices or memories the hardware does not have.
        """
        return self._validated(known_nodes)[0]

    def checked(self, known_nodes: Iterable[str] | None = None) -> CheckedPlan:
        """A validated snapshot of this plan, to simulate under several hardware files or seeds.

        The plan is read and checked once here (as :meth:`validate` with ``known_nodes``);
        each simulation of the snapshot checks only that its hardware has the nodes the
        plan names (:meth:`CheckedPlan.check_nodes`). The snapshot holds the task list as
        it is now, but shares the task objects: change no task while it is in use, and take
        a new snapshot after changing the plan.
        """
        order, position = self._validated(known_nodes)
        columns = PlanColumns.of(self.tasks)
        columns.position = position
        return CheckedPlan(self, columns, order)

    def _validated(self, known_nodes: Iterable[str] | None) -> tuple[list[Task], dict[str, int]]:
        """:meth:`validate`'s order, and each task id's position in the plan."""
        nodes = set(known_nodes) if known_nodes is not None else None
        position, allocated, freed, in_order = self._scan_tasks(nodes)
        self._check_tensors_and_workers(nodes, allocated, freed)
        if in_order:
            order = list(self.tasks)
        else:
            for task in self.tasks:
                for d in task.deps:
                    if d not in position:
                        raise PlanError(f"{self._where(task)} depends on unknown task {d!r}")
            order = topological_order(self.name, self.tasks, position)
        if freed:
            self._check_frees_follow_allocations(order, position)
        return order, position

    def _scan_tasks(self, nodes: set[str] | None) -> tuple[dict[str, int], set[str], dict[str, Task], bool]:
        """Task by task: each task's own fields, duplicate ids and (with ``nodes``) unknown
        nodes, raising for the first task with a problem. Returns (position of each id,
        tensors allocated, the first task freeing each tensor, whether every dependency
        comes before its user in plan order)."""
        name = self.name
        position: dict[str, int] = {}
        allocated: set[str] = set()
        freed: dict[str, Task] = {}
        in_order = True  # every task after its dependencies: the plan order is topological
        for i, task in enumerate(self.tasks):
            check_task(task, name)
            if task.id in position:
                raise PlanError(f"{self._where(task)}: duplicate task id")
            for d in task.deps:
                if d not in position:
                    in_order = False  # itself, a later task, or an unknown one (checked later)
            position[task.id] = i
            # (A compute's device or a transfer's ends known: the common case, without a list.)
            if nodes is not None and not (
                (task.kind == "compute" and task.device in nodes)
                or (task.kind == "transfer" and task.src in nodes and task.dst in nodes)
            ):
                for node in task.memories():
                    if node not in nodes:
                        raise PlanError(f"{self._where(task)}: the hardware has no device or memory {node!r}")
            if task.allocate:
                allocated.update(task.allocate)
            for tensor in task.free:
                freed.setdefault(tensor, task)
        return position, allocated, freed, in_order

    def _check_tensors_and_workers(
        self, nodes: set[str] | None, allocated: set[str], freed: dict[str, Task]
    ) -> None:
        """Resident tensors, tensors freed or allocated against them, and ``workers``."""
        name = self.name
        resident_names = set()
        for r in self.resident:
            where = f"plan {name!r}: resident tensor {r.name!r}"
            if not _is_count(r.bytes):
                raise PlanError(f"{where}: bytes {_count_problem(r.bytes)}")
            if nodes is not None and r.device not in nodes:
                raise PlanError(f"{where} is on unknown device {r.device!r}")
            resident_names.add(r.name)
        for tensor, task in freed.items():
            if tensor in resident_names:
                raise PlanError(
                    f"{self._where(task)}: frees resident tensor {tensor!r} (resident tensors stay for the whole plan)"
                )
            if tensor not in allocated:
                raise PlanError(f"{self._where(task)}: frees tensor {tensor!r}, which no task allocates")
        if allocated & resident_names:
            task = next(t for t in self.tasks if set(t.allocate) & resident_names)
            tensor = sorted(set(task.allocate) & resident_names)[0]
            raise PlanError(f"{self._where(task)}: allocates {tensor!r}, the name of a resident tensor")
        for device, worker in self.workers.items():
            if not _is_count(worker):
                raise PlanError(f"plan {name!r}: workers[{device!r}] {_count_problem(worker)}")
            if nodes is not None and device not in nodes:
                raise PlanError(f"plan {name!r}: workers names unknown device {device!r}")

    def _check_frees_follow_allocations(self, order: list[Task], position: dict[str, int]) -> None:
        """Each task that frees a tensor must depend, directly or not, on a task that
        allocates it (or allocate it itself): otherwise the free could run before the
        allocation, and whether the plan is accepted would hang on timing.

        A backward search from the freeing task through its dependencies, which never
        goes past (in ``order``) the earliest task it looks for: plans free a tensor a
        few tasks after allocating it, so the search stays small.
        """
        rank = {t.id: r for r, t in enumerate(order)}
        allocators: dict[str, list[str]] = {}
        for t in self.tasks:
            for tensor in t.allocate:
                allocators.setdefault(tensor, []).append(t.id)
        for task in self.tasks:
            # Tensors the task frees without allocating them itself or a direct dependency doing so.
            missing = {
                tensor: allocators[tensor]
                for tensor in task.free
                if tensor not in task.allocate
                and not any(tensor in self.tasks[position[d]].allocate for d in task.deps)
            }
            if missing:
                self._search_allocators(task, missing, rank, position)

    def _search_allocators(
        self, task: Task, missing: dict[str, list[str]], rank: dict[str, int], position: dict[str, int]
    ) -> None:
        targets = {a for ids in missing.values() for a in ids}
        floor = min(rank[a] for a in targets)
        found: set[str] = set()
        seen = {task.id}
        stack = [task.id]
        while stack and not all(found.intersection(ids) for ids in missing.values()):
            for d in self.tasks[position[stack.pop()]].deps:
                if d not in seen and rank[d] >= floor:
                    seen.add(d)
                    stack.append(d)
                    if d in targets:
                        found.add(d)
        for tensor, ids in missing.items():
            if not found.intersection(ids):
                raise PlanError(
                    f"{self._where(task)}: frees tensor {tensor!r}, allocated by task {ids[0]!r}, but does not "
                    f"depend on it (directly or not), so the free could run before the allocation"
                )

    def _where(self, task: Task) -> str:
        return f"plan {self.name!r}: task {task.id!r}"

    # ---- files -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "meta": self.meta,
            "resident": [asdict(r) for r in self.resident],
            "tasks": [t.to_dict() for t in self.tasks],
        }
        if self.workers:
            out["workers"] = dict(self.workers)
        return out

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<plan>") -> Plan:
        """A plan from its JSON layout, every task's fields checked (:func:`check_task`).

        Errors name ``source`` and the field: a field of the wrong JSON type (``"meta": [1]``,
        ``"resident": 5``, a task that is not an object, an id that is not a string), or a
        count beyond what the trace's int64 columns hold. Checks across tasks
        (dependencies, tensors) are :meth:`validate`'s.
        """
        if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
            raise PlanError(f"{source}: a plan is a JSON object with a 'tasks' list")
        unknown = set(data) - _PLAN_FIELDS
        if unknown:
            raise PlanError(
                f"{source}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_PLAN_FIELDS))}"
            )
        name = data.get("name", Path(source).stem)
        if not isinstance(name, str):
            raise PlanError(f"{source}: name must be a string, got {short_repr(name)}")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise PlanError(f"{source}: meta must be an object, got {short_repr(meta)}")
        tasks = [_task_from_dict(raw, i, name, source) for i, raw in enumerate(data["tasks"])]
        return cls(
            name=name,
            tasks=tasks,
            resident=_resident_from_list(data.get("resident", []), source),
            meta=dict(meta),
            workers=_workers_from_dict(data.get("workers", {}), source),
        )

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        p = Path(path)
        if p.is_dir():
            raise PlanError(f"{p}: is a folder, expected a plan file")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PlanError(f"{p}: no such plan file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PlanError(f"{p}: not valid JSON: {exc}") from None
        except RecursionError:
            raise PlanError(f"{p}: not a plan: JSON nested too deeply to read") from None
        except OSError as exc:
            raise PlanError(f"{p}: cannot read plan file ({exc.strerror or exc})") from None
        return cls.from_dict(data, str(p))

    def merged(self, other: Plan, prefix: str = "") -> Plan:
        """This plan followed by ``other`` (its ids prefixed), with no dependencies between them."""
        out = Plan(self.name, list(self.tasks), list(self.resident), dict(self.meta), dict(self.workers))
        for t in other.tasks:
            d = t.to_dict()
            d["id"] = prefix + t.id
            d["deps"] = [prefix + x for x in t.deps]
            out.tasks.append(Task(**d))
        out.resident.extend(other.resident)
        out.workers.update(other.workers)
        return out


# ---- reading JSON --------------------------------------------------------------
_PLAN_FIELDS = frozenset({"name", "meta", "resident", "tasks", "workers"})
_TASK_FIELDS = frozenset(Task.__dataclass_fields__)


def _task_from_dict(raw: Any, i: int, plan_name: str, source: str) -> Task:
    """Task ``i`` of a plan file, its fields checked; errors name the file and the task."""
    if not isinstance(raw, dict):
        raise PlanError(f"{source}: tasks[{i}] must be an object, got {short_repr(raw)}")
    if "id" not in raw or "kind" not in raw:
        raise PlanError(f"{source}: tasks[{i}] needs 'id' and 'kind'")
    if not _is_name(raw["id"]):
        raise PlanError(f"{source}: tasks[{i}].id must be a non-empty string, got {short_repr(raw['id'])}")
    unknown = set(raw) - _TASK_FIELDS
    if unknown:
        raise PlanError(
            f"{source}: task {raw['id']!r} has unknown field(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(_TASK_FIELDS))}"
        )
    task = Task(**_whole_numbers(raw))
    try:
        check_task(task, plan_name)
    except PlanError as exc:
        raise PlanError(f"{source}: {exc}") from None
    return task


def _resident_from_list(raw: Any, source: str) -> list[ResidentTensor]:
    if not isinstance(raw, list):
        raise PlanError(
            f"{source}: resident must be a list of {{name, device, bytes}} objects, got {short_repr(raw)}"
        )
    out = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or set(r) != {"name", "device", "bytes"}:
            raise PlanError(f"{source}: resident[{i}] must be an object with exactly name, device and bytes")
        for key in ("name", "device"):
            if not _is_name(r[key]):
                raise PlanError(
                    f"{source}: resident[{i}].{key} must be a non-empty string, got {short_repr(r[key])}"
                )
        nbytes = _whole(r["bytes"])
        if not _is_count(nbytes):
            raise PlanError(f"{source}: resident[{i}].bytes {_count_problem(nbytes)}")
        out.append(ResidentTensor(r["name"], r["device"], nbytes))
    return out


def _workers_from_dict(raw: Any, source: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise PlanError(f"{source}: 'workers' must map devices to worker numbers, got {short_repr(raw)}")
    out = {}
    for device, worker in raw.items():
        worker = _whole(worker)
        if not _is_count(worker):
            raise PlanError(f"{source}: workers[{device!r}] {_count_problem(worker)}")
        out[device] = worker
    return out


# ---- one task's fields ---------------------------------------------------------
_TASK_COUNTS = ("bytes", "items", "memory", "worker", "iteration")
_COUNT_FIELDS = (*_TASK_COUNTS, "layer")


def _whole(x: Any) -> Any:
    """JSON has one number type: ``1e9`` written by hand is the whole number it looks like."""
    return int(x) if type(x) is float and x.is_integer() else x


def _whole_numbers(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: _whole(raw[k]) if k in _COUNT_FIELDS else raw[k] for k in raw}
    if isinstance(out.get("allocate"), dict):
        out["allocate"] = {k: _whole(v) for k, v in out["allocate"].items()}
    return out


def _is_count(x: Any) -> bool:
    """A non-negative whole number (numpy's too) that fits the trace's int64 columns, never
    a bool: JSON's ``true`` is not 1 byte."""
    if type(x) is int:
        return 0 <= x <= INT64_MAX
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and 0 <= x <= INT64_MAX


def _count_problem(x: Any) -> str:
    """Why ``x`` is not a count (see :func:`_is_count`), as the end of an error message."""
    if isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > INT64_MAX:
        return f"is beyond what an int64 holds (at most {INT64_MAX}), got {x!r}"
    return f"must be a non-negative whole number, got {x!r}"


def _is_amount(x: Any) -> bool:
    """A finite non-negative real number (not a bool) that a float holds: the cost model
    computes in floats, and an int beyond a float's range (JSON's 1 followed by 400
    zeros) does not convert."""
    if type(x) is float:
        return x >= 0 and math.isfinite(x)
    if type(x) is int:
        return 0 <= x <= _FLOAT_MAX
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and 0 <= x <= _FLOAT_MAX


_FLOAT_MAX = sys.float_info.max  # also false for NaN, and compares exactly with any int
_INF = math.inf


def _is_name(x: Any) -> bool:
    return isinstance(x, str) and x != ""


def _fail(plan_name: str, t: Task, what: str) -> PlanError:
    return PlanError(f"plan {plan_name!r}: task {t.id!r}: {what}")


def check_task(t: Task, plan_name: str = "plan") -> None:
    """Raise :class:`PlanError` naming the task and the field for anything malformed in ``t`` alone.

    Runs once per task of plans with hundreds of thousands of tasks, so the common field
    values (a plain int, str or float, an empty dict or list) pass here inline, with a type
    test and a comparison and no call; a group of fields that does not goes to its checker,
    which applies the general rule (numpy integers are counts too, say) and raises naming
    the field. Messages are built only on error. Order matters: a task with several
    problems reports the first one in this order.
    """
    tid, kind, phase = t.id, t.kind, t.phase
    if not ((type(tid) is str and tid) or _is_name(tid)):
        raise PlanError(f"plan {plan_name!r}: a task has an empty or non-string id ({tid!r})")
    if kind not in TASK_KINDS or type(phase) is not str or phase not in _PHASE_SET:
        _check_kind_and_phase(t, plan_name)
    b, items, memory, worker, iteration, layer = t.bytes, t.items, t.memory, t.worker, t.iteration, t.layer
    if not (
        type(b) is int
        and type(items) is int
        and type(memory) is int
        and type(worker) is int
        and type(iteration) is int
        and 0 <= b <= INT64_MAX
        and 0 <= items <= INT64_MAX
        and 0 <= memory <= INT64_MAX
        and 0 <= worker <= INT64_MAX
        and 0 <= iteration <= INT64_MAX
        and (layer is None or (type(layer) is int and 0 <= layer <= INT64_MAX))
    ):
        _check_counts(t, plan_name)
    carries = t.carries
    if type(carries) is not str or carries not in _CARRIES_SET or type(t.label) is not str:
        _check_tags(t, plan_name)
    _check_deps_and_features(t, plan_name)
    allocate, free = t.allocate, t.free
    if not (type(allocate) is dict and not allocate and type(free) is list and not free):
        _check_memory_effects(t, plan_name)
    if kind == "compute":
        device = t.device
        if not (type(device) is str and device):
            _check_compute_fields(t, plan_name)
    elif kind == "transfer":
        src, dst = t.src, t.dst
        if not (type(src) is str and src and type(dst) is str and dst):
            _check_transfer_fields(t, plan_name)
    else:
        _check_collective_fields(t, plan_name)


def _check_kind_and_phase(t: Task, plan_name: str) -> None:
    if t.kind not in TASK_KINDS:
        raise _fail(plan_name, t, f"unknown kind {t.kind!r}; allowed: {', '.join(TASK_KINDS)}")
    if type(t.phase) is not str or t.phase not in _PHASE_SET:
        raise _fail(plan_name, t, f"unknown phase {t.phase!r}; allowed: {', '.join(PHASES)}")


def _check_counts(t: Task, plan_name: str) -> None:
    """bytes, items, memory, worker, iteration and layer must be counts (non-negative int64s)."""
    for field_name in _TASK_COUNTS:
        value = getattr(t, field_name)
        if not _is_count(value):
            raise _fail(plan_name, t, f"{field_name} {_count_problem(value)}")
    if t.layer is not None and not _is_count(t.layer):
        raise _fail(plan_name, t, f"layer {_count_problem(t.layer)}")


def _check_tags(t: Task, plan_name: str) -> None:
    if type(t.carries) is not str or t.carries not in _CARRIES_SET:
        raise _fail(plan_name, t, f"carries {t.carries!r}; allowed: {', '.join(c for c in CARRIES if c)}")
    if type(t.label) is not str:
        raise _fail(plan_name, t, f"label must be a string, got {t.label!r}")


def _check_deps_and_features(t: Task, plan_name: str) -> None:
    if type(t.deps) is not list:
        raise _fail(plan_name, t, f"deps must be a list of task ids, got {t.deps!r}")
    for d in t.deps:
        if not ((type(d) is str and d) or _is_name(d)):
            raise _fail(plan_name, t, f"deps must be a list of task ids, got {t.deps!r}")
    if type(t.features) is not dict:
        raise _fail(plan_name, t, f"features must be an object of numbers, got {t.features!r}")
    for k, v in t.features.items():
        if not ((type(v) is float and 0.0 <= v < _INF) or _is_amount(v)):
            raise _fail(plan_name, t, f"cost feature {k!r} must be a finite non-negative number, got {v!r}")


def _check_memory_effects(t: Task, plan_name: str) -> None:
    """allocate maps tensor names to byte counts; free lists distinct tensor names."""
    if type(t.allocate) is not dict:
        raise _fail(plan_name, t, f"allocate must map tensor names to bytes, got {t.allocate!r}")
    for k, v in t.allocate.items():
        if not _is_name(k) or not _is_count(v):
            raise _fail(plan_name, t, f"allocate[{k!r}] {_count_problem(v)}")
    if type(t.free) is not list:
        raise _fail(plan_name, t, f"free must be a list of tensor names, got {t.free!r}")
    if t.free:
        if not all(_is_name(n) for n in t.free):
            raise _fail(plan_name, t, f"free must be a list of tensor names, got {t.free!r}")
        if len(set(t.free)) != len(t.free):
            raise _fail(plan_name, t, "free names a tensor twice")


def _check_compute_fields(t: Task, plan_name: str) -> None:
    if not _is_name(t.device):
        raise _fail(plan_name, t, "a compute task needs a device")


def _check_transfer_fields(t: Task, plan_name: str) -> None:
    if not (_is_name(t.src) and _is_name(t.dst)):
        raise _fail(plan_name, t, "a transfer needs src and dst")


def _check_collective_fields(t: Task, plan_name: str) -> None:
    if t.op not in COLLECTIVE_OPS:
        raise _fail(plan_name, t, f"unknown collective op {t.op!r}; allowed: {', '.join(COLLECTIVE_OPS)}")
    devices = t.devices
    if type(devices) is not list or not devices or not all(_is_name(d) for d in devices):
        raise _fail(plan_name, t, "a collective needs a list of devices")
    if len(set(devices)) != len(devices):
        raise _fail(plan_name, t, "a collective needs distinct devices")
    if t.allocate:
        raise _fail(
            plan_name,
            t,
            "a collective allocates nothing (it works in place); "
            "give its buffers to the tasks that make them, or use memory for staging",
        )


def topological_order(name: str, tasks: list[Task], position: dict[str, int]) -> list[Task]:
    """Kahn's algorithm, smallest plan position first (stable, so execution is deterministic).

    ``position``: each task id's index in ``tasks``.
    """
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


# ---- a plan read into columns ------------------------------------------------------
# The fields executors and the trace builder read (not op, carries, label: read per task where needed).
COLUMN_FIELDS = (
    "id", "kind", "phase", "worker", "iteration", "deps", "device", "src", "dst", "devices",
    "bytes", "items", "memory", "allocate", "free", "layer", "features",
)  # fmt: skip


@dataclass
class PlanColumns:
    """A plan's tasks read once, in one pass over the task objects, into one list per field:
    the simulator and the trace builder read these instead of the (scattered) task objects."""

    tasks: list[Task]
    fields: dict[str, list[Any]]
    position: dict[str, int] = field(default_factory=dict)  # each id's index, filled by validation

    @classmethod
    def of(cls, tasks: list[Task]) -> PlanColumns:
        names = COLUMN_FIELDS
        if not tasks:
            return cls(list(tasks), {n: [] for n in names})
        # One attribute pass per task object for every field, into one flat list, then
        # split into columns by slicing it: a pass per field would miss the cache on every
        # task object each time, and a transpose of the rows (zip) costs more than the slices.
        flat = list(chain.from_iterable(map(attrgetter(*names), tasks)))
        step = len(names)
        return cls(list(tasks), {name: flat[k::step] for k, name in enumerate(names)})

    def nodes(self) -> set[str]:
        """Every node the tasks name: computes' devices, transfers' ends, collectives' devices."""
        f = self.fields
        kinds = f["kind"]
        named = {d for d, k in zip(f["device"], kinds, strict=True) if k == "compute"}
        for s, d, k in zip(f["src"], f["dst"], kinds, strict=True):
            if k == "transfer":
                named.update((s, d))
        named.update(
            chain.from_iterable(g for g, k in zip(f["devices"], kinds, strict=True) if k == "collective")
        )
        return named


@dataclass
class CheckedPlan:
    """A plan validated once (:meth:`Plan.checked`), with its tasks read into columns."""

    plan: Plan
    columns: PlanColumns
    order: list[Task]
    # What consumers derive from the snapshot once and reuse across runs (the simulator's
    # dependency lists and memory actions, the trace's per-task columns), by the consumer's key.
    derived: dict[str, Any] = field(default_factory=dict)
    named: set[str] | None = None  # every node the tasks name, found on the first check_nodes

    @property
    def name(self) -> str:
        return self.plan.name

    def check_nodes(self, known_nodes: Iterable[str]) -> None:
        """Raise :class:`PlanError` as :meth:`Plan.validate` would if the hardware lacks a node
        the plan names (a task's, a resident tensor's, or one in ``workers``)."""
        nodes = set(known_nodes)
        plan = self.plan
        if self.named is None:
            self.named = self.columns.nodes()
        if (
            self.named <= nodes
            and all(r.device in nodes for r in plan.resident)
            and set(plan.workers) <= nodes
        ):
            return
        # The task-by-task scan of the snapshot (not of the plan, which may have changed) says where.
        snapshot = Plan(plan.name, self.columns.tasks, plan.resident, plan.meta, plan.workers)
        snapshot.validate(nodes)
