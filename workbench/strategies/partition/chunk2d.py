"""``chunk2d``: NeuGraph's 2D chunk grid, with the smallest number of chunks that fits a GPU.

NeuGraph (paper 001, chunk-based dataflow translation, Figures 4 and 5): vertex data are sliced
into ``P`` contiguous vertex chunks ``V_0 .. V_{P-1}`` and the adjacency matrix into
``P x P`` edge chunks; edge chunk ``E_ij`` holds the edges from source chunk ``V_i``
to destination chunk ``V_j`` (edge ``u -> v`` lies in ``[chunk(u), chunk(v)]``).
The forward pass is column oriented: for destination chunk ``j`` NeuGraph streams
``E_0j .. E_{P-1,j}`` with their source chunks while ``V_j`` and its accumulation
chunk ``A_j`` stay in GPU memory (Figure 5). "NeuGraph selects P as the minimum
integer to fit each chunk in GPU memory ... If this requirement is beyond GPU's
capacity, NeuGraph shrinks the chunk size by increasing P", since every source
chunk is loaded ``P`` times and a smaller ``P`` means less I/O.

What must fit (the working set of one Scatter-ApplyEdge-Gather step of Figure 5, the
first layer, whose input is widest), for every pair ``(i, j)``::

    n_i * feat_dim * dtype_bytes                       source chunk V_i
  + n_j * feat_dim * dtype_bytes                       destination chunk V_j
  + n_j * max(feat_dim, hidden_dim) * dtype_bytes     accumulation chunk A_j (the aggregated
                                                       neighbours of the layer's input width)
  + |E_ij| * (index_bytes + edge_data_dim * dtype_bytes)   edge chunk: source ids (+ edge data)
  + (n_j + 1) * index_bytes                             its CSC column pointers

``<= gpu_memory_bytes``. ``edge_data_dim`` is 0 by default: NeuGraph's fused
propagation kernels (its graph propagation engine) do not materialize per-edge data; set it to
``feat_dim`` for the unfused Scatter output.

``num_parts`` is the number of GPUs. Each GPU streams whole columns (chain-based
scheduling, Figure 7: "each GPU streams one column of edge chunks"), so ``P`` is
the smallest *multiple* of ``num_parts`` that fits, GPU ``g`` owns the contiguous
destination chunks ``[g * P/k, (g+1) * P/k)``, and ``owner[v]`` is the GPU that
computes ``v``. Chunks are equal-vertex (``sizing="vertex"``, the paper's "equally-
sized" chunks; boundaries ``floor(i * V / P)``) or equal-edge (``sizing="edge"``).
When even the largest ``P`` (at most ``V``) does not fit, partitioning fails with a
one-line error. The chunk ids follow vertex ids: relabel a graph with a locality-
aware partitioner first (NeuGraph preprocesses with METIS) to condense edges near the
diagonal.
"""

from __future__ import annotations

import math

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.base import (
    ChunkGrid,
    Partitioner,
    PartitionResult,
    check_num_parts,
    contiguous_owner,
)
from workbench.strategies.partition.equal_edge import equal_edge_boundaries
from workbench.strategies.partition.equal_vertex import equal_vertex_boundaries

SIZINGS = ("vertex", "edge")


def _count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"partitioner 'chunk2d': {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class ChunkMemory:
    """Bytes of the working set for chunk sizes and edge-chunk counts (the formula in the module doc)."""

    def __init__(
        self, feat_dim: int, hidden_dim: int, dtype_bytes: int, index_bytes: int, edge_data_dim: int
    ) -> None:
        self.src_per_vertex = feat_dim * dtype_bytes
        # The accumulation holds the gathered neighbours at the layer's input width: the
        # features' on the first layer, the hidden width's on later ones (the widest counts).
        self.dst_per_vertex = (feat_dim + max(feat_dim, hidden_dim)) * dtype_bytes + index_bytes
        self.per_edge = index_bytes + edge_data_dim * dtype_bytes
        self.fixed = index_bytes

    def without_edges(self, sizes: np.ndarray) -> int:
        """Exact when no edge chunk holds an edge; a lower bound otherwise."""
        return int(sizes.max()) * (self.src_per_vertex + self.dst_per_vertex) + self.fixed

    def lower_bound(self, sizes: np.ndarray, num_edges: int) -> int:
        p = sizes.size
        densest = math.ceil(num_edges / (p * p))  # some edge chunk holds at least the mean
        floor = int(sizes.min()) * (self.src_per_vertex + self.dst_per_vertex) + self.fixed
        return max(self.without_edges(sizes), floor + densest * self.per_edge)

    def exact(self, sizes: np.ndarray, edge_counts: np.ndarray) -> int:
        src = sizes[:, None] * self.src_per_vertex
        dst = sizes[None, :] * self.dst_per_vertex + self.fixed
        return int((src + dst + edge_counts * self.per_edge).max())


def chunk_edge_counts(graph: CSRGraph, boundaries: np.ndarray) -> np.ndarray:
    """``P x P`` matrix: entry ``[i, j]`` counts edges from source chunk ``i`` to destination chunk ``j``."""
    p = boundaries.size - 1
    chunk = contiguous_owner(boundaries, graph.num_nodes)
    dst_chunk = np.repeat(chunk, np.diff(graph.indptr))
    flat = np.bincount(chunk[graph.indices] * p + dst_chunk, minlength=p * p)
    return flat.reshape(p, p).astype(np.int64)


@PARTITIONERS.register("chunk2d")
class Chunk2DPartitioner(Partitioner):
    """NeuGraph's 2D grid: the fewest vertex chunks (a multiple of the GPUs) whose working set fits GPU memory."""

    def __init__(
        self,
        gpu_memory_bytes: int | str = 16 * 2**30,
        feat_dim: int | None = None,
        hidden_dim: int = 256,
        dtype_bytes: int = 4,
        index_bytes: int = 4,
        edge_data_dim: int = 0,
        sizing: str = "vertex",
    ) -> None:
        from workbench.hardware.units import parse_size

        if isinstance(gpu_memory_bytes, bool):
            raise ConfigError("partitioner 'chunk2d': gpu_memory_bytes must be bytes or a size like 16GiB")
        memory = parse_size(gpu_memory_bytes, "partitioner 'chunk2d': gpu_memory_bytes")
        self.gpu_memory_bytes = _count(memory, "gpu_memory_bytes", 1)
        self.feat_dim = None if feat_dim is None else _count(feat_dim, "feat_dim", 1)
        self.hidden_dim = _count(hidden_dim, "hidden_dim", 0)
        self.dtype_bytes = _count(dtype_bytes, "dtype_bytes", 1)
        self.index_bytes = _count(index_bytes, "index_bytes", 1)
        self.edge_data_dim = _count(edge_data_dim, "edge_data_dim", 0)
        if sizing not in SIZINGS:
            raise ConfigError(f"partitioner 'chunk2d': sizing {sizing!r}; allowed: {', '.join(SIZINGS)}")
        self.sizing = sizing

    def _boundaries(self, graph: CSRGraph, p: int) -> np.ndarray:
        if self.sizing == "vertex":
            return equal_vertex_boundaries(graph.num_nodes, p)
        return equal_edge_boundaries(graph.indptr, p)

    def memory_model(self, graph: CSRGraph) -> ChunkMemory:
        feat_dim = self.feat_dim if self.feat_dim is not None else graph.feat_dim
        if feat_dim < 1:
            raise ConfigError(
                f"partitioner 'chunk2d': graph {graph.name!r} has no feature dimension; give feat_dim"
            )
        return ChunkMemory(feat_dim, self.hidden_dim, self.dtype_bytes, self.index_bytes, self.edge_data_dim)

    def choose_chunks(self, graph: CSRGraph, num_parts: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Boundaries, ``P x P`` edge counts and the working-set bytes of the smallest fitting ``P``."""
        model = self.memory_model(graph)
        n, m, budget = graph.num_nodes, graph.num_edges, self.gpu_memory_bytes
        most = n // num_parts  # P = num_parts * c with c in [1, most], so no chunk is empty

        def vertex_bound(c: int) -> int:
            # equal-vertex sizes: the largest chunk is never smaller under equal-edge sizing
            return model.without_edges(np.diff(equal_vertex_boundaries(n, num_parts * c)))

        if vertex_bound(most) > budget:
            raise ConfigError(
                f"partitioner 'chunk2d': {budget:,} bytes of GPU memory cannot hold even "
                f"{num_parts * most} vertex chunks of the {n:,} vertices ({vertex_bound(most):,} bytes "
                "for the smallest); give more memory or smaller feat_dim/hidden_dim"
            )
        lo, hi = 1, most  # the vertex-only bound falls as P grows: bisect to its first fit
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if vertex_bound(mid) <= budget else (mid + 1, hi)
        least = None  # the least any grid tried needs (a lower bound where it was not computed exactly)
        for c in range(lo, most + 1):
            bounds = self._boundaries(graph, num_parts * c)
            sizes = np.diff(bounds)
            need = model.lower_bound(sizes, m)
            if need <= budget:
                counts = chunk_edge_counts(graph, bounds)
                need = model.exact(sizes, counts)
                if need <= budget:
                    return bounds, counts, need
            least = need if least is None else min(least, need)
        raise ConfigError(
            f"partitioner 'chunk2d': {budget:,} bytes of GPU memory cannot hold the working set of any "
            f"grid up to {num_parts * most} chunks (each needs at least {least:,} bytes)"
        )

    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        k = check_num_parts(graph, num_parts, "chunk2d")
        bounds, counts, need = self.choose_chunks(graph, k)
        p = bounds.size - 1
        chunk = contiguous_owner(bounds, graph.num_nodes)
        owner = chunk // (p // k)
        return PartitionResult(
            graph,
            owner,
            k,
            strategy="chunk2d",
            chunk_grid=ChunkGrid(boundaries=bounds, edge_counts=counts),
            details={
                "chunks_per_part": p // k,
                "working_set_bytes": need,
                "gpu_memory_bytes": self.gpu_memory_bytes,
                "sizing": self.sizing,
            },
        )
