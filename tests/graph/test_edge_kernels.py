"""The in-place kernels of graph generation against the numpy expressions they replace, and the
generators' graphs against digests of what they generated before the kernels (same graphs)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from workbench.graph import _edge_kernels as k
from workbench.graph.csr import CSRGraph
from workbench.graph.datasets import load_dataset


def test_compaction_matches_unique_and_delete():
    rng = np.random.default_rng(0)
    keys = np.sort(rng.integers(0, 50, 300))
    expected = np.unique(keys)
    work = keys.copy()
    assert work[: k.compact_unique(work)].tolist() == expected.tolist()
    drop = np.sort(rng.choice(300, 40, replace=False))
    work = keys.copy()
    assert work[: k.compact_without(work, drop)].tolist() == np.delete(keys, drop).tolist()
    assert k.compact_unique(np.zeros(0, dtype=np.int64)) == 0


def test_pool_queries_match_the_pool_built_and_sorted():
    rng = np.random.default_rng(1)
    n = np.int64(40)
    lo = rng.integers(0, 39, 200)
    hi = lo + 1 + rng.integers(0, 39 - lo)
    keys = np.unique(lo * n + hi)
    lo, hi = np.divmod(keys, n)
    pool = np.concatenate([lo, hi])
    assert np.array_equal(k.endpoint_degrees(keys, n), np.bincount(pool, minlength=40))
    degree = np.bincount(pool, minlength=40)
    assert np.array_equal(k.both_at_least(keys, n, degree, 3), (degree[lo] >= 3) & (degree[hi] >= 3))
    at = rng.integers(0, pool.size, 50)
    assert np.array_equal(k.pool_entries(keys, n, at), pool[at])
    community = rng.integers(0, 5, 40)
    assert np.array_equal(
        k.community_counts(keys, n, community, 5), np.bincount(community[pool], minlength=5)
    )
    ordered = pool[np.argsort(community[pool], kind="stable")]
    start = np.searchsorted(community[ordered], np.arange(5))
    size = np.bincount(community[pool], minlength=5)
    wanted = rng.integers(0, 5, 60)
    ranks = (rng.random(60) * size[wanted]).astype(np.int64)
    assert np.array_equal(
        k.nth_of_community(keys, n, community, wanted, ranks), ordered[start[wanted] + ranks]
    )
    mask = rng.random(100) < 0.4
    picks = rng.choice(int(mask.sum()), 10, replace=False)
    assert np.array_equal(k.ranked_positions(mask, picks), np.flatnonzero(mask)[picks])


@pytest.mark.parametrize("symmetric", [True, False])
def test_csr_of_keys_matches_from_edges(symmetric):
    rng = np.random.default_rng(2)
    n = np.int64(30)
    src, dst = rng.integers(0, 30, 150), rng.integers(0, 30, 150)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if symmetric:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    keys = np.unique(src * n + dst)
    a, b = np.divmod(keys, n)
    perm = rng.permutation(30)
    if symmetric:
        a, b = np.concatenate([a, b]), np.concatenate([b, a])
    expected = CSRGraph.from_edges(perm[a], perm[b], 30)
    indices = np.empty(expected.num_edges, dtype=np.int32)
    indptr = k.csr_of_keys(keys, n, perm, symmetric, indices)
    assert np.array_equal(indptr, expected.indptr) and np.array_equal(indices, expected.indices)


# sha256 of indptr, indices (as int64), communities, labels and the training mask, as the
# generators wrote them before the in-place kernels and int32 ids (workbench 1f013ee).
BEFORE = {
    ("products-like", 0.002): "33a174c15a13439d",
    ("papers-like", 0.002): "9e2694a159805c91",
    ("rmat:n=5000,m=60000,connect=1", None): "ad2fded92244cbc1",
    ("rmat:n=3000,m=20000,communities=5,p_in=0.9", None): "ba44025e1ddc8ac5",
    ("sbm:n=4000,blocks=8,deg=10,exponent=2.5", None): "9f1ea1c0ec919221",
    ("er:n=2000,deg=5", None): "b00f55b0fb57bd0f",
}


@pytest.mark.parametrize("name,scale", list(BEFORE))
def test_generators_make_the_graphs_they_made_before(name, scale):
    g = load_dataset(name, scale=scale, cache=False)
    h = hashlib.sha256()
    for a in (g.indptr.astype(np.int64), g.indices.astype(np.int64), g.communities, g.labels, g.train_mask):
        h.update(np.ascontiguousarray(a).tobytes())
    assert h.hexdigest()[:16] == BEFORE[(name, scale)]
