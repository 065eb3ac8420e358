"""The p3 scheme: byte conservation counted independently, per-pair sizes, bad inputs, simulation.

Byte counts are recomputed here with plain numpy from the sampled blocks, the placement
and the model, by the formulas of p3's docstring, without the scheme's helpers.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from sim import simulate
from workbench.config import config_from_dict
from workbench.errors import ConfigError
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import prepare_run

HIDDEN = 16


def config(**tables):
    data = {
        "name": "p3",
        "seed": 5,
        "graph": {"name": "er:n=600,deg=6"},
        "hardware": {"name": "hopgnn-4xa100-10gbe"},
        "model": {"name": "sage", "hidden": HIDDEN, "num_layers": 2},
        "training": {"batch_size": 24, "iterations": 3},
        "partition": {"name": "random"},
        "sampling": {"name": "neighbor", "fanouts": [4, 3]},
        "execution": {"name": "p3"},
    }
    data.update(tables)
    return config_from_dict(data, "p3.toml")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("samples"))


def expected_bytes(inputs, cached=None):
    """(phase, src, dst, carries) -> bytes and phase -> items, by P3's formulas, with plain loops."""
    n = inputs.num_workers
    feat = inputs.graph.feat_dim
    widths = [feat // n + (1 if i < feat % n else 0) for i in range(n)]
    assert sum(widths) == feat
    out = defaultdict(int)
    items = defaultdict(int)
    for row in inputs.epoch:
        for j, mb in enumerate(row):
            b0 = mb.blocks[0]
            v = b0.src_nodes
            for i in range(n):
                hit = cached[i][v] if cached is not None else np.zeros(v.shape[0], dtype=bool)
                host = inputs.cluster.machines[inputs.worker_machine[i]].host_node
                out[("h2d", host, inputs.workers[i], "features")] += int((~hit).sum()) * widths[i] * 4
                items["gather_local"] += int(hit.sum())
                if i == j:
                    continue
                structure = (len(b0.src_nodes) + len(b0.dst_nodes) + 2 * len(b0.edge_src)) * 8
                out[("sample", inputs.workers[j], inputs.workers[i], "adjacency")] += structure
                partial = len(b0.dst_nodes) * HIDDEN * 4
                out[("alltoall", inputs.workers[i], inputs.workers[j], "partials")] += partial
                out[("alltoall", inputs.workers[j], inputs.workers[i], "gradients")] += partial
    return dict(out), dict(items)


def plan_bytes(plan):
    out = defaultdict(int)
    for t in plan.tasks:
        if t.kind == "transfer" and t.bytes:
            out[(t.phase, t.src, t.dst, t.carries)] += t.bytes
    return dict(out)


def dp_gradient_bytes(inputs):
    """SAGE layers 2..L: 2 * d_in * d_out + d_out parameters each, 4 bytes."""
    return 4 * sum(2 * layer.in_dim * layer.out_dim + layer.out_dim for layer in inputs.model.layers[1:])


@pytest.mark.parametrize(
    "hardware,workers,cache",
    [
        ("hopgnn-4xa100-10gbe", 4, None),
        ("hopgnn-4xa100-10gbe", 4, "20%"),
        ("perlmutter-4xa100-slingshot", 8, None),
    ],
)
def test_bytes_by_phase_equal_an_independent_count(cache_dir, hardware, workers, cache):
    tables = {
        "hardware": {"name": hardware},
        "training": {"batch_size": 24, "iterations": 3, "workers": workers},
    }
    if cache:
        tables |= {"placement": {"name": "degree"}, "cache": {"capacity": cache}}
    prepared = prepare_run(config(**tables), cache_dir=cache_dir)
    inputs = prepared.inputs
    cached = None
    if cache:
        # The degree placement: every GPU caches the same top 20% by in-degree (ties by id).
        top = np.argsort(-inputs.graph.in_degrees(), kind="stable")[: int(0.2 * inputs.graph.num_nodes)]
        mask = np.zeros(inputs.graph.num_nodes, dtype=bool)
        mask[top] = True
        cached = [mask] * workers
    plan = prepared.plan()
    want, want_items = expected_bytes(inputs, cached)
    assert plan_bytes(plan) == want
    assert sum(t.items for t in plan.tasks if t.phase == "gather_local") == want_items["gather_local"]
    # No raw feature crosses the network or another GPU: P3's point.
    assert not any(t.phase in ("gather_remote", "d2d") for t in plan.tasks)
    allreduces = [t for t in plan.tasks if t.kind == "collective"]
    assert len(allreduces) == len(inputs.epoch) and all(
        t.bytes == dp_gradient_bytes(inputs) for t in allreduces
    )
    assert all(t.devices == inputs.workers for t in allreduces)
    # Per iteration every vertex row is read once over the slices (no cache): F * 4 bytes per input vertex.
    if not cache:
        h2d = sum(t.bytes for t in plan.tasks if t.phase == "h2d")
        rows = sum(len(mb.blocks[0].src_nodes) for row in inputs.epoch for mb in row) * workers
        assert h2d == rows // workers * inputs.feature_bytes
    result = simulate(plan, prepared.cluster)
    by_phase = result.trace.groupby("phase")["bytes"].sum()
    for phase in ("h2d", "sample", "alltoall"):
        assert by_phase[phase] == sum(v for (ph, *_), v in want.items() if ph == phase)
    assert result.makespan > 0


def test_partials_are_sized_per_pair_not_split_equally(cache_dir):
    prepared = prepare_run(config(), cache_dir=cache_dir)
    plan = prepared.plan()
    sends = [t for t in plan.tasks if t.carries == "partials" and t.iteration == 0]
    assert len(sends) == 4 * 3
    row = prepared.inputs.epoch[0]
    for t in sends:
        j = prepared.inputs.workers.index(t.dst)
        assert t.bytes == len(row[j].blocks[0].dst_nodes) * HIDDEN * 4
    # Every sender sends receiver j the same amount; receivers get different amounts.
    assert len({t.bytes for t in sends}) > 1
    grads = {
        (t.src, t.dst): t.bytes
        for t in plan.tasks
        if t.kind == "transfer" and t.carries == "gradients" and t.iteration == 0
    }
    assert grads == {(t.dst, t.src): t.bytes for t in sends}


def test_layer_one_is_model_parallel_and_the_rest_data_parallel(cache_dir):
    prepared = prepare_run(config(), cache_dir=cache_dir)
    plan = prepared.plan()
    inputs = prepared.inputs
    fwd0 = [t for t in plan.tasks if t.phase == "forward" and t.layer == 0 and t.iteration == 0]
    # 4 x 4 partial computations (each worker, each minibatch) and 4 sums.
    partial = [t for t in fwd0 if t.id.endswith("fwd0-partial")]
    assert len(partial) == 16 and len(fwd0) == 20
    widths = sorted({int(t.features["in_dim"]) for t in partial})
    assert widths == [inputs.graph.feat_dim // 4]  # 64 dimensions over 4 workers
    fwd1 = [t for t in plan.tasks if t.phase == "forward" and t.layer == 1 and t.iteration == 0]
    assert sorted(t.device for t in fwd1) == sorted(inputs.workers)
    # Resident state: layers 2..L in full, plus a quarter of layer 1's weights (and its bias).
    first = inputs.model.layers[0]
    slice_params = 2 * (first.in_dim // 4) * first.out_dim + first.out_dim
    per_worker = (dp_gradient_bytes(inputs) // 4 + slice_params) * 4 * 4  # weights, grads, Adam m and v
    assert {r.bytes for r in plan.resident if r.name.endswith("training-state")} == {per_worker}


def test_bad_parameters_and_models(cache_dir):
    with pytest.raises(ConfigError, match="first layer .* must be one of gcn, sage.*starts with a gat layer"):
        prepare_run(config(model={"name": "gat", "hidden": 8, "num_layers": 2}), cache_dir=cache_dir).plan()
    with pytest.raises(ConfigError, match="p3 needs at least 2 layers"):
        prepare_run(
            config(
                model={"name": "sage", "hidden": 8, "num_layers": 1},
                sampling={"name": "neighbor", "fanouts": [3]},
            ),
            cache_dir=cache_dir,
        ).plan()
    with pytest.raises(ConfigError, match="'p3'.*unknown.*'slices'|slices"):
        EXECUTION_SCHEMES.create("p3", slices=4)


def test_too_few_feature_dimensions_for_the_workers(cache_dir):
    from workbench.graph.generators import erdos_renyi

    graph = erdos_renyi(200, 5.0, seed=1)
    graph.feat_dim = 3
    graph.num_classes = 2
    with pytest.raises(ConfigError, match="slice of the 3 feature dimensions"):
        prepare_run(config(), graph=graph, cache_dir=cache_dir).plan()


def test_a_three_layer_gcn_plan_simulates(cache_dir):
    prepared = prepare_run(config(model={"name": "gcn", "hidden": HIDDEN, "num_layers": 3},
                                  sampling={"name": "neighbor", "fanouts": [3, 3, 2]}), cache_dir=cache_dir)  # fmt: skip
    plan = prepared.plan()
    result = simulate(plan, prepared.cluster)
    assert set(result.trace["phase"]) >= {
        "sample",
        "h2d",
        "forward",
        "alltoall",
        "backward",
        "allreduce",
        "update",
    }
