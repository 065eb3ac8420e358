"""Route choice as the hardware makes it: NVLink/NVSwitch between GPUs, else fewest hops.

Every case is a small cluster built by hand, with link kinds, and most are cases where
the widest path (the old rule) and the real path differ. Bandwidths in GB/s, no latency
unless said.
"""

from __future__ import annotations

import pytest

from sim import Topology, simulate
from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec
from workbench.plan import Plan

GB = 1e9
GPU = GPUSpec("TestGPU", 16 * 2**30, 10e12, 500e9)


def cluster(
    links: list[tuple[str, str, float, str]],
    switches: dict[str, str],
    gpus: int = 2,
    machines: int = 1,
) -> ClusterSpec:
    """Machines ``m0``, ``m1``, ... with ``gpus`` GPUs each; links are (a, b, GB/s, kind)."""
    ms = tuple(MachineSpec(f"m{i}", (GPU,) * gpus, 64 * 2**30) for i in range(machines))
    return ClusterSpec(
        "routes",
        ms,
        tuple(LinkSpec(a, b, bw * GB, 0.0, kind) for a, b, bw, kind in links),
        dict(switches),
    )


PCIE_TREE = [
    ("m0.host", "m0.rc", 50, "host"),
    ("m0.rc", "m0.sw", 16, "pcie-uplink"),
    ("m0.sw", "m0.gpu0", 16, "pcie"),
    ("m0.sw", "m0.gpu1", 16, "pcie"),
]
PCIE_SWITCHES = {"m0.rc": "root-complex", "m0.sw": "pcie-switch"}


def test_nvlink_beats_a_wider_pcie_path():
    # gpu0 -> gpu1 has two paths:
    #   NVLink  gpu0 -> gpu1             1 hop,  bottleneck 12 GB/s
    #   PCIe    gpu0 -> m0.sw -> gpu1    2 hops, bottleneck 16 GB/s (peer-to-peer under one switch)
    # The widest path would be the PCIe one (16 > 12); CUDA uses the NVLink.
    c = cluster([*PCIE_TREE, ("m0.gpu0", "m0.gpu1", 12, "nvlink")], PCIE_SWITCHES)
    topo = Topology(c)
    r = topo.route("m0.gpu0", "m0.gpu1")
    assert r.nodes == ("m0.gpu0", "m0.gpu1")
    assert r.bottleneck == 12 * GB
    assert topo.link_names[r.links[0]] == "m0.gpu0->m0.gpu1"
    # The other direction too (every link is full duplex).
    assert topo.route("m0.gpu1", "m0.gpu0").nodes == ("m0.gpu1", "m0.gpu0")
    # Host copies still go down the PCIe tree: host -> rc -> sw -> gpu1 (3 hops, 16 GB/s).
    assert topo.route("m0.host", "m0.gpu1").nodes == ("m0.host", "m0.rc", "m0.sw", "m0.gpu1")


def test_nvlink_copy_runs_at_nvlink_speed():
    # 1.2 GB from gpu0 to gpu1 over the 12 GB/s NVLink: 0.1 s (0.075 s if it took the
    # 16 GB/s PCIe path the widest-path rule chose).
    c = cluster([*PCIE_TREE, ("m0.gpu0", "m0.gpu1", 12, "nvlink")], PCIE_SWITCHES)
    p = Plan("peer")
    p.transfer("peer", "m0.gpu0", "m0.gpu1", 1_200_000_000, "d2d")
    assert simulate(p, c).makespan == pytest.approx(0.1)


def test_nvswitch_path_beats_a_shorter_and_wider_pcie_path():
    # gpu0 -> gpu1:
    #   NVSwitch  gpu0 -> nvsA -> nvsB -> gpu1   3 hops, 12 GB/s (two NVSwitch planes)
    #   PCIe      gpu0 -> m0.sw -> gpu1          2 hops, 16 GB/s
    # The PCIe path is both shorter and wider; the GPUs are NVLink-connected, so NVSwitch.
    nvs = [
        ("m0.gpu0", "m0.nvsA", 12, "nvswitch"),
        ("m0.nvsA", "m0.nvsB", 12, "nvlink"),
        ("m0.nvsB", "m0.gpu1", 12, "nvswitch"),
    ]
    c = cluster([*PCIE_TREE, *nvs], {**PCIE_SWITCHES, "m0.nvsA": "nvswitch", "m0.nvsB": "nvswitch"})
    r = Topology(c).route("m0.gpu0", "m0.gpu1")
    assert r.nodes == ("m0.gpu0", "m0.nvsA", "m0.nvsB", "m0.gpu1")
    assert r.bottleneck == 12 * GB


def test_parallel_nvlink_and_pcie_links_are_both_kept():
    # Two links join gpu0 and gpu1 directly: a 16 GB/s PCIe peer link (spec order first)
    # and a 12 GB/s NVLink. The old adjacency kept only the widest (PCIe); now both are
    # neighbours, the widest first, and the route takes the NVLink.
    c = cluster(
        [
            ("m0.host", "m0.rc", 50, "host"),
            ("m0.rc", "m0.gpu0", 16, "pcie"),
            ("m0.gpu0", "m0.gpu1", 16, "pcie"),
            ("m0.gpu0", "m0.gpu1", 12, "nvlink"),
        ],
        {"m0.rc": "root-complex"},
    )
    topo = Topology(c)
    # Spec link 2 (PCIe) is directed links 4 and 5, spec link 3 (NVLink) 6 and 7.
    assert topo.adjacency["m0.gpu0"] == [("m0.gpu1", 4), ("m0.gpu1", 6), ("m0.rc", 3)]
    r = topo.route("m0.gpu0", "m0.gpu1")
    assert r.links == (6,) and r.bottleneck == 12 * GB
    # The same holds the other way round, over the NVLink's other direction.
    assert topo.route("m0.gpu1", "m0.gpu0").links == (7,)


def test_nvlink_through_another_gpu_is_not_a_direct_path():
    # gpu0 -nvlink- gpu1 -nvlink- gpu2: gpu0 and gpu2 have no NVLink path that avoids
    # gpu1's memory, so gpu0 -> gpu2 goes over PCIe (gpu0 -> sw -> gpu2, 2 hops).
    c = cluster(
        [
            ("m0.host", "m0.rc", 50, "host"),
            ("m0.rc", "m0.sw", 16, "pcie-uplink"),
            *[("m0.sw", f"m0.gpu{i}", 16, "pcie") for i in range(3)],
            ("m0.gpu0", "m0.gpu1", 50, "nvlink"),
            ("m0.gpu1", "m0.gpu2", 50, "nvlink"),
        ],
        PCIE_SWITCHES,
        gpus=3,
    )
    assert Topology(c).route("m0.gpu0", "m0.gpu2").nodes == ("m0.gpu0", "m0.sw", "m0.gpu2")


def test_among_nvlink_paths_fewest_hops_then_width():
    # gpu0 -> gpu1 over NVLink/NVSwitch only:
    #   direct NVLink           1 hop,  10 GB/s
    #   via nvsA (50 GB/s)      2 hops, 50 GB/s
    #   via nvsB (100 GB/s)     2 hops, 100 GB/s
    # Fewest hops: the direct link. Without it, the two 2-hop paths tie on hops and the
    # wider (nvsB) wins although nvsA comes first by name.
    nvs = [(f"m0.gpu{g}", s, bw, "nvswitch") for s, bw in (("m0.nvsA", 50), ("m0.nvsB", 100)) for g in (0, 1)]
    switches = {**PCIE_SWITCHES, "m0.nvsA": "nvswitch", "m0.nvsB": "nvswitch"}
    direct = cluster([*PCIE_TREE, *nvs, ("m0.gpu0", "m0.gpu1", 10, "nvlink")], switches)
    assert Topology(direct).route("m0.gpu0", "m0.gpu1").nodes == ("m0.gpu0", "m0.gpu1")
    r = Topology(cluster([*PCIE_TREE, *nvs], switches)).route("m0.gpu0", "m0.gpu1")
    assert r.nodes == ("m0.gpu0", "m0.nvsB", "m0.gpu1") and r.bottleneck == 100 * GB


def test_fewest_hops_beats_a_wider_path():
    # host -> gpu0:
    #   host -> rc -> gpu0                    2 hops, bottleneck 8 GB/s (a narrow direct slot)
    #   host -> rc -> swA -> swB -> gpu0      4 hops, bottleneck 16 GB/s
    # The widest path is the 4-hop one; PCIe routes along the tree to the address: 2 hops.
    c = cluster(
        [
            ("m0.host", "m0.rc", 50, "host"),
            ("m0.rc", "m0.gpu0", 8, "pcie"),
            ("m0.rc", "m0.swA", 16, "pcie-uplink"),
            ("m0.swA", "m0.swB", 16, "pcie-uplink"),
            ("m0.swB", "m0.gpu0", 16, "pcie"),
        ],
        {"m0.rc": "root-complex", "m0.swA": "pcie-switch", "m0.swB": "pcie-switch"},
        gpus=1,
    )
    r = Topology(c).route("m0.host", "m0.gpu0")
    assert r.nodes == ("m0.host", "m0.rc", "m0.gpu0")
    assert r.bottleneck == 8 * GB


def test_equal_hops_are_broken_by_width_before_names():
    # host -> gpu0 over two 3-hop paths:
    #   host -> rc -> swA -> gpu0   bottleneck 12 GB/s (first by name)
    #   host -> rc -> swB -> gpu0   bottleneck 16 GB/s
    # Hops tie (3 = 3); width decides: swB.
    c = cluster(
        [
            ("m0.host", "m0.rc", 50, "host"),
            ("m0.rc", "m0.swA", 12, "pcie-uplink"),
            ("m0.swA", "m0.gpu0", 12, "pcie"),
            ("m0.rc", "m0.swB", 16, "pcie-uplink"),
            ("m0.swB", "m0.gpu0", 16, "pcie"),
        ],
        {"m0.rc": "root-complex", "m0.swA": "pcie-switch", "m0.swB": "pcie-switch"},
        gpus=1,
    )
    r = Topology(c).route("m0.host", "m0.gpu0")
    assert r.nodes == ("m0.host", "m0.rc", "m0.swB", "m0.gpu0")
    assert r.bottleneck == 16 * GB


def test_network_routes_take_fewest_hops():
    # m0.gpu0 -> m1.gpu0 between two machines (no NVLink path, so the general rule):
    #   gpu0 -> m0.nic -> net -> m1.nic -> gpu0              4 hops, 12.5 GB/s
    #   gpu0 -> m0.nic -> spine1 -> spine2 -> m1.nic -> gpu0   5 hops, 25 GB/s
    # Fewest hops: through net, although the spine path is twice as wide.
    links = [
        ("m0.nic", "net", 12.5, "network"),
        ("m1.nic", "net", 12.5, "network"),
        ("m0.nic", "spine1", 25, "network"),
        ("spine1", "spine2", 25, "network"),
        ("spine2", "m1.nic", 25, "network"),
    ]
    for m in ("m0", "m1"):
        links += [(f"{m}.host", f"{m}.rc", 50, "host"), (f"{m}.rc", f"{m}.gpu0", 24, "pcie")]
        links += [(f"{m}.gpu0", f"{m}.nic", 25, "pcie")]
    switches = {"net": "network", "spine1": "network", "spine2": "network"}
    for m in ("m0", "m1"):
        switches |= {f"{m}.rc": "root-complex", f"{m}.nic": "nic"}
    topo = Topology(cluster(links, switches, gpus=1, machines=2))
    r = topo.route("m0.gpu0", "m1.gpu0")
    assert r.nodes == ("m0.gpu0", "m0.nic", "net", "m1.nic", "m1.gpu0")
    assert r.bottleneck == 12.5 * GB and r.crosses_network
    assert topo.route("m0.gpu0", "m1.gpu0") is r  # cached per (src, dst)
