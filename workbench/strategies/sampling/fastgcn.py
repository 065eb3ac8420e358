"""``fastgcn``: FastGCN's layer-wise importance sampling (Chen et al. 2018).

Paper 004 (``papers/004_48b849e12cfdd076.txt``), section 2.2.2: FastGCN samples ``s`` vertices per layer from the whole
vertex set, independently of the batch, with probability growing with the vertex's
degree; unlike LADIES the sampled vertices need not neighbor the batch. We use the
importance distribution of the LADIES authors' FastGCN baseline, the layer-
independent ``p_j = ||A_hat[:, j]||^2 / ||A_hat||_F^2`` with ``A_hat = D^-1 (A + I)``
(see :mod:`.ladies`).

Each layer draws ``s`` distinct vertices (inverse transform sampling, drawn ones
removed) and keeps the edges from them to the layer's destinations, weighted
``A_hat[i, j] / p_j`` and normalized per destination. The block convention puts the
destinations first among the sources; a destination that was not drawn is a source
without edges (a FastGCN layer may leave a destination with no sampled neighbor).
A layer size larger than the number of vertices with positive probability is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling._common import check_positive_ints
from workbench.strategies.sampling.base import Block, Minibatch, Sampler, check_seeds
from workbench.strategies.sampling.ladies import (
    NormalizedAdjacencyCache,
    check_layer_size,
    draw_without_replacement,
    layerwise_block,
)


def fastgcn_distribution(squared_adjacency: np.ndarray | object) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of positive probability and ``p_j ~ ||A_hat[:, j]||^2`` from ``A_hat o A_hat``."""
    column_norms = np.asarray(squared_adjacency.sum(axis=0)).ravel()  # type: ignore[attr-defined]
    candidates = np.flatnonzero(column_norms > 0).astype(np.int64)
    weights = column_norms[candidates]
    return candidates, weights / weights.sum()


@SAMPLERS.register("fastgcn")
class FastGCNSampler(Sampler):
    """FastGCN layer-wise sampling: ``layer_sizes[l]`` vertices per layer from the whole graph."""

    def __init__(self, layer_sizes: Sequence[int]) -> None:
        self.layer_sizes = check_positive_ints(layer_sizes, "layer_sizes", "sampler 'fastgcn'")
        self._adjacency = NormalizedAdjacencyCache()
        self._distribution: tuple[int, tuple[np.ndarray, np.ndarray]] | None = None

    def __repr__(self) -> str:
        return f"FastGCNSampler(layer_sizes={list(self.layer_sizes)})"

    def _layer_distribution(self, graph: CSRGraph) -> tuple[np.ndarray, np.ndarray]:
        _, squared = self._adjacency.get(graph)
        if self._distribution is None or self._distribution[0] != id(squared):
            self._distribution = (id(squared), fastgcn_distribution(squared))
        return self._distribution[1]

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        seeds = check_seeds(graph, seeds)
        a_hat, _ = self._adjacency.get(graph)
        candidates, p = self._layer_distribution(graph)
        p_dense = np.zeros(graph.num_nodes, dtype=np.float64)
        p_dense[candidates] = p
        dst = seeds
        blocks: list[Block] = []
        for layer in range(len(self.layer_sizes) - 1, -1, -1):
            size = self.layer_sizes[layer]
            check_layer_size(size, candidates.shape[0], layer, "sampler 'fastgcn'", "the graph")
            sampled = draw_without_replacement(candidates, p, size, rng)
            new = sampled[~np.isin(sampled, dst)]
            src = np.concatenate([dst, new])
            block = layerwise_block(a_hat[dst], dst, sampled, p_dense[src], edge_columns=sampled)
            blocks.append(block)
            dst = block.src_nodes
        blocks.reverse()
        return Minibatch(seeds=seeds, blocks=blocks)
