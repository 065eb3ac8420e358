"""Large clusters built to order: DGX-like machines on a two-level fat-tree or a rail network.

Each machine is a DGX-like node (the shape of ``perlmutter-4xa100-slingshot``'s nodes,
with an NVSwitch instead of pairwise NVLink): GPUs on one NVSwitch; per GPU a PCIe
switch under the root complex holding that GPU and its own NIC (one NIC per GPU, as in
DGX A100/H100 and DGX SuperPOD); GPUDirect RDMA on (InfiniBand HCAs, as in SuperPOD).
Node names: ``m<k>.host``, ``m<k>.gpu<i>``, ``m<k>.rc``, ``m<k>.pcie<i>``, ``m<k>.nic<i>``,
``m<k>.nvswitch``.

The network (switches are ``network`` transit nodes, as ``net`` is in the presets):

* ``fat-tree``: leaf switches of ``leaf_radix`` ports, ``down`` of them to NICs and
  ``up`` to spines, ``down / up`` = ``oversubscription`` (1: full bisection, ``down = up
  = radix / 2``; otherwise the nearest whole split of the ports, the ratio built is in
  the description). NICs fill leaves in order, machine by machine (NIC ``k*G + i`` is
  ``m<k>.nic<i>``). The ``up`` spines (each with one port per leaf, so at most
  ``leaf_radix`` leaves) are one node ``fabric.spine``; each leaf's link to it carries
  its ``up`` ports' summed bandwidth. Why one node: routes take the fewest hops with
  ties broken by names, so separate spines would all route through the first one;
  ECMP spreads flows over the spines, which one bundled link models (flow level).
* ``rail``: NIC i of every machine on rail switch ``fabric.rail<i>``; the rails are
  joined by ``fabric.spine``, each rail's link to it carrying ``machines x NIC
  bandwidth / oversubscription``. A rail switch is one logical switch whatever its
  port count.

The fabric's names sort before the machines' (``fabric.`` < ``m``) on purpose: where a
route through the spine and one through the far machine's root complex have as many
hops and the same width, the names decide (``sim.topology``), and the spine is what
the hardware uses (the receiving GPU's own NIC, as NCCL picks it).

Figures are round, effective values (what a copy achieves), as in the presets;
calibration replaces them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workbench import validate
from workbench.errors import ConfigError
from workbench.hardware.parts import A100_80, GB, H100, PCIE4, PCIE5, PCIE_LAT, US, Builder, rc
from workbench.hardware.spec import ClusterSpec, GPUSpec

NETWORKS = ("fat-tree", "rail")
GPUS_PER_MACHINE = (2, 4, 8)
MAX_MACHINES = 4096  # 32,768 GPUs at most; more is a typo, not a cluster to simulate
NIC_LAT = 1 * US  # NIC to its leaf or rail switch (HCA, cable and switch)
SWITCH_LAT = 0.5 * US  # leaf or rail switch to the spine
NVSWITCH_LAT = 1 * US


@dataclass(frozen=True)
class NodeModel:
    """A DGX-like machine: its GPU, per-GPU NVSwitch, PCIe and NIC bandwidths, host."""

    label: str
    gpu: GPUSpec
    nvswitch: float  # bytes/s per GPU, each direction
    pcie: float
    nic: float
    host_gb: float
    cores: int


NODE_MODELS = {
    # DGX A100: NVLink 3 at 600 GB/s both ways per GPU, PCIe 4, ConnectX-6 HDR 200 Gb/s,
    # 2 TB host memory, 2 x 64-core EPYC.
    "a100": NodeModel("DGX A100", A100_80, 300 * GB, PCIE4, 25 * GB, 2048, 128),
    # DGX H100: NVLink 4 at 900 GB/s both ways per GPU, PCIe 5, ConnectX-7 NDR 400 Gb/s,
    # 2 TB host memory, 2 x 56-core Xeon.
    "h100": NodeModel("DGX H100", H100, 450 * GB, PCIE5, 50 * GB, 2048, 112),
}


def generate_cluster(
    machines: int,
    gpus: int,
    network: str,
    gpu: str = "a100",
    *,
    leaf_radix: int = 64,
    oversubscription: float = 1.0,
    name: str | None = None,
) -> ClusterSpec:
    """``machines`` DGX-like machines of ``gpus`` GPUs on a ``network`` (see the module docstring).

    Every bad input is a one-line :class:`ConfigError` naming the argument.
    """
    validate.integer(machines, "machines", minimum=1, maximum=MAX_MACHINES)
    if isinstance(gpus, bool) or gpus not in GPUS_PER_MACHINE:
        raise ConfigError(
            f"gpus per machine must be one of {', '.join(map(str, GPUS_PER_MACHINE))}; got {gpus!r}"
        )
    if network not in NETWORKS:
        raise ConfigError(f"unknown network {network!r}; valid: {', '.join(NETWORKS)}")
    if gpu not in NODE_MODELS:
        raise ConfigError(f"unknown gpu {gpu!r}; valid: {', '.join(NODE_MODELS)}")
    ratio = validate.finite_number(oversubscription, "oversubscription", positive=True)
    validate.integer(leaf_radix, "leaf_radix", minimum=2)
    node = NODE_MODELS[gpu]
    b = Builder()
    nics = [_machine(b, f"m{k}", node, gpus) for k in range(machines)]
    spine = b.switch("fabric.spine", "network")
    if network == "fat-tree":
        shape = _fat_tree(b, [nic for machine in nics for nic in machine], node.nic, leaf_radix, ratio, spine)
    else:
        shape = _rails(b, nics, node.nic, ratio, spine)
    label = f"{machines} x {node.label} ({gpus} GPUs each)"
    return b.build(name or f"dgx-{gpu}-{machines}x{gpus}-{network}", f"{label}, {shape}")


def _machine(b: Builder, name: str, node: NodeModel, gpus: int) -> list[str]:
    """One DGX-like machine; returns its NICs in GPU order."""
    m = b.machine(name, node.gpu, gpus, node.host_gb, node.cores, gpudirect_rdma=True)
    nvs = b.switch(f"{name}.nvswitch", "nvswitch")
    nics = []
    for i, g in enumerate(m.gpu_nodes()):
        sw = b.switch(f"{name}.pcie{i}", "pcie-switch")
        b.link(rc(m), sw, node.pcie, PCIE_LAT, "pcie-uplink")
        b.link(sw, g, node.pcie, PCIE_LAT, "pcie")
        nic = b.switch(f"{name}.nic{i}", "nic")
        b.link(sw, nic, node.pcie, PCIE_LAT, "pcie")
        b.link(g, nvs, node.nvswitch, NVSWITCH_LAT, "nvswitch")
        nics.append(nic)
    return nics


def _fat_tree(b: Builder, nics: list[str], port: float, radix: int, ratio: float, spine: str) -> str:
    up = max(1, round(radix / (1 + ratio)))
    down = radix - up
    if down < 1:
        raise ConfigError(f"oversubscription {ratio:g} leaves no down port on a leaf of radix {radix}")
    leaves = math.ceil(len(nics) / down)
    if leaves > radix:
        raise ConfigError(
            f"{len(nics)} NICs need {leaves} leaves, more than a two-level fat-tree of radix {radix} "
            f"joins ({radix} leaves of {down} NICs); raise the leaf radix"
        )
    for j in range(leaves):
        leaf = b.switch(f"fabric.leaf{j}", "network")
        for nic in nics[j * down : (j + 1) * down]:
            b.link(nic, leaf, port, NIC_LAT, "network")
        b.link(leaf, spine, up * port, SWITCH_LAT, "network")
    return f"two-level fat-tree: {leaves} leaves of {radix} ports ({down} down, {up} up, {down / up:g}:1), {up} spines"


def _rails(b: Builder, nics: list[list[str]], port: float, ratio: float, spine: str) -> str:
    rails = len(nics[0])
    for i in range(rails):
        rail = b.switch(f"fabric.rail{i}", "network")
        for machine in nics:
            b.link(machine[i], rail, port, NIC_LAT, "network")
        b.link(rail, spine, len(nics) * port / ratio, SWITCH_LAT, "network")
    return f"rail-optimised: {rails} rails joined by a spine ({ratio:g}:1)"
