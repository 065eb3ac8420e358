"""Max-min fair sharing and route choice, on small hand-made topologies."""

from __future__ import annotations

import pytest

from sim import Topology, simulate
from sim.clock import SimClock
from sim.flows import FlowNetwork
from workbench.plan import Plan

from .conftest import make_cluster


def test_progressive_filling_textbook_case():
    # Link 0 (10 B/s) carries f1 and f2; link 1 (4 B/s) carries f2 and f3.
    # Link 1 saturates first: f2 = f3 = 2; f1 takes what link 0 has left: 8.
    clock = SimClock()
    net = FlowNetwork(clock, [10.0, 4.0])
    done: dict[str, float] = {}
    flows = {
        "f1": net.start((0,), 80.0, lambda: done.setdefault("f1", clock.now)),
        "f2": net.start((0, 1), 20.0, lambda: done.setdefault("f2", clock.now)),
        "f3": net.start((1,), 40.0, lambda: done.setdefault("f3", clock.now)),
    }
    clock.step()  # the one rebalance of this instant
    assert {k: f.rate for k, f in flows.items()} == {"f1": 8.0, "f2": 2.0, "f3": 2.0}
    clock.run_all()
    # f1: 80/8 = 10 s. f2: 20/2 = 10 s. f3: 20 B at 2 by t=10, then alone at 4: 5 s more.
    assert done == pytest.approx({"f1": 10.0, "f2": 10.0, "f3": 15.0}, rel=1e-12)


def test_flows_starting_together_rebalance_once():
    clock = SimClock()
    net = FlowNetwork(clock, [12.0])
    for _ in range(8):
        net.start((0,), 12.0, lambda: None)
    clock.run_all()
    assert clock.now == pytest.approx(8.0)
    assert net.rebalances == 2  # one when all start, one when all end together


TREE = [
    ("m0.host", "m0.rc", 50e9, 0.0),
    ("m0.rc", "sw", 12e9, 1e-6),
    ("sw", "m0.gpu0", 12e9, 1e-6),
    ("sw", "m0.gpu1", 12e9, 1e-6),
    ("m0.gpu0", "m0.gpu1", 25e9, 1e-6),  # a direct GPU-to-GPU link (kind "other" here)
    ("m0.rc", "m0.gpu1", 12e9, 1e-6),  # a second PCIe path: same width, fewer hops
]


def test_routes_take_fewest_hops():
    # Fewest hops, then width (see tests/sim/test_routes.py for NVLink and the cases where
    # that differs from the widest path; here the shortest path is also the widest).
    topo = Topology(make_cluster(2, TREE, {"m0.rc": "root-complex", "sw": "pcie-switch"}))
    assert topo.route("m0.gpu0", "m0.gpu1").nodes == ("m0.gpu0", "m0.gpu1")  # 1 hop, 25 GB/s
    assert topo.route("m0.host", "m0.gpu1").nodes == ("m0.host", "m0.rc", "m0.gpu1")  # 2 hops, not 3
    r = topo.route("m0.host", "m0.gpu0")
    assert r.nodes == ("m0.host", "m0.rc", "sw", "m0.gpu0")  # not through gpu1's memory
    assert (r.bottleneck, r.latency) == (12e9, 2e-6)
    assert topo.route("m0.gpu0", "m0.gpu0").links == ()


def test_routes_never_pass_through_a_memory():
    # gpu1 is reachable from host only through gpu0's memory: no route.
    c = make_cluster(
        2,
        [("m0.host", "m0.rc", 50e9, 0.0), ("m0.rc", "m0.gpu0", 12e9, 0.0), ("m0.gpu0", "m0.gpu1", 25e9, 0.0)],
        {"m0.rc": "root-complex"},
    )
    assert Topology(c).route("m0.host", "m0.gpu1") is None
    p = Plan("stuck")
    p.transfer("x", "m0.host", "m0.gpu1", 10, "h2d")
    from workbench.errors import PlanError

    with pytest.raises(PlanError, match=r"task 'x'.*no route from m0.host to m0.gpu1"):
        simulate(p, c)


def test_ties_are_broken_by_name():
    # Two equal switches between host and gpu0: the route goes through the first by name.
    c = make_cluster(
        1,
        [
            ("m0.host", "m0.rc", 50e9, 0.0),
            ("m0.rc", "swB", 12e9, 0.0),
            ("m0.rc", "swA", 12e9, 0.0),
            ("swB", "m0.gpu0", 12e9, 0.0),
            ("swA", "m0.gpu0", 12e9, 0.0),
        ],
        {"m0.rc": "root-complex", "swA": "pcie-switch", "swB": "pcie-switch"},
    )
    assert Topology(c).route("m0.host", "m0.gpu0").nodes == ("m0.host", "m0.rc", "swA", "m0.gpu0")


def test_network_transfers_cross_machines(repo):
    from workbench.hardware import load_hardware

    c = load_hardware("roc-4x4p100-nvlink-ib")
    r = Topology(c).route("m0.gpu0", "m2.gpu3")
    assert "net" in r.nodes and r.crosses_network and r.bottleneck == 12e9


def test_one_copy_engine_serves_both_directions():
    # copy_engines = 1: an H2D and a D2H copy of the same GPU serialise (1 ms each, no latency).
    from workbench.hardware.spec import GPUSpec

    from .conftest import GiB

    one = GPUSpec("OneEngine", 16 * GiB, 10e12, 500e9, copy_engines=1)
    c = make_cluster(
        1,
        [("m0.host", "m0.rc", 50e9, 0.0), ("m0.rc", "m0.gpu0", 12e9, 0.0)],
        {"m0.rc": "root-complex"},
        gpu=one,
    )
    p = Plan("one-engine")
    p.transfer("in", "m0.host", "m0.gpu0", 12_000_000, "h2d")
    p.transfer("out", "m0.gpu0", "m0.host", 12_000_000, "d2h")
    r = simulate(p, c)
    assert dict(zip(r.trace["task"], r.trace["end"], strict=True)) == pytest.approx(
        {"in": 0.001, "out": 0.002}
    )


def test_the_clock_still_runs_simpy_processes():
    clock = SimClock()
    seen = []

    def proc(env):
        yield env.timeout(2.0)
        seen.append(("process", env.now))

    clock.process(proc(clock))
    clock.call_later(1.0, lambda: seen.append(("callback", clock.now)))
    clock.call_later(3.0, lambda: seen.append(("callback", clock.now)))
    clock.run_all()
    assert seen == [("callback", 1.0), ("process", 2.0), ("callback", 3.0)]
