"""Synthetic graph generators. All take an explicit seed and return a :class:`CSRGraph`.

- :func:`erdos_renyi`: uniform random edges, for tests.
- :func:`rmat`: R-MAT / Kronecker power-law graphs (Chakrabarti et al. 2004), optionally
  with planted communities so that labels and locality exist.
- :func:`sbm`: a stochastic block model, optionally degree-corrected with power-law
  degree propensities (community structure *and* a heavy tail).

Every generator is vectorized (no Python loop over vertices or edges), drops self
loops and duplicate edges, and tops up until the graph holds exactly the requested
number of edges. Vertex ids never encode structure: R-MAT ids are randomly permuted and
SBM blocks are random vertex sets, so contiguous-range partitioners are neither
trivially helped nor hurt.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from workbench.errors import ConfigError
from workbench.graph import _edge_kernels
from workbench.graph.csr import CSRGraph, index_dtype

# Edges are drawn in chunks of this many pairs to bound temporary memory (~0.5 GB).
_CHUNK = 1 << 23
# Give up topping up after this many rounds (only reached when the graph saturates).
_MAX_ROUNDS = 64

PairSampler = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def erdos_renyi(
    num_nodes: int, avg_degree: float, seed: int, *, symmetric: bool = True, name: str = "er"
) -> CSRGraph:
    """G(n, m) with ``m = n * avg_degree / 2`` undirected (or ``n * avg_degree`` directed) edges, no self loops."""
    rng = np.random.default_rng(seed)
    m = int(round(num_nodes * avg_degree / (2 if symmetric else 1)))
    src = rng.integers(0, num_nodes, m, dtype=np.int64)
    dst = rng.integers(0, num_nodes, m, dtype=np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if symmetric:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    keys = _sorted_distinct(src * np.int64(num_nodes) + dst)
    del src, dst
    g = _csr_of(keys, num_nodes, symmetric, np.empty(0, dtype=np.int64), name=name)
    g.meta = {"generator": "erdos_renyi", "num_nodes": num_nodes, "avg_degree": avg_degree, "seed": seed}
    return g


# ---- R-MAT ---------------------------------------------------------------------
def rmat(
    num_nodes: int,
    num_edges: int,
    seed: int,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    *,
    symmetric: bool = True,
    num_communities: int = 0,
    p_in: float = 0.0,
    permute: bool = True,
    connect_isolated: bool = False,
    name: str = "rmat",
) -> CSRGraph:
    """An R-MAT power-law graph with exactly ``num_edges`` stored (directed) edges.

    Each edge descends ``ceil(log2 num_nodes)`` levels of the adjacency matrix, picking
    a quadrant with probabilities ``a, b, c, d = 1-a-b-c`` (Graph500's defaults);
    all edges' choices at one level are drawn at once. Endpoints beyond ``num_nodes``,
    self loops and duplicates are dropped and more edges drawn until ``num_edges`` is
    reached. ``symmetric`` stores both directions of ``num_edges / 2`` undirected edges.

    R-MAT gives low ids the high degrees; with ``permute`` (default) ids are shuffled by
    a seeded random permutation (recorded in ``meta["relabel"]``) so that id ranges carry
    no degree information.

    ``num_communities > 0`` plants communities (random vertex sets, Dirichlet sizes):
    edges are rewired within their source's community so that a share ``p_in`` of edges
    is intra-community, with replacement endpoints drawn in proportion to their R-MAT
    degree (the heavy tail survives). The result carries ``communities``.

    R-MAT leaves many vertices isolated (~10% at Graph500-like skew, ~40% at the
    defaults with 20 edges per vertex). ``connect_isolated`` gives each of them one
    edge to a degree-proportional partner (in its community, if any) and removes as many
    random edges between vertices of degree >= 2, so the edge count stays exact.
    """
    if not 0 < a < 1 or not 0 <= b < 1 or not 0 <= c < 1 or a + b + c >= 1:
        raise ConfigError(f"rmat: need 0 < a, b, c and a + b + c < 1, got a={a}, b={b}, c={c}")
    _check_size("rmat", num_nodes, num_edges, symmetric)
    levels = max(1, int(np.ceil(np.log2(max(num_nodes, 2)))))
    rng = np.random.default_rng([seed, 0x2A7])
    community, share_sq = _plant(num_nodes, num_communities, p_in, rng)

    def draw(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        src, dst = _rmat_pairs(count, levels, a, b, c, rng)
        inside = (src < num_nodes) & (dst < num_nodes)
        src, dst = src[inside], dst[inside]
        if community is not None:
            dst = _rewire_within(src, dst, community, _rewire_share(p_in, share_sq), rng)
        return src, dst

    keys = _distinct_edges(draw, num_nodes, num_edges, symmetric, rng, "rmat")
    if connect_isolated:
        keys = _connect_isolated(keys, num_nodes, community, symmetric, rng)
    meta: dict = {
        "generator": "rmat",
        "num_nodes": num_nodes,
        "num_edges": num_edges,
        "seed": seed,
        "a": a,
        "b": b,
        "c": c,
        "symmetric": symmetric,
        "num_communities": num_communities,
        "p_in": p_in,
        "connect_isolated": connect_isolated,
    }
    perm = np.empty(0, dtype=np.int64)
    if permute:
        perm = np.random.default_rng([seed, 0x9E2]).permutation(num_nodes).astype(np.int64)
        if community is not None:
            relabeled = np.empty_like(community)
            relabeled[perm] = community
            community = relabeled
        meta["relabel"] = "random permutation of R-MAT ids (seeded from seed); R-MAT puts hubs at low ids"
    g = _csr_of(keys, num_nodes, symmetric, perm, name=name, communities=community)
    g.meta = meta
    return g


def _rmat_pairs(
    count: int, levels: int, a: float, b: float, c: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    src = np.zeros(count, dtype=np.int64)
    dst = np.zeros(count, dtype=np.int64)
    ab, abc = np.float32(a + b), np.float32(a + b + c)
    a32 = np.float32(a)
    for _ in range(levels):
        r = rng.random(count, dtype=np.float32)
        # Quadrants in order a (0,0), b (0,1), c (1,0), d (1,1): (src bit, dst bit).
        src_bit = r >= ab
        dst_bit = ((r >= a32) & ~src_bit) | (r >= abc)
        np.left_shift(src, 1, out=src)
        src += src_bit
        np.left_shift(dst, 1, out=dst)
        dst += dst_bit
    return src, dst


# ---- stochastic block model -------------------------------------------------------
def sbm(
    num_nodes: int,
    num_blocks: int,
    avg_degree: float,
    p_in_fraction: float,
    seed: int,
    *,
    degree_exponent: float | None = None,
    block_concentration: float | None = None,
    symmetric: bool = True,
    name: str = "sbm",
) -> CSRGraph:
    """A (degree-corrected) stochastic block model with ``round(num_nodes * avg_degree)`` stored edges.

    A share ``p_in_fraction`` of the edges lies inside blocks (``communities``), the rest
    lands anywhere. Blocks are random vertex sets, of equal expected size or, with
    ``block_concentration``, of Dirichlet(``block_concentration``) sizes (smaller is
    more unequal). With ``degree_exponent`` (e.g. 2.5) each vertex gets a Pareto
    degree propensity with that tail exponent and edges pick endpoints in proportion to
    it (Karrer and Newman's degree-corrected SBM), so the degree distribution is
    heavy-tailed; otherwise degrees are Poisson-like. Cost is O(edges log edges).
    """
    _check_size("sbm", num_nodes, int(round(num_nodes * avg_degree)), symmetric)
    if num_blocks < 1:
        raise ConfigError(f"sbm: num_blocks must be at least 1, got {num_blocks}")
    if not 0.0 <= p_in_fraction <= 1.0:
        raise ConfigError(f"sbm: p_in_fraction must lie in [0, 1], got {p_in_fraction}")
    if degree_exponent is not None and not degree_exponent > 2.0:
        raise ConfigError(f"sbm: degree_exponent must exceed 2 (finite mean degree), got {degree_exponent}")
    rng = np.random.default_rng([seed, 0x5B3])
    community, share_sq = _plant(num_nodes, num_blocks, p_in_fraction, rng, block_concentration)
    assert community is not None
    if degree_exponent is None:
        stubs = None
    else:
        # Pareto propensities, capped at sqrt(n * avg_degree) so hubs do not saturate
        # (more edges to a hub than vertices) and get lost to deduplication.
        theta = (1.0 - rng.random(num_nodes)) ** (-1.0 / (degree_exponent - 1.0))
        np.minimum(theta, np.sqrt(num_nodes * max(avg_degree, 1.0)), out=theta)
        stubs = _stub_table(theta, rng)
        share_sq = _volume_share_sq(community, theta, num_blocks)

    def endpoints(count: int, rng: np.random.Generator) -> np.ndarray:
        if stubs is None:
            return rng.integers(0, num_nodes, count, dtype=np.int64)
        return stubs[rng.integers(0, stubs.size, count)]

    q = _rewire_share(p_in_fraction, share_sq)

    def draw(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        src, dst = endpoints(count, rng), endpoints(count, rng)
        return src, _rewire_within(src, dst, community, q, rng)

    keys = _distinct_edges(draw, num_nodes, int(round(num_nodes * avg_degree)), symmetric, rng, "sbm")
    g = _csr_of(keys, num_nodes, symmetric, np.empty(0, dtype=np.int64), name=name, communities=community)
    g.meta = {
        "generator": "sbm",
        "num_nodes": num_nodes,
        "num_blocks": num_blocks,
        "avg_degree": avg_degree,
        "p_in_fraction": p_in_fraction,
        "seed": seed,
        "degree_exponent": degree_exponent,
        "block_concentration": block_concentration,
        "symmetric": symmetric,
    }
    return g


# ---- shared machinery ---------------------------------------------------------------
def _check_size(who: str, num_nodes: int, num_edges: int, symmetric: bool) -> None:
    if num_nodes < 2:
        raise ConfigError(f"{who}: num_nodes must be at least 2, got {num_nodes}")
    if num_edges < 0:
        raise ConfigError(f"{who}: the edge count must be non-negative, got {num_edges}")
    possible = num_nodes * (num_nodes - 1)
    # Saturated graphs are not what these generators are for: rejection would crawl.
    if num_edges > possible // 4:
        raise ConfigError(
            f"{who}: {num_edges} edges on {num_nodes} vertices is denser than a quarter of the "
            f"{possible} possible edges; use fewer edges or more vertices"
        )


def _plant(
    num_nodes: int,
    num_communities: int,
    p_in: float,
    rng: np.random.Generator,
    concentration: float | None = 4.0,
) -> tuple[np.ndarray | None, float]:
    """Random community of each vertex and the expected intra share of random edges (sum of squared shares)."""
    if num_communities <= 0:
        return None, 0.0
    if not 0.0 <= p_in <= 1.0:
        raise ConfigError(f"p_in must lie in [0, 1], got {p_in}")
    if num_communities > num_nodes:
        raise ConfigError(f"{num_communities} communities for only {num_nodes} vertices")
    if concentration is None:
        shares = np.full(num_communities, 1.0 / num_communities)
    else:
        shares = rng.dirichlet(np.full(num_communities, float(concentration)))
    community = rng.choice(num_communities, size=num_nodes, p=shares).astype(np.int64)
    # Every community gets at least one vertex so none is empty.
    community[rng.permutation(num_nodes)[:num_communities]] = np.arange(num_communities)
    sizes = np.bincount(community, minlength=num_communities) / num_nodes
    return community, float(np.sum(sizes**2))


def _stub_table(weight: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Vertex ids repeated in proportion to ``weight``: a uniform draw from it is a weighted draw.

    About 8 entries per vertex, rounded stochastically, so every weight is kept in
    expectation. A gather from this table is ~10x faster than ``searchsorted`` on a
    cumulative sum (random access into 8 MB instead of ~20 binary-search probes).
    """
    expected = weight / weight.sum() * (8 * weight.size)
    counts = np.floor(expected).astype(np.int64)
    counts += rng.random(weight.size) < (expected - counts)
    return np.repeat(np.arange(weight.size, dtype=np.int64), counts)


def _volume_share_sq(community: np.ndarray, weight: np.ndarray, k: int) -> float:
    vol = np.bincount(community, weights=weight, minlength=k)
    return float(np.sum((vol / vol.sum()) ** 2))


def _rewire_share(p_in: float, share_sq: float) -> float:
    """Share of edges to force inside so that the total intra share is ``p_in``.

    Edges left alone are intra-community with probability ``share_sq`` by chance.
    """
    if share_sq >= 1.0:
        return 0.0
    return float(np.clip((p_in - share_sq) / (1.0 - share_sq), 0.0, 1.0))


def _rewire_within(
    src: np.ndarray, dst: np.ndarray, community: np.ndarray, share: float, rng: np.random.Generator
) -> np.ndarray:
    """Replace a ``share`` of destinations by an endpoint from the source's community.

    Replacements are drawn from this batch's endpoints (a degree-proportional pool), so
    the degree distribution the generator produced is kept in expectation.
    """
    if share <= 0.0 or src.size == 0:
        return dst
    pool = np.concatenate([src, dst])
    pool_comm = community[pool]
    # A stable sort of 16-bit keys is a radix sort in numpy: 4x faster than int64 here.
    small = pool_comm.astype(np.int16) if community.max() < 2**15 else pool_comm
    order = np.argsort(small, kind="stable")
    pool, pool_comm = pool[order], pool_comm[order]
    k = int(community.max()) + 1
    start = np.searchsorted(pool_comm, np.arange(k), side="left")
    stop = np.searchsorted(pool_comm, np.arange(k), side="right")
    chosen = np.flatnonzero(rng.random(src.size) < share)
    comm = community[src[chosen]]
    # The source itself is in the pool, so its community's range is never empty.
    offset = (rng.random(chosen.size) * (stop[comm] - start[comm])).astype(np.int64)
    dst = dst.copy()
    dst[chosen] = pool[start[comm] + offset]
    return dst


def _distinct_edges(
    draw: PairSampler, num_nodes: int, num_edges: int, symmetric: bool, rng: np.random.Generator, who: str
) -> np.ndarray:
    """Keys ``src * n + dst`` of ``num_edges`` distinct non-loop edges (half as many ``lo * n + hi``
    pairs when symmetric), sorted, drawing until enough; see :func:`_csr_of`.

    Each round's draws go into one buffer after the keys kept so far, which is then sorted and
    cut to its distinct keys in place: the keys are never copied (papers100M's take 6.5 GB).
    """
    n = np.int64(num_nodes)
    target = num_edges // 2 if symmetric else num_edges
    buffer = np.empty(target + target // 16 + 64, dtype=np.int64)
    count = 0
    accept = 1.0  # fraction of drawn pairs that survive as new edges; refined each round
    for _ in range(_MAX_ROUNDS):
        missing = target - count
        if missing <= 0:
            break
        want = int(min(missing / max(accept, 0.02) * 1.05, 50 * _CHUNK)) + 64
        if count + want > buffer.shape[0]:
            buffer = _grown(buffer, count, count + want)
        end = count
        for lo in range(0, want, _CHUNK):
            src, dst = draw(min(_CHUNK, want - lo), rng)
            keep = src != dst
            src, dst = src[keep], dst[keep]
            if symmetric:
                src, dst = np.minimum(src, dst), np.maximum(src, dst)
            buffer[end : end + src.shape[0]] = src * n + dst
            end += src.shape[0]
        before = count
        count = _sorted_distinct(buffer[:end]).shape[0]
        accept = max((count - before) / want, 1e-6)
    if count < target:
        raise ConfigError(
            f"{who}: placed only {count} of {target} distinct edges on {num_nodes} vertices; "
            "the graph is too dense for these parameters"
        )
    if count > target:
        drop = np.sort(rng.choice(count, size=count - target, replace=False))
        count = _edge_kernels.compact_without(buffer[:count], drop)
    return buffer[:count]


def _sorted_distinct(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted in place and cut to their distinct values: a view of their front."""
    keys.sort()
    return keys[: _edge_kernels.compact_unique(keys)]


def _grown(buffer: np.ndarray, used: int, size: int) -> np.ndarray:
    grown = np.empty(size + size // 16, dtype=buffer.dtype)
    grown[:used] = buffer[:used]
    return grown


def _csr_of(
    keys: np.ndarray, num_nodes: int, symmetric: bool, perm: np.ndarray, **node_data: object
) -> CSRGraph:
    """The graph of pair keys ``src * n + dst`` (both directions of ``lo * n + hi`` when symmetric),
    vertex ``v`` renamed ``perm[v]`` (empty: not renamed), built by a counting sort into int32 rows."""
    indices = np.empty(keys.shape[0] * (2 if symmetric else 1), dtype=index_dtype(num_nodes))
    indptr = _edge_kernels.csr_of_keys(keys, np.int64(num_nodes), perm, symmetric, indices)
    return CSRGraph(indptr=indptr, indices=indices, **node_data)  # type: ignore[arg-type]


def _connect_isolated(
    keys: np.ndarray, num_nodes: int, community: np.ndarray | None, symmetric: bool, rng: np.random.Generator
) -> np.ndarray:
    """Give every isolated vertex one edge, keeping the edge count; ``keys`` are sorted and distinct.

    The partner is drawn in proportion to degree (from the same community when there
    are communities); as many edges between vertices of degree >= 2 are removed at
    random, so the count stays exact and (nearly) no new vertex becomes isolated.

    The degree-proportional pool is every pair's ``lo`` in order, then every pair's ``hi``, read
    out of the keys where needed (papers100M's pool would be 13 GB); a partner from a community is
    the pool's entry at a random rank among that community's, in pool order.
    """
    n = np.int64(num_nodes)
    m = keys.shape[0]
    degree = _edge_kernels.endpoint_degrees(keys, n)
    isolated = np.flatnonzero(degree == 0)
    removable = _edge_kernels.both_at_least(keys, n, degree, 2)
    del degree
    isolated = isolated[: int(np.count_nonzero(removable))]
    if isolated.size == 0:
        return keys
    partner = _edge_kernels.pool_entries(keys, n, rng.integers(0, 2 * m, isolated.size))
    if community is not None:
        k = int(community.max()) + 1
        size = _edge_kernels.community_counts(keys, n, community, k)
        comm = community[isolated]
        has = size[comm] > 0  # a community without any edge keeps the global partner
        offset = (rng.random(int(has.sum())) * size[comm[has]]).astype(np.int64)
        partner[has] = _edge_kernels.nth_of_community(keys, n, community, comm[has], offset)
    ranks = rng.choice(int(np.count_nonzero(removable)), size=isolated.size, replace=False)
    drop = np.sort(_edge_kernels.ranked_positions(removable, ranks))
    del removable
    count = _edge_kernels.compact_without(keys, drop)
    if symmetric:
        new = np.minimum(isolated, partner) * n + np.maximum(isolated, partner)
    else:
        new = partner * n + isolated  # an in-edge, so the vertex's CSR row is not empty
    # The keys lead _distinct_edges' buffer: its slack takes the new pairs without a copy.
    buffer = keys.base if keys.base is not None and keys.base.shape[0] >= count + new.size else None
    if buffer is None:
        buffer = _grown(keys, count, count + new.size)
    buffer[count : count + new.size] = new
    return _sorted_distinct(buffer[: count + new.size])
