"""``song-jiang``: Song & Jiang's cost-model placement (paper 002, "Performance Model", Rule 1, Algorithm 1).

**Cost model** (slide "Performance Model"). Reading one vertex's features costs
``C_cpu`` from host memory and ``C_gpu`` from another GPU. With ``f`` bytes of
features per vertex we take, from a :class:`~workbench.hardware.spec.ClusterSpec`,

    C_cpu(i)   = f / B_host(i)       B_host(i):   bottleneck bandwidth host -> GPU i
    C_gpu(i,j) = f / B_peer(i,j)     B_peer(i,j): bottleneck bandwidth GPU j -> GPU i

where a bottleneck bandwidth is that of the widest route through switches (routes
never pass through a memory). ``f`` cancels in every comparison. GPUs ``i`` and ``j``
read each other when ``C_gpu(i,j) < C_cpu`` of both, i.e. ``B_peer > B_host``; the
connected components of that relation are the peer groups (a whole NVSwitch box is
one group, NVLink-bridged pairs are groups of two: the slides' "(2+2)GPU" setups).

* **Case 1, ``C_gpu >= C_cpu`` (a group of one GPU): Rule 1.** Minimizing
  ``C_cpu E|S_i \\ B_i|`` means maximizing ``E|S_i ∩ B_i|``: every GPU caches the
  ``BSIZE`` vertices with the highest sampling probability.
* **Case 2, ``C_gpu < C_cpu``: Algorithm 1** within each peer group, trading a
  duplicate of ``old`` on one GPU for a new vertex when
  ``p(new) > (C_gpu / C_cpu) p(old)`` (slide "Tradeoff"); ``alpha`` defaults to
  ``C_gpu / C_cpu = B_host / B_peer`` (the largest over the group's pairs) and can be
  set explicitly.

Without a cluster: with ``alpha`` set, Algorithm 1 over all GPUs as one group;
without, Rule 1. ``mode`` forces a case.

**How we read Algorithm 1.** The slides' pseudo-code is garbled in its text
extraction: with its loop ``for i = 0 .. min(N, n*BSIZE) - BSIZE - 1``, its skip
``if i mod n == n - 1: continue`` and ``new_node = V[i + BSIZE]``, two GPUs and
BSIZE 2 would make one replacement, not the slide's two. We implement its intent,
which is consistent with the loop bound and the worked example:

1. ``V`` = vertices by probability, descending (ties by vertex id). Every GPU
   starts with ``V[0 .. BSIZE-1]`` in slots ``0 .. BSIZE-1``; ``p_sum = 0``.
2. Replacements are counted by ``j = 0, 1, ...``; there are at most
   ``min(N, n*BSIZE) - BSIZE`` of them (the loop bound: new vertices run out at
   ``N``, duplicates run out after ``(n-1)*BSIZE``). Replacement ``j`` brings in
   ``new = V[BSIZE + j]``.
3. Replacements come in rounds of ``n - 1``; round ``r = j // (n-1)`` replaces the
   duplicate ``old = V[BSIZE - 1 - r]`` (line 16, the least probable duplicate
   first) on ``n - 1`` GPUs. The "do not change the last device in each round" line
   is what keeps one copy of ``old``: at the start of each round the GPUs are
   sorted by ``p_sum`` ascending (stable, lower index first on ties) and the first
   ``n - 1`` of them take the round's replacements in that order; the last one keeps
   its copy.
4. A replacement happens only while ``p(new) > alpha * p(old)``; the first failure
   ends the algorithm (``new`` only gets less probable and ``old`` more, so no later
   replacement could pass). The GPU taking it adds ``p(new)`` to its ``p_sum``.

The slide's worked example (GPU0 holding 1 and 3, GPU1 holding 4 and 2) is exactly
what this reading produces (``tests/strategies/placement/test_song_jiang.py`` writes
out the steps). Its annotation "p_4 > 0.3 * p_2" names vertex 2, but 4 displaces
the second copy of 1 (2 has a single copy left by then); since ``p(1) >= p(2)`` our
check is the stricter one, and both pass in the example. Its ``p_sum`` figures are
unreadable in the extraction.

**Sampling probability.** ``p`` is the request's ``access_probability`` or, when it
carries none, :func:`~workbench.strategies.placement.probability.request_probability`
of its access model: by default the fanout-aware analytic estimate for a sampler with
fanouts (two sparse matrix-vector products per layer; ~0.2 s on products-like
against ~4 s for the exact two-hop count), exact for full neighborhoods, pre-sampled
when ``AccessModel(estimator="presample")`` asks.

Run time: one sort, then ``O(N)`` vectorized work plus a numba loop over at most
``BSIZE`` rounds that sorts ``n`` sums each (``O(BSIZE n^2)``, ``n`` the GPUs in a
group).

**Home.** Rule 1 replicates, so a vertex's home is host memory. Under Algorithm 1 a
vertex's home is the lowest-numbered GPU holding it (the kept copy of a replaced
duplicate, the only copy of a new vertex); GPUs of other peer groups read their
own group's copy.
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

from workbench.errors import ConfigError
from workbench.hardware.spec import ClusterSpec
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import (
    Placement,
    PlacementRequest,
    PlacementResult,
    descending_order,
)
from workbench.strategies.placement.probability import request_probability

MODES = ("auto", "rule1", "algorithm1")


# ---- cost model from the cluster ----------------------------------------------------
def _widest_bandwidths(cluster: ClusterSpec, source: str) -> dict[str, float]:
    """Bottleneck bandwidth of the widest route from ``source`` to every memory node (max-min Dijkstra)."""
    adjacency: dict[str, list[tuple[str, float]]] = {}
    for link in cluster.links:
        adjacency.setdefault(link.a, []).append((link.b, link.bandwidth))
        adjacency.setdefault(link.b, []).append((link.a, link.bandwidth))
    transit = set(cluster.transit)
    best: dict[str, float] = {source: float("inf")}
    heap: list[tuple[float, str]] = [(-float("inf"), source)]
    done: set[str] = set()
    while heap:
        neg_bw, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        # Data crosses switches, never another memory: only the source and transit nodes forward.
        if node != source and node not in transit:
            continue
        for nxt, bw in adjacency.get(node, []):
            width = min(-neg_bw, bw)
            if width > best.get(nxt, 0.0):
                best[nxt] = width
                heapq.heappush(heap, (-width, nxt))
    return best


def interconnect_bandwidths(cluster: ClusterSpec, num_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """(``B_host[i]``, ``B_peer[i, j]``) for the first ``num_gpus`` GPUs of ``cluster``, bytes/s (0 if unreachable)."""
    gpus = cluster.gpu_nodes()[:num_gpus]
    host = np.zeros(num_gpus)
    peer = np.zeros((num_gpus, num_gpus))
    for i, g in enumerate(gpus):
        reach = _widest_bandwidths(cluster, g)
        host[i] = reach.get(cluster.machine_of(g).host_node, 0.0)
        for j, h in enumerate(gpus):
            if i != j:
                peer[i, j] = reach.get(h, 0.0)
    return host, peer


def peer_groups_and_alpha(cluster: ClusterSpec, num_gpus: int) -> tuple[list[list[int]], list[float]]:
    """Groups of GPUs joined by links faster than their host links, and each group's ``C_gpu / C_cpu``."""
    host, peer = interconnect_bandwidths(cluster, num_gpus)
    fast = (peer > host[:, None]) & (peer > host[None, :])
    group_of = list(range(num_gpus))

    def root(x: int) -> int:
        while group_of[x] != x:
            group_of[x] = group_of[group_of[x]]
            x = group_of[x]
        return x

    for i in range(num_gpus):
        for j in range(i + 1, num_gpus):
            if fast[i, j]:
                group_of[root(j)] = root(i)
    members: dict[int, list[int]] = {}
    for i in range(num_gpus):
        members.setdefault(root(i), []).append(i)
    groups = sorted(members.values())
    alphas = []
    for grp in groups:
        ratios = [host[i] / peer[i, j] for i in grp for j in grp if i != j and fast[i, j]]
        alphas.append(float(max(ratios)) if ratios else 1.0)
    return groups, alphas


# ---- Algorithm 1 ------------------------------------------------------------------
@numba.njit(cache=True)
def _assign_replacements(new_prob: np.ndarray, num_gpus: int) -> np.ndarray:
    """Device of each replacement: per round of ``num_gpus - 1``, GPUs by ``p_sum`` ascending (stable)."""
    count = new_prob.shape[0]
    device = np.empty(count, dtype=np.int64)
    p_sum = np.zeros(num_gpus)
    order = np.empty(num_gpus, dtype=np.int64)
    j = 0
    while j < count:
        for d in range(num_gpus):
            order[d] = d
        # Insertion sort: stable, and n is a handful of GPUs.
        for a in range(1, num_gpus):
            x = order[a]
            b = a - 1
            while b >= 0 and p_sum[order[b]] > p_sum[x]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        for k in range(num_gpus - 1):
            if j >= count:
                break
            d = order[k]
            device[j] = d
            p_sum[d] += new_prob[j]
            j += 1
    return device


def algorithm1(
    sorted_vertices: np.ndarray, prob: np.ndarray, num_gpus: int, bsize: int, alpha: float
) -> np.ndarray:
    """Song & Jiang's Algorithm 1 as read above: the ``(num_gpus, bsize)`` slot table, slot by slot.

    ``sorted_vertices`` are the vertices by probability, descending; ``prob`` is indexed by vertex id.
    """
    v = np.asarray(sorted_vertices, dtype=np.int64)
    bsize = min(bsize, v.shape[0])
    slots = np.tile(v[:bsize], (num_gpus, 1))
    if num_gpus < 2 or bsize == 0:
        return slots
    most = min(v.shape[0], num_gpus * bsize) - bsize
    j = np.arange(most, dtype=np.int64)
    old_index = bsize - 1 - j // (num_gpus - 1)
    new_vertex = v[bsize + j]
    beneficial = prob[new_vertex] > alpha * prob[v[old_index]]
    count = int(np.argmin(beneficial)) if not beneficial.all() else most
    device = _assign_replacements(np.ascontiguousarray(prob[new_vertex[:count]], dtype=np.float64), num_gpus)
    slots[device, old_index[:count]] = new_vertex[:count]
    return slots


@PLACEMENTS.register("song-jiang")
class SongJiangPlacement(Placement):
    """Song & Jiang's cost-model placement: Rule 1 when peers are slow, Algorithm 1 (alpha) across fast peers."""

    uses_access_probability = True

    def __init__(self, alpha: float | None = None, mode: str = "auto") -> None:
        if alpha is not None and not (0.0 < float(alpha) <= 1.0):
            raise ConfigError(f"song-jiang placement: alpha must lie in (0, 1], got {alpha}")
        if mode not in MODES:
            raise ConfigError(f"song-jiang placement: mode {mode!r}; allowed: {', '.join(MODES)}")
        self.alpha = None if alpha is None else float(alpha)
        self.mode = mode

    def plan_groups(self, request: PlacementRequest) -> list[tuple[list[int], float | None]]:
        """Peer groups with the alpha each uses (None: Rule 1 for that group)."""
        n = request.num_gpus
        if self.mode == "rule1":
            return [([g], None) for g in range(n)]
        if request.cluster is not None:
            groups, alphas = peer_groups_and_alpha(request.cluster, n)
            if self.mode == "algorithm1" and len(groups) == n and n > 1:
                raise ConfigError(
                    f"song-jiang placement: mode=algorithm1 but cluster {request.cluster.name!r} has no GPU "
                    "link faster than its host link"
                )
            plans: list[tuple[list[int], float | None]] = []
            for members, cluster_alpha in zip(groups, alphas, strict=True):
                if len(members) == 1:
                    plans.append((members, None))
                else:
                    plans.append((members, self.alpha if self.alpha is not None else cluster_alpha))
            return plans
        if self.alpha is not None:
            return [(list(range(n)), self.alpha)]
        if self.mode == "algorithm1":
            raise ConfigError("song-jiang placement: mode=algorithm1 needs alpha or a cluster (--hardware)")
        return [([g], None) for g in range(n)]

    def place(self, request: PlacementRequest) -> PlacementResult:
        n, cap, num_nodes = request.num_gpus, request.capacity, request.num_nodes
        prob = request_probability(request)
        order = descending_order(prob)
        plans = self.plan_groups(request)
        if all(alpha is None for _, alpha in plans):
            # Rule 1 everywhere: every GPU holds the top-capacity vertices; replicas serve only themselves.
            top = np.sort(order[:cap])
            return PlacementResult(
                gpu_vertices=[top.copy() for _ in range(n)],
                home=np.full(num_nodes, -1, dtype=np.int64),
                peer_groups=tuple((g,) for g in range(n)),
            )
        gpu_vertices: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * n
        for members, alpha in plans:
            if alpha is None:
                slots = np.tile(order[:cap], (len(members), 1))
            else:
                slots = algorithm1(order, prob, len(members), cap, alpha)
            for row, g in enumerate(members):
                gpu_vertices[g] = np.sort(slots[row])
        # Home: the lowest-numbered GPU of an Algorithm-1 group that holds the vertex;
        # what only Rule-1 (single-GPU) groups hold is read by everyone else from host.
        home = np.full(num_nodes, -1, dtype=np.int64)
        distributing = sorted(g for members, alpha in plans if alpha is not None for g in members)
        for g in reversed(distributing):
            home[gpu_vertices[g]] = g
        groups = tuple(tuple(members) for members, _ in plans)
        return PlacementResult(gpu_vertices=gpu_vertices, home=home, peer_groups=groups)
