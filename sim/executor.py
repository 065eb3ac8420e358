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
Events are ordered by (time, priority, insertion), so a plan, hardware and seed give
a bit-identical trace. The only randomness is optional compute-time ``jitter``
(a mean-one lognormal factor with that sigma), drawn from ``seed`` in task start order.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import numpy as np

from sim.clock import SimClock
from sim.collectives import Step, collective_steps
from sim.costmodel import LinearCostModel
from sim.flows import FlowNetwork
from sim.memory import check_memory
from sim.resources import Engine, MachineEngines
from sim.topology import Topology
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Plan, Task

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
        """Execute ``plan``; return its makespan in seconds. Raises PlanError before running anything."""
        with paused_gc():
            t0 = time.perf_counter()
            plan.validate(self.cluster.memory_nodes())
            self.memory = check_memory(plan, self.cluster)
            t1 = time.perf_counter()
            run = _Run(self, plan, on_task_end)
            try:
                makespan = run.execute()
            finally:
                # The launchers are bound to the run: a reference cycle that only the
                # (paused) cyclic collector would free, all at once, later. Break it.
                run.launchers = []
            self.stats["validate_s"] = t1 - t0
            self.stats["execute_s"] = time.perf_counter() - t1
            return makespan


class _Run:
    """The state of one execution; methods are the event callbacks."""

    def __init__(self, executor: PlanExecutor, plan: Plan, hook: TaskEndHook) -> None:
        self.cluster = executor.cluster
        self.topo = executor.topology
        self.cost = executor.cost_model
        self.hook = hook
        self.jitter = executor.jitter
        self.rng = np.random.default_rng(executor.seed) if executor.jitter > 0 else None
        self.executor = executor
        self.clock = SimClock()
        self.flows = FlowNetwork(self.clock, self.topo.capacity)
        self.engines = MachineEngines(self.cluster)
        self.tasks = plan.tasks
        self.makespan = 0.0
        self.ended = 0
        n = len(self.tasks)
        index = {t.id: i for i, t in enumerate(self.tasks)}
        self.waiting = [0] * n
        self.users: list[list[int]] = [[] for _ in range(n)]
        users = self.users
        for i, t in enumerate(self.tasks):
            deps = dict.fromkeys(t.deps)  # a repeated dependency counts once
            self.waiting[i] = len(deps)
            for d in deps:  # users lists fill in task order: deterministic wake-up order
                users[index[d]].append(i)
        self.step_cache: dict[tuple[str, tuple[str, ...], int], list[Step]] = {}
        # Per task, what launching it means, prepared up front so that routing errors
        # surface before the run and the event callbacks stay small.
        self.launchers: list[Callable[[], None]] = [self._prepare(i, t) for i, t in enumerate(self.tasks)]

    def execute(self) -> float:
        for i, w in enumerate(self.waiting):
            if w == 0:
                self.launchers[i]()
        self.clock.run_all()
        if self.ended != len(self.tasks):  # cannot happen after validate(); a guard against engine bugs
            raise RuntimeError(f"simulation stalled with {len(self.tasks) - self.ended} tasks unfinished")
        self.executor.stats = {
            "tasks": len(self.tasks),
            "rebalances": self.flows.rebalances,
            "events": next(self.clock._eid),
        }
        return self.makespan

    # ---- shared ----------------------------------------------------------------
    def _done(self, i: int, end: float) -> None:
        self.ended += 1
        if end > self.makespan:
            self.makespan = end
        waiting = self.waiting
        launchers = self.launchers
        for u in self.users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                launchers[u]()

    def _prepare(self, i: int, t: Task) -> Callable[[], None]:
        if t.kind == "compute":
            engine = self.engines.compute[t.device]  # type: ignore[index]
            return partial(engine.request, partial(self._compute, i, engine))
        where = f"plan task {t.id!r}"
        if t.kind == "transfer":
            return self._prepare_transfer(i, t, where)
        key = (t.op or "", tuple(t.devices), t.bytes)
        steps = self.step_cache.get(key)
        if steps is None:
            steps = collective_steps(key[0], t.devices, t.bytes, self.topo, where)
            self.step_cache[key] = steps
        return partial(self._collective_start, i, steps)

    # ---- compute ---------------------------------------------------------------
    def _compute(self, i: int, engine: Engine) -> None:
        t = self.tasks[i]
        seconds = self.cost.seconds(t, self.cluster)
        if self.rng is not None:
            sigma = self.jitter
            seconds *= math.exp(sigma * float(self.rng.standard_normal()) - 0.5 * sigma * sigma)
        if not seconds >= 0.0:
            seconds = 0.0
        start = self.clock._now
        self.clock.call_later(seconds, partial(self._compute_end, i, engine, start))

    def _compute_end(self, i: int, engine: Engine, start: float) -> None:
        now = self.clock._now
        t = self.tasks[i]
        self.hook(t, t.worker, t.device, engine.kind, start, now)  # type: ignore[arg-type]
        engine.release()
        self._done(i, now)

    # ---- transfers -------------------------------------------------------------
    def _prepare_transfer(self, i: int, t: Task, where: str) -> Callable[[], None]:
        src, dst = t.src or "", t.dst or ""
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
        info = (route, tuple(engines), label, device)
        start = partial(self._transfer_start, i, info)
        if not engines:
            return start
        if len(engines) == 1:
            return partial(engines[0].request, start)
        return partial(engines[0].request, partial(engines[1].request, start))

    def _transfer_start(self, i: int, info: tuple) -> None:
        route = info[0]
        start = self.clock._now
        done = partial(self._transfer_end, i, info, start)
        nbytes = self.tasks[i].bytes
        if not route.links or nbytes == 0:
            self.clock.call_later(route.latency, done)
        elif route.latency > 0.0:
            self.clock.call_later(route.latency, partial(self.flows.start, route.links, nbytes, done))
        else:
            self.flows.start(route.links, nbytes, done)

    def _transfer_end(self, i: int, info: tuple, start: float) -> None:
        now = self.clock._now
        t = self.tasks[i]
        self.hook(t, t.worker, info[3], info[2], start, now)
        for engine in info[1]:
            engine.release()
        self._done(i, now)

    # ---- collectives -----------------------------------------------------------
    def _collective_start(self, i: int, steps: list[Step]) -> None:
        if not steps:  # one device: nothing moves; end through the clock, never re-entrantly
            self.clock.call_later(0.0, partial(self._collective_step, i, steps, 0, self.clock._now))
        else:
            self._collective_step(i, steps, 0, self.clock._now)

    def _collective_step(self, i: int, steps: list[Step], k: int, start: float) -> None:
        if k == len(steps):
            now = self.clock._now
            t = self.tasks[i]
            for rank, device in enumerate(t.devices):
                self.hook(t, rank, device, "collective", start, now)
            self._done(i, now)
            return
        step = steps[k]
        after = partial(self._collective_step, i, steps, k + 1, start)
        if not step.links:
            self.clock.call_later(step.latency, after)
        elif step.latency > 0.0:
            self.clock.call_later(
                step.latency, partial(self.flows.start, step.links, step.chunk_bytes, after)
            )
        else:
            self.flows.start(step.links, step.chunk_bytes, after)
