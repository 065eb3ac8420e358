"""``full``: the whole L-hop in-neighborhood of the seeds, as minibatch blocks.

Paper 004 (``papers/004_48b849e12cfdd076.txt``), section 2.1: training a batch with an L-layer GNN touches the batch's
L-hop aggregated neighborhood (the "neighborhood explosion" that samplers avoid).
This sampler returns exactly that neighborhood in the common block structure, so
full-neighborhood minibatch training and the placement studies that assume it
(paper 002's access probabilities) use the same executors as the samplers.
Full-graph training (ROC, NeuGraph) uses the graph itself, not this sampler.
"""

from __future__ import annotations

import numpy as np

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import check_positive_int, offsets_of, sample_nodewise
from workbench.strategies.sampling.base import Minibatch, Sampler


@SAMPLERS.register("full")
class FullNeighborhoodSampler(Sampler):
    """Every in-neighbor of every vertex, ``num_layers`` hops out from the seeds."""

    def __init__(self, num_layers: int = 2) -> None:
        self.num_layers = check_positive_int(num_layers, "num_layers", "sampler 'full'")

    def __repr__(self) -> str:
        return f"FullNeighborhoodSampler(num_layers={self.num_layers})"

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        def draw(
            begin: np.ndarray, end: np.ndarray, fanout: int, layer: int
        ) -> tuple[np.ndarray, np.ndarray]:
            counts = _kernels.uniform_row_counts(begin, end, -1)
            picked = _kernels.floyd_sample_rows(
                begin, end, graph.indices, offsets_of(counts), -1, np.uint64(0)
            )
            return counts, picked

        # A fanout of -1 keeps every in-neighbor; the generator is not consumed.
        return sample_nodewise(graph, seeds, [-1] * self.num_layers, draw)
