"""Compiled loops of graph generation that work in place on one buffer of edge keys.

papers100M's 0.8 billion undirected edges are 6.5 GB of int64 keys. numpy's ``np.unique``,
``np.delete``, ``np.concatenate`` and ``divmod`` each copy the keys (or split them into two
int64 arrays), so generating it needed over 60 bytes per stored edge; these loops keep one
buffer and the int32 CSR. Each kernel has one caller in :mod:`.generators`, which documents
the rule it serves.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def compact_unique(keys: np.ndarray) -> int:
    """Drop repeats from sorted ``keys`` in place; returns how many distinct keys lead the array."""
    if keys.shape[0] == 0:
        return 0
    out = 1
    for i in range(1, keys.shape[0]):
        if keys[i] != keys[out - 1]:
            keys[out] = keys[i]
            out += 1
    return out


@njit(cache=True)
def compact_without(keys: np.ndarray, drop: np.ndarray) -> int:
    """Remove positions ``drop`` (sorted, distinct) from ``keys`` in place, keeping the order of the
    rest (``np.delete`` without the copy); returns how many keys remain at the front."""
    out = 0
    d = 0
    for i in range(keys.shape[0]):
        if d < drop.shape[0] and drop[d] == i:
            d += 1
            continue
        keys[out] = keys[i]
        out += 1
    return out


@njit(cache=True)
def endpoint_degrees(keys: np.ndarray, n: np.int64) -> np.ndarray:
    """How many times each vertex is an endpoint of the pairs ``keys`` (``lo * n + hi``)."""
    degree = np.zeros(n, dtype=np.int64)
    for i in range(keys.shape[0]):
        degree[keys[i] // n] += 1
        degree[keys[i] % n] += 1
    return degree


@njit(cache=True)
def both_at_least(keys: np.ndarray, n: np.int64, degree: np.ndarray, least: int) -> np.ndarray:
    """Whether both endpoints of each pair have degree ``least`` or more."""
    out = np.empty(keys.shape[0], dtype=np.bool_)
    for i in range(keys.shape[0]):
        out[i] = degree[keys[i] // n] >= least and degree[keys[i] % n] >= least
    return out


@njit(cache=True)
def pool_entries(keys: np.ndarray, n: np.int64, at: np.ndarray) -> np.ndarray:
    """Entries ``at`` of the endpoint pool: every pair's ``lo`` in order, then every pair's ``hi``."""
    m = keys.shape[0]
    out = np.empty(at.shape[0], dtype=np.int64)
    for j in range(at.shape[0]):
        out[j] = keys[at[j]] // n if at[j] < m else keys[at[j] - m] % n
    return out


@njit(cache=True)
def ranked_positions(mask: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The position of the ``ranks[j]``-th True of ``mask`` for every ``j`` (``np.flatnonzero(mask)[ranks]``
    without the index array)."""
    order = np.argsort(ranks)
    out = np.empty(ranks.shape[0], dtype=np.int64)
    seen = 0
    j = 0
    for i in range(mask.shape[0]):
        if not mask[i]:
            continue
        while j < order.shape[0] and ranks[order[j]] == seen:
            out[order[j]] = i
            j += 1
        seen += 1
    return out


@njit(cache=True)
def community_counts(keys: np.ndarray, n: np.int64, community: np.ndarray, k: int) -> np.ndarray:
    """How many entries of the endpoint pool (see :func:`pool_entries`) lie in each community."""
    counts = np.zeros(k, dtype=np.int64)
    for i in range(keys.shape[0]):
        counts[community[keys[i] // n]] += 1
        counts[community[keys[i] % n]] += 1
    return counts


@njit(cache=True)
def nth_of_community(
    keys: np.ndarray, n: np.int64, community: np.ndarray, wanted: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """For every query ``j``, the ``ranks[j]``-th entry of community ``wanted[j]`` in the endpoint pool
    (see :func:`pool_entries`): what the pool stably sorted by community holds at that community's
    start plus the rank, without building or sorting the pool."""
    k = community.max() + 1 if community.shape[0] else 0
    # Queries of each community, by rank: a cursor per community walks them as the pool goes by.
    order = np.argsort(wanted * (ranks.max() + 1 if ranks.shape[0] else 1) + ranks)
    first = np.zeros(k + 1, dtype=np.int64)
    for j in range(wanted.shape[0]):
        first[wanted[j] + 1] += 1
    for c in range(k):
        first[c + 1] += first[c]
    cursor = first[:-1].copy()
    seen = np.zeros(k, dtype=np.int64)
    out = np.empty(wanted.shape[0], dtype=np.int64)
    for half in range(2):
        for i in range(keys.shape[0]):
            v = keys[i] // n if half == 0 else keys[i] % n
            c = community[v]
            while cursor[c] < first[c + 1] and ranks[order[cursor[c]]] == seen[c]:
                out[order[cursor[c]]] = v
                cursor[c] += 1
            seen[c] += 1
    return out


@njit(cache=True)
def _pair(key: np.int64, n: np.int64, perm: np.ndarray) -> tuple[np.int64, np.int64]:
    """The two vertices of pair ``key`` (``a * n + b``), renamed by ``perm`` unless it is empty."""
    a = key // n
    b = key % n
    if perm.shape[0] > 0:
        return perm[a], perm[b]
    return a, b


@njit(cache=True)
def csr_of_keys(
    keys: np.ndarray, n: np.int64, perm: np.ndarray, symmetric: bool, indices: np.ndarray
) -> np.ndarray:
    """Fill ``indices`` with the CSR rows (in-neighbors, sorted) of the edges ``keys`` (``src * n + dst``,
    or ``lo * n + hi`` stored both ways when ``symmetric``), vertex ``v`` renamed ``perm[v]``
    (no renaming when ``perm`` is empty); returns ``indptr``."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        a, b = _pair(keys[i], n, perm)
        indptr[b + 1] += 1
        if symmetric:
            indptr[a + 1] += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    at = indptr[:-1].copy()
    for i in range(keys.shape[0]):
        a, b = _pair(keys[i], n, perm)
        indices[at[b]] = a
        at[b] += 1
        if symmetric:
            indices[at[a]] = b
            at[a] += 1
    for v in range(n):
        indices[indptr[v] : indptr[v + 1]].sort()
    return indptr


@njit(cache=True)
def same_community_edges(indptr: np.ndarray, indices: np.ndarray, community: np.ndarray) -> int:
    """How many edges join two vertices of one community."""
    same = 0
    for v in range(indptr.shape[0] - 1):
        c = community[v]
        for e in range(indptr[v], indptr[v + 1]):
            if community[indices[e]] == c:
                same += 1
    return same
