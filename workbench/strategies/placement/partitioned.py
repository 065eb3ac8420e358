"""``partitioned``: each GPU holds its own partition's features; the others fetch from the owner.

DGL's distributed feature store (paper 002, "Analysis of DGL and PaGraph": DGL
"adopts METIS graph partitioning" and "assumes that the graph can be entirely
stored on multiple GPUs"): vertex ``v`` lives on GPU ``owner[v]`` and every other
GPU reads it from there, so all GPUs form one peer group.

When a partition exceeds the per-GPU capacity, the GPU keeps the partition's most
frequently accessed vertices and the rest stays in host memory: that is PaGraph's
variant, which "stores the graph on CPU and buffers the most frequently accessed
nodes of each partition on GPU" (same slide).

Which vertices of an overflowing partition stay is ``fill``: ``most-accessed``
(default, PaGraph's rule above) or ``random``, a uniformly random subset of the
partition (seeded by ``fill_seed``): a store that loads whatever rows of its part fit,
knowing nothing of access frequencies. Song & Jiang's slides do not say how their
random-partitioning baseline fills a GPU smaller than its part; ``random`` is the
alternative to PaGraph's rule that the ``placement`` study measures.

The owner array comes from the request or, if absent, from the partitioner named by
``partitioner`` (resolved through ``PARTITIONERS`` when placing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.errors import ConfigError
from workbench.registry import PARTITIONERS, PLACEMENTS
from workbench.strategies.placement.base import (
    Placement,
    PlacementRequest,
    PlacementResult,
    descending_order,
)
from workbench.strategies.placement.probability import request_probability

# How a GPU whose partition exceeds its cache picks the vertices it keeps.
FILLS = ("most-accessed", "random")


@PLACEMENTS.register("partitioned")
class PartitionedPlacement(Placement):
    """DGL-style: GPU g holds partition g's features (most-accessed first if it overflows); others fetch from it."""

    def __init__(
        self,
        partitioner: str | None = None,
        partitioner_params: dict[str, Any] | None = None,
        fill: str = "most-accessed",
        fill_seed: int = 0,
    ) -> None:
        if fill not in FILLS:
            raise ConfigError(f"partitioned placement: fill {fill!r}; allowed: {', '.join(FILLS)}")
        if isinstance(fill_seed, bool) or not isinstance(fill_seed, int) or fill_seed < 0:
            raise ConfigError(
                f"partitioned placement: fill_seed must be a non-negative integer, got {fill_seed!r}"
            )
        self.partitioner = partitioner
        self.partitioner_params = dict(partitioner_params or {})
        self.fill = fill
        self.fill_seed = fill_seed

    def owner_for(self, request: PlacementRequest) -> np.ndarray:
        if request.owner is not None:
            return np.asarray(request.owner, dtype=np.int64)
        if self.partitioner is None:
            raise ConfigError(
                "partitioned placement needs an owner array or a partitioner name "
                f"(partitioner=NAME; known: {', '.join(PARTITIONERS.names()) or 'none yet'})"
            )
        part = PARTITIONERS.create(self.partitioner, **self.partitioner_params)
        owner = np.asarray(part.partition(request.graph, request.num_gpus, request.rng).owner, dtype=np.int64)
        if owner.shape != (request.num_nodes,) or (
            owner.size and (owner.min() < 0 or owner.max() >= request.num_gpus)
        ):
            raise ConfigError(
                f"partitioner {self.partitioner!r} returned an owner array that is not one part per vertex"
            )
        return owner

    def place(self, request: PlacementRequest) -> PlacementResult:
        owner = self.owner_for(request)
        sizes = np.bincount(owner, minlength=request.num_gpus)
        cap = request.capacity
        if sizes.max(initial=0) <= cap:
            kept = np.ones(request.num_nodes, dtype=bool)
        else:
            # Stable order by probability (or a random order), then a stable sort by owner: each
            # partition's vertices, most accessed first; the first `cap` of each partition stay on its GPU.
            if self.fill == "random":
                by_prob = np.random.default_rng(self.fill_seed).permutation(request.num_nodes)
            else:
                by_prob = descending_order(request_probability(request))
            by_part = by_prob[np.argsort(owner[by_prob], kind="stable")]
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            rank_in_part = np.arange(request.num_nodes) - np.repeat(starts, sizes)
            kept = np.zeros(request.num_nodes, dtype=bool)
            kept[by_part[rank_in_part < cap]] = True
        home = np.where(kept, owner, -1).astype(np.int64)
        gpu_vertices = [np.flatnonzero(home == g).astype(np.int64) for g in range(request.num_gpus)]
        return PlacementResult(gpu_vertices=gpu_vertices, home=home)
