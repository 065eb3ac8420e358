"""Fixtures for the simulator tests: presets and small hand-made clusters."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from workbench.hardware import load_hardware
from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec

REPO = Path(__file__).resolve().parents[2]
GiB = 2**30
GPU = GPUSpec("TestGPU", 16 * GiB, 10e12, 500e9)


def make_cluster(
    n_gpus: int,
    links: Iterable[tuple[str, str, float, float]],
    switches: dict[str, str] | None = None,
    gpu: GPUSpec = GPU,
    cores: int = 4,
) -> ClusterSpec:
    """One machine ``m0`` with ``n_gpus`` GPUs; ``links`` are (a, b, bytes/s, latency s)."""
    m = MachineSpec("m0", (gpu,) * n_gpus, 64 * GiB, cores)
    return ClusterSpec(
        "test",
        (m,),
        tuple(LinkSpec(a, b, bw, lat, "other") for a, b, bw, lat in links),
        dict(switches or {}),
    )


@pytest.fixture(scope="session")
def h100() -> ClusterSpec:
    return load_hardware("h100-1x")


@pytest.fixture(scope="session")
def neugraph() -> ClusterSpec:
    return load_hardware("neugraph-8xp100-pcie")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
