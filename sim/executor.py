"""The plan executor: runs an iteration plan on modelled resources and reports each task's end.

How each task kind runs (all FIFO, in the order tasks become ready):

* ``compute`` on a GPU holds the GPU's compute stream for the cost model's duration;
  on a host (``m0.host``) it holds one of the machine's CPU cores.
* ``transfer`` holds the copy engines of the GPUs it touches: the source GPU's D2H
  engine and the destination GPU's H2D engine (both, for GPU to GPU), acquired in
  name order so two transfers can never wait on each other. Transfers that cross the
  network hold engines by the same rule: the DMA into or out of GPU memory is still a
  copy engine's work (GPUDirect or staged, either way); host-to-host transfers hold no
  engine. Once it holds its engines a transfer waits its route's latency, then its
  bytes flow at the max-min fair rate (``sim.flows``). ``src == dst`` takes no time.
* ``collective`` runs ring steps (``sim.collectives``; each step one lockstep flow
  over all its chunks' links) over the links; it holds no
  engine and no compute stream (NCCL runs on its own stream and its own SMs), so it
  overlaps with computation and competes with transfers only for link bandwidth.

Trace rows: ``device`` is where the work ran: a compute task's device; for a transfer
the destination GPU, else the source (so a D2H copy shows on its GPU); each device of a
collective. ``engine`` is ``compute``, ``cpu``, ``h2d``, ``d2h``, ``d2d`` (GPU to GPU in
one machine), ``net`` (crossing machines) or ``collective``.

A task starts when all its dependencies have ended; each end calls the trace hook
``on_task_end(task, worker, device, engine, start, end)`` once (for a collective, once
per participating device, ``worker`` being the device's rank in ``task.devices``).
A :class:`~sim.trace_hook.TraceRecorder` as the hook is not called per row: it gets the
run in bulk at the end (task indices in end order, per-task times), the same rows.
Events are ordered by (time, priority, insertion), so a plan, hardware and seed give
a bit-identical trace. The only randomness is optional compute-time ``jitter``
(a mean-one lognormal factor with that sigma), drawn from ``seed`` in task start order.

Speed (a 100,000-task plan runs in about a second, ``benchmarks/bench_sim.py``): the
work per task is kept off the event path. Validation hands back the task fields it read
as columns (``Plan.validate_columns``), compute durations come from the cost model for
all tasks in one numpy pass before the run, dependency users are one flat list, and a
compute task on a plain FIFO engine is started and ended by two closures with no
callable built for it (its end is queued as its bare index, see ``SimClock.run_all``).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from heapq import heappush
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from sim.clock import NORMAL, SimClock
from sim.collectives import Step, collective_steps
from sim.costmodel import LinearCostModel
from sim.flows import FlowNetwork
from sim.memory import check_memory
from sim.resources import Engine, MachineEngines
from sim.topology import Topology
from sim.trace_hook import TraceRecorder
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan, PlanColumns, Task

TaskEndHook = Callable[[Task, int, str, str, float, float], None]


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


class PlanExecutor:
    """Runs plans on one cluster; reusable (routes stay cached between plans)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cost_model: LinearCostModel | None = None,
        seed: int = 0,
        jitter: float = 0.0,
    ) -> None:
        if jitter < 0:
            raise ValueError(f"jitter must be non-negative, got {jitter}")
        self.cluster = cluster
        self.cost_model = cost_model or LinearCostModel()
        self.topology = Topology(cluster)
        self.seed = seed
        self.jitter = jitter
        self.memory: dict[str, int] = {}
        self.stats: dict[str, float] = {}

    def run(self, plan: Plan, on_task_end: TaskEndHook) -> float:
        """Execute ``plan``; return its makespan in seconds. Raises PlanError before running anything.

        A :class:`~sim.trace_hook.TraceRecorder` as ``on_task_end`` is fed in bulk when the
        run ends (:meth:`~sim.trace_hook.TraceRecorder.add_run`), with the same rows.
        """
        with paused_gc():
            t0 = time.perf_counter()
            columns = plan.validate_columns(self.cluster.memory_nodes())
            self.memory = check_memory(plan, self.cluster, columns.memory)
            t1 = time.perf_counter()
            run = _Run(self, plan, on_task_end, columns)
            try:
                makespan = run.execute()
            finally:
                # The launchers and callbacks are bound to the run: a reference cycle that
                # only the (paused) cyclic collector would free, all at once, later. Break it.
                run.close()
            self.stats["validate_s"] = t1 - t0
            self.stats["execute_s"] = time.perf_counter() - t1
            return makespan


class _Run:
    """The state of one execution; methods are the event callbacks.

    Per task index: ``starts`` and ``ends`` (times), ``order`` (indices as tasks end),
    and the trace row's ``devices`` and ``engines`` (``None`` device for a collective).
    Compute durations come from the cost model for all tasks at once, before the run
    (jitter, when asked for, is still drawn as each compute task starts).
    """

    def __init__(
        self, executor: PlanExecutor, plan: Plan, hook: TaskEndHook, columns: PlanColumns | None = None
    ) -> None:
        self.cluster = executor.cluster
        self.topo = executor.topology
        self.cost = executor.cost_model
        self.recorder = hook if isinstance(hook, TraceRecorder) else None
        self.hook = None if self.recorder is not None else hook  # called per row; None: in bulk
        self.jitter = executor.jitter
        self.rng = np.random.default_rng(executor.seed) if executor.jitter > 0 else None
        self.executor = executor
        self.clock = SimClock()
        self.flows = FlowNetwork(self.clock, self.topo.capacity)
        self.engines = MachineEngines(self.cluster)
        tasks = self.tasks = plan.tasks
        n = len(tasks)
        if columns is None:  # what validation read, else read here
            columns = _columns(tasks)
        self.columns = columns
        index = columns.position
        self.ids = list(index)
        counts = list(columns.dep_counts)
        flat = columns.dep_positions
        repeats = False
        if flat is not None:  # positions found by validation: look for repeated dependencies
            multi = [i for i, c in enumerate(counts) if c > 1]
            if multi:
                begin = (np.cumsum(counts) - counts)[multi].tolist()
                repeats = any(
                    len(set(flat[b : b + counts[i]])) != counts[i] for i, b in zip(multi, begin, strict=True)
                )
        if flat is None or repeats:
            deps = list(columns.deps)
            for i in [i for i, c in enumerate(counts) if c > 1]:
                if len(set(deps[i])) != counts[i]:  # a repeated dependency counts once
                    deps[i] = list(dict.fromkeys(deps[i]))
                    counts[i] = len(deps[i])
            flat = list(map(index.__getitem__, chain.from_iterable(deps)))
        self.waiting = counts
        # Each task's users (tasks that depend on it), in task order: a deterministic
        # wake-up order. As one flat list: users of i are users[first[i]:first[i + 1]].
        src = np.array(flat, dtype=np.int64)
        dst = np.repeat(np.arange(n, dtype=np.int64), counts)
        first = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=first[1:])
        self.users: list[int] = dst[np.argsort(src, kind="stable")].tolist()
        self.first_user: list[int] = first.tolist()
        self.starts = [0.0] * n
        self.ends = [0.0] * n
        self.order: list[int] = []
        kinds = self.kinds = columns.kinds
        compute_engines = self.engines.compute
        # Per task (compute tasks only read theirs; others are set by _prepare).
        devices = list(columns.devices)
        self.compute_engine: list[Engine | None] = list(map(compute_engines.get, devices))
        self.devices: list[str | None] = devices
        engine_kind = {node: e.kind for node, e in compute_engines.items()}
        self.engine_kinds: list[str] = list(map(engine_kind.get, devices, repeat("")))
        self.step_cache: dict[tuple[str, tuple[str, ...], int], list[Step]] = {}
        self.transfer_cache: dict[tuple[str, str], tuple] = {}
        # Per task, what launching it means, prepared up front so that routing errors
        # surface before the run and the event callbacks stay small. A compute task on
        # a plain engine has none: _done calls _compute_request for it directly.
        plain = all(type(e) is Engine for e in compute_engines.values())
        launchers: list[Callable[[], None] | None] = [None] * n
        self.launchers = launchers
        compute: list[int] = []
        for i, k in enumerate(kinds):
            if k == "compute":
                compute.append(i)
                if plain:
                    continue
            launchers[i] = self._prepare(i, tasks[i])
        features = columns.features
        seconds = self.cost.seconds_many(
            [tasks[i] for i in compute], self.cluster, [features[i] for i in compute]
        )
        if self.rng is None:  # with jitter, the factor is drawn first and the product clamped
            seconds[~(seconds >= 0.0)] = 0.0
        all_seconds = np.zeros(n, dtype=np.float64)
        all_seconds[compute] = seconds
        self.seconds = all_seconds.tolist()
        self._bind()

    def execute(self) -> float:
        launchers = self.launchers
        for i, w in enumerate(self.waiting):
            if w == 0:
                launch = launchers[i]
                if launch is None:
                    self._compute_request(i)
                else:
                    launch()
        self.clock.run_all(self._compute_end)
        if len(self.order) != len(self.tasks):  # cannot happen after validate(); a guard against engine bugs
            raise RuntimeError(
                f"simulation stalled with {len(self.tasks) - len(self.order)} tasks unfinished"
            )
        self.executor.stats = {
            "tasks": len(self.tasks),
            "rebalances": self.flows.rebalances,
            "events": next(self.clock._eid),
        }
        if self.recorder is not None:
            self.recorder.add_run(
                self.tasks,
                self.order,
                self.starts,
                self.ends,
                self.devices,
                self.engine_kinds,
                columns={
                    "id": self.ids,
                    "kind": self.kinds,
                    "phase": self.columns.phases,
                    "worker": self.columns.workers,
                    "iteration": self.columns.iterations,
                    "bytes": self.columns.nbytes,
                    "items": self.columns.items,
                },
            )
        return max(self.ends, default=0.0)

    # ---- shared ----------------------------------------------------------------
    def _prepare(self, i: int, t: Task) -> Callable[[], None]:
        kind = t.kind
        if kind == "compute":
            engine = self.engines.compute[t.device]  # type: ignore[index]
            return partial(engine.request, partial(self._compute, i))
        where = f"plan task {t.id!r}"
        if kind == "transfer":
            return self._prepare_transfer(i, t, where)
        self.engine_kinds[i] = "collective"
        self.devices[i] = None  # a row per device of the collective
        key = (t.op or "", tuple(t.devices), t.bytes)
        steps = self.step_cache.get(key)
        if steps is None:
            steps = collective_steps(key[0], t.devices, t.bytes, self.topo, where)
            self.step_cache[key] = steps
        return partial(self._collective_start, i, steps)

    # ---- compute ---------------------------------------------------------------
    def _compute(self, i: int) -> None:
        seconds = self.seconds[i]
        if self.rng is not None:
            sigma = self.jitter
            seconds *= math.exp(sigma * float(self.rng.standard_normal()) - 0.5 * sigma * sigma)
            if not seconds >= 0.0:
                seconds = 0.0
        now = self.starts[i] = self.clock._now
        self.clock.call_at(now + seconds, i)  # type: ignore[arg-type]

    def _bind(self) -> None:
        """Define the per-task callbacks as closures over the run's lists (the hot path:
        a closure reads its variables faster than a method reads attributes of self).

        ``_done(i, end)`` ends task i and launches the users it frees;
        ``_compute_request(i)`` is ``Engine.request`` on a plain engine followed by
        :meth:`_compute`; ``_compute_end(i)`` ends compute task i (its end is queued as
        the bare index, which ``run_all`` hands over).
        """
        clock = self.clock
        queue = clock._queue
        eid = clock._eid
        compute_engine = self.compute_engine
        seconds = self.seconds
        starts = self.starts
        ends = self.ends
        add_order = self.order.append
        waiting = self.waiting
        launchers = self.launchers
        first = self.first_user
        users = self.users
        hook = self.hook
        tasks = self.tasks
        rng = self.rng
        sigma = self.jitter
        compute = self._compute
        plain = Engine

        def done(i: int, end: float) -> None:
            ends[i] = end
            add_order(i)
            for u in users[first[i] : first[i + 1]]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    launch = launchers[u]
                    if launch is None:
                        request(u)
                    else:
                        launch()

        def request(i: int) -> None:
            engine: Engine = compute_engine[i]  # type: ignore[assignment]
            if engine.waiting or engine.busy >= engine.slots:
                engine.waiting.append(partial(compute, i))
                return
            engine.busy += 1
            s = seconds[i]
            if rng is not None:
                s *= math.exp(sigma * float(rng.standard_normal()) - 0.5 * sigma * sigma)
                if not s >= 0.0:
                    s = 0.0
            now = starts[i] = clock._now
            heappush(queue, (now + s, NORMAL, next(eid), i))

        def compute_end(i: int) -> None:
            now = clock._now
            engine: Engine = compute_engine[i]  # type: ignore[assignment]
            if hook is not None:
                t = tasks[i]
                hook(t, t.worker, t.device, engine.kind, starts[i], now)  # type: ignore[arg-type]
            if type(engine) is plain:  # Engine.release inlined
                engine.busy -= 1
                if engine.waiting:
                    engine.busy += 1
                    engine.waiting.popleft()()
            else:
                engine.release()
            # done(i, now), inlined: most tasks are computes
            ends[i] = now
            add_order(i)
            for u in users[first[i] : first[i + 1]]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    launch = launchers[u]
                    if launch is None:
                        request(u)
                    else:
                        launch()

        self._done = done
        self._compute_request = request
        self._compute_end = compute_end

    def close(self) -> None:
        """Break the run's reference cycles (callbacks bound to it) so it is freed at once."""
        self.launchers = []
        for name in ("_done", "_compute_request", "_compute_end"):
            self.__dict__.pop(name, None)
        self.flows._last = None  # its on_done is bound to the run

    # ---- transfers -------------------------------------------------------------
    def _prepare_transfer(self, i: int, t: Task, where: str) -> Callable[[], None]:
        src, dst = t.src or "", t.dst or ""
        info = self.transfer_cache.get((src, dst))
        if info is None:
            info = self.transfer_cache[(src, dst)] = self._transfer_info(src, dst, where)
        route, engines, label, device = info
        self.devices[i] = device
        self.engine_kinds[i] = label
        start = partial(self._transfer_start, i, info)
        if not engines:
            return start
        if len(engines) == 1:
            return partial(engines[0].request, start)
        return partial(engines[0].request, partial(engines[1].request, start))

    def _transfer_info(self, src: str, dst: str, where: str) -> tuple:
        """(route, engines in name order, trace engine label, trace device) of a copy from src to dst."""
        route = self.topo.route_or_raise(src, dst, where)
        src_gpu = ".gpu" in src
        dst_gpu = ".gpu" in dst
        engines: list[Engine] = []
        if src != dst:
            if src_gpu:
                engines.append(self.engines.d2h[src])
            if dst_gpu:
                engines.append(self.engines.h2d[dst])
            engines.sort(key=lambda e: e.name)
        if route.crosses_network:
            label = "net"
        elif src_gpu and dst_gpu:
            label = "d2d"
        elif dst_gpu:
            label = "h2d"
        elif src_gpu:
            label = "d2h"
        else:
            label = "cpu"  # a host-to-host copy within one machine (memcpy)
        device = dst if dst_gpu else src
        return (route, tuple(engines), label, device)

    def _transfer_start(self, i: int, info: tuple) -> None:
        route = info[0]
        self.starts[i] = self.clock._now
        done = partial(self._transfer_end, i, info)
        nbytes = self.tasks[i].bytes
        if not route.links or nbytes == 0:
            self.clock.call_later(route.latency, done)
        elif route.latency > 0.0:
            self.clock.call_later(route.latency, partial(self.flows.start, route.links, nbytes, done))
        else:
            self.flows.start(route.links, nbytes, done)

    def _transfer_end(self, i: int, info: tuple) -> None:
        now = self.clock._now
        if self.hook is not None:
            t = self.tasks[i]
            self.hook(t, t.worker, info[3], info[2], self.starts[i], now)
        for engine in info[1]:
            engine.release()
        self._done(i, now)

    # ---- collectives -----------------------------------------------------------
    def _collective_start(self, i: int, steps: list[Step]) -> None:
        self.starts[i] = self.clock._now
        if not steps:  # one device: nothing moves; end through the clock, never re-entrantly
            self.clock.call_later(0.0, partial(self._collective_step, i, steps, 0))
        else:
            self._collective_step(i, steps, 0)

    def _collective_step(self, i: int, steps: list[Step], k: int) -> None:
        if k == len(steps):
            now = self.clock._now
            if self.hook is not None:
                t = self.tasks[i]
                start = self.starts[i]
                for rank, device in enumerate(t.devices):
                    self.hook(t, rank, device, "collective", start, now)
            self._done(i, now)
            return
        step = steps[k]
        after = partial(self._collective_step, i, steps, k + 1)
        if not step.links:
            self.clock.call_later(step.latency, after)
        elif step.latency > 0.0:
            self.clock.call_later(
                step.latency, partial(self.flows.start, step.links, step.chunk_bytes, after)
            )
        else:
            self.flows.start(step.links, step.chunk_bytes, after)


def _columns(tasks: list[Task]) -> PlanColumns:
    """The columns of :meth:`Plan.validate_columns` for tasks validated elsewhere."""
    get = {name: list(map(attrgetter(name), tasks)) for name in ("kind", "phase", "worker", "iteration")}
    return PlanColumns(
        list(tasks),
        {t.id: i for i, t in enumerate(tasks)},
        list(map(attrgetter("deps"), tasks)),
        get["kind"],
        get["phase"],
        get["worker"],
        get["iteration"],
        list(map(attrgetter("bytes"), tasks)),
        list(map(attrgetter("items"), tasks)),
        list(map(attrgetter("device"), tasks)),
        list(map(attrgetter("memory"), tasks)),
        list(map(attrgetter("features"), tasks)),
        list(map(len, map(attrgetter("deps"), tasks))),
        None,
    )
