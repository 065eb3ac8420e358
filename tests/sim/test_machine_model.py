"""The simulator's model of a machine, case by case, each worked out by hand in its test.

Copy engines (pools, directions, peer copies on the sender's engine), copies across
machines with and without GPUDirect RDMA, max-min sharing over links of different
widths, and the ``ready`` column that shows queueing. Bandwidths are in GB/s and
latencies are zero unless a test says otherwise, so every time is bytes / rate.
"""

from __future__ import annotations

from itertools import permutations

import pytest

from sim import simulate
from sim.clock import SimClock
from sim.flows import FlowNetwork
from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec
from workbench.plan import Plan

GB = 1e9
TOL = dict(rel=1e-12, abs=1e-15)


def gpu(copy_engines: int = 2) -> GPUSpec:
    return GPUSpec("TestGPU", 16 * 2**30, 10e12, 500e9, copy_engines)


def pcie_tree_with_nvlink(copy_engines: int = 2, nvlink: float = 20) -> ClusterSpec:
    """host -(50)- rc -(16, the uplink)- sw -(16)- gpu0, gpu1; gpu0 -(nvlink)- gpu1."""
    m = MachineSpec("m0", (gpu(copy_engines),) * 2, 64 * 2**30)
    links = [
        ("m0.host", "m0.rc", 50, "host"),
        ("m0.rc", "m0.sw", 16, "pcie-uplink"),
        ("m0.sw", "m0.gpu0", 16, "pcie"),
        ("m0.sw", "m0.gpu1", 16, "pcie"),
        ("m0.gpu0", "m0.gpu1", nvlink, "nvlink"),
    ]
    return ClusterSpec(
        "tree",
        (m,),
        tuple(LinkSpec(a, b, bw * GB, 0.0, kind) for a, b, bw, kind in links),
        {"m0.rc": "root-complex", "m0.sw": "pcie-switch"},
    )


def two_machines(rdma: bool, gpus: int = 1) -> ClusterSpec:
    """Per machine: host -(50)- rc -(20)- each GPU, rc -(20)- nic -(10)- net."""
    machines = tuple(MachineSpec(f"m{i}", (gpu(),) * gpus, 64 * 2**30, gpudirect_rdma=rdma) for i in range(2))
    links: list[tuple[str, str, float, str]] = []
    switches = {"net": "network"}
    for m in ("m0", "m1"):
        switches[f"{m}.rc"] = "root-complex"
        switches[f"{m}.nic"] = "nic"
        links += [(f"{m}.host", f"{m}.rc", 50, "host"), (f"{m}.rc", f"{m}.nic", 20, "pcie")]
        links += [(f"{m}.rc", f"{m}.gpu{g}", 20, "pcie") for g in range(gpus)]
        links.append((f"{m}.nic", "net", 10, "network"))
    return ClusterSpec(
        "pair", machines, tuple(LinkSpec(a, b, bw * GB, 0.0, kind) for a, b, bw, kind in links), switches
    )


def rows(result) -> dict[str, tuple[float, float, float]]:
    """task -> (ready, start, end)"""
    t = result.trace.drop_duplicates("task")
    return {r.task: (r.ready, r.start, r.end) for r in t.itertuples()}


def same_times(got: dict[str, tuple[float, ...]], expected: dict[str, tuple[float, ...]]) -> bool:
    return got.keys() == expected.keys() and all(got[k] == pytest.approx(expected[k], **TOL) for k in got)


def ends(result) -> dict[str, float]:
    return {k: v[2] for k, v in rows(result).items()}


# ---- max-min sharing -------------------------------------------------------------------
def test_max_min_sharing_across_links_of_different_widths():
    # L1 = 10 GB/s, L2 = 4 GB/s. a crosses L1 and L2, b only L2, c only L1.
    # L2 is the tighter link (4 / 2 flows = 2 < 10 / 2 = 5): a = b = 2 GB/s; c takes what L1
    # has left, 10 - 2 = 8 GB/s. a (2 GB) ends at 2 / 2 = 1.0 s. Then b is alone on L2 (4 GB/s)
    # with 4 - 2 = 2 GB left: 1.0 + 2 / 4 = 1.5 s; c alone on L1 (10 GB/s) with 18 - 8 = 10 GB
    # left: 1.0 + 10 / 10 = 2.0 s.
    clock = SimClock()
    net = FlowNetwork(clock, [10 * GB, 4 * GB])
    done: dict[str, float] = {}
    for name, links, nbytes in (("a", (0, 1), 2 * GB), ("b", (1,), 4 * GB), ("c", (0,), 18 * GB)):
        net.start(links, nbytes, lambda name=name: done.setdefault(name, clock.now))
    clock.run_all()
    assert done == pytest.approx({"a": 1.0, "b": 1.5, "c": 2.0}, **TOL)


# ---- copy engines and peer copies --------------------------------------------------------
@pytest.mark.parametrize("order", list(permutations(["read0", "read1", "peer"])), ids="-".join)
def test_peer_copy_over_nvlink_leaves_host_copies_alone_in_any_plan_order(order):
    # read0 and read1: host -> gpu0 and host -> gpu1, 1 GB each, both through the one 16 GB/s
    # uplink rc -> sw: 8 GB/s each, 1 / 8 = 0.125 s. peer: gpu0 -> gpu1, 1 GB over the 20 GB/s
    # NVLink (the route CUDA takes), on gpu0's outbound engine only: 1 / 20 = 0.05 s. It shares
    # no link and no engine with the reads (they use the GPUs' inbound engines), whatever order
    # the plan lists the three in.
    p = Plan("tree")
    copies = {
        "read0": ("m0.host", "m0.gpu0"),
        "read1": ("m0.host", "m0.gpu1"),
        "peer": ("m0.gpu0", "m0.gpu1"),
    }
    for name in order:
        p.transfer(name, *copies[name], int(1 * GB), "d2d" if name == "peer" else "h2d")
    r = simulate(p, pcie_tree_with_nvlink())
    assert ends(r) == pytest.approx({"read0": 0.125, "read1": 0.125, "peer": 0.05}, **TOL)
    assert {k: v[1] for k, v in rows(r).items()} == {"read0": 0.0, "read1": 0.0, "peer": 0.0}


def test_a_peer_copy_takes_the_senders_engine_not_the_receivers():
    # peer gpu1 -> gpu0 (1 GB over NVLink, 0.05 s) holds gpu1's outbound engine, which
    # gpu1's copy to host also needs (2 engines: outbound serves both), so that copy waits:
    # ready at 0, starts at 0.05, 1 GB over sw -> rc at 16 GB/s: ends 0.05 + 0.0625 = 0.1125 s.
    # gpu0's host read uses gpu0's inbound engine, untouched by the peer copy: 0 -> 0.0625 s.
    p = Plan("sender")
    p.transfer("peer", "m0.gpu1", "m0.gpu0", int(1 * GB), "d2d")
    p.transfer("out1", "m0.gpu1", "m0.host", int(1 * GB), "d2h")
    p.transfer("in0", "m0.host", "m0.gpu0", int(1 * GB), "h2d")
    r = rows(simulate(p, pcie_tree_with_nvlink()))
    assert r["peer"] == pytest.approx((0.0, 0.0, 0.05), **TOL)
    assert r["out1"] == pytest.approx((0.0, 0.05, 0.1125), **TOL)
    assert r["in0"] == pytest.approx((0.0, 0.0, 0.0625), **TOL)


def test_one_copy_engine_serialises_both_directions():
    # copy_engines = 1: host -> gpu0 (1 GB at 16 GB/s, 0.0625 s) and gpu0 -> host share it:
    # the second waits for the first although they use opposite link directions.
    p = Plan("one-engine")
    p.transfer("in", "m0.host", "m0.gpu0", int(1 * GB), "h2d")
    p.transfer("out", "m0.gpu0", "m0.host", int(1 * GB), "d2h")
    r = rows(simulate(p, pcie_tree_with_nvlink(copy_engines=1)))
    assert r["in"] == pytest.approx((0.0, 0.0, 0.0625), **TOL)
    assert r["out"] == pytest.approx((0.0, 0.0625, 0.125), **TOL)
    # With two engines they overlap (full duplex links): both end at 0.0625 s.
    r2 = rows(simulate(p, pcie_tree_with_nvlink(copy_engines=2)))
    assert r2["out"] == pytest.approx((0.0, 0.0, 0.0625), **TOL)


def test_two_copies_on_one_engine_run_one_after_the_other():
    # Two host -> gpu0 copies of 1 GB: one inbound engine, so FIFO: 0 -> 0.0625 and
    # 0.0625 -> 0.125, and the second's wait is in the trace (ready 0, start 0.0625).
    p = Plan("fifo")
    p.transfer("first", "m0.host", "m0.gpu0", int(1 * GB), "h2d")
    p.transfer("second", "m0.host", "m0.gpu0", int(1 * GB), "h2d")
    r = rows(simulate(p, pcie_tree_with_nvlink()))
    assert same_times(r, {"first": (0.0, 0.0, 0.0625), "second": (0.0, 0.0625, 0.125)})


def test_three_or_more_engines_give_peer_copies_their_own_pool():
    # copy_engines = 3: inbound, outbound and one peer engine. The peer copy gpu0 -> gpu1
    # (0.05 s) no longer holds gpu0's outbound engine, so gpu0's copy to host starts at once:
    # 1 GB at 16 GB/s, 0.0625 s. With 2 engines it waits for the peer copy: 0.05 + 0.0625.
    p = Plan("pool")
    p.transfer("peer", "m0.gpu0", "m0.gpu1", int(1 * GB), "d2d")
    p.transfer("out", "m0.gpu0", "m0.host", int(1 * GB), "d2h")
    assert ends(simulate(p, pcie_tree_with_nvlink(copy_engines=3)))["out"] == pytest.approx(0.0625, **TOL)
    assert ends(simulate(p, pcie_tree_with_nvlink(copy_engines=2)))["out"] == pytest.approx(0.1125, **TOL)
    # Two peer copies from gpu0 with 4 engines (a pool of 2) run at once, sharing the NVLink:
    # 1 GB each at 10 GB/s, both end at 0.1 s; with 3 engines (a pool of 1) one after the other.
    q = Plan("peers")
    q.transfer("p1", "m0.gpu0", "m0.gpu1", int(1 * GB), "d2d")
    q.transfer("p2", "m0.gpu0", "m0.gpu1", int(1 * GB), "d2d")
    assert ends(simulate(q, pcie_tree_with_nvlink(copy_engines=4))) == pytest.approx(
        {"p1": 0.1, "p2": 0.1}, **TOL
    )
    assert ends(simulate(q, pcie_tree_with_nvlink(copy_engines=3))) == pytest.approx(
        {"p1": 0.05, "p2": 0.1}, **TOL
    )


def test_a_kernel_waiting_for_the_compute_stream_shows_its_wait():
    # Two 1 s kernels on gpu0, both ready at 0: the second starts at 1 s.
    p = Plan("stream")
    p.compute("k1", "m0.gpu0", "forward", features={"seconds": 1.0})
    p.compute("k2", "m0.gpu0", "forward", features={"seconds": 1.0})
    r = rows(simulate(p, pcie_tree_with_nvlink()))
    assert r == {"k1": (0.0, 0.0, 1.0), "k2": (0.0, 1.0, 2.0)}


# ---- across machines ---------------------------------------------------------------------
def test_cross_machine_copy_with_gpudirect_holds_no_engine():
    # GPUDirect RDMA on both ends: m0.gpu0 -> rc -> nic -> net -> nic -> rc -> m1.gpu0 in one
    # go, the 10 GB/s network governs: 1 GB in 0.1 s. It holds no copy engine, so gpu0's copy
    # to its host (outbound engine) runs beside it: it shares m0.gpu0 -> m0.rc (20 GB/s) with
    # the network flow (held to 10 by the network), so it gets the other 10: 1 GB in 0.1 s.
    p = Plan("rdma")
    p.transfer("send", "m0.gpu0", "m1.gpu0", int(1 * GB), "gather_remote")
    p.transfer("local", "m0.gpu0", "m0.host", int(1 * GB), "d2h")
    r = simulate(p, two_machines(rdma=True))
    assert same_times(rows(r), {"send": (0.0, 0.0, 0.1), "local": (0.0, 0.0, 0.1)})
    assert r.trace.set_index("task").loc["send", "engine"] == "net"


def test_cross_machine_copy_without_gpudirect_is_staged_through_host_memory():
    # No RDMA: m0.gpu0 -> m0.host (1 GB at 20 GB/s: 0.05 s, on gpu0's outbound engine), then
    # m0.host -> m1.host over the network (10 GB/s: 0.1 s, no engine), then m1.host -> m1.gpu0
    # (20 GB/s: 0.05 s, on m1.gpu0's inbound engine): 0.2 s in all.
    # Each leg holds only its own engine: gpu0's copy to host, waiting for the outbound
    # engine, gets it when the first leg ends (0.05 s), not when the whole copy ends, and
    # then runs alone on gpu0 -> rc: 0.05 + 0.05 = 0.1 s. m1.gpu0's host read holds the
    # inbound engine 0 -> 0.05 s, long before the last leg wants it (0.15 s).
    p = Plan("staged")
    p.transfer("send", "m0.gpu0", "m1.gpu0", int(1 * GB), "gather_remote")
    p.transfer("local", "m0.gpu0", "m0.host", int(1 * GB), "d2h")
    p.transfer("read", "m1.host", "m1.gpu0", int(1 * GB), "h2d")
    r = rows(simulate(p, two_machines(rdma=False)))
    assert same_times(r, {"send": (0.0, 0.0, 0.2), "local": (0.0, 0.05, 0.1), "read": (0.0, 0.0, 0.05)})


def test_the_last_staged_leg_waits_for_the_far_sides_engine():
    # As above, but m1.gpu0's host read is 4 GB and listed first: it holds m1.gpu0's inbound
    # engine 0 -> 0.2 s (4 GB at 20 GB/s). The staged copy's first two legs end at 0.15 s;
    # its last leg waits for the engine until 0.2 s, then takes 0.05 s: ends at 0.25 s.
    p = Plan("staged-wait")
    p.transfer("read", "m1.host", "m1.gpu0", int(4 * GB), "h2d")
    p.transfer("send", "m0.gpu0", "m1.gpu0", int(1 * GB), "gather_remote")
    assert ends(simulate(p, two_machines(rdma=False))) == pytest.approx({"read": 0.2, "send": 0.25}, **TOL)


def test_two_concurrent_copies_share_a_nic():
    # m0.gpu0 -> m1.gpu0 and m0.gpu1 -> m1.gpu1 (RDMA), 1 GB each: both cross m0.nic -> net
    # and net -> m1.nic (10 GB/s), 5 GB/s each: 0.2 s. Host to host, staged or not, the same.
    p = Plan("nic")
    p.transfer("a", "m0.gpu0", "m1.gpu0", int(1 * GB), "gather_remote")
    p.transfer("b", "m0.gpu1", "m1.gpu1", int(1 * GB), "gather_remote")
    assert ends(simulate(p, two_machines(rdma=True, gpus=2))) == pytest.approx({"a": 0.2, "b": 0.2}, **TOL)
    q = Plan("nic-hosts")
    q.transfer("a", "m0.host", "m1.host", int(1 * GB), "gather_remote")
    q.transfer("b", "m0.host", "m1.host", int(1 * GB), "gather_remote")
    assert ends(simulate(q, two_machines(rdma=False))) == pytest.approx({"a": 0.2, "b": 0.2}, **TOL)


# ---- worker processes (a "GPU" without copy engines) ----------------------------------------
def two_processes() -> ClusterSpec:
    """two_machines(rdma=True) whose GPUs are worker processes (copy_engines = 0)."""
    pair = two_machines(rdma=True)
    machines = tuple(
        MachineSpec(m.name, (gpu(copy_engines=0),), m.host_memory_bytes, gpudirect_rdma=True)
        for m in pair.machines
    )
    return ClusterSpec("processes", machines, pair.links, pair.transit)


def test_a_worker_process_copies_on_its_own_thread():
    # A 1 s kernel listed first, then host -> gpu0, 1 GB over rc -> gpu0 at 20 GB/s (0.05 s),
    # both ready at 0. A process does one thing at a time: the copy waits for the kernel,
    # 1.0 -> 1.05. On a GPU with copy engines it runs beside the kernel, 0 -> 0.05.
    p = Plan("process-copy")
    p.compute("k", "m0.gpu0", "forward", features={"seconds": 1.0})
    p.transfer("in", "m0.host", "m0.gpu0", int(1 * GB), "h2d")
    assert rows(simulate(p, two_processes()))["in"] == pytest.approx((0.0, 1.0, 1.05), **TOL)
    assert rows(simulate(p, two_machines(rdma=True)))["in"] == pytest.approx((0.0, 0.0, 0.05), **TOL)


def test_the_only_worker_process_of_a_machine_also_runs_its_hosts_tasks():
    # Sampling on m0.host (1 s) and a kernel on m0.gpu0 (1 s), both ready at 0: one process
    # does both, one after the other (the kernel 1 -> 2); beside a real GPU both run 0 -> 1.
    p = Plan("process-host")
    p.compute("s", "m0.host", "sample", features={"seconds": 1.0})
    p.compute("k", "m0.gpu0", "forward", features={"seconds": 1.0})
    assert rows(simulate(p, two_processes())) == {"s": (0.0, 0.0, 1.0), "k": (0.0, 1.0, 2.0)}
    assert rows(simulate(p, two_machines(rdma=True))) == {"s": (0.0, 0.0, 1.0), "k": (0.0, 0.0, 1.0)}


def test_a_copy_from_another_machine_holds_the_receiving_process_not_the_sender():
    # m0.gpu0 -> m1.gpu0, 1 GB over the 10 GB/s network: 0 -> 0.1, listed before a 1 s kernel
    # on each process. The receiver's thread reads the socket: m1's kernel waits, 0.1 -> 1.1.
    # The sender's (a posted send) does not: m0's kernel runs 0 -> 1.
    p = Plan("process-net")
    p.transfer("send", "m0.gpu0", "m1.gpu0", int(1 * GB), "gather_remote")
    p.compute("k0", "m0.gpu0", "forward", features={"seconds": 1.0})
    p.compute("k1", "m1.gpu0", "forward", features={"seconds": 1.0})
    r = rows(simulate(p, two_processes()))
    assert same_times(r, {"send": (0.0, 0.0, 0.1), "k0": (0.0, 0.0, 1.0), "k1": (0.0, 0.1, 1.1)})


def test_worker_processes_sharing_a_machine_leave_its_host_its_own_cores():
    # Two processes on one machine: the host's task is not one process's, so it keeps the
    # host's engine and runs beside both kernels (all 0 -> 1).
    m = MachineSpec("m0", (gpu(copy_engines=0),) * 2, 64 * 2**30)
    links = (LinkSpec("m0.host", "m0.rc", 50 * GB, 0.0, "host"),) + tuple(
        LinkSpec("m0.rc", f"m0.gpu{g}", 20 * GB, 0.0, "pcie") for g in range(2)
    )
    cluster = ClusterSpec("shared", (m,), links, {"m0.rc": "root-complex"})
    p = Plan("shared-host")
    p.compute("s", "m0.host", "sample", features={"seconds": 1.0})
    p.compute("k0", "m0.gpu0", "forward", features={"seconds": 1.0})
    p.compute("k1", "m0.gpu1", "forward", features={"seconds": 1.0})
    assert ends(simulate(p, cluster)) == {"s": 1.0, "k0": 1.0, "k1": 1.0}
