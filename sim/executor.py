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
task, drawn from ``seed`` in plan order before the run.

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
from operator import attrgetter

import numpy as np

from sim.clock import SimClock
from sim.collectives import Step, collective_steps
from sim.costmodel import LinearCostModel
from sim.flows import FlowNetwork
from sim.memory import MemoryTimeline, TaskMemory, check_resident, task_memory
from sim.resources import Engine, MachineEngines
from sim.topology import Route, Topology
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan, Task
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
    fields: dict[str, list]  # task fields read once, for the trace builder
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
    ) -> None:
        if not jitter >= 0:
            raise ValueError(f"jitter must be a non-negative number, got {jitter}")
        self.cluster = cluster
        self.cost_model = cost_model or LinearCostModel()
        self.topology = Topology(cluster)
        self.seed = seed
        self.jitter = jitter
        self.stats: dict[str, float] = {}

    def run(self, plan: Plan, on_task_end: TaskEndHook | None = None) -> RunTimes:
        """Execute ``plan``. Raises PlanError before running anything for a malformed plan,
        and InfeasiblePlanError after the run when some memory overflowed at some moment."""
        with paused_gc():
            t0 = time.perf_counter()
            plan.validate(self.cluster.memory_nodes())
            check_resident(plan, self.cluster)
            t1 = time.perf_counter()
            run = _Run(self, plan, on_task_end)
            t2 = time.perf_counter()
            try:
                times = run.execute()
            finally:
                run.close()  # its callbacks are bound to it: a cycle only the paused collector would free
            self.stats["validate_s"] = t1 - t0
            self.stats["setup_s"] = t2 - t1
            self.stats["execute_s"] = time.perf_counter() - t2
            return times


class _Run:
    """The state of one execution; its methods are the event callbacks."""

    def __init__(self, executor: PlanExecutor, plan: Plan, hook: TaskEndHook | None) -> None:
        self.plan = plan
        self.cluster = executor.cluster
        self.topo = executor.topology
        self.executor = executor
        self.hook = hook
        self.clock = SimClock()
        self.flows = FlowNetwork(self.clock, self.topo.capacity)
        self.engines = MachineEngines(self.cluster)
        tasks = self.tasks = plan.tasks
        n = len(tasks)
        names = ("id", "kind", "phase", "worker", "iteration", "bytes", "items", "device", "deps", "features")
        # One pass over the (scattered) task objects for all fields, then split into columns.
        columns = zip(*map(attrgetter(*names), tasks), strict=True) if n else ((),) * len(names)
        fields = self.fields = dict(zip(names, map(list, columns), strict=True))
        # Dependencies as (user, dependency) position pairs; a repeated one counts once.
        position = dict(zip(fields["id"], range(n), strict=True))
        dep_lists = fields.pop("deps")
        counts = np.fromiter(map(len, dep_lists), dtype=np.int64, count=n)
        src = np.fromiter(
            map(position.__getitem__, chain.from_iterable(dep_lists)), dtype=np.int64, count=int(counts.sum())
        )
        dst = np.repeat(np.arange(n, dtype=np.int64), counts)
        pairs = np.unique(dst * max(n, 1) + src)
        if len(pairs) != len(src):
            dst, src = np.divmod(pairs, n)
            counts = np.bincount(dst, minlength=n)
        self.waiting: list[int] = counts.tolist()
        # Each task's users in task order (a deterministic wake-up order), as one flat
        # list: users of i are users[first[i]:first[i + 1]].
        first = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=first[1:])
        self.users: list[int] = dst[np.argsort(src, kind="stable")].tolist()
        self.first_user: list[int] = first.tolist()
        self.readies = [0.0] * n
        self.starts = [0.0] * n
        self.ends = [0.0] * n
        self.order: list[int] = []
        self.memory_actions = task_memory(tasks, fields["kind"], self.users, self.first_user)
        self.timeline = MemoryTimeline(plan, self.cluster, np.diff(first).tolist())
        self.nbytes = fields["bytes"]
        # Per task: the trace row's device and engine label, the engine its first step
        # needs, and what starting it means (a method per kind). Compute tasks' are looked
        # up by device in bulk; transfers' and collectives' found per task below.
        kinds = fields["kind"]
        compute_engines = self.engines.compute
        label_of = {node: "cpu" if node.endswith(".host") else "compute" for node in compute_engines}
        self.devices: list[str | None] = list(fields["device"])
        self.labels: list[str] = list(map(label_of.get, self.devices, repeat("")))
        self.first_engine: list[Engine | None] = list(map(compute_engines.get, self.devices))
        self.legs: list[tuple[Leg, ...]] = [()] * n
        self.steps: list[list[Step]] = [[]] * n
        start_of = {
            "compute": self._start_compute,
            "transfer": self._start_transfer,
            "collective": self._start_collective,
        }
        self.starters: list[Callable[[int], None]] = list(map(start_of.__getitem__, kinds))
        compute = [i for i, k in enumerate(kinds) if k == "compute"]
        transfer_cache: dict[tuple[str, str], tuple[tuple[Leg, ...], str, str]] = {}
        step_cache: dict[tuple[str, tuple[str, ...], int], list[Step]] = {}
        for i in [i for i, k in enumerate(kinds) if k != "compute"]:
            t = tasks[i]
            if t.kind == "transfer":
                key = (t.src or "", t.dst or "")
                info = transfer_cache.get(key)
                if info is None:
                    info = transfer_cache[key] = self._transfer_legs(key[0], key[1], f"plan task {t.id!r}")
                self.legs[i], self.labels[i], self.devices[i] = info
                self.first_engine[i] = info[0][0].engine
            else:
                ckey = (t.op or "", tuple(t.devices), t.bytes)
                steps = step_cache.get(ckey)
                if steps is None:
                    where = f"plan task {t.id!r}"
                    steps = step_cache[ckey] = collective_steps(ckey[0], t.devices, t.bytes, self.topo, where)
                self.steps[i] = steps
                self.labels[i] = "collective"
                self.devices[i] = None  # a row per device of the collective
        self.seconds = self._durations(compute, fields.pop("features"), executor)
        self.transfer_overhead = executor.cost_model.transfer_overhead

    def _durations(
        self, compute: list[int], features: list[dict[str, float]], executor: PlanExecutor
    ) -> list[float]:
        """Every task's compute duration (0 for others), jitter included."""
        tasks = self.tasks
        seconds = executor.cost_model.seconds_many(
            [tasks[i] for i in compute], self.cluster, [features[i] for i in compute]
        )
        if executor.jitter > 0:
            sigma = executor.jitter
            z = np.random.default_rng(executor.seed).standard_normal(len(compute))
            seconds = seconds * np.exp(sigma * z - 0.5 * sigma * sigma)
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
        return RunTimes(self.readies, self.starts, self.ends, self._rows(), self.fields, memory)

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
        legs.append(Leg(None, self.topo.route_or_raise(net_src, net_dst, where)))
        if net_dst != dst:
            legs.append(Leg(copy[dst].inbound, self.topo.route_or_raise(net_dst, dst, where)))
        return tuple(legs), "net", device

    def _start_transfer(self, i: int) -> None:
        self._begin(i)
        overhead = self.transfer_overhead.get(self.tasks[i].phase, 0.0)
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
        if not self.steps[i]:  # one device: nothing moves; end through the clock, never re-entrantly
            self.clock.call_later(0.0, partial(self._collective_step, i, 0))
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
        """One row per task in the order they ended; a collective's expanded to one per device."""
        order = self.order
        devices = self.devices
        if None not in devices:
            row_task: list[int] = order
            row_device = list(map(devices.__getitem__, order))
        else:
            row_task, row_device = [], []
            tasks = self.tasks
            for i in order:
                d = devices[i]
                if d is None:
                    names = tasks[i].devices
                    row_task.extend([i] * len(names))
                    row_device.extend(names)
                else:
                    row_task.append(i)
                    row_device.append(d)
        index = np.asarray(row_task, dtype=np.int64)
        return TraceRows(
            task=index,  # type: ignore[arg-type]
            device=row_device,
            engine=list(map(self.labels.__getitem__, row_task)),
            ready=np.asarray(self.readies)[index],  # type: ignore[arg-type]
            start=np.asarray(self.starts)[index],  # type: ignore[arg-type]
            end=np.asarray(self.ends)[index],  # type: ignore[arg-type]
        )

    def close(self) -> None:
        """Break the run's reference cycles (callbacks bound to it) so it is freed at once."""
        self.starters = []
        self.flows.close()
