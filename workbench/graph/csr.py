"""The compressed-sparse-row graph every part of the workbench speaks.

Row ``v`` of the CSR lists the *in-neighbors* of ``v``: ``indices[indptr[v]:indptr[v+1]]``
are the sources ``u`` of the edges ``u -> v``. That is the direction a GNN layer
aggregates over (a vertex gathers from its in-neighbors), so samplers and cost
models read rows directly. For the symmetric graphs most studies use the two
directions coincide.

Features are materialized only when asked for (:meth:`CSRGraph.features`): a
products-sized graph's structure fits comfortably, its features are generated
deterministically from ``feature_seed`` and the labels when a study needs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from workbench.errors import GraphFormatError


class RowLengths:
    """The lengths of a CSR's rows read from its ``indptr`` where asked, not stored: ``lengths[ids]``
    (an array of row ids), ``lengths[lo:hi]``, ``lengths.sum()``. papers-like at full size has 111M
    rows; ``np.diff(indptr)`` is 0.9 GB and about a second per call, and a bulk plan asks once per
    sampling step for the lengths of a few million rows."""

    __slots__ = ("indptr",)

    def __init__(self, indptr: np.ndarray) -> None:
        self.indptr = indptr

    def __len__(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def __getitem__(self, key: np.ndarray | slice) -> np.ndarray:
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step != 1:
                raise ValueError("row lengths are sliced with step 1")
            return np.diff(self.indptr[lo : max(hi, lo) + 1])
        rows = np.asarray(key)
        return self.indptr[rows + 1] - self.indptr[rows]

    def sum(self) -> int:
        return int(self.indptr[-1] - self.indptr[0])


def index_dtype(num_nodes: int) -> type[np.signedinteger]:
    """The dtype of a graph's vertex ids: int32 below 2**31 vertices. papers100M's 1.6 billion
    edges take 6.5 GB of int32 sources against 12.9 GB of int64, which is what lets it fit a
    24 GB machine; edge counts (``indptr``) stay int64, as they pass 2**31 there."""
    return np.int32 if num_nodes < 2**31 - 1 else np.int64


@dataclass
class CSRGraph:
    """A directed graph in CSR form (rows are destinations), with optional node data."""

    indptr: np.ndarray
    indices: np.ndarray
    name: str = "graph"
    edge_weight: np.ndarray | None = None
    labels: np.ndarray | None = None
    num_classes: int = 0
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    feat_dim: int = 0
    feature_seed: int = 0
    # Ground-truth communities of a generated graph (SBM blocks), if any.
    communities: np.ndarray | None = None
    # Generator parameters, full-size record of a scaled preset, provenance.
    meta: dict[str, Any] = field(default_factory=dict)
    # Explicit features (loaded from a file); otherwise generated on demand.
    explicit_features: np.ndarray | None = field(default=None, repr=False)
    _feature_cache: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.indptr = np.ascontiguousarray(self.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(self.indices, dtype=index_dtype(self.indptr.shape[0] - 1))

    # ---- sizes -------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def in_degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def out_degrees(self) -> np.ndarray:
        return np.bincount(self.indices, minlength=self.num_nodes).astype(np.int64)

    def in_neighbors(self, v: int) -> np.ndarray:
        return self.indices[self.indptr[v] : self.indptr[v + 1]]

    def edge_dst(self) -> np.ndarray:
        """Destination of every edge, aligned with ``indices`` (the sources)."""
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.in_degrees())

    def train_nids(self) -> np.ndarray:
        if self.train_mask is None:
            return np.arange(self.num_nodes, dtype=np.int64)
        return np.flatnonzero(self.train_mask).astype(np.int64)

    # ---- construction ------------------------------------------------------
    @classmethod
    def from_edges(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        num_nodes: int,
        *,
        weight: np.ndarray | None = None,
        dedup: bool = True,
        **node_data: Any,
    ) -> CSRGraph:
        """Build from edge lists ``src -> dst``; sorts rows and (by default) drops duplicates."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise GraphFormatError(
                f"edge lists differ in length: {src.shape[0]} sources, {dst.shape[0]} destinations"
            )
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
            raise GraphFormatError(f"edge endpoint outside [0, {num_nodes})")
        if weight is None and dedup and src.size and num_nodes < 2**31 - 1:
            # scipy's COO -> CSR conversion is a counting sort plus per-row sorts in C++:
            # 40M edges take ~3 s instead of ~6 s for the key sort below.
            m = sp.csr_matrix(
                (np.ones(src.size, dtype=np.int8), (dst.astype(np.int32), src.astype(np.int32))),
                shape=(num_nodes, num_nodes),
            )
            m.sum_duplicates()  # sorted rows, duplicates merged
            return cls(indptr=m.indptr, indices=m.indices, **node_data)
        # One int64 key per edge (dst major, src minor) sorts 4-5x faster than
        # np.lexsort on two arrays: 20M edges take ~2 s instead of ~9 s here.
        key = dst * np.int64(max(num_nodes, 1)) + src
        w = None
        if weight is None:
            key.sort()
        else:
            order = np.argsort(key, kind="stable")
            key = key[order]
            w = np.asarray(weight, dtype=np.float32)[order]
        if dedup and key.size:
            keep = np.ones(key.shape[0], dtype=bool)
            np.not_equal(key[1:], key[:-1], out=keep[1:])
            key = key[keep]
            w = None if w is None else w[keep]
        dst, src = np.divmod(key, np.int64(max(num_nodes, 1)))
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
        return cls(indptr=indptr, indices=src, edge_weight=w, **node_data)

    @classmethod
    def from_scipy(cls, matrix: sp.spmatrix, **node_data: Any) -> CSRGraph:
        """From a square sparse matrix whose row ``v`` holds the in-neighbors of ``v``."""
        m = sp.csr_matrix(matrix)
        if m.shape[0] != m.shape[1]:
            raise GraphFormatError(f"adjacency matrix is not square: {m.shape}")
        m.sort_indices()
        w = m.data.astype(np.float32) if not np.all(m.data == 1) else None
        return cls(indptr=m.indptr, indices=m.indices, edge_weight=w, **node_data)

    def to_scipy(self, dtype: Any = np.float32) -> sp.csr_matrix:
        """Adjacency as ``scipy.sparse.csr_matrix``: ``A[v, u] = 1`` for each edge ``u -> v``."""
        data = self.edge_weight if self.edge_weight is not None else np.ones(self.num_edges, dtype=dtype)
        return sp.csr_matrix(
            (data.astype(dtype, copy=False), self.indices, self.indptr), shape=(self.num_nodes,) * 2
        )

    def with_structure(
        self, indptr: np.ndarray, indices: np.ndarray, edge_weight: np.ndarray | None = None
    ) -> CSRGraph:
        """Same node data, new edges."""
        return replace(self, indptr=indptr, indices=indices, edge_weight=edge_weight, _feature_cache=None)

    # ---- transforms --------------------------------------------------------
    def symmetrize(self) -> CSRGraph:
        """Add the reverse of every edge (duplicates removed; weights dropped)."""
        dst = self.edge_dst()
        g = CSRGraph.from_edges(
            np.concatenate([self.indices, dst]), np.concatenate([dst, self.indices]), self.num_nodes
        )
        return self.with_structure(g.indptr, g.indices)

    def add_self_loops(self) -> CSRGraph:
        """Ensure every vertex has exactly one self loop."""
        n = self.num_nodes
        dst = self.edge_dst()
        keep = self.indices != dst
        loops = np.arange(n, dtype=np.int64)
        g = CSRGraph.from_edges(
            np.concatenate([self.indices[keep], loops]), np.concatenate([dst[keep], loops]), n
        )
        return self.with_structure(g.indptr, g.indices)

    def remove_self_loops(self) -> CSRGraph:
        dst = self.edge_dst()
        keep = self.indices != dst
        g = CSRGraph.from_edges(self.indices[keep], dst[keep], self.num_nodes, dedup=False)
        return self.with_structure(g.indptr, g.indices)

    def relabel(self, new_id: np.ndarray) -> CSRGraph:
        """Renumber vertices: old vertex ``v`` becomes ``new_id[v]`` (a permutation)."""
        new_id = np.asarray(new_id, dtype=np.int64)
        n = self.num_nodes
        if new_id.shape != (n,) or not np.array_equal(np.sort(new_id), np.arange(n)):
            raise GraphFormatError("relabel: new_id must be a permutation of 0..num_nodes-1")
        old_of_new = np.empty(n, dtype=np.int64)
        old_of_new[new_id] = np.arange(n, dtype=np.int64)
        g = CSRGraph.from_edges(
            new_id[self.indices], new_id[self.edge_dst()], n, weight=self.edge_weight, dedup=False
        )

        def perm(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[old_of_new]

        return replace(
            self,
            indptr=g.indptr,
            indices=g.indices,
            edge_weight=g.edge_weight,
            labels=perm(self.labels),
            train_mask=perm(self.train_mask),
            val_mask=perm(self.val_mask),
            test_mask=perm(self.test_mask),
            communities=perm(self.communities),
            explicit_features=perm(self.explicit_features),
            _feature_cache=perm(self._feature_cache),
        )

    # ---- node data ---------------------------------------------------------
    def features(self, nodes: np.ndarray | None = None) -> np.ndarray:
        """Float32 features of ``nodes`` (all vertices when ``None``), materialized on first use.

        Generated features carry learnable signal: a class centroid plus Gaussian
        noise, so a GNN (which also averages over same-community neighbors) beats
        chance clearly.
        """
        if self.explicit_features is not None:
            full = self.explicit_features
        else:
            if self._feature_cache is None:
                self._feature_cache = generate_features(self)
            full = self._feature_cache
        return full if nodes is None else full[np.asarray(nodes, dtype=np.int64)]

    def forget_features(self) -> None:
        """Drop generated features materialized so far: the next :meth:`features` generates them
        again, from what the graph says now (its labels, feature dimension and seed)."""
        self._feature_cache = None

    def feature_bytes_per_vertex(self, dtype_bytes: int = 4) -> int:
        return self.feat_dim * dtype_bytes

    # ---- checks ------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`GraphFormatError` if a CSR invariant does not hold."""
        n, ip, ix = self.num_nodes, self.indptr, self.indices
        if ip.ndim != 1 or ip.shape[0] < 1:
            raise GraphFormatError(f"{self.name}: indptr must be a 1-D array of length num_nodes+1")
        if ip[0] != 0 or ip[-1] != ix.shape[0]:
            raise GraphFormatError(
                f"{self.name}: indptr must start at 0 and end at the edge count {ix.shape[0]}"
            )
        if np.any(np.diff(ip) < 0):
            raise GraphFormatError(f"{self.name}: indptr is not non-decreasing")
        if ix.size and (ix.min() < 0 or ix.max() >= n):
            raise GraphFormatError(f"{self.name}: an edge source is outside [0, {n})")
        if self.edge_weight is not None and self.edge_weight.shape != ix.shape:
            raise GraphFormatError(
                f"{self.name}: edge_weight has {self.edge_weight.shape[0]} entries for {ix.shape[0]} edges"
            )
        for attr in ("labels", "train_mask", "val_mask", "test_mask", "communities"):
            a = getattr(self, attr)
            if a is not None and a.shape[0] != n:
                raise GraphFormatError(f"{self.name}: {attr} has {a.shape[0]} entries for {n} vertices")
        if self.explicit_features is not None and self.explicit_features.shape[0] != n:
            raise GraphFormatError(
                f"{self.name}: features have {self.explicit_features.shape[0]} rows for {n} vertices"
            )

    def summary(self) -> dict[str, Any]:
        deg = self.in_degrees()
        return {
            "name": self.name,
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "mean_degree": float(deg.mean()) if deg.size else 0.0,
            "median_degree": float(np.median(deg)) if deg.size else 0.0,
            "max_degree": int(deg.max()) if deg.size else 0,
            "p99_degree": float(np.percentile(deg, 99)) if deg.size else 0.0,
            "isolated": int(np.count_nonzero((deg == 0) & (self.out_degrees() == 0))),
            "feature_dim": self.feat_dim,
            "classes": self.num_classes,
            "train": int(self.train_mask.sum()) if self.train_mask is not None else self.num_nodes,
        }


def generate_features(graph: CSRGraph) -> np.ndarray:
    """Deterministic features with class signal: ``signal * centroid[label] + N(0, 1)``.

    ``signal`` is ``graph.meta["feature_signal"]`` (1.0 when absent). Generated data
    sets (:func:`workbench.graph.signal.attach_node_data`) set it so that one vertex's
    own features identify its class only weakly and averaging over its (mostly
    same-class) neighbors sharpens it: a GNN then beats a per-vertex classifier.
    """
    n, d = graph.num_nodes, graph.feat_dim
    rng = np.random.default_rng([graph.feature_seed, 0xFEA7])
    x = rng.standard_normal((n, d), dtype=np.float32)
    if graph.labels is not None and graph.num_classes > 0 and d > 0:
        centroids = rng.standard_normal((graph.num_classes, d), dtype=np.float32)
        signal = np.float32(graph.meta.get("feature_signal", 1.0))
        x += signal * centroids[graph.labels]
    return x
