"""Cluster presets shaped like the papers' testbeds.

Bandwidths are effective (what a copy achieves), not signalling rates: PCIe 3.0 x16
about 12 GB/s, PCIe 4.0 x16 about 24 GB/s, PCIe 5.0 x16 about 48 GB/s. Calibration
replaces them with measured values (see ``sim`` calibration).

GPUDirect RDMA (``MachineSpec.gpudirect_rdma``) is on where the real system has it and
off elsewhere; each multi-machine preset says why in a comment. Single-machine presets
leave it off: they have no NIC and no copy to another machine, so it would change nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from workbench.errors import ConfigError, UnknownNameError
from workbench.hardware.parts import (
    A100_40,
    GB,
    H100,
    H200,
    P100,
    PCIE3,
    PCIE4,
    PCIE5,
    PCIE_LAT,
    US,
    V100,
    rc,
)
from workbench.hardware.parts import Builder as _Builder
from workbench.hardware.spec import ClusterSpec, load_cluster_toml


def neugraph_8xp100_pcie() -> ClusterSpec:
    """NeuGraph Figure 7: host -> 2 level-1 switches -> 4 level-2 switches -> 2 GPUs each."""
    b = _Builder()
    m = b.machine("m0", P100, 8, 256, 28)
    gpus = m.gpu_nodes()
    for s1 in range(2):
        l1 = b.switch(f"m0.pcie{s1}", "pcie-switch")
        b.link(rc(m), l1, PCIE3, PCIE_LAT, "pcie-uplink")
        for s2 in range(2):
            l2 = b.switch(f"m0.pcie{s1}{s2}", "pcie-switch")
            b.link(l1, l2, PCIE3, PCIE_LAT, "pcie-uplink")
            for g in range(2):
                b.link(l2, gpus[4 * s1 + 2 * s2 + g], PCIE3, PCIE_LAT, "pcie")
    return b.build("neugraph-8xp100-pcie", "NeuGraph's 8x P100 server on a two-level PCIe switch tree")


def roc_4x4p100_nvlink_ib(machines: int = 4) -> ClusterSpec:
    """ROC section 7: nodes of 4 P100 joined by NVLink, nodes by 100 Gb/s EDR InfiniBand."""
    b = _Builder()
    net = b.switch("net", "network")
    for i in range(machines):
        # GPUDirect RDMA on: the nodes are joined by Mellanox EDR InfiniBand, whose HCAs
        # (with the nv_peer_mem / peer-memory driver) read and write P100 memory directly;
        # GPUDirect RDMA has shipped for Tesla GPUs on Mellanox IB since Kepler.
        m = b.machine(f"m{i}", P100, 4, 256, 20, gpudirect_rdma=True)
        gpus = m.gpu_nodes()
        for s in range(2):
            sw = b.switch(f"m{i}.pcie{s}", "pcie-switch")
            b.link(rc(m), sw, PCIE3, PCIE_LAT, "pcie-uplink")
            for g in gpus[2 * s : 2 * s + 2]:
                b.link(sw, g, PCIE3, PCIE_LAT, "pcie")
        for x in range(4):
            for y in range(x + 1, 4):
                b.link(gpus[x], gpus[y], 20 * GB, 1 * US, "nvlink")
        nic = b.switch(f"m{i}.nic", "nic")
        b.link(rc(m), nic, PCIE3, PCIE_LAT, "pcie")
        b.link(nic, net, 12.5 * GB, 1 * US, "network")
    return b.build(
        "roc-4x4p100-nvlink-ib", "ROC's cluster: 4 nodes x 4 P100 with NVLink, 100 Gb/s InfiniBand"
    )


def _v100x8(nvswitch: bool) -> ClusterSpec:
    b = _Builder()
    m = b.machine("m0", V100, 8, 384, 40)
    gpus = m.gpu_nodes()
    for s in range(4):
        sw = b.switch(f"m0.pcie{s}", "pcie-switch")
        b.link(rc(m), sw, PCIE3, PCIE_LAT, "pcie-uplink")
        for g in gpus[2 * s : 2 * s + 2]:
            b.link(sw, g, PCIE3, PCIE_LAT, "pcie")
    if nvswitch:
        nvs = b.switch("m0.nvswitch", "nvswitch")
        for g in gpus:
            b.link(g, nvs, 150 * GB, 1 * US, "nvswitch")
        return b.build("v100x8-nvswitch", "Song & Jiang's 8x V100 server, GPUs on an NVSwitch")
    for s in range(4):
        b.link(gpus[2 * s], gpus[2 * s + 1], 50 * GB, 1 * US, "nvlink")
    return b.build(
        "v100x8-nvlink-bridge", "Song & Jiang's 8x V100 server, GPU pairs joined by NVLink bridges"
    )


def v100x8_nvlink_bridge() -> ClusterSpec:
    return _v100x8(nvswitch=False)


def v100x8_nvswitch() -> ClusterSpec:
    return _v100x8(nvswitch=True)


def hopgnn_4xa100_10gbe(machines: int = 4) -> ClusterSpec:
    """HopGNN section 5: 4 servers, one A100 40 GB each, 10 Gb/s Ethernet."""
    b = _Builder()
    net = b.switch("net", "network")
    for i in range(machines):
        # GPUDirect RDMA off: HopGNN's servers are joined by commodity 10 Gb/s Ethernet
        # (section 5) with no RDMA NIC named; PyTorch's communication runs over TCP
        # sockets there, so remote data is staged through host memory.
        m = b.machine(f"m{i}", A100_40, 1, 128, 48)
        b.link(rc(m), m.gpu_nodes()[0], PCIE4, PCIE_LAT, "pcie")
        nic = b.switch(f"m{i}.nic", "nic")
        b.link(rc(m), nic, PCIE3, PCIE_LAT, "pcie")
        b.link(nic, net, 1.25 * GB, 25 * US, "network")
    return b.build("hopgnn-4xa100-10gbe", "HopGNN's cluster: 4 servers x 1 A100 40 GB on 10 Gb/s Ethernet")


def perlmutter_4xa100_slingshot(machines: int = 4) -> ClusterSpec:
    """Tripathy et al. section 6: Perlmutter nodes, 4 A100 with pairwise NVLink 3, 4 Slingshot-11 NICs."""
    b = _Builder()
    net = b.switch("net", "network")
    for i in range(machines):
        # GPUDirect RDMA on: Perlmutter's GPU nodes have HPE Slingshot-11 NICs that read
        # and write A100 memory directly (GPU-aware Cray MPICH and NCCL's libfabric
        # plugin use it), so GPU-to-GPU traffic between nodes skips host memory.
        m = b.machine(f"m{i}", A100_40, 4, 256, 64, gpudirect_rdma=True)
        gpus = m.gpu_nodes()
        for gi, g in enumerate(gpus):
            # One NIC per GPU, on the GPU's PCIe switch (as in the real node): GPU-to-NIC traffic
            # stays under the switch, and host memory reaches the NIC through the root complex.
            sw = b.switch(f"m{i}.pcie{gi}", "pcie-switch")
            b.link(rc(m), sw, PCIE4, PCIE_LAT, "pcie-uplink")
            b.link(sw, g, PCIE4, PCIE_LAT, "pcie")
            nic = b.switch(f"m{i}.nic{gi}", "nic")
            b.link(sw, nic, PCIE4, PCIE_LAT, "pcie")
            b.link(nic, net, 25 * GB, 2 * US, "network")
        for x in range(4):
            for y in range(x + 1, 4):
                b.link(gpus[x], gpus[y], 100 * GB, 1 * US, "nvlink")
    return b.build(
        "perlmutter-4xa100-slingshot", "Perlmutter-like: nodes of 4 A100 with NVLink 3, Slingshot 11"
    )


def h100_1x() -> ClusterSpec:
    b = _Builder()
    m = b.machine("m0", H100, 1, 128, 16)
    b.link(rc(m), m.gpu_nodes()[0], PCIE5, PCIE_LAT, "pcie")
    return b.build("h100-1x", "one H100 80 GB on PCIe 5 (the lent device machine)")


def h200_1x() -> ClusterSpec:
    b = _Builder()
    m = b.machine("m0", H200, 1, 128, 16)
    b.link(rc(m), m.gpu_nodes()[0], PCIE5, PCIE_LAT, "pcie")
    return b.build("h200-1x", "one H200 141 GB on PCIe 5 (the lent device machine)")


def dgx_a100_16x8_fattree() -> ClusterSpec:
    """16 DGX A100 on a full-bisection two-level fat-tree (see ``workbench.hardware.generate``)."""
    from workbench.hardware.generate import generate_cluster

    return generate_cluster(16, 8, "fat-tree", "a100", name="dgx-a100-16x8-fattree")


def dgx_h100_32x8_rail() -> ClusterSpec:
    """32 DGX H100 on a rail-optimised network, as a DGX SuperPOD scalable unit."""
    from workbench.hardware.generate import generate_cluster

    return generate_cluster(32, 8, "rail", "h100", name="dgx-h100-32x8-rail")


PRESETS: dict[str, Callable[[], ClusterSpec]] = {
    "neugraph-8xp100-pcie": neugraph_8xp100_pcie,
    "roc-4x4p100-nvlink-ib": roc_4x4p100_nvlink_ib,
    "v100x8-nvlink-bridge": v100x8_nvlink_bridge,
    "v100x8-nvswitch": v100x8_nvswitch,
    "hopgnn-4xa100-10gbe": hopgnn_4xa100_10gbe,
    "perlmutter-4xa100-slingshot": perlmutter_4xa100_slingshot,
    "h100-1x": h100_1x,
    "h200-1x": h200_1x,
    "dgx-a100-16x8-fattree": dgx_a100_16x8_fattree,
    "dgx-h100-32x8-rail": dgx_h100_32x8_rail,
}


def load_hardware(name_or_path: str | Path, machines: int | None = None) -> ClusterSpec:
    """A preset by name, or a TOML file by path.

    ``machines``: for the presets built of identical machines (their builder takes a
    ``machines`` count: HopGNN's, ROC's and the Perlmutter-like cluster), how many.
    """
    text = str(name_or_path)
    if machines is not None:
        import inspect

        builder = PRESETS.get(text)
        if builder is None or "machines" not in inspect.signature(builder).parameters:
            scalable = [n for n, b in PRESETS.items() if "machines" in inspect.signature(b).parameters]
            raise ConfigError(
                f"hardware {text!r} has a fixed number of machines; machines applies to: {', '.join(scalable)}"
            )
        if isinstance(machines, bool) or not isinstance(machines, int) or machines < 1:
            raise ConfigError(f"hardware {text!r}: machines must be a positive integer, got {machines!r}")
        return builder(machines=machines)  # type: ignore[call-arg]
    if text in PRESETS:
        return PRESETS[text]()
    if text.endswith(".toml") or Path(text).exists():
        return load_cluster_toml(text)
    raise UnknownNameError(
        f"unknown hardware preset {text!r}; valid: {', '.join(PRESETS)} (or a path to a .toml file)"
    )
