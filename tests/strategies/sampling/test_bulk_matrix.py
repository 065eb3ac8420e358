"""bulk-matrix specifics: recycled output buffers never overwrite live minibatches; back-end choice.

That every back end gives the same samples is tested in test_bulk_backends.py.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from workbench.errors import WorkbenchError
from workbench.graph.generators import erdos_renyi
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import OutputBufferPool, new_mapping, new_word_scratch
from workbench.strategies.sampling.base import check_block_invariants
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler


def snapshot(mbs: list) -> list:
    return copy.deepcopy([[(b.src_nodes, b.edge_src, b.edge_dst) for b in mb.blocks] for mb in mbs])


def same(mbs: list, snap: list) -> bool:
    return all(
        np.array_equal(b.src_nodes, s) and np.array_equal(b.edge_src, es) and np.array_equal(b.edge_dst, ed)
        for mb, layers in zip(mbs, snap, strict=True)
        for b, (s, es, ed) in zip(mb.blocks, layers, strict=True)
    )


def test_live_minibatches_survive_later_bulks() -> None:
    graph = erdos_renyi(2000, 10.0, seed=1)
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[5, 3], bulk=4)
    rng = np.random.default_rng(0)
    batches = [rng.choice(2000, 50, replace=False) for _ in range(4)]
    first = sampler.sample_many(graph, batches, rng)
    first_snap = snapshot(first)
    # Keep only a tensor made from one array of another bulk: it must survive too.
    second = sampler.sample_many(graph, batches, rng)
    kept = torch.from_numpy(second[2].blocks[0].edge_src)
    kept_copy = kept.clone()
    del second
    for _ in range(5):
        for mb in sampler.sample_many(graph, batches, rng):
            check_block_invariants(mb)
    assert same(first, first_snap)
    assert torch.equal(kept, kept_copy)


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_pool_reuses_only_released_buffers() -> None:
    """A buffer goes out again only when nothing views it; then it is reused, the first that fits."""
    n = 100_000
    held = n + n // 8 + 1024  # items in a pooled buffer made for a request of n (headroom)
    pool = OutputBufferPool(capacity=8)
    a = pool.empty(n)
    a_address = address(a)
    b = pool.empty(n)
    assert not np.shares_memory(a, b)  # a is alive: not handed out again
    view = a[10:20]
    del a
    c = pool.empty(n)
    assert not np.shares_memory(view, c)  # a view keeps it alive
    c_address = address(c)
    assert len({a_address, address(b), c_address}) == 3
    del view, c
    # a's and c's buffers are free now, b's is not: a request that fits gets the first free
    # one, the next request the other, the third a new buffer.
    d = pool.empty(n - 100)
    assert address(d) == a_address and d.shape == (n - 100,)
    e = pool.empty(n - 100)
    assert address(e) == c_address
    f = pool.empty(n - 100)
    assert address(f) not in (a_address, address(b), c_address)
    for x, y in [(d, b), (e, b), (f, b), (d, e), (d, f), (e, f)]:
        assert not np.shares_memory(x, y)
    del d  # a's buffer is free again (and stays in the pool: 4 buffers, capacity 8)
    # Larger than the buffer, or so much smaller that it would pin a large buffer
    # (buffer > 2 * size + 4096): new buffers.
    assert address(pool.empty(held + 1)) != a_address
    assert 2 * (n // 2) + 4096 < held
    assert address(pool.empty(n // 2)) != a_address
    # A size in between gets a's buffer (neither new buffer fits it).
    assert address(pool.empty(3 * n // 5)) == a_address


def test_pool_keeps_at_most_idle_bytes_of_released_buffers() -> None:
    """Released buffers stay for reuse up to ``idle_bytes`` (the oldest go first); live ones always stay."""
    n = 10_000
    nbytes = (n + n // 8 + 1024) * 8  # one pooled buffer made for a request of n
    pool = OutputBufferPool(capacity=8, idle_bytes=2 * nbytes)
    live = [pool.empty(n) for _ in range(4)]
    first = [address(x) for x in live]
    del live  # four idle buffers: the next allocation trims the pool to the two newest
    keep = pool.empty(10 * n)  # fits none of them: a new buffer, then the trim
    held = [pool.empty(n), pool.empty(n)]
    assert {address(x) for x in held} == set(first[2:])
    assert len(pool._buffers) == 3  # the two oldest were dropped: keep's and the two held remain
    assert address(keep) not in first


def test_every_bulk_sampler_shares_one_pool() -> None:
    from workbench.strategies.sampling._common import SHARED_OUTPUTS

    a, b = BulkMatrixSampler(fanouts=[2]), BulkMatrixSampler(fanouts=[3])
    assert a._outputs is b._outputs is SHARED_OUTPUTS
    assert SHARED_OUTPUTS.idle_bytes is not None  # a finished process keeps a bounded amount


def test_backend_resolution(monkeypatch) -> None:
    """The back end and the torch device are parameters; their defaults do not look at the machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU would change nothing
    graphsage = SAMPLERS.create("bulk-matrix", fanouts=[2])
    ladies = SAMPLERS.create("bulk-matrix", algorithm="ladies", layer_sizes=[2])
    assert graphsage.backend() == graphsage.spgemm == "fused"
    assert ladies.backend() == "scipy"
    assert SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="scipy").backend() == "scipy"
    on_torch = SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="torch")
    assert on_torch.torch_device == "cpu"
    on_torch.sample(erdos_renyi(50, 4.0, seed=0), np.arange(5), np.random.default_rng(0))
    assert str(on_torch._torch_backend().device) == "cpu"
    assert "bulk=32" in repr(graphsage) and "spgemm='fused'" in repr(graphsage)
    assert "torch_device='cpu'" in repr(on_torch) and "torch_device" not in repr(graphsage)


def test_torch_device_is_the_callers() -> None:
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="torch", torch_device="cuda:1")
    assert sampler.torch_device == "cuda:1"  # checked for form here; for use when it samples
    if not torch.cuda.is_available():
        with pytest.raises(WorkbenchError, match="torch_device 'cuda:1' is not usable here"):
            sampler.sample(erdos_renyi(50, 4.0, seed=0), np.arange(5), np.random.default_rng(0))


def test_fused_relabel_restores_scratch_and_is_deterministic() -> None:
    """The bit-set relabelling leaves its scratch as it found it, and the same seed gives the same blocks."""
    graph = erdos_renyi(3000, 12.0, seed=2)
    rng = np.random.default_rng(5)
    batches = [rng.choice(3000, 200, replace=False) for _ in range(6)]
    sampler = SAMPLERS.create("bulk-matrix", fanouts=[6, 4, 3], bulk=3, spgemm="fused")
    first = sampler.sample_many(graph, batches, np.random.default_rng(9))
    again = sampler.sample_many(graph, batches, np.random.default_rng(9))
    for mb in first:
        check_block_invariants(mb)
    assert same(again, snapshot(first))
    assert sampler._words._cached is not None
    for row in sampler._words._cached:
        seen, isdst = _kernels._word_views(row)[:2]
        assert not seen.any() and not isdst.any()
    assert sampler._scratch._cached is not None and np.all(sampler._scratch._cached == -1)


def test_word_relabel_matches_the_vertex_map_relabel() -> None:
    """The bit-set relabelling gives the same blocks as the vertex-map one, up to the order of new sources."""
    rng = np.random.default_rng(3)
    for num_nodes, nd in [(130, 20), (200, 64), (64, 1), (5000, 300)]:
        scratch = new_word_scratch(num_nodes, 1)[0]
        mapping = new_mapping(num_nodes)
        for _ in range(5):
            dst = rng.choice(num_nodes, nd, replace=False).astype(np.int64)
            counts = rng.integers(0, 6, nd).astype(np.int64)
            picked = rng.integers(0, num_nodes, int(counts.sum())).astype(np.int64)
            src = np.empty(nd + picked.shape[0], dtype=np.int64)
            edge_src = np.empty(picked.shape[0], dtype=np.int64)
            edge_dst = np.empty(picked.shape[0], dtype=np.int64)
            ns = _kernels._relabel_words(dst, counts, picked.copy(), scratch, src, edge_src, edge_dst)
            ref_src, _, ref_edge_dst = _kernels.relabel_block(dst, counts, picked, mapping)
            assert ns == ref_src.shape[0]
            assert np.array_equal(src[:nd], dst)
            assert np.array_equal(np.sort(src[:ns]), np.sort(ref_src))
            assert np.array_equal(src[:ns][edge_src], picked)
            assert np.array_equal(edge_dst, ref_edge_dst)
            assert not any(part.any() for part in _kernels._word_views(scratch)[:2])
