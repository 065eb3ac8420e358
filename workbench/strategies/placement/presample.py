"""``presample``: GNNLab's pre-sampling cache.

GNNLab (Yang et al., EuroSys 2022, section 4 "PreSC", the pre-sampling based caching
policy) runs the training sampler for a few epochs before training, counts how
often each vertex's features are read, and caches the most frequently read vertices
on every GPU. The frequency is
:func:`~workbench.strategies.placement.probability.presampled_probability`.
"""

from __future__ import annotations

from workbench.errors import ConfigError
from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import (
    Placement,
    PlacementRequest,
    PlacementResult,
    descending_order,
    replicated_result,
)
from workbench.strategies.placement.probability import presampled_probability


@PLACEMENTS.register("presample")
class PresamplePlacement(Placement):
    """GNNLab's cache: pre-sample ``epochs`` epochs, cache the most frequently read vertices on every GPU."""

    def __init__(self, epochs: int = 1, batch_size: int | None = None) -> None:
        if epochs < 1:
            raise ConfigError(f"presample placement: epochs must be >= 1, got {epochs}")
        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"presample placement: batch_size must be >= 1, got {batch_size}")
        self.epochs = epochs
        self.batch_size = batch_size

    def place(self, request: PlacementRequest) -> PlacementResult:
        sampler = request.access.sampler
        if sampler is None:
            raise ConfigError(
                "presample placement needs a sampler to pre-sample with (e.g. --sampler neighbor)"
            )
        frequency = presampled_probability(
            request.graph,
            sampler,
            batch_size=self.batch_size or request.access.batch_size,
            epochs=self.epochs,
            rng=request.rng,
        )
        top = descending_order(frequency)[: request.capacity]
        return replicated_result(top, request.num_nodes, request.num_gpus)
