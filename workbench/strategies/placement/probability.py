"""Per-minibatch access probability of every vertex: exact for full neighborhoods, pre-sampled otherwise.

Song & Jiang's placement (paper 002, "Performance Model") ranks vertices by their
*sampling probability*; GNNLab ranks them by pre-sampled access frequency. Both are
estimates of the same quantity, which this module computes:

    p[v] = P(one minibatch of ``batch_size`` training seeds reads v's input features)

so ``p.sum()`` is the expected number of feature reads per minibatch and the two
estimators agree in expectation (a test checks it).

* **Full-neighborhood sampling, exact.** A minibatch with ``L`` layers reads every
  vertex within ``L`` in-hops of a seed (seeds included: DGL's input nodes start with
  the destination nodes). If ``k[v]`` training vertices have ``v`` within ``L`` hops
  and the ``b`` seeds are a uniform ``b``-subset of the ``T`` training vertices (as
  each full batch of a shuffled epoch is), then
  ``p[v] = 1 - C(T - k[v], b) / C(T, b)``. ``k`` comes from boolean sparse products
  ``S (I + A)^L`` over chunks of seeds (scipy.sparse), so memory stays bounded.
* **Any sampler, by pre-sampling.** Run ``epochs`` epochs over the shuffled training
  vertices in batches, and count in how many minibatches each vertex is an input
  vertex; divide by the number of minibatches.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.strategies.placement.base import PlacementRequest
from workbench.strategies.sampling.base import Sampler

# Seeds per sparse product: bounds the reachability matrix held at once
# (seeds x L-hop neighborhood entries).
_SEED_CHUNK = 2048


def reaching_seed_counts(graph: CSRGraph, num_layers: int, seeds: np.ndarray | None = None) -> np.ndarray:
    """``k[v]``: how many of ``seeds`` (default: training vertices) have ``v`` within ``num_layers`` in-hops."""
    if num_layers < 0:
        raise ConfigError(f"num_layers must be >= 0, got {num_layers}")
    n = graph.num_nodes
    seeds = graph.train_nids() if seeds is None else np.asarray(seeds, dtype=np.int64)
    step = (graph.to_scipy(np.float32) + sp.identity(n, dtype=np.float32, format="csr")).tocsr()
    step.data[:] = 1.0
    counts = np.zeros(n, dtype=np.int64)
    for start in range(0, seeds.shape[0], _SEED_CHUNK):
        chunk = seeds[start : start + _SEED_CHUNK]
        rows = np.arange(chunk.shape[0])
        reach = sp.csr_matrix(
            (np.ones(chunk.shape[0], dtype=np.float32), (rows, chunk)), shape=(len(chunk), n)
        )
        for _ in range(num_layers):
            reach = reach @ step
            # Boolean semantics: a vertex is reached or not, however many paths lead to it.
            reach.data[:] = 1.0
        counts += np.bincount(reach.indices, minlength=n)
    return counts


def batch_hit_probability(counts: np.ndarray, num_seeds: int, batch_size: int) -> np.ndarray:
    """``1 - C(T - k, b) / C(T, b)``: chance a uniform ``b``-subset of ``T`` seeds contains one of ``k`` given seeds."""
    k = np.asarray(counts, dtype=np.float64)
    t = float(num_seeds)
    b = float(min(batch_size, num_seeds))
    if t == 0:
        return np.zeros_like(k)
    miss_possible = (t - k) >= b
    tk = np.where(miss_possible, t - k, b)  # placeholder where a miss is impossible
    log_miss = gammaln(tk + 1) - gammaln(tk - b + 1) - gammaln(t + 1) + gammaln(t - b + 1)
    p = np.where(miss_possible, -np.expm1(log_miss), 1.0)
    return np.where(k > 0, p, 0.0)


def full_neighborhood_probability(
    graph: CSRGraph, num_layers: int, batch_size: int, seeds: np.ndarray | None = None
) -> np.ndarray:
    """Exact per-minibatch access probability under full-neighborhood sampling with ``num_layers`` layers."""
    seeds = graph.train_nids() if seeds is None else np.asarray(seeds, dtype=np.int64)
    counts = reaching_seed_counts(graph, num_layers, seeds)
    return batch_hit_probability(counts, seeds.shape[0], batch_size)


def presampled_probability(
    graph: CSRGraph,
    sampler: Sampler,
    *,
    batch_size: int,
    epochs: int,
    rng: np.random.Generator,
    seeds: np.ndarray | None = None,
) -> np.ndarray:
    """Share of pre-sampled minibatches (``epochs`` epochs over ``seeds``) whose input vertices include each vertex."""
    if batch_size < 1 or epochs < 1:
        raise ConfigError(f"presampling needs batch_size >= 1 and epochs >= 1, got {batch_size}, {epochs}")
    seeds = graph.train_nids() if seeds is None else np.asarray(seeds, dtype=np.int64)
    counts = np.zeros(graph.num_nodes, dtype=np.int64)
    if seeds.size == 0:
        return counts.astype(np.float64)
    batches_seen = 0
    for _ in range(epochs):
        order = rng.permutation(seeds)
        batches = [order[i : i + batch_size] for i in range(0, order.shape[0], batch_size)]
        # A few batches per call lets bulk samplers amortize without holding an epoch in memory.
        for start in range(0, len(batches), 16):
            for mb in sampler.sample_many(graph, batches[start : start + 16], rng):
                # Input vertices are unique within a minibatch (sampler convention).
                counts[mb.input_nodes] += 1
                batches_seen += 1
    return counts / batches_seen


def estimate_access_probability(
    graph: CSRGraph,
    *,
    sampler: Sampler | None = None,
    num_layers: int = 2,
    batch_size: int = 1024,
    epochs: int = 1,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Exact full-neighborhood probability when ``sampler`` is None, pre-sampled frequency otherwise."""
    if sampler is None:
        return full_neighborhood_probability(graph, num_layers, batch_size)
    return presampled_probability(
        graph,
        sampler,
        batch_size=batch_size,
        epochs=epochs,
        rng=rng if rng is not None else np.random.default_rng(0),
    )


def request_probability(request: PlacementRequest) -> np.ndarray:
    """The request's access probabilities, estimated from its ``access`` model when it carries none."""
    if request.access_probability is not None:
        return np.asarray(request.access_probability, dtype=np.float64)
    a = request.access
    return estimate_access_probability(
        request.graph,
        sampler=a.sampler,
        num_layers=a.num_layers,
        batch_size=a.batch_size,
        epochs=a.epochs,
        rng=request.rng,
    )
