"""Engines: the serialising resources of a machine (GPU compute stream, copy engines, CPU cores).

Shaped like a simpy resource (a request is granted now or queued; a release grants
the next request), but requests are plain callbacks rather than events, for speed
(see ``sim.clock``). Behaviour changes by overriding the one hook, :meth:`Engine._can_grant`,
as simpy resources override ``_do_put``: :class:`Engine` is FIFO with ``slots``
concurrent holders (1 for a GPU stream or copy engine, the core count for a CPU).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from workbench.hardware.spec import ClusterSpec

Grant = Callable[[], None]


class Engine:
    """A FIFO resource with ``slots`` holders; ``kind`` is the trace's ``engine`` column."""

    __slots__ = ("name", "kind", "slots", "busy", "waiting")

    def __init__(self, name: str, kind: str, slots: int = 1) -> None:
        self.name = name
        self.kind = kind
        self.slots = slots
        self.busy = 0
        self.waiting: deque[Grant] = deque()

    def _can_grant(self) -> bool:
        """The hook: may one more request be granted now? (FIFO: only when nobody waits.)"""
        return self.busy < self.slots

    def request(self, grant: Grant) -> None:
        """Call ``grant()`` now if a slot is free and nobody is ahead, else when one frees up."""
        if not self.waiting and self._can_grant():
            self.busy += 1
            grant()
        else:
            self.waiting.append(grant)

    def release(self) -> None:
        self.busy -= 1
        if self.waiting and self._can_grant():
            self.busy += 1
            self.waiting.popleft()()


class MachineEngines:
    """Every engine of a cluster, by node: per GPU a compute stream and copy engines, per host a CPU.

    A GPU with two or more copy engines has separate H2D (into it) and D2H (out of it)
    engines; with one, both directions share it.
    """

    def __init__(self, cluster: ClusterSpec) -> None:
        self.compute: dict[str, Engine] = {}
        self.h2d: dict[str, Engine] = {}
        self.d2h: dict[str, Engine] = {}
        for m in cluster.machines:
            self.compute[m.host_node] = Engine(f"{m.host_node}.cpu", "cpu", max(1, m.cpu_cores))
            for node, gpu in zip(m.gpu_nodes(), m.gpus, strict=True):
                self.compute[node] = Engine(f"{node}.compute", "compute")
                into = Engine(f"{node}.h2d", "h2d")
                self.h2d[node] = into
                self.d2h[node] = Engine(f"{node}.d2h", "d2h") if gpu.copy_engines >= 2 else into
