"""Bad input gets a clear one-line error: fanouts, seeds, layer sizes, conflicting bulk-matrix arguments."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError, WorkbenchError
from workbench.graph.generators import erdos_renyi
from workbench.registry import SAMPLERS

from .conftest import SAMPLER_CONFIGS, build, graph_from_in_neighbors

FANOUT_SAMPLERS = ["neighbor", "locality-aware", "bulk-matrix"]


@pytest.mark.parametrize("name", FANOUT_SAMPLERS)
@pytest.mark.parametrize(
    "fanouts,match",
    [
        ([0], ">= 1"),
        ([5, -1], ">= 1"),
        ([], "at least one layer"),
        # Wrong types are caught by the declared parameter type before the sampler's own checks.
        ("15", "list of (positive )?integers"),
        ([1.5], "list of (positive )?integers"),
        ([True], "list of (positive )?integers"),
    ],
)
def test_bad_fanouts(name: str, fanouts: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        SAMPLERS.create(name, fanouts=fanouts)
    assert "fanouts" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["ladies", "fastgcn"])
def test_bad_layer_sizes(name: str) -> None:
    with pytest.raises(ConfigError, match="layer_sizes"):
        SAMPLERS.create(name, layer_sizes=[0])
    with pytest.raises(ConfigError, match="layer_sizes"):
        SAMPLERS.create("bulk-matrix", algorithm="ladies", layer_sizes=[-4])


def test_bad_num_layers() -> None:
    for bad in (0, -2, 1.0):
        with pytest.raises(ConfigError, match="num_layers"):
            SAMPLERS.create("full", num_layers=bad)


@pytest.mark.parametrize("config", sorted(SAMPLER_CONFIGS))
def test_seeds_outside_graph(config: str) -> None:
    graph = erdos_renyi(20, 3.0, seed=0)
    sampler = build(config)
    if config == "locality-aware":
        sampler = sampler.with_cached(np.arange(3))
    for bad in ([0, 20], [-1]):
        with pytest.raises(WorkbenchError, match="outside graph"):
            sampler.sample(graph, np.array(bad), np.random.default_rng(0))
        with pytest.raises(WorkbenchError, match="outside graph"):
            sampler.sample_many(graph, [np.array([1]), np.array(bad)], np.random.default_rng(0))


def test_duplicate_seeds() -> None:
    graph = erdos_renyi(20, 3.0, seed=0)
    with pytest.raises(WorkbenchError, match="duplicate"):
        build("neighbor").sample(graph, np.array([1, 1]), np.random.default_rng(0))


@pytest.mark.parametrize(
    "name,params",
    [
        ("ladies", {}),
        ("bulk-matrix", {"algorithm": "ladies"}),
        ("bulk-matrix", {"algorithm": "ladies", "spgemm": "torch"}),
    ],
    ids=["ladies", "bulk-matrix-ladies", "bulk-matrix-ladies-torch"],
)
def test_ladies_layer_larger_than_neighborhood(name: str, params: dict) -> None:
    # Vertex 0's aggregated neighborhood with itself: {0, 1, 2}.
    graph = graph_from_in_neighbors([[1, 2], [], [], [4], []])
    sampler = SAMPLERS.create(name, layer_sizes=[4], **params)
    with pytest.raises(WorkbenchError, match=r"asks for 4 vertices .* only 3") as info:
        sampler.sample(graph, np.array([0]), np.random.default_rng(0))
    assert "layer_sizes[0]" in str(info.value)
    # Exactly the neighborhood is fine.
    SAMPLERS.create(name, layer_sizes=[3], **params).sample(graph, np.array([0]), np.random.default_rng(0))


def test_fastgcn_layer_larger_than_graph() -> None:
    graph = graph_from_in_neighbors([[1], [], []])
    with pytest.raises(WorkbenchError, match="asks for 4 vertices"):
        SAMPLERS.create("fastgcn", layer_sizes=[4]).sample(graph, np.array([0]), np.random.default_rng(0))


def test_bulk_matrix_conflicting_arguments() -> None:
    with pytest.raises(ConfigError, match="unknown algorithm 'sage'; allowed: graphsage, ladies"):
        SAMPLERS.create("bulk-matrix", algorithm="sage", fanouts=[2])
    with pytest.raises(ConfigError, match="unknown spgemm 'cusparse'; allowed: fused, scipy, torch"):
        SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="cusparse")
    with pytest.raises(
        ConfigError, match="spgemm='auto' is gone .it followed the machine.; name the back end"
    ):
        SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="auto")
    with pytest.raises(
        ConfigError, match="torch_device='cuda' belongs to spgemm='torch' .spgemm is 'fused'."
    ):
        SAMPLERS.create("bulk-matrix", fanouts=[2], torch_device="cuda")
    with pytest.raises(ConfigError, match="torch_device 'gpu0' is not a torch device name"):
        SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="torch", torch_device="gpu0")
    with pytest.raises(ConfigError, match="torch_device must be a (string|device name)"):
        SAMPLERS.create("bulk-matrix", fanouts=[2], spgemm="torch", torch_device=0)
    with pytest.raises(ConfigError, match="needs fanouts"):
        SAMPLERS.create("bulk-matrix")
    with pytest.raises(ConfigError, match="layer_sizes belongs to algorithm='ladies'"):
        SAMPLERS.create("bulk-matrix", fanouts=[2], layer_sizes=[3])
    with pytest.raises(ConfigError, match="fanouts belongs to algorithm='graphsage'"):
        SAMPLERS.create("bulk-matrix", algorithm="ladies", fanouts=[2], layer_sizes=[3])
    with pytest.raises(ConfigError, match="needs layer_sizes"):
        SAMPLERS.create("bulk-matrix", algorithm="ladies")
    with pytest.raises(ConfigError, match="spgemm='fused'"):
        SAMPLERS.create("bulk-matrix", algorithm="ladies", layer_sizes=[3], spgemm="fused")
    with pytest.raises(ConfigError, match="bulk must be a positive integer"):
        SAMPLERS.create("bulk-matrix", fanouts=[2], bulk=0)
    with pytest.raises(ConfigError, match="unknown parameter"):
        SAMPLERS.create("neighbor", fanouts=[2], fanout=3)
