"""Tiny samplers written for these tests, so they need not wait for the sampling package."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph
from workbench.strategies.sampling.base import Block, Minibatch, Sampler


def _block(graph: CSRGraph, dst: np.ndarray, fanout: int | None, rng: np.random.Generator) -> Block:
    """All in-neighbors of ``dst`` (fanout None) or ``fanout`` of them drawn without replacement."""
    src_list, edge_src_v, edge_dst = [], [], []
    for i, v in enumerate(dst):
        nbrs = graph.in_neighbors(int(v))
        if fanout is not None and nbrs.shape[0] > fanout:
            nbrs = rng.choice(nbrs, size=fanout, replace=False)
        edge_src_v.extend(int(u) for u in nbrs)
        edge_dst.extend([i] * nbrs.shape[0])
    seen = {int(v): i for i, v in enumerate(dst)}
    for u in edge_src_v:
        if u not in seen:
            seen[u] = len(seen)
    src_list = list(seen)
    return Block(
        src_nodes=np.array(src_list, dtype=np.int64),
        dst_nodes=np.asarray(dst, dtype=np.int64),
        edge_src=np.array([seen[u] for u in edge_src_v], dtype=np.int64),
        edge_dst=np.array(edge_dst, dtype=np.int64),
    )


class TinyFanoutSampler(Sampler):
    """Node-wise sampling, fanout None meaning the full neighborhood; input layer first (DGL order)."""

    def __init__(self, fanouts: list[int | None]) -> None:
        self.fanouts = fanouts

    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        seeds = np.asarray(seeds, dtype=np.int64)
        blocks = []
        dst = seeds
        for fanout in reversed(self.fanouts):
            b = _block(graph, dst, fanout, rng)
            blocks.insert(0, b)
            dst = b.src_nodes
        return Minibatch(seeds=seeds, blocks=blocks)


@pytest.fixture
def full_sampler_2hop() -> Sampler:
    return TinyFanoutSampler([None, None])


@pytest.fixture
def full_sampler_1hop() -> Sampler:
    return TinyFanoutSampler([None])


@pytest.fixture
def fanout_sampler() -> Sampler:
    return TinyFanoutSampler([2, 2])
