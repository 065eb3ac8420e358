"""partitioned placement's ``fill`` option: which vertices of an overflowing part a GPU keeps."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import PlacementRequest


def six_vertices() -> CSRGraph:
    src = np.array([1, 2, 3, 4, 5])
    dst = np.array([0, 0, 0, 1, 1])
    return CSRGraph.from_edges(src, dst, 6)


def _request(capacity: int) -> PlacementRequest:
    # Parts {0, 2, 4} and {1, 3, 5}; access probability falls with the vertex id.
    return PlacementRequest(
        graph=six_vertices(),
        num_gpus=2,
        capacity=capacity,
        owner=np.array([0, 1, 0, 1, 0, 1]),
        access_probability=np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]),
    )


def test_most_accessed_is_the_default_by_hand() -> None:
    result = PLACEMENTS.create("partitioned").place(_request(2))
    # Each GPU keeps the two most probable vertices of its part.
    assert [v.tolist() for v in result.gpu_vertices] == [[0, 2], [1, 3]]
    assert result.home.tolist() == [0, 1, 0, 1, -1, -1]


def test_random_fill_by_hand() -> None:
    # The fill order is default_rng(7).permutation(6); each part keeps its first two vertices in it.
    order = np.random.default_rng(7).permutation(6).tolist()
    expected = [sorted([v for v in order if v % 2 == g][:2]) for g in range(2)]
    result = PLACEMENTS.create("partitioned", fill="random", fill_seed=7).place(_request(2))
    assert [v.tolist() for v in result.gpu_vertices] == expected
    kept = set(expected[0]) | set(expected[1])
    assert result.home.tolist() == [v % 2 if v in kept else -1 for v in range(6)]


def test_random_fill_ignores_probability_and_keeps_whole_parts_that_fit() -> None:
    a = PLACEMENTS.create("partitioned", fill="random").place(_request(2))
    req = _request(2)
    flipped = PlacementRequest(
        graph=req.graph,
        num_gpus=2,
        capacity=2,
        owner=req.owner,
        access_probability=req.access_probability[::-1],
    )
    b = PLACEMENTS.create("partitioned", fill="random").place(flipped)
    assert [v.tolist() for v in a.gpu_vertices] == [v.tolist() for v in b.gpu_vertices]
    whole = PLACEMENTS.create("partitioned", fill="random").place(_request(3))
    assert [v.tolist() for v in whole.gpu_vertices] == [[0, 2, 4], [1, 3, 5]]


def test_bad_fill() -> None:
    with pytest.raises(ConfigError, match="fill"):
        PLACEMENTS.create("partitioned", fill="lowest-id")
    with pytest.raises(ConfigError, match="fill_seed"):
        PLACEMENTS.create("partitioned", fill="random", fill_seed=-1)
