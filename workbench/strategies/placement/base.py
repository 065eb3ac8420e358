"""The placement interface: which GPU holds which vertex features, and where each vertex lives.

A placement answers, for a graph, ``num_gpus`` GPUs and a per-GPU cache of
``capacity`` vertices:

* ``gpu_vertices[g]``: the sorted vertex ids whose input features GPU ``g`` holds;
* ``home[v]``: where a GPU that does not hold ``v`` reads it from: ``-1`` for host
  memory, ``g >= 0`` for GPU ``g`` (which then holds ``v``). For a vertex replicated
  on several GPUs, ``home`` names one copy (the lowest-numbered GPU that keeps it,
  unless the strategy says otherwise).

``peer_groups`` says which GPUs read each other's memory: a GPU that misses ``v``
locally reads it from a GPU of its own group that holds it (NVLink/NVSwitch peers in
Song & Jiang's Algorithm 1, every GPU in DGL's partitioned store), and from host
memory otherwise. Static placements are computed once by :meth:`Placement.place`;
a dynamic cache (:class:`DynamicPlacement`, BGL's FIFO) returns its *initial*
state from ``place`` and changes per minibatch through ``update``.

Access probabilities are per-minibatch: ``p[v]`` is the probability that one
minibatch (of one GPU) reads vertex ``v``'s input features, so ``p.sum()`` is the
expected number of feature reads per minibatch. :mod:`.probability` computes them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numba
import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.hardware.spec import ClusterSpec
from workbench.strategies.sampling.base import Sampler


def capacity_in_vertices(gpu_memory_bytes: int | float, feat_dim: int, dtype_bytes: int = 4) -> int:
    """How many vertices' features fit in ``gpu_memory_bytes`` (features of ``feat_dim`` x ``dtype_bytes``)."""
    if feat_dim < 1 or dtype_bytes < 1:
        raise ConfigError(
            f"feature size must be positive, got feat_dim={feat_dim}, dtype_bytes={dtype_bytes}"
        )
    if gpu_memory_bytes < 0:
        raise ConfigError(f"GPU cache memory must be non-negative, got {gpu_memory_bytes} bytes")
    return int(gpu_memory_bytes // (feat_dim * dtype_bytes))


# How access probabilities are estimated (see :mod:`.probability`, ``resolve_estimator``).
ESTIMATORS = ("auto", "exact", "fanout", "presample")


@dataclass(frozen=True)
class AccessModel:
    """How to estimate access probabilities when a request does not carry them.

    ``estimator`` ``auto`` (default): with no ``sampler`` (or the full-neighborhood
    one), the exact probability for full-neighborhood sampling over ``num_layers``
    hops; with a sampler that has fanouts, the fanout-aware analytic estimate; with
    any other, its pre-sampled frequency over ``epochs`` epochs. ``exact``,
    ``fanout`` and ``presample`` force one.
    """

    sampler: Sampler | None = None
    num_layers: int = 2
    batch_size: int = 1024
    epochs: int = 1
    estimator: str = "auto"

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ConfigError(f"access estimator {self.estimator!r}; allowed: {', '.join(ESTIMATORS)}")
        if self.num_layers < 1:
            raise ConfigError(f"num_layers must be >= 1, got {self.num_layers}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.epochs < 1:
            raise ConfigError(f"presampling epochs must be >= 1, got {self.epochs}")


@dataclass(frozen=True)
class PlacementRequest:
    """Everything a placement may use. Only ``graph``, ``num_gpus`` and ``capacity`` are required."""

    graph: CSRGraph
    num_gpus: int
    capacity: int  # vertices per GPU (see capacity_in_vertices)
    access_probability: np.ndarray | None = None  # per vertex; estimated from `access` when None
    owner: np.ndarray | None = None  # partition of each vertex (int64 in [0, num_gpus)), if any
    cluster: ClusterSpec | None = None  # GPU g of the request is cluster.gpu_nodes()[g]
    access: AccessModel = field(default_factory=AccessModel)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def __post_init__(self) -> None:
        n = self.graph.num_nodes
        if self.num_gpus < 1:
            raise ConfigError(f"number of GPUs must be >= 1, got {self.num_gpus}")
        if self.capacity < 0:
            raise ConfigError(f"GPU cache capacity must be >= 0 vertices, got {self.capacity}")
        if self.capacity > n:
            raise ConfigError(
                f"GPU cache capacity {self.capacity} is larger than graph {self.graph.name!r} ({n} vertices)"
            )
        if self.access_probability is not None:
            p = np.asarray(self.access_probability)
            if p.shape != (n,):
                raise ConfigError(f"access_probability has shape {p.shape}; expected ({n},)")
            if not np.all(np.isfinite(p)) or (p.size and p.min() < 0):
                raise ConfigError("access_probability must be finite and non-negative")
        if self.owner is not None:
            o = np.asarray(self.owner)
            if o.shape != (n,):
                raise ConfigError(f"owner has shape {o.shape}; expected ({n},)")
            if o.size and (o.min() < 0 or o.max() >= self.num_gpus):
                raise ConfigError(
                    f"owner names partitions {int(o.min())}..{int(o.max())}; expected 0..{self.num_gpus - 1}"
                )
        if self.cluster is not None and self.cluster.num_gpus < self.num_gpus:
            raise ConfigError(
                f"cluster {self.cluster.name!r} has {self.cluster.num_gpus} GPUs; {self.num_gpus} requested"
            )

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes


@dataclass(frozen=True)
class HitRates:
    """Expected share of each GPU's feature reads served locally, by a peer GPU, or by host memory.

    ``local + peer + host == 1`` per GPU (all zero for a GPU that reads nothing);
    ``expected_reads`` is the expected number of vertices one minibatch reads.
    """

    local: np.ndarray
    peer: np.ndarray
    host: np.ndarray
    expected_reads: np.ndarray

    @property
    def mean_local(self) -> float:
        return float(self.local.mean()) if self.local.size else 0.0

    @property
    def mean_gpu(self) -> float:
        """Share of reads served by any GPU (local or peer), averaged over GPUs."""
        return float((self.local + self.peer).mean()) if self.local.size else 0.0


def distinct_arrays(gpu_vertices: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    """The distinct array objects among ``gpu_vertices`` (a replicated cache lists one array for
    every GPU) and, per GPU, the index of its own among them."""
    arrays: list[np.ndarray] = []
    index: dict[int, int] = {}
    set_of = []
    for verts in gpu_vertices:
        if id(verts) not in index:
            index[id(verts)] = len(arrays)
            arrays.append(verts)
        set_of.append(index[id(verts)])
    return arrays, set_of


@numba.njit(cache=True, inline="always")
def cached_bit(bits: np.ndarray, v: int) -> int:
    """Vertex ``v``'s bit in ``bits`` packed as :func:`numpy.packbits` packs a mask (the first
    vertex of a byte in its high bit): 1 where the GPU holds ``v``. The one reading of the bits,
    compiled into every kernel that tests them."""
    return (bits[v >> 3] >> (7 - (v & 7))) & 1


@numba.njit(cache=True)
def _contains(bits: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    out = np.empty(vertices.shape[0], dtype=np.bool_)
    for i in range(vertices.shape[0]):
        out[i] = cached_bit(bits, vertices[i]) == 1
    return out


class CacheMembership:
    """Which vertices each GPU holds, one bit per vertex and distinct cache.

    A plan asks, per minibatch, which of its input vertices a GPU caches. A boolean mask
    per GPU answers in one gather but takes ``num_gpus x num_nodes`` bytes: 14 GB for 128
    GPUs on papers100M's 111M vertices. Bits take an eighth of that, and GPUs that hold
    the same array (a replicated cache, :func:`replicated_result`) share one set of bits.
    """

    def __init__(self, gpu_vertices: Sequence[np.ndarray], num_nodes: int) -> None:
        self.num_nodes = num_nodes
        arrays, self._set_of = distinct_arrays(gpu_vertices)
        self._bits = [np.packbits(self._mask_of(verts)) for verts in arrays]

    def _mask_of(self, verts: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.num_nodes, dtype=bool)
        mask[verts] = True
        return mask

    def bits(self, gpu: int) -> np.ndarray:
        """GPU ``gpu``'s bits, packed as :func:`numpy.packbits` packs a mask (read with :func:`cached_bit`)."""
        return self._bits[self._set_of[gpu]]

    def contains(self, gpu: int, vertices: np.ndarray) -> np.ndarray:
        """Whether GPU ``gpu`` holds each of ``vertices`` (a boolean array aligned with them)."""
        return _contains(self.bits(gpu), np.asarray(vertices, dtype=np.int64))

    def mask(self, gpu: int) -> np.ndarray:
        """Boolean mask over every vertex: True where GPU ``gpu`` holds the features."""
        return np.unpackbits(self._bits[self._set_of[gpu]], count=self.num_nodes).astype(bool)


@dataclass(frozen=True)
class PlacementResult:
    """Which vertices each GPU holds and where each vertex's home copy lives (see module docs)."""

    gpu_vertices: list[np.ndarray]
    home: np.ndarray
    peer_groups: tuple[tuple[int, ...], ...] | None = None  # None: all GPUs read each other

    def __post_init__(self) -> None:
        n = int(self.home.shape[0])
        g = len(self.gpu_vertices)
        if self.home.dtype != np.int64 or self.home.ndim != 1:
            raise ValueError("home must be a 1-D int64 array")
        arrays, set_of = distinct_arrays(self.gpu_vertices)  # a replicated cache: one array, checked once
        for k, verts in enumerate(arrays):
            i = set_of.index(k)
            if verts.dtype != np.int64 or verts.ndim != 1:
                raise ValueError(f"gpu_vertices[{i}] must be a 1-D int64 array")
            if verts.size and (verts[0] < 0 or verts[-1] >= n or np.any(np.diff(verts) <= 0)):
                raise ValueError(f"gpu_vertices[{i}] must be sorted, unique and inside the graph")
        if n and (self.home.min() < -1 or self.home.max() >= g):
            raise ValueError(f"home must lie in [-1, {g})")
        if self.peer_groups is not None:
            flat = sorted(x for grp in self.peer_groups for x in grp)
            if flat != list(range(g)):
                raise ValueError(f"peer_groups must cover GPUs 0..{g - 1} once each, got {self.peer_groups}")

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_vertices)

    @property
    def num_nodes(self) -> int:
        return int(self.home.shape[0])

    def cache_sizes(self) -> list[int]:
        return [int(v.shape[0]) for v in self.gpu_vertices]

    def cached_mask(self, gpu: int) -> np.ndarray:
        """Boolean mask over vertices: True where GPU ``gpu`` holds the features."""
        return self.membership.mask(gpu)

    @cached_property
    def membership(self) -> CacheMembership:
        """Which vertices each GPU holds, as bits (see :class:`CacheMembership`)."""
        return CacheMembership(self.gpu_vertices, self.num_nodes)

    @cached_property
    def narrow_home(self) -> np.ndarray:
        """``home`` in the narrowest signed integer type that holds it (int8 up to 128 GPUs): a
        plan looks up the homes of a minibatch's scattered input vertices, and on products-like
        (1.2M vertices) int64 homes (9.8 MB) made those lookups 3.3x slower than int16 or int8 ones."""
        dtype = np.int8 if self.num_gpus <= 128 else np.int16 if self.num_gpus <= 2**15 else np.int32
        return self.home.astype(dtype)

    def groups(self) -> tuple[tuple[int, ...], ...]:
        return self.peer_groups if self.peer_groups is not None else (tuple(range(self.num_gpus)),)

    def expected_hit_rate(self, prob: np.ndarray) -> HitRates:
        """Expected local/peer/host shares of each GPU's reads under access probabilities ``prob``.

        ``prob`` is one probability per vertex (every GPU samples alike) or an array
        of shape ``(num_gpus, num_nodes)`` (one row per GPU). A local miss is a peer
        hit when a GPU of the same peer group holds the vertex, a host read otherwise.
        """
        p = np.asarray(prob, dtype=np.float64)
        if p.shape == (self.num_nodes,):
            p = np.broadcast_to(p, (self.num_gpus, self.num_nodes))
        if p.shape != (self.num_gpus, self.num_nodes):
            raise ConfigError(
                f"access probabilities have shape {np.shape(prob)}; expected ({self.num_nodes},) "
                f"or ({self.num_gpus}, {self.num_nodes})"
            )
        local = np.zeros(self.num_gpus)
        peer = np.zeros(self.num_gpus)
        total = p.sum(axis=1)
        for group in self.groups():
            in_group = np.zeros(self.num_nodes, dtype=bool)
            for g in group:
                in_group[self.gpu_vertices[g]] = True
            for g in group:
                local[g] = p[g, self.gpu_vertices[g]].sum()
                peer[g] = p[g, in_group].sum() - local[g]
        with np.errstate(invalid="ignore", divide="ignore"):
            safe = np.where(total > 0, total, 1.0)
            local_share = np.where(total > 0, local / safe, 0.0)
            peer_share = np.where(total > 0, peer / safe, 0.0)
        host_share = np.where(total > 0, np.clip(1.0 - local_share - peer_share, 0.0, 1.0), 0.0)
        return HitRates(local_share, peer_share, host_share, total)


@dataclass(frozen=True)
class CacheStats:
    """What one ``update`` of a dynamic cache did: vertices found, vertices fetched, vertices dropped."""

    hits: int
    misses: int
    evicted: int


class Placement(ABC):
    """Decides where vertex features live. Pure: no device, no time; randomness only from ``request.rng``."""

    registered_name: ClassVar[str]
    dynamic: ClassVar[bool] = False
    # Whether ``place`` reads the request's access probabilities (estimating them from its
    # ``access`` model when it carries none): a sweep then hands it a cached estimate.
    uses_access_probability: ClassVar[bool] = False

    @abstractmethod
    def place(self, request: PlacementRequest) -> PlacementResult:
        """The placement for ``request`` (for a dynamic cache: its initial state)."""


class DynamicPlacement(Placement):
    """A cache whose contents change per minibatch.

    ``place`` (re)initializes the cache and returns its initial state as a
    :class:`PlacementResult`; ``update`` then feeds one minibatch's input vertices
    of one GPU through the cache, and ``state`` returns the current contents in the
    same form.
    """

    dynamic: ClassVar[bool] = True

    @abstractmethod
    def update(self, batch_vertices: np.ndarray, gpu: int = 0) -> CacheStats:
        """Look up ``batch_vertices`` on GPU ``gpu``, admit the misses, report hits, misses, evictions."""

    @abstractmethod
    def state(self) -> PlacementResult:
        """Current contents of every GPU's cache."""


def descending_order(prob: np.ndarray) -> np.ndarray:
    """Vertices by probability, highest first; ties by vertex id (stable), so results are deterministic.

    The order of ``np.argsort(-prob, kind="stable")`` (NaN last), found by a radix sort
    of the values' bit patterns: numpy sorts float64 stably by merging, which on the 1.2M
    vertices of products-like took 0.19 s, half of song-jiang's placement.
    """
    keys = _ascending_keys(-np.asarray(prob, dtype=np.float64))
    return _radix_argsort(keys) if keys.shape[0] else np.zeros(0, dtype=np.int64)


_SIGN = np.uint64(1 << 63)


def _ascending_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys that order as the float64 ``values`` do in numpy's sort: -0.0 as 0.0, NaN last."""
    canonical = values + 0.0  # -0.0 + 0.0 is 0.0: equal values get equal keys
    bits = canonical.view(np.uint64)
    negative = (bits & _SIGN) != 0
    # Negative floats order backwards by their bits: flip them all; positive ones above every negative.
    keys = np.where(negative, ~bits, bits | _SIGN)
    keys[np.isnan(values)] = np.iinfo(np.uint64).max  # after +inf, in index order among themselves
    return keys


@numba.njit(cache=True)
def _radix_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of uint64 ``keys``: least significant 16 bits first, four counting passes;
    a pass whose digit is the same for every key changes nothing and is skipped."""
    n = keys.shape[0]
    order = np.arange(n)
    scratch = np.empty(n, dtype=np.int64)
    counts = np.empty(65537, dtype=np.int64)
    for shift in range(0, 64, 16):
        counts[:] = 0
        for i in range(n):
            counts[((keys[i] >> np.uint64(shift)) & np.uint64(0xFFFF)) + 1] += 1
        if counts.max() == n:
            continue
        for d in range(1, 65537):
            counts[d] += counts[d - 1]
        for i in range(n):
            k = order[i]
            digit = (keys[k] >> np.uint64(shift)) & np.uint64(0xFFFF)
            scratch[counts[digit]] = k
            counts[digit] += 1
        order, scratch = scratch, order
    return order


def replicated_result(top: np.ndarray, num_nodes: int, num_gpus: int) -> PlacementResult:
    """Every GPU holds the same vertices ``top``; every vertex's home is host memory.

    Home stays host because replicas serve only their own GPU: a GPU that misses a
    vertex misses it on every peer too.
    """
    verts = np.sort(np.asarray(top, dtype=np.int64))
    verts.setflags(write=False)  # one array for every GPU: 128 copies of a 10% cache of papers100M are 11 GB
    return PlacementResult(
        gpu_vertices=[verts] * num_gpus,
        home=np.full(num_nodes, -1, dtype=np.int64),
    )
