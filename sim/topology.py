"""Directed links and routes built from a :class:`~workbench.hardware.ClusterSpec`.

Every spec link is full duplex, so it becomes two directed links, each with the full
bandwidth: link ``i`` of the spec is directed link ``2*i`` (a -> b) and ``2*i + 1``
(b -> a). Routes go memory -> transit nodes -> memory: data never passes *through* a
host or GPU memory.

Route choice: the widest path (largest bottleneck bandwidth), ties broken by fewest
hops, then by node names (neighbours are explored in sorted order). Widest-then-
shortest is not a property plain Dijkstra preserves, so it is found in two passes:
a widest-path search gives the best bottleneck W, then a breadth-first search over
links of bandwidth >= W gives the fewest hops. Routes are cached per (src, dst).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

from workbench.errors import PlanError
from workbench.hardware.spec import ClusterSpec


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
        self.capacity: list[float] = []
        self.latency: list[float] = []
        self.link_names: list[str] = []
        # node -> sorted list of (neighbour, directed link id); parallel links keep the widest.
        adjacency: dict[str, dict[str, int]] = {n: {} for n in cluster.nodes()}
        for link in cluster.links:
            for a, b in ((link.a, link.b), (link.b, link.a)):
                lid = len(self.capacity)
                self.capacity.append(float(link.bandwidth))
                self.latency.append(float(link.latency))
                self.link_names.append(f"{a}->{b}")
                best = adjacency[a].get(b)
                if best is None or self.capacity[best] < link.bandwidth:
                    adjacency[a][b] = lid
        self.adjacency: dict[str, list[tuple[str, int]]] = {
            n: sorted(nbrs.items()) for n, nbrs in adjacency.items()
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
    def _passable(self, node: str, dst: str) -> bool:
        return node == dst or node not in self.memories

    def _widest(self, src: str, dst: str) -> float:
        best = {src: float("inf")}
        heap = [(-float("inf"), src)]
        while heap:
            neg, node = heapq.heappop(heap)
            width = -neg
            if width < best.get(node, -1.0):
                continue
            if node == dst:
                return width
            if node != src and node in self.memories:
                continue
            for nbr, lid in self.adjacency[node]:
                if not self._passable(nbr, dst):
                    continue
                w = min(width, self.capacity[lid])
                if w > best.get(nbr, -1.0):
                    best[nbr] = w
                    heapq.heappush(heap, (-w, nbr))
        return 0.0

    def _find(self, src: str, dst: str) -> Route | None:
        if src == dst:
            return Route(src, dst, (), (src,), 0.0, float("inf"))
        width = self._widest(src, dst)
        if width <= 0.0:
            return None
        parent: dict[str, tuple[str, int]] = {}
        seen = {src}
        queue = deque([src])
        while queue:
            node = queue.popleft()
            if node == dst:
                break
            if node != src and node in self.memories:
                continue
            for nbr, lid in self.adjacency[node]:
                if nbr in seen or self.capacity[lid] < width or not self._passable(nbr, dst):
                    continue
                seen.add(nbr)
                parent[nbr] = (node, lid)
                queue.append(nbr)
        links: list[int] = []
        nodes = [dst]
        node = dst
        while node != src:
            node, lid = parent[node]
            links.append(lid)
            nodes.append(node)
        links.reverse()
        nodes.reverse()
        return Route(
            src,
            dst,
            tuple(links),
            tuple(nodes),
            sum(self.latency[lid] for lid in links),
            min(self.capacity[lid] for lid in links),
        )
