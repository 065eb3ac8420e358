"""Parts the presets and the generated clusters are built from: GPU models, PCIe figures, a builder.

Bandwidths are effective (what a copy achieves), not signalling rates: PCIe 3.0 x16
about 12 GB/s, PCIe 4.0 x16 about 24 GB/s, PCIe 5.0 x16 about 48 GB/s.
"""

from __future__ import annotations

from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

GB = 1e9
GiB = 2**30
US = 1e-6

P100 = GPUSpec("P100", 16 * GiB, 9.3e12, 732 * GB)
V100 = GPUSpec("V100", 32 * GiB, 15.7e12, 900 * GB)
A100_40 = GPUSpec("A100-40GB", 40 * GiB, 19.5e12, 1555 * GB)
A100_80 = GPUSpec("A100-80GB", 80 * GiB, 19.5e12, 2039 * GB)
H100 = GPUSpec("H100", 80 * GiB, 67e12, 3350 * GB)
H200 = GPUSpec("H200", 141 * GiB, 67e12, 4800 * GB)

PCIE3 = 12 * GB
PCIE4 = 24 * GB
PCIE5 = 48 * GB
PCIE_LAT = 2 * US


def rc(machine: MachineSpec) -> str:
    """Name of a machine's PCIe root complex."""
    return f"{machine.name}.rc"


class Builder:
    """Accumulates machines, switches and links; names follow ``spec``'s conventions."""

    def __init__(self) -> None:
        self.machines: list[MachineSpec] = []
        self.transit: dict[str, str] = {}
        self.links: list[LinkSpec] = []

    def machine(
        self, name: str, gpu: GPUSpec, n_gpus: int, host_gb: float, cores: int, gpudirect_rdma: bool = False
    ) -> MachineSpec:
        m = MachineSpec(name, tuple([gpu] * n_gpus), int(host_gb * GiB), cores, gpudirect_rdma=gpudirect_rdma)
        self.machines.append(m)
        # Host DRAM hangs off the PCIe root complex; devices attach to the root complex,
        # so GPU <-> NIC traffic crosses it without passing through a memory node.
        self.switch(rc(m), "root-complex")
        self.link(m.host_node, rc(m), m.host_memory_bandwidth, 0.0, "host")
        return m

    def switch(self, name: str, kind: str) -> str:
        self.transit[name] = kind
        return name

    def link(self, a: str, b: str, bandwidth: float, latency: float, kind: str) -> None:
        self.links.append(LinkSpec(a, b, bandwidth, latency, kind))

    def build(self, name: str, description: str) -> ClusterSpec:
        return ClusterSpec(name, tuple(self.machines), tuple(self.links), dict(self.transit), description)
