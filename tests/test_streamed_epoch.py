"""A streamed epoch yields the minibatches a whole epoch holds, and plans the same."""

from __future__ import annotations

import numpy as np

from workbench import epoch
from workbench.config import config_from_dict
from workbench.graph.datasets import load_dataset
from workbench.registry import SAMPLERS
from workbench.run import prepare_run


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
    assert isinstance(whole, list) and list((tmp_path / "a").glob("*.npz"))
    monkeypatch.setattr(epoch, "EPOCH_MEMORY_SHARE", 1e-12)
    streamed = epoch.sample_epoch(graph, samplers, batches, 7, describe=describe, cache_dir=tmp_path / "b")
    assert isinstance(streamed, epoch.StreamedEpoch)
    assert not (tmp_path / "b").exists() or not list((tmp_path / "b").glob("*.npz"))
    for i, row in enumerate(whole):
        assert all(same_minibatch(a, b) for a, b in zip(streamed[i], row, strict=True))


def test_a_plan_of_a_streamed_epoch_equals_the_plan_of_the_whole_one(tmp_path, monkeypatch):
    cfg = config_from_dict(
        {
            "name": "stream",
            "seed": 3,
            "graph": {"name": "er:n=600,deg=6"},
            "hardware": {"name": "hopgnn-4xa100-10gbe"},
            "model": {"name": "sage", "hidden": 16, "num_layers": 2},
            "training": {"batch_size": 32, "iterations": 4},
            "partition": {"name": "random"},
            "placement": {"name": "degree"},
            "cache": {"capacity": "20%"},
            "sampling": {"name": "neighbor", "fanouts": [4, 3]},
        },
        "stream.toml",
    )
    whole = prepare_run(cfg, cache_dir=str(tmp_path / "whole"))
    monkeypatch.setattr(epoch, "EPOCH_MEMORY_SHARE", 1e-12)
    monkeypatch.setattr(epoch, "_LAST", [None, None])
    streamed = prepare_run(cfg, cache_dir=str(tmp_path / "streamed"))
    assert isinstance(streamed.inputs.epoch, epoch.StreamedEpoch)
    a, b = whole.plan(), streamed.plan()
    assert [(t.id, t.kind, t.bytes, t.deps) for t in a.tasks] == [
        (t.id, t.kind, t.bytes, t.deps) for t in b.tasks
    ]
