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

The search, one per destination memory (and per rule), cached: a breadth-first search
from ``dst`` gives every node's hop distance to it (memories are entered but never
passed through), and, level by level as it goes, each node's best bottleneck to ``dst``
over its fewest-hop paths. A route from ``src`` then walks forward, taking at each step
the first neighbour (by name, then widest link) one hop closer to ``dst`` that keeps
``src``'s best bottleneck; each step is cached per (node, bottleneck), so routes to one
destination share their common tails. Since every link is full duplex with the same
kind and width both ways, this is the same route as a search from ``src`` would give.
Routes are cached per (src, dst).
"""

from __future__ import annotations

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
        # The same adjacency by node index, for the search.
        self._names: list[str] = list(adjacency)
        self._index: dict[str, int] = {n: i for i, n in enumerate(self._names)}
        self._is_memory: list[bool] = [n in self.memories for n in self._names]
        self._adj: list[list[tuple[int, int]]] = [
            [(self._index[nbr], lid) for nbr, lid in self.adjacency[n]] for n in self._names
        ]
        self._trees: dict[tuple[int, bool], _Tree] = {}
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

    def _tree(self, root: int, peer_only: bool) -> _Tree:
        """Fewest hops from every node to memory ``root``, and the best bottleneck over them."""
        key = (root, peer_only)
        tree = self._trees.get(key)
        if tree is not None:
            return tree
        n = len(self._names)
        dist = [-1] * n
        width = [0.0] * n
        dist[root] = 0
        width[root] = float("inf")
        queue = [root]
        memory, peer, capacity, adj = self._is_memory, self._peer, self.capacity, self._adj
        for node in queue:  # grows as it goes: a FIFO queue, so level by level
            if node != root and memory[node]:
                continue  # a memory is an end, never a transit node
            d = dist[node] + 1
            w_node = width[node]
            for nbr, lid in adj[node]:
                if peer_only and not peer[lid]:
                    continue
                # The link nbr -> node has lid's width (full duplex), so this is a
                # bottleneck from nbr to root through node.
                w = min(capacity[lid], w_node)
                if dist[nbr] < 0:
                    dist[nbr] = d
                    width[nbr] = w
                    queue.append(nbr)
                elif dist[nbr] == d and w > width[nbr]:
                    width[nbr] = w
        tree = self._trees[key] = _Tree(root, peer_only, dist, width, {})
        return tree

    def _next_hop(self, tree: _Tree, node: int, width: float) -> tuple[int, int]:
        """The first neighbour (by name, then widest link) one hop closer that keeps ``width``."""
        step = tree.next_hop.get((node, width))
        if step is None:
            closer = tree.dist[node] - 1
            step = next(
                (nbr, lid)
                for nbr, lid in self._adj[node]
                if tree.dist[nbr] == closer
                and (nbr == tree.root or not self._is_memory[nbr])
                and not (tree.peer_only and not self._peer[lid])
                and min(self.capacity[lid], tree.width[nbr]) >= width
            )
            tree.next_hop[(node, width)] = step
        return step

    def _shortest_widest(self, src: str, dst: str, peer_only: bool) -> Route | None:
        """Fewest hops, then the largest bottleneck, then the first node names."""
        tree = self._tree(self._index[dst], peer_only)
        node = self._index[src]
        if tree.dist[node] < 0:
            return None
        width = tree.width[node]
        nodes = [src]
        links: list[int] = []
        while node != tree.root:
            node, lid = self._next_hop(tree, node, width)
            nodes.append(self._names[node])
            links.append(lid)
        return Route(
            src,
            dst,
            tuple(links),
            tuple(nodes),
            sum(self.latency[lid] for lid in links),
            min(self.capacity[lid] for lid in links),
        )


@dataclass
class _Tree:
    """Fewest-hop paths to one memory: per node index its hops and best bottleneck to it."""

    root: int
    peer_only: bool
    dist: list[int]  # -1: no path
    width: list[float]
    next_hop: dict[tuple[int, float], tuple[int, int]]  # (node, bottleneck kept) -> (next node, link)
