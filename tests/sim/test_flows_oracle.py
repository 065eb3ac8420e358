"""``sim.flows`` against the Python flow network it replaced (``flows_reference``), bit for bit.

Flows over link lists (repeats included, as collective steps list a link once per chunk),
started at given instants and from other flows' completions, so components merge and
split, several flows start and end at one instant, and links saturate in every order.
Every flow must end at the same time, to the bit, and the callbacks must run in the same
order. Capacities are round (exact ties between links) or thirds and tenths (ties that
rounding breaks by an ulp, where progressive filling must still pick what a scan of the
links in order picks). The golden traces (``test_golden_traces.py``, written with the Python
network) hold bit for bit too; their ``hopgnn-all-sage-products`` case is the one that
catches a progressive filling that misses an ulp-shrunk share. Both networks re-rate a
component in the order its flows started (since 2026-11-27; before, in the order of a
breadth-first search from the changed links): three golden traces were rewritten then,
their task times moved by at most 2.1e-17 s and their makespans not at all.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim.flows
from sim.clock import SimClock
from sim.flows import FlowNetwork

from . import flows_reference

ROUND = [1.0, 2.0, 3.0, 5.0, 10.0]
THIRDS = [1 / 3, 2 / 3, 0.1, 0.7, 1.1, 1.3, 2.9]

Spec = tuple[tuple[int, ...], float]  # a flow's links and bytes


def _random_flows(rng: np.random.Generator, n_links: int, n_flows: int) -> list[Spec]:
    specs = []
    for _ in range(n_flows):
        links = tuple(int(x) for x in rng.integers(0, n_links, size=int(rng.integers(1, 9))))
        specs.append((links, float(rng.choice([1.0, 4.0, 6.0, 10.0, 30.0]) * rng.integers(1, 4))))
    return specs


def _all_to_all_flows(rng: np.random.Generator, hosts: int, n_flows: int) -> list[Spec]:
    # Links 0..h-1: each host's uplink; h..2h-1: downlinks; 2h..2h+3: four core links. A
    # flow between two hosts crosses the sender's uplink, a core link and the receiver's
    # downlink: every flow is connected to every other, as in a fat-tree all-to-all.
    specs = []
    for _ in range(n_flows):
        a, b = (int(x) for x in rng.choice(hosts, size=2, replace=False))
        core = 2 * hosts + int(rng.integers(0, 4))
        specs.append(((a, core, hosts + b), float(rng.integers(1, 50))))
    return specs


def _tree_flows(rng: np.random.Generator, hosts: int, n_flows: int) -> tuple[list[Spec], list[float]]:
    # A fat tree's layers, as the route of a GPU-to-GPU copy across machines crosses them:
    # each host's injection link, NIC uplink, its half's core link, the receiver's NIC
    # downlink and ejection link. NIC links are a little wider than the injection links
    # (some by less than the slack, some exactly as wide, some narrower). Each core link is
    # as wide as the narrower of its half's two uplink links, summed, times 1.05 (it can be
    # left out once every host of the half has sent) or 0.6 (it binds: leaving it out
    # would change rates). About one flow in 25, from host 0, is a collective step that
    # lists its links twice (they are never left out after).
    inject = rng.choice(THIRDS, size=hosts)
    nic_factor = rng.choice([1.04, 1.0, 1.0 + 1e-12, 0.9], size=hosts)
    feeds = np.minimum(inject, inject * nic_factor)
    half = hosts // 2
    cores = [1.05 * feeds[:half].sum(), 0.6 * feeds[half:].sum()]
    capacity = [*inject, *(inject * nic_factor), *cores, *(inject * nic_factor[::-1]), *inject[::-1]]
    up, core, down, eject = hosts, 2 * hosts, 2 * hosts + 2, 3 * hosts + 2
    specs = []
    for _ in range(n_flows):
        a, b = (int(x) for x in rng.choice(hosts, size=2, replace=False))
        links = (a, up + a, core + int(a >= half), down + b, eject + b)
        if a == 0 and rng.random() < 0.5:
            links = links + links
        specs.append((links, float(rng.integers(1, 50))))
    return specs, [float(c) for c in capacity]


def _run(
    network_class: type, seed: int, specs: list[Spec], widths: list[float], chained: float,
    capacity: list[float] | None = None,
):  # fmt: skip
    rng = np.random.default_rng(seed)
    clock = SimClock()
    n_links = 1 + max(lid for links, _ in specs for lid in links)
    net = network_class(clock, capacity or rng.choice(widths, size=n_links).tolist())
    ended: list[tuple[int, float]] = []
    followers: dict[int, list[int]] = {}

    def start(f: int) -> None:
        links, nbytes = specs[f]
        net.start(links, nbytes, lambda: done(f))

    def done(f: int) -> None:
        ended.append((f, clock.now))
        for g in followers.get(f, []):
            start(g)

    for f in range(len(specs)):
        if f and rng.random() < chained:
            followers.setdefault(int(rng.integers(0, f)), []).append(f)
        else:
            clock.call_at(float(rng.integers(0, 20)), lambda f=f: start(f))
    clock.run_all()
    assert len(ended) == len(specs)
    return ended, net


def _same(
    seed: int, specs: list[Spec], widths: list[float], chained: float, capacity: list[float] | None = None
) -> FlowNetwork:
    ended, net = _run(FlowNetwork, seed, specs, widths, chained, capacity)
    assert ended == _run(flows_reference.FlowNetwork, seed, specs, widths, chained, capacity)[0]
    return net


@pytest.mark.parametrize("widths", [ROUND, THIRDS], ids=["round", "thirds"])
@pytest.mark.parametrize("seed", range(12))
def test_same_completions_as_the_python_network(seed, widths):
    specs = _random_flows(np.random.default_rng(seed), 3 + seed % 6, 40 + 10 * seed)
    _same(seed, specs, widths, 0.4)


@pytest.mark.parametrize("seed", range(4))
def test_same_completions_in_one_large_component(seed):
    specs = _all_to_all_flows(np.random.default_rng(seed), 16, 600)
    _same(seed, specs, THIRDS, 0.2)


@pytest.mark.parametrize("seed", range(6))
def test_same_completions_with_links_left_out_of_filling(seed):
    specs, capacity = _tree_flows(np.random.default_rng(seed), 12, 400)
    net = _same(seed, specs, THIRDS, 0.3, capacity)
    # Not vacuous: links were left out (and some put back) while flows were in progress.
    assert net._binding.left_out > 0
    assert net._binding.put_back > 0


def test_same_completions_through_compaction(monkeypatch):
    # Many more flows than the slot arrays keep before squeezing ended ones out, mostly
    # chained, so that flows are in progress while older slots have ended.
    monkeypatch.setattr(sim.flows, "COMPACT_MIN", 16)
    net = _same(99, _random_flows(np.random.default_rng(99), 12, 1500), ROUND, 0.9)
    assert net._used < 1500  # it compacted
