"""``degree``: PaGraph's static cache of the highest-degree vertices.

PaGraph (Lin et al., SoCC 2020, section 4 "caching policy"; summarized in paper 002,
"Analysis of DGL and PaGraph") caches on every GPU the features of the vertices
that sampling reaches most often, and uses the degree as the cheap proxy for that.
The issue asks for the in-degree (``direction="in"``, the default); PaGraph ranks
by out-degree, i.e. how many vertices list ``v`` as an in-neighbor
(``direction="out"``). On the symmetric graphs the studies use the two coincide.
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

DIRECTIONS = ("in", "out")


@PLACEMENTS.register("degree")
class DegreePlacement(Placement):
    """PaGraph's static cache: every GPU holds the highest-degree vertices (ties by vertex id)."""

    def __init__(self, direction: str = "in") -> None:
        if direction not in DIRECTIONS:
            raise ConfigError(f"degree placement: direction {direction!r}; allowed: {', '.join(DIRECTIONS)}")
        self.direction = direction

    def place(self, request: PlacementRequest) -> PlacementResult:
        g = request.graph
        degree = g.in_degrees() if self.direction == "in" else g.out_degrees()
        top = descending_order(degree)[: request.capacity]
        return replicated_result(top, request.num_nodes, request.num_gpus)
