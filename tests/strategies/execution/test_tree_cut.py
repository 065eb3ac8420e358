"""Cutting roots' computation trees out of sampled minibatches, against a walk with Python sets.

:func:`cut_trees` cuts every group of roots at once, each group a bit of one mask per
vertex; the reference below walks one group at a time, edge by edge, as section 4 of
paper 003 defines a micrograph.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench.graph.datasets import load_dataset
from workbench.registry import SAMPLERS
from workbench.strategies.execution import _kernels
from workbench.strategies.execution.micrographs import cut_trees, distinct, micrographs, micrographs_of
from workbench.strategies.sampling.base import Minibatch


def walk(mb: Minibatch, positions: np.ndarray) -> tuple[list[tuple[int, int, int]], set[int], list[int]]:
    """Sizes per layer (input layer first), layer-0 source ids, layer-0 edge source ids in edge order."""
    keep = {int(p) for p in positions}
    sizes, edges = [], []
    for block in reversed(mb.blocks):
        edges = [e for e in range(block.num_edges) if int(block.edge_dst[e]) in keep]
        sources = keep | {int(block.edge_src[e]) for e in edges}
        sizes.append((len(sources), len(keep), len(edges)))
        keep = sources
    first = mb.blocks[0]
    return (
        sizes[::-1],
        {int(first.src_nodes[p]) for p in keep},
        [int(first.src_nodes[first.edge_src[e]]) for e in edges],
    )


def sampled(seed: int, shuffled: bool) -> Minibatch:
    """A 3-layer minibatch of 40 seeds; ``shuffled``: every block's edges out of destination order."""
    graph = load_dataset("er:n=600,deg=6")
    rng = np.random.default_rng(seed)
    seeds = np.sort(rng.choice(graph.num_nodes, 40, replace=False))
    mb = SAMPLERS.create("neighbor", fanouts=[4, 3, 2]).sample(graph, seeds, rng)
    if shuffled:
        blocks = []
        for b in mb.blocks:
            order = rng.permutation(b.num_edges)
            blocks.append(dataclasses.replace(b, edge_src=b.edge_src[order], edge_dst=b.edge_dst[order]))
        mb = Minibatch(mb.seeds, blocks)
        assert mb.blocks[0].dst_offsets() is None  # the ungrouped path is the one under test
    return mb


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_group_is_the_walk_of_its_roots(seed: int, shuffled: bool) -> None:
    mb = sampled(seed, shuffled)
    rng = np.random.default_rng(seed + 100)
    # Overlapping groups, a single root, all roots, and more groups than one mask holds.
    groups = [rng.choice(40, int(rng.integers(1, 12)), replace=False) for _ in range(_kernels.LABELS + 5)]
    groups += [np.array([7]), np.arange(40)]
    trees = cut_trees(mb, groups, edge_sources=True)
    assert len(trees) == len(groups)
    for positions, tree in zip(groups, trees, strict=True):
        sizes, inputs, edge_sources = walk(mb, positions)
        assert tree.sizes == sizes
        assert sorted(tree.input_ids.tolist()) == sorted(inputs)
        assert tree.input_ids.shape[0] == len(inputs)  # distinct
        assert tree.edge_sources is not None and tree.edge_sources.tolist() == edge_sources


def test_cells_cut_together_equal_cells_cut_alone() -> None:
    row = [sampled(3, False), sampled(4, True)]
    rng = np.random.default_rng(5)
    cells = []
    for _ in range(6):  # roots of one or both workers' minibatches
        rows = [
            np.stack([np.full(k, w), rng.choice(40, k, replace=False)], axis=1)
            for w, k in enumerate(rng.integers(0, 9, 2))
        ]
        cells.append(np.concatenate(rows).astype(np.int64))
    together = micrographs_of(row, cells, edge_sources=True)
    for roots, mg in zip(cells, together, strict=True):
        alone = micrographs(row, roots, edge_sources=True)
        assert mg.sizes == alone.sizes and mg.sources == alone.sources
        assert np.array_equal(mg.roots, alone.roots) and np.array_equal(mg.input_nodes, alone.input_nodes)
        assert np.array_equal(mg.input_edge_src, alone.input_edge_src)  # type: ignore[arg-type]
        # Sizes add over the workers' trees; input vertices are their sorted union.
        walks = [walk(row[w], roots[roots[:, 0] == w, 1]) for w in mg.sources]
        assert mg.sizes == [tuple(sum(w[0][layer][k] for w in walks) for k in range(3)) for layer in range(3)]
        assert mg.input_nodes.tolist() == sorted(set().union(*(w[1] for w in walks)))


def test_split_by_code_is_a_stable_sort_by_code() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, 1000).astype(np.int16)
    vertices = rng.permutation(1000)[:300].astype(np.int64)
    grouped, counts = _kernels.split_by_code(vertices, codes[vertices], 6)
    order = np.argsort(codes[vertices], kind="stable")
    assert np.array_equal(grouped, vertices[order])
    assert counts.tolist() == np.bincount(codes[vertices], minlength=6).tolist()


def test_distinct_ids_are_the_sorted_set_by_either_path():
    rng = np.random.default_rng(7)
    bound = 1_000
    cases = [
        np.zeros(0, dtype=np.int64),
        np.array([bound - 1, 0, 63, 64, 63, 127, 128], dtype=np.int64),  # word edges, a repeat
        rng.integers(0, bound, 5_000).astype(np.int64),  # dense: the bitmap
        rng.integers(0, bound, 3).astype(np.int64),  # 3 * 64 < bound: the sort
        rng.integers(0, bound, 400).astype(np.int32),  # narrow ids
    ]
    for values in cases:
        expected = sorted(set(values.tolist()))
        assert distinct(values, bound).tolist() == expected
        assert distinct(values).tolist() == expected
