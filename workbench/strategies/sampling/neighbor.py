"""``neighbor``: GraphSAGE's node-wise sampling with per-layer fanouts, without replacement.

Paper 004 (``papers/004_48b849e12cfdd076.txt``; Tripathy, Yelick, Buluc), section 2.2.1: every destination vertex of a
layer draws ``fanout`` of its in-neighbors uniformly at random; the drawn vertices
are the next layer's destinations. As in DGL's ``NeighborSampler`` (the baseline of
papers 002, 003 and 004), a vertex with at most ``fanout`` in-neighbors keeps all of
them, so every in-edge ``u -> v`` is kept with probability ``min(1, fanout / deg(v))``.

Fanouts are listed input layer first (DGL's order): ``fanouts[-1]`` is drawn around
the seeds. The whole frontier of a layer is drawn in one parallel kernel (Floyd's
algorithm per row), and ids are relabelled through one vertex-indexed scratch array.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import check_positive_ints, offsets_of, sample_nodewise
from workbench.strategies.sampling.base import Minibatch, Sampler


@SAMPLERS.register("neighbor")
class NeighborSampler(Sampler):
    """GraphSAGE node-wise sampling: ``fanouts[l]`` in-neighbors per vertex of layer ``l``, without replacement."""

    def __init__(self, fanouts: Sequence[int]) -> None:
        self.fanouts = check_positive_ints(fanouts, "fanouts", "sampler 'neighbor'")

    def __repr__(self) -> str:
        return f"NeighborSampler(fanouts={list(self.fanouts)})"

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        def draw(
            begin: np.ndarray, end: np.ndarray, fanout: int, layer: int
        ) -> tuple[np.ndarray, np.ndarray]:
            counts = _kernels.uniform_row_counts(begin, end, fanout)
            offsets = offsets_of(counts)
            picked = _kernels.floyd_sample_rows(
                begin, end, graph.indices, offsets, fanout, _kernels.draw_seed(rng)
            )
            return counts, picked

        return sample_nodewise(graph, seeds, self.fanouts, draw)
