"""Labels, splits and feature parameters with learnable signal for synthetic graphs.

A trained GNN must beat chance clearly, and beat a per-vertex classifier, or accuracy
claims cannot be checked. So:

- **labels follow communities**: ``label = community mod num_classes``, then a share
  ``label_noise`` of vertices gets a uniformly random class. Generated graphs carry
  planted communities (SBM blocks, R-MAT planted communities), so most neighbors of a
  vertex share its label. A graph without communities (a plain R-MAT, a loaded graph)
  gets them from :func:`bfs_voronoi_communities`: cells of a multi-source BFS from
  random seeds, which are connected, local regions.
- **features follow labels** (generated lazily by :func:`workbench.graph.csr.generate_features`):
  ``feature_signal * centroid[label] + N(0, 1)`` with ``feature_signal = sqrt(2 / feat_dim)``
  by default, so two class centroids sit one noise standard deviation from their
  midpoint: one vertex alone is a weak witness of its class, its neighborhood's mean a
  strong one.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph


def attach_node_data(
    graph: CSRGraph,
    num_classes: int,
    feat_dim: int,
    seed: int,
    *,
    train_fraction: float = 0.6,
    val_fraction: float = 0.2,
    test_fraction: float = 0.2,
    label_noise: float = 0.05,
    feature_signal: float | None = None,
    labels: np.ndarray | None = None,
) -> CSRGraph:
    """Set labels, masks, ``feat_dim``, ``feature_seed`` and ``meta["feature_signal"]`` in place; return the graph.

    ``labels`` overrides the community-derived labels (e.g. a real graph's own).
    Masks are a seeded random split with the given fractions (their sum may be below 1:
    the rest is unlabeled for training purposes, as in ogbn-papers100M).
    """
    n = graph.num_nodes
    if num_classes < 1:
        raise ConfigError(f"num_classes must be at least 1, got {num_classes}")
    if feat_dim < 0:
        raise ConfigError(f"feat_dim must be non-negative, got {feat_dim}")
    fractions = (train_fraction, val_fraction, test_fraction)
    if min(fractions) < 0 or sum(fractions) > 1.0 + 1e-9:
        raise ConfigError(
            f"train/val/test fractions must be non-negative and sum to at most 1, got {fractions}"
        )
    if not 0.0 <= label_noise <= 1.0:
        raise ConfigError(f"label_noise must lie in [0, 1], got {label_noise}")
    rng = np.random.default_rng([seed, 0x1AB])
    if labels is None:
        if graph.communities is None:
            graph.communities = bfs_voronoi_communities(graph, max(num_classes, 1) * 2, seed)
            graph.meta["communities_from"] = "bfs_voronoi"
        labels = graph.communities % num_classes
        noisy = rng.random(n) < label_noise
        labels = labels.copy()
        labels[noisy] = rng.integers(0, num_classes, int(noisy.sum()))
    graph.labels = np.asarray(labels, dtype=np.int64)
    graph.num_classes = int(num_classes)

    order = rng.permutation(n)
    n_train, n_val = int(round(train_fraction * n)), int(round(val_fraction * n))
    n_test = min(int(round(test_fraction * n)), n - n_train - n_val)
    graph.train_mask, graph.val_mask, graph.test_mask = (
        _mask(n, order[lo:hi])
        for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, n_train + n_val + n_test))
    )
    graph.feat_dim = int(feat_dim)
    graph.feature_seed = int(np.random.default_rng([seed, 0xFEA]).integers(0, 2**31 - 1))
    graph.meta["feature_signal"] = float(
        feature_signal if feature_signal is not None else np.sqrt(2.0 / max(feat_dim, 1))
    )
    graph.meta["label_noise"] = label_noise
    graph.meta["split_fractions"] = {"train": train_fraction, "val": val_fraction, "test": test_fraction}
    graph.forget_features()  # features generated before were of the old labels and seed
    return graph


def _mask(n: int, members: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[members] = True
    return mask


def bfs_voronoi_communities(graph: CSRGraph, num_cells: int, seed: int) -> np.ndarray:
    """Community of each vertex: the cell of a multi-source BFS (over in- and out-edges) from random seeds.

    Each BFS level is one vectorized step over the frontier's edges, so the cost is
    O(edges). Where two cells reach a vertex in the same step the later write wins
    (deterministic). Vertices no seed reaches (other components) get a random cell.
    """
    n = graph.num_nodes
    rng = np.random.default_rng([seed, 0xB0F])
    num_cells = max(1, min(num_cells, n))
    sym = graph.symmetrize()
    owner = np.full(n, -1, dtype=np.int64)
    frontier = rng.choice(n, size=num_cells, replace=False).astype(np.int64)
    owner[frontier] = np.arange(num_cells)
    indptr, indices = sym.indptr, sym.indices
    while frontier.size:
        deg = indptr[frontier + 1] - indptr[frontier]
        starts = np.repeat(indptr[frontier], deg)
        within = np.arange(starts.size) - np.repeat(np.cumsum(deg) - deg, deg)
        nbrs = indices[starts + within]
        from_owner = np.repeat(owner[frontier], deg)
        fresh = owner[nbrs] < 0
        nbrs, from_owner = nbrs[fresh], from_owner[fresh]
        owner[nbrs] = from_owner
        frontier = _unique_ints(nbrs)
    unreached = owner < 0
    owner[unreached] = rng.integers(0, num_cells, int(unreached.sum()))
    return owner


def _unique_ints(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    if values.size < 2:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
