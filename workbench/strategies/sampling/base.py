"""The sampler interface and the minibatch structure every sampler returns.

Conventions (DGL's, so the real executor can hand blocks to DGL or to plain-PyTorch
layers without translation):

* ``Minibatch.blocks`` are ordered input layer first: ``blocks[0]`` consumes the
  input features of ``blocks[0].src_nodes``; the last block's ``dst_nodes`` are the
  seeds.
* ``blocks[l].dst_nodes`` equals ``blocks[l + 1].src_nodes`` (the vertices whose
  layer-``l`` output the next layer consumes).
* Within a block the destination vertices come first among the sources:
  ``src_nodes[:len(dst_nodes)] == dst_nodes``, so a layer can read a vertex's own
  previous representation.
* Vertex ids are real (global) ids; edges are local indices
  (``edge_src`` into ``src_nodes``, ``edge_dst`` into ``dst_nodes``); no vertex
  appears twice in ``src_nodes`` or in ``dst_nodes``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workbench.errors import WorkbenchError
from workbench.graph.csr import CSRGraph

_NO_ORDER = np.zeros(0, dtype=np.int64)


@dataclass
class Block:
    """One sampled layer: a bipartite graph from ``src_nodes`` to ``dst_nodes``."""

    src_nodes: np.ndarray
    dst_nodes: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    # Per-edge weights for samplers that reweight (LADIES, FastGCN importance
    # weights); None means plain mean/sum aggregation.
    edge_weight: np.ndarray | None = None

    @property
    def num_src(self) -> int:
        return int(self.src_nodes.shape[0])

    @property
    def num_dst(self) -> int:
        return int(self.dst_nodes.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.shape[0])

    def dst_offsets(self) -> np.ndarray | None:
        """Where each destination's edges start, when edges are grouped by destination (the
        workbench's samplers emit them so): destination ``j``'s edges are
        ``offsets[j]:offsets[j + 1]``. None when they are not grouped. Computed once per block."""
        cached = self.__dict__.get("_dst_offsets", False)
        if cached is False:
            d = self.edge_dst
            grouped = d.shape[0] < 2 or bool(np.all(d[1:] >= d[:-1]))
            cached = np.searchsorted(d, np.arange(self.num_dst + 1)) if grouped else None
            self.__dict__["_dst_offsets"] = cached
        return cached

    def dst_grouping(self) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, order)``: destination ``j``'s edges are ``order[offsets[j]:offsets[j + 1]]``,
        in edge order; ``order`` is empty when the edges are grouped already (then the
        positions themselves). Computed once per block."""
        offsets = self.dst_offsets()
        if offsets is not None:
            return offsets, _NO_ORDER
        cached = self.__dict__.get("_dst_grouping")
        if cached is None:
            order = np.argsort(self.edge_dst, kind="stable")
            cached = (np.searchsorted(self.edge_dst[order], np.arange(self.num_dst + 1)), order)
            self.__dict__["_dst_grouping"] = cached
        return cached


@dataclass
class Minibatch:
    seeds: np.ndarray
    blocks: list[Block]

    @property
    def input_nodes(self) -> np.ndarray:
        """Vertices whose input features the first layer needs."""
        return self.blocks[0].src_nodes if self.blocks else self.seeds


class Sampler(ABC):
    """Turns seed vertices into per-layer blocks. Pure: randomness only from ``rng``."""

    @abstractmethod
    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        """Sample one minibatch rooted at ``seeds``."""

    def sample_many(
        self, graph: CSRGraph, batches: Sequence[np.ndarray], rng: np.random.Generator
    ) -> list[Minibatch]:
        """Sample several minibatches; bulk samplers override this to do them at once."""
        return [self.sample(graph, b, rng) for b in batches]

    def sample_window(
        self,
        graph: CSRGraph,
        batches: Sequence[np.ndarray],
        rng: np.random.Generator,
        keep: range,
        sizes_before: Sequence[tuple[int, ...]] | None = None,
    ) -> list[Minibatch]:
        """Minibatches ``keep`` of what :meth:`sample_many` would return for ``batches``, leaving
        ``rng`` where that call leaves it; a bulk sampler may skip the work they do not depend on.
        ``sizes_before``: what an earlier call drew for ``batches[:keep.start]``, each minibatch's
        blocks' destination counts (input layer first), which a bulk sampler may use instead of
        drawing those batches again."""
        drawn = self.sample_many(graph, batches, rng)
        return [drawn[j] for j in keep]


def check_seeds(graph: CSRGraph, seeds: np.ndarray) -> np.ndarray:
    """Seeds as int64, rejecting ids outside the graph and duplicates."""
    s = np.asarray(seeds, dtype=np.int64)
    if s.ndim != 1:
        raise WorkbenchError(f"seeds must be a 1-D array of vertex ids, got shape {s.shape}")
    if s.size and (s.min() < 0 or s.max() >= graph.num_nodes):
        bad = s[(s < 0) | (s >= graph.num_nodes)][0]
        raise WorkbenchError(
            f"seed vertex {int(bad)} is outside graph {graph.name!r} (0..{graph.num_nodes - 1})"
        )
    if np.unique(s).shape[0] != s.shape[0]:
        raise WorkbenchError("seeds contain duplicate vertices")
    return s


def check_block_invariants(mb: Minibatch) -> None:
    """Assert the conventions above (used by tests of every sampler)."""
    assert mb.blocks, "a minibatch needs at least one block"
    assert np.array_equal(mb.blocks[-1].dst_nodes, mb.seeds), "last block's destinations must be the seeds"
    for layer, b in enumerate(mb.blocks):
        assert np.unique(b.src_nodes).shape[0] == b.num_src, f"layer {layer}: duplicate source vertices"
        assert np.unique(b.dst_nodes).shape[0] == b.num_dst, f"layer {layer}: duplicate destination vertices"
        assert np.array_equal(b.src_nodes[: b.num_dst], b.dst_nodes), (
            f"layer {layer}: destinations must prefix sources"
        )
        assert b.edge_src.shape == b.edge_dst.shape, f"layer {layer}: edge arrays differ in length"
        if b.num_edges:
            assert 0 <= b.edge_src.min() and b.edge_src.max() < b.num_src, (
                f"layer {layer}: edge source outside block"
            )
            assert 0 <= b.edge_dst.min() and b.edge_dst.max() < b.num_dst, (
                f"layer {layer}: edge destination outside block"
            )
        if layer + 1 < len(mb.blocks):
            assert np.array_equal(b.dst_nodes, mb.blocks[layer + 1].src_nodes), (
                f"layer {layer}: destinations must be the next layer's sources"
            )
