"""The feature service of paper 003's artifact (``feature_service``): rows counted independently, peers
asked one after another in the artifact's order, the whole reply copied to the GPU once."""

from __future__ import annotations

import numpy as np
import pytest

from sim import simulate
from workbench.config import config_from_dict
from workbench.run import prepare_run


def config(execution: dict) -> object:
    return config_from_dict(
        {
            "name": "svc",
            "seed": 3,
            "graph": {"name": "er:n=600,deg=6"},
            "hardware": {"name": "hopgnn-4xa100-10gbe"},
            "model": {"name": "sage", "hidden": 16, "num_layers": 2},
            "training": {"batch_size": 32, "iterations": 2, "seeds": "global"},
            "partition": {"name": "random"},
            "sampling": {"name": "neighbor", "fanouts": [4, 3]},
            "execution": execution,
        },
        "svc.toml",
    )


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("samples"))


def test_model_centric_through_the_service_moves_every_row_to_the_gpu_once(cache_dir):
    prepared = prepare_run(config({"name": "model-centric", "feature_service": True}), cache_dir=cache_dir)
    plan, inputs = prepared.plan(), prepared.inputs
    fb = inputs.graph.feat_dim * 4
    owner = inputs.partition.owner  # 4 machines of one GPU: worker w is machine w, no cache
    rows = sum(int(mb.input_nodes.shape[0]) for row in inputs.epoch for mb in row)
    remote = sum(int((owner[mb.input_nodes] != w).sum()) for row in inputs.epoch for w, mb in enumerate(row))
    transfers = [t for t in plan.tasks if t.kind == "transfer"]
    assert sum(t.bytes for t in transfers if t.phase == "h2d") == rows * fb  # local and remote rows
    assert sum(t.bytes for t in transfers if t.phase == "gather_remote") == remote * fb
    # Every remote row lands in the asking machine's host memory, never straight on the GPU.
    assert all(t.dst.endswith(".host") for t in transfers if t.phase == "gather_remote")
    # Per row: a lookup on its server, and for a remote row a copy into the reply on the asker's.
    looked_up = sum(t.features["vertices"] for t in plan.tasks if t.kind == "compute" and ".serve." in t.id)
    assert looked_up == rows + remote
    assert simulate(plan, prepared.cluster).makespan > 0


def test_the_service_asks_the_other_servers_one_after_another_next_machine_first(cache_dir):
    prepared = prepare_run(config({"name": "model-centric", "feature_service": True}), cache_dir=cache_dir)
    plan = prepared.plan()
    tasks = {t.id: t for t in plan.tasks}
    # Worker 2 (machine m2) asks m3 first, then m0, then m1 (static_cache.go's loop), each request
    # after the previous answer was copied; its own rows are looked up before any.
    p = "i0.w2.serve"
    assert tasks[f"{p}.local"].device == "m2.host"
    assert tasks[f"{p}.m3.host.lookup"].deps == [f"{p}.local"]
    assert tasks[f"{p}.m0.host.lookup"].deps == [f"{p}.m3.host.copy"]
    assert tasks[f"{p}.m1.host.lookup"].deps == [f"{p}.m0.host.copy"]
    assert tasks[f"{p}.h2d"].deps == [f"{p}.m1.host.copy"]
    assert tasks[f"{p}.m0.host.lookup"].device == "m0.host"


@pytest.mark.parametrize("pregather", [True, False])
def test_hopgnn_through_the_service_fetches_each_remote_row_it_needs(cache_dir, pregather):
    execution = {"name": "hopgnn", "pregather": pregather, "merge": False, "feature_service": True}
    prepared = prepare_run(config(execution), cache_dir=cache_dir)
    plan = prepared.plan()
    plain = prepare_run(config({**execution, "feature_service": False}), cache_dir=cache_dir).plan()

    def moved(p, phase):
        return sum(t.bytes for t in p.tasks if t.kind == "transfer" and t.phase == phase)

    # The same remote rows cross the network; the host rows now reach the GPU through the reply.
    assert moved(plan, "gather_remote") == moved(plain, "gather_remote") > 0
    assert moved(plan, "h2d") == moved(plain, "h2d") + (0 if pregather else moved(plain, "gather_remote"))
    assert np.isfinite(simulate(plan, prepared.cluster).makespan)


def test_p3_through_the_service_looks_up_every_slice_row_each_worker_reads(cache_dir):
    prepared = prepare_run(config({"name": "p3", "feature_service": True}), cache_dir=cache_dir)
    plan, inputs = prepared.plan(), prepared.inputs
    plain = prepare_run(config({"name": "p3"}), cache_dir=cache_dir).plan()
    # Every worker reads its slice of every minibatch's input rows (no cache): 4 lookups per row.
    rows = sum(int(mb.input_nodes.shape[0]) for row in inputs.epoch for mb in row)
    serve = [t for t in plan.tasks if t.id.endswith(".host.serve")]
    assert sum(t.features["vertices"] for t in serve) == 4 * rows
    assert all(t.device.endswith(".host") for t in serve)
    h2d = [sum(t.bytes for t in p.tasks if t.phase == "h2d") for p in (plan, plain)]
    assert h2d[0] == h2d[1] > 0
    assert not any(t.id.endswith(".serve") for t in plain.tasks)


def test_naive_through_the_service_looks_up_each_row_at_its_stop_and_fetches_nothing_remote(cache_dir):
    prepared = prepare_run(
        config({"name": "naive-feature-centric", "feature_service": True}), cache_dir=cache_dir
    )
    plan = prepared.plan()
    plain = prepare_run(config({"name": "naive-feature-centric"}), cache_dir=cache_dir).plan()
    # Every stop reads rows of its own server: one local lookup per row, nothing over the network.
    served = sum(t.features["vertices"] for t in plan.tasks if t.id.endswith(".serve.local"))
    h2d = [sum(t.bytes for t in p.tasks if t.phase == "h2d") for p in (plan, plain)]
    assert served * prepared.inputs.feature_bytes == h2d[0] == h2d[1] > 0
    assert not any(t.phase == "gather_remote" for t in plan.tasks)
