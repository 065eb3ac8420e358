"""``ladies``: layer-wise dependency sampling (Zou et al. 2019), one minibatch at a time.

Paper 004 (``papers/004_48b849e12cfdd076.txt``; Tripathy, Yelick, Buluc), sections 2.2.2 and 4.2: each layer samples
one set of ``s`` vertices for the whole batch, from the batch's aggregated
neighborhood only, and keeps every edge between the batch and the sampled set.

Formulas (those of the LADIES reference implementation, which paper 004's matrix form
reproduces with ``P = Q (A_hat o A_hat)``):

* normalized adjacency ``A_hat = D^-1 (A + I)`` (row-normalized, self loops added;
  row ``v`` aggregates over the in-neighbors of ``v``);
* for destination vertices ``B`` of the layer, candidate ``j`` has probability
  ``p_j = ||A_hat[B, j]||^2 / sum_k ||A_hat[B, k]||^2`` (squared column norm of the
  batch rows), which is positive exactly on the aggregated neighborhood of ``B``
  (itself included, through the self loops);
* ``s`` candidates are drawn without replacement (successive sampling: inverse
  transform sampling with the drawn ones removed), and ``B`` is added to them so that
  every destination can read its own previous representation;
* edge ``j -> i`` of the block has weight ``A_hat[i, j] / p_j``, each destination's
  weights normalized to sum to 1 (the estimator's importance correction).

``layer_sizes`` are listed input layer first, like fanouts. A layer size larger than
the number of candidates (vertices of positive probability) is an error: the layer
cannot hold ``s`` distinct vertices.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from workbench.errors import WorkbenchError
from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import check_positive_ints
from workbench.strategies.sampling.base import Block, Minibatch, Sampler, check_seeds


def normalized_adjacency(graph: CSRGraph) -> sp.csr_matrix:
    """``A_hat = D^-1 (A + I)`` as float64 CSR with sorted indices (existing self loops kept once)."""
    n = graph.num_nodes
    a = graph.to_scipy(dtype=np.float64)
    a = a - sp.diags(a.diagonal()) + sp.identity(n, dtype=np.float64, format="csr")
    a = sp.csr_matrix(a)
    a.eliminate_zeros()
    a.sort_indices()
    row_sums = np.asarray(a.sum(axis=1)).ravel()
    a.data /= np.repeat(row_sums, np.diff(a.indptr))
    return a


class NormalizedAdjacencyCache:
    """Memo of ``A_hat`` and ``A_hat o A_hat`` for the last graph seen (results do not depend on it)."""

    def __init__(self) -> None:
        self._graph: weakref.ref[CSRGraph] | None = None
        self._matrices: tuple[sp.csr_matrix, sp.csr_matrix] | None = None

    def get(self, graph: CSRGraph) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        if self._graph is None or self._graph() is not graph or self._matrices is None:
            a_hat = normalized_adjacency(graph)
            squared = a_hat.multiply(a_hat).tocsr()
            squared.sort_indices()
            self._graph = weakref.ref(graph)
            self._matrices = (a_hat, squared)
        return self._matrices


def ladies_layer_distribution(a_hat: sp.csr_matrix, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of a layer (sorted vertex ids) and their LADIES probabilities.

    ``p_j`` is proportional to ``||A_hat[dst, j]||^2``; only ``j`` with ``p_j > 0``
    (the aggregated neighborhood of ``dst``) are returned.
    """
    rows = a_hat[np.asarray(dst, dtype=np.int64)]
    squared = np.asarray(rows.multiply(rows).sum(axis=0)).ravel()
    candidates = np.flatnonzero(squared > 0)
    weights = squared[candidates]
    return candidates.astype(np.int64), weights / weights.sum()


def draw_without_replacement(
    candidates: np.ndarray, probabilities: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """``size`` distinct candidates by inverse transform sampling (paper 004, section 4.1.2)."""
    begin = np.zeros(1, dtype=np.int64)
    end = np.array([candidates.shape[0]], dtype=np.int64)
    offsets = np.array([0, size], dtype=np.int64)
    empty = np.empty(0, dtype=np.float64)
    return _kernels.its_sample_rows(
        begin, end, candidates, probabilities.astype(np.float64), empty, offsets, _kernels.draw_seed(rng)
    )


def check_layer_size(size: int, available: int, layer: int, who: str, what: str) -> None:
    if size > available:
        raise WorkbenchError(
            f"{who}: layer {layer} asks for {size} vertices but {what} has only {available} "
            f"vertices of positive probability; lower layer_sizes[{layer}] to at most {available}"
        )


def layerwise_block(
    rows: sp.csr_matrix,
    dst: np.ndarray,
    sampled: np.ndarray,
    probability_of: np.ndarray,
    edge_columns: np.ndarray | None = None,
) -> Block:
    """The block of a layer-wise sampler: sources ``dst`` then the new sampled vertices.

    ``rows`` is ``A_hat[dst]``; edges are its entries in the columns of ``edge_columns``
    (all sources when None), weighted ``A_hat[i, j] / p_j`` and normalized per
    destination; ``probability_of[t]`` is ``p`` of source ``t``.
    """
    new = sampled[~np.isin(sampled, dst)]
    src = np.concatenate([dst, new]).astype(np.int64)
    keep_cols = src if edge_columns is None else edge_columns
    # Column extraction (paper 004, section 4.2.3): rows @ Q_C, Q_C[src[t], t] = 1 for kept columns.
    local = np.flatnonzero(np.isin(src, keep_cols))
    q_c = sp.csr_matrix((np.ones(local.shape[0]), (src[local], local)), shape=(rows.shape[1], src.shape[0]))
    extracted = (rows @ q_c).tocoo()
    weight = extracted.data / probability_of[extracted.col]
    sums = np.bincount(extracted.row, weights=weight, minlength=dst.shape[0])
    weight = weight / sums[extracted.row]
    order = np.lexsort((extracted.col, extracted.row))
    return Block(
        src_nodes=src,
        dst_nodes=np.asarray(dst, dtype=np.int64),
        edge_src=extracted.col[order].astype(np.int64),
        edge_dst=extracted.row[order].astype(np.int64),
        edge_weight=weight[order].astype(np.float32),
    )


@SAMPLERS.register("ladies")
class LadiesSampler(Sampler):
    """LADIES layer-wise sampling: ``layer_sizes[l]`` vertices per layer from the batch's neighborhood."""

    def __init__(self, layer_sizes: Sequence[int]) -> None:
        self.layer_sizes = check_positive_ints(layer_sizes, "layer_sizes", "sampler 'ladies'")
        self._adjacency = NormalizedAdjacencyCache()

    def __repr__(self) -> str:
        return f"LadiesSampler(layer_sizes={list(self.layer_sizes)})"

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        seeds = check_seeds(graph, seeds)
        a_hat, _ = self._adjacency.get(graph)
        dst = seeds
        blocks: list[Block] = []
        for layer in range(len(self.layer_sizes) - 1, -1, -1):
            size = self.layer_sizes[layer]
            candidates, p = ladies_layer_distribution(a_hat, dst)
            check_layer_size(size, candidates.shape[0], layer, "sampler 'ladies'", "the batch's neighborhood")
            sampled = draw_without_replacement(candidates, p, size, rng)
            rows = a_hat[dst]
            new = sampled[~np.isin(sampled, dst)]
            src = np.concatenate([dst, new])
            probability_of = p[np.searchsorted(candidates, src)]
            block = layerwise_block(rows, dst, sampled, probability_of)
            blocks.append(block)
            dst = block.src_nodes
        blocks.reverse()
        return Minibatch(seeds=seeds, blocks=blocks)
