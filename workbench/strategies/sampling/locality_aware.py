"""``locality-aware``: Song and Jiang's locality-aware neighbor sampling (LAS).

Paper 002 (``papers/002_82d6728eceacde27.txt``; Song and Jiang, slides "Locality-Aware Neighbor Sampling"): node-wise
GraphSAGE sampling in which the in-neighbors whose features are cached on the
sampling GPU have their sampling probability multiplied by an adjustable factor, so
minibatches read more cached features and less from host memory (the slides report
up to 4.4x with similar convergence).

Each destination ``v`` draws ``min(fanout, deg(v))`` distinct in-neighbors by
successive sampling (inverse transform sampling with the drawn ones removed, the
shared kernel of paper 004, section 4.1.2) with weight ``factor`` for a cached
neighbor and 1 for the others. ``factor = 1`` is exactly :mod:`.neighbor`'s
distribution; ``factor > 1`` favors the cache, ``factor < 1`` avoids it.

:func:`expected_cached_share` predicts the share of sampled edges whose source is
cached for given destinations; the tests check the sampler against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import (
    check_graph_mask,
    check_positive_ints,
    check_positive_real,
    offsets_of,
    sample_nodewise,
)
from workbench.strategies.sampling.base import Minibatch, Sampler

WHO = "sampler 'locality-aware'"


def cached_mask(cached: np.ndarray | Sequence[int] | None, graph: CSRGraph) -> np.ndarray:
    """A boolean mask over the graph's vertices from a mask or a list of vertex ids."""
    if cached is None:
        return np.zeros(graph.num_nodes, dtype=bool)
    arr = np.asarray(cached)
    if arr.dtype == bool:
        return check_graph_mask(arr, graph, "the cached mask", WHO)
    ids = arr.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= graph.num_nodes):
        raise ConfigError(
            f"{WHO}: a cached vertex id is outside graph {graph.name!r} (0..{graph.num_nodes - 1})"
        )
    mask = np.zeros(graph.num_nodes, dtype=bool)
    mask[ids] = True
    return mask


@SAMPLERS.register("locality-aware")
class LocalityAwareSampler(Sampler):
    """LAS: node-wise sampling with cached in-neighbors' probability multiplied by ``factor``."""

    def __init__(
        self,
        fanouts: Sequence[int],
        cached: np.ndarray | Sequence[int] | None = None,
        factor: float = 2.0,
    ) -> None:
        self.fanouts = check_positive_ints(fanouts, "fanouts", WHO)
        self.factor = check_positive_real(factor, "factor", WHO)
        if cached is not None:
            arr = np.asarray(cached)
            if arr.ndim != 1 or not (
                arr.dtype == bool or np.issubdtype(arr.dtype, np.integer) or arr.size == 0
            ):
                raise ConfigError(f"{WHO}: cached must be a boolean mask or a list of vertex ids")
            if arr.dtype != bool and arr.size and arr.min() < 0:
                raise ConfigError(f"{WHO}: cached vertex ids must be >= 0, got {int(arr.min())}")
            cached = arr
        self.cached = cached

    def __repr__(self) -> str:
        if self.cached is None:
            cached = "none"
        elif self.cached.dtype == bool:
            cached = f"{int(np.count_nonzero(self.cached))} vertices"
        else:
            cached = f"{self.cached.shape[0]} vertices"
        return f"LocalityAwareSampler(fanouts={list(self.fanouts)}, factor={self.factor}, cached={cached})"

    def with_cached(self, cached: np.ndarray | Sequence[int]) -> LocalityAwareSampler:
        """The same sampler for another GPU's cache."""
        return LocalityAwareSampler(self.fanouts, cached=cached, factor=self.factor)

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        if self.cached is None:  # without a cache it would be the neighbor sampler, silently
            raise ConfigError(
                f"{WHO} needs the GPU's cache to favour: give cached=[vertex ids] (--param cached=[...]) "
                "or run it from a configuration with a [placement] and a [cache] capacity (gnnwb sim CONFIG)"
            )
        mask = cached_mask(self.cached, graph)
        col_weight = np.where(mask, self.factor, 1.0)
        no_values = np.empty(0, dtype=np.float64)

        def draw(
            begin: np.ndarray, end: np.ndarray, fanout: int, layer: int
        ) -> tuple[np.ndarray, np.ndarray]:
            counts = _kernels.uniform_row_counts(begin, end, fanout)
            offsets = offsets_of(counts)
            picked = _kernels.its_sample_rows(
                begin, end, graph.indices, no_values, col_weight, offsets, _kernels.draw_seed(rng)
            )
            return counts, picked

        return sample_nodewise(graph, seeds, self.fanouts, draw)


def expected_cached_share(
    graph: CSRGraph, dst: np.ndarray, cached: np.ndarray | Sequence[int], factor: float, fanout: int
) -> float:
    """Expected share of one layer's sampled edges whose source is cached.

    For a destination with ``C`` cached and ``U`` other in-neighbors, successive
    sampling takes a cached one next with probability ``f (C - a) / (f (C - a) + U - b)``
    after ``a`` cached and ``b`` other draws. A dynamic program over ``a`` gives the
    expected cached count after ``min(fanout, C + U)`` draws; the share is the sum over
    destinations divided by the number of sampled edges. With ``factor = 1`` it is the
    plain neighbor sampler's share.
    """
    mask = cached_mask(cached, graph)
    dst = np.asarray(dst, dtype=np.int64)
    f = check_positive_real(factor, "factor", "expected_cached_share")
    deg = graph.in_degrees()[dst]
    cumulative = np.concatenate([[0], np.cumsum(mask[graph.indices], dtype=np.int64)])
    cached_count = (cumulative[graph.indptr[dst + 1]] - cumulative[graph.indptr[dst]]).astype(np.float64)
    other = deg - cached_count
    draws = np.minimum(fanout, deg)
    # prob[:, a]: probability of having drawn a cached neighbors so far.
    prob = np.zeros((dst.shape[0], fanout + 1))
    prob[:, 0] = 1.0
    for t in range(fanout):
        active = t < draws
        nxt = np.zeros_like(prob)
        for a in range(t + 1):
            b = t - a
            wc = f * np.maximum(cached_count - a, 0)
            wo = np.maximum(other - b, 0)
            total = wc + wo
            pc = np.divide(wc, total, out=np.zeros_like(wc), where=total > 0)
            nxt[:, a + 1] += prob[:, a] * pc
            nxt[:, a] += prob[:, a] * (1 - pc)
        prob = np.where(active[:, None], nxt, prob)
    expected = prob @ np.arange(fanout + 1)
    total_edges = draws.sum()
    return float(expected.sum() / total_edges) if total_edges else 0.0
