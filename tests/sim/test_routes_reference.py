"""Every route equals what the original per-pair search chose (issue 30 item 3).

``sim.topology`` finds routes from one cached search per destination memory. The
functions below are the implementation it replaced, copied verbatim in substance (two
breadth-first searches per pair, then a width pass over the shortest-path DAG and a
walk by names): a test oracle only. Every ordered pair of memories on every preset
small enough for the slow oracle, and on small generated fat-tree and rail clusters
(leaves of a few ports so that routes cross the spine and tie on hops), must get the
same nodes, links, latency and bottleneck.
"""

from __future__ import annotations

from collections import deque

import pytest

from sim.topology import PEER_KINDS, Topology
from workbench.hardware import PRESETS, load_hardware
from workbench.hardware.generate import generate_cluster
from workbench.hardware.spec import ClusterSpec

MAX_MEMORIES = 40  # the oracle's cost grows as memories^2 x nodes


def reference_route(topo: Topology, src: str, dst: str) -> tuple | None:
    """(links, nodes, latency, bottleneck) as the original ``Topology._find`` chose them."""
    peer = [link.kind in PEER_KINDS for link in topo.cluster.links for _ in range(2)]
    if src == dst:
        return ((), (src,), 0.0, float("inf"))
    gpus = set(topo.cluster.gpu_nodes())
    if src in gpus and dst in gpus:
        r = _shortest_widest(topo, peer, src, dst, peer_only=True)
        if r is not None:
            return r
    return _shortest_widest(topo, peer, src, dst, peer_only=False)


def _hops(topo: Topology, peer: list[bool], start: str, end: str, peer_only: bool) -> dict[str, int]:
    dist = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node != start and node in topo.memories:
            continue
        for nbr, lid in topo.adjacency[node]:
            if nbr in dist or (peer_only and not peer[lid]):
                continue
            if nbr in topo.memories and nbr != end:
                continue
            dist[nbr] = dist[node] + 1
            queue.append(nbr)
    return dist


def _shortest_widest(topo: Topology, peer: list[bool], src: str, dst: str, peer_only: bool) -> tuple | None:
    from_src = _hops(topo, peer, src, dst, peer_only)
    if dst not in from_src:
        return None
    to_dst = _hops(topo, peer, dst, src, peer_only)
    hops = from_src[dst]

    def on_shortest(node: str, nbr: str, lid: int) -> bool:
        return (
            nbr in to_dst and from_src[node] + 1 + to_dst[nbr] == hops and not (peer_only and not peer[lid])
        )

    layers: dict[int, list[str]] = {}
    for node, d in from_src.items():
        if node in to_dst and d + to_dst[node] == hops:
            layers.setdefault(d, []).append(node)
    best = {dst: float("inf")}
    for d in range(hops - 1, -1, -1):
        for node in layers[d]:
            best[node] = max(
                min(topo.capacity[lid], best[nbr])
                for nbr, lid in topo.adjacency[node]
                if nbr in best and on_shortest(node, nbr, lid)
            )
    width = best[src]
    nodes = [src]
    links: list[int] = []
    node = src
    while node != dst:
        node, lid = next(
            (nbr, lid)
            for nbr, lid in topo.adjacency[node]
            if nbr in best and on_shortest(node, nbr, lid) and min(topo.capacity[lid], best[nbr]) >= width
        )
        nodes.append(node)
        links.append(lid)
    return (
        tuple(links),
        tuple(nodes),
        sum(topo.latency[lid] for lid in links),
        min(topo.capacity[lid] for lid in links),
    )


def _small_presets() -> list[str]:
    return [name for name in PRESETS if len(load_hardware(name).memory_nodes()) <= MAX_MEMORIES]


GENERATED = {
    "fat-tree 2x8 radix 64": lambda: generate_cluster(2, 8, "fat-tree"),
    "fat-tree 4x4 radix 8": lambda: generate_cluster(4, 4, "fat-tree", leaf_radix=8),
    "fat-tree 4x8 radix 8": lambda: generate_cluster(4, 8, "fat-tree", leaf_radix=8),
    "fat-tree 3x8 radix 8 3:1": lambda: generate_cluster(3, 8, "fat-tree", leaf_radix=8, oversubscription=3),
    "fat-tree 4x2 radix 6 h100": lambda: generate_cluster(4, 2, "fat-tree", "h100", leaf_radix=6),
    "rail 2x8": lambda: generate_cluster(2, 8, "rail", "h100"),
    "rail 4x4 2:1": lambda: generate_cluster(4, 4, "rail", oversubscription=2),
}


def _assert_same_routes(cluster: ClusterSpec) -> int:
    topo = Topology(cluster)
    oracle = Topology(cluster)  # fresh: shares no cache with ``topo``
    memories = cluster.memory_nodes()
    count = 0
    for src in memories:
        for dst in memories:
            got = topo.route(src, dst)
            want = reference_route(oracle, src, dst)
            have = None if got is None else (got.links, got.nodes, got.latency, got.bottleneck)
            assert have == want, f"{cluster.name}: {src} -> {dst}"
            count += got is not None and src != dst
    return count


def test_the_oracle_covers_the_small_presets():
    names = _small_presets()
    assert "v100x8-nvswitch" in names and "perlmutter-4xa100-slingshot" in names
    assert "dgx-h100-32x8-rail" not in names  # too big for the oracle, not for routes


@pytest.mark.parametrize("name", _small_presets())
def test_preset_routes_match_the_reference(name: str):
    assert _assert_same_routes(load_hardware(name)) > 0


@pytest.mark.parametrize("label", list(GENERATED))
def test_generated_routes_match_the_reference(label: str):
    cluster = GENERATED[label]()
    n = len(cluster.memory_nodes())
    assert _assert_same_routes(cluster) == n * (n - 1)  # every pair has a route
