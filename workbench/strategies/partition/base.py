"""The partitioner interface: an owner per vertex, and how good that assignment is.

A partitioner answers, for a graph and ``num_parts`` parts, ``owner[v]`` in
``[0, num_parts)`` for every vertex. It decides only: no device, no sleeping.
:class:`PartitionResult` carries the owner array and computes the quality
statistics every study compares partitioners by: the edge cut, and the vertex,
edge and training-vertex balance (the largest part over the mean part, 1.0 is
perfect). 2D schemes (NeuGraph's chunks) add the chunk grid.

Edges are counted the way the graph stores them: ``CSRGraph`` rows are
in-neighbor lists, so edge ``(u -> v)`` is stored in row ``v`` and belongs to the
part that owns its destination ``v`` (the part that aggregates over it). An edge is
cut when its source has another owner.

Online partitioners (ROC) take measured times back through :meth:`Partitioner.observe`;
the others ignore it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph


def check_num_parts(graph: CSRGraph, num_parts: int, strategy: str) -> int:
    """``num_parts`` as an int, or a one-line error when it is impossible for ``graph``."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise ConfigError(f"partitioner {strategy!r}: parts must be an integer, got {num_parts!r}")
    k = int(num_parts)
    if k < 1:
        raise ConfigError(f"partitioner {strategy!r}: parts must be at least 1, got {k}")
    if k > graph.num_nodes:
        raise ConfigError(
            f"partitioner {strategy!r}: {k} parts is more than the {graph.num_nodes} vertices of "
            f"graph {graph.name!r}"
        )
    return k


def balance(sizes: np.ndarray) -> float:
    """Largest part over the mean part (1.0 when perfectly even; 1.0 for an all-zero quantity)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    mean = sizes.mean() if sizes.size else 0.0
    return float(sizes.max() / mean) if mean > 0 else 1.0


@dataclass(frozen=True)
class ChunkGrid:
    """NeuGraph's 2D layout: ``P`` vertex chunks (``boundaries``) and ``P x P`` edge chunks.

    ``boundaries`` has ``P + 1`` entries; vertex chunk ``i`` is ``[boundaries[i],
    boundaries[i+1])``. ``edge_counts[i, j]`` is the number of edges from source chunk
    ``i`` to destination chunk ``j`` (NeuGraph's edge chunk E_ij).
    """

    boundaries: np.ndarray
    edge_counts: np.ndarray

    @property
    def num_chunks(self) -> int:
        return int(self.boundaries.size - 1)


@dataclass
class PartitionResult:
    """An owner per vertex of ``graph`` and the quality of that assignment."""

    graph: CSRGraph
    owner: np.ndarray
    num_parts: int
    strategy: str = ""
    chunk_grid: ChunkGrid | None = None
    # Strategy-specific facts a person wants printed (ROC's weights, chunk2d's P reason).
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        owner = np.asarray(self.owner)
        n = self.graph.num_nodes
        if owner.shape != (n,):
            raise ConfigError(f"partitioner {self.strategy!r} returned {owner.shape} owners for {n} vertices")
        if n and (owner.min() < 0 or owner.max() >= self.num_parts):
            raise ConfigError(f"partitioner {self.strategy!r} returned owners outside [0, {self.num_parts})")
        self.owner = owner.astype(np.int64, copy=False)

    @cached_property
    def vertex_counts(self) -> np.ndarray:
        return np.bincount(self.owner, minlength=self.num_parts).astype(np.int64)

    @cached_property
    def edge_counts(self) -> np.ndarray:
        """Edges per part, each counted at the part owning its destination."""
        deg = np.diff(self.graph.indptr)
        return np.bincount(self.owner, weights=deg, minlength=self.num_parts).astype(np.int64)

    @cached_property
    def train_counts(self) -> np.ndarray:
        mask = self.graph.train_mask
        if mask is None:
            return np.zeros(self.num_parts, dtype=np.int64)
        return np.bincount(self.owner[np.asarray(mask, dtype=bool)], minlength=self.num_parts).astype(
            np.int64
        )

    @cached_property
    def edge_cut(self) -> int:
        """Edges whose source and destination have different owners."""
        dst_owner = np.repeat(self.owner, np.diff(self.graph.indptr))
        return int(np.count_nonzero(self.owner[self.graph.indices] != dst_owner))

    @property
    def edge_cut_fraction(self) -> float:
        m = self.graph.num_edges
        return self.edge_cut / m if m else 0.0

    @property
    def vertex_balance(self) -> float:
        return balance(self.vertex_counts)

    @property
    def edge_balance(self) -> float:
        return balance(self.edge_counts)

    @property
    def train_balance(self) -> float:
        return balance(self.train_counts)

    def parts(self) -> list[np.ndarray]:
        """The sorted vertex ids of each part."""
        order = np.argsort(self.owner, kind="stable")
        return np.split(order, np.cumsum(self.vertex_counts)[:-1])

    def summary(self) -> dict[str, Any]:
        """The quality statistics as plain values (what ``gnnwb partition`` prints)."""
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "parts": self.num_parts,
            "vertices": self.graph.num_nodes,
            "edges": self.graph.num_edges,
            "edge_cut": self.edge_cut,
            "edge_cut_fraction": round(self.edge_cut_fraction, 6),
            "vertex_balance": round(self.vertex_balance, 6),
            "edge_balance": round(self.edge_balance, 6),
            "train_balance": round(self.train_balance, 6),
        }
        if self.chunk_grid is not None:
            out["chunks"] = self.chunk_grid.num_chunks
        out.update(self.details)
        return out


def contiguous_owner(boundaries: Sequence[int] | np.ndarray, num_nodes: int) -> np.ndarray:
    """Owner array for contiguous ranges: part ``i`` is ``[boundaries[i], boundaries[i+1])``."""
    b = np.asarray(boundaries, dtype=np.int64)
    if b.size < 2 or b[0] != 0 or b[-1] != num_nodes or np.any(np.diff(b) < 0):
        raise ValueError(f"range boundaries must rise from 0 to {num_nodes}, got {b.tolist()}")
    return np.repeat(np.arange(b.size - 1, dtype=np.int64), np.diff(b))


class Partitioner(ABC):
    """Assigns every vertex to one of ``num_parts`` parts."""

    registered_name: ClassVar[str] = ""

    @abstractmethod
    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        """Owner per vertex of ``graph``; ``rng`` is the only source of randomness."""

    def observe(self, measurements: Any) -> None:
        """Take measured times back from an executor; static partitioners ignore them."""
        return None
