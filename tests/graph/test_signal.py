"""Generated labels and features carry learnable signal: neighborhood averaging beats chance clearly."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.datasets import load_dataset
from workbench.graph.generators import rmat
from workbench.graph.signal import attach_node_data, bfs_voronoi_communities


def nearest_centroid_accuracy(graph, hops: int) -> float:
    """Smooth features over ``hops`` rounds of (self + mean of neighbors) / 2, then nearest class centroid.

    The centroids come from training vertices only, accuracy from test vertices: a
    one-line stand-in for a GNN, good enough to check that accuracy claims are checkable.
    """
    h = graph.features().astype(np.float64)
    adjacency = graph.to_scipy(np.float64)
    degree = np.maximum(graph.in_degrees(), 1)[:, None]
    for _ in range(hops):
        h = 0.5 * h + 0.5 * (adjacency @ h) / degree
    train, test = graph.train_mask, graph.test_mask
    centroids = np.stack(
        [
            h[train & (graph.labels == c)].mean(0)
            if np.any(train & (graph.labels == c))
            else np.full(h.shape[1], np.inf)
            for c in range(graph.num_classes)
        ]
    )
    distance = ((h[test][:, None, :] - centroids[None]) ** 2).sum(-1)
    return float(np.mean(distance.argmin(1) == graph.labels[test]))


@pytest.mark.parametrize("name, scale", [("products-like", 0.004), ("arxiv-like", 0.04)])
def test_neighbor_averaging_beats_chance_and_own_features(name: str, scale: float) -> None:
    graph = load_dataset(name, scale=scale, cache=False)
    chance = np.bincount(graph.labels).max() / graph.num_nodes  # always guessing the biggest class
    own = nearest_centroid_accuracy(graph, hops=0)
    smoothed = nearest_centroid_accuracy(graph, hops=2)
    assert own > 2 * chance
    assert smoothed > 5 * chance
    assert smoothed > own + 0.2  # the graph, not the vertex alone, carries most of the signal


def test_attach_node_data_sets_labels_masks_and_feature_parameters() -> None:
    g = rmat(2000, 20_000, seed=0, num_communities=10, p_in=0.8)
    attach_node_data(g, 5, 16, seed=3, train_fraction=0.5, val_fraction=0.2, test_fraction=0.3)
    assert g.num_classes == 5 and g.feat_dim == 16
    assert g.labels.min() >= 0 and g.labels.max() < 5
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (1000, 400, 600)
    assert not np.any(g.train_mask & g.val_mask) and not np.any(g.train_mask & g.test_mask)
    # Labels follow communities except for the label noise (5% redrawn, 4/5 of those change).
    assert np.mean(g.labels == g.communities % 5) > 0.93
    assert g.features().shape == (2000, 16) and g.features().dtype == np.float32
    g.validate()


def test_graph_without_communities_gets_local_ones() -> None:
    g = rmat(3000, 30_000, seed=1)
    cells = bfs_voronoi_communities(g, 8, seed=0)
    assert cells.shape == (3000,) and set(np.unique(cells)) <= set(range(8))
    attach_node_data(g, 4, 8, seed=0)
    assert g.meta["communities_from"] == "bfs_voronoi" and g.communities is not None


def test_bad_fractions_are_config_errors() -> None:
    g = rmat(200, 1000, seed=0)
    with pytest.raises(ConfigError, match="fractions"):
        attach_node_data(g, 3, 4, 0, train_fraction=0.8, val_fraction=0.3)
    with pytest.raises(ConfigError, match="num_classes"):
        attach_node_data(g, 0, 4, 0)
