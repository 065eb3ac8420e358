"""Generated large clusters (fat-tree and rail networks): shapes, routes and one transfer, by hand.

The small cases (4 machines x 2 A100, leaf radix 4) are counted here from the layout that
``workbench.hardware.generate`` documents. Each machine, with G GPUs:

* memories: ``host`` and G GPUs;
* transit: the root complex ``rc``, one PCIe switch per GPU (``pcie<i>``, holding GPU i and
  NIC i), G NICs and one NVSwitch: 2G + 2;
* links: host-rc, then per GPU rc-pcie, pcie-gpu, pcie-nic, gpu-nvswitch, nic-fabric: 1 + 5G.

With G = 2: 3 memories + 6 transit = 9 nodes and 11 links per machine; 36 and 44 for 4.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from sim import simulate
from sim.topology import Topology
from workbench.errors import ConfigError
from workbench.hardware import cluster_from_dict, load_hardware
from workbench.hardware.generate import generate_cluster
from workbench.plan import Plan

TOL = dict(rel=1e-12, abs=1e-15)


def test_small_fat_tree_has_the_nodes_and_links_counted_by_hand() -> None:
    # 8 NICs; radix 4 at full bisection: 2 ports down, 2 up per leaf, so 4 leaves, and the
    # spine layer (2 spines of 4 ports) is one node: 36 + 4 + 1 = 41 nodes; 44 + 4 = 48 links.
    c = generate_cluster(4, 2, "fat-tree", leaf_radix=4)
    assert c.num_gpus == 8 and len(c.machines) == 4
    assert len(c.nodes()) == 41
    assert len(c.links) == 48
    leaves = sorted(n for n in c.transit if n.startswith("fabric.leaf"))
    assert leaves == ["fabric.leaf0", "fabric.leaf1", "fabric.leaf2", "fabric.leaf3"]
    # Leaf uplinks bundle the 2 up ports: 2 x 25 GB/s (HDR 200 Gb/s) each.
    up = [link for link in c.links if link.b == "fabric.spine"]
    assert len(up) == 4 and {link.bandwidth for link in up} == {50e9}


def test_small_rail_network_has_the_nodes_and_links_counted_by_hand() -> None:
    # 2 rail switches + 1 spine: 36 + 3 = 39 nodes; 44 + 2 rail-to-spine links = 46.
    c = generate_cluster(4, 2, "rail")
    assert len(c.nodes()) == 39
    assert len(c.links) == 46
    on_rail1 = sorted(link.a for link in c.links if link.b == "fabric.rail1")
    assert on_rail1 == ["m0.nic1", "m1.nic1", "m2.nic1", "m3.nic1"]
    # A rail's uplink carries all its machines' NICs at full bisection: 4 x 25 GB/s.
    assert {link.bandwidth for link in c.links if link.b == "fabric.spine"} == {100e9}


def test_fat_tree_route_between_machines_crosses_leaf_spine_leaf() -> None:
    topo = Topology(generate_cluster(4, 2, "fat-tree", leaf_radix=4))
    # NIC numbers machine by machine: m0.nic0 is NIC 0 (leaf 0), m3.nic1 NIC 7 (leaf 3).
    r = topo.route("m0.gpu0", "m3.gpu1")
    assert r.nodes == (
        "m0.gpu0",
        "m0.pcie0",
        "m0.nic0",
        "fabric.leaf0",
        "fabric.spine",
        "fabric.leaf3",
        "m3.nic1",
        "m3.pcie1",
        "m3.gpu1",
    )
    # One machine: NVSwitch, never the network.
    assert topo.route("m0.gpu0", "m0.gpu1").nodes == ("m0.gpu0", "m0.nvswitch", "m0.gpu1")
    # Radix 8: 4 NICs per leaf, so m0 and m1 share leaf 0 and need no spine.
    wide = Topology(generate_cluster(4, 2, "fat-tree", leaf_radix=8))
    assert wide.route("m0.gpu1", "m1.gpu1").nodes == (
        "m0.gpu1",
        "m0.pcie1",
        "m0.nic1",
        "fabric.leaf0",
        "m1.nic1",
        "m1.pcie1",
        "m1.gpu1",
    )


def test_rail_route_keeps_to_one_rail_or_crosses_the_spine() -> None:
    topo = Topology(generate_cluster(4, 2, "rail", gpu="h100"))
    same_rail = topo.route("m0.gpu1", "m2.gpu1")
    assert same_rail.nodes == (
        "m0.gpu1",
        "m0.pcie1",
        "m0.nic1",
        "fabric.rail1",
        "m2.nic1",
        "m2.pcie1",
        "m2.gpu1",
    )
    # Different rails: through the spine to the receiving GPU's own NIC (8 hops, as many as
    # crossing the far machine's root complex; equal width, so the switch names decide).
    cross = topo.route("m0.gpu0", "m1.gpu1")
    assert cross.nodes == (
        "m0.gpu0",
        "m0.pcie0",
        "m0.nic0",
        "fabric.rail0",
        "fabric.spine",
        "fabric.rail1",
        "m1.nic1",
        "m1.pcie1",
        "m1.gpu1",
    )


def test_transfer_across_the_fat_tree_takes_bytes_over_bandwidth_plus_latencies() -> None:
    # Unloaded path m0.gpu0 -> m3.gpu1 (the route above), A100 nodes with GPUDirect RDMA:
    # links gpu-pcie 24 GB/s 2 us, pcie-nic 24 GB/s 2 us, nic-leaf 25 GB/s 1 us,
    # leaf-spine 50 GB/s 0.5 us, and back down: bottleneck 24 GB/s, latency 2+2+1+0.5+0.5+1+2+2 = 11 us.
    c = generate_cluster(4, 2, "fat-tree", leaf_radix=4)
    p = Plan("p2p")
    p.transfer("x", "m0.gpu0", "m3.gpu1", 240_000_000, "gather_remote")
    r = simulate(p, c)
    assert r.makespan == pytest.approx(240e6 / 24e9 + 11e-6, **TOL)


def test_oversubscribed_fat_tree_has_fewer_up_ports() -> None:
    # Radix 4, 3:1: 3 ports down, 1 up; 8 NICs on 3 leaves (3, 3, 2); uplinks of one port, 25 GB/s.
    c = generate_cluster(4, 2, "fat-tree", leaf_radix=4, oversubscription=3)
    up = [link for link in c.links if link.b == "fabric.spine"]
    assert len(up) == 3 and {link.bandwidth for link in up} == {25e9}
    assert "3:1" in c.description


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(machines=0), "machines must be at least 1, got 0"),
        (dict(machines=10**9), "machines must be at most 4096, got 1000000000"),
        (dict(gpus=3), "gpus per machine must be one of 2, 4, 8; got 3"),
        (dict(network="torus"), "unknown network 'torus'; valid: fat-tree, rail"),
        (dict(gpu="v100"), "unknown gpu 'v100'; valid: a100, h100"),
        (dict(oversubscription=0), "oversubscription must be positive, got 0"),
        (dict(oversubscription=-1.5), "oversubscription must be positive, got -1.5"),
        (dict(leaf_radix=4, machines=16), "a two-level fat-tree of radix 4"),
    ],
)
def test_bad_inputs_are_one_line(kwargs: dict, message: str) -> None:
    args = dict(machines=4, gpus=2, network="fat-tree") | kwargs
    with pytest.raises(ConfigError) as exc:
        generate_cluster(**args)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_presets_load_with_their_gpu_counts() -> None:
    fat = load_hardware("dgx-a100-16x8-fattree")
    rail = load_hardware("dgx-h100-32x8-rail")
    assert fat.num_gpus == 128 and len(fat.machines) == 16
    assert rail.num_gpus == 256 and len(rail.machines) == 32
    assert {g.model for m in rail.machines for g in m.gpus} == {"H100"}
    assert all(m.gpudirect_rdma for m in fat.machines + rail.machines)
    assert {n for n, k in rail.transit.items() if n.startswith("fabric.rail")} == {
        f"fabric.rail{i}" for i in range(8)
    }


def test_generated_cluster_round_trips_through_toml() -> None:
    c = generate_cluster(4, 4, "rail", gpu="h100")
    again = cluster_from_dict(tomllib.loads(c.to_toml()))
    assert again.to_dict() == c.to_dict()


def test_cli_generate_writes_the_export_layout(tmp_path) -> None:
    out = tmp_path / "c.toml"
    r = subprocess.run(
        [sys.executable, "-m", "workbench.cli.main", "hardware", "generate"]
        + ["--machines", "4", "--gpus", "2", "--network", "fat-tree", "--leaf-radix", "4", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert load_hardware(out).to_toml() == generate_cluster(4, 2, "fat-tree", leaf_radix=4).to_toml()
    bad = subprocess.run(
        [sys.executable, "-m", "workbench.cli.main", "hardware", "generate"]
        + ["--machines", "4", "--gpus", "3", "--network", "rail"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "gpus per machine must be one of 2, 4, 8; got 3" in bad.stderr


def test_cli_list_shows_the_large_presets() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "workbench.cli.main", "hardware", "list"], capture_output=True, text=True
    )
    assert r.returncode == 0
    assert "dgx-a100-16x8-fattree" in r.stdout and "dgx-h100-32x8-rail" in r.stdout
