"""Helpers the sampler files share: eager argument checks and the node-wise layer loop."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from numbers import Integral, Real

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling.base import Block, Minibatch, check_seeds


def check_positive_ints(values: Sequence[int], what: str, who: str) -> tuple[int, ...]:
    """A non-empty list of positive integers (fanouts, layer sizes), or a ConfigError naming it."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise ConfigError(f"{who}: {what} must be a list of positive integers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise ConfigError(f"{who}: {what} must be a list of positive integers, got {list(values)!r}")
        if v < 1:
            raise ConfigError(f"{who}: every entry of {what} must be >= 1, got {list(values)!r}")
        out.append(int(v))
    if not out:
        raise ConfigError(f"{who}: {what} needs at least one layer, got []")
    return tuple(out)


def check_positive_int(value: int, what: str, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ConfigError(f"{who}: {what} must be a positive integer, got {value!r}")
    return int(value)


def check_positive_real(value: float, what: str, who: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not (float(value) > 0)
        or value == float("inf")
    ):
        raise ConfigError(f"{who}: {what} must be a positive finite number, got {value!r}")
    return float(value)


def new_mapping(num_nodes: int, copies: int | None = None) -> np.ndarray:
    """Scratch for :func:`_kernels.relabel_block` (one row per thread when ``copies`` is given).

    int32, not int64: the relabel loop reads it at random, and half the bytes keep far
    more of it in cache (products-like: 16 ms -> 6 ms per input layer here). Local ids
    of one block are far below 2**31.
    """
    if copies is None:
        return np.full(num_nodes, -1, dtype=np.int32)
    return np.full((copies, num_nodes), -1, dtype=np.int32)


# A layer's draw: (row_begin, row_end, fanout, layer) -> (per-row counts, sources row by row).
RowDraw = Callable[[np.ndarray, np.ndarray, int, int], tuple[np.ndarray, np.ndarray]]


def sample_nodewise(graph: CSRGraph, seeds: np.ndarray, fanouts: Sequence[int], draw: RowDraw) -> Minibatch:
    """Layer loop of node-wise samplers: from the seeds outwards, ``fanouts`` input layer first.

    ``draw`` picks each destination's sources among its in-neighbors
    (``graph.indices[row_begin[i]:row_end[i]]``); this function relabels them into a
    :class:`Block` and makes the block's sources the next layer's destinations.
    """
    seeds = check_seeds(graph, seeds)
    mapping = new_mapping(graph.num_nodes)
    dst = seeds
    blocks: list[Block] = []
    for layer in range(len(fanouts) - 1, -1, -1):
        counts, picked = draw(graph.indptr[dst], graph.indptr[dst + 1], fanouts[layer], layer)
        src, edge_src, edge_dst = _kernels.relabel_block(dst, counts, picked, mapping)
        blocks.append(Block(src_nodes=src, dst_nodes=dst, edge_src=edge_src, edge_dst=edge_dst))
        dst = src
    blocks.reverse()
    return Minibatch(seeds=seeds, blocks=blocks)


def offsets_of(counts: np.ndarray) -> np.ndarray:
    offsets = np.empty(counts.shape[0] + 1, dtype=np.int64)
    offsets[0] = 0
    np.cumsum(counts, out=offsets[1:])
    return offsets


def check_graph_mask(mask: np.ndarray, graph: CSRGraph, what: str, who: str) -> np.ndarray:
    if mask.shape[0] != graph.num_nodes:
        raise ConfigError(
            f"{who}: {what} covers {mask.shape[0]} vertices but graph {graph.name!r} has {graph.num_nodes}"
        )
    return mask


class OutputBufferPool:
    """Large output arrays recycled once no returned minibatch refers to them any more.

    Bulk sampling returns ``k`` minibatches whose blocks are views into a few stacked
    arrays of ~100 MB. glibc serves arrays that large with a fresh ``mmap`` and gives
    them back on free, so every bulk would fault in and zero its output pages again:
    on products-like that system time (1-2 s per 96 minibatches) was more than the
    sampling itself, and where the kernel backs the pages with huge pages it can stall in
    page compaction for seconds more. This pool keeps the arrays instead and hands one out
    again only when its reference count shows that no view of it is alive (a view holds
    its base array; so does a torch tensor made from it). Results are unaffected.

    The pool keeps at most ``capacity`` arrays, and of those no longer viewed at most
    ``idle_bytes``: :data:`SHARED_OUTPUTS`, which every bulk sampler uses, outlives the
    samplers, so the next run in the process (a sweep's next point, a benchmark's next
    round) samples into the pages the last one left, and a process that is done sampling
    keeps at most ``idle_bytes`` of them.
    """

    def __init__(self, capacity: int = 24, idle_bytes: int | None = None) -> None:
        self.capacity = capacity
        self.idle_bytes = idle_bytes
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()

    def empty(self, size: int, dtype: type = np.int64) -> np.ndarray:
        """An uninitialized array of ``size`` items (a view of a pooled buffer)."""
        with self._lock:
            best = -1
            for k in range(len(self._buffers)):
                buf = self._buffers[k]
                # References: the list, `buf`, getrefcount's argument. More means a view is alive.
                if (
                    buf.dtype == dtype
                    and size <= buf.shape[0] <= 2 * size + 4096
                    and sys.getrefcount(buf) == 3
                ):
                    if best < 0 or buf.shape[0] < self._buffers[best].shape[0]:
                        best = k
            if best >= 0:
                return self._buffers[best][:size]
            # Headroom, so that the next bulk (slightly larger) can reuse it.
            buf = np.empty(size + size // 8 + 1024, dtype=dtype)
            if len(self._buffers) >= self.capacity:
                idle = [k for k in range(len(self._buffers)) if sys.getrefcount(self._buffers[k]) == 2]
                if idle:
                    del self._buffers[idle[0]]
            if len(self._buffers) < self.capacity:
                self._buffers.append(buf)
                self._trim()
            return buf[:size]

    def _trim(self) -> None:
        """Drop the oldest idle arrays while the idle ones hold more than ``idle_bytes``."""
        if self.idle_bytes is None:
            return
        idle = [k for k in range(len(self._buffers)) if sys.getrefcount(self._buffers[k]) == 2]
        total = sum(self._buffers[k].nbytes for k in idle)
        drop = []
        for k in idle:
            if total <= self.idle_bytes:
                break
            total -= self._buffers[k].nbytes
            drop.append(k)
        for k in reversed(drop):
            del self._buffers[k]


# Shared by every bulk sampler of the process (see OutputBufferPool): 64 arrays are the
# outputs of a 4-worker epoch's bulks with room to spare; 2 GiB idle is a products-like epoch.
SHARED_OUTPUTS = OutputBufferPool(capacity=64, idle_bytes=2 << 30)


def new_word_scratch(num_nodes: int, copies: int) -> np.ndarray:
    """Zeroed scratch for the bit-set relabelling (:func:`_kernels._relabel_words`), one row per thread."""
    return np.zeros((copies, _kernels.word_scratch_size(num_nodes)), dtype=np.uint64)


class MappingScratch:
    """Relabel scratch arrays kept between calls (the kernels leave them as they found them).

    A fresh one per call is a 5 MB-per-thread ``np.full`` on products-like, page faults
    included; a second caller while one is in use gets a fresh array. ``factory``
    makes one, ``(num_nodes, copies) -> array`` (default: :func:`new_mapping`).
    """

    def __init__(self, factory: Callable[[int, int], np.ndarray] = new_mapping) -> None:
        self._factory = factory
        self._cached: np.ndarray | None = None
        self._key: tuple[int, int] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def mappings(self, num_nodes: int, copies: int) -> Iterator[np.ndarray]:
        if not self._lock.acquire(blocking=False):
            yield self._factory(num_nodes, copies)
            return
        try:
            cached = self._cached
            if cached is None or self._key != (num_nodes, copies):
                cached = self._factory(num_nodes, copies)
                self._key = (num_nodes, copies)
            self._cached = None  # an exception inside would leave it dirty: only kept on success
            yield cached
            self._cached = cached
        finally:
            self._lock.release()


# Shared by every bulk sampler of the process, as SHARED_OUTPUTS is: a run's samplers are
# made per worker and per run, and each fresh scratch is megabytes of page faults.
SHARED_MAPPINGS = MappingScratch()
SHARED_WORDS = MappingScratch(new_word_scratch)
