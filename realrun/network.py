"""An emulated multi-server network on one machine: network namespaces, veth links, tc.

``--emulate-network`` (``gnnwb realrun`` and ``gnnwb microbench``) puts every worker in a
network namespace of its own, joined to a bridge that lives in a namespace of its own::

    gnnwb-PID-N-w0 [eth0 10.213.0.1] --veth-- [w0]                 \\
    gnnwb-PID-N-w1 [eth0 10.213.0.2] --veth-- [w1]  br0 in gnnwb-PID-N-br
    ...                                                           /

and shapes each worker's link with tc's token bucket filter (``tbf``) to one rate in
both directions: the worker's ``eth0`` (what it sends) and the bridge's port ``wR``
(what it receives), so a link is full duplex as the hardware model's links are. The
workers' torch.distributed rendezvous and gloo traffic go over the namespace addresses
(``GLOO_SOCKET_IFNAME=eth0``), a real TCP network whose bottleneck is the shaped link.

Only the run's own namespaces are created and touched (every ``ip`` / ``tc`` command
names one of them with ``-n``; the veth pairs are created inside them), and
:meth:`EmulatedNetwork.teardown` deletes them all, which also deletes their links; the
launcher calls it in a ``finally``, after its workers are stopped, so a failed run
leaves nothing behind. Namespace names carry the launcher's pid and a counter, so runs
side by side never collide.

Latency: tc's ``netem`` qdisc is what adds delay in the kernel; where it is missing
(as on the machines this was built on) only bandwidth is emulated, and the run's
metadata says so (``network.latency``).

Process entry: a worker process calls :func:`enter` (``setns(2)`` on the namespace's
file under ``/var/run/netns``) before it opens any socket; threads it starts afterwards
(gloo's) inherit the namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import ConfigError, WorkbenchError

NETNS_DIR = "/var/run/netns"
SUBNET = "10.213.0"  # worker r is SUBNET.(r+1)/24, inside the run's namespaces only
IFNAME = "eth0"  # each worker's end of its link, inside its namespace
BRIDGE = "br0"
MAX_WORKERS = 250
CLONE_NEWNET = 0x40000000
_counter = itertools.count()
WITHOUT = "run without --emulate-network (workers then talk over 127.0.0.1, unshaped)"


class NetworkEmulationUnavailable(WorkbenchError):
    """Network namespaces or tc shaping cannot be set up here; the message says why."""


def parse_link_bandwidth(text: str, where: str = "--link-bandwidth") -> float:
    """Bits per second from ``100Mbit``, ``100 Mbit/s``, ``1Gbit``, ``12.5 MB/s``, ``100Mbps``."""
    from workbench.hardware.units import parse_bandwidth

    value = text.strip()
    if re.search(r"(bit|b)$", value):
        value += "/s"
    bps = parse_bandwidth(value, where) * 8.0
    if not bps >= 8_000:
        raise ConfigError(f"{where}: {text!r} is below 8 kbit/s; give a rate like 100Mbit")
    return bps


def cluster_link_bandwidth(cluster: Any) -> float | None:
    """The slowest ``network`` link of a cluster (a machine's NIC to the fabric), bits/s;
    None for a single-machine preset, which has no network."""
    rates = [link.bandwidth for link in cluster.links if link.kind == "network"]
    return min(rates) * 8.0 if rates else None


def cluster_link_latency(cluster: Any) -> float | None:
    lats = [link.latency for link in cluster.links if link.kind == "network"]
    return max(lats) if lats else None


def format_bits(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _check(*cmd: str) -> None:
    proc = _run(*cmd)
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise NetworkEmulationUnavailable(
            f"--emulate-network: `{' '.join(cmd)}` failed ({why[0] if why else f'exit {proc.returncode}'}); "
            f"{WITHOUT}"
        )


def check_available() -> None:
    """Raise :class:`NetworkEmulationUnavailable` (one line: why, and how to run without)
    where this process cannot create network namespaces."""
    if not os.uname().sysname == "Linux":
        raise NetworkEmulationUnavailable(f"--emulate-network needs Linux network namespaces; {WITHOUT}")
    if os.geteuid() != 0:
        raise NetworkEmulationUnavailable(
            f"--emulate-network needs root (creating network namespaces takes CAP_SYS_ADMIN and "
            f"CAP_NET_ADMIN); {WITHOUT}"
        )
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetworkEmulationUnavailable(
                f"--emulate-network needs the `{tool}` command (Debian package iproute2); {WITHOUT}"
            )


def namespaces() -> list[str]:
    """The names of every named network namespace (``ip netns list``)."""
    proc = _run("ip", "netns", "list")
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def enter(name: str) -> None:
    """Move the calling thread (and the threads it starts from now on) into namespace ``name``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into network namespace {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass
class EmulatedNetwork:
    """The namespaces of one run; :meth:`teardown` removes them all (safe to call twice)."""

    prefix: str
    workers: int
    rate_bps: float
    bridge_ns: str = ""
    worker_ns: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    netem: bool = False
    torn_down: bool = False

    @property
    def ifname(self) -> str:
        return IFNAME

    def setup(self) -> None:
        """Create the bridge namespace, one namespace per worker, the links and their shaping."""
        rate = f"{int(round(self.rate_bps))}bit"
        rate_bytes = self.rate_bps / 8.0
        # The bucket holds a few milliseconds of the rate (at least a few full-size frames),
        # the queue 50 ms of it: TCP sees a link, not a policer.
        burst = int(min(max(64 * 1024, rate_bytes * 0.004), 256 * 1024 * 1024))
        tbf = ["tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]
        self.bridge_ns = f"{self.prefix}-br"
        self._netns_add(self.bridge_ns)
        br = ("ip", "-n", self.bridge_ns)
        _check(*br, "link", "set", "lo", "up")
        _check(*br, "link", "add", BRIDGE, "type", "bridge")
        _check(*br, "link", "set", BRIDGE, "up")
        self.netem = self._probe_netem()
        for r in range(self.workers):
            ns, port, addr = f"{self.prefix}-w{r}", f"w{r}", f"{SUBNET}.{r + 1}"
            self._netns_add(ns)
            self.worker_ns.append(ns)
            self.addresses.append(addr)
            w = ("ip", "-n", ns)
            _check(*w, "link", "set", "lo", "up")
            # Both ends are made inside the run's namespaces: nothing outside them is touched.
            _check(*w, "link", "add", IFNAME, "type", "veth", "peer", "name", port, "netns", self.bridge_ns)
            _check(*w, "addr", "add", f"{addr}/24", "dev", IFNAME)
            _check(*w, "link", "set", IFNAME, "up")
            _check(*br, "link", "set", port, "master", BRIDGE)
            _check(*br, "link", "set", port, "up")
            _check("tc", "-n", ns, "qdisc", "replace", "dev", IFNAME, "root", *tbf)
            _check("tc", "-n", self.bridge_ns, "qdisc", "replace", "dev", port, "root", *tbf)

    def _netns_add(self, name: str) -> None:
        proc = _run("ip", "netns", "add", name)
        if proc.returncode != 0:
            why = (proc.stderr or proc.stdout).strip().splitlines()
            raise NetworkEmulationUnavailable(
                f"--emulate-network: cannot create network namespace {name} "
                f"({why[0] if why else f'exit {proc.returncode}'}); {WITHOUT}"
            )
        self.created.append(name)

    def _probe_netem(self) -> bool:
        """Whether tc's netem qdisc exists here (tried on the bridge namespace's loopback)."""
        proc = _run("tc", "-n", self.bridge_ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms")
        if proc.returncode != 0:
            return False
        _run("tc", "-n", self.bridge_ns, "qdisc", "del", "dev", "lo", "root")
        return True

    def teardown(self) -> list[str]:
        """Delete every namespace this run created (their veth links go with them); returns
        the ones that could not be deleted (normally none)."""
        left = []
        for name in reversed(self.created):
            proc = _run("ip", "netns", "del", name)
            if proc.returncode != 0 and os.path.exists(os.path.join(NETNS_DIR, name)):
                left.append(name)
        self.created = left
        self.torn_down = True
        return left

    def metadata(self) -> dict[str, Any]:
        """What the run's metadata records about the emulated network."""
        return {
            "emulated": True,
            "link_bandwidth_bps": self.rate_bps,
            "link_bandwidth": format_bits(self.rate_bps),
            "shaping": "tc tbf on both ends of each worker's veth link (each direction at the full rate)",
            "topology": "one network namespace per worker, veth links to a bridge in its own namespace",
            "namespaces": [self.bridge_ns, *self.worker_ns],
            "addresses": list(self.addresses),
            "latency": {
                "emulated": False,
                "reason": (
                    "tc netem is available but no delay was configured"
                    if self.netem
                    else "tc netem does not exist on this kernel, so no latency is added; links have "
                    "only the bandwidth limit and the veth/bridge path's own (microsecond) delay"
                ),
            },
            "note": "every worker has its own link, so workers that the configured cluster puts on one "
            "machine also talk over the shaped network",
        }


@contextlib.contextmanager
def emulated_network(workers: int, rate_bps: float) -> Iterator[EmulatedNetwork]:
    """Set up the namespaces for ``workers`` workers with links of ``rate_bps`` bits/s; tear them
    down on the way out, also on an error or SIGTERM (which becomes ``SystemExit``)."""
    check_available()
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--emulate-network: {workers} workers; at most {MAX_WORKERS}")
    net = EmulatedNetwork(prefix=f"gnnwb-{os.getpid()}-{next(_counter)}", workers=workers, rate_bps=rate_bps)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _terminate)
    try:
        net.setup()
        yield net
    finally:
        left = net.teardown()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if left:
            raise NetworkEmulationUnavailable(
                f"--emulate-network: could not delete namespace(s) {', '.join(left)}; remove them with "
                "`ip netns del NAME`"
            )


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
