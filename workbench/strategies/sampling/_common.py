"""Helpers the sampler files share: eager argument checks and the node-wise layer loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
