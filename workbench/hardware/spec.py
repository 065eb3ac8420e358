"""Typed description of a cluster: machines, GPUs, memories and the links between them.

The topology is a graph of named nodes joined by links:

* memories: ``m0.host`` (host DRAM of machine ``m0``) and ``m0.gpu3`` (GPU 3's memory);
* transit nodes: the PCIe root complex (``m0.rc``, joined to ``m0.host`` by a
  ``host`` link of DRAM bandwidth), PCIe switches (``m0.pcie0``), an NVSwitch (``m0.nvswitch``),
  NICs (``m0.nic``) and the network fabric (``net``).

Every link is full duplex: each direction has the full bandwidth, shared only by
transfers going that way (H2D and D2H do not compete, as on real PCIe). Data never
passes *through* a memory node; routes go memory -> transit nodes -> memory.

GPUDirect RDMA (``MachineSpec.gpudirect_rdma``, TOML key ``gpudirect_rdma`` in each
``[[machines]]`` table, default false): the machine's NICs read and write GPU memory
directly over PCIe (peer-to-peer between the NIC and the GPU), so a GPU-to-network copy
bounces through no host DRAM buffer and uses no GPU copy engine: the NIC's own DMA engine
moves the data. Without it, a copy between a GPU and another machine is staged through
host memory: a device-to-host copy (on a GPU copy engine), the network transfer from host
memory, and a host-to-device copy on the far side. The flag describes the whole machine
(its NICs, driver stack and PCIe topology together), as the papers' testbeds are
described: InfiniBand or Slingshot with GPUDirect, or commodity Ethernet without.

Bandwidths are bytes/s, latencies seconds, sizes bytes, compute FLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import validate
from workbench.errors import ConfigError
from workbench.hardware.units import (
    format_bandwidth,
    format_latency,
    format_rate,
    format_size,
    parse_bandwidth,
    parse_latency,
    parse_rate,
    parse_size,
)
from workbench.tomlfile import read_toml

MAX_COPY_ENGINES = 64  # far above any GPU's asyncEngineCount; a larger number is a typo
LINK_KINDS = ("host", "pcie", "pcie-uplink", "nvlink", "nvswitch", "nic", "network", "qpi", "other")
TRANSIT_KINDS = ("pcie-switch", "nvswitch", "nic", "network", "root-complex")


@dataclass(frozen=True)
class GPUSpec:
    """One GPU model; its memory node is ``<machine>.gpu<index>``.

    ``copy_engines`` (an integer from 0 to 64; CUDA's ``asyncEngineCount``) is how many
    DMA copy engines the GPU has. How copies map onto them:

    * 0 engines: the device is a process on a CPU core (a real run's CPU worker), with no
      engine beside its one thread: every copy into or out of it, and every copy from
      another machine into it, runs on its compute engine, one thing at a time with its
      compute; on a machine with no other GPU, so do the host's tasks (the process samples
      too). See :mod:`sim.resources`.

    * 1 engine: every copy (host-to-device, device-to-host, peer) shares it, one at a time.
    * 2 engines (CUDA's asyncEngineCount=2): one for copies into the GPU from host, one
      for copies out of it (to host, and peer copies the GPU sends).
    * N >= 3: one inbound, one outbound, and the remaining N-2 as a pool for peer copies
      the GPU sends.

    A peer copy (over NVLink, NVSwitch or PCIe peer-to-peer) takes an engine of the
    SOURCE GPU only: CUDA and NCCL push peer data as remote writes from the sender
    (posted writes are faster than reads over NVLink/PCIe), so the destination GPU's
    engines stay free for its own host copies.

    A copy to another machine holds no copy engine when the machine has GPUDirect RDMA
    (:attr:`MachineSpec.gpudirect_rdma`); without it, its device-to-host and
    host-to-device stages use the engines as any host copy does.
    """

    model: str
    memory_bytes: int
    flops: float  # peak FP32 FLOP/s; the cost model scales by an efficiency
    memory_bandwidth: float  # device memory bytes/s (gathers, sparse aggregation)
    copy_engines: int = 2  # one inbound and one outbound engine, as on most real GPUs


@dataclass(frozen=True)
class MachineSpec:
    name: str
    gpus: tuple[GPUSpec, ...]
    host_memory_bytes: int
    cpu_cores: int = 16
    host_memory_bandwidth: float = 50e9
    # The NICs read and write GPU memory directly (see the module docstring).
    gpudirect_rdma: bool = False

    def gpu_nodes(self) -> list[str]:
        return [f"{self.name}.gpu{i}" for i in range(len(self.gpus))]

    @property
    def host_node(self) -> str:
        return f"{self.name}.host"


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    bandwidth: float  # bytes/s in each direction
    latency: float  # seconds
    kind: str = "other"

    @property
    def name(self) -> str:
        return f"{self.a}<->{self.b}"


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    machines: tuple[MachineSpec, ...]
    links: tuple[LinkSpec, ...]
    transit: dict[str, str] = field(default_factory=dict)  # node name -> kind
    description: str = ""

    def __post_init__(self) -> None:
        validate_cluster(self)

    # ---- names -------------------------------------------------------------
    def gpu_nodes(self) -> list[str]:
        """Every GPU memory node, machine by machine; the index is the global GPU rank."""
        return [g for m in self.machines for g in m.gpu_nodes()]

    def host_nodes(self) -> list[str]:
        return [m.host_node for m in self.machines]

    def memory_nodes(self) -> list[str]:
        return self.host_nodes() + self.gpu_nodes()

    def nodes(self) -> list[str]:
        return self.memory_nodes() + list(self.transit)

    def gpu(self, node: str) -> GPUSpec:
        machine, _, idx = node.partition(".gpu")
        for m in self.machines:
            if m.name == machine and idx.isdigit() and int(idx) < len(m.gpus):
                return m.gpus[int(idx)]
        raise ConfigError(f"cluster {self.name!r} has no GPU {node!r}; GPUs: {', '.join(self.gpu_nodes())}")

    def machine_of(self, node: str) -> MachineSpec:
        prefix = node.split(".", 1)[0]
        for m in self.machines:
            if m.name == prefix:
                return m
        raise ConfigError(f"cluster {self.name!r} has no machine for node {node!r}")

    @property
    def num_gpus(self) -> int:
        return sum(len(m.gpus) for m in self.machines)

    # ---- text --------------------------------------------------------------
    def describe(self) -> str:
        lines = [
            f"{self.name}: {self.description}".rstrip(": "),
            f"machines: {len(self.machines)}, GPUs: {self.num_gpus}",
        ]
        for m in self.machines:
            kinds = sorted({g.model for g in m.gpus})
            gpu = m.gpus[0] if m.gpus else None
            gtxt = (
                f"{len(m.gpus)} x {'/'.join(kinds)} ({format_size(gpu.memory_bytes)}, {format_rate(gpu.flops)},"
                f" {_engines(m.gpus)})"
                if gpu
                else "no GPU"
            )
            rdma = "GPUDirect RDMA" if m.gpudirect_rdma else "no GPUDirect RDMA"
            lines.append(
                f"  {m.name}: {gtxt}; host {format_size(m.host_memory_bytes)}, {m.cpu_cores} cores; {rdma}"
            )
        if self.transit:
            lines.append("switches and fabric: " + ", ".join(f"{n} ({k})" for n, k in self.transit.items()))
        lines.append(f"links: {len(self.links)}")
        for link in self.links:
            lines.append(
                f"  {link.a:<14} <-> {link.b:<14} {link.kind:<12} {format_bandwidth(link.bandwidth):>12}  {format_latency(link.latency)}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "machines": [
                {
                    "name": m.name,
                    "host_memory": format_size(m.host_memory_bytes),
                    "host_memory_bandwidth": format_bandwidth(m.host_memory_bandwidth),
                    "cpu_cores": m.cpu_cores,
                    "gpudirect_rdma": m.gpudirect_rdma,
                    "gpus": [
                        {
                            "model": g.model,
                            "memory": format_size(g.memory_bytes),
                            "flops": format_rate(g.flops),
                            "memory_bandwidth": format_bandwidth(g.memory_bandwidth),
                            "copy_engines": g.copy_engines,
                        }
                        for g in m.gpus
                    ],
                }
                for m in self.machines
            ],
            "switches": [{"name": n, "kind": k} for n, k in self.transit.items()],
            "links": [
                {
                    "a": link.a,
                    "b": link.b,
                    "kind": link.kind,
                    "bandwidth": format_bandwidth(link.bandwidth),
                    "latency": format_latency(link.latency),
                }
                for link in self.links
            ],
        }

    def to_toml(self) -> str:
        return _dict_to_toml(self.to_dict())


def _engines(gpus: tuple[GPUSpec, ...]) -> str:
    counts = sorted({g.copy_engines for g in gpus})
    text = "/".join(str(c) for c in counts)
    return f"{text} copy engine{'' if counts == [1] else 's'}"


def copy_engines_problem(value: object) -> str | None:
    """Why ``value`` is not a valid ``copy_engines`` (None when it is): an int, not a bool, 0..64."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COPY_ENGINES:
        return f"copy_engines must be an integer from 0 to {MAX_COPY_ENGINES}, got {value!r}"
    return None


def gpudirect_problem(value: object) -> str | None:
    """Why ``value`` is not a valid ``gpudirect_rdma`` (None when it is): true or false."""
    if not isinstance(value, bool):
        return f"gpudirect_rdma must be true or false, got {value!r}"
    return None


def validate_cluster(spec: ClusterSpec) -> None:
    """Check a cluster however it was built (in code or from a file); errors name the field.

    Quantities go through :mod:`workbench.validate`: a size is an int64-sized integer, a
    bandwidth or rate a finite positive number (NaN would make a link or a kernel free),
    a latency finite and non-negative, a count an integer (2.5 cores is refused, not
    truncated), a flag a boolean.
    """
    where = f"cluster {spec.name!r}"
    validate.string(spec.name, "cluster name")
    validate.string(spec.description, f"{where}: description")
    if not isinstance(spec.machines, tuple | list) or not spec.machines:
        raise ConfigError(f"{where}: no machines")
    names = [validate.string(m.name, f"{where}: machine name", nonempty=True) for m in spec.machines]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: duplicate machine names")
    for m in spec.machines:
        _validate_machine(m, where)
    memory = set(spec.host_nodes()) | set(spec.gpu_nodes())
    for node, kind in spec.transit.items():
        validate.string(node, f"{where}: switch name", nonempty=True)
        if node in memory:
            raise ConfigError(f"{where}: switch {node!r} has the name of a memory")
        if kind not in TRANSIT_KINDS:
            raise ConfigError(
                f"{where}: switch {node!r} has kind {kind!r}; allowed: {', '.join(TRANSIT_KINDS)}"
            )
    known = memory | set(spec.transit)
    for i, link in enumerate(spec.links):
        _validate_link(i, link, known, where)


def _validate_machine(m: MachineSpec, where: str) -> None:
    mw = f"{where}: machines.{m.name}"
    if "." in m.name:
        raise ConfigError(f"{where}: machine name {m.name!r} may not contain '.'")
    validate.integer(m.host_memory_bytes, f"{mw}.host_memory", minimum=1)
    validate.finite_number(m.host_memory_bandwidth, f"{mw}.host_memory_bandwidth", positive=True)
    validate.integer(m.cpu_cores, f"{mw}.cpu_cores", minimum=1)
    if problem := gpudirect_problem(m.gpudirect_rdma):
        raise ConfigError(f"{mw}.{problem}")
    if not isinstance(m.gpus, tuple | list):
        raise ConfigError(f"{mw}.gpus must be a list of GPUs, got {m.gpus!r}")
    for i, g in enumerate(m.gpus):
        gw = f"{where}: {m.name}.gpu{i}"
        if not isinstance(g, GPUSpec):
            raise ConfigError(f"{gw} must be a GPU spec, got {g!r}")
        validate.string(g.model, f"{gw}.model", nonempty=True)
        if problem := copy_engines_problem(g.copy_engines):
            raise ConfigError(f"{gw}.{problem}")
        validate.integer(g.memory_bytes, f"{gw}.memory_bytes", minimum=1)
        validate.finite_number(g.flops, f"{gw}.flops", positive=True)
        validate.finite_number(g.memory_bandwidth, f"{gw}.memory_bandwidth", positive=True)


def _validate_link(i: int, link: LinkSpec, known: set[str], where: str) -> None:
    lw = f"{where}: links[{i}] ({link.a} <-> {link.b})"
    for end in (link.a, link.b):
        if not isinstance(end, str) or end not in known:
            raise ConfigError(f"{lw}: unknown endpoint {end!r}")
    if link.a == link.b:
        raise ConfigError(f"{lw}: a link must join two different nodes")
    validate.finite_number(link.bandwidth, f"{lw}: bandwidth", positive=True)
    validate.finite_number(link.latency, f"{lw}: latency", minimum=0.0)
    if link.kind not in LINK_KINDS:
        raise ConfigError(f"{lw}: kind {link.kind!r}; allowed: {', '.join(LINK_KINDS)}")


# ---- TOML --------------------------------------------------------------------
def _require(table: dict[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}: missing field {key!r}")
    return table[key]


def _check_fields(table: dict[str, Any], allowed: set[str], where: str) -> None:
    """A misspelt key (``gpudirect = true``) is an error, not a silently ignored field."""
    extra = set(table) - allowed
    if extra:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(sorted(extra))}; allowed: {', '.join(sorted(allowed))}"
        )


_TOP_FIELDS = {"name", "description", "machines", "switches", "links"}
_MACHINE_FIELDS = {"name", "host_memory", "host_memory_bandwidth", "cpu_cores", "gpudirect_rdma", "gpus"}
_GPU_FIELDS = {"model", "memory", "flops", "memory_bandwidth", "copy_engines"}
_SWITCH_FIELDS = {"name", "kind"}
_LINK_FIELDS = {"a", "b", "kind", "bandwidth", "latency"}


def cluster_from_dict(data: dict[str, Any], source: str = "<dict>") -> ClusterSpec:
    """Build and validate a cluster from the TOML layout that :meth:`ClusterSpec.to_toml` writes.

    Every error is one line naming ``source`` and the field (``machines[0].gpus[1].memory``).
    """
    validate.table(data, source)
    _check_fields(data, _TOP_FIELDS, source)
    name = validate.string(_require(data, "name", source), f"{source}: name", nonempty=True)
    machines = [
        _machine_from_dict(m, f"{source}: machines[{i}]")
        for i, m in enumerate(validate.array(_require(data, "machines", source), f"{source}: machines"))
    ]
    transit = {}
    for i, s in enumerate(validate.array(data.get("switches", []), f"{source}: switches")):
        w = f"{source}: switches[{i}]"
        validate.table(s, w)
        _check_fields(s, _SWITCH_FIELDS, w)
        node = validate.string(_require(s, "name", w), f"{w}.name", nonempty=True)
        transit[node] = validate.string(_require(s, "kind", w), f"{w}.kind")
    links = [
        _link_from_dict(link, f"{source}: links[{i}]")
        for i, link in enumerate(validate.array(_require(data, "links", source), f"{source}: links"))
    ]
    description = validate.string(data.get("description", ""), f"{source}: description")
    try:
        return ClusterSpec(
            name=name, machines=tuple(machines), links=tuple(links), transit=transit, description=description
        )
    except ConfigError as exc:  # a check across fields (an unknown endpoint): say which file
        raise ConfigError(f"{source}: {exc}") from None


def _machine_from_dict(m: Any, w: str) -> MachineSpec:
    validate.table(m, w)
    _check_fields(m, _MACHINE_FIELDS, w)
    gpus = [
        _gpu_from_dict(g, f"{w}.gpus[{j}]")
        for j, g in enumerate(validate.array(m.get("gpus", []), f"{w}.gpus"))
    ]
    rdma = m.get("gpudirect_rdma", False)
    if problem := gpudirect_problem(rdma):
        raise ConfigError(f"{w}.{problem}")
    return MachineSpec(
        name=validate.string(_require(m, "name", w), f"{w}.name", nonempty=True),
        gpus=tuple(gpus),
        host_memory_bytes=parse_size(_require(m, "host_memory", w), f"{w}.host_memory"),
        cpu_cores=validate.integer(m.get("cpu_cores", 16), f"{w}.cpu_cores"),
        host_memory_bandwidth=parse_bandwidth(
            m.get("host_memory_bandwidth", 50e9), f"{w}.host_memory_bandwidth"
        ),
        gpudirect_rdma=rdma,
    )


def _gpu_from_dict(g: Any, gw: str) -> GPUSpec:
    validate.table(g, gw)
    _check_fields(g, _GPU_FIELDS, gw)
    engines = g.get("copy_engines", 2)
    if problem := copy_engines_problem(engines):
        raise ConfigError(f"{gw}.{problem}")
    return GPUSpec(
        model=validate.string(_require(g, "model", gw), f"{gw}.model", nonempty=True),
        memory_bytes=parse_size(_require(g, "memory", gw), f"{gw}.memory"),
        flops=parse_rate(_require(g, "flops", gw), f"{gw}.flops"),
        memory_bandwidth=parse_bandwidth(_require(g, "memory_bandwidth", gw), f"{gw}.memory_bandwidth"),
        copy_engines=engines,
    )


def _link_from_dict(link: Any, w: str) -> LinkSpec:
    validate.table(link, w)
    _check_fields(link, _LINK_FIELDS, w)
    return LinkSpec(
        a=validate.string(_require(link, "a", w), f"{w}.a", nonempty=True),
        b=validate.string(_require(link, "b", w), f"{w}.b", nonempty=True),
        bandwidth=parse_bandwidth(_require(link, "bandwidth", w), f"{w}.bandwidth"),
        latency=parse_latency(_require(link, "latency", w), f"{w}.latency"),
        kind=validate.string(link.get("kind", "other"), f"{w}.kind"),
    )


def load_cluster_toml(path: str | Path) -> ClusterSpec:
    return cluster_from_dict(read_toml(path, "hardware file"), str(path))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dict_to_toml(d: dict[str, Any]) -> str:
    out = []
    for k, v in d.items():
        if not isinstance(v, list):
            out.append(f"{k} = {_toml_value(v)}")
    for k, v in d.items():
        if isinstance(v, list):
            for item in v:
                out.append(f"\n[[{k}]]")
                for ik, iv in item.items():
                    if isinstance(iv, list):
                        inline = ", ".join(
                            "{ " + ", ".join(f"{a} = {_toml_value(b)}" for a, b in e.items()) + " }"
                            for e in iv
                        )
                        out.append(f"{ik} = [{inline}]")
                    else:
                        out.append(f"{ik} = {_toml_value(iv)}")
    return "\n".join(out) + "\n"
