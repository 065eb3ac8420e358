"""bulk-matrix's ``sample_window``: the kept minibatches of a bulk call, without the work they do not need.

A row's numbers depend on its layer's seed and its place in the bulk pass's stacked rows, so
the window must equal the slice of ``sample_many`` array for array, leave the generator where
``sample_many`` leaves it, and skip the input layer of the batches before it and everything
after it (else a streamed epoch samples each chunk once per window).
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi
from workbench.registry import SAMPLERS
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler

from .test_bulk_backends import GRAPHS, assert_same_blocks, batches_of

BATCHES = 7
BULK = 3  # passes [0, 3), [3, 6), [6, 7): windows inside one, across two, and in the short last


def multigraph() -> CSRGraph:
    """Duplicate edges: scipy's P then has merged entries and takes the weighted path."""
    base = erdos_renyi(2000, 10.0, seed=1)
    src = np.concatenate([base.indices, base.indices[:900]])
    dst = np.concatenate([base.edge_dst(), base.edge_dst()[:900]])
    return CSRGraph.from_edges(src, dst, 2000, dedup=False)


def rows_sampled(monkeypatch) -> list[int]:
    """The rows each GraphSAGE layer call samples from now on, in call order (seeds' layer first)."""
    rows: list[int] = []
    original = BulkMatrixSampler._graphsage_layer
    monkeypatch.setattr(
        BulkMatrixSampler,
        "_graphsage_layer",
        lambda self, graph, dst, *a: rows.append(dst.shape[0]) or original(self, graph, dst, *a),
    )
    return rows


WINDOWS = [range(0, 1), range(1, 2), range(2, 5), range(4, 7), range(6, 7), range(0, 7), range(3, 6)]


@pytest.mark.parametrize("spgemm", ["fused", "scipy", "torch"])
@pytest.mark.parametrize("graph_name", ["hubs", "multi"])
def test_a_window_is_the_slice_of_the_whole_call(graph_name: str, spgemm: str) -> None:
    graph = multigraph() if graph_name == "multi" else GRAPHS[graph_name]()
    batches = batches_of(graph, 5, BATCHES, 40)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[6, 4, 3], bulk=BULK, spgemm=spgemm)
    whole_rng = np.random.default_rng(11)
    whole = sampler.sample_many(graph, batches, whole_rng)
    for keep in WINDOWS:
        rng = np.random.default_rng(11)
        window = sampler.sample_window(graph, batches, rng, keep)
        assert_same_blocks(window, [whole[j] for j in keep])
        assert rng.bit_generator.state == whole_rng.bit_generator.state, keep


def test_a_window_skips_the_input_layer_before_it_and_every_batch_after_it(monkeypatch) -> None:
    """Rows sampled per layer, counted: batches 0..5 in passes of 3, window [4, 5). Pass [0, 3)
    only draws its seeds; pass [3, 6) samples batches 3 and 4 at the two layers nearer the
    seeds and batch 4 alone at the input layer; nothing of batch 5 or pass [6, 7)."""
    graph = GRAPHS["er"]()
    batches = batches_of(graph, 2, BATCHES, 30)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[5, 4, 3], bulk=BULK)
    rows = rows_sampled(monkeypatch)
    whole = sampler.sample_many(graph, batches, np.random.default_rng(0))
    rows.clear()
    window = sampler.sample_window(graph, batches, np.random.default_rng(0), range(4, 5))
    assert_same_blocks(window, [whole[4]])
    seeds_layer = 30 + 30  # batches 3 and 4 at the seeds
    middle = whole[3].blocks[1].num_dst + whole[4].blocks[1].num_dst
    assert rows == [seeds_layer, middle, whole[4].blocks[0].num_dst]


@pytest.mark.parametrize("spgemm", ["fused", "scipy"])
def test_a_window_told_the_earlier_batches_sizes_samples_the_kept_ones_alone(monkeypatch, spgemm) -> None:
    """With the destination counts of the batches before it (what a streamed epoch drew in its
    earlier windows), window [4, 6) samples batches 4 and 5 at every layer and nothing of batch 3
    nor of pass [0, 3); the same arrays as the whole call, every window of WINDOWS, the generator
    left where the whole call leaves it."""
    graph = GRAPHS["hubs"]()
    batches = batches_of(graph, 5, BATCHES, 40)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[6, 4, 3], bulk=BULK, spgemm=spgemm)
    whole_rng = np.random.default_rng(11)
    whole = sampler.sample_many(graph, batches, whole_rng)
    sizes = [tuple(b.num_dst for b in mb.blocks) for mb in whole]
    for keep in WINDOWS:
        rng = np.random.default_rng(11)
        window = sampler.sample_window(graph, batches, rng, keep, sizes[: keep.start])
        assert_same_blocks(window, [whole[j] for j in keep])
        assert rng.bit_generator.state == whole_rng.bit_generator.state, keep
    rows = rows_sampled(monkeypatch)
    window = sampler.sample_window(graph, batches, np.random.default_rng(11), range(4, 6), sizes[:4])
    assert_same_blocks(window, whole[4:6])
    assert rows == [whole[4].blocks[layer].num_dst + whole[5].blocks[layer].num_dst for layer in (2, 1, 0)]


def test_ladies_windows_are_slices_too() -> None:
    graph = GRAPHS["er"]()
    batches = batches_of(graph, 3, 5, 40)
    sampler = SAMPLERS.create("bulk-matrix", algorithm="ladies", layer_sizes=[64, 32], bulk=2)
    whole_rng = np.random.default_rng(4)
    whole = sampler.sample_many(graph, batches, whole_rng)
    rng = np.random.default_rng(4)
    assert_same_blocks(sampler.sample_window(graph, batches, rng, range(1, 4)), whole[1:4])
    assert rng.bit_generator.state == whole_rng.bit_generator.state
