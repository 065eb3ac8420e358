"""Directed links and routes built from a :class:`~workbench.hardware.ClusterSpec`.

Every spec link is full duplex, so it becomes two directed links, each with the full
bandwidth: link ``i`` of the spec is directed link ``2*i`` (a -> b) and ``2*i + 1``
(b -> a). Routes go memory -> transit nodes -> memory: data never passes *through* a
host or GPU memory.

Route choice follows what the hardware does, not what would be fastest:

1. Between two GPUs, a direct NVLink or NVSwitch path (only links of kind ``nvlink``
   or ``nvswitch``, through transit nodes only) is used whenever one exists, even when
   a PCIe path is wider or shorter. Among several such paths: fewest hops, then the
   widest (largest bottleneck bandwidth), then node names.
2. Otherwise, and for every route that involves a host memory, a NIC or the network:
   the fewest hops, ties broken by width, then by node names.

Why: CUDA peer access (``cudaMemcpyPeer``, NCCL's P2P transport) goes over NVLink
whenever the two GPUs are NVLink-connected, and over PCIe only when they are not; and a
PCIe fabric is a tree in which switches forward a packet by its address towards the
target, so the path is the tree's unique (shortest) path. No piece of hardware computes
a widest path, so the simulator must not either: with a 12 GB/s NVLink beside a 16 GB/s
PCIe path, a peer copy really runs at 12 GB/s.

Ties: among equal-hop paths the one with the largest bottleneck wins; among those, the
node sequence that is first in name order (compared position by position), and among
parallel links between the same two nodes, the widest, then the first in the spec.

Parallel links: two spec links between the same pair of nodes (say an NVLink and a
PCIe peer link) are both kept in :attr:`Topology.adjacency`, so the NVLink rule can
choose by kind; a route uses one of them and never both (they are not aggregated). To
model bonded links (several NVLink bricks between two GPUs), write one link with their
summed bandwidth.

The search: a breadth-first search from each end gives every node's hop distance to
``src`` and to ``dst``; the links on some shortest path form a layered DAG; a pass from
``dst`` backwards gives each node's best bottleneck to ``dst`` over that DAG, and a
walk from ``src`` takes, at each step, the first neighbour (by name) that keeps that
best bottleneck. Routes are cached per (src, dst).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from workbench.errors import PlanError
from workbench.hardware.spec import ClusterSpec

PEER_KINDS = frozenset({"nvlink", "nvswitch"})  # link kinds of a direct GPU-to-GPU path


@dataclass(frozen=True)
class Route:
    """A path between two memories: its directed link ids, nodes, latency and bottleneck."""

    src: str
    dst: str
    links: tuple[int, ...]
    nodes: tuple[str, ...]
    latency: float
    bottleneck: float

    @property
    def crosses_network(self) -> bool:
        return self.src.split(".", 1)[0] != self.dst.split(".", 1)[0]


class Topology:
    """Directed-link capacities and latencies, and cached routes between memories."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.memories: frozenset[str] = frozenset(cluster.memory_nodes())
        self._gpus: frozenset[str] = frozenset(cluster.gpu_nodes())
        self.capacity: list[float] = []
        self.latency: list[float] = []
        self.link_names: list[str] = []
        self._peer: list[bool] = []  # directed link id -> is it an NVLink/NVSwitch link
        # node -> [(neighbour, directed link id)], by neighbour name, then widest link
        # first, then link id. Every parallel link is kept (see the module docstring).
        adjacency: dict[str, list[tuple[str, int]]] = {n: [] for n in cluster.nodes()}
        for link in cluster.links:
            for a, b in ((link.a, link.b), (link.b, link.a)):
                lid = len(self.capacity)
                self.capacity.append(float(link.bandwidth))
                self.latency.append(float(link.latency))
                self.link_names.append(f"{a}->{b}")
                self._peer.append(link.kind in PEER_KINDS)
                adjacency[a].append((b, lid))
        self.adjacency: dict[str, list[tuple[str, int]]] = {
            n: sorted(nbrs, key=lambda e: (e[0], -self.capacity[e[1]], e[1])) for n, nbrs in adjacency.items()
        }
        self._routes: dict[tuple[str, str], Route | None] = {}

    def route(self, src: str, dst: str) -> Route | None:
        """The route from memory ``src`` to memory ``dst``, or None when none exists."""
        key = (src, dst)
        if key not in self._routes:
            self._routes[key] = self._find(src, dst)
        return self._routes[key]

    def route_or_raise(self, src: str, dst: str, where: str) -> Route:
        r = self.route(src, dst)
        if r is None:
            raise PlanError(f"{where}: the hardware has no route from {src} to {dst}")
        return r

    # ---- search --------------------------------------------------------------
    def _find(self, src: str, dst: str) -> Route | None:
        if src == dst:
            return Route(src, dst, (), (src,), 0.0, float("inf"))
        if src in self._gpus and dst in self._gpus:
            peer = self._shortest_widest(src, dst, peer_only=True)
            if peer is not None:
                return peer
        return self._shortest_widest(src, dst, peer_only=False)

    def _hops(self, start: str, end: str, peer_only: bool) -> dict[str, int]:
        """Hop distance from ``start`` to every node reachable without passing through a memory."""
        dist = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if node != start and node in self.memories:
                continue  # reached ``end`` (other memories are never entered)
            for nbr, lid in self.adjacency[node]:
                if nbr in dist or (peer_only and not self._peer[lid]):
                    continue
                if nbr in self.memories and nbr != end:
                    continue
                dist[nbr] = dist[node] + 1
                queue.append(nbr)
        return dist

    def _shortest_widest(self, src: str, dst: str, peer_only: bool) -> Route | None:
        """Fewest hops, then the largest bottleneck, then the first node names."""
        from_src = self._hops(src, dst, peer_only)
        if dst not in from_src:
            return None
        # Links are full duplex with the same kind and width both ways, so hops from
        # ``dst`` over the same adjacency are hops *to* ``dst``.
        to_dst = self._hops(dst, src, peer_only)
        hops = from_src[dst]

        def on_shortest(node: str, nbr: str, lid: int) -> bool:
            return (
                nbr in to_dst
                and from_src[node] + 1 + to_dst[nbr] == hops
                and not (peer_only and not self._peer[lid])
            )

        # Best bottleneck from each node on a shortest path to dst, layer by layer backwards.
        layers: dict[int, list[str]] = {}
        for node, d in from_src.items():
            if node in to_dst and d + to_dst[node] == hops:
                layers.setdefault(d, []).append(node)
        best = {dst: float("inf")}
        for d in range(hops - 1, -1, -1):
            for node in layers[d]:
                best[node] = max(
                    min(self.capacity[lid], best[nbr])
                    for nbr, lid in self.adjacency[node]
                    if nbr in best and on_shortest(node, nbr, lid)
                )
        width = best[src]
        # Walk forward taking the first neighbour (name, then widest link) that keeps ``width``.
        nodes = [src]
        links: list[int] = []
        node = src
        while node != dst:
            node, lid = next(
                (nbr, lid)
                for nbr, lid in self.adjacency[node]
                if nbr in best and on_shortest(node, nbr, lid) and min(self.capacity[lid], best[nbr]) >= width
            )
            nodes.append(node)
            links.append(lid)
        return Route(
            src,
            dst,
            tuple(links),
            tuple(nodes),
            sum(self.latency[lid] for lid in links),
            min(self.capacity[lid] for lid in links),
        )
