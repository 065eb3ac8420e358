"""Cached shared work never changes a result (issue 28): the 12 configurations of
``benchmarks/bench_epoch.py`` (b) simulate identical epochs with and without the spine's
caches (partitions, access estimates, placements; ``workbench.spine_cache``), from memory
and from disk alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sim import simulate
from workbench import spine_cache
from workbench.graph.datasets import load_dataset
from workbench.run import prepare_run

ROOT = Path(__file__).resolve().parents[1]


def _bench_epoch() -> Any:
    """``benchmarks/bench_epoch.py`` (a script beside ``benchmarks/machine.py``), loaded by path."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.append(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("bench_epoch", ROOT / "benchmarks" / "bench_epoch.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _grid(bench: Any) -> list[tuple[str, str, str]]:
    return [
        (h, pl, s) for s in ("model-centric", "hopgnn") for h in bench.HARDWARE for pl in bench.PLACEMENTS
    ]


def _point(bench: Any, graph: Any, scale: float, point: tuple[str, str, str], cache: str | None) -> tuple:
    cfg = bench.config("products-like", scale, *point, "bulk-matrix")
    prepared = prepare_run(cfg, graph=graph, sample_cache=cache is not None, cache_dir=cache)
    trace = simulate(prepared.plan(), prepared.cluster).trace
    return prepared.inputs.partition.owner, prepared.inputs.placement, trace


def _same(a: tuple, b: tuple) -> None:
    assert np.array_equal(a[0], b[0])
    if a[1] is None:
        assert b[1] is None
    else:
        assert all(np.array_equal(x, y) for x, y in zip(a[1].gpu_vertices, b[1].gpu_vertices, strict=True))
        assert np.array_equal(a[1].home, b[1].home) and a[1].peer_groups == b[1].peer_groups
    pd.testing.assert_frame_equal(a[2], b[2], check_exact=True)


def _check(scale: float, tmp_path: Path) -> None:
    bench = _bench_epoch()
    graph = load_dataset("products-like", scale=scale)
    grid = _grid(bench)
    assert len(grid) == 12
    plain = [_point(bench, graph, scale, p, None) for p in grid]
    spine_cache.forget_memory()
    cache = str(tmp_path / "cache")
    for point, expected in zip(grid, plain, strict=True):
        _same(_point(bench, graph, scale, point, cache), expected)
    assert list((tmp_path / "cache" / "spine").glob("*/*.npz")), "nothing was cached on disk"
    spine_cache.forget_memory()  # the disk alone
    for point, expected in zip(grid, plain, strict=True):
        _same(_point(bench, graph, scale, point, cache), expected)


def test_the_sweep_of_bench_epoch_is_identical_with_and_without_caches(tmp_path: Path) -> None:
    _check(0.01, tmp_path)


@pytest.mark.slow
def test_the_sweep_at_the_benchmarks_size(tmp_path: Path) -> None:
    _check(None, tmp_path)  # type: ignore[arg-type]
