"""Per-minibatch access probability of every vertex: exact, fanout-aware analytic, or pre-sampled.

Song & Jiang's placement (paper 002, "Performance Model") ranks vertices by their
*sampling probability*; GNNLab ranks them by pre-sampled access frequency. Both are
estimates of the same quantity, which this module computes:

    p[v] = P(one minibatch of ``batch_size`` training seeds reads v's input features)

so ``p.sum()`` is the expected number of feature reads per minibatch and the
estimators agree in expectation (tests check it).

* **Full-neighborhood sampling, exact** (``estimator="exact"``). A minibatch with
  ``L`` layers reads every vertex within ``L`` in-hops of a seed (seeds included:
  DGL's input nodes start with the destination nodes). If ``k[v]`` training vertices
  have ``v`` within ``L`` hops and the ``b`` seeds are a uniform ``b``-subset of the
  ``T`` training vertices (as each full batch of a shuffled epoch is), then
  ``p[v] = 1 - C(T - k[v], b) / C(T, b)``. ``k`` comes from boolean sparse products
  ``S (I + A)^L`` over chunks of seeds (scipy.sparse), so memory stays bounded.
* **Node-wise fanout sampling, analytic** (``estimator="fanout"``): see
  :func:`fanout_probability`. Probabilities are propagated from the seeds outwards,
  one sparse matrix-vector product per layer, under an independence assumption;
  seconds faster than the exact count on products-like and closer to what a fanout
  sampler reads.
* **Any sampler, by pre-sampling** (``estimator="presample"``). Run ``epochs``
  epochs over the shuffled training vertices in batches, and count in how many
  minibatches each vertex is an input vertex; divide by the number of minibatches.

``estimator="auto"`` (the default, :func:`resolve_estimator`) picks exact without a
sampler or with the full-neighborhood sampler, fanout for a sampler with positive
integer ``fanouts`` (``neighbor``, ``locality-aware``, ``bulk-matrix`` graphsage),
and pre-sampling for any other sampler (LADIES, FastGCN, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.strategies.placement.base import ESTIMATORS, PlacementRequest
from workbench.strategies.sampling.base import Sampler
from workbench.strategies.sampling.full import FullNeighborhoodSampler

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


# Largest probability fed to log1p(-p): log1p(-1) is -inf, and -inf times an explicit zero
# in a sparse product is nan. log(1e-15) ~ -34.5 already means "certainly read".
_P_MAX = 1.0 - 1e-15
_LOG_MISS_MIN = float(np.log1p(-_P_MAX))


def graph_is_symmetric(graph: CSRGraph) -> bool:
    """Whether the graph says it stores both directions of every edge (generators and loaders record it)."""
    meta = graph.meta or {}
    return bool(meta.get("symmetric") or meta.get("symmetrized"))


def _transposed_adjacency(graph: CSRGraph) -> sp.csc_matrix:
    """``A^T`` (float32 ones) as CSC over the graph's own index arrays: column ``v`` of ``A^T`` is row ``v`` of ``A``.

    The graph keeps ``indices`` in int32 below 2**31 vertices (``index_dtype``) and
    ``indptr`` in int64. scipy's kernels want both in one type, and converting the
    indices up is a 165 MB copy on products-like whose first touch in a fresh process
    took 0.35 s, most of the estimate's first call; so ``indptr`` (one entry per
    vertex) is narrowed instead wherever the edge count fits int32. Assigning the
    documented ``indptr``/``indices``/``data`` attributes keeps the indices as they are
    (the constructor would copy them).
    """
    n = graph.num_nodes
    indices = graph.indices
    fits_int32 = graph.num_edges < np.iinfo(np.int32).max and indices.dtype == np.int32
    index_type = np.int32 if fits_int32 else np.int64
    at = sp.csc_matrix((n, n), dtype=np.float32)
    at.indptr = np.asarray(graph.indptr, dtype=index_type)
    at.indices = np.asarray(indices, dtype=index_type)
    at.data = np.ones(indices.shape[0], dtype=np.float32)
    at.check_format(full_check=False)
    return at


def _reciprocal_pattern(at: sp.csc_matrix, symmetric: bool) -> sp.spmatrix:
    """``B[v, u] = 1`` where both ``u -> v`` and ``v -> u`` are edges (``at`` is ``A^T``), as ``B^T``."""
    if symmetric:
        return at
    # Only for graphs not known to be symmetric: a transpose and an elementwise product, O(E) each.
    both = at.tocsr().multiply(at.T.tocsr()).tocsc()
    both.data[:] = 1.0
    return both


def fanout_probability(
    graph: CSRGraph,
    fanouts: Sequence[int],
    batch_size: int,
    seeds: np.ndarray | None = None,
) -> np.ndarray:
    """Per-minibatch access probability under node-wise fanout sampling, propagated analytically.

    Fanouts are listed input layer first (DGL's order, as the samplers take them), so
    ``fanouts[-1]`` is drawn around the seeds. One minibatch's frontier starts at its
    seeds, ``F_0``, and grows as ``F_{l+1} = F_l ∪ {u : some v ∈ F_l draws u}``; its input
    vertices are ``F_L`` (destinations prefix sources). With ``T`` training vertices,
    batch ``b``, ``A[v, u] = 1`` for each edge ``u -> v`` (row ``v`` lists the in-neighbors
    the sampler draws from) and ``d[v]`` the in-degree, the estimate of
    ``q_l[v] = P(v ∈ F_l)`` is

        q_0[v]   = min(1, b / T) for training vertices, 0 otherwise
        r_l[v]   = min(1, f_l / d[v])          (f_l the fanout of step l)
        w_l[v]   = log(1 - q_l[v] r_l[v])
        s_l[u]   = (A^T w_l)[u] + c_l[u] (B^T z_l)[u], clamped to <= 0
        log(1 - q_{l+1}[u]) = log(1 - q_l[u]) + s_l[u]

    and ``p = q_L``. ``r_l[v]`` is exact: drawing ``f_l`` of ``d[v]`` in-neighbors without
    replacement (DGL's and our ``neighbor`` sampler; all of them when ``d <= f_l``) reads
    each with probability ``min(1, f_l / d[v])``.

    **Assumption: independence.** The events "``v ∈ F_l`` and ``v`` draws ``u``" are
    taken as independent across ``v``, so ``P(u ∉ F_{l+1})`` is the product of their
    complements, ``1 - prod(1 - q r)``. The product is summed in log space
    (``log1p``/``expm1``): over the in-edges it is one sparse matrix-vector product per
    layer (``A^T w``), and ``log1p`` keeps probabilities of 1e-6 exact where ``1 - x``
    would round. It costs one ``log1p`` and one ``expm1`` per vertex per layer over the
    union bound ``min(1, sum q r)``, which would saturate every hub at 1. Seeds are
    independent Bernoulli(``b / T``) draws instead of exactly ``b`` of ``T``; the
    neighbours that one vertex draws are negatively correlated (without replacement),
    which marginals ignore; two frontier vertices that share a seed are positively
    correlated, which the product ignores. The net effect is an overestimate of the
    expected reads (``p.sum()``): on products-like (fanouts 15/10/5, batch 1024) 9% in
    all, ~10% for low-degree vertices, 5% at degree 50-200 and 1% for hubs, whose
    probability saturates. It is smooth in the degree, so the ranking survives (numbers
    in ``tests/strategies/placement/test_fanout_probability.py``). The approximation
    is good while one minibatch's sampled trees rarely meet except through the seeds'
    own neighbourhoods; on small graphs with dense communities, where a seed's
    three-hop tree covers much of its community, it is not (products-like scaled down
    to 12k vertices keeps its 188 communities of ~65 vertices: with batch 16, overlap
    of the top 20% with pre-sampling 88%, reads overestimated by 39%); pre-sample there.

    The back-edge correction and the cost of each layer are described at
    :func:`_propagate_one_layer`.
    """
    fanouts = _check_fanouts(fanouts)
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    n = graph.num_nodes
    seeds = graph.train_nids() if seeds is None else np.asarray(seeds, dtype=np.int64)
    q = np.zeros(n, dtype=np.float64)
    if n == 0 or seeds.size == 0:
        return q
    q[seeds] = min(1.0, batch_size / seeds.shape[0])
    degree = np.diff(graph.indptr)
    at = _transposed_adjacency(graph)
    back = _reciprocal_pattern(at, graph_is_symmetric(graph))
    c = None  # q_{l-1} r_{l-1}: what u contributed to its neighbours' probability one step ago
    for fanout in reversed(fanouts):
        q, c = _propagate_one_layer(q, c, fanout, degree, at, back)
    return q


def _propagate_one_layer(
    q: np.ndarray,
    c: np.ndarray | None,
    fanout: int,
    degree: np.ndarray,
    at: sp.csc_matrix,
    back: sp.spmatrix,
) -> tuple[np.ndarray, np.ndarray]:
    """One step of :func:`fanout_probability`: ``q_l`` and ``c_l`` (None at the seeds) to
    ``q_{l+1}`` and ``c_{l+1} = q_l r_l``, with ``at`` = ``A^T`` and ``back`` = ``B^T``.

    **Back-edge correction** (the second term of ``s_l``). On a graph with reciprocal
    edges the plain product lets ``u`` raise its own probability through its own
    neighbours: ``u ∈ F_{l-1}`` makes ``v ∈ F_l`` likely, and ``v`` then "draws ``u``",
    who is already there. What matters for ``u ∉ F_{l+1}`` is ``v``'s probability given
    ``u ∉ F_l``, which lacks ``u``'s own factor: ``1 - q^{-u}[v] = (1 - q_l[v]) /
    (1 - c_l[u])`` with ``c_l[u] = q_{l-1}[u] r_{l-1}[u]`` (``c_0 = 0``). To first order
    in ``c_l[u]`` this adds ``c_l[u] sum_v B[v, u] z_l[v]`` to the log sum, with
    ``z_l[v] = r_l[v] (1 - q_l[v]) / (1 - q_l[v] r_l[v])`` and ``B`` the reciprocal edges
    (``A`` itself for a graph that records being symmetric; otherwise ``A ∘ A^T``,
    computed once). It is one more matrix-vector product per layer. Without it the
    estimate ranks training vertices (every seed's neighbours "draw it back") too high:
    on products-like, fanouts 15/10/5, it overestimates their reads by 26%, against 13%
    with it, and the overlap of its top 20% with 40 pre-sampled epochs' rises from 96.4%
    to 98.3% (the pre-sampled top of 20 epochs overlaps another 20's by 98.0%); the hit
    rate it predicts for its cache moves from 1.5 to 0.85 points of the measured one.
    Longer cycles (triangles, shared seeds) are still ignored.

    Cost of the whole estimate: building ``A^T`` over the graph's own arrays, then two matrix-vector
    products and a few vector operations per layer; no per-seed work. The products
    run in float32 (everything else in float64): the array of ones that scipy needs
    is half the size (82 MB on products-like, whose first touch in a fresh process is
    most of the cost: 0.22 s CPU for the whole estimate on the first call against
    0.49-0.70 s in float64) and each product reads half the values. A product sums a
    vertex's in-neighbours' log terms, so rounding moves ``p`` by at most 1.5e-7 on
    products-like, against the model's error of several percent.
    """
    keep = np.minimum(1.0, fanout / np.maximum(degree, 1))
    qk = np.minimum(q * keep, _P_MAX)
    log_miss = (at @ np.log1p(-qk).astype(np.float32)).astype(np.float64)
    if c is not None:
        z = (keep * (1.0 - q) / (1.0 - qk)).astype(np.float32)
        np.minimum(log_miss + c * (back @ z), 0.0, out=log_miss)
    log_miss += np.log1p(-np.minimum(q, _P_MAX))
    q_next = -np.expm1(log_miss)
    q_next[log_miss <= _LOG_MISS_MIN] = 1.0  # no chance left to miss it: read for certain
    return q_next, qk


def _check_fanouts(fanouts: Sequence[int]) -> tuple[int, ...]:
    values = sampler_fanouts_of(fanouts)
    if values is None:
        raise ConfigError(
            f"fanout estimator: fanouts must be a non-empty list of positive integers, got {fanouts!r}"
        )
    return values


def sampler_fanouts_of(fanouts: object) -> tuple[int, ...] | None:
    """``fanouts`` as a tuple of positive ints, or None when it is not one (None entries, -1, empty)."""
    if fanouts is None or isinstance(fanouts, str | bytes):
        return None
    try:
        values = list(fanouts)  # type: ignore[call-overload]
    except TypeError:
        return None
    if not values or any(isinstance(f, bool) or not isinstance(f, Integral) or f < 1 for f in values):
        return None
    return tuple(int(f) for f in values)


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


def resolve_estimator(sampler: Sampler | None, estimator: str = "auto") -> str:
    """The estimator ``estimate_access_probability`` uses: ``estimator`` itself unless it is ``auto``.

    ``auto``: ``exact`` without a sampler or with the full-neighborhood sampler,
    ``fanout`` for a sampler whose ``fanouts`` are positive integers, ``presample``
    otherwise. An explicit choice the sampler cannot serve is a ConfigError.
    """
    if estimator not in ESTIMATORS:
        raise ConfigError(f"access estimator {estimator!r}; allowed: {', '.join(ESTIMATORS)}")
    fanouts = sampler_fanouts_of(getattr(sampler, "fanouts", None))
    if estimator == "auto":
        if sampler is None or isinstance(sampler, FullNeighborhoodSampler):
            return "exact"
        return "fanout" if fanouts is not None else "presample"
    if estimator == "fanout" and fanouts is None:
        raise ConfigError(
            f"access estimator 'fanout' needs a sampler with positive integer fanouts, got {sampler!r}"
        )
    if estimator == "presample" and sampler is None:
        raise ConfigError("access estimator 'presample' needs a sampler to pre-sample with")
    return estimator


def estimate_access_probability(
    graph: CSRGraph,
    *,
    sampler: Sampler | None = None,
    num_layers: int = 2,
    batch_size: int = 1024,
    epochs: int = 1,
    rng: np.random.Generator | None = None,
    estimator: str = "auto",
) -> np.ndarray:
    """Access probabilities by ``estimator`` (see :func:`resolve_estimator`; ``auto`` by default).

    ``exact`` uses the full-neighborhood sampler's ``num_layers`` when given one,
    ``num_layers`` otherwise; ``fanout`` the sampler's fanouts; ``presample`` runs
    the sampler for ``epochs`` epochs with ``rng``.
    """
    how = resolve_estimator(sampler, estimator)
    if how == "exact":
        layers = sampler.num_layers if isinstance(sampler, FullNeighborhoodSampler) else num_layers
        return full_neighborhood_probability(graph, layers, batch_size)
    if how == "fanout":
        return fanout_probability(graph, sampler.fanouts, batch_size)  # type: ignore[union-attr]
    assert sampler is not None
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
        estimator=a.estimator,
    )
