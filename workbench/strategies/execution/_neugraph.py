"""The parts of NeuGraph's streaming scheduler (paper 001, section 3) that are not plan building.

* :class:`GridStats`: per edge sub-chunk, its edges and its *useful* inner vertices (those
  with at least one edge in it), counted from the real graph; the union of the useful
  vertices over several outer chunks (a virtual GPU's chain);
* :func:`chain_groups`: the GPUs under one PCIe switch (NeuGraph's virtual GPUs, Fig. 7);
* :func:`host_to_gpu_path`: the narrowest link and the latency of the path host -> GPU;
* :func:`pipeline_makespan` and :func:`reorder_by_swaps`: the two-stage (copy, compute)
  pipeline model of a sequence of sub-chunks with a bounded number of buffers, and the
  swap-based search over sub-chunk orders that NeuGraph runs on profiled times (Fig. 6).

Pure functions of their inputs: no device, no time, no randomness.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from workbench.hardware.spec import ClusterSpec

# Pairs of sub-chunks whose swap one round of the search evaluates at most (all at once, in
# numpy). Above this the candidates are the pairs whose copy-minus-compute times differ most
# (a transfer-bound with a compute-bound sub-chunk: the paper's heuristic, Fig. 6).
MAX_SWAP_CANDIDATES = 4096


def sub_boundaries(boundaries: np.ndarray, k: int) -> np.ndarray:
    """``P * k + 1`` boundaries: chunk ``i`` split into ``k`` contiguous sub-ranges of
    ``floor(s * n_i / k)`` .. ``floor((s + 1) * n_i / k)`` (some empty when ``n_i < k``)."""
    b = np.asarray(boundaries, dtype=np.int64)
    sizes = np.diff(b)
    steps = (np.arange(k, dtype=np.int64)[None, :] * sizes[:, None]) // k  # (P, k) offsets
    out = (b[:-1, None] + steps).reshape(-1)
    return np.append(out, b[-1])


class GridStats:
    """Edges and useful inner vertices per (outer chunk, inner sub-chunk), for one orientation.

    An orientation names which endpoint of an edge is *outer* (the chunk the GPU keeps:
    the destination for the forward column walk, the source for the backward row walk)
    and which is *inner* (the streamed vertices). Sub-chunk ``q = i * k + s`` is part
    ``s`` of inner chunk ``i``.

    ``edges[o, q]``: edges from inner sub-chunk ``q`` to outer chunk ``o``;
    ``useful[o, q]``: distinct inner vertices of ``q`` with at least one such edge.
    """

    def __init__(
        self, outer_chunk: np.ndarray, inner_vertex: np.ndarray, boundaries: np.ndarray, k: int
    ) -> None:
        b = np.asarray(boundaries, dtype=np.int64)
        n = int(b[-1])
        p = b.size - 1
        self.num_chunks = p
        self.k = k
        self.sub_bounds = sub_boundaries(b, k)
        self.sub_sizes = np.diff(self.sub_bounds)
        key = np.asarray(outer_chunk, dtype=np.int64) * max(n, 1)
        key += np.asarray(inner_vertex, dtype=np.int64)
        key.sort()
        first = np.ones(key.size, dtype=bool)
        np.not_equal(key[1:], key[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        counts = np.diff(np.append(starts, key.size))
        pairs = key[starts]
        # (outer chunk, inner vertex) pairs with an edge, sorted by outer chunk then vertex
        self.pair_outer = pairs // max(n, 1)
        self.pair_inner = pairs % max(n, 1)
        self.pair_sub = self._sub_of(self.pair_inner)
        flat = self.pair_outer * (p * k) + self.pair_sub
        self.edges = np.bincount(flat, weights=counts, minlength=p * p * k).astype(np.int64).reshape(p, p * k)
        self.useful = np.bincount(flat, minlength=p * p * k).astype(np.int64).reshape(p, p * k)
        self._start = np.searchsorted(self.pair_outer, np.arange(p + 1))

    def _sub_of(self, vertices: np.ndarray) -> np.ndarray:
        # side="right": a vertex belongs to the last sub-range starting at or before it,
        # which skips the empty sub-ranges that share its start
        return np.searchsorted(self.sub_bounds, vertices, side="right") - 1

    def useful_vertices(self, outers: Sequence[int]) -> np.ndarray:
        """The inner vertices with an edge into *any* of ``outers``, sorted."""
        if len(outers) == 1:
            return self.pair_inner[self._start[outers[0]] : self._start[outers[0] + 1]]
        return np.unique(
            np.concatenate([self.pair_inner[self._start[o] : self._start[o + 1]] for o in outers])
        )

    def union_useful(self, outers: Sequence[int]) -> np.ndarray:
        """Per inner sub-chunk, the inner vertices with an edge into *any* of ``outers``."""
        if len(outers) == 1:
            return self.useful[outers[0]]
        vertices = np.unique(
            np.concatenate([self.pair_inner[self._start[o] : self._start[o + 1]] for o in outers])
        )
        return np.bincount(self._sub_of(vertices), minlength=self.num_chunks * self.k).astype(np.int64)


def chain_groups(cluster: ClusterSpec, workers: Sequence[str]) -> list[list[int]]:
    """Workers grouped by the PCIe switch their GPU hangs from (NeuGraph's virtual GPUs).

    A GPU's switch is the ``pcie-switch`` transit node it links to directly. Each group
    lists worker indices in order (the chain order); a GPU under no switch is alone.
    """
    index = {gpu: w for w, gpu in enumerate(workers)}
    parent: dict[int, str] = {}
    for link in cluster.links:
        for gpu, other in ((link.a, link.b), (link.b, link.a)):
            if gpu in index and cluster.transit.get(other) == "pcie-switch":
                parent.setdefault(index[gpu], other)
    groups: dict[str, list[int]] = {}
    alone: list[list[int]] = []
    for w in range(len(workers)):
        if w in parent:
            groups.setdefault(parent[w], []).append(w)
        else:
            alone.append([w])
    return sorted([*groups.values(), *alone])


def host_to_gpu_path(cluster: ClusterSpec, gpu: str) -> tuple[float, float]:
    """(bottleneck bandwidth in bytes/s, summed latency in s) of the fewest-hop path from the
    GPU's host memory to it (the widest such path), through transit nodes only: what a lone
    host -> GPU copy gets, as the simulator routes it."""
    host = cluster.machine_of(gpu).host_node
    adjacent: dict[str, list[tuple[str, float, float]]] = {}
    for link in cluster.links:
        adjacent.setdefault(link.a, []).append((link.b, link.bandwidth, link.latency))
        adjacent.setdefault(link.b, []).append((link.a, link.bandwidth, link.latency))
    best: dict[str, tuple[int, float, float]] = {host: (0, float("inf"), 0.0)}  # hops, width, latency
    queue = deque([host])
    while queue:
        node = queue.popleft()
        hops, width, latency = best[node]
        if node != host and node not in cluster.transit:
            continue  # data never passes through another memory
        for other, bandwidth, delay in adjacent.get(node, ()):
            candidate = (hops + 1, min(width, bandwidth), latency + delay)
            seen = best.get(other)
            if seen is None:
                best[other] = candidate
                queue.append(other)
            elif seen[0] == candidate[0] and candidate[1] > seen[1]:
                best[other] = candidate  # same hops, wider: the hardware's tie rule
    if gpu not in best:
        raise ValueError(f"cluster {cluster.name!r} has no path from {host} to {gpu}")
    return best[gpu][1], best[gpu][2]


def pipeline_makespan(transfer: np.ndarray, compute: np.ndarray, window: int) -> np.ndarray:
    """Makespan of copy-then-compute items in order, with ``window`` buffers, for each row.

    ``transfer`` and ``compute`` are ``(candidates, items)`` (or 1-D for one order): item
    ``t``'s copy starts when the copy engine is free and item ``t - window``'s compute has
    released its buffer; its compute starts when its copy is done and the GPU is free::

        copy_end[t]    = max(copy_end[t-1], compute_end[t-window]) + transfer[t]
        compute_end[t] = max(compute_end[t-1], copy_end[t]) + compute[t]
    """
    tr = np.atleast_2d(np.asarray(transfer, dtype=np.float64))
    cp = np.atleast_2d(np.asarray(compute, dtype=np.float64))
    rows, n = tr.shape
    done = np.zeros((rows, n), dtype=np.float64)
    copied = np.zeros(rows, dtype=np.float64)
    computed = np.zeros(rows, dtype=np.float64)
    for t in range(n):
        free = done[:, t - window] if t >= window else 0.0
        copied = np.maximum(copied, free) + tr[:, t]
        computed = np.maximum(computed, copied) + cp[:, t]
        done[:, t] = computed
    return computed


def double_buffered_makespan(transfer: np.ndarray, compute: np.ndarray) -> float:
    """:func:`pipeline_makespan` with two buffers, in closed form.

    With two buffers, copy ``t + 1`` starts exactly when compute ``t`` can (copy ``t`` done
    and compute ``t - 1`` done, which frees the buffer copy ``t + 1`` needs), so the start
    ``s_t`` of compute ``t`` obeys ``s_0 = transfer[0]`` and ``s_{t+1} = s_t +
    max(compute[t], transfer[t+1])``::

        makespan = transfer[0] + sum_t max(compute[t], transfer[t+1]) + compute[-1]
    """
    tr = np.asarray(transfer, dtype=np.float64)
    cp = np.asarray(compute, dtype=np.float64)
    if tr.size == 0:
        return 0.0
    return float(tr[0] + np.maximum(cp[:-1], tr[1:]).sum() + cp[-1])


def _swap_candidates(balance: np.ndarray, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position pairs ``(a, b)``, ``a < b``, of the same chunk whose swap one round evaluates;
    ``balance`` is copy minus compute time per position, ``chunk`` the chunk per position."""
    n = balance.size
    a, b = np.triu_indices(n, k=1)
    same = chunk[a] == chunk[b]
    a, b = a[same], b[same]
    if a.size <= MAX_SWAP_CANDIDATES:
        return a, b
    # The paper's heuristic: pair a sub-chunk whose copy is much shorter than its compute
    # with one that is the opposite case; the most lopsided pairs first.
    lopsided = np.argsort(-np.abs(balance[a] - balance[b]), kind="stable")[:MAX_SWAP_CANDIDATES]
    keep = np.sort(lopsided)
    return a[keep], b[keep]


def _swap_gains(
    tr: np.ndarray, cp: np.ndarray, order: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Change of :func:`double_buffered_makespan` when positions ``a`` and ``b`` swap, per pair.

    Only the terms that read positions ``a`` or ``b`` change: ``transfer[0]`` when ``a`` is 0,
    ``compute[-1]`` when ``b`` is last, and the pair terms ``t`` (positions ``t, t + 1``) for
    ``t`` in ``a - 1, a, b - 1, b`` (``b - 1`` is ``a`` itself when they are neighbours).
    """
    n = order.size
    first, last = order[0], order[-1]
    delta = np.where(a == 0, tr[order[b]] - tr[first], 0.0)
    delta += np.where(b == n - 1, cp[order[a]] - cp[last], 0.0)

    def at(position: np.ndarray) -> np.ndarray:
        return np.where(position == a, order[b], np.where(position == b, order[a], order[position]))

    for t, keep in ((a - 1, True), (a, True), (b - 1, b - 1 != a), (b, True)):
        valid = keep & (t >= 0) & (t <= n - 2)
        tc = np.clip(t, 0, max(n - 2, 0))
        old = np.maximum(cp[order[tc]], tr[order[tc + 1]])
        new = np.maximum(cp[at(tc)], tr[at(tc + 1)])
        delta += np.where(valid, new - old, 0.0)
    return delta


def reorder_by_swaps(
    transfer: Sequence[float],
    compute: Sequence[float],
    window: int,
    rounds: int,
    chunks: Sequence[int] | None = None,
) -> list[int]:
    """NeuGraph's pipeline reordering (section 3.2, Fig. 6): start from the given order and
    repeatedly make the swap of two sub-chunks *of the same chunk* (``chunks`` labels each
    item; None: all one chunk) that shortens the modelled makespan most, until no swap
    helps or ``rounds`` swaps were made.

    Swaps stay within a chunk as in the paper ("within the same chunk, another sub-chunk
    is an opposite case"); this also keeps the chunks in the order their data become
    ready (a layer's chunk ``i`` is written by the previous layer's column ``i``), which
    a model of one column's copies and computes alone cannot see.

    Returns the order as indices into the inputs. Two buffers use the closed form of
    :func:`double_buffered_makespan` (every candidate swap's change in O(1), all at once);
    with one buffer nothing overlaps and every order takes the same time, so the order is
    kept. The paper starts from a random order; this starts from the natural one (no
    randomness in a strategy), which is what a run without reordering uses, so reordering
    never makes the modelled makespan worse.
    """
    tr = np.asarray(transfer, dtype=np.float64)
    cp = np.asarray(compute, dtype=np.float64)
    label = np.zeros(tr.size, dtype=np.int64) if chunks is None else np.asarray(chunks, dtype=np.int64)
    order = np.arange(tr.size)
    if window == 1 or tr.size < 2:
        return order.tolist()
    if window != 2:
        raise ValueError(f"reordering models one or two buffers, got window={window}")
    span = double_buffered_makespan(tr, cp)
    for _ in range(rounds):
        a, b = _swap_candidates(tr[order] - cp[order], label[order])
        if a.size == 0:
            break
        gains = _swap_gains(tr, cp, order, a, b)
        pick = int(np.argmin(gains))  # the first of equal bests: deterministic
        if not gains[pick] < -1e-12 * span:
            break
        order[[a[pick], b[pick]]] = order[[b[pick], a[pick]]]
        span += float(gains[pick])
    return order.tolist()
