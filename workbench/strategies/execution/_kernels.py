"""Compiled loops of plan building: splitting a read by source, cutting trees out of a minibatch.

HopGNN's plan cuts every root's tree out of its minibatch's blocks (products-like: 55
million edges an epoch). Cut one tree at a time, each cut reads scattered edge ranges
(memory latency, not bandwidth: ~12 ns an edge) and pays a sort per layer; cut as bits of
one mask per vertex, every tree of a minibatch comes out of one sequential pass per layer.
Each kernel has one caller in :mod:`.base` or :mod:`.micrographs`, which documents the rule.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from workbench.strategies.placement.base import cached_bit


@njit(cache=True)
def count_codes(code: np.ndarray, num_codes: int) -> np.ndarray:
    """How many of ``code`` (each in ``[0, num_codes)``) hold each value."""
    # Four counters per code: runs of one code would otherwise wait on the same counter.
    lanes = np.zeros((4, num_codes), dtype=np.int64)
    for i in range(code.shape[0]):
        lanes[i & 3, code[i]] += 1
    return lanes.sum(axis=0)


@njit(cache=True)
def split_by_code(vertices: np.ndarray, code: np.ndarray, num_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """``vertices`` grouped by their ``code`` (aligned with them; a stable counting sort), and the
    size of each group."""
    n = vertices.shape[0]
    counts = count_codes(code, num_codes)
    at = np.zeros(num_codes, dtype=np.int64)
    for c in range(1, num_codes):
        at[c] = at[c - 1] + counts[c - 1]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = code[i]
        out[at[c]] = vertices[i]
        at[c] += 1
    return out, counts


@njit(cache=True)
def read_codes(
    vertices: np.ndarray,
    vertex_machine: np.ndarray,
    host_base: int,
    home: np.ndarray,
    peer_code: np.ndarray,
    bits: np.ndarray,
) -> np.ndarray:
    """Each vertex's read code (int16): 0 where ``bits`` hold it, else ``peer_code[home + 1]``
    where that is not -1, else ``host_base + vertex_machine``. No ``home`` (empty): the last
    only."""
    n = vertices.shape[0]
    out = np.empty(n, dtype=np.int16)
    if home.shape[0] == 0:
        for i in range(n):
            out[i] = host_base + vertex_machine[vertices[i]]
        return out
    # Written without branches on the vertex (selects instead): whether a vertex is cached or
    # has a peer home is as good as random, and mispredicted branches took half the time.
    for i in range(n):
        v = vertices[i]
        code = host_base + vertex_machine[v]
        peer = peer_code[home[v] + 1]
        code = peer if peer >= 0 else code
        out[i] = 0 if cached_bit(bits, v) else code
    return out


@njit(cache=True)
def distinct_ids(values: np.ndarray, bound: int) -> np.ndarray:
    """The distinct ``values`` (each in ``[0, bound)``), sorted: marked as bits of 64-bit words
    (``bound / 8`` bytes, cache-resident for a million vertices) and read back word by word."""
    words = np.zeros((bound + 63) >> 6, dtype=np.uint64)
    one = np.uint64(1)
    for v in values:
        words[v >> 6] |= one << np.uint64(v & 63)
    out = np.empty(min(values.shape[0], bound), dtype=np.int64)  # at most this many are distinct
    k = 0
    for i in range(words.shape[0]):
        w = words[i]
        while w:
            out[k] = (i << 6) + trailing_zeros(w)
            k += 1
            w &= w - one
    return out[:k].copy()


@njit(cache=True)
def edges_into(offsets: np.ndarray, order: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The edges into destinations ``kept``: destination ``k``'s are ``order[offsets[k]:offsets[k + 1]]``
    (``order`` empty: the positions themselves, edges already grouped by destination)."""
    total = 0
    for k in kept:
        total += offsets[k + 1] - offsets[k]
    out = np.empty(total, dtype=np.int64)
    e = 0
    grouped = order.shape[0] == 0
    for k in kept:
        for j in range(offsets[k], offsets[k + 1]):
            out[e] = j if grouped else order[j]
            e += 1
    return out


# A tree cut carries up to LABELS trees at once as bits of an int64 per vertex (the sign
# bit unused, so shifts and masks stay in int64).
LABELS = 62


@njit(cache=True)
def spread_labels(
    dst_mask: np.ndarray, offsets: np.ndarray, order: np.ndarray, edge_src: np.ndarray, num_src: int,
    num_labels: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One layer of a tree cut, for every tree at once: ``dst_mask[j]`` has bit ``b`` when tree ``b``
    keeps destination ``j``. Returns the sources' masks (a destination is its own source, at the
    same position; an edge's source joins every tree that keeps its destination) and each tree's
    edge count. Destination ``j``'s edges are ``order[offsets[j]:offsets[j + 1]]``, or those
    positions themselves when ``order`` is empty."""
    src_mask = np.zeros(num_src, dtype=np.int64)
    src_mask[: dst_mask.shape[0]] = dst_mask
    edges = np.zeros(num_labels, dtype=np.int64)
    grouped = order.shape[0] == 0
    for j in range(dst_mask.shape[0]):
        m = dst_mask[j]
        if m == 0:
            continue
        lo, hi = offsets[j], offsets[j + 1]
        b = m
        while b != 0:
            edges[trailing_zeros(b)] += hi - lo
            b &= b - 1
        for k in range(lo, hi):
            src_mask[edge_src[k if grouped else order[k]]] |= m
    return src_mask, edges


@njit(cache=True)
def label_counts(mask: np.ndarray, num_labels: int) -> np.ndarray:
    """How many positions carry each bit of ``mask`` (one branch-free pass per bit)."""
    counts = np.zeros(num_labels, dtype=np.int64)
    for b in range(num_labels):
        n = 0
        for m in mask:
            n += (m >> b) & 1
        counts[b] = n
    return counts


@njit(cache=True)
def label_members(mask: np.ndarray, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions carrying each bit of ``mask``, in order, back to back, and where each bit's start."""
    counts = label_counts(mask, num_labels)
    starts = np.zeros(num_labels + 1, dtype=np.int64)
    for b in range(num_labels):
        starts[b + 1] = starts[b] + counts[b]
    out = np.empty(starts[num_labels] + 1, dtype=np.int64)  # one spare: every position is written
    for b in range(num_labels):
        at = starts[b]
        for i in range(mask.shape[0]):
            out[at] = i
            at += (mask[i] >> b) & 1
    return out[: starts[num_labels]], starts
