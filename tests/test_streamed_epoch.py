"""A streamed epoch yields the minibatches a whole epoch holds, and plans the same."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import epoch
from workbench.config import config_from_dict
from workbench.graph.datasets import load_dataset
from workbench.registry import SAMPLERS
from workbench.run import prepare_run
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler


def whole_epoch_worker_by_worker(graph, samplers, batches, seed):
    """The epoch drawn the way sample_epoch drew it before streaming: each worker's minibatches
    in order from its own generator, one worker after the other."""
    per_worker = []
    for w, sampler in enumerate(samplers):
        rng = np.random.default_rng([seed, w])
        per_worker.append([sampler.sample(graph, row[w], rng) for row in batches])
    return [[per_worker[w][i] for w in range(len(samplers))] for i in range(len(batches))]


def same_minibatch(a, b) -> bool:
    return np.array_equal(a.seeds, b.seeds) and all(
        np.array_equal(getattr(x, part), getattr(y, part))
        for x, y in zip(a.blocks, b.blocks, strict=True)
        for part in ("src_nodes", "dst_nodes", "edge_src", "edge_dst")
    )


def setup(workers: int = 3):
    graph = load_dataset("er:n=900,deg=6", cache=False)
    owner = np.arange(graph.num_nodes, dtype=np.int64) % workers
    batches = epoch.worker_seed_batches(graph, owner, workers, batch_size=16, seed=5)
    samplers = [SAMPLERS.create("neighbor", fanouts=[4, 3])] * workers
    return graph, samplers, batches


def test_streamed_in_order_or_out_of_it_equals_the_whole_epoch():
    graph, samplers, batches = setup()
    expected = whole_epoch_worker_by_worker(graph, samplers, batches, seed=7)
    assert len(expected) >= 6
    streamed = epoch.StreamedEpoch(graph, samplers, batches, 7)
    assert len(streamed) == len(expected) and streamed.width == 3
    for i in [0, 1, 2, 5, 1, 0, len(expected) - 1, -2]:  # 1 and 0 after 5: dropped, sampled again
        assert all(same_minibatch(a, b) for a, b in zip(streamed[i], expected[i], strict=True))
    assert len(streamed._kept) <= epoch.STREAM_KEEP


def test_an_epoch_too_large_for_memory_streams_and_is_not_cached(tmp_path, monkeypatch):
    graph, samplers, batches = setup()
    describe = {"name": "neighbor", "fanouts": [4, 3]}
    whole = epoch.sample_epoch(graph, samplers, batches, 7, describe=describe, cache_dir=tmp_path / "a")
    assert isinstance(whole, list) and list((tmp_path / "a").glob("*.epoch"))
    monkeypatch.setattr(epoch, "EPOCH_MEMORY_SHARE", 1e-12)
    streamed = epoch.sample_epoch(graph, samplers, batches, 7, describe=describe, cache_dir=tmp_path / "b")
    assert isinstance(streamed, epoch.StreamedEpoch)
    assert not (tmp_path / "b").exists() or not list((tmp_path / "b").glob("*.epoch"))
    for i, row in enumerate(whole):
        assert all(same_minibatch(a, b) for a, b in zip(streamed[i], row, strict=True))


MODEL_CENTRIC = {
    "placement": {"name": "degree"},
    "cache": {"capacity": "20%"},
    "sampling": {"name": "neighbor", "fanouts": [4, 3]},
}
BULK_PIPELINE = {
    "sampling": {"name": "bulk-matrix", "fanouts": [4, 3]},
    "execution": {"name": "bulk-pipeline", "mode": "partitioned-1.5d", "replication": 2, "bulk": 4},
}


@pytest.mark.parametrize("scheme", [MODEL_CENTRIC, BULK_PIPELINE], ids=["model-centric", "bulk-pipeline"])
def test_a_plan_of_a_streamed_epoch_equals_the_plan_of_the_whole_one(tmp_path, monkeypatch, scheme):
    cfg = config_from_dict(
        {
            "name": "stream",
            "seed": 3,
            "graph": {"name": "er:n=600,deg=6"},
            "hardware": {"name": "hopgnn-4xa100-10gbe"},
            "model": {"name": "sage", "hidden": 16, "num_layers": 2},
            "training": {"batch_size": 32, "iterations": 4},
            "partition": {"name": "random"},
            **scheme,
        },
        "stream.toml",
    )
    whole = prepare_run(cfg, cache_dir=str(tmp_path / "whole"))
    monkeypatch.setattr(epoch, "EPOCH_MEMORY_SHARE", 1e-12)
    monkeypatch.setattr(epoch, "_LAST", [None, None])
    streamed = prepare_run(cfg, cache_dir=str(tmp_path / "streamed"))
    assert isinstance(streamed.inputs.epoch, epoch.StreamedEpoch)
    draws = []
    original = BulkMatrixSampler.sample_window
    monkeypatch.setattr(BulkMatrixSampler, "sample_window", lambda *a: draws.append(1) or original(*a))
    a, b = whole.plan(), streamed.plan()
    assert [(t.id, t.kind, t.bytes, t.deps) for t in a.tasks] == [
        (t.id, t.kind, t.bytes, t.deps) for t in b.tasks
    ]
    # Planning reads the epoch in order: one pass over the 4 workers' chunks per iteration after
    # the first (which the memory check drew), not a pass per read of an earlier iteration.
    iterations = len(streamed.inputs.epoch)
    assert iterations >= 3
    assert len(draws) == ((iterations - 1) * 4 if scheme is BULK_PIPELINE else 0)


def whole_epoch_in_chunks(graph, samplers, batches, seed, chunk):
    """The epoch drawn the way sample_epoch draws it for bulk samplers: each worker's minibatches
    ``chunk`` at a time from its own generator, one worker after the other."""
    per_worker = []
    for w, sampler in enumerate(samplers):
        rng = np.random.default_rng([seed, w])
        mine = [row[w] for row in batches]
        out = []
        for start in range(0, len(mine), chunk):
            out.extend(sampler.sample_many(graph, mine[start : start + chunk], rng))
        per_worker.append(out)
    return [[per_worker[w][i] for w in range(len(samplers))] for i in range(len(batches))]


def test_a_bulk_sampler_streams_in_windows_with_the_whole_epochs_minibatches(monkeypatch):
    # Chunks of 4 iterations and a budget of about two iterations: windows of one iteration
    # (the budget less the one kept before), passes that start inside a chunk and cross into
    # the next, and iterations asked for out of order.
    graph, _, batches = setup()
    samplers = [SAMPLERS.create("bulk-matrix", fanouts=[4, 3], bulk=2)] * 3
    monkeypatch.setattr(epoch, "SAMPLE_CHUNK", 4)
    expected = whole_epoch_in_chunks(graph, samplers, batches, 7, 4)
    assert len(expected) >= 9
    one = sum(epoch._minibatch_bytes(mb) for mb in expected[0])
    monkeypatch.setattr(
        "workbench.graph.specs.available_memory", lambda: int(2.5 * one / epoch.EPOCH_MEMORY_SHARE)
    )
    streamed = epoch.StreamedEpoch(graph, samplers, batches, 7)
    assert streamed.bulk and streamed.too_large() and streamed.window == 1
    for i in [0, 1, 2, 3, 4, 7, 5, 0, len(expected) - 1, 2]:
        assert all(same_minibatch(a, b) for a, b in zip(streamed[i], expected[i], strict=True)), i
        assert len(streamed._kept) <= epoch.STREAM_KEEP


def test_a_bulk_sampler_whose_epoch_fits_is_kept_whole_in_one_pass(monkeypatch):
    graph, _, batches = setup()
    samplers = [SAMPLERS.create("bulk-matrix", fanouts=[4, 3], bulk=2)] * 3
    expected = whole_epoch_in_chunks(graph, samplers, batches, 7, epoch.SAMPLE_CHUNK)
    calls = []
    original = samplers[0].sample_window
    monkeypatch.setattr(samplers[0], "sample_window", lambda *a: calls.append(1) or original(*a))
    whole = epoch.sample_epoch(graph, samplers, batches, 7)
    assert isinstance(whole, list) and len(calls) == 3  # one chunk per worker, sampled once
    for got, want in zip(whole, expected, strict=True):
        assert all(same_minibatch(a, b) for a, b in zip(got, want, strict=True))


def test_the_first_pass_stops_drawing_whole_chunks_at_the_first_worker_projected_over(monkeypatch):
    # Budget: half the epoch. Worker 0's whole chunk (a third of it) fits, but scaled to the three
    # workers it does not: workers 1 and 2 draw iteration 0 alone, where waiting for the sum to pass
    # the budget drew worker 1's whole chunk too, only to draw it again window by window.
    graph, _, batches = setup()
    samplers = [SAMPLERS.create("bulk-matrix", fanouts=[4, 3], bulk=2)] * 3
    expected = whole_epoch_in_chunks(graph, samplers, batches, 7, epoch.SAMPLE_CHUNK)
    total = sum(epoch._minibatch_bytes(mb) for row in expected for mb in row)
    monkeypatch.setattr(
        "workbench.graph.specs.available_memory", lambda: int(0.5 * total / epoch.EPOCH_MEMORY_SHARE)
    )
    kept, calls = [], []
    original = samplers[0].sample_window
    monkeypatch.setattr(
        samplers[0], "sample_window", lambda *a: kept.append(len(a[3])) or calls.append(a) or original(*a)
    )
    streamed = epoch.StreamedEpoch(graph, samplers, batches, 7)
    assert streamed.too_large()
    assert kept == [len(expected), 1, 1]
    for i in range(len(expected)):
        assert all(same_minibatch(a, b) for a, b in zip(streamed[i], expected[i], strict=True)), i
    # Read in order, every later window is told the sizes of the batches before it (drawn already).
    later = [a for a in calls[3:] if a[3].start > 0]
    assert later and all(a[4] is not None and len(a[4]) == a[3].start for a in later)
