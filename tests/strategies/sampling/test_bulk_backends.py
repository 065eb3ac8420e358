"""bulk-matrix's back ends: the same seed gives the same samples with every back end.

GraphSAGE: ``fused``, ``scipy`` and ``torch`` (here on the CPU) draw the same entries
of the same rows from the same random stream and relabel them the same way, so their
blocks are equal array for array. LADIES: ``scipy`` and ``torch`` run step 2 with the
same kernel on the host; their ``P`` can differ only by the rounding of the SpGEMM's
sums, which moves a draw only when it falls within rounding of a prefix-sum boundary
(see the module docstring), so on these graphs they are equal too, weights to rounding.
On a multigraph the back ends differ by construction (scipy's SpGEMM merges duplicate
edges); that case is tested for what does hold.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi, rmat
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling.base import Minibatch, check_block_invariants
from workbench.strategies.sampling.bulk_matrix import _TorchSpGEMM


def hub_graph() -> CSRGraph:
    """ER plus rows of every kind the draws treat apart: > 4096 entries (the scan), 65..4096
    (the bit set), <= 64 (one mask, keeping or leaving out), and rows kept whole."""
    base = erdos_renyi(6000, 8.0, seed=3)
    rng = np.random.default_rng(4)
    src = [base.indices]
    dst = [base.edge_dst()]
    for hub, degree in [(0, 5000), (1, 300), (2, 64), (3, 40), (4, 17)]:
        src.append(rng.choice(np.arange(10, 6000), degree, replace=False))
        dst.append(np.full(degree, hub))
    return CSRGraph.from_edges(np.concatenate(src), np.concatenate(dst), 6000, name="hubs")


GRAPHS = {
    "er": lambda: erdos_renyi(3000, 12.0, seed=2),
    "rmat": lambda: rmat(4096, 60_000, seed=5),
    "hubs": hub_graph,
}


def batches_of(graph: CSRGraph, seed: int, count: int, size: int) -> list[np.ndarray]:
    """``count`` batches of distinct vertices; the first starts with 0..4 (hub_graph's hubs)."""
    rng = np.random.default_rng(seed)
    first = np.concatenate([np.arange(5), 5 + rng.choice(graph.num_nodes - 5, size - 5, replace=False)])
    return [first] + [rng.choice(graph.num_nodes, size, replace=False) for _ in range(count - 1)]


def sample(graph: CSRGraph, seed: int, **params) -> list[Minibatch]:
    sampler = SAMPLERS.create("bulk-matrix", **params)
    return sampler.sample_many(graph, batches_of(graph, seed, 5, 60), np.random.default_rng(seed))


def assert_same_blocks(first: list[Minibatch], second: list[Minibatch], exact_weights: bool = True) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(a.seeds, b.seeds)
        assert len(a.blocks) == len(b.blocks)
        for x, y in zip(a.blocks, b.blocks, strict=True):
            for name in ("src_nodes", "dst_nodes", "edge_src", "edge_dst"):
                assert np.array_equal(getattr(x, name), getattr(y, name)), name
            if x.edge_weight is None or y.edge_weight is None:
                assert x.edge_weight is None and y.edge_weight is None
            elif exact_weights:
                assert np.array_equal(x.edge_weight, y.edge_weight)
            else:
                np.testing.assert_allclose(x.edge_weight, y.edge_weight, rtol=1e-12)


@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
def test_graphsage_back_ends_give_identical_blocks(graph_name: str) -> None:
    graph = GRAPHS[graph_name]()
    for seed in range(3):
        runs = {
            backend: sample(graph, seed, fanouts=[15, 10, 5], bulk=2, spgemm=backend)
            for backend in ("fused", "scipy", "torch")
        }
        for mb in runs["fused"]:
            check_block_invariants(mb)
        assert_same_blocks(runs["fused"], runs["scipy"])
        assert_same_blocks(runs["fused"], runs["torch"])


def test_graphsage_default_is_fused_and_other_seeds_differ() -> None:
    graph = GRAPHS["er"]()
    default = sample(graph, 0, fanouts=[4, 3], bulk=3)
    assert_same_blocks(default, sample(graph, 0, fanouts=[4, 3], bulk=3, spgemm="fused"))
    other = sample(graph, 1, fanouts=[4, 3], bulk=3)
    assert not np.array_equal(default[0].blocks[-1].src_nodes, other[0].blocks[-1].src_nodes)


@pytest.mark.parametrize("graph_name", ["er", "rmat"])
def test_ladies_back_ends_give_the_same_samples(graph_name: str) -> None:
    graph = GRAPHS[graph_name]()
    for seed in range(3):
        scipy_run = sample(graph, seed, algorithm="ladies", layer_sizes=[40, 30], bulk=2, spgemm="scipy")
        torch_run = sample(graph, seed, algorithm="ladies", layer_sizes=[40, 30], bulk=2, spgemm="torch")
        assert_same_blocks(scipy_run, torch_run, exact_weights=False)
        assert_same_blocks(scipy_run, sample(graph, seed, algorithm="ladies", layer_sizes=[40, 30], bulk=2))


def test_torch_draws_are_the_kernels_draws() -> None:
    """The device's uniform numbers are the kernel's, bit for bit (rows and draws near the top of int64 too)."""
    engine = _TorchSpGEMM("cpu")
    rows = torch.tensor([0, 1, 7, 12345, 2**40 + 3, 2**62 + 11], dtype=torch.int64)
    draws = torch.tensor([0, 5, 3, 99, 2**31, 7], dtype=torch.int64)
    for seed in [0, 1, 2**62 + 12345, 2**63 - 1]:
        on_device = engine.uniforms(seed, rows, draws).numpy()
        kernel = [
            _kernels._uniform(np.uint64(seed), int(r), int(d)) for r, d in zip(rows, draws, strict=True)
        ]
        assert on_device.tolist() == kernel


def test_torch_positions_follow_the_kernel_rule() -> None:
    """uniform_positions against _uniform_positions row by row: the same entries in the same order."""
    engine = _TorchSpGEMM("cpu")
    rng = np.random.default_rng(0)
    lengths = np.concatenate([[0, 1, 5, 16, 16, 64, 64, 65, 200, 4096, 4097, 6000], rng.integers(0, 80, 200)])
    need = np.minimum(
        lengths, np.concatenate([[3, 3, 5, 15, 3, 33, 32, 40, 150, 10, 4000, 20], rng.integers(1, 70, 200)])
    )
    crow = np.concatenate([[0], np.cumsum(lengths)])
    seed = np.uint64(987654321)
    got = engine.uniform_positions(torch.from_numpy(crow), torch.from_numpy(need), int(seed)).numpy()
    bits = np.zeros(64, dtype=np.uint64)
    expected = []
    for i, (d, n) in enumerate(zip(lengths, need, strict=True)):
        out = np.empty(n, dtype=np.int64)
        _kernels._uniform_positions(i, d, n, seed, out, 0, bits)
        expected.append(crow[i] + out)
    assert got.tolist() == np.concatenate(expected).tolist()


def test_multigraph_back_ends_differ_by_construction_but_keep_the_invariants() -> None:
    """With duplicate edges, scipy's SpGEMM merges a row's copies into one heavier entry of P, so
    scipy draws distinct neighbors weighted by multiplicity; fused draws edges (DGL's way) and may
    draw both copies. torch 2.13's CPU SpGEMM keeps the copies as separate entries, so torch draws
    like fused here (another SpGEMM may merge them). All give valid blocks."""
    base = erdos_renyi(400, 10.0, seed=1)
    src = np.concatenate([base.indices, base.indices[:300]])
    dst = np.concatenate([base.edge_dst(), base.edge_dst()[:300]])
    graph = CSRGraph.from_edges(src, dst, 400, dedup=False)
    runs = {b: sample(graph, 0, fanouts=[6, 4], bulk=2, spgemm=b) for b in ("fused", "scipy", "torch")}
    for run in runs.values():
        for mb in run:
            check_block_invariants(mb)

    def repeats(run: list[Minibatch]) -> int:
        return sum(
            block.num_edges - np.unique(block.edge_src * block.num_dst + block.edge_dst).shape[0]
            for mb in run
            for block in mb.blocks
        )

    assert repeats(runs["scipy"]) == 0
    assert repeats(runs["fused"]) > 0


def test_thread_count_changes_nothing() -> None:
    """The one machine fact the sampler reads, numba's thread count, only splits the work."""
    import numba

    graph = GRAPHS["hubs"]()
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = {b: sample(graph, 7, fanouts=[5, 4], bulk=5, spgemm=b) for b in ("fused", "torch")}
    finally:
        numba.set_num_threads(before)
    for backend, run in single.items():
        assert_same_blocks(run, sample(graph, 7, fanouts=[5, 4], bulk=5, spgemm=backend))
