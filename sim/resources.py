"""Engines: the serialising resources of a machine (GPU compute stream, copy engines, CPU cores).

Shaped like a simpy resource (a request is granted now or queued; a release grants
the next request), but a request is a plain ``grant(arg)`` call rather than an event,
for speed (see ``sim.clock``). Behaviour changes by overriding the one hook,
:meth:`Engine._can_grant`, as simpy resources override ``_do_put``. An
:class:`Engine` is a FIFO pool of ``slots`` identical engines: 1 for a GPU's compute
stream, the core count for a CPU, a GPU's copy engines as :class:`CopyEngines` says.

Copy engines (``GPUSpec.copy_engines = N``), mapped onto directions as CUDA does:

* N = 1: every copy into, out of or from the GPU shares the one engine, one at a time;
* N = 2 (CUDA's ``asyncEngineCount = 2``): one engine for copies into the GPU from host
  (``inbound``), one for copies out of it (``outbound``: to host, and the peer copies
  it sends);
* N >= 3: one inbound, one outbound, and the other N - 2 as a pool for the peer
  copies the GPU sends;
* N = 0: no engine beside the device's own: the "GPU" is a worker process on a CPU core
  (a real run's CPU worker), one thread that does its copies itself, so every copy into,
  out of or from it holds its compute engine and runs one at a time with its compute. A
  copy from another machine into it holds that engine too (the receiving process reads the
  socket; ``sim.executor``). On a machine whose only GPU it is, the host's tasks (sampling)
  hold that engine as well: the worker process is the machine. Measured on 2-worker CPU runs
  (``gnnwb fidelity --grid schemes``): with separate engines the simulated rows' busy time
  summed to 2.2-2.7 x the epoch span over 2 workers, which one thread each cannot do (the
  measured sum, gaps included, is under 2 x).

A peer copy (NVLink, NVSwitch or PCIe peer-to-peer) holds an engine of its *source*
GPU only: CUDA and NCCL push peer data as remote writes from the sender (posted
writes are faster than reads over NVLink and PCIe), so the destination's engines stay
free for its own host copies. Copies across machines hold what they use: see
``sim.executor``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from workbench.hardware.spec import ClusterSpec, GPUSpec

Grant = Callable[[int], None]


class Engine:
    """A FIFO pool of ``slots`` engines; ``name`` says whose (``m0.gpu0.inbound``)."""

    __slots__ = ("name", "slots", "busy", "waiting")

    def __init__(self, name: str, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"engine {name!r} needs at least one slot, got {slots}")
        self.name = name
        self.slots = slots
        self.busy = 0
        self.waiting: deque[tuple[Grant, int]] = deque()

    def _can_grant(self) -> bool:
        """The hook: may one more request be granted now? (FIFO: only when nobody waits.)"""
        return self.busy < self.slots

    def request(self, grant: Grant, arg: int) -> None:
        """Call ``grant(arg)`` now if an engine is free and nobody is ahead, else when one frees up."""
        if not self.waiting and self._can_grant():
            self.busy += 1
            grant(arg)
        else:
            self.waiting.append((grant, arg))

    def release(self) -> None:
        """Give an engine back; the first waiting request, if any, gets it at once."""
        self.busy -= 1
        if self.waiting and self._can_grant():
            self.busy += 1
            grant, arg = self.waiting.popleft()
            grant(arg)


@dataclass(frozen=True)
class CopyEngines:
    """One GPU's copy engines by use; two uses may name the same :class:`Engine`."""

    inbound: Engine  # host -> this GPU
    outbound: Engine  # this GPU -> host
    peer: Engine  # this GPU -> another GPU

    @classmethod
    def of(cls, node: str, gpu: GPUSpec, compute: Engine) -> CopyEngines:
        n = gpu.copy_engines
        if n == 0:
            return cls(compute, compute, compute)
        if n == 1:
            shared = Engine(f"{node}.copy")
            return cls(shared, shared, shared)
        inbound, outbound = Engine(f"{node}.inbound"), Engine(f"{node}.outbound")
        return cls(inbound, outbound, outbound if n == 2 else Engine(f"{node}.peer", n - 2))


class MachineEngines:
    """Every engine of a cluster, by node: per GPU a compute stream and its copy engines, per host a CPU."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.compute: dict[str, Engine] = {}
        self.copy: dict[str, CopyEngines] = {}
        for m in cluster.machines:
            for node, gpu in zip(m.gpu_nodes(), m.gpus, strict=True):
                self.compute[node] = Engine(f"{node}.compute")
                self.copy[node] = CopyEngines.of(node, gpu, self.compute[node])
            if len(m.gpus) == 1 and is_process(m.gpus[0]):  # the worker process is the machine
                self.compute[m.host_node] = self.compute[m.gpu_nodes()[0]]
            else:
                self.compute[m.host_node] = Engine(f"{m.host_node}.cpu", max(1, m.cpu_cores))

    def receiver(self, node: str) -> Engine | None:
        """The engine a copy from another machine into ``node`` holds: a process's own (its thread
        reads the socket), else none (a NIC writes the memory)."""
        copies = self.copy.get(node)
        return copies.inbound if copies is not None and copies.inbound is self.compute[node] else None


def is_process(gpu: GPUSpec) -> bool:
    """The "GPU" is a worker process on a CPU core (no copy engine beside its own thread)."""
    return gpu.copy_engines == 0
