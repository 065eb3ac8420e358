"""The plan executor: runs an iteration plan on modelled resources and times every task.

A task's life, the same for every kind: it becomes *ready* when its last dependency
ends; it asks for the engine its first step needs and *starts* when that engine is
granted (FIFO; the wait is visible as ``start - ready`` in the trace); it allocates
its memory (``sim.memory``); it runs; at its *end* it frees memory, gives its engine
back and wakes its users. Per kind:

* ``compute`` on a GPU holds the GPU's compute stream for the cost model's duration;
  on a host (``m0.host``) it holds one of the machine's CPU cores.
* ``transfer`` holds the copy engine its direction uses (``sim.resources``: the
  destination GPU's inbound engine for host -> GPU, the source GPU's outbound engine
  for GPU -> host, the *source* GPU's peer engine for GPU -> GPU), waits its route's
  latency, then moves its bytes at the max-min fair rate (``sim.flows``). A copy
  between machines goes in legs, each holding only what it uses while it runs: from a
  GPU whose machine has GPUDirect RDMA the NIC reads GPU memory directly (no engine);
  without it the data is first copied to host memory (a GPU -> host leg on the source's
  outbound engine); then the network leg (no engine); then, into a GPU without RDMA, a
  host -> GPU leg on the destination's inbound engine. ``src == dst`` takes no time.
  A "GPU" without copy engines is a worker process (``sim.resources``): its copies hold its
  compute engine, and so does the network leg of a copy into it (its thread receives).
* ``collective`` runs ring steps (``sim.collectives``; each step one lockstep flow over
  all its chunks' links); it holds no engine and no compute stream (NCCL runs on its
  own stream and SMs), so it overlaps with computation and competes with transfers
  only for link bandwidth.

Trace rows come from ``workbench.trace.build_trace``, the function the real executor
uses too: one row per task (per device for a collective). ``engine`` is ``compute``,
``cpu``, ``h2d``, ``d2h``, ``d2d`` (GPU to GPU in one machine), ``net`` (crossing
machines) or ``collective``. Events are ordered by (time, priority, insertion), so a
plan, hardware and seed give a bit-identical trace. The only randomness is optional
compute-time ``jitter``: a mean-one lognormal factor with that sigma per compute
task, drawn from ``seed`` in plan order before the run; and ``iteration_jitter``, one more
such factor shared by every compute task of one worker's iteration (a slower moment of that
worker: its tasks stretch together, which independent factors average away), drawn after
the tasks' in order of the (worker, iteration) pairs.

Speed (``benchmarks/bench_sim.py``): the work per task is done before the run in
bulk (fields read once into lists, durations from the cost model in one numpy pass,
dependency users as one flat list, per-task memory actions prepared), and a compute
task's end is queued as its bare index (``SimClock.run_all``), so the event path is
a few list lookups per task. Each rule still lives in one place: engines grant and
release only through ``Engine``; a task starts, ends and wakes its users only through
``_ready``, ``_start`` and ``_finish``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from sim.clock import SimClock
from sim.collectives import Step, collective_steps
from sim.costmodel import LinearCostModel, overhead_of
from sim.flows import FlowNetwork
from sim.memory import MemoryTimeline, TaskMemory, check_resident, task_memory
from sim.resources import Engine, MachineEngines
from sim.topology import Route, Topology
from workbench.hardware.spec import ClusterSpec
from workbench.plan import TASK_KINDS, CheckedPlan, Plan, Task
from workbench.trace import TraceRows

TaskEndHook = Callable[[Task, float, float, float], None]  # (task, ready, start, end)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    A run allocates millions of small objects that form no cycles; the collector's
    repeated passes over them (and over the plan and the trace lists) would cost about
    half the run time. Reference counting still frees everything as usual.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@dataclass
class RunTimes:
    """What one run measured: per task (plan order) its times, and the trace rows."""

    ready: list[float]
    start: list[float]
    end: list[float]
    rows: TraceRows  # one per task, one per device for a collective, in the order tasks ended
    checked: CheckedPlan  # the plan as it ran, validated and read into columns (for the trace builder)
    memory: dict[str, int]  # each memory's peak bytes


@dataclass(frozen=True)
class Leg:
    """One hop of a transfer: the engine it holds (None: none) and its route."""

    engine: Engine | None
    route: Route


class PlanExecutor:
    """Runs plans on one cluster; reusable (routes stay cached between plans)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cost_model: LinearCostModel | None = None,
        seed: int = 0,
        jitter: float = 0.0,
        iteration_jitter: float = 0.0,
    ) -> None:
        for name, value in (("jitter", jitter), ("iteration_jitter", iteration_jitter)):
            if not value >= 0:
                raise ValueError(f"{name} must be a non-negative number, got {value}")
        self.cluster = cluster
        self.cost_model = cost_model or LinearCostModel()
        self.topology = Topology(cluster)
        self.seed = seed
        self.jitter = jitter
        self.iteration_jitter = iteration_jitter
        self.stats: dict[str, float] = {}

    def run(self, plan: Plan | CheckedPlan, on_task_end: TaskEndHook | None = None) -> RunTimes:
        """Execute ``plan``. Raises PlanError before running anything for a malformed plan,
        and InfeasiblePlanError after the run when some memory overflowed at some moment.

        A :class:`~workbench.plan.CheckedPlan` (``plan.checked()``) was validated when it was
        taken: only its nodes are checked against this cluster, and what the run derives
        from the plan alone (dependency lists, memory actions) is derived once per snapshot.
        """
        with paused_gc():
            t0 = time.perf_counter()
            if isinstance(plan, CheckedPlan):
                checked = plan
                checked.check_nodes(self.cluster.memory_nodes())
            else:
                checked = plan.checked(self.cluster.memory_nodes())
            check_resident(checked.plan, self.cluster)
            t1 = time.perf_counter()
            run = _Run(self, checked, on_task_end)
            t2 = time.perf_counter()
            try:
                times = run.execute()
            finally:
                run.close()  # its callbacks are bound to it: a cycle only the paused collector would free
            self.stats["validate_s"] = t1 - t0
            self.stats["setup_s"] = t2 - t1
            self.stats["execute_s"] = time.perf_counter() - t2
            return times


@dataclass
class _Structure:
    """What a run derives from the plan alone, kept with a :class:`CheckedPlan` for its next runs."""

    waiting: list[int]  # per task, its distinct dependencies (a run counts them down: copy)
    users: list[int]  # users of i: users[first_user[i]:first_user[i + 1]], in task order
    first_user: list[int]
    user_counts: list[int]  # per task, how many tasks depend on it (the memory timeline counts down: copy)
    memory_actions: list[TaskMemory | None]
    compute: list[int]  # compute tasks' indices
    others: list[int]  # transfers' and collectives' indices
    route_keys: list[tuple[str, str]]  # per transfer among ``others``, (src, dst); () for a collective


_KIND_CODES = {kind: code for code, kind in enumerate(TASK_KINDS)}


def _structure(checked: CheckedPlan) -> _Structure:
    cached = checked.derived.get("sim.structure")
    if cached is not None:
        return cached
    columns = checked.columns
    fields = columns.fields
    tasks = columns.tasks
    n = len(tasks)
    dep_lists = fields["deps"]
    counts = np.fromiter(map(len, dep_lists), dtype=np.int64, count=n)
    position = columns.position
    src = np.fromiter(
        map(position.__getitem__, chain.from_iterable(dep_lists)), dtype=np.int64, count=int(counts.sum())
    )
    # Dependencies as (user, dependency) position pairs; a repeated one counts once (only
    # tasks with two or more dependencies can repeat one: the others are not searched).
    dst = np.repeat(np.arange(n, dtype=np.int64), counts)
    several = np.repeat(counts > 1, counts)
    keys = dst[several] * max(n, 1) + src[several]
    if len(np.unique(keys)) != len(keys):
        pairs = np.unique(dst * max(n, 1) + src)
        dst, src = np.divmod(pairs, n)
        counts = np.bincount(dst, minlength=n)
    # Each task's users in task order (a deterministic wake-up order), as one flat list.
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=first[1:])
    users: list[int] = dst[np.argsort(src, kind="stable")].tolist()
    first_user: list[int] = first.tolist()
    kinds = fields["kind"]
    kind_code = np.fromiter(map(_KIND_CODES.__getitem__, kinds), dtype=np.int8, count=n)
    is_compute = kind_code == _KIND_CODES["compute"]
    is_transfer = kind_code == _KIND_CODES["transfer"]
    others: list[int] = np.flatnonzero(~is_compute).tolist()
    src_of, dst_of = fields["src"], fields["dst"]
    structure = checked.derived["sim.structure"] = _Structure(
        waiting=counts.tolist(),
        users=users,
        first_user=first_user,
        user_counts=np.diff(first).tolist(),
        memory_actions=task_memory(fields, is_transfer, users, first_user),
        compute=np.flatnonzero(is_compute).tolist(),
        others=others,
        route_keys=[(src_of[i] or "", dst_of[i] or "") if kinds[i] == "transfer" else () for i in others],  # type: ignore[misc]
    )
    return structure


def _pick(values: list[Any], positions: list[int]) -> list[Any]:
    """``[values[i] for i in positions]``, in one C-level call."""
    if not positions:
        return []
    picked = itemgetter(*positions)(values)
    return [picked] if len(positions) == 1 else list(picked)


class _Run:
    """The state of one execution; its methods are the event callbacks."""

    def __init__(self, executor: PlanExecutor, checked: CheckedPlan, hook: TaskEndHook | None) -> None:
        plan = self.plan = checked.plan
        self.checked = checked
        self.cluster = executor.cluster
        self.topo = executor.topology
        self.executor = executor
        self.hook = hook
        self.clock = SimClock()
        self.flows = FlowNetwork(self.clock, self.topo.capacity)
        self.engines = MachineEngines(self.cluster)
        tasks = self.tasks = checked.columns.tasks
        n = len(tasks)
        columns = checked.columns.fields
        structure = _structure(checked)
        self.waiting: list[int] = list(structure.waiting)
        self.users = structure.users
        self.first_user = structure.first_user
        self.readies = [0.0] * n
        self.starts = [0.0] * n
        self.ends = [0.0] * n
        self.order: list[int] = []
        self.memory_actions = structure.memory_actions
        self.timeline = MemoryTimeline(plan, self.cluster, list(structure.user_counts))
        self.nbytes = columns["bytes"]
        # Per task: the trace row's device and engine label, the engine its first step
        # needs, and what starting it means (a method per kind). Compute tasks' are looked
        # up by device in bulk; transfers' and collectives' per distinct route or shape.
        compute_engines = self.engines.compute
        label_of = {node: "cpu" if node.endswith(".host") else "compute" for node in compute_engines}
        self.devices: list[str | None] = list(columns["device"])
        self.plan_devices: list[list[str]] = columns["devices"]  # a collective's devices
        self.labels: list[str] = list(map(label_of.get, self.devices, repeat("")))
        self.first_engine: list[Engine | None] = list(map(compute_engines.get, self.devices))
        self.legs: list[tuple[Leg, ...]] = [()] * n
        self.steps: list[list[Step]] = [[]] * n
        start_of = {
            "compute": self._start_compute,
            "transfer": self._start_transfer,
            "collective": self._start_collective,
        }
        self.starters: list[Callable[[int], None]] = list(map(start_of.__getitem__, columns["kind"]))
        self._route_others(structure)
        self.seconds = self._durations(structure.compute, columns, executor)
        self.transfer_overhead = executor.cost_model.transfer_overhead

    def _route_others(self, structure: _Structure) -> None:
        """Legs of every transfer and steps of every collective, found once per distinct
        (src, dst) or (op, devices, bytes): a plan repeats a few of each many times."""
        tasks = self.tasks
        transfer_cache: dict[tuple[str, str], tuple[tuple[Leg, ...], str, str]] = {}
        step_cache: dict[tuple[str, tuple[str, ...], int], list[Step]] = {}
        for i, key in zip(structure.others, structure.route_keys, strict=True):
            if key:
                info = transfer_cache.get(key)
                if info is None:
                    info = transfer_cache[key] = self._transfer_legs(
                        key[0], key[1], f"plan task {tasks[i].id!r}"
                    )
                self.legs[i], self.labels[i], self.devices[i] = info
                self.first_engine[i] = info[0][0].engine
            else:
                t = tasks[i]
                ckey = (t.op or "", tuple(t.devices), t.bytes)
                steps = step_cache.get(ckey)
                if steps is None:
                    where = f"plan task {t.id!r}"
                    steps = step_cache[ckey] = collective_steps(ckey[0], t.devices, t.bytes, self.topo, where)
                self.steps[i] = steps
                self.labels[i] = "collective"
                self.devices[i] = None  # a row per device of the collective

    def _durations(
        self, compute: list[int], columns: dict[str, list[Any]], executor: PlanExecutor
    ) -> list[float]:
        """Every task's compute duration (0 for others), jitter included (module docstring)."""
        tasks = self.tasks
        seconds = executor.cost_model.seconds_many(
            _pick(tasks, compute), self.cluster, _pick(columns["features"], compute)
        )
        if executor.jitter > 0 or executor.iteration_jitter > 0:
            rng = np.random.default_rng(executor.seed)
            sigma = executor.jitter
            z = rng.standard_normal(
                len(compute)
            )  # drawn even at sigma 0: the task draws stay those of a seed
            log_factor = sigma * z - 0.5 * sigma * sigma
            shared = executor.iteration_jitter
            if shared > 0 and compute:
                pairs = np.stack(
                    [
                        np.asarray(_pick(columns["worker"], compute), dtype=np.int64),
                        np.asarray(_pick(columns["iteration"], compute), dtype=np.int64),
                    ],
                    axis=1,
                )
                _, group = np.unique(pairs, axis=0, return_inverse=True)
                zg = rng.standard_normal(int(group.max()) + 1)
                log_factor = log_factor + shared * zg[group.ravel()] - 0.5 * shared * shared
            seconds = seconds * np.exp(log_factor)
        seconds[~(seconds >= 0.0)] = 0.0  # a negative or NaN prediction is no time
        out = np.zeros(len(tasks), dtype=np.float64)
        out[compute] = seconds
        return out.tolist()

    # ---- a task's life -----------------------------------------------------------
    def execute(self) -> RunTimes:
        for i, w in enumerate(self.waiting):
            if w == 0:
                self._ready(i)
        self.clock.run_all(self._compute_end)
        if len(self.order) != len(self.tasks):  # cannot happen after validate(); a guard against engine bugs
            raise RuntimeError(
                f"simulation stalled with {len(self.tasks) - len(self.order)} tasks unfinished"
            )
        memory = self.timeline.check(self.plan.name, self.cluster)
        self.executor.stats = {
            "tasks": len(self.tasks),
            "rebalances": self.flows.rebalances,
            "events": self.clock.entries(),
        }
        return RunTimes(self.readies, self.starts, self.ends, self._rows(), self.checked, memory)

    def _ready(self, i: int) -> None:
        """Task i's dependencies have all ended: ask for the engine it starts on."""
        self.readies[i] = self.clock.now
        engine = self.first_engine[i]
        if engine is None:
            self.starters[i](i)
        else:
            engine.request(self.starters[i], i)

    def _begin(self, i: int) -> float:
        """What every start does: note the time and allocate the task's memory."""
        now = self.starts[i] = self.clock.now
        actions = self.memory_actions[i]
        if actions is not None:
            self.timeline.begin(i, actions, now)
        return now

    def _finish(self, i: int, engine: Engine | None) -> None:
        """Task i has ended: free its memory, give ``engine`` back, wake its users.

        Memory goes first, so a task granted the engine next starts with it freed.
        """
        now = self.ends[i] = self.clock.now
        actions: TaskMemory | None = self.memory_actions[i]
        if actions is not None:
            self.timeline.end(i, actions, now)
        if engine is not None:
            engine.release()
        self.order.append(i)
        if self.hook is not None:
            self.hook(self.tasks[i], self.readies[i], self.starts[i], now)
        waiting = self.waiting
        ready = self._ready
        for u in self.users[self.first_user[i] : self.first_user[i + 1]]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready(u)

    # ---- compute -------------------------------------------------------------------
    def _start_compute(self, i: int) -> None:
        now = self._begin(i)
        self.clock.call_at(now + self.seconds[i], i)  # its end, queued as the bare index

    def _compute_end(self, i: int) -> None:
        self._finish(i, self.first_engine[i])

    # ---- transfers -----------------------------------------------------------------
    def _transfer_legs(self, src: str, dst: str, where: str) -> tuple[tuple[Leg, ...], str, str]:
        """(legs, trace engine label, trace device) of a copy from src to dst."""
        route = self.topo.route_or_raise(src, dst, where)
        src_gpu = ".gpu" in src
        dst_gpu = ".gpu" in dst
        copy = self.engines.copy
        device = dst if dst_gpu else src
        if src == dst:
            return (Leg(None, route),), "d2d" if src_gpu else "cpu", device
        if not route.crosses_network:
            if src_gpu and dst_gpu:
                return (Leg(copy[src].peer, route),), "d2d", device
            if dst_gpu:
                return (Leg(copy[dst].inbound, route),), "h2d", device
            if src_gpu:
                return (Leg(copy[src].outbound, route),), "d2h", device
            return (Leg(None, route),), "cpu", device  # a host-to-host copy within one machine
        legs: list[Leg] = []
        net_src, net_dst = src, dst
        if src_gpu and not self.cluster.machine_of(src).gpudirect_rdma:
            net_src = self.cluster.machine_of(src).host_node
            legs.append(Leg(copy[src].outbound, self.topo.route_or_raise(src, net_src, where)))
        if dst_gpu and not self.cluster.machine_of(dst).gpudirect_rdma:
            net_dst = self.cluster.machine_of(dst).host_node
        # into a worker process (a GPU without copy engines) the receiving thread does the copy
        receiver = self.engines.receiver(dst) if dst_gpu and net_dst == dst else None
        legs.append(Leg(receiver, self.topo.route_or_raise(net_src, net_dst, where)))
        if net_dst != dst:
            legs.append(Leg(copy[dst].inbound, self.topo.route_or_raise(net_dst, dst, where)))
        return tuple(legs), "net", device

    def _start_transfer(self, i: int) -> None:
        self._begin(i)
        task = self.tasks[i]
        overhead = overhead_of(self.transfer_overhead, task.phase, task.id)
        if overhead > 0.0:  # the host's work before the first byte moves (sim.costmodel)
            self.clock.call_later(overhead, partial(self._leg, 0, i))
        else:
            self._leg(0, i)

    def _leg(self, k: int, i: int) -> None:
        """Run leg ``k`` of transfer ``i`` (its engine, if any, is held): latency, then the bytes."""
        route = self.legs[i][k].route
        after = partial(self._leg_end, i, k)
        nbytes = self.nbytes[i]
        if not route.links or nbytes == 0:
            self.clock.call_later(route.latency, after)
        elif route.latency > 0.0:
            self.clock.call_later(route.latency, partial(self.flows.start, route.links, nbytes, after))
        else:
            self.flows.start(route.links, nbytes, after)

    def _leg_end(self, i: int, k: int) -> None:
        legs = self.legs[i]
        if k + 1 == len(legs):
            self._finish(i, legs[k].engine)
            return
        if legs[k].engine is not None:
            legs[k].engine.release()
        following = legs[k + 1].engine
        if following is None:
            self._leg(k + 1, i)
        else:
            following.request(partial(self._leg, k + 1), i)

    # ---- collectives ---------------------------------------------------------------
    def _start_collective(self, i: int) -> None:
        self._begin(i)
        task = self.tasks[i]
        overhead = overhead_of(self.transfer_overhead, task.phase, task.id)
        if overhead > 0.0 or not self.steps[i]:
            # the library's fixed work per call (sim.costmodel), paid on one device too; with none,
            # a one-device collective still ends through the clock, never re-entrantly
            self.clock.call_later(overhead, partial(self._collective_step, i, 0))
        else:
            self._collective_step(i, 0)

    def _collective_step(self, i: int, k: int) -> None:
        steps = self.steps[i]
        if k == len(steps):
            self._finish(i, None)
            return
        step = steps[k]
        after = partial(self._collective_step, i, k + 1)
        if not step.links:
            self.clock.call_later(step.latency, after)
        elif step.latency > 0.0:
            self.clock.call_later(
                step.latency, partial(self.flows.start, step.links, step.chunk_bytes, after)
            )
        else:
            self.flows.start(step.links, step.chunk_bytes, after)

    # ---- results -------------------------------------------------------------------
    def _rows(self) -> TraceRows:
        """One row per task in the order they ended; a collective's expanded to one per device.

        Built in numpy: each ended task repeated once per row it has, and the collectives'
        device names put into their rows as one list (a step per collective, none per row).
        """
        order = np.asarray(self.order, dtype=np.int64)
        devices = self.devices
        device_of = np.empty(len(devices), dtype=object)
        device_of[:] = devices
        if None not in devices:
            row_task = order
        else:
            names = self.plan_devices
            is_collective = np.equal(device_of, None)  # a collective: a row per device it names
            per_task = np.ones(len(devices), dtype=np.int64)
            collectives = np.flatnonzero(is_collective)
            per_task[collectives] = [len(names[i]) for i in collectives.tolist()]
            row_task = np.repeat(order, per_task[order])
            ended = order[is_collective[order]].tolist()
            device_of = device_of[row_task]
            device_of[is_collective[row_task]] = list(chain.from_iterable(map(names.__getitem__, ended)))
            return self._row_table(row_task, device_of)
        return self._row_table(row_task, device_of[row_task])

    def _row_table(self, row_task: np.ndarray, row_device: np.ndarray) -> TraceRows:
        labels = np.empty(len(self.labels), dtype=object)
        labels[:] = self.labels
        return TraceRows(
            task=row_task,  # type: ignore[arg-type]
            device=row_device.tolist(),
            engine=labels[row_task].tolist(),
            ready=np.asarray(self.readies)[row_task],  # type: ignore[arg-type]
            start=np.asarray(self.starts)[row_task],  # type: ignore[arg-type]
            end=np.asarray(self.ends)[row_task],  # type: ignore[arg-type]
        )

    def close(self) -> None:
        """Break the run's reference cycles (callbacks bound to it) so it is freed at once."""
        self.starters = []
        self.checked = None  # type: ignore[assignment]
        self.flows.close()
