"""A prepared run and its plan hold no reference cycle that keeps the sampled epoch alive.

A cycle is freed only by the next collection: a sweep's next point (or a benchmark's next
round) then samples while the last epoch still holds the bulk samplers' output pool, and
faults in fresh pages instead (bench_epoch (a): 2-3 s of system time per products-like epoch,
in some runs and not others, depending on when the collector ran).
"""

from __future__ import annotations

import gc
import weakref

import pytest

from workbench.config import config_from_dict
from workbench.run import prepare_run


@pytest.mark.parametrize("scheme", ["model-centric", "hopgnn", "p3"])
def test_dropping_a_run_frees_its_epoch_without_the_collector(tmp_path, scheme):
    cfg = config_from_dict(
        {
            "name": "cycles",
            "graph": {"name": "er:n=600,deg=6"},
            "hardware": {"name": "hopgnn-4xa100-10gbe"},
            "model": {"name": "sage", "hidden": 16, "num_layers": 2},
            "training": {"batch_size": 32, "iterations": 2},
            "partition": {"name": "random"},
            "placement": {"name": "degree"},
            "cache": {"capacity": "20%"},
            "sampling": {"name": "bulk-matrix", "fanouts": [3, 2]},
            "execution": {"name": scheme},
        },
        "cycles.toml",
    )
    gc.collect()
    gc.disable()
    try:
        prepared = prepare_run(cfg, sample_cache=False, cache_dir=str(tmp_path))
        prepared.plan()
        minibatch = weakref.ref(prepared.inputs.epoch[0][0])
        del prepared
        assert minibatch() is None
    finally:
        gc.enable()
