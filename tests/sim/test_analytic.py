"""The issue's analytic cases, each worked out by hand in its test, plus variations."""

from __future__ import annotations

import pytest

from sim import simulate
from workbench.hardware import load_hardware
from workbench.plan import Plan

from .conftest import make_cluster

TOL = dict(rel=1e-12, abs=1e-15)


def ends(result) -> dict[str, float]:
    return dict(zip(result.trace["task"], result.trace["end"], strict=True))


def test_one_transfer_over_one_link():
    # host -> rc has 100 GB/s and no latency; rc -> gpu0 is the one real link: 10 GB/s, 5 us.
    c = make_cluster(
        1, [("m0.host", "m0.rc", 100e9, 0.0), ("m0.rc", "m0.gpu0", 10e9, 5e-6)], {"m0.rc": "root-complex"}
    )
    p = Plan("one")
    p.transfer("x", "m0.host", "m0.gpu0", 1_000_000_000, "h2d")
    r = simulate(p, c)
    # 1e9 B / 10e9 B/s = 0.1 s, plus 5 us.
    assert r.makespan == pytest.approx(0.1 + 5e-6, **TOL)
    row = r.trace.iloc[0]
    assert (row["device"], row["engine"], row["bytes"], row["start"]) == (
        "m0.gpu0",
        "h2d",
        1_000_000_000,
        0.0,
    )


def test_two_concurrent_transfers_share_the_switch_uplink(neugraph):
    # gpu0 and gpu1 hang off m0.pcie00; host reads cross rc->pcie0->pcie00 (12 GB/s each) together,
    # so each gets 6 GB/s: 12e6 B / 6e9 = 2 ms, plus 3 PCIe hops x 2 us = 2.006 ms.
    p = Plan("shared")
    p.transfer("a", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    p.transfer("b", "m0.host", "m0.gpu1", 12_000_000, "h2d")
    r = simulate(p, neugraph)
    assert ends(r) == pytest.approx({"a": 0.002006, "b": 0.002006}, **TOL)


def test_unequal_transfers_through_a_shared_uplink_speed_up_when_one_ends(neugraph):
    # Both at 6 GB/s until a (6 MB) is done at 1 ms (+6 us latency); b has 6 MB left, now alone
    # at 12 GB/s: 0.5 ms more. b ends at 6 us + 1 ms + 0.5 ms = 1.506 ms = (6 MB + 12 MB) / 12 GB/s + 6 us.
    p = Plan("unequal")
    p.transfer("a", "m0.host", "m0.gpu0", 6_000_000, "h2d")
    p.transfer("b", "m0.host", "m0.gpu1", 12_000_000, "h2d")
    r = simulate(p, neugraph)
    assert ends(r) == pytest.approx({"a": 0.001006, "b": 0.001506}, **TOL)


def test_gpus_under_different_level2_switches_share_only_the_level1_uplink(neugraph):
    # gpu0 (pcie00) and gpu2 (pcie01) share rc->pcie0 (12 GB/s): 6 GB/s each again.
    # gpu0 and gpu4 (other level-1 switch) share only host->rc (50 GB/s): 12 GB/s each, 1 ms.
    p = Plan("levels")
    p.transfer("a", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    p.transfer("b", "m0.host", "m0.gpu2", 12_000_000, "h2d")
    assert simulate(p, neugraph).makespan == pytest.approx(0.002006, **TOL)
    q = Plan("apart")
    q.transfer("a", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    q.transfer("b", "m0.host", "m0.gpu4", 12_000_000, "h2d")
    assert simulate(q, neugraph).makespan == pytest.approx(0.001006, **TOL)


def test_directions_do_not_compete(neugraph):
    # Full duplex: a host read to gpu0 and a write back from gpu1 use opposite directions
    # of the shared uplinks, so each runs at the full 12 GB/s: 1 ms + 6 us.
    p = Plan("duplex")
    p.transfer("in", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    p.transfer("out", "m0.gpu1", "m0.host", 12_000_000, "d2h")
    assert ends(simulate(p, neugraph)) == pytest.approx({"in": 0.001006, "out": 0.001006}, **TOL)


def test_a_transfer_across_links_of_different_bandwidth_runs_at_the_narrowest():
    # host -(40 GB/s, 1 us)- sw1 -(5 GB/s, 2 us)- sw2 -(20 GB/s, 3 us)- gpu0:
    # 5e8 B / 5e9 B/s = 0.1 s, plus 6 us.
    c = make_cluster(
        1,
        [("m0.host", "sw1", 40e9, 1e-6), ("sw1", "sw2", 5e9, 2e-6), ("sw2", "m0.gpu0", 20e9, 3e-6)],
        {"sw1": "pcie-switch", "sw2": "pcie-switch"},
    )
    p = Plan("narrow")
    p.transfer("x", "m0.host", "m0.gpu0", 500_000_000, "h2d")
    assert simulate(p, c).makespan == pytest.approx(0.1 + 6e-6, **TOL)


def test_compute_overlaps_a_copy_on_another_engine(h100):
    # Copy: 4.8e8 B at 48 GB/s + 2 us = 10.002 ms on the H2D engine; kernel 4 ms on the stream.
    # A d2h copy of 2.4e8 B (5.002 ms) uses the D2H engine and overlaps too. Makespan: the longest.
    p = Plan("overlap")
    p.transfer("in", "m0.host", "m0.gpu0", 480_000_000, "h2d")
    p.transfer("out", "m0.gpu0", "m0.host", 240_000_000, "d2h")
    p.compute("k", "m0.gpu0", "forward", features={"seconds": 0.004})
    r = simulate(p, h100)
    assert ends(r) == pytest.approx({"in": 0.010002, "out": 0.005002, "k": 0.004}, **TOL)
    assert set(r.trace["start"]) == {0.0}


def test_copies_on_one_engine_serialise_fifo(h100):
    # Two H2D copies into the same GPU share its one H2D engine: the second starts when the
    # first ends (5.002 ms) and takes 5.002 ms more; they never share the link.
    p = Plan("fifo")
    p.transfer("first", "m0.host", "m0.gpu0", 240_000_000, "h2d")
    p.transfer("second", "m0.host", "m0.gpu0", 240_000_000, "h2d")
    assert ends(simulate(p, h100)) == pytest.approx({"first": 0.005002, "second": 0.010004}, **TOL)


def test_a_dependency_chain_adds_up(h100):
    # load 10.002 ms -> compute 3 ms -> compute 2 ms -> store (4.8e7 B: 1.002 ms) = 16.004 ms.
    p = Plan("chain")
    p.transfer("load", "m0.host", "m0.gpu0", 480_000_000, "h2d")
    p.compute("f", "m0.gpu0", "forward", ["load"], features={"seconds": 0.003})
    p.compute("b", "m0.gpu0", "backward", ["f"], features={"seconds": 0.002})
    p.transfer("store", "m0.gpu0", "m0.host", 48_000_000, "d2h", ["b"])
    r = simulate(p, h100)
    e = ends(r)
    assert e == pytest.approx({"load": 0.010002, "f": 0.013002, "b": 0.015002, "store": 0.016004}, **TOL)
    starts = dict(zip(r.trace["task"], r.trace["start"], strict=True))
    assert starts["f"] == e["load"] and starts["store"] == e["b"]


def ring_cluster(n: int, bw: float, lat: float):
    links = [("m0.host", "m0.rc", 50e9, 0.0)]
    links += [("m0.rc", f"m0.gpu{i}", 12e9, 0.0) for i in range(n)]
    links += [(f"m0.gpu{i}", "m0.nvs", bw, lat) for i in range(n)]
    return make_cluster(n, links, {"m0.rc": "root-complex", "m0.nvs": "nvswitch"})


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_allreduce_matches_the_formula(n):
    # Every ring edge gpu_i -> nvs -> gpu_(i+1) gets its own link directions at 100 GB/s.
    # Zero latency: 2(n-1)/n * B / bandwidth.
    B, bw = 240_000_000, 100e9
    p = Plan("ring")
    p.collective("ar", "allreduce", [f"m0.gpu{i}" for i in range(n)], B, "allreduce")
    r = simulate(p, ring_cluster(n, bw, 0.0))
    assert r.makespan == pytest.approx(2 * (n - 1) / n * B / bw, **TOL)
    assert len(r.trace) == n and list(r.trace["worker"]) == list(range(n))
    assert set(r.trace["engine"]) == {"collective"}


def test_ring_allreduce_latency_enters_once_per_step():
    # v100x8-nvswitch: each ring edge is gpu -> nvswitch -> gpu, 150 GB/s, 1 us + 1 us.
    # 2(n-1) steps of (2 us + (B/n) / 150 GB/s).
    c = load_hardware("v100x8-nvswitch")
    B, n = 80_000_000, 8
    p = Plan("ring8")
    p.collective("ar", "allreduce", c.gpu_nodes(), B, "allreduce")
    expected = 2 * (n - 1) * (2e-6 + B / n / 150e9)
    assert simulate(p, c).makespan == pytest.approx(expected, **TOL)


def test_other_collectives():
    n, B, bw = 4, 400_000_000, 100e9
    c = ring_cluster(n, bw, 0.0)
    gpus = [f"m0.gpu{i}" for i in range(n)]
    for op, expected in [
        ("allgather", (n - 1) / n * B / bw),  # n-1 steps of B/n
        ("reducescatter", (n - 1) / n * B / bw),
        ("broadcast", B / bw),  # pipelined chain: every edge carries B at once
        # every GPU sends B/n to each of the n-1 others over its one 100 GB/s uplink
        ("alltoall", (n - 1) * (B / n) / bw),
    ]:
        p = Plan(op)
        p.collective("c", op, gpus, B, "allreduce")
        assert simulate(p, c).makespan == pytest.approx(expected, **TOL), op


def test_nvlink_traffic_does_not_touch_pcie():
    # v100x8-nvlink-bridge: gpu0 <-> gpu1 over a 50 GB/s NVLink. A peer copy gpu1 -> gpu0 and a
    # host read into gpu0 at once: the host read still gets the full 12 GB/s PCIe (1 ms + 4 us),
    # the peer copy the full NVLink (5e7 B / 50 GB/s = 1 ms + 1 us).
    c = load_hardware("v100x8-nvlink-bridge")
    p = Plan("nvlink")
    p.transfer("host", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    p.transfer("peer", "m0.gpu1", "m0.gpu0", 50_000_000, "d2d")
    r = simulate(p, c)
    # gpu1 -> gpu0 holds only the sender's (gpu1's) outbound engine, never gpu0's inbound one,
    # so the two run at once. (Until issue 10 the peer copy also held gpu0's H2D engine and
    # waited for the host read, ending at 2.005 ms: not what a GPU does.)
    assert ends(r) == pytest.approx({"host": 0.001004, "peer": 0.001001}, **TOL)
    assert r.trace.set_index("task").loc["peer", "engine"] == "d2d"


def test_nvlink_and_pcie_run_at_once_on_different_engines():
    # gpu0 -> gpu1 over NVLink (gpu0's outbound engine) and host -> gpu0 (gpu0's inbound engine):
    # no shared engine or link, both at full speed: 1.001 ms and 1.004 ms.
    c = load_hardware("v100x8-nvlink-bridge")
    p = Plan("nvlink2")
    p.transfer("peer", "m0.gpu0", "m0.gpu1", 50_000_000, "d2d")
    p.transfer("host", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    assert ends(simulate(p, c)) == pytest.approx({"peer": 0.001001, "host": 0.001004}, **TOL)


def test_same_node_transfer_takes_no_time(h100):
    p = Plan("self")
    p.transfer("noop", "m0.gpu0", "m0.gpu0", 123, "d2d")
    p.compute("k", "m0.gpu0", "forward", ["noop"], features={"seconds": 0.5})
    assert simulate(p, h100).makespan == 0.5


def test_host_compute_uses_the_machines_cores():
    # 2 cores, three 1 s host tasks: two run at once, the third waits: makespan 2 s.
    c = make_cluster(
        1,
        [("m0.host", "m0.rc", 50e9, 0.0), ("m0.rc", "m0.gpu0", 12e9, 0.0)],
        {"m0.rc": "root-complex"},
        cores=2,
    )
    p = Plan("cpu")
    for i in range(3):
        p.compute(f"s{i}", "m0.host", "sample", features={"seconds": 1.0})
    r = simulate(p, c)
    assert ends(r) == {"s0": 1.0, "s1": 1.0, "s2": 2.0}
    assert set(r.trace["engine"]) == {"cpu"}


def test_a_collective_shares_links_with_a_transfer():
    # 2 GPUs on a 100 GB/s NVSwitch, no latency. All-reduce of B = 200 MB: 2 steps of 100 MB.
    # Step 1 crosses gpu0->nvs->gpu1 and gpu1->nvs->gpu0; a 100 MB copy gpu0 -> gpu1 shares
    # gpu0->nvs and nvs->gpu1 with it: 50 GB/s each, so both end at 2 ms. Step 2 then runs
    # alone at 100 GB/s: 1 ms more, 3 ms.
    p = Plan("mixed")
    p.collective("ar", "allreduce", ["m0.gpu0", "m0.gpu1"], 200_000_000, "allreduce")
    p.transfer("copy", "m0.gpu0", "m0.gpu1", 100_000_000, "d2d")
    r = simulate(p, ring_cluster(2, 100e9, 0.0))
    e = r.trace.groupby("task")["end"].max().to_dict()
    assert e == pytest.approx({"ar": 0.003, "copy": 0.002}, **TOL)
